"""Hewitt & Manning's structural probes (tree distance, tree depth): UUAS / root accuracy and
Spearman per layer.

``run(exp, splits, with_controls, log) -> (metrics per layer, extra)``; ``extra["majority"]`` is the
task's simple baseline (or None)."""

from __future__ import annotations

import time
from collections.abc import Generator

import numpy as np

from ..layer_pool import LayerJobs
from ..structural import fit_structural_probe, structural_targets

TASKS = ("structural_distance", "structural_depth")


def run(exp, splits: dict, with_controls: bool, report) -> Generator[LayerJobs, dict, tuple[dict, dict]]:
    kind = "distance" if exp.task == "structural_distance" else "depth"
    targets = structural_targets(kind, splits)

    def fit_layer(key: str) -> dict:
        t0 = time.perf_counter()
        metrics = fit_structural_probe(kind, splits, key, exp.probe_config(), targets)
        metrics["seconds"] = round(time.perf_counter() - t0, 2)
        return metrics

    def say(key: str, m: dict) -> str:
        return f"  layer {key}: score {m['score']:.4f} spearman {m['spearman']:.3f}"

    results = yield LayerJobs(exp.layer_keys, fit_layer, say)
    weight = next(iter(results.values()))["_weight"]  # the gold edges (or countable roots): the same for every layer
    for entry in results.values():
        del entry["_weight"]
    unit = np.arange(len(weight))
    return results, {"majority": None, "_test": {"unit": unit, "unit_name": "sentence", "weight": weight}}
