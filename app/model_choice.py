"""The model the pages look inside: the user's choice kept in the session and loaded once per process
(``st.cache_resource``); its language model with the softmax, the word2vec vectors, the model card's
summary. A choice is a ``ModelSpec``, the arguments of :func:`probing_lab.model_loading.load_model`, so
the app loads exactly what ``probing-lab ... --model`` would."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import streamlit as st

from probing_lab.model_loading import load_model, shipped_model_dir
from probing_lab.paths import REPO_ROOT, SHIPPED_MODEL_DIR

MODEL_ENV = "PROBING_LAB_MODEL"  # set by `probing-lab app --model ...` (app/launch.py)

FALLBACK_MODEL = "random:cpu-small"


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
