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

:func:`read_token_table` reads a ``tokens`` or ``conllu`` file's words and labels into a
:class:`TokenTable`: about 8 bytes a token, which is how a token probe on a file of any size keeps
its memory small (Sentence objects cost some 300 bytes a token).

A sentence longer than ``max_tokens`` (default :data:`MAX_TOKENS`) is refused with its line: in
practice it is a ``tokens`` file whose blank lines are missing, and it would not fit a probe's batch.
"""

from __future__ import annotations

import hashlib
import json
from array import array
from pathlib import Path
from typing import Iterator, Optional, Sequence

import numpy as np

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


def _require_file(path: Path, format: str) -> None:
    """A labelled file must be a file: a folder or a missing path is an error that says which."""
    if path.is_dir():
        inside = sorted(p.name for p in path.iterdir() if p.is_file())[:3]
        example = f" (it holds {', '.join(inside)}{', ...' if len(inside) == 3 else ''})" if inside else " (empty)"
        raise IsADirectoryError(f"{path} is a folder{example}, not a {format} file: give the file itself")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such {format} file")


def _too_long(path: Path, start: int, lineno: int, max_tokens: int) -> DatasetFormatError:
    return DatasetFormatError(
        f"{path}:{start}: the sentence that starts here has more than {max_tokens} tokens (at line {lineno}); "
        "in a tokens file sentences are separated by blank lines (one missing?); for longer sentences "
        "raise the limit (max_tokens in an experiment's [dataset] table, --max-tokens with probe --data)"
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
    _require_file(path, format)
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
    _require_file(path, "sentences")
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
    _require_file(path, "spans")
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


class TokenTable:
    """The sentences of a token-labelled file, compactly: word and label ids per token (label -1:
    unlabelled), sentence offsets and the line each sentence starts on.

    As a sequence it is the sentences' word lists (what ``features.cache.extract_features`` reads):
    ``table[i]`` is a list of words, ``table[a:b]`` and ``table.select(indices)`` are tables."""

    def __init__(self, source: str, vocab: list, label_names: list, words, labels, offsets, lines):
        self.source, self.vocab, self.label_names = source, vocab, label_names
        self.word_ids = np.asarray(words, dtype=np.int32)
        self.label_ids = np.asarray(labels, dtype=np.int32)
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.lines = np.asarray(lines, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.lines)

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def __getitem__(self, item):
        if isinstance(item, slice):
            return self.select(np.arange(len(self))[item])
        lo, hi = self.offsets[item], self.offsets[item + 1]
        return [self.vocab[w] for w in self.word_ids[lo:hi]]

    def select(self, indices: Sequence[int]) -> "TokenTable":
        """The sentences at ``indices``, in that order."""
        indices = np.asarray(indices, dtype=np.int64)
        lengths = (self.offsets[1:] - self.offsets[:-1])[indices]
        rows = (
            np.concatenate([np.arange(self.offsets[i], self.offsets[i + 1]) for i in indices]) if len(indices) else []
        )
        rows = np.asarray(rows, dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        return TokenTable(
            self.source,
            self.vocab,
            self.label_names,
            self.word_ids[rows],
            self.label_ids[rows],
            offsets,
            self.lines[indices],
        )

    @property
    def words(self) -> list[str]:
        """Every token's word, all sentences concatenated."""
        return [self.vocab[w] for w in self.word_ids.tolist()]

    def token_labels(self) -> list[Optional[str]]:
        """Every token's label (None: unlabelled), all sentences concatenated."""
        names = self.label_names
        return [names[i] if i >= 0 else None for i in self.label_ids.tolist()]


def read_token_table(
    path: str | Path, format: str, label: str | None = None, max_tokens: int = MAX_TOKENS
) -> TokenTable:
    """A ``tokens`` or ``conllu`` file (its ``label`` column) as a :class:`TokenTable`, read one
    sentence at a time; an empty file is an error."""
    if format not in ("tokens", "conllu"):
        raise ValueError(f"a token table is read from a tokens or conllu file, not {format}")
    vocab: dict[str, int] = {}
    label_index: dict[str, int] = {}
    # machine integers, not Python ints: 4-8 bytes each instead of about 36
    words, labels, offsets, lines = array("i"), array("i"), array("q", [0]), array("q")
    for line, sentence in iter_labelled_file(path, format, label, max_tokens):
        for t in sentence.tokens:
            words.append(vocab.setdefault(t.form, len(vocab)))
            value = t.extra.get("token_label")
            labels.append(-1 if value is None else label_index.setdefault(value, len(label_index)))
        offsets.append(len(words))
        lines.append(line)
    if not lines:
        raise DatasetFormatError(f"{path}: no sentences (the file is empty, or holds only comments and blank lines)")
    return TokenTable(Path(path).name, list(vocab), list(label_index), words, labels, offsets, lines)
