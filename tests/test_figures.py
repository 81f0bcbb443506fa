"""The figures built without Plotly's validation (``app/figures.py``'s ``_unvalidated``): each must be a
figure validation leaves unchanged, so skipping it hides no mistake, and must draw the numbers given."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import numpy as np
import pytest

go = pytest.importorskip("plotly.graph_objects")
pio = pytest.importorskip("plotly.io")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "app"))
import figures  # noqa: E402

RNG = np.random.default_rng(0)
KEYS = ["0", "1", "2"]
POINTS = {k: RNG.normal(size=(7, 2)) for k in KEYS}
LABELS = ["money", "river", "money", "x", "river", "money", "x"]
HOVER = [f"sentence {i}" for i in range(7)]
MATRICES = {k: np.corrcoef(RNG.normal(size=(7, 9))) for k in KEYS}
TOKENS = ["The", "bank", "is", "by", "the", "river", "."]

BUILT = {
    "projection_grid": lambda: figures.projection_grid(POINTS, LABELS, HOVER, "“bank”", "pca"),
    "projection_grid with notes": lambda: figures.projection_grid(
        POINTS, LABELS, HOVER, "“bank”", "out-of-fold", notes={"0": "CV accuracy 0.500", "2": "CV accuracy 1.000"}
    ),
    "cosine_heatmaps": lambda: figures.cosine_heatmaps(MATRICES, [f"#{i}" for i in range(7)], "cosine"),
    "token_heatmap": lambda: figures.token_heatmap(MATRICES["1"], TOKENS, "L1"),
    "similarity_profile": lambda: figures.similarity_profile({k: MATRICES[k][1] for k in KEYS}, TOKENS, 1),
}


def as_json(figure) -> dict:
    return json.loads(pio.to_json(figure.to_dict(), validate=False))


@pytest.mark.parametrize("name", list(BUILT))
def test_an_unvalidated_figure_is_one_validation_leaves_unchanged(name):
    figure = BUILT[name]()
    validated = go.Figure(figure.to_dict())  # raises on a misspelt or misplaced property
    assert as_json(validated) == as_json(figure)
    white = go.Figure(layout={"template": "plotly_white"})
    assert as_json(figure)["layout"]["template"] == as_json(white)["layout"]["template"]


def test_the_projection_grid_draws_each_layer_in_its_own_panel_coloured_by_sense():
    spec = as_json(BUILT["projection_grid with notes"]())
    titles = [a["text"] for a in spec["layout"]["annotations"]]
    assert titles == ["L0<br><sub>CV accuracy 0.500</sub>", "L1", "L2<br><sub>CV accuracy 1.000</sub>"]
    traces = spec["data"]
    assert len(traces) == 3 * 3  # a trace per (layer, sense)
    for trace in traces:
        panel = KEYS[int(trace["xaxis"][1:] or 1) - 1]
        rows = [i for i, label in enumerate(LABELS) if label == trace["name"]]
        assert np.allclose(figures_xy(trace), POINTS[panel][rows])
        assert trace["text"] == [HOVER[i] for i in rows]
    assert [t["showlegend"] for t in traces] == [True] * 3 + [False] * 6  # one legend entry per sense


def figures_xy(trace: dict) -> np.ndarray:
    """A trace's points, whether Plotly wrote them as lists or as typed arrays (``bdata``: base64)."""

    def values(v):
        if isinstance(v, dict):
            return np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"]))
        return np.asarray(v, dtype=float)

    return np.column_stack([values(trace["x"]), values(trace["y"])])


def test_the_heatmaps_share_one_colour_range_from_the_data():
    spec = as_json(BUILT["cosine_heatmaps"]())
    low = min(float(m.min()) for m in MATRICES.values())
    assert [(t["zmin"], t["zmax"]) for t in spec["data"]] == [(pytest.approx(low), 1.0)] * 3
    assert [t["showscale"] for t in spec["data"]] == [False, False, True]  # one colour bar
    assert f"colours span cosine {low:.2f} to 1" in spec["layout"]["title"]["text"]


def test_a_cached_layout_is_not_changed_by_the_figures_built_from_it():
    first = as_json(BUILT["projection_grid"]())
    BUILT["cosine_heatmaps"]()  # another figure of three panels, with its own axis settings
    assert as_json(BUILT["projection_grid"]()) == first
