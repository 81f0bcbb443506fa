"""Sentence tasks (``sentence_label``): one label per sentence (``Sentence.label``), probed per layer
on a sentence vector pooled from the token vectors (``[probe] pooling``: ``mean`` (default), ``max``
or ``summary``, see ``features.pooling``) by a linear or MLP probe (``fit_probe``); the control task
gives every sentence-length bucket one fixed random label (``tasks.length_control_labels``), with
selectivity; online-code MDL; the majority label of the training set as the simple baseline.

``run(exp, splits, with_controls, report) -> (metrics per layer, extra)``."""

from __future__ import annotations

from collections.abc import Generator

import numpy as np

from ...features.pooling import pool_layers, pooled_layer
from .. import tasks as T
from ..layer_pool import LayerJobs
from .classify import classify_layer, said

TASKS = T.SENTENCE_TASKS


def pooled(split, how: str) -> np.ndarray:
    """``(n_layers, n_sentences, dim)``: every layer of the split's sentences pooled ``how``."""
    return pool_layers(split.features.layers, split.features.offsets, how)


def run(exp, splits: dict, with_controls: bool, report) -> Generator[LayerJobs, dict, tuple[dict, dict]]:
    how = exp.pooling
    labels = {r: T.sentence_labels(s.sentences, exp.task) for r, s in splits.items()}
    index = T.LabelIndex(labels["train"])
    y = {r: index.encode(l) for r, l in labels.items()}
    vectors = {r: pooled(s, how) for r, s in splits.items()}
    control = {}
    if with_controls and exp.control:
        control = {
            r: index.encode(T.length_control_labels([len(x.tokens) for x in s.sentences], labels["train"], exp.seed))
            for r, s in splits.items()
        }
    order = np.random.default_rng(exp.seed).permutation(len(y["train"]))

    def fit_layer(key: str) -> dict:
        X = {r: pooled_layer(vectors[r], key) for r in ("train", "dev", "test")}
        return classify_layer(
            X, y, control, len(index), exp.probe_config(mix=key == "mix"), order, with_controls and exp.mdl
        )

    results = yield LayerJobs(exp.layer_keys, fit_layer, lambda key, entry: said(f"{key} ({how} pooling)", entry))
    majority = index.labels[0]
    right = np.asarray(labels["test"]) == majority
    extra = {
        "majority": float(right.mean()),
        "_test": {"unit": np.arange(len(right)), "unit_name": "sentence", "majority": right},
        "majority_is": f"the most frequent training label ({majority!r})",
        "pooling": how,
        "n_labels": len(index),
        "labels": index.labels,
        "sentences": {r: int(len(v)) for r, v in y.items()},
    }
    return results, extra
