"""Plotly figures for the pages (no Streamlit here, so they can be built and checked in tests)."""

from __future__ import annotations

import copy
import functools
import html
from typing import Optional, Sequence

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from probing_lab.analysis import layer_label

PALETTE = qualitative.D3 + qualitative.Set2 + qualitative.Pastel1
# Plotly's Viridis as the list a validated figure carries (a name is expanded by validation, which the
# figures drawn for a student's own text skip: see _unvalidated)
VIRIDIS = go.Heatmap(colorscale="Viridis").to_plotly_json()["colorscale"]
DISTINCT = qualitative.Dark24 + qualitative.Light24  # 48 colours, none repeated: for many labels at once


def colour_map(labels: Sequence) -> dict:
    names = sorted({str(l) for l in labels})
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(names)}


def _layout(**layout) -> dict:
    """A layout dict with the lab's template: ``plotly_white`` as a dict, expanded once."""
    return {"template": _template("plotly_white"), **layout}


@functools.lru_cache(maxsize=4)
def _template(name: str) -> dict:
    return pio.templates[name].to_plotly_json()


@functools.lru_cache(maxsize=32)
def _one_row(cols: int, titles: tuple, spacing: float) -> dict:
    """``make_subplots``' layout of one row of ``cols`` panels (axis domains and anchors, the titles as
    annotations), built once per shape."""
    return make_subplots(rows=1, cols=cols, subplot_titles=titles, horizontal_spacing=spacing).layout.to_plotly_json()


def _panels(cols: int) -> list[str]:
    """Each panel's axis suffix: ``xaxis``/``x`` for the first, ``xaxis2``/``x2`` for the second, ..."""
    return ["" if i == 1 else str(i) for i in range(1, cols + 1)]


def _unvalidated(data: list[dict], layout: dict) -> go.Figure:
    """A figure from plain trace and layout dicts, without Plotly's validation. Validating a new
    figure cost 30-40 ms of CPU on every run of a page that draws a student's own text (a subplot
    grid and a named template, ~10 ms each, validated again each time): most of what the Polysemy
    page's own text cost the server after the embeddings. ``tests/test_figures.py`` checks that each
    figure built this way passes validation unchanged."""
    return go.Figure({"data": data, "layout": layout}, _validate=False)


def _cosine_heatmap(matrix, ticks: list, low: float, hovertemplate: str) -> dict:
    """A cosine heatmap trace coloured from ``low`` to 1 (see :func:`_colour_floor`)."""
    return {
        "type": "heatmap",
        "z": np.asarray(matrix),
        "x": ticks,
        "y": ticks,
        "zmin": low,
        "zmax": 1.0,
        "colorscale": VIRIDIS,
        "hovertemplate": hovertemplate,
    }


def _colour_floor(*matrices) -> float:
    """The lowest cosine shown, from the data rather than 0: ELMo layers are anisotropic (all cosines
    high), and a fixed 0..1 scale would paint every layer the same yellow. The titles say the range."""
    return min(max(-1.0, min(float(np.min(m)) for m in matrices)), 0.99)


def projection_grid(
    points: dict, labels: Sequence, hover: Sequence[str], title: str, method: str, notes: Optional[dict] = None
) -> go.Figure:
    """One scatter per layer side by side, points coloured by label (legend shared); ``notes``: a
    line under each layer's title (e.g. its cross-validated accuracy)."""
    keys = list(points)
    labels = [str(l) for l in labels]
    colours = colour_map(labels)
    titles = tuple(layer_label(k) + (f"<br><sub>{notes[k]}</sub>" if notes and k in notes else "") for k in keys)
    layout = copy.deepcopy(_one_row(len(keys), titles, 0.04))
    data = []
    for panel, key in zip(_panels(len(keys)), keys):
        layout[f"xaxis{panel}"].update(showticklabels=False, zeroline=False)
        layout[f"yaxis{panel}"].update(showticklabels=False, zeroline=False)
        xy = np.asarray(points[key])
        for name, colour in colours.items():
            idx = [i for i, l in enumerate(labels) if l == name]
            data.append(
                {
                    "type": "scatter",
                    "x": xy[idx, 0],
                    "y": xy[idx, 1],
                    "mode": "markers",
                    "name": name,
                    "legendgroup": name,
                    "showlegend": key == keys[0],  # one legend entry per sense
                    "marker": {"color": colour, "size": 9, "line": {"width": 0.5, "color": "white"}, "opacity": 0.85},
                    "text": [hover[i] for i in idx],
                    "hovertemplate": "%{text}<extra>" + name + "</extra>",
                    "xaxis": f"x{panel}",
                    "yaxis": f"y{panel}",
                }
            )
    layout.update(
        _layout(
            title={"text": f"{title} ({method.upper() if method in ('pca', 'umap', 'tsne') else method} per layer)"},
            height=380,
            legend={"title": {"text": "sense"}, "orientation": "h", "y": -0.05},
            margin={"t": 70, "b": 40},
        )
    )
    return _unvalidated(data, layout)


def cosine_heatmaps(matrices: dict, tick_labels: Sequence[str], title: str) -> go.Figure:
    """One cosine-similarity heatmap per layer on one colour scale (cosine of identical = 1)."""
    keys = list(matrices)
    low = _colour_floor(*matrices.values())
    layout = copy.deepcopy(_one_row(len(keys), tuple(layer_label(k) for k in keys), 0.03))
    data = []
    for panel, key in zip(_panels(len(keys)), keys):
        layout[f"xaxis{panel}"]["showticklabels"] = False
        layout[f"yaxis{panel}"].update(showticklabels=False, autorange="reversed")
        trace = _cosine_heatmap(matrices[key], list(tick_labels), low, "%{y}<br>%{x}<br>cosine %{z:.3f}<extra></extra>")
        data.append({**trace, "showscale": key == keys[-1], "xaxis": f"x{panel}", "yaxis": f"y{panel}"})
    layout.update(_layout(title={"text": f"{title}; colours span cosine {low:.2f} to 1"}, height=360, margin={"t": 70}))
    return _unvalidated(data, layout)


def token_heatmap(matrix: np.ndarray, tokens: Sequence[str], title: str) -> go.Figure:
    ticks = [f"{i}:{t}" for i, t in enumerate(tokens)]
    low = _colour_floor(matrix)
    heatmap = _cosine_heatmap(matrix, ticks, low, "%{y} · %{x}<br>cosine %{z:.3f}<extra></extra>")
    # every token labelled (Plotly drops every second label of a crowded axis)
    axis = {"type": "category", "dtick": 1, "tickfont": {"size": 10}}
    layout = _layout(
        xaxis=axis,
        yaxis={**axis, "autorange": "reversed"},
        title={"text": f"{title}; colours span cosine {low:.2f} to 1"},
        height=max(360, 14 * len(tokens) + 120),
    )
    return _unvalidated([heatmap], layout)


def similarity_profile(series: dict, tokens: Sequence[str], focus: int) -> go.Figure:
    """Cosine of one token to every token of the text, one line per layer."""
    ticks = [f"{i}:{t}" for i, t in enumerate(tokens)]
    data = [
        {"type": "scatter", "x": ticks, "y": values, "mode": "lines+markers", "name": layer_label(key)}
        for key, values in series.items()
    ]
    layout = _layout(
        shapes=[  # add_vline's shape: a dotted line at the focus token, across the plot's height
            {
                "type": "line",
                "x0": focus,
                "x1": focus,
                "xref": "x",
                "y0": 0,
                "y1": 1,
                "yref": "y domain",
                "line": {"dash": "dot", "color": "grey"},
            }
        ],
        title={"text": f"cosine of “{tokens[focus]}” (token {focus}) to every token"},
        yaxis={"title": {"text": "cosine"}},
        height=380,
        xaxis={"tickangle": -45},
    )
    return _unvalidated(data, layout)


def layer_bars(values: dict, title: str, yaxis: str, reference: Optional[tuple[float, str]] = None) -> go.Figure:
    """values: series name -> {layer key: number}: grouped bars per layer; ``reference``: a dashed
    line across them (value, label), e.g. chance."""
    fig = go.Figure()
    for name, per_layer in values.items():
        keys = list(per_layer)
        fig.add_trace(go.Bar(x=[layer_label(k) for k in keys], y=[per_layer[k] for k in keys], name=name))
    if reference is not None:
        fig.add_hline(
            y=reference[0],
            line_dash="dash",
            line_color="grey",
            annotation_text=reference[1],
            annotation_position="top left",
        )
    fig.update_layout(title=title, yaxis_title=yaxis, barmode="group", height=340, template="plotly_white")
    return fig


def surprisal_strip(tokens: Sequence[str], bits: dict, hover: dict) -> go.Figure:
    """One row per direction, one cell per token, coloured by surprisal in bits; ``hover[direction][i]``
    is the text shown over a cell (the direction's top predictions there)."""
    rows = list(bits)
    z = np.array([bits[r] for r in rows])
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=list(range(len(tokens))),
            y=rows,
            text=[list(tokens) for _ in rows],
            texttemplate="%{text}",
            customdata=np.array([hover[r] for r in rows], dtype=object),
            hovertemplate="<b>%{text}</b> (%{y}): %{z:.1f} bits<br>%{customdata}<extra></extra>",
            colorscale="YlOrRd",
            zmin=0,
            zmax=max(16.0, float(z.max())),
            colorbar={"title": "bits"},
        )
    )
    fig.update_layout(
        title="Surprisal of each word: -log2 P(word | what this direction has read)",
        xaxis={"showticklabels": False, "title": "position"},
        yaxis={"autorange": "reversed"},
        template="plotly_white",
        height=260,
        margin={"t": 50, "b": 30},
    )
    return fig


def agreement_bars(accuracy: dict, title: str) -> go.Figure:
    """Accuracy per construction (x) for each direction (colour), chance at 0.5."""
    constructions = [c for c in accuracy if c != "overall"] + ["overall"]
    fig = go.Figure()
    for direction in ("forward", "backward", "both"):
        fig.add_trace(go.Bar(x=constructions, y=[accuracy[c][direction] for c in constructions], name=direction))
    fig.add_hline(y=0.5, line_dash="dot", annotation_text="chance")
    fig.update_layout(
        title=title, yaxis={"range": [0, 1], "title": "accuracy"}, barmode="group", template="plotly_white", height=380
    )
    return fig


BLIMP_MARKS = {"ngram": ("5-gram", "circle-open"), "lstm": ("LSTM (83M tokens)", "diamond-open"),
               "txl": ("Transformer-XL", "square-open"), "gpt2": ("GPT-2", "star-open")}  # fmt: skip


def blimp_bars(metrics: dict, direction: str = "both") -> go.Figure:
    """BLiMP per phenomenon (and overall): our accuracy as bars with 95% intervals, the published
    models as marks on each bar, human agreement as a line mark, chance at 0.5."""
    rows = sorted(metrics["phenomena"].items(), key=lambda kv: kv[1][direction]) + [("overall", metrics["overall"])]
    names = [n.replace("_", " ") for n, _ in rows]
    values = [r[direction] for _, r in rows]
    lo = [v - r[f"{direction}_ci95"][0] for v, (_, r) in zip(values, rows)]
    hi = [r[f"{direction}_ci95"][1] - v for v, (_, r) in zip(values, rows)]
    fig = go.Figure(
        go.Bar(
            y=names,
            x=values,
            orientation="h",
            name=f"this model ({direction})",
            marker_color="#1f77b4",
            error_x={"type": "data", "array": hi, "arrayminus": lo},
            hovertemplate="%{y}: %{x:.3f}<extra>this model</extra>",
        )
    )
    for key, (label, symbol) in BLIMP_MARKS.items():
        xs = [r.get("published", {}).get(key) for _, r in rows]
        fig.add_trace(
            go.Scatter(
                y=names, x=xs, mode="markers", name=label, marker={"symbol": symbol, "size": 10, "line": {"width": 2}}
            )
        )
    fig.add_trace(
        go.Scatter(
            y=names,
            x=[r.get("human") for _, r in rows],
            mode="markers",
            name="humans",
            marker={"symbol": "line-ns-open", "size": 14, "color": "black", "line": {"width": 2}},
        )
    )
    fig.add_vline(x=0.5, line_dash="dot", annotation_text="chance")
    fig.update_layout(
        title=f"BLiMP: share of minimal pairs where the good sentence is more probable ({metrics['model']})",
        xaxis={"range": [0.3, 1.0], "title": "accuracy"},
        template="plotly_white",
        height=120 + 34 * len(rows),
        legend={"orientation": "h", "y": -0.12},
        margin={"l": 200},
    )
    return fig


def attribution_html(tokens: Sequence[str], scores: Sequence[float], position: Optional[int] = None) -> str:
    """Words on coloured backgrounds: blue where a word pushes towards the prediction, red where it
    pushes against, the stronger the deeper (scaled to the largest |score|); the predicted word
    underlined. Every word is HTML-escaped."""
    top = max((abs(float(v)) for v in scores), default=0.0) or 1.0
    spans = []
    for i, (word, value) in enumerate(zip(tokens, scores)):
        alpha = min(abs(float(value)) / top, 1.0) * 0.75
        colour = f"rgba(31,119,180,{alpha:.2f})" if value >= 0 else f"rgba(214,39,40,{alpha:.2f})"
        style = f"background:{colour};padding:2px 4px;margin:1px;border-radius:3px"
        if i == position:
            style += ";text-decoration:underline;font-weight:bold"
        spans.append(f'<span style="{style}" title="{float(value):+.3f}">{html.escape(word)}</span>')
    return '<div style="line-height:2.2;font-size:1.05em">' + " ".join(spans) + "</div>"


def unit_effects(metrics: dict, top: int = 10) -> go.Figure:
    """A units run: per LM direction, the accuracy drop when each of the ``top`` units the number
    classifier weighs most is ablated alone (bars, its classifier weight on hover), against the mean
    drop of as many random units (dashed line)."""
    directions = list(metrics["classifier"])
    fig = make_subplots(rows=1, cols=len(directions), subplot_titles=[f"{d} LM" for d in directions])
    for col, direction in enumerate(directions, start=1):
        units = [u for u in metrics["units"] if u["direction"] == direction][:top]
        fig.add_trace(
            go.Bar(
                x=[f"L{u['layer']}:{u['unit']}" for u in units],
                y=[u["effect"] for u in units],
                customdata=[u["score"] for u in units],
                name=f"{direction}: top units",
                marker_color="#1f77b4",
                showlegend=False,
                hovertemplate="%{x}: accuracy drop %{y:+.3f}<br>classifier weight %{customdata:.3f}<extra></extra>",
            ),
            row=1,
            col=col,
        )
        random_drop = metrics["random_unit_effect"][direction]["accuracy"]
        fig.add_hline(
            y=random_drop, line_dash="dash", line_color="grey", row=1, col=col,
            annotation_text=f"random unit: {random_drop:+.3f}", annotation_position="top right",
        )  # fmt: skip
        fig.update_xaxes(
            type="category", title_text="unit (layer:index), strongest classifier weight first", row=1, col=col
        )
    fig.update_yaxes(title_text="agreement accuracy drop when ablated", row=1, col=1)
    fig.update_layout(template="plotly_white", height=380, title="Number units: ablating one unit at a time")
    return fig


def patch_heatmap(effect: np.ndarray, tokens: Sequence[str], title: str, changed: Sequence[int] = ()) -> go.Figure:
    """Activation patching: layers x the positions the LM read before its prediction (the share of
    the clean logit difference restored). Columns are named as the word selectors name words
    (``<S>``, ``0:The``, ``1:officer``, ...); the ``changed`` columns (the words that differ between
    the two sentences) are outlined and marked trivial: patching them copies the change back."""
    read = [c for c in range(effect.shape[1]) if not np.all(np.isnan(effect[:, c]))]
    # escaped: Plotly reads labels as HTML, and <S> is its strike-through tag (the label vanished)
    names = ["&lt;S&gt;", *(f"{i}:{html.escape(t)}" for i, t in enumerate(tokens[1:-1])), "&lt;/S&gt;"]
    z = np.where(np.isnan(effect[:, read]), None, effect[:, read]).tolist()
    x = [names[c] for c in read]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=x,
            y=[f"L{k}" for k in range(effect.shape[0])],
            zmin=0.0,
            zmax=1.0,
            colorscale="Viridis",
            colorbar={"title": "restored"},
            hovertemplate="%{y} at %{x}<br>%{z:.2f} of the difference restored<extra></extra>",
        )
    )
    for c in changed:
        if c in read:
            i = read.index(c)
            fig.add_shape(
                type="rect",
                x0=i - 0.5,
                x1=i + 0.5,
                y0=-0.5,
                y1=effect.shape[0] - 0.5,
                line={"color": "red", "width": 2},
            )
            fig.add_annotation(x=x[i], y=-0.5, yshift=12, text="changed word (trivial)", showarrow=False)
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(type="category")
    fig.update_layout(title=title, height=320, template="plotly_white", margin={"t": 70, "b": 40})
    return fig


def inlp_curves(curves: dict, majority: float, prop: str) -> go.Figure:
    """Probe accuracy after each INLP iteration, one line per site, with the majority baseline."""
    fig = go.Figure()
    for k, (site, accuracy) in enumerate(curves.items()):
        fig.add_trace(go.Scatter(y=accuracy, mode="lines+markers", name=site, line={"color": PALETTE[k]}))
    fig.add_hline(y=majority, line_dash="dash", annotation_text=f"majority {majority:.3f}")
    fig.update_layout(
        title=f"{prop}: probe accuracy as INLP removes directions", xaxis_title="directions removed (iterations)",
        yaxis_title="dev accuracy", height=340, template="plotly_white",
    )  # fmt: skip
    return fig
