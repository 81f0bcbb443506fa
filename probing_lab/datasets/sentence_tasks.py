"""Sentence-level datasets derived from a treebank (Conneau et al. 2018's probing tasks), each
sentence labelled in ``Sentence.label`` for the ``sentence_label`` task.

* :func:`sentence_length`: the sentence's token count (UD tokens, punctuation included; multiword
  ranges are not tokens), binned as in Conneau et al.'s SentLen: :data:`LENGTH_BINS` ``5-8``,
  ``9-12``, ``13-16``, ``17-20``, ``21-25``, ``26-28``, ``29-32``, ``33+``. Sentences under
  :data:`MIN_TOKENS` tokens are left out (Conneau et al. kept 5 tokens and up too), and the classes
  are not balanced (the majority baseline says how skewed they are).
* :func:`bigram_shift`: two adjacent tokens swapped (``I``, inverted) or not (``O``), as in
  Conneau et al.'s BShift. Of the sentences of :data:`MIN_TOKENS` tokens or more with a pair to swap,
  a seeded half (every other one of a seeded permutation: the classes differ by at most one) get one
  seeded pair swapped; a pair is two adjacent tokens that differ, neither of them punctuation only.

The registry names them ``ewt-sentence-length`` and ``ewt-bigram-shift`` (splits train, dev, test of
EWT); ``seed_of(split)`` fixes the seed per split, so a dataset is the same in every run.
"""

from __future__ import annotations

import dataclasses
import unicodedata
import zlib
from typing import Sequence

import numpy as np

from .records import Sentence

MIN_TOKENS = 5
LENGTH_BINS = ((5, 8), (9, 12), (13, 16), (17, 20), (21, 25), (26, 28), (29, 32), (33, None))
SHIFTED, ORIGINAL = "I", "O"


def _bin_name(low: int, high: int | None) -> str:
    return f"{low}+" if high is None else f"{low}-{high}"


def length_bin(n: int) -> str:
    """The bin of a sentence of ``n`` tokens: ``"5-8"`` ... ``"33+"``; ``"1-4"`` under 5 tokens."""
    if n < LENGTH_BINS[0][0]:
        return f"1-{LENGTH_BINS[0][0] - 1}"
    for low, high in LENGTH_BINS:
        if high is None or n <= high:
            return _bin_name(low, high)
    raise AssertionError(n)


def seed_of(split: str | None) -> int:
    """The fixed seed of a derived split (a checksum of its name)."""
    return zlib.crc32((split or "all").encode("utf-8"))


def _relabelled(sentence: Sentence, label: str, tokens=None, source: str | None = None) -> Sentence:
    tokens = [dataclasses.replace(t, extra=dict(t.extra)) for t in (tokens or sentence.tokens)]
    return Sentence(tokens, sentence.id, source or sentence.source, label)


def sentence_length(sentences: Sequence[Sentence]) -> list[Sentence]:
    """Copies of the sentences of :data:`MIN_TOKENS` tokens or more, labelled with their length bin."""
    return [_relabelled(s, length_bin(len(s.tokens))) for s in sentences if len(s.tokens) >= MIN_TOKENS]


def punctuation_only(form: str) -> bool:
    """A token of punctuation and symbols only ("." "--" "?!" "$")."""
    return all(unicodedata.category(c)[0] in "PS" for c in form)


def swappable(sentence: Sentence) -> list[int]:
    """Positions ``i`` where tokens ``i`` and ``i + 1`` may be swapped: different, neither punctuation only."""
    forms = sentence.words
    return [
        i
        for i in range(len(forms) - 1)
        if forms[i] != forms[i + 1] and not punctuation_only(forms[i]) and not punctuation_only(forms[i + 1])
    ]


def bigram_shift(sentences: Sequence[Sentence], seed: int = 0) -> list[Sentence]:
    """Copies of the sentences with a pair to swap (:data:`MIN_TOKENS` tokens or more), in their
    order, a seeded half with one pair swapped (``I``) and the rest unchanged (``O``). A swapped
    sentence's id gets ``~swap<i>`` (tokens ``i`` and ``i + 1``, 0-based)."""
    kept = [(s, swappable(s)) for s in sentences if len(s.tokens) >= MIN_TOKENS]
    kept = [(s, pairs) for s, pairs in kept if pairs]
    rng = np.random.default_rng(seed)
    shifted = np.zeros(len(kept), dtype=bool)
    shifted[rng.permutation(len(kept))[::2]] = True
    out = []
    for (s, pairs), swap in zip(kept, shifted):
        if not swap:
            out.append(_relabelled(s, ORIGINAL))
            continue
        i = pairs[int(rng.integers(len(pairs)))]
        tokens = list(s.tokens)
        tokens[i], tokens[i + 1] = tokens[i + 1], tokens[i]
        done = _relabelled(s, SHIFTED, tokens)
        done.id = f"{s.id}~swap{i}"
        out.append(done)
    return out


DERIVED = {"ewt-sentence-length": ("ewt", sentence_length), "ewt-bigram-shift": ("ewt", bigram_shift)}


def derive(name: str, base: Sequence[Sentence], split: str | None) -> list[Sentence]:
    """The derived dataset ``name`` (a key of :data:`DERIVED`) from its base dataset's split."""
    _, make = DERIVED[name]
    return make(base, seed_of(split)) if make is bigram_shift else make(base)
