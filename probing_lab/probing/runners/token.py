"""Token tasks (UPOS, XPOS, dependency relation, constituency depth, the subject's number at the
verb): a softmax probe per layer, the control task and selectivity, online-code MDL, the majority
label per word type. A sparse task (``tasks.SPARSE_TASKS``) probes only its labelled tokens.

``run(exp, splits, with_controls, log) -> (metrics per layer, extra)``; ``extra["majority"]`` is the
task's simple baseline (or None)."""

from __future__ import annotations

from collections.abc import Generator

import numpy as np

from .. import tasks as T
from ..layer_pool import LayerJobs
from .classify import classify_layer, said

TASKS = T.TOKEN_TASKS


def sentence_ids(offsets) -> np.ndarray:
    """The sentence of every token, from the ``(n_sentences + 1,)`` token offsets."""
    offsets = np.asarray(offsets)
    return np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))


def _labelled(split, task: str) -> tuple[list[str], list[str], np.ndarray | None]:
    """The labels and words of a split's labelled tokens, and their rows (None: every token)."""
    labels = T.token_labels(split.sentences, task)
    words = split.words
    if task not in T.SPARSE_TASKS:
        return labels, words, None
    rows = np.flatnonzero([label is not None for label in labels])
    if not len(rows):
        raise ValueError(f"no token of {split.describe()} has a {task}")
    return [labels[i] for i in rows], [words[i] for i in rows], rows


def run(exp, splits: dict, with_controls: bool, report) -> Generator[LayerJobs, dict, tuple[dict, dict]]:
    labelled = {r: _labelled(s, exp.task) for r, s in splits.items()}
    labels = {r: v[0] for r, v in labelled.items()}
    words = {r: v[1] for r, v in labelled.items()}

    def X(role, key):  # the layer's rows of the labelled tokens, read from the cache a chunk at a time
        rows = labelled[role][2]
        on_disk = splits[role].rows(key)
        return on_disk if rows is None else on_disk[rows]

    index = T.LabelIndex(labels["train"])
    y = {r: index.encode(l) for r, l in labels.items()}
    control = {}
    if with_controls and exp.control:
        control = {r: index.encode(T.control_labels(words[r], labels["train"], exp.seed)) for r in splits}
    rng = np.random.default_rng(exp.seed)
    order = rng.permutation(len(y["train"]))

    def fit_layer(key: str) -> dict:
        vectors = {r: X(r, key) for r in ("train", "dev", "test")}
        config = exp.probe_config(mix=key == "mix")
        return classify_layer(vectors, y, control, len(index), config, order, with_controls and exp.mdl)

    results = yield LayerJobs(exp.layer_keys, fit_layer, said)
    majority = np.asarray(T.majority_per_type(words["train"], labels["train"], words["test"])) == np.asarray(
        labels["test"]
    )
    sentence_of = sentence_ids(splits["test"].features.offsets)
    rows = labelled["test"][2]
    extra = {
        "majority": float(majority.mean()),
        "_test": {
            "unit": sentence_of if rows is None else sentence_of[rows],
            "unit_name": "sentence",
            "majority": majority,
        },
        "n_labels": len(index),
        "labels": index.labels,
        "tokens": {r: int(len(v)) for r, v in y.items()},
    }
    return results, extra
