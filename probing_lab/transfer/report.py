"""Transfer runs as tables and series, for the app's Transfer page and any script (no Streamlit here).

A transfer run directory (``probing-lab transfer``, :mod:`probing_lab.transfer.experiment`) holds a
``metrics.json`` with the cells (one per input x training fraction x seed). This module finds such
directories under a few folders (the committed ``transfer/results/<experiment>/`` and the user's
``runs/transfer/``, or the folders of ``$PROBING_LAB_TRANSFER_RUNS``), reads them, and shapes:

- :func:`summarize`: mean and spread over the seeds per input and fraction (the sample-efficiency curve);
- :func:`error_reduction_rows`: the relative error reduction of ``elmo`` over ``static`` per fraction;
- :func:`layer_weights`: the learned softmax(s) of the ``elmo`` scalar mix per layer, mean and spread
  over the seeds at the largest fraction (Peters et al. 2018, figure 2);
- :func:`probe_scores` and :func:`decodable_vs_useful`: the linear-probe score of the same layers
  (``probes/results/``), next to the learned weights.

Every summary is computed from the cells, so a run cut short (no ``summary`` yet) reads the same way.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from ..paths import REPO_ROOT, WORK_DIR

SHIPPED_RESULTS = REPO_ROOT / "transfer" / "results"  # the committed runs, one folder per experiment
USER_RUNS = WORK_DIR / "runs" / "transfer"  # where `probing-lab transfer` writes by default
RUNS_ENV = "PROBING_LAB_TRANSFER_RUNS"  # folders (os.pathsep-separated) that replace USER_RUNS
PROBE_RESULTS = REPO_ROOT / "probes" / "results"

INPUT_NAMES = {
    "static": "static embedding",
    "elmo": "ELMo scalar mix",
    "elmo_top": "ELMo top layer (L2)",
    "elmo_l0": "ELMo type layer (L0)",
    "elmo_random": "random-init ELMo",
}
METRIC_NAMES = {"f1": "test F1", "accuracy": "test accuracy"}
# the probe experiment (probes/results/<name>) that probes the same layers for the same kind of labels
TASK_PROBES = {"chunking": "chunks_conll2000", "entities": "entities_gum", "upos": "pos_ewt"}
PROBE_TASK_NAMES = {"span_label": "span type accuracy (edge probe on gold spans)", "upos": "UPOS accuracy"}


def input_name(key: str) -> str:
    return INPUT_NAMES.get(key, key)


def metric_name(metric: str) -> str:
    return METRIC_NAMES.get(metric, f"test {metric}")


def fraction_label(fraction: float) -> str:
    """0.01 -> "1%", 0.1 -> "10%", 1.0 -> "100%"."""
    return f"{fraction * 100:g}%"


def layer_name(index: int) -> str:
    return f"L{index}"


@dataclass(frozen=True)
class TransferRun:
    """A transfer run directory as read back: the parts of ``metrics.json`` the page shows."""

    path: Path
    experiment: str
    task: str
    metric: str
    model: str
    cells: list = field(repr=False)
    train_sentences: dict = field(default_factory=dict, repr=False)
    source: str = ""  # which folder it was found in ("shipped", "your runs", ...)

    @property
    def label(self) -> str:
        return f"{self.experiment} · {self.model} · {self.source or self.path.parent}/{self.path.name}"

    @property
    def fractions(self) -> list[float]:
        return sorted({c["fraction"] for c in self.cells})

    @property
    def inputs(self) -> list[str]:
        seen = list(dict.fromkeys(c["input"] for c in self.cells))
        return [i for i in INPUT_NAMES if i in seen] + [i for i in seen if i not in INPUT_NAMES]


def load_run(run_dir: str | Path, source: str = "") -> TransferRun:
    """Read one transfer run directory; raises ``ValueError`` naming the file and what is wrong."""
    run_dir = Path(run_dir)
    path = run_dir / "metrics.json"
    try:
        metrics = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not readable JSON ({e})") from None
    try:
        if not isinstance(metrics, dict) or not isinstance(metrics.get("cells"), list):
            raise ValueError("no list of cells")
        cells = []
        for c in metrics["cells"]:
            test = c["test"]
            if not isinstance(test, (int, float)) or isinstance(test, bool):
                raise ValueError(f"cell {c.get('input')} {c.get('fraction')} seed {c.get('seed')}: test {test!r}")
            cells.append(
                {
                    "input": str(c["input"]),
                    "fraction": float(c["fraction"]),
                    "seed": int(c["seed"]),
                    "test": float(test),
                    "dev": c.get("dev"),
                    "mix_weights": c.get("mix_weights") or None,
                }
            )
        if not cells:
            raise ValueError("no cells")
        return TransferRun(
            path=run_dir,
            experiment=str(metrics.get("experiment") or run_dir.name),
            task=str(metrics["task"]),
            metric=str(metrics["metric"]),
            model=str(metrics.get("model") or "?"),
            cells=cells,
            train_sentences=dict(metrics.get("train_sentences") or {}),
            source=source,
        )
    except (KeyError, TypeError, AttributeError, ValueError) as e:
        raise ValueError(
            f"{path} is not the metrics of a transfer run ({type(e).__name__}: {e}); "
            "it should be written by `probing-lab transfer`"
        ) from None


def run_roots(env: Optional[str] = None) -> dict[str, Path]:
    """The folders to look in, by a name to show: the committed results, then the user's runs
    (``runs/transfer``, or each folder of ``$PROBING_LAB_TRANSFER_RUNS``)."""
    raw = os.environ.get(RUNS_ENV, "") if env is None else env
    folders = [Path(f.strip()).expanduser() for f in raw.split(os.pathsep) if f.strip()]
    roots = {"shipped": SHIPPED_RESULTS}
    if not folders:
        roots["your runs"] = USER_RUNS
    for i, folder in enumerate(folders):
        roots["your runs" if len(folders) == 1 else f"your runs ({i + 1})"] = folder
    return roots


def metrics_files(roots: dict[str, Path]) -> list[tuple[str, Path]]:
    """``(source, metrics.json)`` of the run directories one or two levels under each root."""
    found, seen = [], set()
    for source, root in roots.items():
        root = Path(root)
        if not root.is_dir():
            continue
        for path in sorted(root.glob("*/metrics.json")) + sorted(root.glob("*/*/metrics.json")):
            key = path.resolve()
            if key not in seen:
                seen.add(key)
                found.append((source, path))
    return found


def signature(roots: dict[str, Path]) -> tuple:
    """What a cache of :func:`find_runs` is keyed on: each metrics.json's path, mtime and size."""
    out = []
    for source, path in metrics_files(roots):
        try:
            stat = path.stat()
        except OSError:
            continue
        out.append((source, str(path), stat.st_mtime_ns, stat.st_size))
    return tuple(out)


def find_runs(roots: dict[str, Path]) -> tuple[list[TransferRun], list[str]]:
    """The transfer runs under ``roots`` and the unreadable ones (a message each, naming the file).
    A readable ``metrics.json`` without ``cells`` (a probe run) is not a transfer run and is passed over."""
    runs, broken = [], []
    for source, path in metrics_files(roots):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            broken.append(f"{path}: not readable JSON ({e})")
            continue
        if isinstance(data, dict) and "cells" not in data and "layers" in data:
            continue  # a probe run
        try:
            runs.append(load_run(path.parent, source))
        except ValueError as e:
            broken.append(str(e))
    return runs, broken


def newest_per_experiment(runs: list[TransferRun]) -> list[TransferRun]:
    """One run per experiment: the most recently written (the committed one when it is the only one)."""

    def mtime(run: TransferRun) -> float:
        try:
            return (run.path / "metrics.json").stat().st_mtime
        except OSError:
            return 0.0

    best: dict[str, TransferRun] = {}
    for run in runs:
        if run.experiment not in best or mtime(run) > mtime(best[run.experiment]):
            best[run.experiment] = run
    return [best[k] for k in sorted(best)]


# --- summaries -------------------------------------------------------------------------------------


def summarize(cells: list[dict]) -> list[dict]:
    """One row per input and fraction: the test score's mean over the seeds, its standard deviation
    (sample, ddof=1; 0 for one seed, as in ``metrics.json``'s summary), min, max and the seed count."""
    groups: dict[tuple[str, float], list[float]] = {}
    for c in cells:
        groups.setdefault((c["input"], float(c["fraction"])), []).append(float(c["test"]))
    order = {k: i for i, k in enumerate(INPUT_NAMES)}
    rows = []
    for (name, fraction), values in sorted(groups.items(), key=lambda kv: (order.get(kv[0][0], 99), kv[0])):
        rows.append(
            {
                "input": name,
                "fraction": fraction,
                "mean": float(np.mean(values)),
                "std": float(np.std(values, ddof=1)) if len(values) > 1 else 0.0,
                "min": float(min(values)),
                "max": float(max(values)),
                "n": len(values),
            }
        )
    return rows


def curves(run: TransferRun) -> dict[str, dict[str, list]]:
    """input -> {"fraction", "mean", "std", "n"} lists in fraction order (one line of the curve each)."""
    out: dict[str, dict[str, list]] = {}
    for row in summarize(run.cells):
        series = out.setdefault(row["input"], {"fraction": [], "mean": [], "std": [], "n": []})
        for key in series:
            series[key].append(row[key])
    return out


def error_reduction(static: float, elmo: float) -> Optional[float]:
    """Relative error reduction ``(err_static - err_elmo) / err_static`` (scores in [0, 1]); None when
    static makes no errors."""
    err = 1.0 - static
    return None if err <= 0 else (err - (1.0 - elmo)) / err


def error_reduction_rows(run: TransferRun) -> list[dict]:
    """Per training fraction: the static and elmo means over the seeds, and elmo's relative error
    reduction over static (Peters et al.'s tables), with column names fit to show."""
    means = {(r["input"], r["fraction"]): r for r in summarize(run.cells)}
    metric = metric_name(run.metric)
    rows = []
    for fraction in run.fractions:
        static, elmo = means.get(("static", fraction)), means.get(("elmo", fraction))
        if not static or not elmo:
            continue
        n = run.train_sentences.get(str(fraction))
        reduction = error_reduction(static["mean"], elmo["mean"])
        rows.append(
            {
                "experiment": run.experiment,
                "metric": metric,
                "training data": fraction_label(fraction) + (f" ({n:,} sentences)" if isinstance(n, int) else ""),
                "static embedding": round(static["mean"], 4),
                "ELMo scalar mix": round(elmo["mean"], 4),
                "gain (points)": round(100 * (elmo["mean"] - static["mean"]), 2),
                "relative error reduction": None if reduction is None else f"{reduction:.1%}",
            }
        )
    return rows


def layer_weights(run: TransferRun, input_key: str = "elmo") -> Optional[dict]:
    """The learned softmax(s) of one input's scalar mix at the run's largest fraction: {"layers": ["L0",
    ...], "mean": [...], "std": [...], "n": seeds}; None when the input has no mix in this run."""
    if not run.cells:
        return None
    largest = max(run.fractions)
    weights = [
        c["mix_weights"]
        for c in run.cells
        if c["input"] == input_key and c["fraction"] == largest and c.get("mix_weights")
    ]
    weights = [w for w in weights if len(w) == len(weights[0])] if weights else []
    if not weights:
        return None
    W = np.asarray(weights, dtype=float)
    return {
        "layers": [layer_name(i) for i in range(W.shape[1])],
        "mean": W.mean(axis=0).tolist(),
        "std": (W.std(axis=0, ddof=1) if len(W) > 1 else np.zeros(W.shape[1])).tolist(),
        "n": len(W),
        "fraction": largest,
    }


# --- probes of the same layers ----------------------------------------------------------------------


def probe_dir(task: str, probes_root: Optional[Path] = None) -> Optional[Path]:
    name = TASK_PROBES.get(task)
    return None if name is None else Path(probes_root or PROBE_RESULTS) / name


def probe_scores(task: str, probes_root: Optional[Path] = None) -> Optional[dict]:
    """The probe run of the same layers for a transfer task (:data:`TASK_PROBES`): {"experiment",
    "task", "model", "layers": {"L0": score, ...}, "random_init": {...}}; None when there is none
    (a task without a probe counterpart, or its results are not in this checkout)."""
    from ..probing.runs import ProbeRun

    directory = probe_dir(task, probes_root)
    if directory is None or not (directory / "metrics.json").is_file():
        return None
    run = ProbeRun.load(directory)  # a ValueError names the file when it is broken
    numbered = sorted((k for k in run.layers if k.isdigit()), key=int)
    return {
        "experiment": run.experiment,
        "task": run.task,
        "what": PROBE_TASK_NAMES.get(run.task, f"{run.task} score"),
        "model": run.model,
        "layers": {layer_name(int(k)): run.layers[k].score for k in numbered},
        "random_init": {layer_name(int(k)): run.random_init[k] for k in numbered if k in run.random_init},
    }


def decodable_vs_useful(runs: list[TransferRun], probes: dict[str, Optional[dict]]) -> list[dict]:
    """One row per run and layer: the learned transfer weight (ELMo scalar mix, mean over the seeds)
    next to the linear probe's test score of the same layer. ``probes``: task -> :func:`probe_scores`."""
    rows = []
    for run in runs:
        weights = layer_weights(run)
        probe = probes.get(run.task)
        layers = list(weights["layers"]) if weights else []
        for layer in (probe or {}).get("layers", {}):
            if layer not in layers:
                layers.append(layer)
        for i, layer in enumerate(layers):
            rows.append(
                {
                    "experiment": run.experiment,
                    "layer": layer,
                    "learned weight softmax(s)": round(weights["mean"][i], 3)
                    if weights and i < len(weights["mean"])
                    else None,
                    "probe": probe["experiment"] if probe else "none",
                    "probe score": round(probe["layers"][layer], 4) if probe and layer in probe["layers"] else None,
                    "probe, random-init ELMo": round(probe["random_init"][layer], 4)
                    if probe and layer in probe["random_init"]
                    else None,
                }
            )
    return rows
