"""Causal: does the model use what the probes find? Activation patching on a minimal pair you type
or on a construction of the agreement set, and the shipped model's committed causal runs (amnesic
probing, number units, patching heatmaps) from ``causal/results/``."""

import json

import figures
import lab_ui
import model_choice
import streamlit as st

from probing_lab.causal.patching import patch_construction, patch_tokens
from probing_lab.causal.report import load_causal_run, patch_summary, summary_table, units_summary
from probing_lab.lm.agreement import DESCRIPTIONS, read_pairs
from probing_lab.lm.language_model import NoSoftmaxError
from probing_lab.paths import CAUSAL_RESULTS_DIR
from probing_lab.text import tokenize

MAX_TOKENS = 30
# chosen by measurement (scripts in the closing note of issue 37): of the 240 prepositional-phrase pairs,
# the one the shipped forward LM gets right by the widest margin both ways (clean +2.10, corrupt -2.08)
CLEAN = "The officer near the pilots is tired ."
CORRUPT = "The officers near the pilots is tired ."
CONTRAST = "are"

lab_ui.page(
    "Causal: does the model use what the probes find?",
    shows=(
        "Whether the model *uses* what a probe reads: change one layer at one position (activation patching) "
        "and watch the language model's own prediction."
    ),
    tries=(
        "the default pair in the forward LM, then a construction: where does the subject's number travel to the verb?"
    ),
)
st.markdown(
    "A probe shows that a property can be *read* from a layer, not that the model *uses* it. Here the model is "
    "changed and its own predictions watched. **Activation patching**: run the *corrupt* sentence, but copy one "
    "layer's activation at one position from the *clean* sentence, and see how much of the clean sentence's "
    "preference (logit of the right word minus the contrast word) comes back. A bright cell is a place where "
    "the decision's information lives."
)

spec = model_choice.current_spec()
try:
    lm = model_choice.language_model(spec)
except NoSoftmaxError as e:
    st.info(f"{spec.label} has no language-model softmax: {e}. Patching needs one; the runs below still show.")
    lm = None
except Exception as e:  # noqa: BLE001 - every load failure becomes a message
    st.error(model_choice.model_error(spec, e))
    lm = None


@st.cache_data(show_spinner="Patching every layer at every position…", max_entries=32)
def patched(spec_key, clean, corrupt, target, good, bad, direction, _lm):
    return patch_tokens(_lm, clean, corrupt, target, good, bad, direction)


@st.cache_data(show_spinner=False, max_entries=16)
def patched_construction(spec_key, construction, direction, n, _lm):
    bar = st.progress(0.0, text=f"Patching {n} pairs of {construction.replace('_', ' ')}…")
    result = patch_construction(_lm, read_pairs(), construction, direction, n, lambda f: bar.progress(f))
    bar.empty()
    return result


def show(result, title: str, key: str) -> None:
    st.plotly_chart(figures.patch_heatmap(result.effect, result.tokens, title, result.changed), key=key)
    strongest = result.strongest_other()
    if strongest is None or strongest[2] < 0.05:
        st.markdown("Besides the changed word, no single patch restores 0.05 of the difference.")
    else:
        layer, column, value = strongest
        word = result.tokens[column]
        where = "the sentence start" if column == 0 else f"'{word}' (word {column - 1})"
        st.markdown(
            f"Besides the changed word, the strongest patch is **L{layer} at {where}**: it restores "
            f"{value:.2f} of the difference alone."
        )
    st.caption(
        f"Logit difference: clean {result.clean:.2f}, corrupt {result.corrupt:.2f} (mean over {result.pairs} "
        "pair(s)). 1 = patching this cell alone restores the clean preference, 0 = no change. Only the positions "
        "the LM has read before its prediction are shown."
    )


if lm is not None:
    st.subheader("Patch a minimal pair")
    source = st.radio("Pairs", ["Type a pair", "A construction of the agreement set"], horizontal=True, key="source")
    direction = st.radio("Language model", ["forward", "backward"], horizontal=True, key="direction")
    if source == "Type a pair":
        c1, c2 = st.columns(2)
        clean = tokenize(lab_ui.cut_text(c1.text_input("Clean sentence", CLEAN, key="clean"), 500))
        corrupt = tokenize(lab_ui.cut_text(c2.text_input("Corrupt sentence", CORRUPT, key="corrupt"), 500))
        if not clean or not corrupt:
            st.warning("Type both sentences.")
        elif len(clean) > MAX_TOKENS:
            st.warning(f"The clean sentence has {len(clean)} tokens; patching takes at most {MAX_TOKENS}.")
        elif len(clean) != len(corrupt):
            st.warning(
                f"The two sentences must have the same number of tokens (clean {len(clean)}, corrupt "
                f"{len(corrupt)}): patching copies position by position."
            )
        else:
            default = next((i for i, (a, b) in enumerate(zip(clean, corrupt)) if a != b), 0)
            default = min(default + 4, len(clean) - 2) if direction == "forward" else max(default - 4, 0)
            c1, c2 = st.columns(2)
            target = c1.selectbox(
                "Word the LM predicts", range(len(clean)), index=max(default, 0),
                format_func=lambda i: f"{i}: {clean[i]}", key="target",
            )  # fmt: skip
            contrast = c2.text_input("Contrast word (the wrong form)", CONTRAST, key="contrast").strip()
            if not contrast:
                st.warning("Type the contrast word.")
            else:
                with lab_ui.friendly_errors("Patching"):
                    r = patched(model_choice.spec_key(spec), tuple(clean), tuple(corrupt), target, clean[target],
                                contrast, direction, lm)  # fmt: skip
                    word = clean[target]
                    title = f"{direction} LM predicting word {target} '{word}': logit({word}) − logit({contrast})"
                    show(r, title, "typed")
                    # which input words the clean choice rests on, beside where its information lives
                    ig, _ = lab_ui.lm_attribution(
                        model_choice.spec_key(spec), tuple(clean), target, word, contrast, direction, lm
                    )
                    st.markdown(f"**Which words the clean choice rests on** (integrated gradients, {direction} LM):")
                    st.html(figures.attribution_html(clean, ig.scores, target))
                    st.caption(
                        "Blue pushes towards the clean word, red towards the contrast; the Language model page "
                        "shows occlusion beside it."
                    )
    else:
        constructions = sorted({p.construction for p in read_pairs()})
        c1, c2 = st.columns(2)
        construction = c1.selectbox(
            "Construction", constructions, index=constructions.index("prepositional_phrase"),
            format_func=lambda c: DESCRIPTIONS.get(c, c), key="construction",
        )  # fmt: skip
        n = c2.slider("Pairs (the most common sentence shape)", 1, 40, 10, key="n")
        with lab_ui.friendly_errors("Patching"):
            r = patched_construction(model_choice.spec_key(spec), construction, direction, n, lm)
            title = f"{direction} LM, {construction.replace('_', ' ')}: mean over {r.pairs} pairs"
            show(r, title, "construction_map")

st.subheader("The shipped model's causal runs")
runs = {p.name: load_causal_run(p) for p in sorted(CAUSAL_RESULTS_DIR.glob("*")) if p.is_dir()}
runs = {name: r for name, r in runs.items() if r}
if not runs:
    st.info(f"No committed causal runs in {CAUSAL_RESULTS_DIR} (make them with `probing-lab causal ... --out`).")
for name, metrics in runs.items():
    kind = metrics[0]["kind"]
    with st.expander(f"{name}: {kind} ({metrics[0].get('model', '')})", expanded=kind != "amnesic"):
        if kind == "amnesic":
            st.markdown(summary_table(metrics))
            curves = {f"L{m['layer']} {m['direction']}": m.get("inlp_accuracy", []) for m in metrics}
            st.plotly_chart(figures.inlp_curves(curves, metrics[0]["majority"], metrics[0]["property"]), key=name)
            st.caption(
                "INLP removes, one direction at a time, what a linear probe uses; the probe's accuracy falls "
                "towards the majority baseline. The removed subspace is then projected out inside the biLM: "
                "the perplexity after removal is read against removing random subspaces of the same rank."
            )
        elif kind == "units":
            st.markdown(units_summary(metrics[0]))
            st.plotly_chart(figures.unit_effects(metrics[0]), key=f"{name}_units")
        else:
            st.markdown(patch_summary(metrics[0]))
            for png in sorted((CAUSAL_RESULTS_DIR / name).glob("*.png")):
                st.image(str(png), caption=png.stem.replace("_", " "))
        with st.popover("metrics.json"):
            st.code(json.dumps(metrics if kind == "amnesic" else metrics[0], indent=1)[:20000], language="json")
