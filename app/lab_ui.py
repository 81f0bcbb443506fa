"""What every page of the app shares: the model choice (kept in the session, loaded once per
process with ``st.cache_resource``), the data sets, input limits and friendly error handling.

The app is a thin layer: everything it computes comes from ``probing_lab``. A model choice is a
``ModelSpec``, the arguments of :func:`probing_lab.model_loading.load_model`, so the app loads exactly what
``probing-lab ... --model`` would.
"""

from __future__ import annotations

import json
import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import streamlit as st

from probing_lab.datasets.wsd import COARSEWSD_WORDS  # noqa: F401 (the Polysemy page's presets)
from probing_lab.model_loading import load_model, shipped_model_dir
from probing_lab.paths import CANDIDATE_MODEL_DIR, EARLY_MODEL_DIR, REPO_ROOT, SHIPPED_MODEL_DIR, WORK_DIR  # noqa: F401

ROOT = REPO_ROOT  # the pages read probes/ and runs/ under it
MODEL_ENV = "PROBING_LAB_MODEL"  # set by `probing-lab app --model ...` (app/launch.py)
ALLOWED_ROOTS_ENV = "PROBING_LAB_ALLOWED_ROOTS"  # `probing-lab app --allowed-root DIR`: folders, os.pathsep-separated
NO_RUNS_ENV = "PROBING_LAB_NO_RUNS"  # `probing-lab app --no-runs`: no form that starts probe runs
FALLBACK_MODEL = "random:cpu-small"
MAX_CHARS = 5000  # typed text beyond this is cut (with a note): the page must stay responsive
MAX_SENTENCES = 100
LAYER_HELP = {
    "0": "L0: the char-CNN type layer. One vector per spelling, the same in every sentence.",
    "1": "L1: first biLSTM layer (forward and backward halves), context-dependent.",
    "2": "L2: second biLSTM layer, the top of the biLM.",
    "mean": "mean: the plain average of the layers (an untrained scalar mix, equal weights).",
}


@dataclass(frozen=True)
class ModelSpec:
    """Arguments of ``load_model``; hashable so it can key caches."""

    model: Optional[str] = None  # checkpoint dir, random:PRESET, or None = shipped
    options: Optional[str] = None
    weights: Optional[str] = None
    seed: int = 0

    @property
    def label(self) -> str:
        if self.options:
            return f"released ELMo ({Path(self.weights).name})"
        if self.model is None:
            return "shipped model (elmo-lab)"
        if self.model.startswith("random:"):
            return f"random init {self.model[7:]} (seed {self.seed})"
        return f"checkpoint {self.model}"


@dataclass
class Bundle:
    """A loaded model and what the pages show about it."""

    embedder: object  # probing_lab.elmo.Embedder
    name: str
    card: Optional[dict]
    options: dict
    parameters: int


def default_spec() -> tuple[ModelSpec, Optional[str]]:
    """The model before the user picks one: ``$PROBING_LAB_MODEL``, else the shipped model, else
    a random-init cpu-small (with the note to show, since its layers have learned nothing)."""
    env = os.environ.get(MODEL_ENV, "").strip()
    if env and env != "shipped":
        return ModelSpec(model=env), None
    if shipped_model_dir() is not None:
        return ModelSpec(), None
    return ModelSpec(model=FALLBACK_MODEL), (
        f"The shipped model is not in this checkout ({SHIPPED_MODEL_DIR.relative_to(REPO_ROOT)} is missing), so the "
        f"app shows a **randomly initialised** `{FALLBACK_MODEL[7:]}` ELMo: its layers reflect the architecture, not "
        "anything learned. Pick a trained model on the **Model** page."
    )


def current_spec() -> ModelSpec:
    if "model_spec" not in st.session_state:
        spec, note = default_spec()
        st.session_state["model_spec"], st.session_state["model_note"] = spec, note
    return st.session_state["model_spec"]


def set_spec(spec: ModelSpec) -> None:
    st.session_state["model_spec"], st.session_state["model_note"] = spec, None


def read_card(directory: Optional[str | Path]) -> Optional[dict]:
    if directory is None:
        return None
    path = Path(directory) / "model_card.json"
    try:
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    except (OSError, ValueError):
        return None


def load_bundle(spec: ModelSpec) -> Bundle:
    """Load once per process and spec (a model is tens of MB; reruns must not reload it)."""
    return _load_bundle(spec.model, spec.options, spec.weights, spec.seed)


@st.cache_resource(show_spinner="Loading the model…", max_entries=4)
def _load_bundle(model: Optional[str], options: Optional[str], weights: Optional[str], seed: int) -> Bundle:
    from probing_lab.elmo import Embedder

    spec = ModelSpec(model, options, weights, seed)
    loaded = load_model(spec.model, spec.options, spec.weights, seed=spec.seed)
    directory = None
    if spec.model is None and not spec.options:
        directory = shipped_model_dir()
    elif spec.model and not spec.model.startswith("random:"):
        directory = spec.model
    return Bundle(
        Embedder(loaded.model, batch_size=32),
        loaded.name,
        read_card(directory),
        loaded.model.options.to_dict(),
        loaded.model.count_parameters(),
    )


@st.cache_resource(show_spinner="Loading the word2vec vectors…")
def static_encoder():
    """The lab's word2vec vectors as a one-layer encoder (the context-free baseline), or None
    when this checkout has none."""
    from probing_lab.paths import WORD2VEC_DIR
    from probing_lab.static import StaticEncoder

    return StaticEncoder(WORD2VEC_DIR, "word2vec") if WORD2VEC_DIR.is_dir() else None


@st.cache_resource(show_spinner="Loading the language model…", max_entries=4)
def _load_language_model(model: Optional[str], seed: int):
    from probing_lab.lm.language_model import load_language_model

    return load_language_model(model, seed)


def language_model(spec: ModelSpec):
    """The current model with its softmax (``probing_lab.lm``), or raises ``NoSoftmaxError`` with a
    message fit to show (released ELMo weights come without one)."""
    from probing_lab.lm.language_model import NoSoftmaxError

    if spec.options:
        raise NoSoftmaxError("released ELMo weights come without their softmax, so they cannot score words")
    return _load_language_model(spec.model, spec.seed)


def card_summary(card: dict) -> list[dict]:
    """The facts of a model card a reader wants first, as rows (missing ones are left out)."""
    training, heldout, corpus = card.get("training") or {}, card.get("heldout") or {}, card.get("corpus") or {}
    stages = [s for s in card.get("stages") or [] if isinstance(s, dict)]
    if stages:  # a model trained in stages: the card's "training" is the last stage's run, the totals are these
        training = {
            "step": sum(s.get("steps", 0) for s in stages),
            "tokens_seen": sum(s.get("tokens", 0) for s in stages),
            "wall_time_s": sum(s.get("wall_time_s", 0) for s in stages),
        }
    rows = [
        ("name", card.get("name")),
        ("description", card.get("description")),
        ("parameters", f"{card['parameters']:,}" if card.get("parameters") else None),
        ("training steps", f"{training['step']:,}" if training.get("step") else None),
        ("token positions seen", f"{training['tokens_seen']:,}" if training.get("tokens_seen") else None),
        ("training time", f"{training['wall_time_s'] / 3600:.2f} h" if training.get("wall_time_s") else None),
        (
            "training stages",
            "; ".join(f"{s.get('tokens', 0):,} tokens on {s.get('where', '?')}" for s in stages) or None,
        ),
        (
            "corpus",
            f"{corpus['train_tokens']:,} tokens from {', '.join(sorted(corpus.get('sources', {})))}"
            if corpus.get("train_tokens")
            else None,
        ),
        (
            "heldout perplexity (forward / backward)",
            f"{heldout['perplexity_forward']:.1f} / {heldout['perplexity_backward']:.1f}"
            if heldout.get("perplexity_forward")
            else None,
        ),
    ]
    return [{"": k, "value": str(v)} for k, v in rows if v is not None]


def model_error(spec: ModelSpec, error: Exception) -> str:
    return f"Could not load {spec.label}: {error}"


def get_bundle(spec: Optional[ModelSpec] = None) -> Bundle:
    """The current model, or an error box and a stopped page (never a traceback)."""
    spec = spec or current_spec()
    try:
        return load_bundle(spec)
    except Exception as e:  # noqa: BLE001 - every load failure becomes a message
        st.error(model_error(spec, e))
        st.info("Choose another model on the **Model** page.")
        st.stop()


def page(title: str, shows: str = "", tries: str = "", icon: str = "🔬") -> None:
    """Page config, title, what the page shows and what to try first (the Tour lists the pages by
    these, see :func:`page_index`), and the sidebar line saying which model is in use."""
    st.set_page_config(page_title=f"{title} · ELMo probing lab", page_icon=icon, layout="wide")
    st.title(title)
    if shows:
        st.markdown(f"{shows} **Try:** {tries}" if tries else shows)
    spec = current_spec()
    st.sidebar.markdown(f"**Model:** {spec.label}")
    st.sidebar.caption("Change it on the Model page.")
    note = st.session_state.get("model_note")
    if note:
        st.warning(note)


PAGES_DIR = Path(__file__).resolve().parent / "pages"


def page_index(pages_dir: Path = PAGES_DIR) -> list[dict]:
    """Every page of the app in sidebar order: ``{"name", "file", "title", "shows", "tries"}``, read
    from the ``lab_ui.page(...)`` call each page opens with (so the Tour's list cannot go stale)."""
    import ast
    import re

    out = []
    for path in sorted(pages_dir.glob("*.py"), key=lambda p: int(p.name.split("_", 1)[0])):
        call = next(
            node
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "lab_ui.page"
        )
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


# --- paths typed by the user (the app as a server) ----------------------------------------------


def allowed_roots() -> Optional[list[Path]]:
    """The folders the path fields may name, resolved: ``$PROBING_LAB_ALLOWED_ROOTS`` plus the checkout
    (``REPO_ROOT``, with the shipped model and the probe results); None when it is not set (any path)."""
    folders = [f.strip() for f in os.environ.get(ALLOWED_ROOTS_ENV, "").split(os.pathsep) if f.strip()]
    if not folders:
        return None
    return [Path(f).expanduser().resolve() for f in folders] + [REPO_ROOT.resolve()]


def allowed_path(text: str | Path) -> Path:
    """The path a user typed, checked against :func:`allowed_roots` after resolving symlinks and ``..``;
    raises ``ValueError`` with a message fit to show. Without confinement the path comes back as typed
    (``~`` expanded); with it, resolved, so that what is read is what was checked."""
    raw = str(text).strip()
    try:
        path = Path(raw).expanduser()
        roots = allowed_roots()
        if roots is None:
            return path
        resolved = path.resolve()
    except (OSError, RuntimeError, ValueError) as e:  # "~nobody", a NUL byte, a symlink loop
        raise ValueError(f"Not a usable path: {raw!r} ({e})") from None
    if any(resolved == root or resolved.is_relative_to(root) for root in roots):
        return resolved
    raise ValueError(
        f"{raw} is outside the folders this server allows (${ALLOWED_ROOTS_ENV}: "
        + ", ".join(str(r) for r in roots)
        + "). Choose a path inside one of them."
    )


def runs_allowed() -> bool:
    """False when ``$PROBING_LAB_NO_RUNS`` is set (to anything but empty, 0, false or no)."""
    return os.environ.get(NO_RUNS_ENV, "").strip().lower() in ("", "0", "false", "no")


# --- data sets ----------------------------------------------------------------------------------


@st.cache_resource(show_spinner="Reading the data set…", max_entries=32)
def _load_dataset(name: str, split: str):
    from probing_lab.datasets import load_dataset

    return load_dataset(name, split)  # data dir: $PROBING_LAB_DATA, else ../shared/datasets


def dataset(name: str, split: str):
    """Sentence records, or raises :class:`DataUnavailable` with a message fit to show (the
    readers' own messages say where they looked and how to get the files)."""
    try:
        return _load_dataset(name, split)
    except ImportError as e:
        raise DataUnavailable(f"the data set readers (probing_lab.datasets) are not available: {e}") from None
    except Exception as e:  # noqa: BLE001 - missing files, bad split names
        raise DataUnavailable(str(e)) from None


class DataUnavailable(RuntimeError):
    pass


def halves_toggle(key: str) -> bool:
    """A checkbox that adds the forward and backward halves of L1 and L2 to a page's layers."""
    return st.checkbox(
        "Direction halves (L1/L2 forward and backward)",
        False,
        key=key,
        help="Each biLSTM layer is a forward LM's state (it has read the words up to this one) next to a "
        "backward LM's state (it has read the words from this one to the end). Show each half on its own.",
    )


def fmt(value, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def random_like(spec: ModelSpec) -> ModelSpec:
    """A random-init model of the same shape as ``spec``'s (a preset with the same options)."""
    from probing_lab.elmo import ElmoOptions, preset_of

    name = preset_of(ElmoOptions.from_dict(get_bundle(spec).options))
    if name is None:
        raise ValueError("no random-init preset has this model's shape; pick the random model on the Model page")
    return ModelSpec(model=f"random:{name}", seed=spec.seed + 1)


def spec_key(spec: ModelSpec) -> tuple:
    """A plain tuple for st.cache_data keys (with the embedder passed as an unhashed _argument)."""
    return (spec.model, spec.options, spec.weights, spec.seed)


def projection_choice(key: str) -> str:
    """PCA by default; UMAP and t-SNE only when asked (slower, and UMAP compiles on first use)."""
    label = st.radio(
        "2-D projection",
        ["PCA", "UMAP", "t-SNE"],
        horizontal=True,
        key=key,
        help="PCA is linear and exact; UMAP/t-SNE show neighbourhoods but distort distances. "
        "UMAP's first use in a session compiles numba code (about a minute).",
    )
    return {"PCA": "pca", "UMAP": "umap", "t-SNE": "tsne"}[label]


@st.cache_resource(show_spinner=False)
def warm_umap_in_background() -> threading.Thread:
    """One background thread per process that pays UMAP's numba compilation (about a minute); pages
    that offer UMAP start it when they open, so that choosing it later is quick."""
    from probing_lab.analysis import warm_up_umap

    thread = threading.Thread(target=warm_up_umap, name="umap-warm-up", daemon=True)
    thread.start()
    return thread


def projection(X, method: str, seed: int = 0):
    """``(N, dim)`` -> ``(N, 2)``, cached; waits for UMAP's one-off compilation under a spinner."""
    from probing_lab.analysis import umap_is_warm

    if method == "umap" and not umap_is_warm():
        with st.spinner("Compiling UMAP (numba) for the first time in this process, about a minute…"):
            warm_umap_in_background().join()
    return _projection(X, method, seed)


@st.cache_data(show_spinner="Projecting…", max_entries=64)
def _projection(X, method: str, seed: int):
    from probing_lab.analysis import project

    return project(X, method, seed=seed)
