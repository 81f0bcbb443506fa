"""Word sense: Peters et al.'s nearest sense centroid (``wsd_centroid``) or a linear probe per lemma
(``wsd_linear``), both with the most-frequent-sense back-off.

``run(exp, splits, with_controls, log) -> (metrics per layer, extra)``; ``extra["majority"]`` is the
task's simple baseline (or None)."""

from __future__ import annotations

from typing import Optional

import numpy as np

from ...stats import unit_ids
from .. import tasks as T
from ..errors import ExperimentError
from ..probes import fit_probe
from ..splits import Split

TASKS = ("wsd_centroid", "wsd_linear")


def _wsd_arrays(split: Split, key: str, backoff: Optional[dict] = None, context: bool = False):
    """Vectors, lemmas and senses of the sense-annotated tokens; ``backoff`` collects a
    per-lemma fallback sense the dataset provides (WordNet's first sense). ``context``: instead of
    the target's vector, the mean of the other tokens' vectors of its sentence (the "bag of
    context" baseline: what the topic words give without the word itself)."""
    idx, lemmas, senses, others = [], [], [], []
    offset = 0
    for s in split.sentences:
        for j, t in enumerate(s.tokens):
            if t.sense is not None:
                idx.append(offset + j)
                others.append([offset + i for i in range(len(s.tokens)) if i != j])
                lemmas.append(t.lemma or t.form.lower())
                senses.append(t.sense)
                if backoff is not None and t.extra.get("first_sense"):
                    backoff.setdefault(lemmas[-1], t.extra["first_sense"])
        offset += len(s.tokens)
    if not idx:
        return np.zeros((0, split.features.layers.shape[-1])), lemmas, senses
    layer = split.layer(key)
    if context:  # a one-word sentence has no context: a zero vector
        X = np.stack([layer[np.array(r)].mean(axis=0) if r else np.zeros(layer.shape[1:], layer.dtype) for r in others])
    else:
        X = layer[np.array(idx, dtype=np.int64)]
    return X, lemmas, senses


def run(exp, splits: dict, with_controls: bool, report) -> tuple[dict, dict]:
    from collections import Counter, defaultdict

    results = {}
    _, tr_lemmas, tr_senses = _wsd_arrays(splits["train"], "0")
    by_lemma = defaultdict(Counter)
    for l, s in zip(tr_lemmas, tr_senses):
        by_lemma[l][s] += 1
    single = sorted(l for l, c in by_lemma.items() if len(c) < 2)
    if single and len(single) == len(by_lemma):
        raise ExperimentError(
            f"{exp.source}: every lemma in the training data has one sense ({single[:5]}); nothing to disambiguate"
        )
    mfs: dict = {}
    _wsd_arrays(splits["test"], "0", backoff=mfs)  # lemmas never seen in training: WordNet's first sense
    mfs.update({l: c.most_common(1)[0][0] for l, c in by_lemma.items()})
    _, te_lemmas, te_senses = _wsd_arrays(splits["test"], "0")

    def right(key: str, context: bool) -> np.ndarray:
        X_tr = _wsd_arrays(splits["train"], key, context=context)[0]
        X_te = _wsd_arrays(splits["test"], key, context=context)[0]
        if exp.task == "wsd_centroid":
            pred = T.sense_centroid_predict(X_tr, tr_lemmas, tr_senses, X_te, te_lemmas, mfs)
        else:
            pred = _per_lemma_linear(exp, X_tr, tr_lemmas, tr_senses, X_te, te_lemmas, mfs, splits)
        return np.array([p == g for p, g in zip(pred, te_senses)])  # every instance gets an answer: P = R = F1

    for key in exp.layer_keys:
        value, context = right(key, False), right(key, True)
        results[key] = {
            "score": float(value.mean()),
            "context_score": float(context.mean()),
            "_value": value,
            "_context_value": context,
        }
        report.layer_done(
            f"  layer {key}: F1 {results[key]['score']:.4f} (bag of context {results[key]['context_score']:.4f})"
        )
    majority = np.array([mfs.get(l) == g for l, g in zip(te_lemmas, te_senses)])
    # instances of one sentence (the same words) are one unit of the bootstrap
    sentence_of = [tuple(t.form for t in s.tokens) for s in splits["test"].sentences]
    unit = unit_ids(w for s, w in zip(splits["test"].sentences, sentence_of) for t in s.tokens if t.sense is not None)
    # a count and a few examples: the whole list (22k lemmas for WordNet) would swamp metrics.json
    return results, {
        "majority": float(majority.mean()),
        "_test": {"unit": unit, "unit_name": "sentence", "majority": majority},
        "lemmas": len(by_lemma),
        "single_sense_lemmas": len(single),
        "single_sense_examples": single[:20],
        "instances": {"train": len(tr_senses), "test": len(te_senses)},
    }


def _per_lemma_linear(exp, X_tr, tr_lemmas, tr_senses, X_te, te_lemmas, mfs, splits):
    pred = [None] * len(te_lemmas)
    tr_lemmas, te_lemmas = np.array(tr_lemmas), np.array(te_lemmas)
    for lemma in sorted(set(te_lemmas)):
        te_idx = np.flatnonzero(te_lemmas == lemma)
        tr_idx = np.flatnonzero(tr_lemmas == lemma)
        senses = sorted({tr_senses[i] for i in tr_idx})
        if len(senses) < 2:
            for i in te_idx:
                pred[i] = mfs.get(lemma)
            continue
        index = {s: k for k, s in enumerate(senses)}
        y = np.array([index[tr_senses[i]] for i in tr_idx])
        order = np.random.default_rng(exp.seed).permutation(len(tr_idx))
        n_dev = max(1, len(order) // 10)
        dev, fit = tr_idx[order[:n_dev]], tr_idx[order[n_dev:]]
        y_dev, y_fit = y[order[:n_dev]], y[order[n_dev:]]
        probe = fit_probe(
            X_tr[fit], y_fit, X_tr[dev], y_dev, len(senses), exp.probe_config(batch_size=64, epochs=50, patience=5)
        )
        for i, p in zip(te_idx, probe.predict(X_te[te_idx])):
            pred[i] = senses[p]
    return pred
