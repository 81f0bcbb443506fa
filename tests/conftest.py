import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def shared_dir() -> Path | None:
    for candidate in (os.environ.get("PROBING_LAB_SHARED"), ROOT.parent / "shared", "/work/shared"):
        if candidate and (Path(candidate) / "fixtures").is_dir():
            return Path(candidate)
    return None


@pytest.fixture(scope="session")
def golden() -> Path:
    shared = shared_dir()
    if shared is None:
        pytest.skip("golden fixture not found: set PROBING_LAB_SHARED to the team's shared/ folder")
    return shared / "fixtures" / "elmo-tf-reference"
