"""Probes: small classifiers trained on frozen token vectors.

``fit_probe(X, y, X_dev, y_dev, n_classes, ProbeConfig(...))`` trains a softmax probe in torch
(``kind``: ``linear``, ``mlp`` with one hidden layer, or ``rank``: a linear map through a
``rank``-dimensional bottleneck), with weight decay, a seed, and early stopping on dev accuracy
(the learning rate decays on a plateau). ``X`` is ``(N, dim)``, or ``(N, n_layers, dim)`` with
``mix=True``: a scalar mix (``gamma * softmax(w)``) learned with the probe. Features are
standardised with the training mean and deviation. Row sources (arrays, rows on disk) are in
:mod:`.rows`; Voita & Titov's online-code MDL is in :mod:`.mdl`.
"""

from __future__ import annotations

import copy
import math
import warnings
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..settings import config_from_dict
from .rows import _chunks, _standardise, as_rows


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
    mix: bool = False  # learn a scalar mix of all layers with the probe (X is (N, n_layers, dim))

    POSITIVE = ("lbfgs_steps", "hidden", "rank", "lr", "epochs", "batch_size", "lr_decay")  # the rest: >= 0
    AT_MOST_ONE = ("lr_decay",)

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
        return (torch.as_tensor(np.asarray(X), dtype=torch.float32) - self.mean) / self.std

    @torch.no_grad()
    def predict_proba(self, X, batch_size: int = 8192) -> np.ndarray:
        """``X``: an array, or rows on disk (:class:`~probing_lab.features.cache.LayerRows`)."""
        self.module.eval()
        X = as_rows(X)
        batch_size = min(batch_size, X.chunk_rows)
        out = [
            torch.softmax(self.module(self._prep(X.read(i, min(i + batch_size, len(X))))), -1)
            for i in range(0, len(X), batch_size)
        ]
        return torch.cat(out).numpy() if out else np.zeros((0, self.n_classes), dtype=np.float32)

    def predict(self, X) -> np.ndarray:
        return self.predict_proba(X).argmax(-1)

    def accuracy(self, X, y) -> float:
        return float((self.predict(X) == np.asarray(y)).mean()) if len(y) else float("nan")

    def mix_weights(self) -> Optional[list[float]]:
        if self.module.mix_weights is None:
            return None
        return torch.softmax(self.module.mix_weights.detach(), 0).tolist()


class ModuleHeads:
    """Probes as torch modules, each with its own optimizer: ``[(module, optimizer), ...]``. What
    :func:`train_with_early_stopping` needs of a set of heads: keep and restore a head's best
    state, decay its learning rate, switch train / eval mode."""

    def __init__(self, pairs: list):
        self.pairs = pairs

    def __len__(self) -> int:
        return len(self.pairs)

    def train(self, on: bool) -> None:
        for module, _ in self.pairs:
            module.train(on)

    def snapshot(self, h: int):
        return copy.deepcopy(self.pairs[h][0].state_dict())

    def restore(self, h: int, state) -> None:
        self.pairs[h][0].load_state_dict(state)

    def decay(self, h: int, factor: float) -> None:
        for group in self.pairs[h][1].param_groups:
            group["lr"] *= factor


class StackedLinear:
    """Linear softmax probes side by side in one weight matrix ``(dim, heads * n_classes)``: one
    product gives every head's logits for a minibatch, the cross-entropy gradient is written out
    (softmax minus one-hot), and AdamW runs on the stacked parameters with a learning rate per
    head (0 for a head that has stopped), the arithmetic of ``torch.optim.AdamW``. Each head starts
    from ``nn.Linear(dim, n_classes)`` after ``torch.manual_seed(seed)``, as a probe trained alone
    does. A minibatch of pos_ewt's L0 with the control task: 1.4 ms as modules with autograd and an
    optimizer each, 0.65 ms here (profiled: autograd, the optimizer's per-tensor loop and one product
    per head were most of it).

    With ``n_layers`` (a scalar mix, ``x`` of shape ``(B, n_layers, dim)``) each head also has its
    mix weights and ``gamma``; since the logits are linear in the mix, each layer's logits are one
    product for all heads and the heads mix those (``gamma_h * softmax(w_h) . Z[:, h]``), so no
    mixed copy of the minibatch is formed and the mix's gradient is written out too."""

    def __init__(self, dim: int, n_classes: int, n_heads: int, config: ProbeConfig, n_layers: Optional[int] = None):
        weights, biases = [], []
        for _ in range(n_heads):
            torch.manual_seed(config.seed)
            layer = nn.Linear(dim, n_classes)
            weights.append(layer.weight.detach().T)
            biases.append(layer.bias.detach())
        self.W = torch.cat(weights, 1).contiguous()  # (dim, H * K)
        self.b = torch.cat(biases).contiguous()
        self.mix = torch.zeros(n_heads, n_layers) if n_layers else None  # (H, n_layers), before the softmax
        self.gamma = torch.ones(n_heads) if n_layers else None
        self.params = [self.W, self.b] + ([self.mix, self.gamma] if n_layers else [])
        self.H, self.K, self.config = n_heads, n_classes, config
        self.lr = torch.full((n_heads,), config.lr)
        self.moments = [(torch.zeros_like(t), torch.zeros_like(t)) for t in self.params]
        self.steps = 0

    def __len__(self) -> int:
        return self.H

    def train(self, on: bool) -> None:
        pass  # no dropout

    def _per_column(self, per_head: torch.Tensor) -> torch.Tensor:
        """``(H, ...)`` -> ``(..., H * K)``: each head's value on its K logit columns."""
        return per_head.T.repeat_interleave(self.K, -1) if per_head.dim() > 1 else per_head.repeat_interleave(self.K)

    def _layer_logits(self, x: torch.Tensor) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
        """``(B, H * K)`` logits without the bias, and (mix only) each layer's ``(n_layers, B, H * K)``."""
        if self.mix is None:
            return x @ self.W, None
        Z = torch.matmul(x.transpose(0, 1), self.W)  # (n_layers, B, H * K)
        coef = self.gamma[:, None] * torch.softmax(self.mix, -1)  # (H, n_layers)
        return (Z * self._per_column(coef)[:, None]).sum(0), Z

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        return (self._layer_logits(x)[0] + self.b).view(len(x), self.H, self.K)

    def step(self, xb: torch.Tensor, yb: torch.Tensor, active: list[int]) -> None:
        """One AdamW step of the active heads on a minibatch; ``yb``: ``(B, H)`` label ids."""
        mixed, Z = self._layer_logits(xb)
        p = torch.softmax((mixed + self.b).view(len(xb), self.H, self.K), -1)
        p.view(-1, self.K)[torch.arange(p.shape[0] * self.H), yb.reshape(-1)] -= 1.0
        g = (p / len(xb)).view(len(xb), -1)  # d(mean cross-entropy) / d(logits), per head
        if Z is None:
            grads = [xb.T @ g, g.sum(0)]
        else:
            weights = torch.softmax(self.mix, -1)  # (H, n_layers)
            coef = self._per_column(self.gamma[:, None] * weights)  # (n_layers, H * K)
            dW = torch.matmul(xb.permute(1, 2, 0), g[None] * coef[:, None]).sum(0)
            dcoef = (g[None] * Z).sum(1).view(-1, self.H, self.K).sum(-1).T  # (H, n_layers)
            dweights = dcoef * self.gamma[:, None]
            dmix = weights * (dweights - (dweights * weights).sum(-1, keepdim=True))  # through the softmax
            grads = [dW, g.sum(0), dmix, (dcoef * weights).sum(-1)]
        lr = torch.zeros(self.H)
        lr[active] = self.lr[active]
        rates = [self._per_column(lr), self._per_column(lr), lr[:, None], lr]  # 0 for a stopped head
        self.steps += 1
        beta1, beta2, eps, wd = 0.9, 0.999, 1e-8, self.config.weight_decay
        correction1, correction2 = 1 - beta1**self.steps, math.sqrt(1 - beta2**self.steps)
        for param, grad, (avg, avg_sq), rate in zip(self.params, grads, self.moments, rates):
            param.mul_(1 - rate * wd)
            avg.lerp_(grad, 1 - beta1)
            avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            param.sub_(rate / correction1 * avg / (avg_sq.sqrt() / correction2 + eps))

    def snapshot(self, h: int):
        cols = slice(h * self.K, (h + 1) * self.K)
        return [self.W[:, cols].clone(), self.b[cols].clone()] + (
            [] if self.mix is None else [self.mix[h].clone(), self.gamma[h].clone()]
        )

    def restore(self, h: int, state) -> None:
        cols = slice(h * self.K, (h + 1) * self.K)
        self.W[:, cols], self.b[cols] = state[:2]
        if self.mix is not None:
            self.mix[h], self.gamma[h] = state[2:]

    def decay(self, h: int, factor: float) -> None:
        self.lr[h] *= factor

    def module(self, h: int, config: ProbeConfig) -> "_Probe":
        """Head ``h`` as the probe module :class:`TrainedProbe` predicts with."""
        n_layers = 1 if self.mix is None else self.mix.shape[1]
        module = _Probe(self.W.shape[0], self.K, config, n_layers)
        cols = slice(h * self.K, (h + 1) * self.K)
        with torch.no_grad():
            module.net.weight.copy_(self.W[:, cols].T)
            module.net.bias.copy_(self.b[cols])
            if self.mix is not None:
                module.mix_weights.copy_(self.mix[h])
                module.gamma.copy_(self.gamma[h])
        return module.eval()


def train_with_early_stopping(heads, run_epoch, dev_accuracies, config: ProbeConfig) -> list[tuple]:
    """Train several probes side by side (``heads``: :class:`ModuleHeads` or :class:`StackedLinear`).
    Up to ``config.epochs`` calls of ``run_epoch(active)`` (the indices of the heads still
    training); after each, ``dev_accuracies(active)`` (in eval mode, without gradients) gives their
    dev scores. A head stops after ``patience`` epochs without a better dev score; each such epoch
    multiplies its AdamW learning rate by ``lr_decay`` (a plateau: smaller steps settle into the
    optimum). Each head decides alone, so a head trains exactly as it would without the others.
    Leaves every head at its best epoch; returns per head (best dev accuracy, epochs run, history)."""
    n = len(heads)
    best, best_state, bad = [-1.0] * n, [None] * n, [0] * n
    epochs_run, history = [0] * n, [[] for _ in range(n)]
    active = list(range(n))
    for epoch in range(1, config.epochs + 1):
        for h in active:
            epochs_run[h] = epoch  # the epoch that stopped it, or the last one
        heads.train(True)
        run_epoch(active)
        heads.train(False)
        with torch.no_grad():
            scores = dev_accuracies(active)
        still = []
        for h, acc in zip(active, scores):
            history[h].append(acc)
            if acc > best[h] + 1e-5:
                best[h], best_state[h], bad[h] = acc, heads.snapshot(h), 0
                still.append(h)
                continue
            bad[h] += 1
            if bad[h] >= config.patience:
                continue
            still.append(h)
            if config.optimizer == "adamw":
                heads.decay(h, config.lr_decay)
        active = still
        if not active:
            break
    for h, state in enumerate(best_state):
        heads.restore(h, state)
    return list(zip(best, epochs_run, history))


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
    X, X_dev = as_rows(X), as_rows(X_dev)
    Y = torch.stack([torch.as_tensor(np.asarray(y), dtype=torch.long) for y in ys], 1)  # (N, heads)
    Yd = torch.stack([torch.as_tensor(np.asarray(y), dtype=torch.long) for y in ys_dev], 1)
    if len(X) == 0:
        raise ValueError("no training examples for the probe")
    if config.mix and len(X.shape) != 3:
        raise ValueError("mix=True needs features (N, n_layers, dim)")
    mean, std = _standardise(X)

    def prep(rows, lo: int, hi: int) -> torch.Tensor:
        return (torch.as_tensor(rows.read(lo, hi)) - mean) / std

    chunks, dev_chunks = _chunks(X), _chunks(X_dev)
    if config.optimizer == "lbfgs":  # full batch: the whole training set in memory, by definition
        chunks = [(0, len(X))]
    # one chunk (an array in memory, or little data on disk) is read once and kept
    X_t = prep(X, *chunks[0]) if len(chunks) == 1 else None
    Xd = prep(X_dev, 0, len(X_dev)) if len(dev_chunks) <= 1 else None
    g = torch.Generator().manual_seed(config.seed)
    stacked = config.kind == "linear" and config.optimizer == "adamw"
    if stacked:
        heads = StackedLinear(X.shape[-1], n_classes, len(ys), config, X.shape[1] if config.mix else None)
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

    batch_size = min(config.batch_size, max(32, len(X) // 16))  # small sets still get enough updates

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
                yb = Y[lo:hi][idx]
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
    modules = [heads.module(h, config) if stacked else heads.pairs[h][0] for h in range(len(ys))]
    return [
        TrainedProbe(module, mean, std, n_classes, epochs_run, best, history)
        for module, (best, epochs_run, history) in zip(modules, results)
    ]
