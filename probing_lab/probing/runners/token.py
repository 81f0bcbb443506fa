"""Token tasks (UPOS, XPOS, dependency relation, constituency depth): a softmax probe per layer,
the control task and selectivity, online-code MDL, the majority label per word type.

``run(exp, splits, with_controls, log) -> (metrics per layer, extra)``; ``extra["majority"]`` is the
task's simple baseline (or None)."""

from __future__ import annotations

import time

import numpy as np

from .. import tasks as T
from ..probes import fit_probe, online_codelength

TASKS = T.TOKEN_TASKS


def run(exp, splits: dict, with_controls: bool, report) -> tuple[dict, dict]:
    train, dev, test = splits["train"], splits["dev"], splits["test"]
    labels = {r: T.token_labels(s.sentences, exp.task) for r, s in splits.items()}
    index = T.LabelIndex(labels["train"])
    y = {r: index.encode(l) for r, l in labels.items()}
    control = {}
    if with_controls and exp.control:
        control = {r: index.encode(T.control_labels(s.words, labels["train"], exp.seed)) for r, s in splits.items()}
    results = {}
    rng = np.random.default_rng(exp.seed)
    order = rng.permutation(len(y["train"]))
    for key in exp.layer_keys:
        config = exp.probe_config(mix=key == "mix")
        X_tr, X_dev, X_te = train.layer(key), dev.layer(key), test.layer(key)
        t0 = time.perf_counter()
        probe = fit_probe(X_tr, y["train"], X_dev, y["dev"], len(index), config)
        predicted = probe.predict(X_te)
        entry = {
            "score": float((predicted == y["test"]).mean()),
            "dev_score": probe.dev_accuracy,
            "epochs": probe.epochs_run,
            "confusion": T.confusion_matrix(y["test"], predicted, len(index)),
        }
        if probe.mix_weights() is not None:
            entry["mix_weights"] = probe.mix_weights()
        if control:
            cprobe = fit_probe(X_tr, control["train"], X_dev, control["dev"], len(index), config)
            entry["control_score"] = cprobe.accuracy(X_te, control["test"])
            entry["selectivity"] = entry["score"] - entry["control_score"]
        if with_controls and exp.mdl:
            entry.update(online_codelength(X_tr[order], y["train"][order], X_dev, y["dev"], len(index), config))
            if control:
                entry["control_mdl_bits"] = online_codelength(
                    X_tr[order], control["train"][order], X_dev, control["dev"], len(index), config
                )["mdl_bits"]
        entry["seconds"] = round(time.perf_counter() - t0, 2)
        report.layer_done(
            f"  layer {key}: score {entry['score']:.4f}"
            + (f", control {entry['control_score']:.4f}" if "control_score" in entry else "")
        )
        results[key] = entry
        del X_tr
    majority = T.accuracy(T.majority_per_type(train.words, labels["train"], test.words), labels["test"])
    extra = {
        "majority": majority,
        "n_labels": len(index),
        "labels": index.labels,
        "tokens": {r: int(len(v)) for r, v in y.items()},
    }
    return results, extra
