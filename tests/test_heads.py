"""The stacked linear heads' shortcuts give the numbers of the plain computation, bit for bit: a
probe run's scores do not depend on them (only its seconds do)."""

from __future__ import annotations

import pytest
import torch

from probing_lab.probing.heads import StackedLinear, _gradient_into
from probing_lab.probing.probes import ProbeConfig


@pytest.mark.parametrize("rows, dim, columns", [(1024, 256, 34), (3072, 256, 34), (800, 128, 17), (32, 256, 34)])
def test_the_gradient_product_is_rows_transposed_times_g_bit_for_bit(rows, dim, columns):
    # computed as g.T @ rows (faster with few columns); a probe run's numbers rest on its being the same
    gen = torch.Generator().manual_seed(rows)
    x, g = torch.randn(rows, dim, generator=gen), torch.randn(rows, columns, generator=gen)
    out = torch.zeros(dim + 1, columns)
    _gradient_into(out[:-1], x, g, torch.empty(columns, dim))
    assert torch.equal(out[:-1], x.T @ g)
    assert torch.equal(out[-1], torch.zeros(columns))  # the row beside it untouched


def _stepped(mix: bool, every_column: bool, monkeypatch) -> StackedLinear:
    """Two heads (K = 17, as UPOS and its control) on 1,024-row minibatches; head 0 stops after 3 steps."""
    gen = torch.Generator().manual_seed(0)
    shape = (1024, 3, 64) if mix else (1024, 64)
    heads = StackedLinear(64, 17, 2, ProbeConfig(mix=mix), 3 if mix else None, 20_000)
    if every_column:  # the plain computation: every head's columns in every step
        monkeypatch.setattr(heads, "_columns", lambda active: (slice(None), [0, 1]))
    for step in range(6):
        x, y = torch.randn(*shape, generator=gen), torch.randint(0, 17, (1024, 2), generator=gen)
        heads.step(x, y, [0, 1] if step < 3 else [1])
    return heads


@pytest.mark.parametrize("mix", [False, True])
def test_a_head_that_trains_alone_steps_as_beside_a_stopped_one(mix, monkeypatch):
    # once the task's head stops, the control's steps compute its columns only: the same numbers
    shortcut = _stepped(mix, False, monkeypatch)
    monkeypatch.undo()
    plain = _stepped(mix, True, monkeypatch)
    for a, b in zip(shortcut.snapshot(1), plain.snapshot(1)):
        assert torch.equal(a, b)
    x = torch.randn(50, 3, 64) if mix else torch.randn(50, 64)
    assert torch.equal(shortcut.logits(x, [1]), plain.logits(x)[:, [1]])  # an evaluation of the active head
    assert torch.equal(shortcut.logits(x, [1, 0]), plain.logits(x)[:, [1, 0]])
