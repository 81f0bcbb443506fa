"""A split of an experiment's data: its sentences (``Sentence`` records, or a ``TokenTable`` for a
token-labelled file) and their cached layer activations."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..datasets.files import TokenTable
from ..features.cache import Features, extract_features, extract_side_by_side
from ..features.layer_rows import LayerRows


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
        if key == "mix":  # a layer at a time (LayerRows.read): converting the transposed view was 4-8x slower
            return self.rows(key).read(0, self.features.n_tokens)
        return self.features.layer(key)


def read_sentences(exp, data_dir, given: dict | None = None) -> dict:
    """Each role's sentences: from the registry, or ``given[role]`` already read from the user's files;
    empty sentences dropped, the training split cut to ``max_train_sentences``. Read once per run and
    shared by the model, the random-init model and further seeds (constituents_ptb's trees take 4.5 s
    to read)."""
    from ..datasets import load_dataset

    out = {}
    for role in ("train", "dev", "test"):
        chosen = given[role] if given is not None else None
        if isinstance(chosen, TokenTable):
            pass  # no empty sentences: the reader yields none
        elif chosen is not None:
            chosen = [s for s in chosen if s.tokens]
        else:
            dataset = getattr(exp, f"{role}_dataset") or exp.dataset
            chosen = [s for s in load_dataset(dataset, getattr(exp, role) or None, data_dir) if s.tokens]
        if role == "train" and exp.max_train_sentences:
            chosen = chosen[: exp.max_train_sentences]
        out[role] = chosen
    return out


def load_splits(sentences: dict, encoder, cache_dir, progress: bool) -> dict[str, Split]:
    """Each role's sentences (what :func:`read_sentences` returned) with their features from
    ``encoder``."""
    out = {}
    for role, chosen in sentences.items():
        feats = extract_features(encoder, _words(chosen), cache_dir=cache_dir, progress=progress)
        out[role] = Split(chosen, feats)
    return out


def _words(chosen) -> list:
    return chosen if isinstance(chosen, TokenTable) else [s.words for s in chosen]


def extraction_jobs(sentences: dict, encoders: list) -> list[tuple]:
    """``(encoder, words)`` of every encoder and role, what ``cache.extract_side_by_side`` takes."""
    return [(encoder, _words(chosen)) for encoder in encoders for chosen in sentences.values()]


def extract_all(sentences: dict, encoders: list, cache_dir, workers: int, progress: bool) -> int:
    """Every encoder's features of every role's sentences into the cache, up to ``workers`` extractions
    at once (``cache.extract_side_by_side``); what is cached already is skipped. Returns how many
    extractions there were to do."""
    return extract_side_by_side(extraction_jobs(sentences, encoders), cache_dir, workers, progress)
