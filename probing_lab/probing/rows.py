"""Where a probe's training rows come from: an array in memory or rows on disk
(``features.cache.LayerRows``), read a chunk at a time, and their standardisation statistics."""

from __future__ import annotations

import numpy as np
import torch


class ArrayRows:
    """An array in memory as a row source (one chunk: what ``LayerRows`` reads from disk in parts)."""

    def __init__(self, X):
        self.X = np.asarray(X, dtype=np.float32)
        self.shape = self.X.shape
        self.chunk_rows = max(1, len(self.X))

    def __len__(self) -> int:
        return len(self.X)

    def read(self, lo: int, hi: int) -> np.ndarray:
        return self.X[lo:hi]


def as_rows(X):
    """``X`` as a row source: ``len``, ``shape``, ``chunk_rows`` and ``read(lo, hi) -> float32``."""
    return X if hasattr(X, "read") and hasattr(X, "chunk_rows") else ArrayRows(X)


# Rows on disk up to this size are read into memory once per layer (and standardised into a copy of the
# same size). At 4 GiB a 100,000-sentence tokens file (1.6M tokens) was read in and peaked at 4.8 GiB;
# streamed, 1.2 GiB (benchmarks/own_data.py). At 1 GiB every committed experiment's layers still fit (the
# largest, an EWT "mix": 0.63 GB), so their runs are unchanged, and a larger own file streams.
IN_MEMORY_BYTES = 1 << 30


def in_memory(X):
    """Rows on disk (``LayerRows``) read into memory (float32) when they take at most
    ``IN_MEMORY_BYTES``, so that every fit of a layer (the probe, its control, the MDL blocks)
    shares one read; larger ones stay on disk, read a chunk at a time. Anything else is returned
    as it is."""
    if not (hasattr(X, "read") and hasattr(X, "chunk_rows")) or isinstance(X, ArrayRows):
        return X
    if 4 * int(np.prod(X.shape)) > IN_MEMORY_BYTES:
        return X
    return X.read(0, len(X))


def _chunks(rows) -> list[tuple[int, int]]:
    return [(lo, min(lo + rows.chunk_rows, len(rows))) for lo in range(0, len(rows), rows.chunk_rows)]


def _standardise(rows) -> tuple[torch.Tensor, torch.Tensor]:
    """The training rows' mean and deviation per feature (in one pass over the chunks)."""
    chunks = _chunks(rows)
    if len(chunks) == 1:
        X = torch.as_tensor(rows.read(0, len(rows)))
        mean, squares = X.mean(0), torch.zeros(X.shape[1:], dtype=torch.float64)
        for block in X.split(8192):  # two passes: X.std(0) (Welford down the rows) takes 10x as long
            d = block - mean
            squares += d.mul_(d).sum(0)
        return mean, (squares / max(len(X) - 1, 1)).sqrt_().float().clamp_min(1e-4)
    total = np.zeros(rows.shape[1:], dtype=np.float64)
    squares = np.zeros(rows.shape[1:], dtype=np.float64)
    for lo, hi in chunks:
        x = rows.read(lo, hi).astype(np.float64)
        total += x.sum(0)
        squares += (x * x).sum(0)
    n = len(rows)
    mean = total / n
    var = np.maximum(squares - n * mean * mean, 0.0) / max(n - 1, 1)
    std = torch.as_tensor(np.sqrt(var), dtype=torch.float32).clamp_min(1e-4)
    return torch.as_tensor(mean, dtype=torch.float32), std
