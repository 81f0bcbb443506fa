"""Tour: what the three ELMo layers are, shown live on "bank", and the model card.

Run with ``probing-lab app`` or ``python -m streamlit run app/Tour.py --server.fileWatcherType none``.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # lab_ui, figures

import figures
import lab_ui
import streamlit as st

from probing_lab.analysis import collect, cosine_matrix, layer_label

# A minimal triple: the words before "bank" are the same, only what follows tells the sense, so a
# difference between the pairs comes from sense, not from syntax or the neighbouring words.
BANK = [
    ("I walked to the bank to deposit my wages.", "money"),
    ("I walked to the bank to ask for a loan.", "money"),
    ("I walked to the bank to fish in the river.", "river"),
]

lab_ui.page("ELMo probing lab: a tour")

st.markdown(
    """
ELMo (Peters et al., 2018) turns every word of a sentence into **three vectors**, one per layer of a
bidirectional language model. This lab lets you look at each layer separately.

| layer | what it is | what it knows |
|---|---|---|
| **L0** | a character CNN + highway over the word's spelling | the word *type*: the same vector for "bank" in every sentence |
| **L1** | first biLSTM layer (a forward and a backward LSTM, concatenated) | the word in its context; syntax (part of speech, dependencies) peaks here |
| **L2** | second biLSTM layer, the top | more context; word sense separates best here (Peters et al.: WSD F1 69.0 with L2 vs 67.4 with L1) |
| **mean** | the plain average of the layers (an untrained scalar mix; a task learns its own weights, the probes' "mix") | a task-free summary of all three |
"""  # noqa: E501 (a Markdown table: a row cannot be wrapped)
)

st.subheader("Live: one word, three sentences")
st.caption("Cosine similarity of the vectors for *bank* in these sentences, per layer of the current model.")
for i, (text, sense) in enumerate(BANK):
    st.markdown(f"**{'ABC'[i]}** ({sense}): {text}")

with lab_ui.friendly_errors("The live example"):
    bundle = lab_ui.get_bundle()
    occ = collect(bundle.embedder, [text for text, _ in BANK], target="bank")
    vectors = occ.vectors  # layer key -> (3, dim): the three "bank"s
    same, different = {}, {}
    for key, V in vectors.items():
        S = cosine_matrix(V)
        same[key] = float(S[0, 1])
        different[key] = float((S[0, 2] + S[1, 2]) / 2)
    st.plotly_chart(
        figures.layer_bars(
            {"same sense (A·B)": same, "different senses (A·C, B·C)": different},
            "cosine between the 'bank' vectors",
            "cosine",
        ),
        key="tour_bars",
    )
    st.dataframe(
        {
            "layer": [layer_label(k) for k in vectors],
            "A·B same sense": [round(same[k], 4) for k in vectors],
            "A·C / B·C different senses": [round(different[k], 4) for k in vectors],
        },
        hide_index=True,
    )
    upper = [k for k in ("1", "2") if k in vectors]
    closer = [k for k in upper if same[k] > different[k]]
    verdict = (
        f"In this model the two money senses are closer to each other than to the river bank in "
        f"{' and '.join(layer_label(k) for k in closer)}"
        if closer
        else "In this model the money pair is **not** closer than the river pairs in L1 or L2"
    )
    gaps = ", ".join(f"{layer_label(k)} {same[k] - different[k]:+.4f}" for k in upper)
    st.markdown(
        f"""
**Read it like this.** In **L0** every cosine is **1.000**: the character CNN sees only the letters
b-a-n-k, so all three "bank"s get the identical vector and no sense can be told apart. In L1 and L2
the vectors depend on the whole sentence: here only the words *after* "bank" differ, which the
backward half of the biLM reads. {verdict} (same-sense minus different-sense cosine: {gaps}).
Three sentences are an anecdote: the **Polysemy** page measures the separation over many contexts
(silhouette, nearest-neighbour sense accuracy against chance). A randomly initialised model also gives
different vectors per context (its LSTMs mix in the neighbours), but nothing in them reflects meaning:
compare models on the **Model** page. Current model: `{bundle.name}`.
"""
    )

st.subheader("Pages")
st.markdown(
    """
- **Polysemy**: many sentences of one word (bank, or the CoarseWSD-20 words, or your own): per layer a
  2-D map coloured by sense, a cosine heatmap, silhouette and nearest-neighbour sense accuracy.
- **Layer clustering**: tokens of a treebank sample (UD English-EWT dev) per layer, coloured by part of
  speech, dependency relation, frequency or out-of-vocabulary; CSV export.
- **Probes**: layer curves of the probe experiments (the results shipped with the lab, or your runs under
  `runs/probes/`): accuracy, control task, random-init baseline, confusion matrix; start a new run.
- **Sentence explorer**: token-by-token similarity inside your own text, per layer.
- **Model**: the shipped model, the early snapshot, a random-init model or a released ELMo.
"""
)

st.subheader("Model card")
with lab_ui.friendly_errors("The model card"):
    bundle = lab_ui.get_bundle()
    st.markdown(f"`{bundle.name}`: {bundle.parameters:,} parameters, layer width {bundle.embedder.dim}.")
    if bundle.card:
        st.dataframe(lab_ui.card_summary(bundle.card), hide_index=True)
        with st.expander("The whole model card (JSON)"):
            st.json(bundle.card, expanded=False)
    else:
        st.info("This model has no model card (random-init models and released ELMo weights come without one).")
