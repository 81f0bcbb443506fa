"""Online-code MDL (Voita & Titov 2020) of a probe family, for one or several label sets."""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

from .probes import ProbeConfig, fit_probes
from .rows import standardised


def one_at_a_time(fit):
    """A trainer of several label sets (as :func:`fit_probes`) from a trainer of one, fitting each alone."""
    return lambda X, ys, X_dev, ys_dev, n, config: [fit(X, y, X_dev, d, n, config) for y, d in zip(ys, ys_dev)]


MDL_FRACTIONS = (0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.0625, 0.125, 0.25, 0.5, 1.0)

# A block's probe stops early on a random subset of the dev set as large as its training set, and at least
# this large: the small blocks' epochs take a few minibatches, and scoring all 25,000 of EWT's dev tokens
# after each was a third of pos_ewt's online code (the same subset, nested, for every block)
MDL_DEV_ROWS = 4096


def online_codelength(
    X, y, X_dev, y_dev, n_classes: int, config: Optional[ProbeConfig] = None, fractions=MDL_FRACTIONS, fit=None
) -> dict:
    """Online code (Voita & Titov 2020): the first block is sent with a uniform code, every next
    block with a probe trained on all blocks before it. Returns bits and the compression
    against the uniform code. ``X, y`` should be in a random order. ``fit``: the probe family's
    trainer of one label set (default :func:`fit_probe`; the span probe passes its own, with ``X``
    its inputs)."""
    many = fit_probes if fit is None else one_at_a_time(fit)
    return online_codelengths(X, [y], X_dev, [y_dev], n_classes, config, fractions, many)[0]


def online_codelengths(
    X,
    ys: list,
    X_dev,
    ys_dev: list,
    n_classes: int,
    config: Optional[ProbeConfig] = None,
    fractions=MDL_FRACTIONS,
    fit=None,
) -> list[dict]:
    """:func:`online_codelength` of several label sets on the same ``X`` (a task and its control
    task), each block's probes trained together by ``fit`` (default :func:`fit_probes`). Rows in
    memory are standardised once, with the whole training set's statistics (``rows.standardised``);
    each block stops early on ``max(MDL_DEV_ROWS, its training rows)`` dev rows at most."""
    fit, config = fit or fit_probes, config or ProbeConfig()
    n = len(ys[0])
    cuts = sorted({max(2, int(round(f * n))) for f in fractions} | {n})
    ys = [np.asarray(y) for y in ys]
    ys_dev = [np.asarray(y) for y in ys_dev]
    X, X_dev = standardised(X, X_dev)
    dev_order = np.random.default_rng(config.seed).permutation(len(ys_dev[0]))
    bits = [cuts[0] * math.log2(n_classes)] * len(ys)
    for start, end in zip(cuts[:-1], cuts[1:]):
        dev = np.sort(dev_order[: max(MDL_DEV_ROWS, start)])
        whole = len(dev) == len(dev_order)
        block_dev = (X_dev, ys_dev) if whole else (X_dev[dev], [y[dev] for y in ys_dev])
        probes = fit(X[:start], [y[:start] for y in ys], *block_dev, n_classes, config)
        block = X[start:end]
        for i, (probe, y) in enumerate(zip(probes, ys)):
            p = probe.predict_proba(block)[np.arange(end - start), y[start:end]]
            bits[i] += float(-np.log2(np.clip(p, 1e-12, 1.0)).sum())
    uniform = n * math.log2(n_classes)
    return [{"mdl_bits": b, "uniform_bits": uniform, "compression": uniform / b, "blocks": cuts} for b in bits]
