"""The one record type every dataset reader returns, and the two errors readers raise.

A :class:`Sentence` is a list of :class:`Token`; a field a dataset does not annotate is None
(``head`` follows UD: 1-based index of the head token in the sentence, 0 = root). Dataset-specific
annotations go in ``Token.extra`` (``"chunk"``, ``"const_depth"``, ``"feats"``, ...).
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


@dataclass
class Sentence:
    tokens: list[Token]
    id: str
    source: str  # e.g. "ud-english-ewt/dev"
    label: str | None = None  # a label of the whole sentence (sentences files, the EWT sentence tasks)

    @property
    def words(self) -> list[str]:
        """The token forms: what an encoder is fed."""
        return [t.form for t in self.tokens]


class DatasetFormatError(ValueError):
    """A data file does not have the shape its reader expects (the message names file and line)."""


class DatasetMissingError(FileNotFoundError):
    """A dataset's files are not where the registry looked (the message says where and how to get them)."""
