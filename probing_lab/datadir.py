"""Where the lab looks for datasets the user brings (UD treebanks, WSD sets, ...)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

ENV_VAR = "PROBING_LAB_DATA"


def data_dir(explicit: Optional[str | Path] = None) -> Optional[Path]:
    """``--data-dir`` if given, else ``$PROBING_LAB_DATA``; None when neither is set."""
    value = explicit or os.environ.get(ENV_VAR)
    return Path(value).expanduser() if value else None
