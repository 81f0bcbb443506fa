"""Probes: small classifiers trained on frozen token vectors.

``fit_probe(X, y, X_dev, y_dev, n_classes, ProbeConfig(...))`` trains a softmax probe in torch
(``kind``: ``linear``, ``mlp`` with one hidden layer, or ``rank``: a linear map through a
``rank``-dimensional bottleneck), with weight decay, a seed, and early stopping on dev accuracy
(the learning rate decays on a plateau). ``X`` is ``(N, dim)``, or ``(N, n_layers, dim)`` with
``mix=True``: a scalar mix (``gamma * softmax(w)``) learned with the probe. Features are
standardised with the training mean and deviation. Row sources (arrays, rows on disk) are in
:mod:`.rows`; training several probes side by side (and early stopping) in :mod:`.heads`; Voita &
Titov's online-code MDL in :mod:`.mdl`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..settings import config_from_dict
from .heads import ModuleHeads, StackedLinear, minibatch_size, products_dtype, train_with_early_stopping
from .rows import Standardised, _chunks, _standardise, as_rows, standardise, standardised


@dataclass(frozen=True)
class ProbeConfig:
    """The ``[probe]`` table of a token-level experiment (upos, deprel, dep_arc, wsd_linear, ...)."""

    kind: str = "linear"  # linear | mlp (one hidden layer) | rank (a linear map through a bottleneck)
    optimizer: str = "adamw"  # adamw (minibatches) | lbfgs (full batch; an "epoch" is ``lbfgs_steps`` iterations)
    lbfgs_steps: int = 25  # L-BFGS iterations per epoch
    hidden: int = 256  # mlp: hidden units
    rank: int = 32  # rank: bottleneck width
    lr: float = 1e-2  # AdamW's learning rate
    weight_decay: float = 1e-5  # AdamW's decoupled decay; for lbfgs the L2 weight (C = 1 / (weight_decay * N))
    epochs: int = 40  # at most
    batch_size: int = 1024  # AdamW minibatch (small training sets use smaller ones, see fit_probe)
    patience: int = 4  # epochs without a better dev score before stopping
    lr_decay: float = 0.7  # the learning rate is multiplied by this after each epoch without a better dev score
    seed: int = 0  # initialisation and minibatch order
    # linear probes trained with AdamW: evaluate and keep the parameters' moving average over the steps
    # (this decay per step, at most a horizon of half an epoch; none on a small set: heads.average_decay), 0: the
    # last step's
    average: float = 0.99
    mix: bool = False  # learn a scalar mix of all layers with the probe (X is (N, n_layers, dim))
    # token and sentence probes (linear, adamw): the products in bfloat16 | float32 | auto (bfloat16 where the
    # CPU has it, from heads.BFLOAT16_FROM_ROWS training rows). Span probes stay float32: their sentence-batched
    # step was 1.05-1.14x slower with bfloat16 products on two threads, within a few percent on one
    precision: str = "auto"

    POSITIVE = ("lbfgs_steps", "hidden", "rank", "lr", "epochs", "batch_size", "lr_decay")  # the rest: >= 0
    AT_MOST_ONE = ("lr_decay",)
    BELOW_ONE = ("average",)

    @classmethod
    def from_dict(cls, data: dict, where: str = "probe") -> "ProbeConfig":
        data = dict(data)
        if data.get("optimizer") == "adam":  # the old name of the same optimizer (it always was AdamW)
            warnings.warn(f'{where}: optimizer "adam" is now called "adamw" (the same optimizer)', stacklevel=2)
            data["optimizer"] = "adamw"
        config = config_from_dict(cls, data, where)
        if config.kind not in ("linear", "mlp", "rank"):
            raise ValueError(f"{where}: probe kind must be linear, mlp or rank, got {config.kind!r}")
        if config.optimizer not in ("adamw", "lbfgs"):
            raise ValueError(f"{where}: probe optimizer must be adamw or lbfgs, got {config.optimizer!r}")
        if config.precision not in ("auto", "float32", "bfloat16"):
            raise ValueError(f"{where}: probe precision must be auto, float32 or bfloat16, got {config.precision!r}")
        return config


def classifier(dim: int, n_classes: int, config: ProbeConfig) -> nn.Module:
    """The probe's classifier on ``dim`` features: linear, an MLP with one hidden layer, or a
    linear map through a rank bottleneck (``config.kind``)."""
    if config.kind == "linear":
        return nn.Linear(dim, n_classes)
    if config.kind == "mlp":
        return nn.Sequential(
            nn.Linear(dim, config.hidden), nn.ReLU(), nn.Dropout(0.1), nn.Linear(config.hidden, n_classes)
        )
    return nn.Sequential(nn.Linear(dim, config.rank, bias=False), nn.Linear(config.rank, n_classes))


class _Probe(nn.Module):
    def __init__(self, dim: int, n_classes: int, config: ProbeConfig, n_layers: int = 1):
        super().__init__()
        self.mix_weights = nn.Parameter(torch.zeros(n_layers)) if config.mix else None
        self.gamma = nn.Parameter(torch.ones(())) if config.mix else None
        self.net = classifier(dim, n_classes, config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.mix_weights is not None:
            w = torch.softmax(self.mix_weights, 0).view(1, -1, 1)
            x = self.gamma * (w * x).sum(1)
        return self.net(x)


@dataclass
class TrainedProbe:
    module: _Probe
    mean: torch.Tensor
    std: torch.Tensor
    n_classes: int
    epochs_run: int
    dev_accuracy: float
    history: list = field(default_factory=list)

    def _prep(self, X) -> torch.Tensor:
        return standardise(torch.as_tensor(np.asarray(X), dtype=torch.float32), self.mean, self.std)

    @torch.no_grad()
    def predict_proba(self, X, batch_size: int = 8192) -> np.ndarray:
        """``X``: an array, rows on disk (:class:`~probing_lab.features.layer_rows.LayerRows`), or rows
        standardised with this probe's training statistics (:class:`~.rows.Standardised`)."""
        self.module.eval()
        if isinstance(X, Standardised):
            if not X.shares_statistics(self.mean):
                raise ValueError("rows standardised with another training set's statistics: pass them unstandardised")
            batches = (X.z[i : i + batch_size] for i in range(0, len(X), batch_size))
        else:
            X = as_rows(X)
            batch_size = min(batch_size, X.chunk_rows)
            batches = (self._prep(X.read(i, min(i + batch_size, len(X)))) for i in range(0, len(X), batch_size))
        out = [torch.softmax(self.module(x), -1) for x in batches]
        return torch.cat(out).numpy() if out else np.zeros((0, self.n_classes), dtype=np.float32)

    def predict(self, X) -> np.ndarray:
        return self.predict_proba(X).argmax(-1)

    def accuracy(self, X, y) -> float:
        return float((self.predict(X) == np.asarray(y)).mean()) if len(y) else float("nan")

    def mix_weights(self) -> Optional[list[float]]:
        if self.module.mix_weights is None:
            return None
        return torch.softmax(self.module.mix_weights.detach(), 0).tolist()


def fit_probe(X, y, X_dev, y_dev, n_classes: int, config: ProbeConfig = ProbeConfig()) -> TrainedProbe:
    """Train on ``(X, y)``; keep the epoch with the best dev accuracy. ``X`` and ``X_dev`` are arrays,
    or rows on disk (``LayerRows``), which are read a chunk at a time: each epoch visits the chunks
    in a random order and shuffles inside each, so memory stays bounded whatever the data's size."""
    return fit_probes(X, [y], X_dev, [y_dev], n_classes, config)[0]


def fit_probes(X, ys: list, X_dev, ys_dev: list, n_classes: int, config: ProbeConfig = ProbeConfig()) -> list:
    """One probe per label set (``ys[i]`` with dev labels ``ys_dev[i]``: a task and its control
    task, say) on the same inputs, trained together: each minibatch is read and standardised once
    for all of them. Each probe has its own initialisation from ``config.seed``, learning-rate
    decay and early stopping, and sees the same minibatches in the same order, so it is the probe
    :func:`fit_probe` trains alone (an MLP's dropout draws aside). A linear probe trained with
    AdamW (the default, with or without a mix) runs as :class:`StackedLinear`; the others as modules
    with autograd.
    Returns the :class:`TrainedProbe` of each label set."""
    X, X_dev = standardised(X, X_dev)  # rows in memory: standardised here once (or already, by the caller)
    X, X_dev = (rows if isinstance(rows, Standardised) else as_rows(rows) for rows in (X, X_dev))
    Y = torch.stack([torch.as_tensor(np.asarray(y), dtype=torch.long) for y in ys], 1)  # (N, heads)
    Yd = torch.stack([torch.as_tensor(np.asarray(y), dtype=torch.long) for y in ys_dev], 1)
    if len(X) == 0:
        raise ValueError("no training examples for the probe")
    if config.mix and len(X.shape) != 3:
        raise ValueError("mix=True needs features (N, n_layers, dim)")
    mean, std = (X.mean, X.std) if isinstance(X, Standardised) else _standardise(X)
    stacked = config.kind == "linear" and config.optimizer == "adamw"
    dtype = products_dtype(config.precision, len(X)) if stacked else torch.float32

    def prep(rows, lo: int, hi: int) -> torch.Tensor:
        if isinstance(rows, Standardised):  # a view: nothing below writes into the rows
            return rows.z[lo:hi].to(dtype)
        # a new buffer: the rows read may be shared by every fit of the layer
        return standardise(torch.as_tensor(rows.read(lo, hi)), mean, std).to(dtype)

    chunks, dev_chunks = _chunks(X), _chunks(X_dev)
    if config.optimizer == "lbfgs":  # full batch: the whole training set in memory, by definition
        chunks = [(0, len(X))]
    # one chunk (an array in memory, or little data on disk) is read once and kept
    X_t = prep(X, *chunks[0]) if len(chunks) == 1 else None
    Xd = prep(X_dev, 0, len(X_dev)) if len(dev_chunks) <= 1 else None
    g = torch.Generator().manual_seed(config.seed)
    batch_size = minibatch_size(config, len(X))
    if stacked:
        heads = StackedLinear(X.shape[-1], n_classes, len(ys), config, X.shape[1] if config.mix else None, len(X))
    else:
        pairs = []
        for _ in ys:
            torch.manual_seed(config.seed)  # every probe starts where it would alone
            module = _Probe(X.shape[-1], n_classes, config, X.shape[1] if config.mix else 1)
            if config.optimizer == "lbfgs":
                optimizer = torch.optim.LBFGS(
                    module.parameters(),
                    lr=1.0,
                    max_iter=config.lbfgs_steps,
                    history_size=20,
                    line_search_fn="strong_wolfe",
                )
            else:
                optimizer = torch.optim.AdamW(module.parameters(), lr=config.lr, weight_decay=config.weight_decay)
            pairs.append((module, optimizer))
        heads = ModuleHeads(pairs)

    def full_batch_loss(h: int):
        module, optimizer = heads.pairs[h]
        weights = [p for name, p in module.named_parameters() if name.endswith("weight")]

        def closure() -> torch.Tensor:
            # L2 on the weights as in LogisticRegression (C = 1 / (weight_decay * N)), not on biases
            optimizer.zero_grad()
            loss = F.cross_entropy(module(X_t), Y[:, h]) + 0.5 * config.weight_decay * sum(
                (w * w).sum() for w in weights
            )
            loss.backward()
            return loss

        return closure

    def run_epoch(active: list[int]) -> None:
        if config.optimizer == "lbfgs":
            for h in active:
                heads.pairs[h][1].step(full_batch_loss(h))
            return
        visit = torch.randperm(len(chunks), generator=g).tolist() if len(chunks) > 1 else [0]
        for c in visit:
            lo, hi = chunks[c]
            Xc = X_t if X_t is not None else prep(X, lo, hi)
            order = torch.randperm(hi - lo, generator=g)
            for i in range(0, len(order), batch_size):
                idx = order[i : i + batch_size]
                xb = torch.index_select(Xc, 0, idx)  # faster than Xc[idx] on CPU, the same rows
                yb = torch.index_select(Y[lo:hi], 0, idx)  # 7 us a step, Y[lo:hi][idx] 11 us
                if stacked:
                    heads.step(xb, yb, active)
                    continue
                loss = sum(F.cross_entropy(heads.pairs[h][0](xb), yb[:, h]) for h in active)
                for h in active:
                    heads.pairs[h][1].zero_grad()
                loss.backward()  # each head's gradient is that of its own loss
                for h in active:
                    heads.pairs[h][1].step()

    def predicted(xd: torch.Tensor, active: list[int]) -> torch.Tensor:
        """``(n, len(active))`` label ids."""
        if stacked:
            return heads.logits(xd)[:, active].argmax(-1)
        return torch.stack([heads.pairs[h][0](xd).argmax(-1) for h in active], 1)

    def dev_accuracies(active: list[int]) -> list[float]:
        if not len(Yd):
            return [0.0] * len(active)
        right = torch.zeros(len(active))
        for lo, hi in dev_chunks:
            xd = Xd if Xd is not None else prep(X_dev, lo, hi)
            right += (predicted(xd, active) == Yd[lo:hi, active]).sum(0)
        return (right / len(Yd)).tolist()

    results = train_with_early_stopping(heads, run_epoch, dev_accuracies, config)
    modules = [
        heads.copy_head_into(h, _Probe(X.shape[-1], n_classes, config, X.shape[1] if config.mix else 1))
        if stacked
        else heads.pairs[h][0]
        for h in range(len(ys))
    ]
    return [
        TrainedProbe(module, mean, std, n_classes, epochs_run, best, history)
        for module, (best, epochs_run, history) in zip(modules, results)
    ]
