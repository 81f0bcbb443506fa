"""The user's own labelled file on the Probes and Polysemy pages: where it comes from (a path on the
server, confined like every path field by :func:`allowed_paths.allowed_path`, or an upload), its format,
and what it holds (:func:`probing_lab.datasets.summary.summarise_file`), with every bad input (a path
outside the allowed folders, a missing or empty file, a malformed line, not UTF-8) turned into an
``st.error`` that names the problem.

An upload is read from a temporary copy (:func:`local_copy`, removed after reading) until a probe run
starts on it: the Probes page then writes it into that run's own folder under the runs area
(:func:`stage_upload`, ``RUN/data/FILE``), so that the run directory holds the file it was run on and
nothing lands in the checkout. The Polysemy page keeps only what it shows.
"""

from __future__ import annotations

import re
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

import allowed_paths
import streamlit as st

from probing_lab.datasets.files import FORMATS
from probing_lab.datasets.summary import FileSummary, guess_format, summarise_file

FORMAT_HELP = {
    "conllu": "CoNLL-U (UD): 10 tab-separated columns per token; the label is a column or a feature",
    "tokens": "token<TAB>label per line, a blank line between sentences; label _ = unlabelled",
    "wic": "sentence<TAB>index<TAB>label[<TAB>group]: one target per line, index 0-based",
    "sentences": "sentence<TAB>label per line: one label per sentence",
    "spans": 'JSON Lines: {"tokens": [...], "span1": [start, end], "label": "..."}',
}
HOW = ("A path on the server", "Upload a file")
SHOWN_LABELS = 200  # rows of the label table; the caption says when there are more


@dataclass(frozen=True)
class Picked:
    """A file the user chose: a checked path on the server, or an upload's name and bytes."""

    name: str
    path: Optional[Path] = None
    data: Optional[bytes] = None
    upload_id: Optional[str] = None

    @property
    def identity(self) -> str:
        """Changes when another file is chosen (the format guess follows it)."""
        return f"upload:{self.upload_id}" if self.upload_id else f"path:{self.path}"


def safe_name(name: str) -> str:
    """An upload's file name fit to write: its last component, letters, digits, ``-``, ``_`` and ``.``."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", Path(name.replace("\\", "/")).name).strip(".")
    return name or "upload.txt"


def pick_file(key: str, kinds: str = "labelled file") -> Optional[Picked]:
    """A path field or an upload (the user's choice); None, with a note or an error shown, until
    there is a file to read."""
    how = st.radio("Where is the file?", HOW, horizontal=True, key=f"{key}_how")
    if how == HOW[1]:
        upload = st.file_uploader(f"Your {kinds}", key=f"{key}_upload")
        if upload is None:
            st.info(f"Upload your {kinds} (UTF-8 text).")
            return None
        return Picked(upload.name, data=upload.getvalue(), upload_id=upload.file_id)
    roots = allowed_paths.allowed_roots()
    text = st.text_input(
        f"Path of your {kinds} on the server",
        "",
        key=f"{key}_path",
        help="A file on the machine that runs the app"
        + (f"; inside {', '.join(str(r) for r in roots)}" if roots else "")
        + ".",
    )
    if not text.strip():
        st.info(f"Type the path of your {kinds}, or upload it.")
        return None
    try:
        path = allowed_paths.allowed_path(text)
    except ValueError as e:
        st.error(str(e))
        return None
    if not path.is_file():
        st.error(f"{path}: no such file" + (" (it is a folder)" if path.is_dir() else ""))
        return None
    return Picked(path.name, path=path)


def format_choice(picked: Picked, key: str, formats=FORMATS) -> Optional[str]:
    """The format, guessed from the extension (``.conllu``, ``.jsonl``) each time another file is
    chosen, else asked; None until chosen."""
    guess = guess_format(picked.name)
    if st.session_state.get(f"{key}_for") != picked.identity:  # another file: its own guess
        st.session_state[f"{key}_for"] = picked.identity
        st.session_state[key] = guess if guess in formats else None
    fmt = st.selectbox(
        "Format",
        list(formats),
        key=key,  # its value is set above (the guess, or None: nothing chosen yet)
        placeholder="Choose the format",
        format_func=lambda f: f"{f}: {FORMAT_HELP.get(f, '')}",
        help="Guessed from the extension for .conllu and .jsonl; a .tsv or .txt file could be tokens, wic "
        "or sentences.",
    )
    if fmt is None:
        st.info(f"Choose the format of {picked.name}.")
    return fmt


@st.cache_data(show_spinner="Reading the file…", max_entries=32)
def _summary(
    name: str, path: Optional[str], data: Optional[bytes], fmt: str, label: Optional[str], stamp
) -> FileSummary:
    with local_copy(name, path, data) as local:  # stamp: a file changed on disk is read again
        return summarise_file(local, fmt, label)


def summary(picked: Picked, fmt: str, label: Optional[str] = None) -> Optional[FileSummary]:
    """What the file holds, or None with an error naming the problem (the reader's own message)."""
    try:
        stamp = None
        if picked.path is not None:
            stat = picked.path.stat()
            stamp = (stat.st_mtime_ns, stat.st_size)
        path = None if picked.path is None else str(picked.path)
        return _summary(picked.name, path, picked.data, fmt, label, stamp)
    except (ValueError, OSError) as e:  # DatasetFormatError is a ValueError; FileNotFoundError an OSError
        st.error(str(e))
        return None


def show_labels(found: FileSummary) -> None:
    """The label table and a caption with the counts."""
    what = found.what.removeprefix("labelled ")
    caption = (
        f"{found.sentences:,} sentence(s), {found.tokens:,} tokens; {found.labelled:,} labelled {what}(s) "
        f"in {len(found.labels):,} label(s)"
    )
    if found.unlabelled:
        caption += f"; {found.unlabelled:,} token(s) without a label (skipped)"
    if found.groups:
        several = sum(1 for senses in found.groups.values() if len(senses) > 1)
        caption += f"; {len(found.groups):,} group(s), {several:,} with two labels or more"
    if len(found.labels) > SHOWN_LABELS:
        caption += f"; the {SHOWN_LABELS} most frequent labels are shown"
    st.dataframe(found.rows(SHOWN_LABELS), hide_index=True)
    st.caption(caption)


@contextmanager
def local_copy(name: str, path: Optional[str], data: Optional[bytes]) -> Iterator[Path]:
    """A path to read: the file's own, or an upload written to a temporary folder (removed after).
    Errors raised inside name the upload by its name, not by the temporary path."""
    if data is None:
        yield Path(path)
        return
    with tempfile.TemporaryDirectory(prefix="probing-lab-upload-") as folder:
        local = Path(folder) / safe_name(name)
        local.write_bytes(data)
        try:
            yield local
        except (ValueError, OSError) as e:
            message = str(e).replace(str(local), name)
            try:
                renamed = type(e)(message)
            except TypeError:  # an error class with more arguments: its message, as a ValueError
                renamed = ValueError(message)
            raise renamed from None


def new_run_dir(root: Path, name: str) -> Path:
    """``root/NAME-YYYYmmdd-HHMMSS``, with ``-2``, ``-3``, ... when that folder exists already."""
    import time

    base = f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
    run_dir, n = root / base, 1
    while run_dir.exists():
        n += 1
        run_dir = root / f"{base}-{n}"
    return run_dir


def stage_upload(picked: Picked, root: Path) -> tuple[Path, Path]:
    """Write an upload into the folder of the run it is about to be probed in and return (that run
    folder, ``RUN/data/FILE``): the run directory then holds the very file its ``metrics.json``
    records (path, size, SHA-256). Nothing is written before the run starts."""
    from probing_lab.probing.own_data import default_name

    name = safe_name(picked.name)
    run_dir = new_run_dir(root, default_name(name))
    path = run_dir / "data" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(picked.data)
    return run_dir, path
