"""Compare: how similar two representations of the same tokens are (linear CKA, Kornblith et al. 2019),
across the layers and direction halves of the current model, or against another model; and how
contextual each layer is (self-similarity and anisotropy, Ethayarajh 2019)."""

import data_sets
import lab_ui
import model_choice
import numpy as np
import plotly.graph_objects as go
import streamlit as st

from probing_lab import paths
from probing_lab.analysis import cka_matrix, corpus_geometry, embed_activations, layer_label
from probing_lab.text import first_sentences, split_and_tokenize

LAYERS = ["0", "1", "1f", "1b", "2", "2f", "2b"]
MAX_TOKENS = 3000  # the debiased estimator builds (tokens x tokens) Gram matrices
SELF = "the current model itself (layer against layer)"

lab_ui.page(
    "Compare representations",
    shows=(
        "How similar two representations of the same tokens are (linear CKA) across layers, halves and "
        "models, and how contextual each layer is."
    ),
    tries="the current model against a random-init one: which layers does training change most?",
)
st.markdown(
    "**CKA** (centred kernel alignment) asks whether two representations put the same tokens close together. "
    "It is 1 when one is a rotation and rescaling of the other and near 0 when they are unrelated, and it "
    "works across layers of different widths and across models. **Debiased** CKA corrects the upward bias of "
    "plain CKA when there are few tokens for the width."
)

spec = model_choice.current_spec()
others = {SELF: None, "shipped model": model_choice.ModelSpec()}
if paths.EARLY_MODEL_DIR.is_dir():
    others["early snapshot (5% of training)"] = model_choice.ModelSpec(model=str(paths.EARLY_MODEL_DIR))
others["random init of the same shape"] = "random"
c1, c2 = st.columns(2)
other = c1.selectbox("Compare with", list(others), key="cmp_other")
source = c2.radio("Tokens", ["EWT dev sample", "Your text"], horizontal=True, key="cmp_source")
c3, c4, c5 = st.columns([3, 1, 1])
keys = c3.multiselect("Layers", LAYERS, default=["0", "1", "2"], format_func=layer_label, key="cmp_layers")
debiased = c4.checkbox("Debiased", True, key="cmp_debiased")
n_sentences = int(c5.number_input("Sentences", 10, 300, 100, step=10, key="cmp_n"))
if not keys:
    st.warning("Pick at least one layer.")
    st.stop()

if source == "Your text":
    text = st.text_area(
        "Text", "The bank raised its rates. We sat on the river bank. The rates rose again.", key="cmp_text"
    )
    sentences = split_and_tokenize(lab_ui.cut_text(text))
else:
    try:
        sentences = [s.words for s in data_sets.dataset("ewt", "dev")[:n_sentences]]
    except data_sets.DataUnavailable as e:
        st.error(f"UD English-EWT is not available: {e}. Choose “Your text”.")
        st.stop()
kept = first_sentences(sentences, MAX_TOKENS)
total = sum(map(len, kept))
if total < 4:
    st.warning("CKA needs at least 4 tokens; type more text.")
    st.stop()
st.caption(f"{len(kept)} sentences, {total} tokens.")


@st.cache_data(show_spinner="Embedding…", max_entries=16)
def layer_vectors(spec_key, sentences, _embedder):
    acts = embed_activations(_embedder, [list(s) for s in sentences])
    return acts.by_key(halves=True)


def vectors_of(model_spec):
    bundle = model_choice.get_bundle(model_spec)
    return bundle.name, layer_vectors(model_choice.spec_key(model_spec), tuple(tuple(s) for s in kept), bundle.embedder)


# CKA and the geometry are cached on what they depend on (the models, the sentences, the layers): a second
# visit with the same inputs is instant
@st.cache_data(show_spinner="Computing CKA between every pair of layers…", max_entries=16)
def cka_of(key_a, key_b, sentences, keys, debiased, _a, _b):
    return cka_matrix({k: _a[k] for k in keys}, {k: _b[k] for k in keys}, debiased=debiased)


@st.cache_data(show_spinner="Measuring self-similarity and anisotropy…", max_entries=16)
def geometry_of(key, sentences, keys, _vectors):
    words = [w for s in sentences for w in s]
    sentence_of = [i for i, s in enumerate(sentences) for _ in s]
    return corpus_geometry({k: _vectors[k] for k in keys}, words, sentence_of)


with lab_ui.friendly_errors("The comparison"):
    name_a, a = vectors_of(spec)
    b_spec = others[other]
    if b_spec == "random":  # another seed when the current model is random-init itself
        b_spec = model_choice.random_like(spec)
    name_b, b = (name_a, a) if b_spec is None else vectors_of(b_spec)
    missing = [k for k in keys if k not in a or k not in b]
    if missing:
        st.warning(f"Layer(s) {missing} are not in both models; they are left out.")
    keys = [k for k in keys if k in a and k in b]
    key_a = model_choice.spec_key(spec)
    key_b = key_a if b_spec is None else model_choice.spec_key(b_spec)
    sentences = tuple(tuple(s) for s in kept)
    rows, cols, M = cka_of(key_a, key_b, sentences, tuple(keys), debiased, a, b)
    fig = go.Figure(
        go.Heatmap(
            z=M,
            x=[layer_label(c) for c in cols],
            y=[layer_label(r) for r in rows],
            zmin=0,
            zmax=1,
            colorscale="Viridis",
            text=np.round(M, 2),
            texttemplate="%{text}",
            hovertemplate="%{y} vs %{x}: CKA %{z:.3f}<extra></extra>",
        )
    )
    fig.update_layout(
        title=f"{'debiased ' if debiased else ''}linear CKA: rows {name_a}, columns {name_b}",
        yaxis={"autorange": "reversed"},
        template="plotly_white",
        height=140 + 60 * len(rows),
    )
    st.plotly_chart(fig, key="cka")
    st.caption(
        "Read the diagonal when comparing two models (is L1 of one like L1 of the other?) and the rows when "
        "comparing a model with itself (which layers carry the same structure?)."
    )

    st.subheader("How contextual is each layer?")
    geometry = []
    for name, key, vectors in ((name_a, key_a, a), (name_b, key_b, b))[: 1 if b_spec is None else 2]:
        for row in geometry_of(key, sentences, tuple(keys), vectors):
            geometry.append({"model": name, **row, "layer": layer_label(row["layer"])})
    shown = {  # the columns in words (the CSV of `probing-lab compare` keeps the field names)
        "self_similarity": "self-similarity",
        "adjusted_self_similarity": "self-similarity minus anisotropy",
    }
    st.dataframe([{shown.get(k, k): v for k, v in row.items()} for row in geometry], hide_index=True)
    st.caption(
        "Self-similarity: mean cosine between a word's occurrences in different sentences (1 = the same vector "
        "everywhere, as L0). Anisotropy: mean cosine of random token pairs, the floor every cosine sits on. "
        "Ethayarajh (2019): upper layers are more contextual, i.e. lower self-similarity once the anisotropy "
        "is subtracted."
    )
