"""Model: choose what the other pages look inside. The lab's shipped model, its early snapshot (how much of
the layer structure is there after 5% of training), a random-init model (the baseline every probe needs)
or a released ELMo (``options.json`` + ``weights.hdf5`` as AllenNLP published them)."""

import json
from pathlib import Path

import allowed_paths
import lab_ui
import model_choice
import streamlit as st

from probing_lab import paths
from probing_lab.elmo import PRESETS
from probing_lab.model_loading import SHIPPED_MODEL_DIR, shipped_model_dir

SHIPPED = "Shipped model (data/models/elmo-lab)"
EARLY = "Early snapshot (data/models/elmo-lab-early)"
RANDOM = "Random init"
RELEASED = "Released ELMo (options.json + weights.hdf5)"
CANDIDATE = "Next model, in training (data/warm-start/campaign)"
CHECKPOINT = "Another checkpoint directory"

lab_ui.page(
    "Model",
    shows=(
        "Choose what the other pages look inside: the shipped model, its early snapshot, a random-init model "
        "or a released ELMo."
    ),
    tries=(
        "switch to the random-init model and revisit the Probes page: what remains is what the architecture "
        "gives for free."
    ),
)
current = model_choice.current_spec()
st.markdown(f"In use now: **{current.label}**")
switched = st.session_state.pop("model_switched", None)
if switched:
    st.success(switched)


def kind_of(spec: model_choice.ModelSpec) -> str:
    if spec.options:
        return RELEASED
    if spec.model is None:
        return SHIPPED
    if spec.model.startswith("random:"):
        return RANDOM
    if Path(spec.model).resolve() == paths.CANDIDATE_MODEL_DIR.resolve():
        return CANDIDATE
    return EARLY if Path(spec.model).resolve() == paths.EARLY_MODEL_DIR.resolve() else CHECKPOINT


def download_form() -> None:
    """Fetch a published ELMo into the user's cache folder with a progress bar, then fill in its paths."""
    from probing_lab.download import MODELS, default_dir, download

    with st.expander("Download one (internet; the original model is 360 MB)"):
        name = st.selectbox("Model", list(MODELS), key="download_name")
        st.caption(f"Into {default_dir(name)}; an interrupted download resumes; a manifest records the SHA-256.")
        if not st.button("Download", key="download"):
            return
        bar = st.progress(0.0, text=f"{name}: connecting…")

        def report(file: str, done: int, total) -> None:
            if total:
                text = f"{name}: {file} {done / 2**20:,.0f} of {total / 2**20:,.0f} MB"
                bar.progress(min(done / total, 1.0), text=text)

        try:
            files = download(name, progress=False, on_progress=report)
        except (OSError, ValueError) as e:  # DownloadError, VerifyError: the message says what to do
            st.error(str(e))
            return
        st.session_state["options"], st.session_state["weights"] = str(files.options), str(files.weights)
        st.rerun()


def candidate_is_ahead() -> bool:
    """The committed warm-start state is worth offering only while it has trained past the shipped model."""
    try:
        candidate = json.loads((paths.CANDIDATE_MODEL_DIR / "info.json").read_text(encoding="utf-8"))["step"]
    except (OSError, ValueError, KeyError, TypeError):
        return paths.CANDIDATE_MODEL_DIR.is_dir()
    training = (model_choice.read_card(paths.SHIPPED_MODEL_DIR) or {}).get("training")
    return not isinstance(training, dict) or candidate != training.get("step")


KINDS = [SHIPPED, EARLY, *([CANDIDATE] if candidate_is_ahead() else []), RANDOM, RELEASED, CHECKPOINT]
current_kind = kind_of(current)
if current_kind not in KINDS:  # the warm-start state, once it is the shipped model
    current_kind = CHECKPOINT
kind = st.radio("Model", KINDS, index=KINDS.index(current_kind), key="kind")
spec, problem, refused = None, None, None  # refused: a path outside the allowed folders
if kind == SHIPPED:
    if shipped_model_dir() is None:
        problem = (
            f"The shipped model is not in this checkout: {SHIPPED_MODEL_DIR} has no model.safetensors. "
            "It is trained by `probing-lab train` and exported with `probing-lab export`; meanwhile use a "
            "random-init model or a released ELMo."
        )
    else:
        spec = model_choice.ModelSpec()
elif kind == EARLY:
    if not (paths.EARLY_MODEL_DIR / "model.safetensors").is_file():
        problem = f"No early snapshot at {paths.EARLY_MODEL_DIR} (it ships together with the trained model)."
    else:
        spec = model_choice.ModelSpec(model=str(paths.EARLY_MODEL_DIR))
elif kind == CANDIDATE:
    st.caption(
        "The committed warm-start state of the model in training (see the README and the Training page). It "
        "carries its softmax, so the Language model page works with it."
    )
    spec = model_choice.ModelSpec(model=str(paths.CANDIDATE_MODEL_DIR))
elif kind == RANDOM:
    c1, c2 = st.columns(2)
    names = sorted(PRESETS)
    now = current.model[7:] if current.model and current.model.startswith("random:") else "cpu-small"
    preset = c1.selectbox("Preset (shape)", names, index=names.index(now) if now in names else 0, key="preset")
    seed = int(c2.number_input("Seed", min_value=0, value=current.seed, key="seed"))
    st.caption(
        "Randomly initialised as bilm-tf does. Its L1/L2 still mix context, so compare it with a trained "
        "model: what a trained model shows beyond this is what training added."
    )
    spec = model_choice.ModelSpec(model=f"random:{preset}", seed=seed)
elif kind == RELEASED:
    if allowed_paths.runs_allowed():
        download_form()
    options = st.text_input(
        "options.json", key="options", placeholder="/path/to/elmo_2x4096_512_2048cnn_2xhighway_options.json"
    )
    weights = st.text_input(
        "weights.hdf5", key="weights", placeholder="/path/to/elmo_2x4096_512_2048cnn_2xhighway_weights.hdf5"
    )
    st.caption(
        "The files AllenNLP published (e.g. the original 5.5B or 1B Word models). The original size runs "
        "about 300 tokens/s on a CPU: keep samples small."
    )
    if not options.strip() or not weights.strip():
        problem = "Give both paths."
    else:
        try:
            paths = [allowed_paths.allowed_path(options), allowed_paths.allowed_path(weights)]
        except ValueError as e:
            refused = str(e)
        else:
            missing = [text.strip() for text, path in zip((options, weights), paths) if not path.is_file()]
            if missing:
                problem = "No such file: " + ", ".join(missing)
            else:
                spec = model_choice.ModelSpec(options=str(paths[0]), weights=str(paths[1]))
else:
    directory = st.text_input(
        "Checkpoint directory",
        key="checkpoint",
        placeholder="a folder with model.safetensors, options.json, model_card.json",
    )
    if not directory.strip():
        problem = "Give a directory."
    else:
        try:
            path = allowed_paths.allowed_path(directory)
        except ValueError as e:
            refused = str(e)
        else:
            if not path.is_dir():
                problem = f"No such directory: {directory.strip()}"
            else:
                spec = model_choice.ModelSpec(model=str(path))

if refused:
    st.error(refused)
if problem:
    st.warning(problem)
# `spec is not None` again: a disabled button's click can still reach the server
if st.button("Use this model", disabled=spec is None, type="primary", key="use") and spec is not None:
    try:
        bundle = model_choice.load_bundle(spec)
    except Exception as e:  # noqa: BLE001 - a bad file becomes a message naming it
        st.error(model_choice.model_error(spec, e))
    else:
        model_choice.set_spec(spec)
        # drawn again at once, so that this page's header and the sidebar name the new model
        st.session_state["model_switched"] = f"Now using {bundle.name}. The other pages use it from here on."
        st.rerun()

st.subheader("Current model")
with lab_ui.friendly_errors("The model summary"):
    bundle = model_choice.get_bundle(current)
    o = bundle.options
    lstm = o.get("lstm", {})
    cnn = o.get("char_cnn", {})
    st.markdown(
        f"`{bundle.name}` · {bundle.parameters:,} parameters · {lstm.get('n_layers', '?')} biLSTM layers of "
        f"{lstm.get('dim', '?')} units projected to {lstm.get('projection_dim', '?')} · "
        f"{sum(n for _, n in cnn.get('filters', [])):,} char-CNN filters · every layer {bundle.embedder.dim} wide"
    )
    if bundle.card:
        st.markdown("**Model card**")
        st.markdown(lab_ui.markdown_table(model_choice.card_summary(bundle.card)))
        with st.expander("The whole model card (model_card.json)"):
            st.json(bundle.card, expanded=False)
    with st.expander("options.json"):
        st.json(o, expanded=False)
