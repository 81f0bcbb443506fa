"""Dependency arcs: a binary probe on (dependent, candidate head) pairs with sampled negatives,
scored as head selection.

``run(exp, splits, with_controls, log) -> (metrics per layer, extra)``; ``extra["majority"]`` is the
task's simple baseline (or None)."""

from __future__ import annotations

from typing import Optional

import numpy as np

from ...stats import unit_ids
from ..probes import fit_probe
from ..splits import Split

TASKS = ("dep_arc",)


def _arc_pairs(split: Split, key: str, n_negative: int, rng, max_dependents: Optional[int] = None):
    """Pairs (dependent, candidate head): the gold head and ``n_negative`` other tokens of the
    sentence. Features ``[x_dep, x_cand, x_dep * x_cand]``; returns features, labels (1 = head),
    the group of each pair (one per dependent), each candidate's distance to the dependent and
    each group's sentence (its first token's row)."""
    layer = split.layer(key)
    rows, labels, groups, distances = [], [], [], []
    deps = []
    offset = 0
    for s in split.sentences:
        n = len(s.tokens)
        for i, t in enumerate(s.tokens):
            if t.head and n > 2:
                deps.append((offset, n, i, t.head - 1))
        offset += n
    if max_dependents and len(deps) > max_dependents:
        deps = [deps[k] for k in sorted(rng.choice(len(deps), max_dependents, replace=False))]
    for g, (off, n, i, h) in enumerate(deps):
        others = [j for j in range(n) if j not in (i, h)]
        negatives = rng.choice(others, min(n_negative, len(others)), replace=False).tolist()
        for j, label in [(h, 1)] + [(j, 0) for j in negatives]:
            rows.append((off + i, off + j))
            labels.append(label)
            groups.append(g)
            distances.append(abs(i - j))
    rows = np.array(rows)
    a, b = layer[rows[:, 0]], layer[rows[:, 1]]
    sentence = np.array([off for off, _, _, _ in deps])
    return np.concatenate([a, b, a * b], axis=1), np.array(labels), np.array(groups), np.array(distances), sentence


def _group_right(scores: np.ndarray, labels: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Per dependent (in group order): whether its gold head scores highest among its candidates."""
    order = np.lexsort((-scores, groups))
    first = np.r_[True, groups[order][1:] != groups[order][:-1]]
    return labels[order][first].astype(bool)


def run(exp, splits: dict, with_controls: bool, report) -> tuple[dict, dict]:
    """Dependency arc prediction: a binary linear probe on (dependent, candidate) pairs with
    sampled negatives; scored as head selection among each dependent's candidates."""
    n_negative = exp.negatives
    config = exp.probe_config()
    results, nearest = {}, None
    for key in exp.layer_keys:
        data = {}
        for role, split in splits.items():
            rng = np.random.default_rng([exp.seed, ("train", "dev", "test").index(role)])
            data[role] = _arc_pairs(split, key, n_negative, rng, 60_000 if role == "train" else None)
        (X, y, *_), (Xd, yd, *_), (Xt, yt, gt, dt, sentence) = data["train"], data["dev"], data["test"]
        probe = fit_probe(X, y, Xd, yd, 2, config)
        value = _group_right(probe.predict_proba(Xt)[:, 1], yt, gt)
        nearest = _group_right(-dt.astype(float), yt, gt)
        results[key] = {
            "score": float(value.mean()),
            "pair_accuracy": probe.accuracy(Xt, yt),
            "candidates": n_negative + 1,
            "_value": value,
        }
        report.layer_done(f"  layer {key}: head selection {value.mean():.4f}")
    return results, {
        "majority": float(nearest.mean()),
        "majority_is": "the candidate nearest to the dependent in the sentence",
        "_test": {"unit": unit_ids(sentence), "unit_name": "sentence", "majority": nearest},
    }
