"""The linear span probes' fast path: :class:`StackedSpanLinear`, several linear span probes (a task
and its control task; several layers of one model) trained side by side with the gradient and AdamW
written out, what ``span_probe.fit_span_probes`` and ``fit_span_layers`` run for ``kind = "linear"``
(the span twin of ``heads.StackedLinear``)."""

from __future__ import annotations

import warnings
from typing import Optional

import torch
from torch import nn

from .heads import ParameterAverage, adamw_update, average_decay
from .probes import ProbeConfig
from .span_batches import SpanRole, TokenBatch

# A span whose pool weights sum below this (its tokens all score ~46 or more below their run's maximum) is
# pooled from its (span, token) pairs instead, each span shifted by its own maximum: float32's exp underflows
TINY_POOL_WEIGHT = 1e-20


# torch says so once per process, at the first CSR tensor; the one use here is a product (matmul), long supported
warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta", category=UserWarning)


def _sums(pointers: torch.Tensor, columns: torch.Tensor, shape: tuple, values: torch.Tensor) -> torch.Tensor:
    """``A @ values`` for the 0/1 matrix ``A`` in CSR form (a minibatch's span x token membership, or its
    transpose: ``SpanRole.members``, valid by construction): each span's sum over its tokens, or each
    token's over its spans. At a layer-fused step's width (8 heads) a product took ~55 us where a
    float64 prefix sum over the tokens took ~170 (torch's cumsum down rows is slow)."""
    A = torch.sparse_csr_tensor(pointers, columns, torch.ones(len(columns)), shape, check_invariants=False)
    return A @ values


class StackedSpanLinear:
    """Linear span probes (``kind = "linear"``) side by side, as :class:`~.heads.StackedLinear` is for
    token probes: the heads' weights in one matrix, the gradient written out, AdamW with a learning
    rate per head (:func:`~.heads.adamw_update`).

    A step reads a :class:`~.span_batches.TokenBatch` (whole sentences' spans, each token once):
    every token is projected once onto all columns (first, last, pool and attention, every head and
    span role), then each span takes its first and last token's projections and the
    attention-weighted sum of its tokens' pool projections (a softmax within each span, as sums over
    the span's tokens: :meth:`_pool`). Projecting before pooling is what sharing tokens pays for: a sentence's
    ~25 tokens serve its ~25 constituents. With a mix, each head mixes the layers of the tokens with
    its own coefficients and projects the result onto its own columns (all of it is linear in the
    mix): the products of one layer, where projecting every layer took one per layer.

    ``layers``: with tokens of every layer ``(n, n_layers, dim)``, per head the layer it reads (an int;
    its module has no mix) or None (a mix, learned; its module has one): the probes of several layer
    entries of one model train side by side, each as it would alone, sharing each step's reading of the
    minibatch and its few dozen small operations (on constituents, more of a step's time than its
    products). Consecutive heads that read one layer are projected together (one product).

    ``W_all``: ``(dim, H * P)``, head by head (a head's columns side by side, so that heads that read one
    input are one product, with no reordering); per head, per span role ``r``, ``[first | last | pool]``
    (``K`` each) then its attention vector; ``c[r]``: the attention biases ``(H,)``; ``b``: ``(H * K,)``.
    Built from ``span_probe.SpanProbe`` modules initialised as a probe trained alone is.

    ``folded``: per role, whether every span it will see (training and dev) is one token long (a
    dependency arc's head and dependent). Its first, last and pool blocks then read the same token and
    get the same gradient, so AdamW moves the three alike: such a role trains their mean ``M`` (``K``
    columns per head, the spans' scores read ``3 M``), a third of the AdamW work, and keeps what tells
    the blocks apart: each block is ``M + D (its start - M's start)`` and its attention vector ``D``
    times its start, ``D`` the head's product of weight-decay factors so far (``decayed``)."""

    def __init__(
        self,
        modules: list[nn.Module],
        config: ProbeConfig,
        folded: Optional[list[bool]] = None,
        n_spans=None,
        layers: Optional[list[Optional[int]]] = None,
    ):
        first = modules[0]
        self.H, self.K = len(modules), first.net.out_features
        K, dim, R = self.K, first.attention[0].in_features, len(first.attention)
        self.folded = list(folded) if folded else [False] * R
        self.widths = [K if fold else 3 * K + 1 for fold in self.folded]  # a head's columns per role
        self.starts = torch.tensor([0] + self.widths).cumsum(0).tolist()  # where each role's columns begin, per head
        heads, self._offsets = [], []
        for m in modules:
            weight, roles, offsets = m.net.weight.detach(), [], []
            for r, fold in enumerate(self.folded):
                blocks = [weight[:, (3 * r + p) * dim : (3 * r + p + 1) * dim].T for p in range(3)]  # (dim, K) each
                attention = m.attention[r].weight.detach().T  # (dim, 1)
                if fold:
                    mean = sum(blocks) / 3
                    offsets.append(([block - mean for block in blocks], attention[:, 0].clone()))
                    roles.append(mean)
                else:
                    offsets.append(None)
                    roles.append(torch.cat(blocks + [attention], 1))
            heads.append(torch.cat(roles, 1))
            self._offsets.append(offsets if any(self.folded) else None)
        self.P = self.starts[-1]
        self.W_all = torch.stack(heads, 1).reshape(dim, -1).contiguous()  # (dim, H * P)
        self.W3 = self.W_all.view(dim, self.H, self.P)
        self.c = [torch.cat([m.attention[r].bias.detach() for m in modules]).clone() for r in range(R)]
        self.decayed = torch.ones(self.H)
        self.b = torch.cat([m.net.bias.detach() for m in modules]).clone()
        self.mixed = [h for h, m in enumerate(modules) if m.mix_weights is not None]  # the heads that learn a mix
        if layers is not None and [h for h, layer in enumerate(layers) if layer is None] != self.mixed:
            raise ValueError("a head reads one layer (its module has no mix) or learns a mix (None)")
        mixed = bool(self.mixed)
        self.mix = torch.stack([modules[h].mix_weights.detach() for h in self.mixed]).clone() if mixed else None
        self.gamma = torch.stack([modules[h].gamma.detach() for h in self.mixed]).clone() if mixed else None
        # the inputs: runs of consecutive heads (first, end) and what they read, a layer or the m-th mix (as
        # m - M); None: the tokens as they are, one layer, for every head (one product)
        self.inputs = None if layers is None and not mixed else self._inputs(layers)
        # AdamW's parameters; the attention biases only decay: they shift all of a softmax's scores, so
        # their gradient is 0 and AdamW's step on them is its weight decay alone
        self.params = [self.W_all, self.b] + ([self.mix, self.gamma] if mixed else [])
        self.moments = [(torch.zeros_like(t), torch.zeros_like(t)) for t in self.params]
        self.lr = torch.full((self.H,), config.lr)
        self.weight_decay, self.steps = config.weight_decay, 0
        self._rates = None  # (active heads, the learning rates per parameter) until either changes
        # averaged: AdamW's parameters and D (a folded role's blocks are M + D (start - M's start), so the
        # average of unfolded blocks is the average M's plus the average D's); the attention biases only decay
        self.averaged = ParameterAverage(self.params + [self.decayed], average_decay(config, n_spans))

    def __len__(self) -> int:
        return self.H

    def train(self, on: bool) -> None:
        self.averaged.use(not on)  # evaluated and kept: the averaged parameters

    def _inputs(self, layers: Optional[list]) -> list[tuple[int, int, int]]:
        """``(first head, end head, input)`` per run of consecutive heads that read one input: a layer, or
        ``m - M`` for the ``m``-th of the ``M`` mixed heads (each a run of its own)."""
        layers = [None] * self.H if layers is None else layers
        M = len(self.mixed)
        reads = [self.mixed.index(h) - M if layer is None else layer for h, layer in enumerate(layers)]
        runs = []
        for h, read in enumerate(reads):
            if runs and runs[-1][2] == read and read >= 0:
                runs[-1] = (runs[-1][0], h + 1, read)
            else:
                runs.append((h, h + 1, read))
        return runs

    def _coefficients(self) -> Optional[torch.Tensor]:
        """The mixed heads' layer coefficients ``gamma * softmax(w)``, ``(M, n_layers)``; None without a mix."""
        return None if self.mix is None else self.gamma[:, None] * torch.softmax(self.mix, -1)

    def _layout(self, single: list[bool]) -> list[tuple[int, int]]:
        """Per span role, where its columns begin in a head's projections and how many: ``K`` for a role
        whose spans are all one token long (its first, last and pool blocks read the same token: summed,
        a folded role's ``3 M``; the softmax of one score is 1: no attention column), else ``3 K + 1``."""
        out, at = [], 0
        for one in single:
            out.append((at, self.K if one else 3 * self.K + 1))
            at += out[-1][1]
        return out

    def _weights(self, single: list[bool]) -> torch.Tensor:
        """The columns ``(dim, H * P')`` a minibatch projects its tokens onto: ``W_all``, or with one-token
        roles their blocks summed (:meth:`_layout`)."""
        if not any(single):  # no folded role either: its spans are one token long
            return self.W_all
        K, pieces = self.K, []
        for r, (one, fold) in enumerate(zip(single, self.folded)):
            W = self.W3[:, :, self.starts[r] : self.starts[r + 1]]
            pieces.append(3 * W if fold else W[..., :K] + W[..., K : 2 * K] + W[..., 2 * K : 3 * K] if one else W)
        return torch.cat(pieces, 2).reshape(len(self.W_all), -1)

    def _forward(self, batch: TokenBatch, active: Optional[list[int]] = None) -> tuple[torch.Tensor, tuple]:
        """Logits ``(B, H, K)`` and what the gradient needs: the columns' layout, per span role what its
        pool's gradient needs (:meth:`_pool`; None for a role of one-token spans), and the inputs'.
        ``active``: the heads still training (the others' logits are not used: an input none of them
        reads is not projected)."""
        H, K = self.H, self.K
        single = [role.one_token for role in batch.roles]
        if any(fold and not one for one, fold in zip(single, self.folded)):
            raise ValueError("a folded span role got spans longer than one token")
        layout = self._layout(single)
        W = self._weights(single)
        if self.inputs is None:
            mixed, inputs = batch.tokens @ W, None  # (n, H * P'): each token projected once for all its spans
        else:
            mixed, inputs = self._projections(batch.tokens, W, active)
        n = len(mixed)
        per_head = mixed.view(n, H, -1)
        logits, pools = self.b.view(H, K), []
        for r, (role, (at, width)) in enumerate(zip(batch.roles, layout)):
            logits = logits + per_head[..., at : at + K].index_select(0, role.first)
            if width == K:
                pools.append(None)
                continue
            logits = logits + per_head[..., at + K : at + 2 * K].index_select(0, role.last)
            V, scores = per_head[..., at + 2 * K : at + 3 * K], per_head[..., at + 3 * K]
            pooled, kept = self._pool(V, scores + self.c[r], role, batch.runs)
            logits = logits + pooled
            pools.append(kept)
        return logits, (layout, pools, inputs)

    def _pool(self, V: torch.Tensor, scores: torch.Tensor, role: SpanRole, runs: torch.Tensor) -> tuple:
        """Each span's attention pool of its tokens' pool projections ``V`` ``(n, H, K)`` with attention
        scores ``(n, H)``: ``(B, H, K)``. As sums over the spans' tokens: with ``u = exp(score - the
        maximum of its run of rows)``, a token's weight before its span's normalisation (the same for every
        span that holds it; a softmax does not change with the shift), a span's pool is its sum of ``u V``
        over its sum of ``u``, products with the 0/1 span x token membership (:func:`_sums`), where every
        (span, token) pair was gathered, weighted and summed. Where a span's tokens all score far below
        their run's maximum (``u`` would underflow), the pairs' own softmax (each span shifted by its
        maximum) is taken instead."""
        (n, H, K), B = V.shape, len(role.first)
        top = torch.full((int(runs[-1]) + 1, H), float("-inf"))
        top.scatter_reduce_(0, runs[:, None].expand(-1, H), scores, "amax")
        u = (scores - top[runs]).exp_()
        pointers, rows = role.members[:2]
        NZ = _sums(pointers, rows, (B, n), torch.cat([(u[..., None] * V).view(n, H * K), u], 1))  # (B, H * K + H)
        Z = NZ[:, H * K :]
        if bool((Z > TINY_POOL_WEIGHT).all()):
            pooled = NZ[:, : H * K].view(B, H, K) / Z[..., None]
            return pooled, ("tokens", u, V, Z, pooled)
        rows, span_of = role.pairs()
        s = scores.index_select(0, rows)  # (P, H)
        top = torch.full((B, H), float("-inf")).scatter_reduce_(0, span_of[:, None].expand(-1, H), s, "amax")
        e = (s - top[span_of]).exp_()
        alpha = e / torch.zeros(B, H).index_add_(0, span_of, e)[span_of]  # softmax within each span
        Vp = V.index_select(0, rows)  # (P, H, K)
        pooled = torch.zeros(B, H, K).index_add_(0, span_of, alpha[..., None] * Vp)
        return pooled, ("pairs", alpha, Vp, rows, span_of)

    def _projections(self, tokens: torch.Tensor, W: torch.Tensor, active=None) -> tuple[torch.Tensor, tuple]:
        """Tokens of every layer ``(n, n_layers, dim)``: each run of heads' columns projected from its
        input, a layer or its head's mix (``(M, n, dim)``, its coefficients), into its columns of the
        projections ``(n, H * P')`` (one product per input; zeros for an input whose heads have all
        stopped). Returns them and what the gradient needs."""
        n, n_layers, dim = tokens.shape
        layers = tokens.transpose(0, 1).reshape(n_layers, -1)  # (nl, n * dim)
        coef = self._coefficients()
        mixes = None if coef is None else (coef @ layers).view(-1, n, dim)  # (M, n, dim)
        xs = [mixes[read] if read < 0 else tokens[:, read] for _, _, read in self.inputs]  # mixes[m - M]: mix m
        if len(xs) == 1:
            return xs[0] @ W, (layers, xs, [slice(None)], W, [True])
        width = W.shape[1] // self.H
        columns = [slice(h0 * width, h1 * width) for h0, h1, _ in self.inputs]
        live = [active is None or any(h0 <= h < h1 for h in active) for h0, h1, _ in self.inputs]
        out = torch.empty(n, W.shape[1])
        for x, cols, on in zip(xs, columns, live):
            if on:
                torch.mm(x, W[:, cols], out=out[:, cols])
            else:
                out[:, cols] = 0.0
        return out, (layers, xs, columns, W, live)

    def logits(self, batch: TokenBatch) -> torch.Tensor:
        """``(B, H, K)``: every head's logits."""
        return self._forward(batch)[0]

    def step(self, batch: TokenBatch, yb: torch.Tensor, active: list[int]) -> None:
        """One AdamW step of the active heads on a minibatch; ``yb``: ``(B, H)`` label ids."""
        logits, (layout, pools, inputs) = self._forward(batch, active)
        H, K = self.H, self.K
        B, n = len(yb), len(batch.tokens)
        g = torch.softmax(logits, -1)
        g.view(-1, K).scatter_add_(1, yb.reshape(-1, 1), torch.full((B * H, 1), -1.0))
        g /= B  # d(mean cross-entropy) / d(logits), per head: (B, H, K)
        width = sum(w for _, w in layout)
        d_mixed = torch.empty(n, H, width)  # d loss / d each token's projections: every column set, role by role
        for role, kept, (at, _) in zip(batch.roles, pools, layout):
            # summed into contiguous memory, then copied: index_add_ into a strided slice was ~8x slower
            d_mixed[..., at : at + K] = torch.zeros(n, H, K).index_add_(0, role.first, g)
            if kept is None:
                continue
            d_mixed[..., at + K : at + 2 * K] = torch.zeros(n, H, K).index_add_(0, role.last, g)
            d_V, d_score = d_mixed[..., at + 2 * K : at + 3 * K], d_mixed[..., at + 3 * K]
            if kept[0] == "tokens":  # pooled = N / Z, N = A (u V), Z = A u
                _, u, V, Z, pooled = kept
                dN = g / Z[..., None]
                dZ = -(g * pooled).sum(-1) / Z
                pointers, spans = role.members[2:]
                dT = _sums(pointers, spans, (n, B), torch.cat([dN.view(B, H * K), dZ], 1))  # d / d (u V), d / d u
                d_uV = dT[:, : H * K].view(n, H, K)
                d_V.copy_(u[..., None] * d_uV)
                d_score.copy_(u * (dT[:, H * K :] + (V * d_uV).sum(-1)))  # d u / d score = u
            else:
                _, alpha, Vp, rows, span_of = kept
                gv = g.index_select(0, span_of)  # (P, H, K)
                d_alpha = (Vp * gv).sum(-1)  # (P, H)
                centre = torch.zeros(B, H).index_add_(0, span_of, alpha * d_alpha)[span_of]
                d_V.zero_()
                d_score.zero_()
                d_V.index_add_(0, rows, alpha[..., None] * gv)
                d_score.index_add_(0, rows, alpha * (d_alpha - centre))  # through the softmax
        d_mixed = d_mixed.view(n, -1)
        if inputs is None:
            dW = batch.tokens.T @ d_mixed
        else:  # per input x: dW = x^T d (its columns); d loss / d a mixed head's coefficients = <layer, d W^T>
            layers, xs, columns, W, live = inputs
            dW = torch.empty(xs[0].shape[1], d_mixed.shape[1])
            for x, cols, on in zip(xs, columns, live):
                if on:
                    torch.mm(x.T, d_mixed[:, cols], out=dW[:, cols])
                else:
                    dW[:, cols] = 0.0
            if self.mix is not None:  # the mixes' inputs, in order (each head's m - M)
                mixes = [(cols, on) for cols, on, (_, _, read) in zip(columns, live, self.inputs) if read < 0]
                d_x = torch.zeros(len(mixes), *xs[0].shape)
                for into, (cols, on) in zip(d_x, mixes):
                    if on:
                        torch.mm(d_mixed[:, cols], W[:, cols].T, out=into)
                per_head = d_x.view(len(mixes), -1) @ layers.T  # (M, nl)
        if width < self.P:  # a summed block's gradient is each of its three blocks'
            d3, blocks = dW.view(len(dW), H, width), []
            for (at, w), fold in zip(layout, self.folded):
                d = d3[..., at : at + w]
                summed = w == K and not fold
                blocks += [d, d, d, torch.zeros(len(d), H, 1)] if summed else [d]
            dW = torch.cat(blocks, 2).view(len(dW), -1)
        grads = [dW, g.sum(0).view(-1)]
        if self.mix is not None:
            weights = torch.softmax(self.mix, -1)
            dweights = per_head * self.gamma[:, None]
            grads += [weights * (dweights - (dweights * weights).sum(-1, keepdim=True)), (per_head * weights).sum(-1)]
        if self._rates is None or self._rates[0] != active:  # kept until a head stops or decays
            lr = torch.zeros(H)
            lr[active] = self.lr[active]
            mixed = lr[self.mixed]
            rates = [lr.repeat_interleave(self.P), lr.repeat_interleave(K)] + (
                [mixed[:, None], mixed] if self.mixed else []
            )
            shared = float(lr[0]) if len(active) == H and bool((lr == lr[0]).all()) else None
            self._rates = (list(active), rates, 1 - lr * self.weight_decay, shared)
        self.steps += 1
        adamw_update(self.params, grads, self.moments, self._rates[1], self.steps, self.weight_decay, self._rates[3])
        for c in self.c + [self.decayed]:
            c.mul_(self._rates[2])
        self.averaged.update()

    def snapshot(self, h: int):
        state = [self.W3[:, h].clone()] + [c[h].clone() for c in self.c]
        state += [self.b[h * self.K : (h + 1) * self.K].clone(), self.decayed[h].clone()]
        m = self.mixed.index(h) if h in self.mixed else None
        return state + ([] if m is None else [self.mix[m].clone(), self.gamma[m].clone()])

    def restore(self, h: int, state) -> None:
        R = len(self.c)
        self.W3[:, h] = state[0]
        for c, value in zip(self.c, state[1 : 1 + R]):
            c[h] = value
        self.b[h * self.K : (h + 1) * self.K], self.decayed[h] = state[1 + R : 3 + R]
        if h in self.mixed:
            m = self.mixed.index(h)
            self.mix[m], self.gamma[m] = state[3 + R :]

    def decay(self, h: int, factor: float) -> None:
        self.lr[h] *= factor
        self._rates = None

    def copy_head_into(self, h: int, module: nn.Module) -> nn.Module:
        """Head ``h``'s parameters into ``module``, which ``span_probe.TrainedSpanProbe`` predicts with."""
        dim, K = self.W3.shape[0], self.K
        with torch.no_grad():
            for r, (c, fold) in enumerate(zip(self.c, self.folded)):
                W = self.W3[:, h, self.starts[r] : self.starts[r + 1]]
                if fold:  # each block M + D (its start - M's start), the attention vector D times its start
                    starts, attention = self._offsets[h][r]
                    blocks = [W + self.decayed[h] * start for start in starts]
                    attention = self.decayed[h] * attention
                else:
                    blocks = [W[:, p * K : (p + 1) * K] for p in range(3)]
                    attention = W[:, 3 * K]
                for p, block in enumerate(blocks):
                    module.net.weight[:, (3 * r + p) * dim : (3 * r + p + 1) * dim] = block.T
                module.attention[r].weight[0] = attention
                module.attention[r].bias[0] = c[h]
            module.net.bias.copy_(self.b[h * K : (h + 1) * K])
            if h in self.mixed:
                m = self.mixed.index(h)
                module.mix_weights.copy_(self.mix[m])
                module.gamma.copy_(self.gamma[m])
        return module.eval()
