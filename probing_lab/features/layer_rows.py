"""The rows of one layer of cached features (:class:`LayerRows`), read from disk a chunk at a time or
gathered row by row, for probes that train on files of any size in bounded memory."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import numpy as np

from .activations import MEAN, take_layer

if TYPE_CHECKING:
    from .cache import Features


class LayerRows:
    """The rows of one layer key (``"1"``, ``"2f"``, ``"mean"``; ``"mix"``: every layer) of cached
    features, read from disk a chunk at a time: a probe trains on a file of any size in bounded
    memory. ``index`` selects and orders rows (None: all, in order); slicing or indexing with an
    array gives another view. ``read(lo, hi)`` -> float32 ``(hi - lo, dim)``, or
    ``(hi - lo, n_layers, dim)`` for "mix". ``chunk_rows``: how many rows make about 64 MiB."""

    CHUNK_BYTES = 64 << 20
    MIN_CHUNK_ROWS = 1024

    def __init__(self, features: "Features", key: str, index: Optional[np.ndarray] = None):
        self.features, self.key, self.index = features, key, index
        n_layers, n_tokens, dim = features.layers.shape
        if key == "mix":
            self.row_shape: tuple = (n_layers, dim)
        else:
            self.row_shape = (take_layer(features.layers[:, :1], key).shape[-1],) if key != MEAN else (dim,)
        self.n = n_tokens if index is None else len(index)
        self.chunk_rows = max(self.MIN_CHUNK_ROWS, self.CHUNK_BYTES // (4 * int(np.prod(self.row_shape))))
        self._map: Optional[np.ndarray] = None  # take()'s memory map, opened on its first call

    def __len__(self) -> int:
        return self.n

    def __getstate__(self) -> dict:  # to another process: without take()'s map (it would pickle the rows)
        return {**self.__dict__, "_map": None}

    @property
    def shape(self) -> tuple:
        return (self.n, *self.row_shape)

    def __getitem__(self, item) -> "LayerRows":
        rows = np.arange(self.features.n_tokens) if self.index is None else self.index
        return LayerRows(self.features, self.key, rows[item])

    def read(self, lo: int, hi: int) -> np.ndarray:
        # a fresh map per read, dropped after the copy: the pages read stay in the page cache
        # (fast next time) but not in this process's memory. Copy-on-write, as torch takes an array
        # to convert: nothing writes to it
        layers = np.load(self.features.path / "layers.npy", mmap_mode="c")
        rows = slice(lo, hi) if self.index is None else self.index[lo:hi]
        out = self._rows(layers, rows, max(0, min(hi, self.n) - lo))
        del layers
        return out

    def take(self, rows: np.ndarray) -> np.ndarray:
        """``read`` of the rows ``rows`` (indices into this view), through one memory map kept open
        for every call (opening one takes 0.13 ms: a span probe takes a few hundred rows a step),
        gathered and converted by torch (3-4x numpy's time on a float16 map). A "mix" is gathered a
        layer at a time (a layer's rows are contiguous on disk) and returned as a ``(rows, n_layers, dim)``
        view of ``(n_layers, rows, dim)`` memory: a third of the time of gathering each row's layers, and
        the layout the span probe mixes them in."""
        import torch

        if self._map is None:  # copy-on-write: an array torch takes as writable; nothing writes to it
            self._map = np.load(self.features.path / "layers.npy", mmap_mode="c")
        rows = np.asarray(rows, dtype=np.int64)
        rows = rows if self.index is None else self.index[rows]
        if self.key != "mix":  # a layer, or their mean: gathered as read() gathers an index
            return self._rows(self._map, rows, len(rows))
        layers = torch.index_select(torch.from_numpy(self._map), 1, torch.from_numpy(rows))
        return layers.float().permute(1, 0, 2).numpy()

    def _rows(self, layers: np.ndarray, rows, n: int) -> np.ndarray:
        """float32 ``(n, *row_shape)`` of ``layers[:, rows]``, the layer key's part. float16 is converted by
        torch: EWT's 204,577 training rows of a layer in 0.09-0.11 s, numpy's 0.15-0.48 s."""
        import torch

        if self.key == MEAN:
            return np.ascontiguousarray(layers[:, rows].astype(np.float32).mean(axis=0))
        source = torch.from_numpy(layers)
        if not isinstance(rows, slice):
            rows = torch.from_numpy(np.asarray(rows, dtype=np.int64))
        pick = (lambda x: x[rows]) if isinstance(rows, slice) else (lambda x: torch.index_select(x, 0, rows))
        if self.key == "mix":  # (rows, n_layers, dim), filled a layer at a time: contiguous float16 rows convert
            # fast and a transposed view slowly (numpy: EWT's 204,577 training rows 0.6 s against 4.5 s)
            out = torch.empty(n, len(layers), layers.shape[-1])
            for k in range(len(layers)):
                out[:, k] = pick(source[k])
            return out.numpy()
        return pick(take_layer(source, self.key)).float().contiguous().numpy()
