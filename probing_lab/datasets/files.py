"""Readers for the user's own labelled files (``[dataset] format = ...`` in an experiment).

Every reader takes a UTF-8 path and yields ``(line, Sentence)``: the 1-based line number of the
sentence's first line and the sentence, one at a time, reading the file line by line. Any
malformed line is a :class:`DatasetFormatError` naming the file, the line and what was expected.
Lines starting with ``#`` are comments (in CoNLL-U: CoNLL-U comments, ``# sent_id`` kept).

Formats and where the label goes:

* ``conllu``: any UD 2.x CoNLL-U (multiword ranges and empty nodes skipped); ``label`` = ``upos`` |
  ``xpos`` | ``deprel`` | ``feats:NAME`` | ``misc:NAME`` (default ``upos``) is put in
  ``Token.extra["token_label"]``; a token without it is unlabelled. UPOS, HEAD, ... are kept, so
  the registry's token tasks, ``dep_arc`` and the structural probes run on it too.
* ``tokens``: ``token<TAB>label`` per line, a blank line between sentences; label ``_`` =
  unlabelled. The label goes in ``Token.extra["token_label"]``.
* ``wic``: ``sentence<TAB>index<TAB>label[<TAB>group]``, one example per line: the sentence split on
  whitespace, ``index`` the 0-based target position. The target token gets ``sense = label`` and
  ``lemma = group`` (default: the target lowercased), which is what the WSD tasks read.

* ``sentences``: ``sentence<TAB>label`` per line, the sentence split on whitespace; the label goes in
  ``Sentence.label`` (the ``sentence_label`` task); :func:`iter_sentence_file` yields
  ``(line, Sentence, label)``.

* ``spans``: JSON Lines, ``{"tokens": [...], "span1": [start, end], "span2": [start, end],
  "label": "..."}`` (end exclusive, ``span2`` optional, other keys ignored), the ``span_label``
  task; :func:`read_span_file` returns the distinct sentences, each once with its examples in
  ``Sentence.spans`` (:class:`LabelledSpan`). Examples of one sentence may be anywhere in the file,
  so this reader holds the whole file (the others stream).

A sentence longer than ``max_tokens`` (default :data:`MAX_TOKENS`) is refused with its line: in
practice it is a ``tokens`` file whose blank lines are missing, and it would not fit a probe's batch.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Iterator

from .conllu import iter_conllu
from .records import DatasetFormatError, LabelledSpan, Sentence, Token

FORMATS = ("conllu", "tokens", "wic", "sentences", "spans")
MAX_TOKENS = 1000
UNLABELLED = "_"


def file_record(path: str | Path) -> dict:
    """A file's resolved path, size in bytes and SHA-256 (read in 1 MiB chunks)."""
    path = Path(path).resolve()
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return {"path": str(path), "bytes": path.stat().st_size, "sha256": digest.hexdigest()}


def _lines(path: Path) -> Iterator[str]:
    """The file's lines without their line ends, decoded one at a time (a BOM at the start dropped)."""
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise DatasetFormatError(
                    f"{path}:{lineno}: not UTF-8 ({e.reason} at byte {e.start}); save the file as UTF-8 text"
                ) from None
            if lineno == 1:
                line = line.removeprefix("\ufeff")
            yield line.rstrip("\r\n")


def _too_long(path: Path, start: int, lineno: int, max_tokens: int) -> DatasetFormatError:
    return DatasetFormatError(
        f"{path}:{start}: the sentence that starts here has more than {max_tokens} tokens (at line {lineno}); "
        "in a tokens file sentences are separated by blank lines (one missing?); for longer sentences "
        "raise max_tokens in [dataset]"
    )


def _field(path: Path, lineno: int, what: str, value: str) -> str:
    """A column's value: not empty, without surrounding or inner whitespace."""
    if not value or value != value.strip() or any(c.isspace() for c in value):
        raise DatasetFormatError(
            f"{path}:{lineno}: expected a {what} without spaces, got {value!r} (tabs and spaces mixed?)"
        )
    return value


def _tokens(path: Path, max_tokens: int) -> Iterator[tuple[int, Sentence]]:
    tokens: list[Token] = []
    start = 0
    for lineno, line in enumerate(_lines(path), 1):
        if not line.strip():
            if tokens:
                yield start, Sentence(tokens, f"{path.name}:{start}", path.name)
            tokens = []
            continue
        if line.startswith("#"):
            continue
        cols = line.split("\t")
        if len(cols) != 2:
            hint = " (spaces where the tab belongs?)" if len(cols) == 1 and " " in line.strip() else ""
            raise DatasetFormatError(
                f"{path}:{lineno}: expected token<TAB>label (2 tab-separated columns), got {len(cols)}{hint}: "
                f"{line[:80]!r}"
            )
        form, label = _field(path, lineno, "token", cols[0]), _field(path, lineno, "label", cols[1])
        if not tokens:
            start = lineno
        if len(tokens) >= max_tokens:
            raise _too_long(path, start, lineno, max_tokens)
        tokens.append(Token(form=form, extra={} if label == UNLABELLED else {"token_label": label}))
    if tokens:
        yield start, Sentence(tokens, f"{path.name}:{start}", path.name)


def _rows(path: Path, counts: tuple[int, ...], expected: str) -> Iterator[tuple[int, list[str]]]:
    """(line number, tab-separated columns) of a file with one example a line; blank lines and ``#``
    comments skipped, a line with another number of columns an error naming it."""
    for lineno, line in enumerate(_lines(path), 1):
        if not line.strip() or line.startswith("#"):
            continue
        cols = line.split("\t")
        if len(cols) not in counts:
            hint = " (spaces where tabs belong?)" if len(cols) < min(counts) and " " in line else ""
            raise DatasetFormatError(
                f"{path}:{lineno}: expected {expected} ({' or '.join(map(str, counts))} tab-separated columns), "
                f"got {len(cols)}{hint}: {line[:80]!r}"
            )
        yield lineno, cols


def _sentence_words(path: Path, lineno: int, text: str, max_tokens: int) -> list[str]:
    words = text.split()
    if not words:
        raise DatasetFormatError(f"{path}:{lineno}: expected a sentence in the first column, got nothing")
    if len(words) > max_tokens:
        raise _too_long(path, lineno, lineno, max_tokens)
    return words


def _wic(path: Path, max_tokens: int) -> Iterator[tuple[int, Sentence]]:
    for lineno, cols in _rows(path, (3, 4), "sentence<TAB>index<TAB>label[<TAB>group]"):
        words = _sentence_words(path, lineno, cols[0], max_tokens)
        if not cols[1].isdigit():
            raise DatasetFormatError(
                f"{path}:{lineno}: expected the target's 0-based index (an integer) in column 2, got {cols[1]!r}"
            )
        index = int(cols[1])
        if index >= len(words):
            raise DatasetFormatError(
                f"{path}:{lineno}: target index {index} is outside the sentence's {len(words)} tokens "
                f"(0..{len(words) - 1}; the index is 0-based)"
            )
        label = _field(path, lineno, "label", cols[2])
        group = _field(path, lineno, "group", cols[3]) if len(cols) == 4 else words[index].lower()
        tokens = [Token(form=w) for w in words]
        tokens[index].sense, tokens[index].lemma = label, group
        yield lineno, Sentence(tokens, f"{path.name}:{lineno}", path.name)


def iter_labelled_file(
    path: str | Path, format: str, label: str | None = None, max_tokens: int = MAX_TOKENS
) -> Iterator[tuple[int, Sentence]]:
    """``(first line, Sentence)`` of a labelled file, one sentence at a time (see the module docstring)."""
    path = Path(path)
    if format not in FORMATS:
        raise ValueError(f"unknown format {format!r}; choose one of {list(FORMATS)}")
    if label is not None and format != "conllu":
        raise ValueError(f"label = {label!r} is for conllu files only (a {format} file has one label column)")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such {format} file")
    if format == "tokens":
        yield from _tokens(path, max_tokens)
    elif format == "wic":
        yield from _wic(path, max_tokens)
    elif format == "sentences":
        for line, sentence, _ in iter_sentence_file(path, max_tokens):
            yield line, sentence
    elif format == "spans":
        for sentence in read_span_file(path, max_tokens)[0]:
            yield sentence.spans[0].line, sentence
    else:
        for start, sentence in iter_conllu(_lines(path), str(path), path.name, label or "upos"):
            if len(sentence.tokens) > max_tokens:
                raise _too_long(path, start, start + len(sentence.tokens), max_tokens)
            yield start, sentence


def read_labelled_file(
    path: str | Path, format: str, label: str | None = None, max_tokens: int = MAX_TOKENS
) -> tuple[list[Sentence], list[int]]:
    """All sentences of a labelled file and the line each starts on; an empty file is an error."""
    sentences, lines = [], []
    for line, sentence in iter_labelled_file(path, format, label, max_tokens):
        sentences.append(sentence)
        lines.append(line)
    if not sentences:
        raise DatasetFormatError(f"{path}: no sentences (the file is empty, or holds only comments and blank lines)")
    return sentences, lines


def iter_sentence_file(path: str | Path, max_tokens: int = MAX_TOKENS) -> Iterator[tuple[int, Sentence, str]]:
    """``(line, Sentence, label)`` per ``sentence<TAB>label`` line of a ``sentences`` file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such sentences file")
    for lineno, cols in _rows(path, (2,), "sentence<TAB>label"):
        words = _sentence_words(path, lineno, cols[0], max_tokens)
        label = _field(path, lineno, "label", cols[1])
        sentence = Sentence([Token(form=w) for w in words], f"{path.name}:{lineno}", path.name, label)
        yield lineno, sentence, label


def _span(path: Path, lineno: int, key: str, value, n: int) -> tuple[int, int]:
    ok = isinstance(value, list) and len(value) == 2 and all(type(v) is int for v in value)
    if not ok:
        raise DatasetFormatError(f"{path}:{lineno}: expected {key} as [start, end] (two integers), got {value!r}")
    start, end = value
    if not 0 <= start < end <= n:
        raise DatasetFormatError(
            f"{path}:{lineno}: {key} [{start}, {end}] is outside its sentence of {n} tokens "
            f"(expected 0 <= start < end <= {n}; end is exclusive)"
        )
    return start, end


def read_span_file(path: str | Path, max_tokens: int = MAX_TOKENS) -> tuple[list[Sentence], list[LabelledSpan]]:
    """The distinct sentences of a ``spans`` file, each once (in the order they first appear), with
    their examples in ``Sentence.spans``; and all examples in file order. A sentence is the same when
    its token list is: it is embedded once, however many lines it has."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such spans file")
    sentences: list[Sentence] = []
    index: dict[tuple, int] = {}
    examples: list[LabelledSpan] = []
    for lineno, line in enumerate(_lines(path), 1):
        if not line.strip() or line.startswith("#"):
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as e:
            raise DatasetFormatError(f"{path}:{lineno}: expected one JSON object per line ({e.msg})") from None
        if not isinstance(item, dict) or not {"tokens", "span1", "label"} <= set(item):
            raise DatasetFormatError(
                f"{path}:{lineno}: expected an object with tokens, span1 and label (span2 optional), got {line[:80]!r}"
            )
        words = item["tokens"]
        if not isinstance(words, list) or not words or not all(isinstance(w, str) for w in words):
            raise DatasetFormatError(f"{path}:{lineno}: expected tokens as a non-empty list of strings")
        for w in words:
            _field(path, lineno, "token", w)
        if len(words) > max_tokens:
            raise _too_long(path, lineno, lineno, max_tokens)
        label = item["label"]
        if not isinstance(label, str) or not label.strip():
            raise DatasetFormatError(f"{path}:{lineno}: expected label as a non-empty string, got {label!r}")
        span1 = _span(path, lineno, "span1", item["span1"], len(words))
        span2 = _span(path, lineno, "span2", item["span2"], len(words)) if item.get("span2") is not None else None
        key = tuple(words)
        if key not in index:
            index[key] = len(sentences)
            sentences.append(Sentence([Token(form=w) for w in words], f"{path.name}:{lineno}", path.name))
        example = LabelledSpan(span1, span2, label, lineno)
        sentences[index[key]].spans.append(example)
        examples.append(example)
    if not examples:
        raise DatasetFormatError(f"{path}: no examples (the file is empty, or holds only comments and blank lines)")
    return sentences, examples
