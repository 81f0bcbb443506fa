"""A layer standardised once and shared by its fits (``rows.Standardised``), put in the online code's order in
its own buffer (``rows.permute_rows_``), and the online code's dev subsets: the same numbers as before
where they must be (the probe's fit), and what changed where it may (the MDL blocks)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from probing_lab.probing import mdl
from probing_lab.probing.mdl import online_codelengths
from probing_lab.probing.probes import ProbeConfig, fit_probes
from probing_lab.probing.rows import (
    ArrayRows,
    Standardised,
    _standardise,
    permute_rows_,
    read_standardised,
    standardised,
)


def _task(n: int = 3000, dim: int = 12, seed: int = 0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 3, size=(4, dim))
    y = rng.integers(0, 4, n)
    X = (centres[y] + rng.normal(0, 2.5, size=(n, dim)) + 7.0).astype(np.float32)  # off-centre: standardising matters
    return X, y


@pytest.mark.parametrize("n", [1, 2, 3, 50, 1000])
@pytest.mark.parametrize("chunk", [1, 7, 8192])
def test_rows_permuted_in_place_are_the_gathered_rows(n, chunk):
    for seed in range(3):
        order = np.random.default_rng(seed).permutation(n)
        z = torch.randn(n, 2, 3)
        expected = z[torch.as_tensor(order)].clone()
        permute_rows_(z, order, chunk)
        assert torch.equal(z, expected)
    z = torch.randn(5, 2)
    before = z.clone()
    permute_rows_(z, np.arange(5))
    assert torch.equal(z, before)


@pytest.mark.parametrize("order", [[0, 0, 1], [0, 1], [1, 2, 3]])
def test_what_is_not_a_permutation_of_the_rows_is_refused_before_any_row_moves(order):
    z = torch.randn(3, 2)
    before = z.clone()
    with pytest.raises(ValueError, match="not a permutation of 3 rows"):
        permute_rows_(z, np.asarray(order))
    assert torch.equal(z, before)


def test_standardised_rows_are_what_the_fit_computed_and_keep_their_statistics():
    X, _ = _task()
    mean, std = _standardise(ArrayRows(X))
    z = Standardised.of(X)
    assert torch.equal(z.z, torch.sub(torch.as_tensor(X), mean).div_(std))  # the fit's own arithmetic
    copy = X.copy()
    in_place = Standardised.of(copy, in_place=True)
    assert torch.equal(in_place.z, z.z) and np.shares_memory(copy, in_place.z.numpy())
    before = X.copy()
    Standardised.of(X)
    assert np.array_equal(X, before)  # not in place: the array is left alone
    head, picked = z[:100], z[np.array([5, 1, 5])]
    assert head.shares_statistics(z.mean) and picked.shares_statistics(z.mean)
    assert torch.equal(picked.z, z.z[[5, 1, 5]]) and len(head) == 100 and head.shape == (100, X.shape[1])
    assert z.reorder_(np.arange(len(X))[::-1].copy()) is z and torch.equal(z.z[0], in_place.z[-1])


def test_a_probe_fit_on_standardised_rows_is_the_probe_fit_on_the_raw_rows():
    X, y = _task()
    control = np.random.default_rng(1).permutation(y)
    config = ProbeConfig(epochs=6, patience=2, precision="float32")
    raw = fit_probes(X[:2500], [y[:2500], control[:2500]], X[2500:], [y[2500:], control[2500:]], 4, config)
    train, dev = standardised(X[:2500], X[2500:])
    shared = fit_probes(train, [y[:2500], control[:2500]], dev, [y[2500:], control[2500:]], 4, config)
    for a, b in zip(raw, shared):
        assert a.history == b.history and a.epochs_run == b.epochs_run
        for p, q in zip(a.module.parameters(), b.module.parameters()):
            assert torch.equal(p, q)
        # a probe predicts raw rows and rows standardised with its statistics alike
        assert np.array_equal(a.predict_proba(X[2500:]), b.predict_proba(dev))


def test_rows_standardised_with_another_training_set_are_refused():
    X, y = _task()
    first, second = Standardised.of(X[:1000]), Standardised.of(X[1000:2000])
    with pytest.raises(ValueError, match="another training set's statistics"):
        standardised(first, second)
    probe = fit_probes(first, [y[:1000]], X[2000:], [y[2000:]], 4, ProbeConfig(epochs=2))[0]
    with pytest.raises(ValueError, match="another training set's statistics"):
        probe.predict_proba(second)


def test_a_layer_read_and_standardised_leaves_arrays_it_was_given_alone():
    X, _ = _task()
    train, dev = X[:2500].copy(), X[2500:].copy()
    z_train, z_dev = read_standardised(train, dev)
    assert np.array_equal(train, X[:2500]) and np.array_equal(dev, X[2500:])
    assert z_dev.shares_statistics(z_train.mean)
    assert torch.equal(z_train.z, Standardised.of(X[:2500]).z)
    assert read_standardised("spans", "dev spans") == ("spans", "dev spans")  # not rows: the fit's to handle


def test_each_online_code_block_stops_early_on_a_dev_subset_as_large_as_its_training_set(monkeypatch):
    X, y = _task(n=3000)
    monkeypatch.setattr(mdl, "MDL_DEV_ROWS", 100)
    seen = []

    def spy(X_train, ys, X_dev, ys_dev, n_classes, config):
        seen.append((len(X_train), len(X_dev), len(ys_dev[0])))
        assert isinstance(X_train, Standardised) and X_dev.shares_statistics(X_train.mean)  # standardised once
        return fit_probes(X_train, ys, X_dev, ys_dev, n_classes, config)

    code = online_codelengths(X[:2500], [y[:2500]], X[2500:], [y[2500:]], 4, ProbeConfig(epochs=3), fit=spy)[0]
    starts = [start for start, _, _ in seen]
    assert starts == code["blocks"][:-1]
    assert [d for _, d, _ in seen] == [min(500, max(100, start)) for start in starts]
    assert all(d == dy for _, d, dy in seen)
    assert 0 < code["mdl_bits"] < code["uniform_bits"]
