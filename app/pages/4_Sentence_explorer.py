"""Sentence explorer: cosine similarity between every pair of tokens of your text, per layer, and the
nearest other tokens of any one token. L0 only links identical spellings; L1/L2 link by context."""

import zlib

import figures
import lab_ui
import model_choice
import numpy as np
import streamlit as st

from probing_lab.analysis import cosine_matrix, embed_activations, layer_label, nearest_contexts
from probing_lab.text import first_sentences, split_and_tokenize

MAX_TOKENS = 120  # a heatmap beyond this is unreadable
DEFAULT = "The bank raised its interest rates. We sat on the bank of the river and watched the boats."

lab_ui.page(
    "Sentence explorer",
    shows="Cosine similarity between every pair of tokens of your text, per layer.",
    tries=(
        'a sentence with a word used twice in two senses ("I sat on the bank by the bank"): L0 links the two,'
        " L1/L2 tell them apart."
    ),
)
text = st.text_area("Text (one or more sentences)", DEFAULT, height=110, key="text")
text, note = lab_ui.limit_text(text, 2000)
if note:
    st.info(note)
sentences = split_and_tokenize(text)
if not sentences:
    st.warning("Type some text to explore.")
    st.stop()
tokens = [t for s in sentences for t in s]
if len(tokens) > MAX_TOKENS:
    kept = first_sentences(sentences, MAX_TOKENS)
    st.info(f"The text has {len(tokens)} tokens; the first {sum(map(len, kept))} (whole sentences) are used.")
    sentences = kept
    tokens = [t for s in sentences for t in s]

spec = model_choice.current_spec()
bundle = model_choice.get_bundle(spec)


halves = lab_ui.halves_toggle("explorer_halves")


@st.cache_data(show_spinner="Embedding…", max_entries=16)
def text_vectors(spec_key, sentences, halves, _embedder):
    return embed_activations(_embedder, [list(s) for s in sentences]).by_key(halves)


with lab_ui.friendly_errors("The sentence explorer"):
    layers = text_vectors(model_choice.spec_key(spec), tuple(tuple(s) for s in sentences), halves, bundle.embedder)
    st.caption(f"{len(sentences)} sentence(s), {len(tokens)} tokens; each sentence is embedded on its own.")
    labels = [f"{i}: {t}" for i, t in enumerate(tokens)]
    focus = st.selectbox(
        "Token",
        range(len(tokens)),
        format_func=lambda i: labels[i],
        index=next((i for i, t in enumerate(tokens) if t.lower() == "bank"), 0),
        key=f"focus-{zlib.crc32(' '.join(tokens).encode())}",  # new text: the token is picked again
    )
    st.plotly_chart(
        figures.similarity_profile(
            {k: cosine_matrix(layers[k][focus : focus + 1], layers[k])[0] for k in layers}, tokens, focus
        ),
        key="profile",
    )

    st.subheader(f"Nearest tokens to “{tokens[focus]}”")
    cols = st.columns(len(layers))
    for col, key in zip(cols, layers):
        hits = nearest_contexts(layers[key][focus], layers[key], k=5, exclude=[focus])
        col.markdown(f"**{layer_label(key)}**")
        col.dataframe(
            {"token": [labels[i] for i, _ in hits], "cosine": [round(c, 3) for _, c in hits]}, hide_index=True
        )

    st.subheader("Token × token cosine")
    key = st.radio("Layer", list(layers), format_func=layer_label, horizontal=True, key="heat_layer")
    st.plotly_chart(
        figures.token_heatmap(cosine_matrix(layers[key]), tokens, f"{layer_label(key)}: cosine between tokens"),
        key="heatmap",
    )
    st.caption(lab_ui.LAYER_HELP[key] + " In L0, two tokens with the same spelling always have cosine 1.")
    if len(tokens) >= 2:
        off = ~np.eye(len(tokens), dtype=bool)
        st.caption(
            "Mean off-diagonal cosine per layer (how alike all tokens are, the anisotropy): "
            + ", ".join(f"{layer_label(k)} {cosine_matrix(layers[k])[off].mean():.3f}" for k in layers)
        )
