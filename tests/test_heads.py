"""The linear heads' gradient product taken the faster way round gives the numbers of the plain one: bit for
bit on the kind of CPU where ``heads.SAME_SUMS_FROM_COLUMNS`` was measured (AVX2, no AVX-512: MKL's kernels
there), to float32 rounding elsewhere. A probe run's scores do not depend on it (only its seconds do)."""

from __future__ import annotations

import pytest
import torch

from probing_lab.probing import heads
from probing_lab.probing.heads import SAME_SUMS_FROM_COLUMNS, StackedLinear, _gradient_into
from probing_lab.probing.probes import ProbeConfig

MEASURED_HERE = torch.backends.cpu.get_cpu_capability() == "AVX2"


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.equal(a, b) if MEASURED_HERE else torch.allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "rows, dim, columns",
    [(1024, 256, 34), (3072, 256, 34), (800, 128, 17), (32, 256, 34), (1024, 256, 4), (500, 64, 11)],
)
def test_the_gradient_product_is_rows_transposed_times_g(rows, dim, columns):
    gen = torch.Generator().manual_seed(rows)
    x, g = torch.randn(rows, dim, generator=gen), torch.randn(rows, columns, generator=gen)
    out = torch.zeros(dim + 1, columns)
    _gradient_into(out[:-1], x, g, torch.empty(columns, dim))
    # the form taken: g.T @ x from SAME_SUMS_FROM_COLUMNS columns, else x.T @ g itself
    assert torch.equal(out[:-1], (g.T @ x).T if columns >= SAME_SUMS_FROM_COLUMNS else x.T @ g)
    assert _same(out[:-1], x.T @ g)
    assert torch.equal(out[-1], torch.zeros(columns))  # the row beside it untouched


@pytest.mark.parametrize("mix, k", [(False, 17), (True, 17), (False, 2), (False, 40)])
def test_heads_step_the_same_with_the_plain_gradient_product(mix, k, monkeypatch):
    def stepped() -> StackedLinear:  # two heads on 1,024-row minibatches, head 0 stopping after 3 steps
        gen = torch.Generator().manual_seed(0)
        stack = StackedLinear(64, k, 2, ProbeConfig(mix=mix), 3 if mix else None, 20_000)
        for step in range(6):
            x = torch.randn(*((1024, 3, 64) if mix else (1024, 64)), generator=gen)
            stack.step(x, torch.randint(0, k, (1024, 2), generator=gen), [0, 1] if step < 3 else [1])
        return stack

    fast = stepped()
    monkeypatch.setattr(heads, "SAME_SUMS_FROM_COLUMNS", 10**9)  # the plain form at every width
    plain = stepped()
    for h in (0, 1):
        for a, b in zip(fast.snapshot(h), plain.snapshot(h)):
            assert _same(a, b)


@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_adamw_with_one_shared_rate_steps_as_torch_adamw(weight_decay):
    """The fused kernel (every tensor at one learning rate) and the written-out arithmetic (a rate per
    tensor) take torch.optim.AdamW's steps."""
    g = torch.Generator().manual_seed(0)
    start = [torch.randn(6, 5, generator=g), torch.randn(5, generator=g)]
    grads = [[torch.randn(p.shape, generator=g) for p in start] for _ in range(5)]
    reference = [p.clone().requires_grad_() for p in start]
    optimizer = torch.optim.AdamW(reference, lr=0.01, weight_decay=weight_decay)
    mine = {shared: [p.clone() for p in start] for shared in (None, 0.01)}
    moments = {shared: [(torch.zeros_like(p), torch.zeros_like(p)) for p in start] for shared in mine}
    for step, grad in enumerate(grads, 1):
        for p, d in zip(reference, grad):
            p.grad = d
        optimizer.step()
        for shared, params in mine.items():
            rates = [torch.tensor(0.01)] * len(params)
            heads.adamw_update(params, grad, moments[shared], rates, step, weight_decay, shared)
    for params in mine.values():
        for p, q in zip(params, reference):
            assert torch.allclose(p, q.detach(), atol=1e-7, rtol=1e-6)
