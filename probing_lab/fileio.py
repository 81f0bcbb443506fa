"""File helpers shared by the library: atomic writes and content hashes."""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it into place only on success, so an
    interrupted write never leaves a half-written file where a good one was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def deb_members(path: str | Path) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) of every file in a Debian package: an ``ar`` archive holding ``data.tar.*``.
    Raises ValueError when the file is not one."""
    raw = Path(path).read_bytes()
    if not raw.startswith(b"!<arch>\n"):
        raise ValueError(f"{path}: not a Debian package (no 'ar' header)")
    pos = 8
    while pos + 60 <= len(raw):  # ar members: 60-byte header (name 16, ..., size at 48:58), body padded to even
        name = raw[pos : pos + 16].decode().strip().rstrip("/")
        size = int(raw[pos + 48 : pos + 58].decode().strip())
        if name.startswith("data.tar"):
            with tarfile.open(fileobj=io.BytesIO(raw[pos + 60 : pos + 60 + size])) as tar:
                for member in tar.getmembers():
                    if member.isfile():
                        yield member.name, tar.extractfile(member).read()
        pos += 60 + size + size % 2
