"""Several probes trained side by side on the same minibatches (a task and its control task, the
blocks of online MDL), each exactly as it would train alone: :class:`ModuleHeads` (torch modules, an
optimizer each), :class:`StackedLinear` (linear heads in one weight matrix, gradient and AdamW written
out; the span probe's twin is ``span_heads.StackedSpanLinear``, with :func:`adamw_update` shared) and
the early stopping they share (:func:`train_with_early_stopping`). ``config`` is a
``probes.ProbeConfig`` (``seed``, ``lr``, ``weight_decay``, ``epochs``, ``patience``, ``lr_decay``,
``optimizer``)."""

from __future__ import annotations

import copy
import math
from typing import Optional

import torch
from torch import nn


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


class ParameterAverage:
    """Polyak averaging of a probe's parameters: an exponential moving average of them over the
    steps (``decay`` per step, warmed up as ``min(decay, (1 + t) / (10 + t))`` so that early on it
    is a plain mean of the steps so far). Minibatch AdamW's iterates bounce around the optimum; their
    average sits nearer to it, and its dev score rises smoothly instead of bouncing. The average is
    what is evaluated and kept: :meth:`use` swaps it into the parameters (eval mode) and the live
    values back (train mode). ``decay`` 0: no averaging (the last step's parameters)."""

    def __init__(self, params: list, decay: float):
        self.params, self.decay, self.steps = params, decay, 0
        self.average = [p.clone() for p in params] if decay else None
        self._live = None  # the live parameters while the average is swapped in

    def update(self) -> None:
        if self.average is None:
            return
        self.steps += 1
        weight = 1 - min(self.decay, (1 + self.steps) / (10 + self.steps))
        torch._foreach_lerp_(self.average, self.params, weight)

    def use(self, averaged: bool) -> None:
        """Swap the average into the parameters (``True``) or the live values back (``False``)."""
        if self.average is None or averaged == (self._live is not None):
            return
        if averaged:
            self._live = [p.clone() for p in self.params]
        for p, value in zip(self.params, self.average if averaged else self._live):
            p.copy_(value)
        if not averaged:
            self._live = None


def minibatch_size(config, n_rows: int) -> int:
    """A probe's minibatch on ``n_rows`` training rows (or spans): ``config.batch_size``, or a
    sixteenth of a smaller set (at least 32), so that small sets still get enough updates."""
    return min(config.batch_size, max(32, n_rows // 16))


# fewer steps an epoch than this: no averaging (heads.average_decay)
AVERAGE_FROM_STEPS = 64


def average_decay(config, n_rows: Optional[int]) -> float:
    """The per-step decay of a probe's :class:`ParameterAverage` on ``n_rows`` training rows (or
    spans): ``config.average``, held to a horizon of at most half an epoch (``1 / (1 - decay) <= steps
    / 2``), and 0 (the last step's parameters) where an epoch has fewer than ``AVERAGE_FROM_STEPS``
    minibatches. On such small sets (a set under 16,384 rows is 16 minibatches of a sixteenth) the
    average lags the probe by epochs, and averaging moved near-chance scores by up to 0.015 either way
    (bigram_shift_ewt) and coref_gum's L1 by 0.012, with no time to gain: their probes take seconds."""
    if n_rows is None or not config.average:
        return config.average
    steps = -(-n_rows // minibatch_size(config, n_rows))
    return 0.0 if steps < AVERAGE_FROM_STEPS else min(config.average, 1 - 2 / steps)


def adamw_update(
    params: list, grads: list, moments: list, rates: list, step: int, weight_decay: float, shared_rate=None
) -> None:
    """One AdamW step in place, the arithmetic of ``torch.optim.AdamW`` (defaults betas and eps),
    with a learning rate per tensor that broadcasts to it (``rates``: 0 where a head has stopped);
    ``moments``: per tensor its two running averages, ``step``: counted from 1. With ``weight_decay``
    0 it is ``torch.optim.Adam``'s step. ``shared_rate``: the one learning rate of every tensor, where
    they all have the same (no head stopped or decayed apart): torch's fused AdamW kernel then takes
    the step in one call (a span probe's step: 133 -> 18 us), equal to the arithmetic below within a
    unit in the last place."""
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    if shared_rate is not None:
        avgs, squares = [m[0] for m in moments], [m[1] for m in moments]
        steps = [torch.tensor(float(step))] * len(params)
        torch._fused_adamw_(
            params, grads, avgs, squares, [], steps, lr=shared_rate, beta1=beta1, beta2=beta2,
            weight_decay=weight_decay, eps=eps, amsgrad=False, maximize=False,
        )  # fmt: skip
        return
    correction1, correction2 = 1 - beta1**step, math.sqrt(1 - beta2**step)
    for param, grad, (avg, avg_sq), rate in zip(params, grads, moments, rates):
        if weight_decay:
            param.mul_(1 - rate * weight_decay)
        avg.lerp_(grad, 1 - beta1)
        avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        param.sub_(rate / correction1 * avg / (avg_sq.sqrt() / correction2 + eps))


# ``auto`` takes bfloat16 from this many training rows, where a probe's minibatches reach 1,024 rows
# (``fit_probes`` takes a sixteenth of a smaller set) and the products are most of a step. On smaller
# sets the conversions cost more than the products save (subj_number_ewt, 9,700 sentences: 12.8 vs
# 9.7 s) and their early stopping moved with the rounding (scores by up to 0.013 there).
BFLOAT16_FROM_ROWS = 16 * 1024


def products_dtype(precision: str, n_rows: int = BFLOAT16_FROM_ROWS) -> torch.dtype:
    """The rows' dtype for a linear probe's products on ``n_rows`` training rows: ``float32``,
    ``bfloat16``, or ``auto``: bfloat16 where this CPU multiplies it natively (AMX or AVX-512 BF16: a
    step on 1,024 rows of 1,024 numbers 2.3x faster than float32, and half the memory; on this model's
    256 numbers a fit 1.0-1.2x) and the training set has ``BFLOAT16_FROM_ROWS`` rows, float32
    elsewhere (emulated bfloat16 is slower than float32)."""
    if precision == "auto" and n_rows < BFLOAT16_FROM_ROWS:
        return torch.float32
    if precision == "auto":
        try:
            native = torch.cpu._is_amx_tile_supported() or torch.cpu._is_avx512_bf16_supported()
        except AttributeError:  # a torch without these probes: take the safe path
            native = False
        precision = "bfloat16" if native else "float32"
    return torch.bfloat16 if precision == "bfloat16" else torch.float32


# MKL's float32 products give the same numbers, bit for bit, for ``x.T @ g`` computed as ``g.T @ x`` from this
# many columns up; below it another kernel sums in another order (scanned on an AVX2 CPU, where the committed
# runs were made, with this torch: 64-1,024 features, 7-25,000 rows, 1-129 columns: 4-11 differ). The shortcut
# is taken only from here, so that a probe's numbers do not depend on it (on other CPUs they may differ
# from the plain form's by float32 rounding).
SAME_SUMS_FROM_COLUMNS = 12


def _gradient_into(out: torch.Tensor, rows: torch.Tensor, g: torch.Tensor, buffer: torch.Tensor) -> None:
    """``out = rows.T @ g`` (``(dim, columns)``, float32) in the rows' dtype (bfloat16: float32
    accumulation, rounded once). In float32 with ``SAME_SUMS_FROM_COLUMNS`` or more columns it is computed
    as ``g.T @ rows`` into ``buffer`` (``(columns, dim)``) and copied across: the same numbers, faster
    (1,024 rows of 256, 34 columns: 0.355 -> 0.259 ms; a mix's 3,072 rows: 1.06 -> 0.72 ms)."""
    if rows.dtype != out.dtype:
        out.copy_(torch.mm(rows.T, g.to(rows.dtype)))
    elif g.shape[1] >= SAME_SUMS_FROM_COLUMNS:
        torch.mm(g.T, rows, out=buffer)
        out.copy_(buffer.T)
    else:
        torch.mm(rows.T, g, out=out)


class StackedLinear:
    """Linear softmax probes side by side in one weight matrix ``(dim, heads * n_classes)``: one
    product gives every head's logits for a minibatch, the cross-entropy gradient is written out
    (softmax minus one-hot), and AdamW runs on the stacked parameters with a learning rate per
    head (0 for a head that has stopped), the arithmetic of ``torch.optim.AdamW``. Each head starts
    from ``nn.Linear(dim, n_classes)`` after ``torch.manual_seed(seed)``, as a probe trained alone
    does. A minibatch of pos_ewt's L0 with the control task: 1.4 ms as modules with autograd and an
    optimizer each, 0.65 ms here (profiled: autograd, the optimizer's per-tensor loop and one product
    per head were most of it); 0.49-0.52 ms with the weights and biases in one tensor, the gradient
    written into a buffer and the per-parameter learning rates kept until a head stops or decays (the
    two products are then most of a step).

    Rows in bfloat16 (``ProbeConfig.precision``) make the two products bfloat16 with float32
    accumulation (the logits and gradient are rounded to bfloat16 once); the weights, the softmax
    and AdamW stay float32.

    With ``n_layers`` (a scalar mix, ``x`` of shape ``(B, n_layers, dim)``) each head also has its
    mix weights and ``gamma``; since the logits are linear in the mix, each layer's logits are one
    product for all heads and the heads mix those (``gamma_h * softmax(w_h) . Z[:, h]``), so no
    mixed copy of the minibatch is formed and the mix's gradient is written out too."""

    def __init__(self, dim: int, n_classes: int, n_heads: int, config, n_layers: Optional[int] = None, n_rows=None):
        weights, biases = [], []
        for _ in range(n_heads):
            torch.manual_seed(config.seed)
            layer = nn.Linear(dim, n_classes)
            weights.append(layer.weight.detach().T)
            biases.append(layer.bias.detach())
        # weights and biases in one tensor (the bias its last row), so that AdamW is one pass over it
        self.Wb = torch.cat([torch.cat(weights, 1), torch.cat(biases)[None]]).contiguous()  # (dim + 1, H * K)
        self.W, self.b = self.Wb[:-1], self.Wb[-1]  # views
        self.grad = torch.zeros_like(self.Wb)  # the minibatch's gradient, written in place
        self._gradient_t = torch.empty(self.W.shape[::-1])  # the weights' gradient as computed: _gradient_into
        self.mix = torch.zeros(n_heads, n_layers) if n_layers else None  # (H, n_layers), before the softmax
        self.gamma = torch.ones(n_heads) if n_layers else None
        self.params = [self.Wb] + ([self.mix, self.gamma] if n_layers else [])
        self.H, self.K, self.config = n_heads, n_classes, config
        self.lr = torch.full((n_heads,), config.lr)
        self.moments = [(torch.zeros_like(t), torch.zeros_like(t)) for t in self.params]
        self.steps = 0
        self._rates = None  # (active heads, the learning rates per parameter) until either changes
        self._minus_one = torch.full((1, n_heads, 1), -1.0)
        self.averaged = ParameterAverage(self.params, average_decay(config, n_rows))

    def __len__(self) -> int:
        return self.H

    def train(self, on: bool) -> None:
        self.averaged.use(not on)  # evaluated and kept: the averaged parameters

    def _per_column(self, per_head: torch.Tensor) -> torch.Tensor:
        """``(H, ...)`` -> ``(..., H * K)``: each head's value on its K logit columns."""
        return per_head.T.repeat_interleave(self.K, -1) if per_head.dim() > 1 else per_head.repeat_interleave(self.K)

    def _layer_logits(self, x: torch.Tensor) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
        """``(B, H * K)`` logits without the bias, and (mix only) each layer's ``(B, n_layers, H * K)``."""
        W = self.W if x.dtype == self.W.dtype else self.W.to(x.dtype)  # bfloat16 rows: bfloat16 products
        if self.mix is None:
            return (x @ W).float(), None
        # every (row, layer) pair is a row of one product: x is (B, n_layers, dim), contiguous
        Z = (x.reshape(-1, x.shape[-1]) @ W).float().view(len(x), -1, W.shape[1])  # (B, n_layers, H * K)
        coef = self.gamma[:, None] * torch.softmax(self.mix, -1)  # (H, n_layers)
        return (Z * self._per_column(coef)).sum(1), Z

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        return (self._layer_logits(x)[0] + self.b).view(len(x), self.H, self.K)

    def step(self, xb: torch.Tensor, yb: torch.Tensor, active: list[int]) -> None:
        """One AdamW step of the active heads on a minibatch; ``yb``: ``(B, H)`` label ids."""
        mixed, Z = self._layer_logits(xb)
        mixed += self.b
        p = torch.softmax(mixed.view(len(xb), self.H, self.K), -1)
        p.scatter_add_(2, yb[..., None], self._minus_one.expand(len(xb), -1, -1))  # softmax minus one-hot
        g = p.view(len(xb), -1).div_(len(xb))  # d(mean cross-entropy) / d(logits), per head
        torch.sum(g, 0, out=self.grad[-1])
        if Z is None:
            _gradient_into(self.grad[:-1], xb, g, self._gradient_t)
            grads = [self.grad]
        else:
            weights = torch.softmax(self.mix, -1)  # (H, n_layers)
            coef = self._per_column(self.gamma[:, None] * weights)  # (n_layers, H * K)
            # sum over layers of x_l.T @ (g * coef_l): one product over the (row, layer) pairs
            G = (g[:, None] * coef).view(-1, g.shape[1])  # (B * n_layers, H * K)
            _gradient_into(self.grad[:-1], xb.reshape(-1, xb.shape[-1]), G, self._gradient_t)
            dcoef = (g[:, None] * Z).sum(0).view(-1, self.H, self.K).sum(-1).T  # (H, n_layers)
            dweights = dcoef * self.gamma[:, None]
            dmix = weights * (dweights - (dweights * weights).sum(-1, keepdim=True))  # through the softmax
            grads = [self.grad, dmix, (dcoef * weights).sum(-1)]
        if self._rates is None or self._rates[0] != active:
            lr = torch.zeros(self.H)
            lr[active] = self.lr[active]  # 0 for a stopped head
            self._rates = (list(active), [self._per_column(lr), lr[:, None], lr])
        self.steps += 1
        adamw_update(self.params, grads, self.moments, self._rates[1], self.steps, self.config.weight_decay)
        self.averaged.update()

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
        self._rates = None

    def copy_head_into(self, h: int, probe: nn.Module) -> nn.Module:
        """Head ``h``'s parameters into a probe module (``probes._Probe``: ``net`` a ``nn.Linear``, with
        ``mix_weights`` and ``gamma`` for a mix), the module :class:`~.probes.TrainedProbe` predicts with."""
        cols = slice(h * self.K, (h + 1) * self.K)
        with torch.no_grad():
            probe.net.weight.copy_(self.W[:, cols].T)
            probe.net.bias.copy_(self.b[cols])
            if self.mix is not None:
                probe.mix_weights.copy_(self.mix[h])
                probe.gamma.copy_(self.gamma[h])
        return probe.eval()


def train_with_early_stopping(heads, run_epoch, dev_accuracies, config) -> list[tuple]:
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
