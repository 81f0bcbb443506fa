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


def _remove_stale_temporaries(path: Path) -> None:
    """Temporary files of ``path`` left by writers that were killed (kill -9 runs no cleanup): their
    name holds the writer's process id, and a process that no longer exists will not finish them."""
    for stale in path.parent.glob(f".{path.name}.*.tmp"):
        pid = stale.name[len(path.name) + 2 :].split(".", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            stale.unlink(missing_ok=True)


def _umask() -> int:
    """The process's umask, read without changing it where the system allows (os.umask sets it, and
    setting it back and forth races with other threads, e.g. Streamlit's)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it into place only on success, so an
    interrupted write never leaves a half-written file where a good one was. The file gets the
    permissions the umask gives new files (not mkstemp's 0600)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temporaries(path)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        if tmp.is_file():
            os.chmod(tmp, 0o666 & ~_umask())
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
