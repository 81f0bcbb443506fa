"""Probe run directories: write one, read its metrics, tabulate several (``probing-lab report``), and
the row views the app shows.

A run directory holds the experiment file, ``seed.txt``, ``metrics.json``, ``table.md``,
``table.csv``, ``plot.png`` and ``plot.html``.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from ..features.activations import layer_label


def layer_order(keys) -> list[str]:
    """Layer keys in reading order: the model's layers by number, then "mean" and "mix"."""
    return sorted(keys, key=lambda k: (not str(k).isdigit(), int(k) if str(k).isdigit() else 0, str(k)))


def _fmt(v) -> str:
    return "" if v is None else f"{v:.4f}" if isinstance(v, float) else str(v)


def metrics_rows(metrics: dict) -> list[dict]:
    rows = []
    for key, entry in metrics["layers"].items():
        rows.append(
            {
                "model": metrics["model"],
                "task": metrics["task"],
                "layer": key,
                "score": entry["score"],
                "control_score": entry.get("control_score"),
                "selectivity": entry.get("selectivity"),
                "mdl_bits": entry.get("mdl_bits"),
                "random_init": (metrics["baselines"].get("random_init") or {}).get(key),
                "majority": metrics["baselines"].get("majority"),
            }
        )
    return rows


def per_label_rows(metrics: dict, layer: str) -> list[dict]:
    """A token task's test confusion at one layer -> per gold label: support, accuracy (recall),
    precision and the label it is most often mistaken for. Empty for runs without a confusion matrix."""
    confusion = metrics["layers"].get(layer, {}).get("confusion")
    if not confusion:
        return []
    C = np.asarray(confusion)
    labels = metrics["labels"]
    rows = []
    for i, label in enumerate(labels):
        support, predicted_as = int(C[i].sum()), int(C[:, i].sum())
        wrong = C[i].copy()
        wrong[i] = 0
        rows.append(
            {
                "label": label,
                "support": support,
                "accuracy": float(C[i, i] / support) if support else None,
                "precision": float(C[i, i] / predicted_as) if predicted_as else None,
                "most confused with": labels[int(wrong.argmax())] if wrong.any() else "",
            }
        )
    return sorted(rows, key=lambda r: -r["support"])


def write_run(run_dir: Path, exp, metrics: dict) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    if exp.source and Path(exp.source).is_file():
        (run_dir / "experiment.toml").write_text(Path(exp.source).read_text(encoding="utf-8"), encoding="utf-8")
    else:
        (run_dir / "experiment.json").write_text(
            json.dumps({k: v for k, v in exp.__dict__.items() if k != "source"}, indent=2)
        )
    (run_dir / "seed.txt").write_text(f"{exp.seed}\n")
    (run_dir / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    rows = metrics_rows(metrics)
    columns = list(rows[0])
    with open(run_dir / "table.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, columns)
        w.writeheader()
        w.writerows(rows)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_fmt(r[c]) for c in columns) + " |" for r in rows]
    (run_dir / "table.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    from .plots import layer_curve_figure, save_png

    fig = layer_curve_figure([metrics])
    fig.write_html(str(run_dir / "plot.html"), include_plotlyjs="cdn")
    save_png([metrics], run_dir / "plot.png")


def load_metrics(run_dir: str | Path) -> dict:
    path = Path(run_dir) / "metrics.json"
    if not path.is_file():
        raise FileNotFoundError(f"{run_dir}: no metrics.json (is it a run directory of `probing-lab probe`?)")
    return json.loads(path.read_text(encoding="utf-8"))


def report(run_dirs: list[str | Path]) -> str:
    """Several runs -> one markdown table: rows task x model, columns the layers."""
    all_metrics = [load_metrics(d) for d in run_dirs]
    keys = layer_order({k for m in all_metrics for k in m["layers"]})
    header = "| task | model | " + " | ".join(layer_label(k) for k in keys) + " | majority | control (best layer) |"
    lines = [header, "|" + "---|" * (len(keys) + 4)]
    for m in all_metrics:
        cells = [_fmt(m["layers"].get(k, {}).get("score")) for k in keys]
        best = max(m["layers"], key=lambda k: m["layers"][k]["score"])
        lines.append(
            f"| {m['task']} | {m['model']} | "
            + " | ".join(cells)
            + f" | {_fmt(m['baselines'].get('majority'))} | {_fmt(m['layers'][best].get('control_score'))} |"
        )
        if m["baselines"].get("random_init"):
            ri = m["baselines"]["random_init"]
            lines.append(f"| {m['task']} | random init | " + " | ".join(_fmt(ri.get(k)) for k in keys) + " | | |")
    return "\n".join(lines) + "\n"
