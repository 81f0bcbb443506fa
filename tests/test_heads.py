"""The stacked linear heads' shortcuts give the numbers of the plain computation: bit for bit on the kind of
CPU where ``heads.SAME_SUMS_FROM_COLUMNS`` was measured (AVX2, no AVX-512: MKL's kernels there), to float32
rounding elsewhere. A probe run's scores do not depend on them (only its seconds do)."""

from __future__ import annotations

import pytest
import torch

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


def _stepped(mix: bool, k: int, every_column: bool, monkeypatch) -> StackedLinear:
    """Two heads of ``k`` labels (17: UPOS and its control) on 1,024-row minibatches; head 0 stops after 3 steps."""
    gen = torch.Generator().manual_seed(0)
    shape = (1024, 3, 64) if mix else (1024, 64)
    heads = StackedLinear(64, k, 2, ProbeConfig(mix=mix), 3 if mix else None, 20_000)
    if every_column:  # the plain computation: every head's columns in every step
        monkeypatch.setattr(heads, "_columns", lambda active: (slice(None), [0, 1]))
    for step in range(6):
        x, y = torch.randn(*shape, generator=gen), torch.randint(0, k, (1024, 2), generator=gen)
        heads.step(x, y, [0, 1] if step < 3 else [1])
    return heads


@pytest.mark.parametrize("mix, k", [(False, 17), (True, 17), (False, 2), (False, 5), (False, 40)])
def test_a_head_that_trains_alone_steps_as_beside_a_stopped_one(mix, k, monkeypatch):
    # once the task's head stops, the control's steps compute its columns only (from SAME_SUMS_FROM_COLUMNS of
    # them: a binary task's 2 go on with every head's): the same numbers
    shortcut = _stepped(mix, k, False, monkeypatch)
    monkeypatch.undo()
    plain = _stepped(mix, k, True, monkeypatch)
    for a, b in zip(shortcut.snapshot(1), plain.snapshot(1)):
        assert _same(a, b)
    x = torch.randn(50, 3, 64) if mix else torch.randn(50, 64)
    assert _same(shortcut.logits(x, [1]), plain.logits(x)[:, [1]])  # an evaluation of the active head
    assert _same(shortcut.logits(x, [1, 0]), plain.logits(x)[:, [1, 0]])
