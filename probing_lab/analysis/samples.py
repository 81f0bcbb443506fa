"""Token tables for the layer-clustering view: a seeded sample of treebank sentences, one row per
token with what a point can be coloured by (UPOS, deprel, frequency, out-of-vocabulary).

Frequency and OOV are measured against a reference word count (in the app: EWT train), because a
character-level ELMo has no input vocabulary of its own: "OOV" here means "a word the reference
corpus never showed", the tokens where a type-level model has least to go on.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Optional, Sequence

import numpy as np


def sample_sentences(sentences: Sequence, n: int, seed: int = 0) -> list:
    """``n`` sentences drawn without replacement (all of them if fewer), in corpus order."""
    if n < 1:
        raise ValueError(f"the sample needs at least 1 sentence, got {n}")
    sentences = [s for s in sentences if s.tokens]
    if n >= len(sentences):
        return list(sentences)
    picked = np.sort(np.random.default_rng(seed).choice(len(sentences), size=n, replace=False))
    return [sentences[i] for i in picked]


def word_counts(sentences: Sequence) -> Counter:
    """Lower-cased form counts of ``Sentence`` records."""
    return Counter(t.form.lower() for s in sentences for t in s.tokens)


def frequency_band(count: int) -> str:
    """A count -> an ordered, readable band (legend of the frequency colouring)."""
    if count == 0:
        return "0 (OOV)"
    if count < 10:
        return "1-9"
    if count < 100:
        return "10-99"
    if count < 1000:
        return "100-999"
    return "1000+"


FREQUENCY_BANDS = ("0 (OOV)", "1-9", "10-99", "100-999", "1000+")


def token_rows(sentences: Sequence, counts: Optional[Counter] = None, window: int = 6) -> list[dict]:
    """One dict per token: sentence, position, form, upos, deprel, count, log10 count, band, oov,
    and ``context`` (the sentence around the token, token in <b>bold</b>, for hover text)."""
    counts = counts if counts is not None else Counter()
    rows = []
    for si, s in enumerate(sentences):
        forms = [t.form for t in s.tokens]
        for j, t in enumerate(s.tokens):
            c = counts.get(t.form.lower(), 0)
            lo, hi = max(0, j - window), min(len(forms), j + window + 1)
            context = " ".join(forms[lo:j] + [f"<b>{forms[j]}</b>"] + forms[j + 1 : hi])
            rows.append(
                {
                    "sentence": si,
                    "sentence_id": getattr(s, "id", None) or str(si),
                    "position": j,
                    "form": t.form,
                    "upos": t.upos or "_",
                    "deprel": t.deprel or "_",
                    "count": c,
                    "log10_count": math.log10(c + 1),
                    "frequency": frequency_band(c),
                    "oov": c == 0,
                    "context": ("… " if lo else "") + context + (" …" if hi < len(forms) else ""),
                }
            )
    return rows
