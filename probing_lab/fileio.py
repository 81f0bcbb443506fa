"""File helpers shared by the library: the one writer rule, content hashes, archive members.

Every command writes its files through :func:`atomic_path` (a file) or :func:`atomic_directory`
(a whole folder) after :func:`check_output` / :func:`check_output_dir` have checked the path before
any work. The rule:

- an output that is the same file as an input (also through a link or a hard link), or a folder
  that holds an input, is refused (:func:`refuse_same_file`);
- an existing output file is refused unless the command's ``--force`` is given;
- an output folder (:func:`check_output_dir`) that is missing or empty is written; one that holds
  an earlier run of the same command and nothing else (the run's marker file lists what it wrote;
  a run from before the marker is recognised by its file names) is refused unless ``--force``,
  which replaces it as a whole; any other non-empty folder holds the user's own files: it is
  refused unless ``--force``, which writes the run into a new subfolder of it, so that nothing the
  lab did not write is ever removed or replaced;
- a regular file is written to a temporary file next to it and renamed into place, so an
  interrupted write leaves the old file or nothing; through a symbolic link, the file the link
  points to is replaced and the link stays;
- a device, FIFO or socket (``/dev/null``, ``/dev/stdout``, ``/dev/fd/N``, a named pipe) is never
  renamed over: the output is written to a temporary file elsewhere and then copied into it in
  place (so a device gets whole output or an error, e.g. ``/dev/full``: no space left).
"""

from __future__ import annotations

import fnmatch
import hashlib
import io
import json
import os
import re
import shutil
import stat
import tarfile
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


class OutputError(ValueError):
    """An output path that would destroy or misplace data: an input, an existing file without
    ``--force``, a path outside its folder."""


_STREAM = re.compile(r"/dev/(stdin|stdout|stderr|fd/\d+)|/proc/(self|\d+)/fd/\d+")


def is_stream(path: str | Path) -> bool:
    """True for an output written in place, never renamed over: a device, FIFO or socket (also
    through links, e.g. ``/dev/null``), and the process's own streams ``/dev/stdout``, ``/dev/fd/N``
    (whatever the shell redirected them to)."""
    if _STREAM.fullmatch(os.path.abspath(path)):
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _inside(path: str | Path, folder: str | Path) -> bool:
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(folder))


def refuse_same_file(output: str | Path, *inputs: str | Path | None, option: str = "--output") -> None:
    """Raise :class:`OutputError` when ``output`` is one of ``inputs`` (the same file, also through
    a symbolic or hard link) or a folder that holds one of them. ``None`` inputs are skipped."""
    output = Path(output)
    if is_stream(output) or not output.exists():
        return
    for given in inputs:
        if given is None or not Path(given).exists():
            continue
        if os.path.samefile(output, given):
            how = "" if os.path.abspath(output) == os.path.abspath(given) else " (through a link)"
            raise OutputError(
                f"{option} {output} is the input {given}{how}: writing it would destroy the input; give another path"
            )
        if output.is_dir() and _inside(given, output):
            raise OutputError(
                f"{option} {output} holds the input {given}: replacing the folder would destroy it; give another folder"
            )


def check_output(path: str | Path, *inputs: str | Path | None, force: bool = False, option: str = "--output") -> Path:
    """Check an output file before any work: not a folder, not one of ``inputs``, and not an
    existing file unless ``force``. Devices and FIFOs (``/dev/null``, ``/dev/stdout``) pass: they
    are written in place."""
    path = Path(path)
    refuse_same_file(path, *inputs, option=option)
    if is_stream(path):
        return path
    if path.is_dir():
        raise IsADirectoryError(f"{option} {path} is a folder; give a file name")
    if path.exists() and not force:
        raise OutputError(f"{option} {path} already exists; pass --force to replace it, or give another name")
    parent = next((p for p in path.absolute().parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise NotADirectoryError(f"{option} {path}: {parent} is a file, not a folder")
    return path


RUN_MARKER = ".probing-lab-run.json"  # in every folder a command writes as a whole: the command, its files


def _run_of(folder: Path, command: str, names: tuple[str, ...]) -> bool:
    """True when ``folder`` holds a run of ``command`` and nothing else: every entry is one its
    marker lists, or (a run written before the marker) matches one of ``names`` (glob patterns)."""
    entries = {p.name for p in folder.iterdir()} - {RUN_MARKER}
    marker = folder / RUN_MARKER
    if marker.is_file():
        try:
            record = json.loads(marker.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            return False
        return isinstance(record, dict) and record.get("command") == command and entries <= set(record.get("files", []))
    return bool(names) and all(any(fnmatch.fnmatchcase(e, n) for n in names) for e in entries)


def check_output_dir(
    path: str | Path,
    *inputs: str | Path | None,
    command: str,
    force: bool = False,
    option: str = "--out",
    names: tuple[str, ...] = (),
    fresh: str = "",
    resumable: bool = False,
) -> Path:
    """The folder to write a run of ``command`` into, checked before any work (the rule of this
    module): not a file, not holding one of ``inputs``; ``path`` itself when it is missing or empty,
    or when it holds only an earlier run of ``command`` and ``force`` is given (it is then replaced
    as a whole by :func:`atomic_directory`); a new subfolder ``FRESH-STAMP`` of it (``fresh``
    defaults to the command's name) when it holds other files and ``force`` is given. ``names``:
    the file names (glob patterns) of the command's runs written before the run marker existed.
    ``resumable``: an earlier run is ``path`` itself, to be continued (the command checks it is the
    same run), with or without ``force``."""
    path = Path(path)
    refuse_same_file(path, *inputs, option=option)
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(f"{option} {path} is a file; give a folder")
    if not path.is_dir() or not any(path.iterdir()):
        return path
    if _run_of(path, command, names):
        if force or resumable:
            return path
        raise OutputError(
            f"{option} {path} holds an earlier run of `probing-lab {command}`; pass --force to replace it, "
            "or give another folder"
        )
    if not force:
        shown = sorted(p.name for p in path.iterdir())
        listing = ", ".join(shown[:5]) + (f" and {len(shown) - 5} more" if len(shown) > 5 else "")
        raise OutputError(
            f"{option} {path} is not empty and is not a run of `probing-lab {command}` (it holds {listing}); "
            "nothing was written. Give a new or empty folder, or pass --force to write the run into a new "
            "subfolder of it (your files are left as they are)"
        )
    stem = fresh or command.replace(" ", "-")
    sub = path / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    n = 1
    while sub.exists():
        n += 1
        sub = path / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}-{n}"
    return sub


def check_name(name: str, what: str = "name") -> str:
    """A name that becomes part of a path (experiment, run): letters, digits, ``-``, ``_`` and
    ``.``; no path separators, not ``.`` or ``..``."""
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9._-]+", name) or name in (".", ".."):
        raise OutputError(
            f"{what} {name!r} is not a valid name: use letters, digits, '-', '_' and '.' only "
            "(no path separators, not '.' or '..')"
        )
    return name


def check_inside(path: str | Path, root: str | Path, what: str = "output") -> Path:
    """``path`` itself, after checking that it resolves to a place under ``root``."""
    if not _inside(path, root):
        raise OutputError(f"{what} {path} would be outside {root}; refusing to write there")
    return Path(path)


def read_utf8(path: str | Path) -> str:
    """The text of a UTF-8 file; bytes that are not UTF-8 are a ValueError naming the file and line."""
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise ValueError(f"{path}, line {line}: not UTF-8 ({e.reason}); save the file as UTF-8 text") from None


def _remove_stale_temporaries(path: Path) -> None:
    """Temporary files (or folders) of ``path`` left by writers that were killed (kill -9 runs no
    cleanup): their name holds the writer's process id, and a process that no longer exists will
    not finish them."""
    for stale in path.parent.glob(f".{path.name}.*.tmp"):
        pid = stale.name[len(path.name) + 2 :].split(".", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            if stale.is_dir() and not stale.is_symlink():
                shutil.rmtree(stale, ignore_errors=True)
            else:
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
def _in_place(path: Path) -> Iterator[Path]:
    """A temporary file in the system's temporary folder, copied into the device or FIFO ``path``
    on success (never renamed over it)."""
    fd, name = tempfile.mkstemp(prefix="probing-lab-", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        try:
            with open(tmp, "rb") as src, open(path, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        except OSError as e:
            raise OutputError(f"{path}: cannot be written ({e.strerror or e})") from None
    finally:
        tmp.unlink(missing_ok=True)


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it into place only on success, so an
    interrupted write never leaves a half-written file where a good one was. The file gets the
    permissions the umask gives new files (not mkstemp's 0600). A device or FIFO is written in
    place instead, and a symbolic link is followed (the file it points to is replaced); see the
    module's docstring."""
    path = Path(path)
    if is_stream(path):
        with _in_place(path) as tmp:
            yield tmp
        return
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder; give a file name")
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


@contextmanager
def atomic_directory(path: str | Path, command: str | None = None, keep: tuple[str, ...] = ()) -> Iterator[Path]:
    """Yield a new temporary folder next to ``path``; on success it replaces ``path`` as a whole
    (what was there is removed, never mixed with the new files). On failure nothing changes.
    ``command``: the folder gets the run marker naming it and the files written (see
    :func:`check_output_dir`). ``keep``: entries of the old folder moved into the new one (the
    inputs a run was staged with, e.g. an upload in ``data/``)."""
    path = Path(path)
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(f"{path} is a file; give a folder")
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temporaries(path)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp"))
    try:
        yield tmp
        for name in keep:
            if (path / name).exists() and not (tmp / name).exists():
                os.replace(path / name, tmp / name)
        if command is not None:
            files = sorted(p.name for p in tmp.iterdir())
            (tmp / RUN_MARKER).write_text(json.dumps({"command": command, "files": files}) + "\n", encoding="utf-8")
        os.chmod(tmp, 0o777 & ~_umask())
        if path.exists():
            old = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}.", suffix=".old"))
            os.replace(path, old)  # an empty folder is renamed over
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


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
