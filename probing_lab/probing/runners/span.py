"""Span tasks (``span_label``, edge probing): the labelled spans of each sentence
(``Sentence.spans``: one span, or a pair) probed per layer by :mod:`..span_probe` (endpoints and
a learned attention pool per span, then a linear or MLP classifier); the control task gives every
head word type (pair of types) one fixed random label (``tasks.span_control_labels``), with
selectivity; online-code MDL when ``mdl = true`` (it trains the span probe 11 more times per
layer); the majority label of the training set as the simple baseline.

``run(exp, splits, with_controls, report) -> (metrics per layer, extra)``."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Generator

import numpy as np

from .. import tasks as T
from ..layer_pool import LayerJobs
from ..span_probe import SpanInputs, fit_span_layers, fit_span_probes
from .classify import classify_layer, said

TASKS = T.SPAN_TASKS


def span_rows(split) -> tuple[np.ndarray, np.ndarray | None, list[str]]:
    """The split's spans as rows ``[start, end)`` of its token matrix (``span2`` None when no
    example has a second span), and their labels. Single spans and pairs mixed is an error."""
    offsets = split.features.offsets
    first, second, labels = [], [], []
    for i, sentence in enumerate(split.sentences):
        for example in sentence.spans:
            first.append((offsets[i] + example.span1[0], offsets[i] + example.span1[1]))
            if example.span2 is not None:
                second.append((offsets[i] + example.span2[0], offsets[i] + example.span2[1]))
            labels.append(example.label)
    if not labels:
        raise ValueError(f"no labelled span in {split.sentences[0].source if split.sentences else 'the split'}")
    if second and len(second) != len(first):
        raise ValueError(
            f"{split.sentences[0].source}: {len(second)} of {len(first)} examples have span2: a task probes "
            "single spans or span pairs, not both (put them in two files)"
        )
    rows = lambda pairs: np.asarray(pairs, dtype=np.int64).reshape(-1, 2)  # noqa: E731
    return rows(first), (rows(second) if second else None), labels


def span_sentences(split, span1: np.ndarray) -> np.ndarray:
    """Each example's sentence (of its first span) in ``split``: what the linear probe's minibatches
    keep together (``SpanInputs.units``), and the test set's unit for the intervals."""
    return np.searchsorted(split.features.offsets, span1[:, 0], side="right") - 1


def _tasks(exp) -> list:
    """The layer entries as the pool's tasks: a linear probe's layers and mix of one model (two or more)
    as one tuple, trained side by side (``span_probe.fit_span_layers``: a step's reading and small
    operations shared, the products each its own), the others one by one."""
    together = [k for k in exp.layer_keys if k == "mix" or str(k).isdigit()]
    if exp.probe_config().kind != "linear" or len(together) < 2:
        return list(exp.layer_keys)
    return [tuple(together)] + [k for k in exp.layer_keys if k not in together]


def run(exp, splits: dict, with_controls: bool, report) -> Generator[LayerJobs, dict, tuple[dict, dict]]:
    spans = {r: span_rows(s) for r, s in splits.items()}
    pairs = {r: v[1] is not None for r, v in spans.items()}
    if len(set(pairs.values())) > 1:
        raise ValueError(f"span pairs in {[r for r, p in pairs.items() if p]} only: every split needs the same kind")
    labels = {r: v[2] for r, v in spans.items()}
    index = T.LabelIndex(labels["train"])
    y = {r: index.encode(l) for r, l in labels.items()}
    control = {}
    if with_controls and exp.control:
        control = {
            r: index.encode(T.span_control_labels(s.sentences, labels["train"], exp.seed)) for r, s in splits.items()
        }
    order = np.random.default_rng(exp.seed).permutation(len(y["train"]))
    units = {r: span_sentences(s, spans[r][0]) for r, s in splits.items()}

    label_sets = [y] + ([control] if control else [])

    def fit_layer(key: str, trained=None) -> dict:
        config = exp.probe_config(mix=key == "mix")
        X = {r: SpanInputs(splits[r].rows(key), *spans[r][:2], units[r]) for r in ("train", "dev", "test")}
        mdl = with_controls and exp.mdl
        return classify_layer(X, y, control, len(index), config, order, mdl, fit=fit_span_probes, trained=trained)

    def fit_layers(keys) -> dict:
        """Single keys as above; a tuple of keys trained side by side (``fit_span_layers``), then each scored."""
        if not isinstance(keys, tuple):
            return fit_layer(keys)
        start = time.perf_counter()
        X = {r: SpanInputs(splits[r].rows("mix"), *spans[r][:2], units[r]) for r in ("train", "dev")}
        Y = {r: [s[r] for s in label_sets] for r in ("train", "dev")}
        trained = fit_span_layers(
            X["train"], Y["train"], X["dev"], Y["dev"], len(index), exp.probe_config(), list(keys)
        )
        share = (time.perf_counter() - start) / len(keys)  # each entry's part of the fit, in its seconds
        entries = {key: fit_layer(key, trained[key]) for key in keys}
        for entry in entries.values():
            entry["timing"]["probes"] = round(entry["timing"]["probes"] + share, 2)
            entry["seconds"] = round(entry["seconds"] + share, 2)
            entry["fitted_with"] = list(keys)
        return entries

    results = yield LayerJobs(_tasks(exp), fit_layers, said)
    majority = index.labels[0]
    lengths = Counter(int(e - s) for s, e in spans["train"][0])
    right = np.asarray(labels["test"]) == majority
    extra = {
        "majority": float(right.mean()),
        "_test": {"unit": units["test"], "unit_name": "sentence", "majority": right},
        "majority_is": f"the most frequent training label ({majority!r})",
        "span_pairs": pairs["train"],
        "n_labels": len(index),
        "labels": index.labels,
        "spans": {r: int(len(v)) for r, v in y.items()},
        "mean_span_length": round(sum(k * v for k, v in lengths.items()) / sum(lengths.values()), 2),
    }
    return results, extra
