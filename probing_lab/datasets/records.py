"""The one record type every dataset reader returns, and the two errors readers raise.

A :class:`Sentence` is a list of :class:`Token`; a field a dataset does not annotate is None
(``head`` follows UD: 1-based index of the head token in the sentence, 0 = root). Dataset-specific
annotations go in ``Token.extra`` (``"chunk"``, ``"const_depth"``, ``"feats"``, ``"misc"``, ...).
Labelled spans of a sentence (edge probing: constituents, chunks, entity mentions, span pairs) are
:class:`LabelledSpan` items in ``Sentence.spans``.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Token:
    form: str
    lemma: str | None = None
    upos: str | None = None
    xpos: str | None = None
    head: int | None = (
        None  # 1-based index of the head token in the sentence, 0 = root (UD convention); None if unknown
    )
    deprel: str | None = None
    sense: str | None = (
        None  # sense label for sense-annotated targets (WordNet sense key, or CoarseWSD sense name); None otherwise
    )
    extra: dict = field(default_factory=dict)  # e.g. {"chunk": "B-NP"} or {"const_depth": 3}


@dataclass(frozen=True)
class LabelledSpan:
    """One edge-probing example: a span ``(start, end)`` of the sentence's tokens (0-based, end
    exclusive), optionally a second span (a span pair), and its label; ``line``: where a file gave
    it (0 when derived from a dataset)."""

    span1: tuple[int, int]
    span2: tuple[int, int] | None
    label: str
    line: int = 0


@dataclass
class Sentence:
    tokens: list[Token]
    id: str
    source: str  # e.g. "ud-english-ewt/dev"
    label: str | None = None  # a label of the whole sentence (sentences files, the EWT sentence tasks)
    spans: list[LabelledSpan] = field(default_factory=list)  # labelled spans (spans files, span datasets)

    @property
    def words(self) -> list[str]:
        """The token forms: what an encoder is fed."""
        return [t.form for t in self.tokens]


class DatasetFormatError(ValueError):
    """A data file does not have the shape its reader expects (the message names file and line)."""


class DatasetMissingError(FileNotFoundError):
    """A dataset's files are not where the registry looked (the message says where and how to get them)."""
