"""A split of an experiment's data: its sentences (``Sentence`` records, or a ``TokenTable`` for a
token-labelled file) and their cached layer activations."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..datasets.files import TokenTable
from ..features.cache import Features, LayerRows, extract_features


@dataclass
class Split:
    sentences: list | TokenTable
    features: Features

    @property
    def words(self) -> list[str]:
        """Every token's word, all sentences concatenated."""
        if isinstance(self.sentences, TokenTable):
            return self.sentences.words
        return [t.form for s in self.sentences for t in s.tokens]

    def describe(self) -> str:
        """Where the split's sentences come from, for messages."""
        if isinstance(self.sentences, TokenTable):
            return self.sentences.source
        return self.sentences[0].source if self.sentences else "the split"

    def rows(self, key: str) -> LayerRows:
        """The rows of a layer (or "mix", "mean"), read from the cache a chunk at a time."""
        return LayerRows(self.features, key)

    def layer(self, key: str) -> np.ndarray:
        """``(N, dim)`` for a layer or "mean" (their average), ``(N, n_layers, dim)`` for "mix", whose
        weights the probe learns (float32 in memory)."""
        if key == "mix":
            return np.ascontiguousarray(np.transpose(self.features.layers, (1, 0, 2)), dtype=np.float32)
        return self.features.layer(key)


def load_splits(exp, encoder, data_dir, cache_dir, progress: bool, sentences: dict | None = None) -> dict[str, Split]:
    """Each role's sentences (from the registry, or ``sentences[role]`` already read from the
    user's files) with their features from ``encoder``."""
    from ..datasets import load_dataset

    out = {}
    for role in ("train", "dev", "test"):
        given = sentences[role] if sentences is not None else None
        if isinstance(given, TokenTable):
            chosen = given  # no empty sentences: the reader yields none
        elif given is not None:
            chosen = [s for s in given if s.tokens]
        else:
            dataset = getattr(exp, f"{role}_dataset") or exp.dataset
            chosen = [s for s in load_dataset(dataset, getattr(exp, role) or None, data_dir) if s.tokens]
        if role == "train" and exp.max_train_sentences:
            chosen = chosen[: exp.max_train_sentences]
        words = chosen if isinstance(chosen, TokenTable) else [s.words for s in chosen]
        feats = extract_features(encoder, words, cache_dir=cache_dir, progress=progress)
        out[role] = Split(chosen, feats)
    return out
