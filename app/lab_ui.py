"""The frame every page shares: page config and title with one sentence on what the page shows and one
on what to try (the Tour lists the pages by them), input limits, friendly errors, small widgets and
the projections of the maps. The model choice is in ``model_choice``, the path allow-list in
``allowed_paths``, the data sets in ``data_sets``; everything the pages compute comes from ``probing_lab``."""

from __future__ import annotations

import functools
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import model_choice
import streamlit as st

MAX_CHARS = 5000  # typed text beyond this is cut (with a note): the page must stay responsive

MAX_SENTENCES = 100

LAYER_HELP = {
    "0": "L0: the char-CNN type layer. One vector per spelling, the same in every sentence.",
    "1": "L1: first biLSTM layer (forward and backward halves), context-dependent.",
    "2": "L2: second biLSTM layer, the top of the biLM.",
    "mean": "mean: the plain average of the layers (an untrained scalar mix, equal weights).",
}


def page(title: str, shows: str = "", tries: str = "", icon: str = "🔬") -> None:
    """Page config, title, what the page shows and what to try first (the Tour lists the pages by
    these, see :func:`page_index`), and the sidebar line saying which model is in use."""
    st.set_page_config(page_title=f"{title} · ELMo probing lab", page_icon=icon, layout="wide")
    st.title(title)
    if shows:
        st.markdown(f"{shows} **Try:** {tries}" if tries else shows)
    spec = model_choice.current_spec()
    st.sidebar.markdown(f"**Model:** {spec.label}")
    st.sidebar.caption("Change it on the Model page.")
    note = st.session_state.get("model_note")
    if note:
        st.warning(note)


PAGES_DIR = Path(__file__).resolve().parent / "pages"


@functools.lru_cache(maxsize=4)  # the files do not change while serving
def page_index(pages_dir: Path = PAGES_DIR) -> list[dict]:
    """Every page of the app in sidebar order: ``{"name", "file", "title", "shows", "tries"}``, read
    from the ``lab_ui.page(...)`` call each page opens with (so the Tour's list cannot go stale). Only
    that call is parsed, not the whole file: the Tour draws this list on its first, timed, run."""
    import ast
    import io
    import re
    import tokenize

    out = []
    for path in sorted(pages_dir.glob("*.py"), key=lambda p: int(p.name.split("_", 1)[0])):
        text = path.read_text(encoding="utf-8")
        start = text.index("\nlab_ui.page(") + 1
        lines, depth, end = text[start:].splitlines(keepends=True), 0, None
        for token in tokenize.generate_tokens(io.StringIO(text[start:]).readline):
            if token.string in "([{" and token.type == tokenize.OP:
                depth += 1
            elif token.string in ")]}" and token.type == tokenize.OP:
                depth -= 1
                if depth == 0:
                    end = start + sum(map(len, lines[: token.end[0] - 1])) + token.end[1]  # (row, col) -> offset
                    break
        call = ast.parse(text[start:end], mode="eval").body
        kw = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
        name = re.sub(r"^\d+_", "", path.stem).replace("_", " ")  # as Streamlit's sidebar names it
        out.append({"name": name, "file": path.name, "title": ast.literal_eval(call.args[0]), **kw})
    return out


@contextmanager
def friendly_errors(what: str = "This page"):
    """Turn an unexpected exception into an error box; st.stop()/rerun pass through."""
    try:
        yield
    except Exception as e:  # noqa: BLE001
        st.error(f"{what} hit a problem: {type(e).__name__}: {e}")


def key_on(name: str, *depends_on) -> str:
    """A widget key that names what the widget's options come from (a folder, an experiment, ...):
    when that changes, the widget is a new one and starts from its default, so it never keeps a
    choice made among other options (popping the old key is not enough in this Streamlit)."""
    return f"{name}@" + "|".join(str(d) for d in depends_on)


@st.cache_data(show_spinner="Integrated gradients and occlusion…", max_entries=32)
def lm_attribution(spec_key, tokens, position, good, bad, direction, _lm):
    """Integrated gradients and occlusion of one LM choice (``probing_lab.attribution``), cached per
    model and choice: the Language model and Causal pages show them as coloured words."""
    from probing_lab.attribution import integrated_gradients, lm_score, lm_target, occlusion, type_layer

    target = lm_target(_lm, tokens, position, good, bad, direction)
    ig = integrated_gradients(target, type_layer(_lm.bilm, tokens), tokens, steps=64)
    return ig, occlusion(lm_score(_lm, good, bad, direction), list(tokens), position)


def limit_text(text: str, limit: int = MAX_CHARS) -> tuple[str, Optional[str]]:
    """Cut overly long input at a line or space boundary; returns (text, note or None)."""
    if len(text) <= limit:
        return text, None
    cut = text[:limit]
    boundary = max(cut.rfind("\n"), cut.rfind(" "))
    if boundary > limit // 2:
        cut = cut[:boundary]
    return cut, f"The text was {len(text):,} characters long; only the first {len(cut):,} are used."


def cut_text(text: str, limit: int = MAX_CHARS) -> str:
    """:func:`limit_text` that says on the page when it cut (nothing is cut silently)."""
    text, note = limit_text(text, limit)
    if note:
        st.info(note)
    return text


def halves_toggle(key: str) -> bool:
    """A checkbox that adds the forward and backward halves of L1 and L2 to a page's layers."""
    return st.checkbox(
        "Direction halves (L1/L2 forward and backward)",
        False,
        key=key,
        help="Each biLSTM layer is a forward LM's state (it has read the words up to this one) next to a "
        "backward LM's state (it has read the words from this one to the end). Show each half on its own.",
    )


def markdown_table(rows: list[dict]) -> str:
    """Rows (dicts with the same keys) as a Markdown table, every cell escaped so that no text is
    read as Markdown or HTML. For small tables on pages that must draw fast: ``st.dataframe``
    loads the interactive grid (a large script in the browser) on first use."""
    if not rows:
        return ""

    def cell(value) -> str:
        text = " ".join(str(value).split())  # no newlines inside a row
        return re.sub(r"([\\`*_{}\[\]()#+\-.!|<>~$])", r"\\\1", text)

    head = list(rows[0])
    lines = ["| " + " | ".join(map(cell, head)) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cell(row.get(k, "")) for k in head) + " |" for row in rows]
    return "\n".join(lines)


def fmt(value, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


# Seconds per layer for n points, c * (n / 1000) ** p, measured on ELMo L1 vectors of EWT dev
# (1,226 and 5,034 tokens) on the 2-core machine; UMAP's numba compilation, once per process, apart.
PROJECTION_COST = {"umap": (1.4, 2.0), "tsne": (2.9, 1.0)}
UMAP_COMPILE_S = 10


def projection_choice(key: str) -> str:
    """PCA by default; UMAP and t-SNE only when asked (slower, and UMAP compiles on first use)."""
    label = st.radio(
        "2-D projection",
        ["PCA", "UMAP", "t-SNE"],
        horizontal=True,
        key=key,
        help="PCA is linear and exact; UMAP/t-SNE show neighbourhoods but distort distances. "
        f"UMAP's first use in a process compiles numba code (about {UMAP_COMPILE_S} s).",
    )
    return {"PCA": "pca", "UMAP": "umap", "t-SNE": "tsne"}[label]


def projection_time_note(n_points: int, n_maps: int) -> str:
    """What UMAP and t-SNE will cost for ``n_maps`` maps of ``n_points`` each, said before the user picks
    them (PCA is well under a second)."""
    from probing_lab.analysis import umap_is_warm

    def seconds(method: str) -> float:
        c, p = PROJECTION_COST[method]
        return n_maps * c * (n_points / 1000) ** p

    umap = seconds("umap") + (0 if umap_is_warm() else UMAP_COMPILE_S)
    return (
        f"For {n_maps} map(s) of {n_points:,} points: PCA under a second, UMAP about {umap:,.0f} s"
        f"{'' if umap_is_warm() else ' (with its one-off compilation)'}, t-SNE about {seconds('tsne'):,.0f} s; "
        "each is computed once, then reused when only the colouring changes."
    )


@st.cache_resource(show_spinner=False, max_entries=96)
def shared_figure(name: str, key, _build):
    """The figure ``_build()`` makes, built once per ``(name, key)`` and shared by every session and run.
    ``key`` must name everything the figure depends on. Plotly spends 10-40 ms validating each new
    figure (its template alone about 9 ms), on every run of a page; ``st.plotly_chart`` only reads a
    Figure (``to_dict``), so one object serves every student on the same example. Never change the
    returned figure: other sessions show it."""
    return _build()


def projection(X, method: str, seed: int = 0):
    """``(N, dim)`` -> ``(N, 2)``, cached; UMAP's one-off compilation under a spinner that says so. (Not
    compiled in the background ahead of time: on 2 cores that slowed every page drawn meanwhile.)"""
    from probing_lab.analysis import umap_is_warm, warm_up_umap

    if method == "umap" and not umap_is_warm():
        with st.spinner(f"Compiling UMAP (numba), once per process: about {UMAP_COMPILE_S} s…"):
            warm_up_umap()
    return _projection(X, method, seed)


@st.cache_data(show_spinner="Projecting…", max_entries=64)
def _projection(X, method: str, seed: int):
    from probing_lab.analysis import project

    return project(X, method, seed=seed)
