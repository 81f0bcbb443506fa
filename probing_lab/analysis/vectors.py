"""Sentences -> every token's vector per layer, in one flat table the analysis functions share.

Layer keys follow the probing code: ``"0"`` (the char-CNN type layer), ``"1"``, ``"2"`` (the
biLSTM layers) and ``"mix"``. The mix here is the *untrained* scalar mix (softmax of zero weights,
gamma 1), i.e. the mean of the layers: with no task to fit, that is the neutral choice, and it is
what the probing code uses for its centroid method.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np


def layer_keys(n_layers: int) -> list[str]:
    return [str(i) for i in range(n_layers)] + ["mix"]


def layer_label(key: str) -> str:
    return "mix" if key == "mix" else f"L{key}"


@dataclass
class TokenVectors:
    layers: dict  # key -> (n_tokens, dim) float32, every sentence's tokens in order
    offsets: np.ndarray  # (n_sentences + 1,): sentence i is rows offsets[i]:offsets[i+1]

    @property
    def keys(self) -> list[str]:
        return list(self.layers)

    def rows(self, sentence: int, position: int) -> int:
        return int(self.offsets[sentence]) + position


def embed_tokens(embedder, sentences: Sequence[Sequence[str]]) -> TokenVectors:
    """``embedder.embed(token_lists) -> [(n_layers, n, dim)]`` -> :class:`TokenVectors`."""
    sentences = [list(s) for s in sentences]
    if not sentences or not any(sentences):
        raise ValueError("no tokens to embed")
    arrays = embedder.embed(sentences)
    stacked = np.concatenate([np.asarray(a, dtype=np.float32) for a in arrays], axis=1)  # (L, N, dim)
    offsets = np.concatenate([[0], np.cumsum([a.shape[1] for a in arrays])]).astype(np.int64)
    layers = {str(i): stacked[i] for i in range(stacked.shape[0])}
    layers["mix"] = stacked.mean(axis=0)
    return TokenVectors(layers, offsets)
