"""Probe run directories: write one, read its metrics, tabulate several (``probing-lab report``), and
the row views the app shows.

A run directory holds the experiment file, ``seed.txt``, ``metrics.json`` (with the intervals and
comparisons of ``probing.intervals``), ``predictions.npz``, ``table.md``, ``table.csv``, ``plot.png``,
``plot.html`` and fileio's run marker.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from ..features.activations import layer_label, split_half
from ..fileio import atomic_path
from ..stats import plus_minus, verdict
from . import intervals

# the files of a probe run directory (how a run written before fileio's run marker is recognised)
RUN_FILES = (
    *("experiment.toml", "experiment.json", "seed.txt", "metrics.json"),
    *("table.md", "table.csv", "plot.png", "plot.html", "split.json"),
    "data",  # a file the app staged for the run (an upload), kept with it
)


def layer_order(keys) -> list[str]:
    """Layer keys in reading order: the model's layers by number, each followed by its forward and
    backward halves, then "mean" and "mix"."""

    def rank(key):
        key = str(key)
        half = split_half(key)
        if half:
            return (0, half[0], 1 if half[1] == "f" else 2, key)
        return (0, int(key), 0, key) if key.isdigit() else (1, 0, 0, key)

    return sorted(keys, key=rank)


def _fmt(v) -> str:
    return "" if v is None else f"{v:.4f}" if isinstance(v, float) else str(v)


@dataclass(frozen=True)
class LayerScore:
    """One probed layer: test score, the control task's score and selectivity (token tasks), MDL
    codelength in bits (when asked for), the test confusion matrix (token tasks), and the same
    task on the bag-of-context vectors (sense tasks: the mean of the sentence's other tokens)."""

    score: float
    control_score: Optional[float] = None
    selectivity: Optional[float] = None
    mdl_bits: Optional[float] = None
    confusion: Optional[list] = None
    context_score: Optional[float] = None
    ci95: Optional[list] = None  # the score's 95% bootstrap interval over test units (probing.intervals)
    control_ci95: Optional[list] = None
    context_ci95: Optional[list] = None


@dataclass(frozen=True)
class ProbeRun:
    """A finished probe experiment: what ``run_experiment`` returns and ``ProbeRun.load`` reads back.

    ``metrics`` is the whole ``metrics.json`` (task-specific extras such as the WSD back-off live
    there); the other fields are the parts every task has, checked when the run is read."""

    experiment: str
    task: str
    dataset: str
    model: str
    seed: int
    splits: dict
    layers: dict[str, LayerScore]
    majority: Optional[float]
    random_init: dict[str, float]
    labels: list[str]
    seconds: float
    metrics: dict = field(repr=False)
    path: Optional[Path] = None

    @classmethod
    def from_metrics(cls, metrics: dict, path: Optional[Path] = None) -> "ProbeRun":
        where = f"{path / 'metrics.json'}" if path else "metrics"
        try:
            layers = {
                str(k): LayerScore(**{f: e.get(f) for f in LayerScore.__dataclass_fields__})
                for k, e in metrics["layers"].items()
            }
            if not layers or any(not isinstance(v.score, (int, float)) for v in layers.values()):
                raise ValueError("every layer needs a numeric score")
            baselines = metrics.get("baselines") or {}
            return cls(
                experiment=str(metrics["experiment"]),
                task=str(metrics["task"]),
                dataset=str(metrics["dataset"]),
                model=str(metrics["model"]),
                seed=int(metrics.get("seed", 0)),
                splits=dict(metrics.get("splits") or {}),
                layers=layers,
                majority=baselines.get("majority"),
                random_init=dict(baselines.get("random_init") or {}),
                labels=list(metrics.get("labels") or []),
                seconds=float(metrics.get("seconds") or 0.0),
                metrics=metrics,
                path=path,
            )
        except (KeyError, TypeError, AttributeError, ValueError) as e:
            raise ValueError(
                f"{where} is not the metrics of a probe run ({type(e).__name__}: {e}); "
                "it should be written by `probing-lab probe`"
            ) from None

    @classmethod
    def load(cls, run_dir: str | Path) -> "ProbeRun":
        run_dir = Path(run_dir)
        path = run_dir / "metrics.json"
        if not path.is_file():
            raise FileNotFoundError(f"{run_dir}: no metrics.json (is it a run directory of `probing-lab probe`?)")
        try:
            metrics = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"{path}: not readable JSON ({e}); rerun the experiment") from None
        if not isinstance(metrics, dict):
            raise ValueError(f"{path}: not the metrics of a probe run (a JSON object is expected)")
        return cls.from_metrics(metrics, run_dir)

    @property
    def layer_keys(self) -> list[str]:
        return layer_order(self.layers)

    def rows(self) -> list[dict]:
        """One row per layer: score, control, selectivity, MDL and the baselines (table.csv, the app)."""
        return [
            {
                "model": self.model,
                "task": self.task,
                "layer": key,
                "score": entry.score,
                "control_score": entry.control_score,
                "selectivity": entry.selectivity,
                "mdl_bits": entry.mdl_bits,
                "context_score": entry.context_score,
                "random_init": self.random_init.get(key),
                "majority": self.majority,
            }
            for key, entry in self.layers.items()
        ]

    def shown_rows(self) -> list[dict]:
        """The rows people read (the app's Probes table): per layer the score and every baseline the
        run has, each with its 95% interval (``0.934 ±0.003``), the majority under its task's name
        (most frequent sense, majority per type, ...). See :func:`shown_table` for several runs."""
        cis = self.metrics.get("baselines_ci95") or {}
        majority = intervals.baseline_label(self.metrics, "majority")
        out = []
        for key in self.layer_keys:
            e = self.layers[key]
            out.append(
                {
                    "model": self.model_label,
                    "layer": layer_label(key),
                    self.metric_name: _cell(e.score, e.ci95),
                    "control task": _cell(e.control_score, e.control_ci95),
                    "selectivity": _fmt3(e.selectivity),
                    "MDL (bits)": "" if e.mdl_bits is None else f"{e.mdl_bits:,.0f}",
                    "bag of context": _cell(e.context_score, e.context_ci95),
                    "random init": _cell(self.random_init.get(key), (cis.get("random_init") or {}).get(key)),
                    majority: _cell(self.majority, cis.get("majority")),
                }
            )
        return out

    @property
    def model_label(self) -> str:
        """The model in words: ``checkpoint:data/models/elmo-lab-early`` -> "early snapshot
        (elmo-lab-early)", ``shipped:elmo-lab`` -> "shipped model (elmo-lab)", ``random:P (seed S)``
        -> "random init (P, seed S)"; other names as they are."""
        kind, _, rest = self.model.partition(":")
        if kind == "shipped":
            return f"shipped model ({rest})"
        if kind == "random":
            preset, _, seed = rest.partition(" (")
            return f"random init ({preset}{', ' + seed.rstrip(')') if seed else ''})"
        if kind == "checkpoint":
            name = Path(rest).name
            return f"early snapshot ({name})" if name.endswith("-early") else f"checkpoint {name}"
        return self.model

    @property
    def metric_name(self) -> str:
        """What the score is: F1 for word sense (every instance answered: P = R = F1), UUAS or root
        accuracy for the structural probes, head selection for arcs, else accuracy."""
        if self.task.startswith("wsd_"):
            return "F1"
        return {"structural_distance": "UUAS", "structural_depth": "root accuracy", "dep_arc": "head selection"}.get(
            self.task, "accuracy"
        )

    def per_label(self, layer: str) -> list[dict]:
        """A token task's test confusion at one layer -> per gold label: support, accuracy (recall),
        precision and the label it is most often mistaken for. Empty for runs without a confusion matrix."""
        entry = self.layers.get(layer)
        if entry is None or not entry.confusion:
            return []
        C = np.asarray(entry.confusion)
        rows = []
        for i, label in enumerate(self.labels):
            support, predicted_as = int(C[i].sum()), int(C[:, i].sum())
            wrong = C[i].copy()
            wrong[i] = 0
            rows.append(
                {
                    "label": label,
                    "support": support,
                    "accuracy": float(C[i, i] / support) if support else None,
                    "precision": float(C[i, i] / predicted_as) if predicted_as else None,
                    "most confused with": self.labels[int(wrong.argmax())] if wrong.any() else "",
                }
            )
        return sorted(rows, key=lambda r: -r["support"])


def _write_text(path: Path, text: str) -> None:
    with atomic_path(path) as tmp:  # the lab's one writer (probing_lab.fileio)
        tmp.write_text(text, encoding="utf-8")


def write_run(run_dir: Path, exp, metrics: dict) -> ProbeRun:
    """The run directory's experiment file, seed, metrics and tables (``plots.write_plots`` adds
    the pictures)."""
    run = ProbeRun.from_metrics(metrics, run_dir)  # checks the shape before anything is written
    run_dir.mkdir(parents=True, exist_ok=True)
    if exp.source and Path(exp.source).is_file():
        _write_text(run_dir / "experiment.toml", Path(exp.source).read_text(encoding="utf-8"))
    else:
        _write_text(
            run_dir / "experiment.json", json.dumps({k: v for k, v in exp.__dict__.items() if k != "source"}, indent=2)
        )
    _write_text(run_dir / "seed.txt", f"{exp.seed}\n")
    _write_text(run_dir / "metrics.json", json.dumps(metrics, indent=2) + "\n")
    rows = run.rows()
    columns = list(rows[0])
    with atomic_path(run_dir / "table.csv") as tmp, open(tmp, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, columns)
        w.writeheader()
        w.writerows(rows)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_fmt(r[c]) for c in columns) + " |" for r in rows]
    _write_text(run_dir / "table.md", "\n".join(lines) + "\n")
    return run


def _cell(score, ci) -> str:
    return "" if score is None else plus_minus(score, ci)


def _fmt3(v) -> str:
    return "" if v is None else f"{v:.3f}"


def shown_table(runs: list[ProbeRun]) -> list[dict]:
    """Several runs' :meth:`ProbeRun.shown_rows`, without the columns that are empty in every row."""
    rows = [row for run in runs for row in run.shown_rows()]
    keep = [c for c in dict.fromkeys(c for row in rows for c in row) if any(row.get(c) for row in rows)]
    return [{c: row.get(c, "") for c in keep} for row in rows]


def report(run_dirs: list[str | Path]) -> str:
    """Several runs -> one markdown table: rows experiment (task) x model and each of its baselines
    that has a score per layer (random init, control task, bag of context), columns the layers and
    the majority baseline; every score with its 95% interval (``0.934 ±0.003``) where the run has
    one; a column empty in every row is left out. Under the table, each run's verdicts in words
    (``intervals.run_verdicts``). A run directory given twice is listed once."""
    seen: set[Path] = set()
    runs = []
    for d in run_dirs:
        if Path(d).resolve() not in seen:
            seen.add(Path(d).resolve())
            runs.append(ProbeRun.load(d))
    keys = layer_order({k for r in runs for k in r.layers})
    rows = []
    for r in runs:
        what = r.task if r.experiment == r.task else f"{r.experiment} ({r.task})"
        m = r.metrics
        cis = m.get("baselines_ci95") or {}
        majority = _cell(r.majority, cis.get("majority"))
        layers = [_cell(r.layers[k].score, r.layers[k].ci95) if k in r.layers else "" for k in keys]
        rows.append([what, r.model, *layers, majority])
        random_ci = cis.get("random_init") or {}
        if r.random_init:
            rows.append([what, "random init", *(_cell(r.random_init.get(k), random_ci.get(k)) for k in keys), ""])
        for part, name in (("control", "control task"), ("context", "bag of context")):
            cells = [
                _cell(getattr(r.layers[k], f"{part}_score"), getattr(r.layers[k], f"{part}_ci95"))
                if k in r.layers
                else ""
                for k in keys
            ]
            if any(cells):
                rows.append([what, name, *cells, ""])
    header = ["experiment (task)", "model", *(layer_label(k) for k in keys), "majority"]
    shown = [i for i in range(len(header)) if i < 2 or any(row[i] for row in rows)]
    lines = ["| " + " | ".join(header[i] for i in shown) + " |", "|" + "---|" * len(shown)]
    lines += ["| " + " | ".join(row[i] for i in shown) + " |" for row in rows]
    for r in runs:
        said = intervals.run_verdicts(r.metrics)
        if said:
            lines += ["", f"{r.experiment} ({r.model}):", *(f"- {line}" for line in said)]
    return "\n".join(lines) + "\n"


def compare_report(a_dir: str | Path, b_dir: str | Path) -> str:
    """Two runs on the same test set, layer by layer: run A against run B, paired on the same test
    items (``intervals.compare_runs``); runs on different test sets are refused with the reason."""
    a, b = ProbeRun.load(a_dir), ProbeRun.load(b_dir)
    lines = [f"{a.experiment} ({a.model}) against {b.experiment} ({b.model}), paired on the same test items:"]
    for c in intervals.compare_runs(Path(a_dir), Path(b_dir), a.metrics, b.metrics):
        entry = a.layers[c["layer"]]
        name = layer_label(c["layer"])
        lines.append(f"- {verdict(f'{name} of A', entry.score, entry.ci95, f'{name} of B', c)} (p = {c['p']:.3f})")
    return "\n".join(lines) + "\n"
