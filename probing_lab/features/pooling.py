"""Sentence vectors from token vectors: ``mean`` or ``max`` pooling over a sentence's tokens, or the
biLM's own ``summary`` of it.

``summary`` is what the two language models have read of the whole sentence: the forward LM's state
at the last token (the first half of a biLSTM layer's vector, ``[forward; backward]``) next to the
backward LM's state at the first token (the second half). Layer 0, the char-CNN type layer, has no
direction (its halves are the same type vector): its summary is the mean.

:func:`pool_layers` pools every layer at once, ``(n_layers, n_tokens, dim)`` -> ``(n_layers,
n_sentences, dim)``; :func:`pooled_layer` then reads a key as ``Activations.layer`` does: ``"1"``,
``"1f"`` (the forward half: for ``summary`` the forward LM's last state), ``"mean"`` (the layers'
average of the pooled vectors), ``"mix"`` (``(n_sentences, n_layers, dim)`` for a learned mix).
"""

from __future__ import annotations

import numpy as np

from .activations import MEAN, take_layer

POOLINGS = ("mean", "max", "summary")


def pool(tokens: np.ndarray, offsets: np.ndarray, how: str, directional: bool = True) -> np.ndarray:
    """``tokens (n_tokens, ..., dim)``, sentence ``i`` rows ``offsets[i]:offsets[i+1]`` (none empty)
    -> ``(n_sentences, ..., dim)`` float32. ``directional=False`` (layer 0) makes ``summary`` the mean."""
    if how not in POOLINGS:
        raise ValueError(f"pooling must be one of {list(POOLINGS)}, got {how!r}")
    offsets = np.asarray(offsets, dtype=np.int64)
    starts, ends = offsets[:-1], offsets[1:]
    if len(starts) and (ends <= starts).any():
        raise ValueError(f"sentence {int(np.flatnonzero(ends <= starts)[0])} has no tokens to pool")
    x = np.asarray(tokens, dtype=np.float32)
    if not len(starts):
        return np.zeros((0, *x.shape[1:]), dtype=np.float32)
    if how == "summary" and directional:
        half = x.shape[-1] // 2
        return np.concatenate([x[ends - 1, ..., :half], x[starts, ..., half:]], axis=-1)
    if how == "max":
        return np.maximum.reduceat(x, starts, axis=0)
    lengths = (ends - starts).astype(np.float32).reshape(-1, *([1] * (x.ndim - 1)))
    return np.add.reduceat(x, starts, axis=0) / lengths


def pool_layers(layers: np.ndarray, offsets: np.ndarray, how: str) -> np.ndarray:
    """Every layer pooled: ``(n_layers, n_tokens, dim)`` -> ``(n_layers, n_sentences, dim)`` float32
    (layer 0 pooled as undirected)."""
    return np.stack([pool(layers[k], offsets, how, directional=k > 0) for k in range(layers.shape[0])])


def pooled_layer(pooled: np.ndarray, key: str) -> np.ndarray:
    """One key of :func:`pool_layers`' output: ``(n_sentences, dim)`` (half: ``dim / 2``), or
    ``(n_sentences, n_layers, dim)`` for ``"mix"``."""
    if key == "mix":
        return np.ascontiguousarray(np.transpose(pooled, (1, 0, 2)))
    if key == MEAN:
        return pooled.mean(axis=0)
    return np.ascontiguousarray(take_layer(pooled, str(key)))
