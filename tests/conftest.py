import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# A biLM small enough to train in a test (options.json form)
TINY_MODEL = {
    "lstm": {
        "dim": 16,
        "projection_dim": 8,
        "n_layers": 2,
        "cell_clip": 3,
        "proj_clip": 3,
        "use_skip_connections": True,
    },
    "char_cnn": {
        "embedding": {"dim": 4},
        "filters": [[1, 4], [2, 4]],
        "n_highway": 1,
        "n_characters": 262,
        "max_characters_per_token": 50,
        "activation": "relu",
    },
}


@pytest.fixture(autouse=True)
def _same_random_numbers_every_run():
    """Each test starts from torch's and numpy's generators seeded alike, so a model a test builds
    without a seed is the same on every machine and a failure in CI reproduces here."""
    import numpy as np
    import torch

    torch.manual_seed(0)
    np.random.seed(0)


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


# --- Streamlit AppTest helpers (tests/test_app.py, tests/test_server.py) -------------------------


def ok(at):
    """The AppTest after a run that raised nothing (the exceptions are shown when it did)."""
    assert not at.exception, [e.value for e in at.exception]
    return at


def widget(at, kind: str, label: str):
    """The page's one ``kind`` widget (``"multiselect"``, ``"selectbox"``, ...) whose label starts
    with ``label``: for widgets whose key names what their options depend on (``lab_ui.key_on``)."""
    found = [w for w in getattr(at, kind) if w.label.startswith(label)]
    assert len(found) == 1, f"{len(found)} {kind} widgets labelled {label!r}"
    return found[0]


def texts(elements) -> str:
    return "\n".join(str(e.value) for e in elements)


def write_vectors(folder: Path, words: list[str], dim: int, seed: int = 0):
    """A static vectors folder of ``words`` (N(0, 0.25) rows); returns the matrix."""
    import numpy as np
    from safetensors.numpy import save_file

    from probing_lab.static.word2vec import TENSOR_KEY, VECTORS_FILE, VOCAB_FILE

    folder.mkdir(parents=True)
    matrix = np.random.default_rng(seed).normal(0, 0.25, (len(words), dim)).astype(np.float32)
    save_file({TENSOR_KEY: matrix}, str(folder / VECTORS_FILE))
    (folder / VOCAB_FILE).write_text("".join(w + "\n" for w in words), encoding="utf-8")
    return matrix


def markdown_table(at, i: int = 0):
    """The i-th table drawn with ``lab_ui.markdown_table``, as a DataFrame of strings."""
    import re

    import pandas as pd

    tables = [m.value for m in at.markdown if m.value.startswith("| ") and "\n|---|" in m.value]
    lines = tables[i].split("\n")

    def cells(line):
        parts = re.split(r"(?<!\\)\|", line)[1:-1]
        return [re.sub(r"\\(.)", r"\1", c.strip()) for c in parts]

    return pd.DataFrame([cells(line) for line in lines[2:]], columns=cells(lines[0]))
