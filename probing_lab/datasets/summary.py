"""What a labelled file holds, read once before anything is probed on it: a form (the app's Probes and
Polysemy pages) shows it so that the user picks the format and the label column from what is there.

``summarise_file(path, format, label=None)`` reads the file with the own-data readers
(:mod:`probing_lab.datasets.files`, one sentence at a time; a ``spans`` file is read whole, as its
reader does) and returns a :class:`FileSummary`:

* ``labels``: each label with its count, most frequent first: the tokens' labels (``conllu`` with the
  chosen ``label`` column, default ``upos``; ``tokens``), the targets' senses (``wic``), the sentences'
  labels (``sentences``) or the spans' labels (``spans``);
* ``sentences``, ``tokens``, ``examples`` (what can carry a label: tokens, targets, sentences or spans)
  and ``unlabelled`` (tokens without a label: ``_``, or a CoNLL-U token without the chosen feature);
* ``columns`` (``conllu`` only): the label columns that occur, with the tokens that have them:
  ``upos``, ``xpos``, ``deprel``, then ``feats:NAME`` and ``misc:NAME`` for every feature name seen;
* ``groups`` (``wic`` only): each group (the word whose senses are compared) with its senses' counts.

Bad input raises what the readers raise: :class:`~probing_lab.datasets.records.DatasetFormatError`
naming the file and line (a malformed line, not UTF-8, a target outside its sentence, ...), or naming
the file when it holds no sentence at all; ``FileNotFoundError`` for a missing file and ``ValueError``
for an unknown format or label column. A file that reads but cannot be probed (no label, one label, a
``wic`` file whose groups each have one sense, fewer than 3 sentences to split into train/dev/test) is
not an error here, since the form still shows what it holds: :attr:`FileSummary.problem` says why in
the words a run would use, and :meth:`FileSummary.check` raises it as a ``DatasetFormatError``.

``guess_format(name)`` guesses the format from a file name's extension (``.conllu`` -> ``conllu``,
``.jsonl`` -> ``spans``; None where it cannot tell, e.g. ``.tsv`` and ``.txt``, which could be
``tokens``, ``wic`` or ``sentences``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from .conllu import check_label
from .files import FORMATS, MAX_TOKENS, iter_labelled_file, read_span_file
from .records import DatasetFormatError

EXTENSIONS = {".conllu": "conllu", ".conll": "conllu", ".jsonl": "spans"}
CONLLU_COLUMNS = ("upos", "xpos", "deprel")
MIN_SENTENCES = 3  # a single file is carved into train/dev/test: one sentence each at least


def guess_format(name: str | Path) -> Optional[str]:
    """The format a file name's extension says (case-insensitive), or None when it does not tell."""
    return EXTENSIONS.get(Path(str(name)).suffix.lower())


@dataclass
class FileSummary:
    """What a labelled file holds (see the module docstring); ``labels`` and ``columns`` keep the
    order they are best shown in (labels by count, then name; columns upos, xpos, deprel, feats:*,
    misc:*)."""

    path: str
    format: str
    label: Optional[str]  # conllu: the column counted in ``labels``; None for the other formats
    sentences: int
    tokens: int
    examples: int  # what can carry a label: tokens (conllu, tokens), targets (wic), sentences, spans
    labels: dict[str, int]
    unlabelled: int = 0  # conllu, tokens: tokens without a label
    columns: dict[str, int] = field(default_factory=dict)  # conllu: label column -> tokens that have it
    groups: dict[str, dict[str, int]] = field(default_factory=dict)  # wic: group -> sense -> count

    @property
    def labelled(self) -> int:
        """The examples that have a label."""
        return sum(self.labels.values())

    @property
    def what(self) -> str:
        """What one example is, for messages and table headers."""
        return {"wic": "target", "sentences": "sentence", "spans": "span"}.get(self.format, "labelled token")

    def rows(self, limit: Optional[int] = None) -> list[dict]:
        """The label table: label, count and share of the labelled examples (the first ``limit`` labels)."""
        total = self.labelled or 1
        items = list(self.labels.items())[:limit]
        return [{"label": k, "count": v, "share": round(v / total, 4)} for k, v in items]

    @property
    def problem(self) -> Optional[str]:
        """Why a probe on this file alone would have nothing to learn, or None: the message a run would give."""
        if not self.labels:
            if self.format == "conllu" and self.label != "upos":
                return f"{self.path}: no token has {self.label}: nothing to probe; choose another label column"
            return f"{self.path}: no labelled token (every label is '_'): nothing to probe"
        if self.format == "wic":
            if len(self.labels) < 2 or all(len(senses) < 2 for senses in self.groups.values()):
                return (
                    f"{self.path}: every group has one label ({sorted(self.labels)[:5]}): nothing to disambiguate; "
                    "a wic file needs groups with at least two labels"
                )
        elif len(self.labels) < 2:
            hint = "; choose another label column" if self.format == "conllu" else ""
            return (
                f"{self.path}: every {self.what} has the label {next(iter(self.labels))!r}: nothing to probe "
                f"(a probe needs at least two labels){hint}"
            )
        if self.sentences < MIN_SENTENCES:
            return (
                f"{self.path}: {self.sentences} sentence(s); splitting it into train/dev/test needs at least "
                f"{MIN_SENTENCES}"
            )
        return None

    def check(self) -> "FileSummary":
        """Raise :attr:`problem` as a ``DatasetFormatError``; the summary itself when there is none."""
        if self.problem:
            raise DatasetFormatError(self.problem)
        return self


def _names(value: Optional[str]) -> list[str]:
    """The feature names of a FEATS or MISC value (``Number=Sing|Person=3`` -> Number, Person); items
    without ``=`` (free text in MISC) are left out."""
    if not value:
        return []
    return [key for key, eq, _ in (item.partition("=") for item in value.split("|")) if eq and key]


def _ordered(counts: Counter) -> dict[str, int]:
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _column_order(columns: Counter) -> dict[str, int]:
    def rank(name: str):
        kind = name.partition(":")[0]
        return (("upos", "xpos", "deprel", "feats", "misc").index(kind), name)

    return {name: columns[name] for name in sorted(columns, key=rank)}


def summarise_file(
    path: str | Path, format: str, label: Optional[str] = None, max_tokens: int = MAX_TOKENS
) -> FileSummary:
    """Read ``path`` as ``format`` once and say what it holds (see the module docstring)."""
    path = Path(path)
    if format not in FORMATS:
        raise ValueError(f"unknown format {format!r}; choose one of {list(FORMATS)}")
    if format == "conllu":
        label = label or "upos"
        check_label(label)
    elif label is not None:
        raise ValueError(f"label = {label!r} is for conllu files only (a {format} file has one label column)")
    labels: Counter = Counter()
    columns: Counter = Counter()
    groups: dict[str, Counter] = {}
    sentences = tokens = examples = unlabelled = 0
    if format == "spans":
        found, spans = read_span_file(path, max_tokens)  # raises on an empty file itself
        labels.update(span.label for span in spans)
        sentences, tokens, examples = len(found), sum(len(s.tokens) for s in found), len(spans)
    else:
        for _, sentence in iter_labelled_file(path, format, label, max_tokens):
            sentences += 1
            tokens += len(sentence.tokens)
            if format == "sentences":
                examples += 1
                labels[sentence.label] += 1
                continue
            if format == "wic":
                for token in sentence.tokens:
                    if token.sense is not None:
                        examples += 1
                        labels[token.sense] += 1
                        groups.setdefault(token.lemma, Counter())[token.sense] += 1
                continue
            for token in sentence.tokens:
                examples += 1
                value = token.extra.get("token_label")
                if value is None:
                    unlabelled += 1
                else:
                    labels[value] += 1
                if format == "conllu":
                    columns.update(name for name in CONLLU_COLUMNS if getattr(token, name) is not None)
                    columns.update(f"feats:{n}" for n in set(_names(token.extra.get("feats"))))
                    columns.update(f"misc:{n}" for n in set(_names(token.extra.get("misc"))))
        if not sentences:
            raise DatasetFormatError(
                f"{path}: no sentences (the file is empty, or holds only comments and blank lines)"
            )
    return FileSummary(
        path=str(path),
        format=format,
        label=label,
        sentences=sentences,
        tokens=tokens,
        examples=examples,
        labels=_ordered(labels),
        unlabelled=unlabelled,
        columns=_column_order(columns),
        groups={g: _ordered(c) for g, c in sorted(groups.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))},
    )
