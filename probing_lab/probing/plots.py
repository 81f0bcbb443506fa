"""Per-layer probe curves: score, control score and baselines per layer (plotly for HTML and
the app, matplotlib for the PNG in a run directory)."""

from __future__ import annotations

from pathlib import Path

from ..features.activations import layer_label
from ..fileio import atomic_path
from .intervals import baseline_label
from .runs import ProbeRun


def _series(run: ProbeRun):
    keys = run.layer_keys
    labels = [layer_label(k) for k in keys]
    score = [run.layers[k].score for k in keys]
    control = [run.layers[k].control_score for k in keys]
    random = [run.random_init.get(k) for k in keys]
    context = [run.layers[k].context_score for k in keys]
    return labels, score, control, random, context


def layer_curve_figure(runs: list[ProbeRun]):
    import plotly.graph_objects as go

    fig = go.Figure()
    for run in runs:
        labels, score, control, random, context = _series(run)
        name = run.model_label
        fig.add_trace(go.Scatter(x=labels, y=score, mode="lines+markers", name=f"{name}: {run.experiment}"))
        if any(c is not None for c in control):
            fig.add_trace(
                go.Scatter(
                    x=labels, y=control, mode="lines+markers", name=f"{name}: control task", line={"dash": "dot"}
                )
            )
        if any(c is not None for c in context):
            fig.add_trace(
                go.Scatter(
                    x=labels, y=context, mode="lines+markers", name=f"{name}: bag of context", line={"dash": "longdash"}
                )
            )
        if any(r is not None for r in random):
            fig.add_trace(
                go.Scatter(
                    x=labels, y=random, mode="lines+markers", name=f"{name}: random-init model", line={"dash": "dash"}
                )
            )
        if run.majority is not None:  # a legend entry, not a label on the plot: it would sit on the curves
            fig.add_trace(
                go.Scatter(
                    x=labels,
                    y=[run.majority] * len(labels),
                    mode="lines",
                    name=f"{name}: {baseline_label(run.metrics, 'majority')}",
                    line={"dash": "dashdot", "color": "grey", "width": 1},
                )
            )
    fig.update_layout(
        title=f"{runs[0].experiment}: score per layer",
        xaxis_title="layer",
        yaxis_title="score",
        yaxis_range=[0, 1.02],
        template="plotly_white",
        height=420,
    )
    return fig


def save_png(runs: list[ProbeRun], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
    for run in runs:
        labels, score, control, random, context = _series(run)
        ax.plot(labels, score, "o-", label=run.experiment)
        if any(c is not None for c in context):
            ax.plot(labels, [c if c is not None else float("nan") for c in context], "^-.", label="bag of context")
        if any(c is not None for c in control):
            ax.plot(labels, [c if c is not None else float("nan") for c in control], "o:", label="control task")
        if any(r is not None for r in random):
            ax.plot(labels, [r if r is not None else float("nan") for r in random], "s--", label="random-init model")
        if run.majority is not None:
            ax.axhline(run.majority, color="grey", ls="-.", lw=1, label=baseline_label(run.metrics, "majority"))
    ax.set_ylim(0, 1.02)
    ax.tick_params(axis="x", labelrotation=30)  # "L1 forward", "L2 backward" side by side overlap flat
    ax.set_xlabel("layer")
    ax.set_ylabel("score")
    ax.set_title(f"{runs[0].experiment} ({runs[0].model})", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, format="png")  # the format, not the name: a temporary file's name ends in .tmp
    plt.close(fig)


def confusion_figure(run: ProbeRun, layer: str, max_labels: int = 25):
    """Row-normalised test confusion of a token task at one layer (the most frequent labels)."""
    import numpy as np
    import plotly.graph_objects as go

    C = np.asarray(run.layers[layer].confusion, dtype=float)
    keep = np.argsort(-C.sum(1), kind="stable")[:max_labels]
    labels = [run.labels[i] for i in keep]
    C = C[np.ix_(keep, keep)]
    share = C / np.maximum(C.sum(1, keepdims=True), 1)
    name = layer_label(layer)
    fig = go.Figure(
        go.Heatmap(
            z=share,
            x=labels,
            y=labels,
            colorscale="Blues",
            zmin=0,
            zmax=1,
            customdata=C,
            hovertemplate="gold %{y}, predicted %{x}: %{customdata:.0f} tokens (%{z:.1%})<extra></extra>",
        )
    )
    fig.update_layout(
        title=f"{run.experiment} ({run.model}), {name}: share of each gold label predicted as …",
        xaxis_title="predicted",
        yaxis_title="gold",
        yaxis_autorange="reversed",
        template="plotly_white",
        height=max(380, 22 * len(labels) + 140),
    )
    return fig


def write_plots(run: ProbeRun, run_dir: Path) -> None:
    """A run directory's ``plot.html`` (interactive) and ``plot.png``."""
    fig = layer_curve_figure([run])
    with atomic_path(run_dir / "plot.html") as tmp:
        fig.write_html(str(tmp), include_plotlyjs="cdn")
    with atomic_path(run_dir / "plot.png") as tmp:
        save_png([run], tmp)
