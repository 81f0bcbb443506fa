"""One layer of a classification probe, shared by the token, sentence and span tasks: the probe's
test score and confusion, the control task's score, selectivity and MDL, and the task's online-code
MDL.

The runners' contract for uncertainty (``probing.intervals``): each layer's entry carries
``_value`` (per test item: 1 right, 0 wrong; or a count with ``weight``), optionally ``_pred``
(label ids), ``_control_value`` and ``_context_value``; the extra carries ``_test``: the unit of
each test item (``unit``), the unit's name, and ``majority`` (the simple baseline's values)."""

from __future__ import annotations

import time
from typing import Optional

import numpy as np

from .. import tasks as T
from ..mdl import online_codelengths
from ..probes import fit_probes
from ..rows import Standardised, in_memory, read_standardised


def said(key: str, entry: dict) -> str:
    """The log line of a probed layer: its score, and its control task's."""
    control = f", control {entry['control_score']:.4f}" if "control_score" in entry else ""
    return f"  layer {key}: score {entry['score']:.4f}{control}"


def classify_layer(
    X: dict,
    y: dict,
    control: dict,
    n_labels: int,
    config,
    order: np.ndarray,
    mdl: bool,
    fit=fit_probes,
    trained: Optional[list] = None,
) -> dict:
    """``X``/``y``/``control``: train, dev and test vectors, labels and control labels (``control``
    empty: no control task); ``order``: the training rows' order for the online code; ``fit``: the
    probe family's trainer of several label sets (``fit_probes``, or ``fit_span_probes`` with span
    inputs as ``X``): the task's and the control task's probes train together. ``trained``: those
    probes, trained already (with other layers': ``span_probe.fit_span_layers``), to be scored."""
    t0 = time.perf_counter()
    # read once and standardised once (where they fit in memory), shared by every fit below
    train, dev = read_standardised(X["train"], X["dev"])
    X = {"train": train, "dev": dev, "test": in_memory(X["test"])}
    timing = {"read": time.perf_counter() - t0}
    label_sets = [y] + ([control] if control else [])
    probes = trained or fit(
        X["train"], [s["train"] for s in label_sets], X["dev"], [s["dev"] for s in label_sets], n_labels, config
    )
    probe = probes[0]
    predicted = probe.predict(X["test"])
    entry = {
        "score": float((predicted == y["test"]).mean()),
        "_pred": predicted,  # the test predictions (label ids): kept with the run, scored per unit (intervals)
        "_value": predicted == y["test"],
        "dev_score": probe.dev_accuracy,
        "epochs": probe.epochs_run,
        "confusion": T.confusion_matrix(y["test"], predicted, n_labels),
    }
    timing["probes"] = time.perf_counter() - t0 - timing["read"]
    mix: Optional[list] = probe.mix_weights()
    if mix is not None:
        entry["mix_weights"] = mix
    if control:
        entry["_control_value"] = probes[1].predict(X["test"]) == control["test"]
        entry["control_score"] = float(entry["_control_value"].mean())
        entry["selectivity"] = entry["score"] - entry["control_score"]
    if mdl:
        t = time.perf_counter()
        # the main fit is done: a layer standardised in memory is put in the code's order in its own buffer
        train = X["train"].reorder_(order) if isinstance(X["train"], Standardised) else X["train"][order]
        codes = online_codelengths(
            train,
            [s["train"][order] for s in label_sets],
            X["dev"],
            [s["dev"] for s in label_sets],
            n_labels,
            config,
            fit=fit,
        )
        entry.update(codes[0])
        if control:
            entry["control_mdl_bits"] = codes[1]["mdl_bits"]
        timing["mdl"] = time.perf_counter() - t
    entry["seconds"] = round(time.perf_counter() - t0, 2)
    entry["timing"] = {k: round(v, 2) for k, v in timing.items()}  # where the layer's seconds went
    return entry
