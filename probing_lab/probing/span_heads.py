"""The linear span probes' fast path: :class:`StackedSpanLinear`, several linear span probes (a task
and its control task) trained side by side with the gradient and AdamW written out, what
``span_probe.fit_span_probes`` runs for ``kind = "linear"`` (the span twin of ``heads.StackedLinear``)."""

from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from .heads import adamw_update
from .probes import ProbeConfig


def _mixed(x: torch.Tensor, coef: torch.Tensor, dim: int = -2) -> torch.Tensor:
    """Sum over the layer axis ``dim`` of ``x`` weighted by ``coef`` (which broadcasts to it)."""
    return (x * coef).sum(dim)


class StackedSpanLinear:
    """Linear span probes (``kind = "linear"``) side by side, as :class:`~.heads.StackedLinear` is for
    token probes: the heads' weights in one matrix per span role, the gradient written out, AdamW
    with a learning rate per head (:func:`~.heads.adamw_update`).

    Per span role: the attention scores of every token (one product for all heads), each head's
    pool (one ``bmm``), then the first token, the last token and each head's pool times their
    classifier blocks; no ``(B, 3 * dim)`` representation is formed. (Projecting every token with the
    pool block before pooling costs ``length x n_classes`` products per span: 3x the arithmetic on
    constituents.) A minibatch of one-token spans skips the attention: its token is the first, the
    last and the pool. With a mix, every product is taken per layer and each head mixes the results
    (all of it is linear in the mix), so no mixed copy of the rows is formed.

    ``W[r]``: ``(dim, 3 * H * K + H)``, columns ``[first | last | pool]`` (each ``H * K``, head by
    head) then the ``H`` attention vectors; ``c[r]``: the attention biases ``(H,)``; ``b``: ``(H * K,)``.
    Built from ``span_probe.SpanProbe`` modules initialised as a probe trained alone is."""

    def __init__(self, modules: list[nn.Module], config: ProbeConfig):
        first = modules[0]
        self.H, self.K = len(modules), first.net.out_features
        dim = first.attention[0].in_features
        self.W, self.c = [], []
        for r in range(len(first.attention)):
            blocks = [
                torch.cat([m.net.weight.detach()[:, (3 * r + p) * dim : (3 * r + p + 1) * dim].T for m in modules], 1)
                for p in range(3)
            ]
            blocks.append(torch.cat([m.attention[r].weight.detach().T for m in modules], 1))
            self.W.append(torch.cat(blocks, 1).contiguous())
            self.c.append(torch.cat([m.attention[r].bias.detach() for m in modules]).clone())
        self.b = torch.cat([m.net.bias.detach() for m in modules]).clone()
        mixed = first.mix_weights is not None
        self.mix = torch.stack([m.mix_weights.detach() for m in modules]).clone() if mixed else None  # (H, n_layers)
        self.gamma = torch.stack([m.gamma.detach() for m in modules]).clone() if mixed else None
        self.params = self.W + self.c + [self.b] + ([self.mix, self.gamma] if mixed else [])
        self.moments = [(torch.zeros_like(t), torch.zeros_like(t)) for t in self.params]
        self.lr = torch.full((self.H,), config.lr)
        self.weight_decay, self.steps = config.weight_decay, 0

    def __len__(self) -> int:
        return self.H

    def train(self, on: bool) -> None:
        pass  # no dropout

    def _per_column(self, per_head: torch.Tensor) -> torch.Tensor:
        """``(H, ...)`` -> ``(..., 3 * H * K + H)``: each head's value on its columns of ``W[r]``."""
        per_head = per_head.T if per_head.dim() > 1 else per_head
        k = per_head.repeat_interleave(self.K, -1)
        return torch.cat([k, k, k, per_head], -1)

    def _span_grads(self, g, coef, h, ends, Z, S, alpha, pooled, pool_weights, Zp) -> tuple:
        """One span role's gradient of ``W[r]`` and (with a mix) of the coefficients ``(nl, H)``."""
        H, K, dim = self.H, self.K, h.shape[-1]
        B, L, HK = len(g), len(alpha[0]), H * K
        gh, d_coef = g.view(B, H, K), None
        dZ, dZp = g[:, None].expand(B, 2, HK), gh
        if coef is not None:  # d loss / d coef from each mixed product, then each layer's share
            d_coef = (dZ[:, :, None] * Z).sum((0, 1)).view(-1, H, K).sum(-1) + (gh[:, :, None] * Zp).sum((0, 3)).T
            dZ = dZ[:, :, None] * coef.T.repeat_interleave(K, -1)
            dZp = gh[:, :, None] * coef[..., None]  # (B, H, nl, K)
        d_pool_weights = torch.einsum("bh...d,bh...k->dhk", pooled, dZp).reshape(dim, HK)
        d_pooled = torch.einsum("bh...k,hdk->bh...d", dZp, pool_weights)  # (B, H, [nl,] dim)
        d_alpha = torch.bmm(d_pooled.reshape(B, H, -1), h.reshape(B, L, -1).transpose(1, 2)).transpose(1, 2)
        d_scores = alpha * (d_alpha - (alpha * d_alpha).sum(1, keepdim=True))  # (B, L, H): through the softmax
        if coef is not None:
            d_coef = d_coef + (d_scores[:, :, None] * S).sum((0, 1))
            d_scores = d_scores[:, :, None] * coef.T  # (B, L, nl, H)
        grad = torch.cat(
            [
                ends[:, 0].reshape(-1, dim).T @ dZ[:, 0].reshape(-1, HK),
                ends[:, 1].reshape(-1, dim).T @ dZ[:, 1].reshape(-1, HK),
                d_pool_weights,
                h.reshape(-1, dim).T @ d_scores.reshape(-1, H),
            ],
            1,
        )
        return grad, d_coef

    def _one_token_grads(self, g, coef, x, Z) -> tuple:
        """As :meth:`_span_grads` for a minibatch of one-token spans: the three classifier blocks
        read the same vector ``x`` (their gradients are equal), the attention has none."""
        H, K, dim, d_coef, dZ = self.H, self.K, x.shape[-1], None, g
        if coef is not None:
            d_coef = (g[:, None] * Z).sum(0).view(-1, H, K).sum(-1)
            dZ = g[:, None] * coef.T.repeat_interleave(K, -1)
        block = x.reshape(-1, dim).T @ dZ.reshape(-1, H * K)
        return torch.cat([block, block, block, torch.zeros(dim, H)], 1), d_coef

    def _coefficients(self) -> Optional[torch.Tensor]:
        """Each head's layer coefficients ``gamma * softmax(w)``, ``(H, n_layers)``; None without a mix."""
        return None if self.mix is None else self.gamma[:, None] * torch.softmax(self.mix, -1)

    def _forward(self, gathered: list) -> tuple[torch.Tensor, list]:
        """Logits ``(B, H * K)`` and, per role, what the gradient needs. With a mix, every
        product is taken per layer and the heads mix the results (``_mixed``)."""
        H, K, coef = self.H, self.K, self._coefficients()
        HK = H * K
        logits, saved = self.b, []
        per_column = None if coef is None else coef.T.repeat_interleave(K, -1)  # (nl, HK)
        for (h, mask, lengths), W, c in zip(gathered, self.W, self.c):
            B, L = mask.shape
            if L == 1:  # one token is each span's first, last and pool (the softmax of one score is 1)
                Z = h[:, 0] @ (W[:, :HK] + W[:, HK : 2 * HK] + W[:, 2 * HK : 3 * HK])  # (B, [nl,] HK)
                logits = logits + (Z if coef is None else _mixed(Z, per_column))
                saved.append((h[:, 0], Z))
                continue
            ends = torch.stack([h[:, 0], h[torch.arange(B), lengths - 1]], 1)  # (B, 2, [nl,] dim)
            Z = torch.stack([ends[:, 0] @ W[:, :HK], ends[:, 1] @ W[:, HK : 2 * HK]], 1)  # (B, 2, [nl,] HK)
            S = h @ W[:, 3 * HK :]  # attention scores (B, L, [nl,] H)
            scores = (S if coef is None else _mixed(S, coef.T)) + c
            alpha = torch.softmax(scores.masked_fill(~mask[..., None], float("-inf")), 1)  # (B, L, H)
            pooled = torch.bmm(alpha.transpose(1, 2), h.reshape(B, L, -1)).view(B, H, *h.shape[2:])
            pool_weights = W[:, 2 * HK : 3 * HK].reshape(-1, H, K).transpose(0, 1)  # (H, dim, K)
            Zp = torch.einsum("bh...d,hdk->bh...k", pooled, pool_weights)  # (B, H, [nl,] K)
            if coef is None:
                logits = logits + Z.sum(1) + Zp.reshape(B, HK)
            else:
                logits = logits + _mixed(Z, per_column).sum(1) + _mixed(Zp, coef[..., None], -2).reshape(B, HK)
            saved.append((h, ends, Z, S, alpha, pooled, pool_weights, Zp))
        return logits, saved

    def logits(self, gathered: list) -> torch.Tensor:
        """``(B, H, K)``: every head's logits."""
        out = self._forward(gathered)[0]
        return out.view(len(out), self.H, self.K)

    def step(self, gathered: list, yb: torch.Tensor, active: list[int]) -> None:
        """One AdamW step of the active heads on a minibatch; ``yb``: ``(B, H)`` label ids."""
        logits, saved = self._forward(gathered)
        H, K, coef = self.H, self.K, self._coefficients()
        B, HK = len(yb), H * K
        p = torch.softmax(logits.view(B, H, K), -1)
        p.view(-1, K)[torch.arange(B * H), yb.reshape(-1)] -= 1.0
        g = p.view(B, HK) / B  # d(mean cross-entropy) / d(logits), per head
        # per span role (saved as (x, Z) when its spans are one token long): the gradient of W[r]
        # and, with a mix, of the layer coefficients
        roles = [self._one_token_grads(g, coef, *r) if len(r) == 2 else self._span_grads(g, coef, *r) for r in saved]
        dW = [grad for grad, _ in roles]
        # the attention biases shift all of a softmax's scores: their gradient is 0
        grads = dW + [torch.zeros_like(c) for c in self.c] + [g.sum(0)]
        if coef is not None:
            weights, per_head = torch.softmax(self.mix, -1), sum(d for _, d in roles).T  # (H, nl)
            dweights = per_head * self.gamma[:, None]
            grads += [weights * (dweights - (dweights * weights).sum(-1, keepdim=True)), (per_head * weights).sum(-1)]
        lr = torch.zeros(H)
        lr[active] = self.lr[active]
        rates = [self._per_column(lr)] * len(self.W) + [lr] * len(self.c) + [lr.repeat_interleave(K)]
        rates += [lr[:, None], lr] if coef is not None else []
        self.steps += 1
        adamw_update(self.params, grads, self.moments, rates, self.steps, self.weight_decay)

    def _columns(self, h: int) -> torch.Tensor:
        HK, k = self.H * self.K, torch.arange(h * self.K, (h + 1) * self.K)
        return torch.cat([k, HK + k, 2 * HK + k, torch.tensor([3 * HK + h])])

    def snapshot(self, h: int):
        cols, k = self._columns(h), slice(h * self.K, (h + 1) * self.K)
        state = [W[:, cols].clone() for W in self.W] + [c[h].clone() for c in self.c] + [self.b[k].clone()]
        return state + ([] if self.mix is None else [self.mix[h].clone(), self.gamma[h].clone()])

    def restore(self, h: int, state) -> None:
        cols, k, R = self._columns(h), slice(h * self.K, (h + 1) * self.K), len(self.W)
        for W, c, w_state, c_state in zip(self.W, self.c, state[:R], state[R : 2 * R]):
            W[:, cols], c[h] = w_state, c_state
        self.b[k] = state[2 * R]
        if self.mix is not None:
            self.mix[h], self.gamma[h] = state[2 * R + 1 :]

    def decay(self, h: int, factor: float) -> None:
        self.lr[h] *= factor

    def copy_head_into(self, h: int, module: nn.Module) -> nn.Module:
        """Head ``h``'s parameters into ``module``, which ``span_probe.TrainedSpanProbe`` predicts with."""
        cols, dim = self._columns(h), self.W[0].shape[0]
        with torch.no_grad():
            for r, (W, c) in enumerate(zip(self.W, self.c)):
                for p in range(3):
                    block = W[:, cols[p * self.K : (p + 1) * self.K]]
                    module.net.weight[:, (3 * r + p) * dim : (3 * r + p + 1) * dim] = block.T
                module.attention[r].weight[0] = W[:, cols[-1]]
                module.attention[r].bias[0] = c[h]
            module.net.bias.copy_(self.b[h * self.K : (h + 1) * self.K])
            if self.mix is not None:
                module.mix_weights.copy_(self.mix[h])
                module.gamma.copy_(self.gamma[h])
        return module.eval()
