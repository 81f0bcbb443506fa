"""Every token's vector per layer for a list of sentences: the one container the probes (through the
on-disk cache) and the analysis views (in memory) share.

``layers`` is ``(n_layers, n_tokens, dim)``, every sentence's tokens in order, and sentence ``i``
is rows ``offsets[i]:offsets[i+1]``. Keys name what a view can show: ``"0"`` (the char-CNN type
layer), ``"1"``, ``"2"``, ... (the biLSTM layers), their direction halves ``"1f"``, ``"1b"``, ``"2f"``,
``"2b"`` (the forward LM's state, which has read the words up to the token, and the backward LM's,
which has read the words from it to the end) and ``"mean"``, the plain average of the layers
(an *untrained* scalar mix: with no task to fit it to, equal weights are the neutral choice). The
probes' ``"mix"`` is different: a scalar mix learned with the probe (see ``probing.probes``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

MEAN = "mean"
HALF = re.compile(r"^(\d+)([fb])$")  # "1f": the forward half of L1
DIRECTIONS = {"f": "forward", "b": "backward"}


def layer_keys(n_layers: int, halves: bool = False) -> list[str]:
    """The model's layers, with ``halves`` their direction halves after them, then "mean"."""
    keys = []
    for i in range(n_layers):
        keys.append(str(i))
        if halves and i > 0:
            keys += [f"{i}f", f"{i}b"]
    return keys + [MEAN]


def split_half(key: str) -> tuple[int, str] | None:
    """``"2b"`` -> ``(2, "b")``; None for a whole layer, "mean" or "mix"."""
    m = HALF.match(str(key))
    return (int(m.group(1)), m.group(2)) if m else None


def layer_number(key) -> int | None:
    """The model layer a key reads: ``1`` and ``"1"`` -> 1, ``"2b"`` -> 2; None for "mean", "mix" or an
    unknown name."""
    if isinstance(key, int) and not isinstance(key, bool):
        return key
    half = split_half(key)
    if half:
        return half[0]
    return int(key) if isinstance(key, str) and key.isdigit() else None


def take_layer(layers: np.ndarray, key: str) -> np.ndarray:
    """``layers (n_layers, ..., dim)`` -> the layer ``"1"`` or the half ``"1f"`` named by ``key``."""
    half = split_half(key)
    if not half:
        return layers[int(key)]
    k, direction = half
    if k == 0:
        raise ValueError("L0 has no direction halves (both halves are the same type vector)")
    width = layers.shape[-1] // 2
    return layers[k][..., :width] if direction == "f" else layers[k][..., width:]


def layer_label(key: str) -> str:
    """``"1"`` -> ``"L1"``, ``"1f"`` -> ``"L1 forward"``; ``"mean"`` and ``"mix"`` stay as they are."""
    half = split_half(key)
    if half:
        return f"L{half[0]} {DIRECTIONS[half[1]]}"
    return f"L{key}" if str(key).isdigit() else str(key)


@dataclass
class Activations:
    layers: np.ndarray  # (n_layers, n_tokens, dim), in memory or memory-mapped
    offsets: np.ndarray  # (n_sentences + 1,)

    @property
    def n_tokens(self) -> int:
        return int(self.offsets[-1])

    @property
    def keys(self) -> list[str]:
        return layer_keys(self.layers.shape[0])

    def sentence(self, i: int) -> np.ndarray:
        """``(n_layers, n_i, dim)`` of sentence i."""
        return self.layers[:, self.offsets[i] : self.offsets[i + 1]]

    def layer(self, key: str) -> np.ndarray:
        """``(n_tokens, dim)`` float32 of one layer or of their mean; ``(n_tokens, dim / 2)`` of a half."""
        if key == MEAN:
            return np.asarray(self.layers, dtype=np.float32).mean(axis=0)
        return np.ascontiguousarray(take_layer(self.layers, key), dtype=np.float32)

    def by_key(self, halves: bool = False) -> dict[str, np.ndarray]:
        """Every layer (with ``halves`` also their direction halves) and the mean, by key."""
        return {k: self.layer(k) for k in layer_keys(self.layers.shape[0], halves)}

    def row(self, sentence: int, position: int) -> int:
        return int(self.offsets[sentence]) + position


def embed_activations(embedder, sentences: Sequence[Sequence[str]]) -> Activations:
    """``embedder.embed(token_lists) -> [(n_layers, n, dim)]`` -> :class:`Activations` in memory."""
    sentences = [list(s) for s in sentences]
    if not sentences or not any(sentences):
        raise ValueError("no tokens to embed")
    arrays = embedder.embed(sentences)
    layers = np.concatenate([np.asarray(a, dtype=np.float32) for a in arrays], axis=1)
    offsets = np.concatenate([[0], np.cumsum([a.shape[1] for a in arrays])]).astype(np.int64)
    return Activations(layers, offsets)
