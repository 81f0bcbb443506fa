"""Where a probe's training rows come from: an array in memory or rows on disk
(``features.layer_rows.LayerRows``), read a chunk at a time, their standardisation statistics, and rows in
memory standardised once (:class:`Standardised`) for every fit of a layer to share."""

from __future__ import annotations

from typing import Optional

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


def is_row_source(X) -> bool:
    """Whether ``X`` is read a chunk at a time (``LayerRows`` on disk, or an ``ArrayRows``): ``read(lo, hi)``
    and ``chunk_rows``."""
    return hasattr(X, "read") and hasattr(X, "chunk_rows")


def as_rows(X):
    """``X`` as a row source: ``len``, ``shape``, ``chunk_rows`` and ``read(lo, hi) -> float32``."""
    return X if is_row_source(X) else ArrayRows(X)


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
    if not is_row_source(X) or isinstance(X, ArrayRows):
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


def standardise(x: torch.Tensor, mean: torch.Tensor, std: torch.Tensor, in_place: bool = False) -> torch.Tensor:
    """``(x - mean) / std``: the one standardising arithmetic of a probe's rows (fit, shared rows,
    prediction), so that each gives the same numbers bit for bit; ``in_place``: in ``x``'s buffer."""
    return (x.sub_(mean) if in_place else torch.sub(x, mean)).div_(std)


class Standardised:
    """Rows in memory already standardised (``z = (x - mean) / std``, float32) with the statistics of
    a training set: the probe, its control and every online-code block of a layer share one copy
    instead of each standardising its own. Indexing (a slice: a view; an index array: a gather) keeps
    the statistics, so an MDL block ``X[:start]`` is standardised with the whole training set's
    (the online code sends labels: the features, and so their statistics, are known to both sides)."""

    def __init__(self, z: torch.Tensor, mean: torch.Tensor, std: torch.Tensor):
        self.z, self.mean, self.std = z, mean, std
        self.shape = tuple(z.shape)
        self.chunk_rows = max(1, len(z))

    @classmethod
    def of(cls, rows, stats: Optional[tuple] = None, in_place: bool = False) -> "Standardised":
        """``rows`` (an array or ``ArrayRows``) standardised with ``stats`` (mean, std), by default its
        own; ``in_place``: in the array's own buffer (rows just read, that nothing else holds: on this
        VM a fresh buffer of a "mix" layer's 600 MB took 0.6-11 s to touch)."""
        rows = as_rows(rows)
        mean, std = stats if stats is not None else _standardise(rows)
        return cls(standardise(torch.as_tensor(rows.read(0, len(rows))), mean, std, in_place), mean, std)

    def __len__(self) -> int:
        return len(self.z)

    def __getitem__(self, item) -> "Standardised":
        if not isinstance(item, slice):
            item = torch.as_tensor(np.asarray(item))
        return Standardised(self.z[item], self.mean, self.std)

    def shares_statistics(self, mean: torch.Tensor) -> bool:
        return self.mean is mean

    def reorder_(self, order: np.ndarray) -> "Standardised":
        """The rows put in ``order`` (as ``self[order]``) in their own buffer, without a second copy of
        them: the online code's ordering of a layer whose main fit is done. Returns ``self``."""
        permute_rows_(self.z, order)
        return self


def permute_rows_(z: torch.Tensor, order: np.ndarray, chunk: int = 8192) -> None:
    """``z[:] = z[order]`` with ``chunk`` rows of extra memory: each cycle of the permutation is rotated a
    chunk of rows at a time (row ``c[t]`` of a cycle takes row ``c[t + 1]``'s value, read before it is
    overwritten; the last takes the first's, kept aside)."""
    order = np.asarray(order, dtype=np.int64)
    if not np.array_equal(np.sort(order), np.arange(len(z))):
        raise ValueError(f"not a permutation of {len(z)} rows")
    done = order == np.arange(len(order))
    for start in np.flatnonzero(~done):
        if done[start]:
            continue
        cycle, j = [start], order[start]
        while j != start:
            cycle.append(j)
            j = order[j]
        cycle = torch.as_tensor(np.asarray(cycle, dtype=np.int64))
        done[cycle.numpy()] = True
        first = z[cycle[0]].clone()
        for lo in range(0, len(cycle) - 1, chunk):
            hi = min(lo + chunk, len(cycle) - 1)
            z.index_copy_(0, cycle[lo:hi], torch.index_select(z, 0, cycle[lo + 1 : hi + 1]))
        z[cycle[-1]] = first


_IN_MEMORY = (np.ndarray, ArrayRows)


def standardised(X, *others, in_place: bool = False) -> tuple:
    """``X`` and ``others`` standardised with ``X``'s statistics (:class:`Standardised`) where they are
    rows in memory (arrays, ``ArrayRows``, or already ``Standardised``; ``in_place``: in the arrays'
    own buffers); anything else (rows on disk, read a chunk at a time; a span probe's inputs) is
    returned as it is, for the fit to standardise."""
    if not isinstance(X, (*_IN_MEMORY, Standardised)):
        return (X, *others)
    X = X if isinstance(X, Standardised) else Standardised.of(X, in_place=in_place)
    out = [X]
    for other in others:
        if isinstance(other, Standardised) and not other.shares_statistics(X.mean):
            raise ValueError("rows standardised with another training set's statistics: pass them unstandardised")
        out.append(Standardised.of(other, (X.mean, X.std), in_place) if isinstance(other, _IN_MEMORY) else other)
    return tuple(out)


def read_standardised(train, dev) -> tuple:
    """A layer's training and dev rows for every fit of it: read into memory where they fit
    (:func:`in_memory`) and then standardised with the training statistics, in the buffers just read."""
    read = [in_memory(rows) for rows in (train, dev)]
    if any(new is old for new, old in zip(read, (train, dev))):  # given in memory: the caller's, not ours to change
        return standardised(*read)
    return standardised(*read, in_place=True)
