"""Plotly figures of transfer runs (the app's Transfer page; no Streamlit here): the sample-efficiency
curve per run, the learned layer weights per task, and probe scores of the same layers."""

from __future__ import annotations

import math
from typing import Optional

from .report import INPUT_NAMES, TransferRun, curves, fraction_label, input_name, layer_weights, metric_name

# one colour per input, the same in every panel; the control (random-init) in grey, dashed
COLOURS = {
    "static": "#7f7f7f",
    "elmo": "#d62728",
    "elmo_top": "#1f77b4",
    "elmo_l0": "#2ca02c",
    "elmo_random": "#bcbd22",
}
DASH = {"elmo_random": "dash", "static": "dot"}
LAYER_COLOURS = {"L0": "#2ca02c", "L1": "#1f77b4", "L2": "#d62728"}


def sample_efficiency_figure(runs: list[TransferRun]):
    """One panel per run: test score against the training fraction (log x), one line per input, the
    mean over the seeds with +-1 standard deviation as error bars."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    titles = [f"{run.experiment} ({run.task}, {metric_name(run.metric)})" for run in runs]
    fig = make_subplots(rows=1, cols=max(1, len(runs)), subplot_titles=titles, horizontal_spacing=0.07)
    shown: set[str] = set()
    ticks: set[float] = set()
    for col, run in enumerate(runs, start=1):
        for key, series in curves(run).items():
            ticks.update(series["fraction"])
            name = input_name(key)
            fig.add_trace(
                go.Scatter(
                    x=series["fraction"],
                    y=series["mean"],
                    error_y={"type": "data", "array": series["std"], "visible": True, "thickness": 1.2},
                    mode="lines+markers",
                    name=name,
                    legendgroup=key,
                    showlegend=key not in shown,
                    line={"color": COLOURS.get(key), "dash": DASH.get(key, "solid")},
                    customdata=[[n, s] for n, s in zip(series["n"], series["std"])],
                    hovertemplate=f"<b>{name}</b><br>%{{x:.0%}} of train: %{{y:.4f}}"
                    "<br>± %{customdata[1]:.4f} over %{customdata[0]} seed(s)<extra></extra>",
                ),
                row=1,
                col=col,
            )
            shown.add(key)
        lines = curves(run)
        if "static" in lines and "elmo" in lines:  # the gap ELMo adds, written at both ends of the curve
            for end in (0, -1):
                x, top, bottom = (
                    lines["elmo"]["fraction"][end],
                    lines["elmo"]["mean"][end],
                    lines["static"]["mean"][end],
                )
                fig.add_annotation(
                    x=math.log10(x), y=max(top, bottom), text=f"gap {100 * (top - bottom):+.1f}", showarrow=True,
                    arrowhead=0, ay=-28, font={"size": 11}, row=1, col=col,
                )  # fmt: skip
        fig.update_yaxes(title_text=metric_name(run.metric) if col == 1 else None, row=1, col=col)
    values = sorted(ticks)
    fig.update_xaxes(
        type="log",
        tickvals=values,
        ticktext=[fraction_label(v) for v in values],
        title_text="training data (log scale)",
    )
    fig.update_layout(
        title="Sample efficiency: test score by input and training-set size (mean over seeds, bars ±1 std)",
        template="plotly_white",
        height=420,
        legend={"title": "input to the tagger", "orientation": "h", "y": -0.25},
        margin={"t": 80, "b": 120},
    )
    return fig


def layer_weights_figure(runs: list[TransferRun], input_key: str = "elmo"):
    """Grouped bars: one group per run (task), one bar per layer, the learned softmax(s) of the scalar
    mix at the largest fraction (mean over seeds, error bars ±1 std); a dotted line at uniform 1/3."""
    import plotly.graph_objects as go

    fig = go.Figure()
    groups, per_layer, spread = [], {}, {}
    for run in runs:
        w = layer_weights(run, input_key)
        if w is None:
            continue
        groups.append(f"{run.experiment}<br>({run.task})")
        for layer, mean, std in zip(w["layers"], w["mean"], w["std"]):
            per_layer.setdefault(layer, {})[groups[-1]] = mean
            spread.setdefault(layer, {})[groups[-1]] = std
    for layer in sorted(per_layer):
        fig.add_trace(
            go.Bar(
                x=groups,
                y=[per_layer[layer].get(g) for g in groups],
                error_y={"type": "data", "array": [spread[layer].get(g, 0) for g in groups], "visible": True},
                name=layer,
                marker_color=LAYER_COLOURS.get(layer),
                hovertemplate=f"{layer}: %{{y:.3f}}<extra></extra>",
            )
        )
    n_layers = len(per_layer) or 3
    fig.add_hline(
        y=1 / n_layers,
        line_dash="dot",
        line_color="grey",
        annotation_text="uniform",
        annotation_position="top left",
    )
    fig.update_layout(
        title=f"Learned layer weights softmax(s) of the {INPUT_NAMES.get(input_key, input_key)}",
        yaxis={"title": "weight (sums to 1)", "rangemode": "tozero"},
        barmode="group",
        template="plotly_white",
        height=380,
        legend={"title": "ELMo layer"},
    )
    return fig


def probe_scores_figure(runs: list[TransferRun], probes: dict[str, Optional[dict]]):
    """The same grouping as :func:`layer_weights_figure`, a marker per layer at the linear probe's test score
    (``probes``: task -> :func:`probing_lab.transfer.report.probe_scores`)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    groups, per_layer = [], {}
    for run in runs:
        probe = probes.get(run.task)
        if not probe:
            continue
        groups.append(f"{run.experiment}<br>({run.task})")  # the groups of layer_weights_figure
        for layer, score in probe["layers"].items():
            per_layer.setdefault(layer, {})[groups[-1]] = score
    for layer in sorted(per_layer):
        fig.add_trace(
            go.Scatter(
                x=groups,
                y=[per_layer[layer].get(g) for g in groups],
                mode="markers",
                name=layer,
                marker={"color": LAYER_COLOURS.get(layer), "size": 13, "symbol": "diamond"},
                hovertemplate=f"{layer}: %{{y:.4f}}<extra></extra>",
            )
        )
    scores = [v for per in per_layer.values() for v in per.values()]
    low, high = (min(scores), max(scores)) if scores else (0.0, 1.0)
    fig.update_layout(
        title="Linear probe test score of the same layers (probes/results)",
        yaxis={"title": "probe test score (axis not from 0)", "range": [max(0.0, low - 0.05), min(1.0, high + 0.03)]},
        scattermode="group",
        template="plotly_white",
        height=380,
        legend={"title": "ELMo layer"},
    )
    return fig
