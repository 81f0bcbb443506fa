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

* :func:`tense`: the Tense of the main clause (Conneau et al.'s Tense): the root's UD ``Tense``
  feature, else that of its ``aux`` / ``cop`` (``Past`` | ``Pres``); sentences without one (imperatives,
  fragments) are left out.
* :func:`subj_number`: the ``Number`` of the root's ``nsubj`` / ``nsubj:pass`` (Conneau et al.'s
  SubjNum: ``Sing`` | ``Plur``); sentences without a subject with a Number are left out.

Each keeps only sentences of :data:`MIN_TOKENS` tokens or more. The registry names them
``ewt-sentence-length``, ``ewt-bigram-shift``, ``ewt-tense`` and ``ewt-subj-number`` (splits train,
dev, test of EWT); ``seed_of(split)`` fixes the seed per split, so a dataset is the same in every run.
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


def feature(token, name: str) -> str | None:
    """One feature of a UD token's FEATS (``Token.extra["feats"]``), or None."""
    for pair in (token.extra.get("feats") or "").split("|"):
        key, _, value = pair.partition("=")
        if key == name and value:
            return value
    return None


def _root(sentence: Sentence) -> int | None:
    roots = [i for i, t in enumerate(sentence.tokens) if t.head == 0]
    return roots[0] if len(roots) == 1 else None


def _children(sentence: Sentence, head: int, relations: tuple[str, ...]) -> list[int]:
    return [i for i, t in enumerate(sentence.tokens) if t.head == head + 1 and (t.deprel or "") in relations]


def main_tense(sentence: Sentence) -> str | None:
    """The Tense of the main clause: the root's, else that of its ``aux`` / ``cop`` ("is happy",
    "has gone": the finite auxiliary's); None when neither has one (an imperative, a fragment)."""
    root = _root(sentence)
    if root is None:
        return None
    for i in [root, *_children(sentence, root, ("aux", "aux:pass", "cop"))]:
        if feature(sentence.tokens[i], "Tense"):
            return feature(sentence.tokens[i], "Tense")
    return None


def subject_number(sentence: Sentence) -> str | None:
    """The Number of the main clause's subject (the root's ``nsubj`` / ``nsubj:pass``), Sing or
    Plur, or None."""
    root = _root(sentence)
    subjects = _children(sentence, root, ("nsubj", "nsubj:pass")) if root is not None else []
    number = feature(sentence.tokens[subjects[0]], "Number") if subjects else None
    return number if number in ("Sing", "Plur") else None  # Ptan (plurale tantum) and the like left out


def _labelled_by(rule):
    def make(sentences: Sequence[Sentence]) -> list[Sentence]:
        out = []
        for s in sentences:
            label = rule(s) if len(s.tokens) >= MIN_TOKENS else None
            if label is not None:
                out.append(_relabelled(s, label))
        return out

    return make


tense = _labelled_by(main_tense)
tense.__doc__ = "Copies of the sentences of MIN_TOKENS or more whose main clause has a Tense, labelled with it."
subj_number = _labelled_by(subject_number)
subj_number.__doc__ = "Copies of the sentences of MIN_TOKENS or more whose main subject has a Number, labelled with it."

DERIVED = {
    "ewt-sentence-length": ("ewt", sentence_length),
    "ewt-bigram-shift": ("ewt", bigram_shift),
    "ewt-tense": ("ewt", tense),
    "ewt-subj-number": ("ewt", subj_number),
}


def derive(name: str, base: Sequence[Sentence], split: str | None) -> list[Sentence]:
    """The derived dataset ``name`` (a key of :data:`DERIVED`) from its base dataset's split."""
    _, make = DERIVED[name]
    return make(base, seed_of(split)) if make is bigram_shift else make(base)
