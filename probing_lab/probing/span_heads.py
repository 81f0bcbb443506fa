"""The linear span probes' fast path: :class:`StackedSpanLinear`, several linear span probes (a task
and its control task) trained side by side with the gradient and AdamW written out, what
``span_probe.fit_span_probes`` runs for ``kind = "linear"`` (the span twin of ``heads.StackedLinear``)."""

from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from .heads import ParameterAverage, adamw_update, average_decay
from .probes import ProbeConfig
from .span_batches import SpanRole, TokenBatch

# A span whose pool weights sum below this (its tokens all score ~46 or more below their run's maximum) is
# pooled from its (span, token) pairs instead, each span shifted by its own maximum: float32's exp underflows
TINY_POOL_WEIGHT = 1e-20


def _span_sums(values: torch.Tensor, first: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
    """``(B, C)``: each span's sum of the rows ``first..last`` of ``values`` ``(n, C)``, as differences of
    prefix sums. In float64, so that a difference keeps float32's precision of the span's own sum (the
    prefix runs over the whole minibatch); then float32."""
    prefix = torch.zeros(len(values) + 1, values.shape[1], dtype=torch.float64)
    torch.cumsum(values, 0, dtype=torch.float64, out=prefix[1:])
    return (prefix[last + 1] - prefix[first]).float()


def _spread(per_span: torch.Tensor, first: torch.Tensor, last: torch.Tensor, n: int) -> torch.Tensor:
    """``(n, C)``: each row's sum of ``per_span`` ``(B, C)`` over the spans that hold it (the transpose of
    :func:`_span_sums`): +``per_span`` at a span's first row, - after its last, summed down the rows."""
    steps = torch.zeros(n + 1, per_span.shape[1], dtype=torch.float64)
    d = per_span.double()
    steps.index_add_(0, torch.cat([first, last + 1]), torch.cat([d, -d]))
    return steps[:n].cumsum(0).float()


class StackedSpanLinear:
    """Linear span probes (``kind = "linear"``) side by side, as :class:`~.heads.StackedLinear` is for
    token probes: the heads' weights in one matrix, the gradient written out, AdamW with a learning
    rate per head (:func:`~.heads.adamw_update`).

    A step reads a :class:`~.span_batches.TokenBatch` (whole sentences' spans, each token once):
    every token is projected once onto all columns (first, last, pool and attention, every head and
    span role: one product), then each span takes its first and last token's projections and the
    attention-weighted sum of its tokens' pool projections (a softmax within each span, as sums over
    the span's tokens: :meth:`_pool`). Projecting before pooling is what sharing tokens pays for: a sentence's
    ~25 tokens serve its ~25 constituents. With a mix, each head mixes the layers of the tokens with
    its own coefficients and projects the result onto its own columns (all of it is linear in the
    mix): the products of one layer, where projecting every layer took one per layer.

    ``layers``: with tokens of every layer ``(n, n_layers, dim)``, per head the layer it reads (an int;
    its module has no mix) or None (a mix, learned): the probes of several layer entries of one model
    train side by side, each as it would alone, and share each step's reading of the minibatch and its
    few dozen small operations (a step's time more than its products). The heads that read one layer
    are projected together (one product), a mix head alone.

    ``W_all``: ``(dim, columns)``, per span role ``r`` the view ``W[r]`` ``(dim, C = 3 * H * K + H)``,
    columns ``[first | last | pool]`` (each ``H * K``, head by head) then the ``H`` attention vectors;
    ``c[r]``: the attention biases ``(H,)``; ``b``: ``(H * K,)``. Built from ``span_probe.SpanProbe``
    modules initialised as a probe trained alone is.

    ``folded``: per role, whether every span it will see (training and dev) is one token long (a
    dependency arc's head and dependent). Its first, last and pool blocks then read the same token and
    get the same gradient, so AdamW moves the three alike: such a role trains their mean ``M`` (``W[r]``
    is ``(dim, H * K)``, the spans' scores read ``3 M``), a third of the AdamW work, and keeps what tells
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
        dim = first.attention[0].in_features
        self.folded = list(folded) if folded else [False] * len(first.attention)
        Ws, self.c, self._offsets = [], [], {}
        for r in range(len(first.attention)):
            blocks = [
                torch.cat([m.net.weight.detach()[:, (3 * r + p) * dim : (3 * r + p + 1) * dim].T for m in modules], 1)
                for p in range(3)
            ]
            attention = torch.cat([m.attention[r].weight.detach().T for m in modules], 1)
            if self.folded[r]:
                mean = sum(blocks) / 3
                self._offsets[r] = ([block - mean for block in blocks], attention.clone())
                Ws.append(mean)
            else:
                Ws.append(torch.cat(blocks + [attention], 1))
            self.c.append(torch.cat([m.attention[r].bias.detach() for m in modules]).clone())
        self.W_all = torch.cat(Ws, 1).contiguous()  # (dim, columns): every role's columns, one product
        ends = torch.tensor([W.shape[1] for W in Ws]).cumsum(0).tolist()
        self.W = [self.W_all[:, end - W.shape[1] : end] for W, end in zip(Ws, ends)]  # views, per role
        self.decayed = torch.ones(self.H)
        self._head_of_column = self._per_column(torch.arange(self.H))
        heads = torch.arange(self.H)
        k = heads.repeat_interleave(self.K)
        self._role_heads = (k, torch.cat([k, k, k, heads]))  # a one-token role's columns' heads, a role's
        self.b = torch.cat([m.net.bias.detach() for m in modules]).clone()
        self.mixed = [h for h, m in enumerate(modules) if m.mix_weights is not None]  # the heads that learn a mix
        if layers is not None and [h for h, layer in enumerate(layers) if layer is None] != self.mixed:
            raise ValueError("a head reads one layer (its module has no mix) or learns a mix (None)")
        mixed = bool(self.mixed)
        self.mix = torch.stack([modules[h].mix_weights.detach() for h in self.mixed]).clone() if mixed else None
        self.gamma = torch.stack([modules[h].gamma.detach() for h in self.mixed]).clone() if mixed else None
        # what each head reads: a layer, or its mix (its place among the mixed heads - M, so that the mixes sort
        # first and in order); None: the tokens as they are, one layer, every head (one product)
        self.reads = None if layers is None and not mixed else self._reads(layers)
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

    def _per_column(self, per_head: torch.Tensor) -> torch.Tensor:
        """``(H, ...)`` -> ``(..., columns)``: each head's value on its columns of ``W_all``."""
        per_head = per_head.T if per_head.dim() > 1 else per_head
        k = per_head.repeat_interleave(self.K, -1)
        return torch.cat([piece for one in self.folded for piece in ([k] if one else [k, k, k, per_head])], -1)

    def _reads(self, layers: Optional[list]) -> torch.Tensor:
        """Per head, the layer it reads, or ``m - M`` for the ``m``-th of the ``M`` mixed heads ``(H,)``."""
        layers = [None] * self.H if layers is None else layers
        M = len(self.mixed)
        return torch.tensor([self.mixed.index(h) - M if layer is None else layer for h, layer in enumerate(layers)])

    def _coefficients(self) -> Optional[torch.Tensor]:
        """The mixed heads' layer coefficients ``gamma * softmax(w)``, ``(M, n_layers)``; None without a mix."""
        return None if self.mix is None else self.gamma[:, None] * torch.softmax(self.mix, -1)

    def _weights(self, single: list[bool]) -> tuple[torch.Tensor, torch.Tensor]:
        """The columns a minibatch projects its tokens onto, and each column's head: ``W_all``, except
        that a span role whose spans are all one token long has its first, last and pool blocks
        summed (they read the same token; a folded role's sum is 3 M) and no attention column (the
        softmax of one score is 1)."""
        if not any(single):  # no folded role either: its spans are one token long
            return self.W_all, self._head_of_column
        HK = self.H * self.K
        blocks = [
            3 * W if fold else W[:, :HK] + W[:, HK : 2 * HK] + W[:, 2 * HK : 3 * HK] if one else W
            for W, one, fold in zip(self.W, single, self.folded)
        ]
        one_token_heads, role_heads = self._role_heads
        return torch.cat(blocks, 1), torch.cat([one_token_heads if one else role_heads for one in single])

    def _forward(self, batch: TokenBatch) -> tuple[torch.Tensor, tuple]:
        """Logits ``(B, H * K)`` and what the gradient needs: the columns' heads, per span role what
        its pool's gradient needs (:meth:`_pool`; None for a role of one-token spans), and the mix's
        state (None without a mix)."""
        HK, C = self.H * self.K, 3 * self.H * self.K + self.H
        single = [role.one_token for role in batch.roles]
        if any(fold and not one for one, fold in zip(single, self.folded)):
            raise ValueError("a folded span role got spans longer than one token")
        W, heads = self._weights(single)
        if self.reads is None:
            mixed, mix = batch.tokens @ W, None  # (n, columns): each token projected once for all its spans
        else:
            mixed, mix = self._grouped_projection(batch.tokens, W, heads)
        logits, pools, at = self.b, [], 0
        for r, (role, one) in enumerate(zip(batch.roles, single)):
            Pr = mixed[:, at : at + (HK if one else C)]
            at += Pr.shape[1]
            if one:
                logits = logits + Pr[role.first]
                pools.append(None)
                continue
            logits = logits + Pr[role.first, :HK] + Pr[role.last, HK : 2 * HK]
            pooled, kept = self._pool(Pr[:, 2 * HK :], self.c[r], role, batch.runs)
            logits = logits + pooled
            pools.append(kept)
        return logits, (heads, pools, mix)

    def _pool(self, Pr: torch.Tensor, c: torch.Tensor, role: SpanRole, runs: torch.Tensor) -> tuple:
        """Each span's attention pool of its tokens' pool projections, ``(B, H * K)``, from ``Pr``
        ``(n, H * K + H)`` (pool projections, then attention scores without the bias ``c``). As sums
        over the spans' tokens: with ``u = exp(score - the maximum of its run of rows)``, a token's
        weight before its span's normalisation (the same for every span that holds it; a softmax does
        not change with the shift), a span's pool is its sum of ``u V`` over its sum of ``u``, both
        differences of prefix sums (:func:`_span_sums`): no work per (span, token) pair. Where a span's
        tokens all score far below their run's maximum (``u`` would underflow), the pairs' own softmax
        (each span shifted by its maximum) is taken instead."""
        H, K, HK = self.H, self.K, self.H * self.K
        B, n = len(role.first), len(Pr)
        scores = Pr[:, HK:] + c  # (n, H)
        top = torch.full((int(runs[-1]) + 1, H), float("-inf"))
        top.scatter_reduce_(0, runs[:, None].expand(-1, H), scores, "amax")
        u = (scores - top[runs]).exp_()
        V = Pr[:, :HK].view(n, H, K)
        NZ = _span_sums(torch.cat([(u[..., None] * V).view(n, HK), u], 1), role.first, role.last)  # (B, HK + H)
        Z = NZ[:, HK:]
        if bool((Z > TINY_POOL_WEIGHT).all()):
            pooled = NZ[:, :HK].view(B, H, K) / Z[..., None]
            return pooled.view(B, HK), ("tokens", u, V, Z, pooled)
        rows, span_of = role.pairs()
        G = Pr.index_select(0, rows)  # (P, HK + H): pool projections, scores
        scores = G[:, HK:] + c
        top = torch.full((B, H), float("-inf")).scatter_reduce_(0, span_of[:, None].expand(-1, H), scores, "amax")
        e = (scores - top[span_of]).exp_()
        alpha = e / torch.zeros(B, H).index_add_(0, span_of, e)[span_of]  # softmax within each span
        V = G[:, :HK].view(-1, H, K)
        pooled = torch.zeros(B, HK).index_add_(0, span_of, (alpha[..., None] * V).view(-1, HK))
        return pooled, ("pairs", alpha, V, rows, span_of)

    def _grouped_projection(self, tokens: torch.Tensor, W: torch.Tensor, heads: torch.Tensor):
        """Tokens of every layer ``(n, n_layers, dim)``: the columns of the heads that read one layer
        projected from it (one product), each mixed head's from its own mix of the layers (``(M, n,
        dim)``, its coefficients), each group's columns side by side, then put back in order. Returns the
        projections ``(n, columns)`` and what the gradient needs."""
        n, n_layers, dim = tokens.shape
        layers = tokens.transpose(0, 1).reshape(n_layers, -1)  # (nl, n * dim)
        coef = self._coefficients()
        mixes = None if coef is None else (coef @ layers).view(-1, n, dim)  # (M, n, dim)
        reads = self.reads[heads]  # each column's input
        groups, counts = torch.unique(reads, return_counts=True)  # the inputs in order: mixes, then layers
        inputs = [mixes[g] if g < 0 else tokens[:, g] for g in groups.tolist()]  # mixes[m - M] is mix m
        if len(inputs) == 1:
            return inputs[0] @ W, (layers, inputs, None, [W])
        order = torch.argsort(reads, stable=True)  # input by input
        pieces = W.index_select(1, order).split(counts.tolist(), 1)
        mixed = torch.cat([x @ piece for x, piece in zip(inputs, pieces)], 1).index_select(1, torch.argsort(order))
        return mixed, (layers, inputs, order, pieces)

    def logits(self, batch: TokenBatch) -> torch.Tensor:
        """``(B, H, K)``: every head's logits."""
        out = self._forward(batch)[0]
        return out.view(len(out), self.H, self.K)

    def step(self, batch: TokenBatch, yb: torch.Tensor, active: list[int]) -> None:
        """One AdamW step of the active heads on a minibatch; ``yb``: ``(B, H)`` label ids."""
        logits, (heads, pools, mix) = self._forward(batch)
        H, K, HK = self.H, self.K, self.H * self.K
        B = len(yb)
        p = torch.softmax(logits.view(B, H, K), -1)
        p.view(-1, K)[torch.arange(B * H), yb.reshape(-1)] -= 1.0
        g = p.view(B, HK) / B  # d(mean cross-entropy) / d(logits), per head
        n = len(batch.tokens)
        d_mixed = torch.zeros(n, len(heads))  # d loss / d each token's projection, filled column block by block
        at = 0
        for role, kept in zip(batch.roles, pools):
            d_mixed[:, at : at + HK].index_add_(0, role.first, g)
            if kept is None:
                at += HK
                continue
            d_mixed[:, at + HK : at + 2 * HK].index_add_(0, role.last, g)
            d_pool = d_mixed[:, at + 2 * HK : at + 3 * HK + H]
            if kept[0] == "tokens":  # pooled = N / Z, N = A (u V), Z = A u
                _, u, V, Z, pooled = kept
                gk = g.view(B, H, K)
                dN = gk / Z[..., None]
                dZ = -(gk * pooled).sum(-1) / Z
                dT = _spread(torch.cat([dN.view(B, HK), dZ], 1), role.first, role.last, n)  # d / d (u V), d / d u
                d_uV = dT[:, :HK].view(-1, H, K)
                d_pool[:, :HK] = (u[..., None] * d_uV).view(-1, HK)
                d_pool[:, HK:] = u * (dT[:, HK:] + (V * d_uV).sum(-1))  # d u / d score = u
            else:
                _, alpha, V, rows, span_of = kept
                gv = g.index_select(0, span_of).view(-1, H, K)
                d_alpha = (V * gv).sum(-1)  # (P, H)
                centre = torch.zeros(B, H).index_add_(0, span_of, alpha * d_alpha)[span_of]
                d_pool[:, :HK].index_add_(0, rows, (alpha[..., None] * gv).view(-1, HK))
                d_pool[:, HK:].index_add_(0, rows, alpha * (d_alpha - centre))  # through the softmax
            at += 3 * HK + H
        if mix is None:
            dW = batch.tokens.T @ d_mixed
        else:  # per input x: dW = x^T d (its columns); d loss / d a mixed head's coefficients = <layer, d W^T>
            layers, inputs, order, pieces = mix
            widths = [piece.shape[1] for piece in pieces]
            d_pieces = [d_mixed] if order is None else d_mixed.index_select(1, order).split(widths, 1)
            dW = torch.cat([x.T @ d for x, d in zip(inputs, d_pieces)], 1)
            dW = dW if order is None else dW.index_select(1, torch.argsort(order))
            if self.mix is not None:  # the mixes are the first inputs, in order
                M = len(self.mixed)
                d_x = torch.stack([d @ piece.T for d, piece in zip(d_pieces[:M], pieces[:M])]).view(M, -1)
                per_head = d_x @ layers.T  # (M, nl)
        if len(heads) < self.W_all.shape[1]:  # a summed block's gradient is each of its three blocks'
            blocks, at = [], 0
            for kept, fold in zip(pools, self.folded):
                d = dW[:, at : at + (HK if kept is None else 3 * HK + H)]
                at += d.shape[1]
                blocks += [d] if kept is not None or fold else [d, d, d, torch.zeros(len(d), H)]
            dW = torch.cat(blocks, 1)
        grads = [dW, g.sum(0)]
        if self.mix is not None:
            weights = torch.softmax(self.mix, -1)
            dweights = per_head * self.gamma[:, None]
            grads += [weights * (dweights - (dweights * weights).sum(-1, keepdim=True)), (per_head * weights).sum(-1)]
        if self._rates is None or self._rates[0] != active:  # kept until a head stops or decays
            lr = torch.zeros(H)
            lr[active] = self.lr[active]
            mixed = lr[self.mixed]
            rates = [self._per_column(lr), lr.repeat_interleave(K)] + ([mixed[:, None], mixed] if self.mixed else [])
            shared = float(lr[0]) if len(active) == H and bool((lr == lr[0]).all()) else None
            self._rates = (list(active), rates, 1 - lr * self.weight_decay, shared)
        self.steps += 1
        adamw_update(self.params, grads, self.moments, self._rates[1], self.steps, self.weight_decay, self._rates[3])
        for c in self.c + [self.decayed]:
            c.mul_(self._rates[2])
        self.averaged.update()

    def _columns(self, h: int, fold: bool) -> torch.Tensor:
        """Head ``h``'s columns of a role's ``W[r]``: its K (folded), or its 3 K and attention vector."""
        HK, k = self.H * self.K, torch.arange(h * self.K, (h + 1) * self.K)
        return k if fold else torch.cat([k, HK + k, 2 * HK + k, torch.tensor([3 * HK + h])])

    def snapshot(self, h: int):
        k = slice(h * self.K, (h + 1) * self.K)
        state = [W[:, self._columns(h, fold)].clone() for W, fold in zip(self.W, self.folded)]
        state += [c[h].clone() for c in self.c] + [self.b[k].clone(), self.decayed[h].clone()]
        m = self.mixed.index(h) if h in self.mixed else None
        return state + ([] if m is None else [self.mix[m].clone(), self.gamma[m].clone()])

    def restore(self, h: int, state) -> None:
        k, R = slice(h * self.K, (h + 1) * self.K), len(self.W)
        for W, fold, c, w_state, c_state in zip(self.W, self.folded, self.c, state[:R], state[R : 2 * R]):
            W[:, self._columns(h, fold)], c[h] = w_state, c_state
        self.b[k], self.decayed[h] = state[2 * R : 2 * R + 2]
        if h in self.mixed:
            m = self.mixed.index(h)
            self.mix[m], self.gamma[m] = state[2 * R + 2 :]

    def decay(self, h: int, factor: float) -> None:
        self.lr[h] *= factor
        self._rates = None

    def copy_head_into(self, h: int, module: nn.Module) -> nn.Module:
        """Head ``h``'s parameters into ``module``, which ``span_probe.TrainedSpanProbe`` predicts with."""
        dim, k = self.W[0].shape[0], slice(h * self.K, (h + 1) * self.K)
        with torch.no_grad():
            for r, (W, c, fold) in enumerate(zip(self.W, self.c, self.folded)):
                cols = self._columns(h, fold)
                if fold:  # each block M + D (its start - M's start), the attention vector D times its start
                    starts, attention = self._offsets[r]
                    blocks = [W[:, cols] + self.decayed[h] * start[:, k] for start in starts]
                    attention = self.decayed[h] * attention[:, h]
                else:
                    blocks = [W[:, cols[p * self.K : (p + 1) * self.K]] for p in range(3)]
                    attention = W[:, cols[-1]]
                for p, block in enumerate(blocks):
                    module.net.weight[:, (3 * r + p) * dim : (3 * r + p + 1) * dim] = block.T
                module.attention[r].weight[0] = attention
                module.attention[r].bias[0] = c[h]
            module.net.bias.copy_(self.b[h * self.K : (h + 1) * self.K])
            if h in self.mixed:
                m = self.mixed.index(h)
                module.mix_weights.copy_(self.mix[m])
                module.gamma.copy_(self.gamma[m])
        return module.eval()
