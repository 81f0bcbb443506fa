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


def pool(
    tokens: np.ndarray, offsets: np.ndarray, how: str, directional: bool = True, chunk: int = 1 << 16
) -> np.ndarray:
    """``tokens (n_tokens, ..., dim)``, sentence ``i`` rows ``offsets[i]:offsets[i+1]`` (none empty)
    -> ``(n_sentences, ..., dim)`` float32. ``directional=False`` (layer 0) makes ``summary`` the mean.
    ``tokens`` may be a float16 memory map: it is read ``chunk`` token rows at a time (whole sentences)."""
    if how not in POOLINGS:
        raise ValueError(f"pooling must be one of {list(POOLINGS)}, got {how!r}")
    offsets = np.asarray(offsets, dtype=np.int64)
    starts, ends = offsets[:-1], offsets[1:]
    if len(starts) and (ends <= starts).any():
        raise ValueError(f"sentence {int(np.flatnonzero(ends <= starts)[0])} has no tokens to pool")
    if not len(starts):
        return np.zeros((0, *tokens.shape[1:]), dtype=np.float32)
    if how == "summary" and directional:
        half = tokens.shape[-1] // 2
        last, first = np.asarray(tokens[ends - 1], np.float32), np.asarray(tokens[starts], np.float32)
        return np.concatenate([last[..., :half], first[..., half:]], axis=-1)
    out = np.empty((len(starts), *tokens.shape[1:]), dtype=np.float32)
    a = 0
    while a < len(starts):  # whole sentences, about ``chunk`` token rows at a time
        b = max(a + 1, int(np.searchsorted(ends, starts[a] + chunk, side="right")))
        x = np.asarray(tokens[starts[a] : ends[b - 1]], dtype=np.float32)
        reduce = _max if how == "max" else _mean
        out[a:b] = reduce(x, starts[a:b] - starts[a], ends[a:b] - starts[a:b])
        a = b
    return out


def _mean(x: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Each sentence's mean row: a sparse (sentences x tokens) averaging matrix times ``x``."""
    from scipy.sparse import csr_matrix

    weights = np.repeat(1.0 / lengths, lengths).astype(np.float32)
    indptr = np.concatenate([starts, [len(x)]])
    averaging = csr_matrix((weights, np.arange(len(x)), indptr), shape=(len(starts), len(x)))
    flat = x.reshape(len(x), -1)
    return np.asarray(averaging @ flat, dtype=np.float32).reshape(len(starts), *x.shape[1:])


def _max(x: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Each sentence's elementwise max, the sentences of one length at a time (one gather each)."""
    out = np.empty((len(starts), *x.shape[1:]), dtype=np.float32)
    for n in np.unique(lengths):
        which = np.flatnonzero(lengths == n)
        out[which] = x[starts[which][:, None] + np.arange(n)].max(axis=1)
    return out


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
