"""Paths a user types, when the app runs as a server: confined to ``$PROBING_LAB_ALLOWED_ROOTS`` (and
the checkout) when that is set; ``$PROBING_LAB_NO_RUNS`` turns off the forms that start runs
(``probing-lab app --allowed-root DIR --no-runs``, app/launch.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from probing_lab.paths import REPO_ROOT

ALLOWED_ROOTS_ENV = "PROBING_LAB_ALLOWED_ROOTS"  # `probing-lab app --allowed-root DIR`: folders, os.pathsep-separated

NO_RUNS_ENV = "PROBING_LAB_NO_RUNS"  # `probing-lab app --no-runs`: no form that starts probe runs


def allowed_roots() -> Optional[list[Path]]:
    """The folders the path fields may name, resolved: ``$PROBING_LAB_ALLOWED_ROOTS`` plus the checkout
    (``REPO_ROOT``, with the shipped model and the probe results); None when it is not set (any path)."""
    folders = [f.strip() for f in os.environ.get(ALLOWED_ROOTS_ENV, "").split(os.pathsep) if f.strip()]
    if not folders:
        return None
    return [Path(f).expanduser().resolve() for f in folders] + [REPO_ROOT.resolve()]


def allowed_path(text: str | Path) -> Path:
    """The path a user typed, checked against :func:`allowed_roots` after resolving symlinks and ``..``;
    raises ``ValueError`` with a message fit to show. Without confinement the path comes back as typed
    (``~`` expanded); with it, resolved, so that what is read is what was checked."""
    raw = str(text).strip()
    shown = raw if len(raw) <= 120 else raw[:117] + "…"  # a pasted page of text is not repeated back
    try:
        path = Path(raw).expanduser()
        path.exists()  # a name too long for the file system raises here, not later in a page
        roots = allowed_roots()
        if roots is None:
            return path
        resolved = path.resolve()
    except (OSError, RuntimeError, ValueError) as e:  # "~nobody", a NUL byte, a symlink loop, a long name
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)[:200]
        raise ValueError(f"Not a usable path: {shown!r} ({reason})") from None
    if any(resolved == root or resolved.is_relative_to(root) for root in roots):
        return resolved
    raise ValueError(
        f"{shown} is outside the folders this server allows (${ALLOWED_ROOTS_ENV}: "
        + ", ".join(str(r) for r in roots)
        + "). Choose a path inside one of them."
    )


def runs_allowed() -> bool:
    """False when ``$PROBING_LAB_NO_RUNS`` is set (to anything but empty, 0, false or no)."""
    return os.environ.get(NO_RUNS_ENV, "").strip().lower() in ("", "0", "false", "no")
