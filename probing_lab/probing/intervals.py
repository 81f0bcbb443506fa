"""A probe run's uncertainty: intervals for every score and baseline, the paired comparisons its
claims rest on, the warnings a small test set deserves, and the verdicts in words.

``attach(metrics, layers, random_layers, test, seed)`` turns what the runners return (per test
item: ``_value``, ``_pred``, ...; see ``runners.classify``) into ``metrics.json`` fields:

- per layer ``ci95`` (and ``control_ci95``, ``context_ci95``), ``baselines_ci95`` (``majority``,
  ``random_init`` per layer);
- ``n_test_units``, ``unit``, ``comparisons`` (adjacent layers, best against second best, each
  layer against its strongest baseline and against the random-init model at that layer) and
  ``warnings`` (fewer than 50 test units; an interval half-width above 0.05 at the majority rate);

and returns the arrays kept in the run's ``predictions.npz`` (:func:`save_predictions`), from
which :func:`load_outcomes` recomputes all of it without refitting, also to compare two runs on the
same test set (``probing-lab report A B``). :func:`run_verdicts` says a run's findings in words;
every claim goes through :func:`probing_lab.stats.verdict`.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Optional

import numpy as np

from .. import stats
from ..features.activations import layer_label

PREDICTIONS = "predictions.npz"
BASELINE_NAMES = {"majority": "majority", "random_init": "random init", "context": "bag of context"}


def _outcomes(value, test: dict) -> stats.Outcomes:
    return stats.Outcomes(np.asarray(value, dtype=np.float64), test["unit"], test.get("weight"))


def test_set_id(test: dict) -> str:
    """A fingerprint of the test set: its words and what is probed on them (``test["items"]``, from
    the experiment), its units and weights. Two runs are compared only on the same one."""
    h = hashlib.sha256(test.get("items", "").encode())
    h.update(np.asarray(test["unit"], dtype=np.int64).tobytes())
    if test.get("weight") is not None:
        h.update(np.asarray(test["weight"], dtype=np.float64).tobytes())
    return h.hexdigest()[:16]


def baseline_label(metrics: dict, key: str) -> str:
    """What a baseline is called in words, by task: the majority is "majority per type" for token
    tasks, "most frequent sense" for WSD, "nearest candidate" for arcs."""
    if key != "majority":
        return BASELINE_NAMES.get(key, key)
    task = metrics.get("task", "")
    if task.startswith("wsd_"):
        return "most frequent sense"
    if task == "dep_arc":
        return "nearest candidate"
    if "majority_is" in metrics:
        return "most frequent label"
    return "majority per type"


def scorers(layers: dict, random_layers: Optional[dict], test: dict) -> dict[str, stats.Outcomes]:
    """Every scorer of a run on its test items: ``layer:K``, ``control:K``, ``context:K``,
    ``random_init:K`` and ``majority``."""
    out = {}
    for key, entry in layers.items():
        out[f"layer:{key}"] = _outcomes(entry["_value"], test)
        for part in ("control", "context"):
            if f"_{part}_value" in entry:
                out[f"{part}:{key}"] = _outcomes(entry[f"_{part}_value"], test)
    for key, entry in (random_layers or {}).items():
        out[f"random_init:{key}"] = _outcomes(entry["_value"], test)
    if test.get("majority") is not None:
        out["majority"] = _outcomes(test["majority"], test)
    return out


def _baselines_of(key: str, found: dict) -> list[str]:
    """The baselines a layer is compared with: the majority, the random-init model and the bag of
    context at that layer."""
    return [b for b in ("majority", f"random_init:{key}", f"context:{key}") if b in found]


def _name(scorer: str) -> str:
    """``layer:1`` -> ``1``; a baseline keeps its kind: ``random_init:1`` -> ``random_init``."""
    kind, _, key = scorer.partition(":")
    return key if kind == "layer" else kind


def compute(found: dict[str, stats.Outcomes], n_units: int, seed: int, layer_keys: list[str]) -> dict:
    """Intervals of every scorer and the run's comparisons (see the module docstring)."""
    boot = stats.Bootstrap(n_units, seed=seed)
    ci = {name: boot.interval(o) for name, o in found.items()}
    score = {name: o.score for name, o in found.items()}
    comparisons = []

    def compare(a: str, b: str, kind: str) -> None:
        c = boot.compare(found[a], found[b])
        comparisons.append({"a": _name(a), "b": _name(b), "kind": kind, **c})

    numbered = sorted((k for k in layer_keys if k.isdigit()), key=int)
    for lower, upper in zip(numbered, numbered[1:]):
        compare(f"layer:{upper}", f"layer:{lower}", "adjacent")
    ranked = sorted(layer_keys, key=lambda k: -score[f"layer:{k}"])
    if len(ranked) > 1:
        compare(f"layer:{ranked[0]}", f"layer:{ranked[1]}", "best")
    for key in layer_keys:
        baselines = _baselines_of(key, found)
        if baselines:
            compare(f"layer:{key}", max(baselines, key=lambda b: score[b]), "baseline")
        if f"random_init:{key}" in found:
            compare(f"layer:{key}", f"random_init:{key}", "random_init")
    return {"ci": ci, "comparisons": comparisons}


def warnings_for(n_units: int, unit: str, ci: dict) -> tuple[list[str], float]:
    """The small-data warnings, and the smallest difference the test set can detect: the interval's
    half-width at the majority rate (the first layer's when the task has no majority baseline)."""
    reference = "majority" if "majority" in ci else sorted(k for k in ci if k.startswith("layer:"))[0]
    detectable = stats.half_width(ci[reference])
    out = []
    if n_units < stats.SMALL_UNITS:
        out.append(
            f"only {n_units} test {unit}s (fewer than {stats.SMALL_UNITS}): every score here is uncertain; "
            "give more test data"
        )
    if detectable > stats.WIDE:
        out.append(
            f"the test set detects only differences above {detectable:.3f} (interval half-width at the "
            f"{'majority' if reference == 'majority' else 'probe'} rate, {n_units} {unit}s); differences smaller "
            "than that are noise"
        )
    return out, detectable


def attach(metrics: dict, layers: dict, random_layers: Optional[dict], test: dict, seed: int) -> dict:
    """Add intervals, comparisons and warnings to ``metrics`` (in place; the runners' private
    ``_...`` arrays are removed from ``layers``); returns the arrays for ``predictions.npz``."""
    n_units = int(np.max(test["unit"])) + 1 if len(test["unit"]) else 0
    found = scorers(layers, random_layers, test)
    result = compute(found, n_units, seed, list(layers))
    ci = result["ci"]
    for key, entry in layers.items():
        entry["ci95"] = ci[f"layer:{key}"]
        for part in ("control", "context"):
            if f"{part}:{key}" in ci:
                entry[f"{part}_ci95"] = ci[f"{part}:{key}"]
    metrics["baselines_ci95"] = {
        "majority": ci.get("majority"),
        "random_init": {k: ci[f"random_init:{k}"] for k in (random_layers or {})},
    }
    warnings, detectable = warnings_for(n_units, test["unit_name"], ci)
    metrics.update(
        n_test_units=n_units,
        unit=test["unit_name"],
        minimum_detectable_difference=round(detectable, 4),
        comparisons=result["comparisons"],
        warnings=metrics.get("warnings", []) + warnings,
        test_set=test_set_id(test),
        predictions=PREDICTIONS,
    )
    arrays = {"unit": np.asarray(test["unit"], dtype=np.int32)}
    if test.get("weight") is not None:
        arrays["weight"] = np.asarray(test["weight"], dtype=np.float32)
    for name, o in found.items():
        arrays[f"value/{name}"] = np.asarray(o.value, dtype=np.uint8 if test.get("weight") is None else np.float32)
    for runs, prefix in ((layers, "layer"), (random_layers or {}, "random_init")):
        for key, entry in runs.items():
            if entry.get("_pred") is not None:
                arrays[f"pred/{prefix}:{key}"] = np.asarray(entry["_pred"], dtype=np.int16)
            for private in [k for k in entry if k.startswith("_")]:
                del entry[private]
    return arrays


def save_predictions(path: Path, arrays: dict) -> None:
    """``predictions.npz``: per test item its unit (and weight) and each scorer's value (1 right, 0
    wrong; or a count), plus the label ids the probes predicted (no pickle: plain arrays)."""
    np.savez_compressed(path, **arrays)


def load_outcomes(run_dir: Path) -> tuple[dict[str, stats.Outcomes], int]:
    """A run's scorers from its ``predictions.npz`` and the number of test units."""
    path = Path(run_dir) / PREDICTIONS
    if not path.is_file():
        raise FileNotFoundError(
            f"{run_dir}: no {PREDICTIONS} (the run predates the stored predictions); rerun it to get intervals"
        )
    with np.load(path, allow_pickle=False) as data:
        unit = data["unit"].astype(np.int64)
        weight = data["weight"] if "weight" in data.files else None
        found = {
            name.split("/", 1)[1]: stats.Outcomes(data[name].astype(np.float64), unit, weight)
            for name in data.files
            if name.startswith("value/")
        }
    return found, int(unit.max()) + 1 if len(unit) else 0


def compare_runs(a_dir: Path, b_dir: Path, a_metrics: dict, b_metrics: dict, seed: int = 0) -> list[dict]:
    """Each layer both runs have, run A against run B on the same test items (paired bootstrap).
    Runs on different test sets are refused with the reason."""
    if a_metrics.get("test_set") is None or b_metrics.get("test_set") is None:
        raise ValueError(f"{a_dir} or {b_dir} has no stored predictions (run before intervals existed); rerun it")
    if a_metrics["test_set"] != b_metrics["test_set"] or a_metrics.get("task") != b_metrics.get("task"):
        raise ValueError(
            f"{a_dir} and {b_dir} are not on the same test set ({a_metrics.get('task')} with "
            f"{a_metrics.get('n_test_units')} {a_metrics.get('unit')}s against {b_metrics.get('task')} with "
            f"{b_metrics.get('n_test_units')}): a paired comparison needs the same test items"
        )
    found_a, n_units = load_outcomes(a_dir)
    found_b, _ = load_outcomes(b_dir)
    boot = stats.Bootstrap(n_units, seed=seed)
    out = []
    for name in [n for n in found_a if n.startswith("layer:") and n in found_b]:
        out.append({"layer": name.split(":", 1)[1], **boot.compare(found_a[name], found_b[name])})
    return out


def run_verdicts(metrics: dict) -> list[str]:
    """A run's findings in words, each from :func:`stats.verdict`: the best layer against its
    strongest baseline (called "best" only when it beats it), the best against the second best,
    each layer against the one below it, and every layer where the trained model does not beat its
    random-init model."""
    layers = metrics.get("layers", {})
    comparisons = metrics.get("comparisons") or []

    def said(c: dict, b: str) -> str:
        entry = layers[c["a"]]
        return stats.verdict(layer_label(c["a"]), entry["score"], entry.get("ci95"), b, c)

    lines = []
    best = max(layers, key=lambda k: layers[k]["score"]) if layers else None
    for c in comparisons:
        if c["kind"] == "baseline" and c["a"] == best:
            name = baseline_label(metrics, c["b"])
            beats = stats.differs(c) and c["diff"] > 0
            lines.append(("best layer: " if beats else "no layer beats its strongest baseline: ") + said(c, name))
    lines += [said(c, layer_label(c["b"])) for c in comparisons if c["kind"] in ("best", "adjacent")]
    for c in comparisons:
        if c["kind"] == "random_init" and not (stats.differs(c) and c["diff"] > 0):
            lo, hi = c["ci95"]
            lines.append(
                f"the trained model does not beat its random-init model at {layer_label(c['a'])} "
                f"(difference {c['diff']:+.3f} [{lo:.3f}, {hi:.3f}])"
            )
    lines = list(dict.fromkeys(lines))  # best vs second best is often also an adjacent pair: said once
    return lines + [f"warning: {w}" for w in metrics.get("warnings", [])]
