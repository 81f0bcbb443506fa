"""The structural probe's written-out gradient against autograd on the probe's own loss."""

import numpy as np
import pytest
import torch

from probing_lab.probing import tasks as T
from probing_lab.probing.structural import _loss, _loss_and_grads, _loss_weights, _pad, _Structural


def _random_tree(n: int, rng) -> list[int]:
    # token i > 0 hangs from an earlier token, token 0 from the root: a tree, heads counted from 1
    return [0] + [int(rng.integers(1, i + 1)) for i in range(1, n)]


@pytest.mark.parametrize("kind", ["distance", "depth"])
@pytest.mark.parametrize("layers", [1, 3])
def test_written_out_gradient_is_autogradient_of_the_loss(kind, layers):
    rng = np.random.default_rng(0)
    lengths = [5, 9, 2, 7]  # padded to 9
    shape = (lambda n: (n, layers, 16)) if layers > 1 else (lambda n: (n, 16))
    features = [rng.normal(size=shape(n)).astype(np.float32) for n in lengths]
    heads = [_random_tree(n, rng) for n in lengths]
    targets = [T.tree_distances(h) if kind == "distance" else T.tree_depths(h) for h in heads]
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    x, y, length = _pad(np.concatenate(features), offsets, targets, [0, 1, 2, 3], kind)
    for i, n in enumerate(lengths):  # each sentence's vectors and targets, zeros after it
        assert np.array_equal(x[i, :n].numpy(), features[i]) and not x[i, n:].any()
        assert np.array_equal(y[i, :n, :n] if kind == "distance" else y[i, :n], targets[i])
    torch.manual_seed(0)
    probe = _Structural(16, 4, layers)
    if layers > 1:
        with torch.no_grad():
            probe.mix.copy_(torch.tensor([0.3, -0.2, 0.1]))
    for scale in (1.0, 10.0):  # small and large predictions: both signs of (prediction - gold)
        with torch.no_grad():
            probe.B.mul_(scale)
        loss = _loss(probe(x, kind), y, length, kind)
        probe.zero_grad()
        loss.backward()
        expected = {name: p.grad.clone() for name, p in probe.named_parameters()}
        written = _loss_and_grads(probe, x, y, _loss_weights(length, y.shape[1], kind), kind)
        assert written == pytest.approx(loss.item(), rel=1e-5)
        for name, p in probe.named_parameters():
            assert torch.allclose(p.grad, expected[name], rtol=1e-4, atol=1e-6), name
            assert p.grad.abs().sum() > 0, name  # the gradient is there to compare
