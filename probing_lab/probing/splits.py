"""A split of an experiment's data: its sentences (``Sentence`` records, or a ``TokenTable`` for a
token-labelled file) and their cached layer activations."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..datasets.files import TokenTable
from ..features.cache import Features, LayerRows, extract_features, is_cached


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


def needs_extraction(sentences: dict, encoder, cache_dir) -> bool:
    """Whether any role's features from ``encoder`` are missing from the cache."""
    return not all(is_cached(encoder, _words(chosen), cache_dir) for chosen in sentences.values())


def _extract_in_child(sentences: dict, encoder, cache_dir) -> None:
    import torch

    torch.set_num_threads(1)
    try:
        load_splits(sentences, encoder, cache_dir, progress=False)
    except BaseException:  # the parent extracts what is missing itself, and reports what goes wrong there
        os._exit(1)


def extract_side_by_side(sentences: dict, encoders: list, cache_dir, progress: bool) -> None:
    """Every encoder's features of ``sentences`` into the cache at once: the first here, each other
    in a forked process, all on one torch thread. The biLM's steps are small products that two threads
    speed up 1.4-1.6x, so two models extracted side by side (a model and its random-init baseline) finish
    sooner than one after the other on two threads each (EWT dev + test: 12 s against 2 x 7.5 s), and
    give the same vectors (extraction is bit-identical on one and two threads). A child that fails leaves
    its features uncached: :func:`load_splits` extracts them afterwards (and raises what goes wrong)."""
    import multiprocessing

    import torch

    if len({encoder.fingerprint() for encoder in encoders}) < len(encoders):  # hashed here, not in each process
        raise ValueError("two of the encoders are the same model: their extractions would write the same files")
    context = multiprocessing.get_context("fork")
    children = [context.Process(target=_extract_in_child, args=(sentences, e, cache_dir)) for e in encoders[1:]]
    threads = torch.get_num_threads()
    finished = False
    try:
        for child in children:
            child.start()
        torch.set_num_threads(1)
        load_splits(sentences, encoders[0], cache_dir, progress)
        finished = True
    finally:
        torch.set_num_threads(threads)
        for child in children:
            if not finished:  # interrupted or failed here: stop the others (their partial caches resume)
                child.terminate()
            child.join()
