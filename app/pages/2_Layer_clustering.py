"""Layer clustering: every token of a UD English-EWT dev sample as a point, per layer, coloured by part
of speech, dependency relation, frequency or out-of-vocabulary. Syntax should cluster in L1 more than
in L0 (spelling only) and L2 (more semantic)."""

import data_sets
import figures
import lab_ui
import model_choice
import numpy as np
import pandas as pd
import plotly.express as px
import streamlit as st

from probing_lab.analysis import embed_activations, layer_label, silhouette_cosine
from probing_lab.analysis.samples import FREQUENCY_BANDS, sample_sentences, token_rows, word_counts

MAX_TOKENS = {"pca": 30_000, "umap": 8_000, "tsne": 5_000}  # beyond this the page would take minutes
MAX_SILHOUETTE_TOKENS = 6_000  # the silhouette needs the full N x N cosine matrix
COLOURS = {
    "UPOS": "upos",
    "dependency relation": "deprel",
    "frequency (EWT train)": "frequency",
    "OOV (not in EWT train)": "oov",
}
PUNCT = "PUNCT"

lab_ui.page(
    "Layer clustering",
    shows=(
        "Every token of a treebank sample as a point, per layer, coloured by part of speech, dependency "
        "relation, frequency or out-of-vocabulary."
    ),
    tries=(
        "colour by part of speech, then by dependency relation, and read the silhouettes under the maps: which "
        "layer groups the labels best here?"
    ),
)
st.markdown(
    "Tokens of a random sample of EWT dev sentences, one map per layer. Hover a point to see the token in its sentence."
)

try:
    dev = data_sets.dataset("ewt", "dev")
except data_sets.DataUnavailable as e:
    st.error(f"UD English-EWT is not available: {e}")
    st.stop()

c1, c2, c3 = st.columns(3)
n_sentences = c1.number_input(
    "Sample size (sentences)",
    min_value=1,
    value=100,
    step=50,
    key="n_sentences",
    help=f"EWT dev has {len(dev):,} sentences.",
)
seed = int(c2.number_input("Sample seed", min_value=0, value=0, key="seed"))
colour_label = c3.selectbox("Colour by", list(COLOURS), key="colour")
c4, c5 = st.columns([2, 1])
keys_wanted = c4.multiselect(
    "Layers (the forward and backward halves of L1 and L2 too)",
    ["0", "1", "1f", "1b", "2", "2f", "2b", "mean"],
    default=["0", "1", "2", "mean"],
    format_func=layer_label,
    key="layers",
)
drop_punct = c5.checkbox("Leave out punctuation", value=False, key="drop_punct")
method = lab_ui.projection_choice("cluster_method")

n_sentences = int(n_sentences)
if n_sentences > len(dev):
    st.error(f"The sample is too large: EWT dev has {len(dev):,} sentences, {n_sentences:,} asked for.")
    st.stop()
if not keys_wanted:
    st.warning("Pick at least one layer.")
    st.stop()

sample = sample_sentences(dev, n_sentences, seed)
counts = None
if COLOURS[colour_label] in ("frequency", "oov"):  # reading EWT train takes a second: only when asked
    try:
        counts = word_counts(data_sets.dataset("ewt", "train"))
    except data_sets.DataUnavailable as e:
        st.warning(f"EWT train is not available, so frequency and OOV are not measured: {e}")
table = pd.DataFrame(token_rows(sample, counts))
keep = np.ones(len(table), dtype=bool) if not drop_punct else (table["upos"] != PUNCT).to_numpy()
n_tokens = int(keep.sum())
if n_tokens > MAX_TOKENS[method]:
    st.error(
        f"The sample is too large for {method.upper()}: {n_tokens:,} tokens, at most {MAX_TOKENS[method]:,}. "
        "Use fewer sentences" + (" or PCA." if method != "pca" else ".")
    )
    st.stop()
if n_tokens < 2:
    st.warning("The sample has fewer than two tokens to show; take more sentences.")
    st.stop()
st.caption(
    f"{len(sample):,} sentences, {n_tokens:,} tokens. " + lab_ui.projection_time_note(n_tokens, len(keys_wanted))
)

spec = model_choice.current_spec()
bundle = model_choice.get_bundle(spec)


@st.cache_data(show_spinner="Embedding the sample…", max_entries=8)
def sample_vectors(spec_key, n: int, seed: int, sentences, _embedder):
    """Cached per model and sample: changing the colouring must not re-embed."""
    return embed_activations(_embedder, [list(s) for s in sentences]).by_key(halves=True)


with lab_ui.friendly_errors("The clustering view"):
    vectors = sample_vectors(
        model_choice.spec_key(spec), n_sentences, seed, tuple(tuple(s.words) for s in sample), bundle.embedder
    )
    shown = table[keep].reset_index(drop=True)
    column = COLOURS[colour_label]
    if column in ("frequency", "oov") and counts is None:
        st.warning(f"{colour_label} needs EWT train; colouring by UPOS instead.")
        column = "upos"
    colour_values = shown[column].astype(str)
    order = {"frequency": list(FREQUENCY_BANDS), "oov": ["False", "True"]}.get(column)
    if order is None:
        order = colour_values.value_counts().index.tolist()  # most frequent first in the legend

    export = shown.drop(columns=["context"]).copy()
    quality = {}
    cols = st.columns(2)
    for i, key in enumerate(keys_wanted):
        X = vectors[key][keep]
        try:
            xy = lab_ui.projection(X, method, seed)
        except ValueError as e:
            st.warning(f"{layer_label(key)}: {e}")
            continue
        export[f"{layer_label(key)}_x"], export[f"{layer_label(key)}_y"] = xy[:, 0], xy[:, 1]
        frame = pd.DataFrame(
            {
                "x": xy[:, 0],
                "y": xy[:, 1],
                column: colour_values,
                "token": shown["form"],
                "context": shown["context"],
                "upos": shown["upos"],
                "deprel": shown["deprel"],
                "count": shown["count"],
            }
        )
        fig = px.scatter(
            frame,
            x="x",
            y="y",
            color=column,
            category_orders={column: order},
            color_discrete_sequence=figures.DISTINCT,  # one colour per label (17 UPOS tags, 37 relations...)
            hover_data={
                "x": False,
                "y": False,
                "context": True,
                "upos": True,
                "deprel": True,
                "count": counts is not None,
                column: False,
            },
            title=f"{layer_label(key)} ({method.upper()})",
            template="plotly_white",
            height=460,
            render_mode="auto",
        )
        fig.update_traces(marker={"size": 5, "opacity": 0.75})
        # the whole legend under the map (at the side it was cut after ~12 labels)
        fig.update_layout(legend={"orientation": "h", "y": -0.02, "yanchor": "top", "title": None})
        fig.update_xaxes(showticklabels=False, title=None)
        fig.update_yaxes(showticklabels=False, title=None)
        cols[i % 2].plotly_chart(fig, key=f"cluster_{key}")
        if n_tokens <= MAX_SILHOUETTE_TOKENS:
            quality[key] = silhouette_cosine(X, colour_values.tolist())

    if quality:
        st.subheader(f"How well does each layer group the {colour_label} labels?")
        st.markdown(
            lab_ui.markdown_table(
                [
                    {"layer": layer_label(k), "silhouette (cosine, full dimension)": lab_ui.fmt(v)}
                    for k, v in quality.items()
                ]
            )
        )
        ranked = sorted(quality, key=quality.get, reverse=True)
        listed = ", ".join(f"{layer_label(k)} ({quality[k]:.3f})" for k in ranked[1:])
        if quality[ranked[0]] <= 0:  # the hint comes from this page's numbers, not from the literature
            said = f"No layer groups the {colour_label} labels here (every silhouette is 0 or below)."
        else:
            said = f"Here **{layer_label(ranked[0])}** groups the {colour_label} labels best ({quality[ranked[0]]:.3f})"
            said += f", then {listed}." if listed else "."
        st.markdown(said + " A linear probe can still find a label a layer does not cluster by: see the Probes page.")
        st.caption(
            "Computed on the vectors themselves, not on the 2-D map; above 0 means tokens are closer to "
            "tokens with the same label than to the nearest other label."
        )
    elif n_tokens > MAX_SILHOUETTE_TOKENS:
        st.caption(f"Silhouette skipped above {MAX_SILHOUETTE_TOKENS:,} tokens.")

    st.download_button(
        "Download the points as CSV",
        export.to_csv(index=False).encode("utf-8"),
        file_name=f"ewt-dev-sample-{n_sentences}-seed{seed}-{method}.csv",
        mime="text/csv",
        key="csv",
    )
    if counts is not None:
        st.caption(
            "Frequency and OOV are counted in EWT train (lower-cased). ELMo reads characters, so an "
            "“OOV” word still gets a vector: these are the words its type layer has least evidence for."
        )
