"""Tour: what the three ELMo layers are, shown live on "bank", and the model card.

Run with ``probing-lab app`` or ``python -m streamlit run app/Tour.py --server.fileWatcherType none``.
"""

import figures
import lab_ui
import model_choice
import streamlit as st

from probing_lab.analysis import collect, cosine_matrix, layer_label, sense_baselines, sense_verdict
from probing_lab.analysis.polysemy import BANK_SENTENCES

# A minimal triple: the words before "bank" are the same, only what follows tells the sense, so a
# difference between the pairs comes from sense, not from syntax or the neighbouring words.
BANK = [
    ("I walked to the bank to deposit my wages.", "money"),
    ("I walked to the bank to ask for a loan.", "money"),
    ("I walked to the bank to fish in the river.", "river"),
]


@st.cache_data(show_spinner=False, max_entries=8)
def bank_occurrences(spec_key, _embedder):
    """The sixteen "bank" sentences (Polysemy's preset) in one model, cached per model."""
    return collect(
        _embedder, [s for s, _ in BANK_SENTENCES], target="bank", labels=[label for _, label in BANK_SENTENCES]
    )


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
    bundle = model_choice.get_bundle()
    occ = collect(bundle.embedder, [text for text, _ in BANK], target="bank")
    vectors = occ.vectors  # layer key -> (3, dim): the three "bank"s
    same, different = {}, {}
    for key, V in vectors.items():
        S = cosine_matrix(V)
        same[key] = float(S[0, 1])
        different[key] = float((S[0, 2] + S[1, 2]) / 2)
    st.markdown(
        lab_ui.markdown_table(
            [
                {
                    "layer": layer_label(k),
                    "A·B same sense": f"{same[k]:.4f}",
                    "A·C / B·C different senses": f"{different[k]:.4f}",
                    "gap (same − different)": f"{same[k] - different[k]:+.4f}",
                }
                for k in vectors
            ]
        )
    )
    st.markdown(
        """
**Read it like this.** In **L0** every cosine is **1.000**: the character CNN sees only the letters
b-a-n-k, so all three "bank"s get the identical vector and no sense can be told apart. In L1 and L2
the vectors depend on the whole sentence; here only the words *after* "bank" differ, which the
backward half of the biLM reads. A gap of a few hundredths on three sentences is an anecdote, so the
verdict below is measured on sixteen.
"""
    )

st.subheader("Sixteen sentences: does the word's own vector carry the sense?")
st.caption(
    "Eight money and eight river sentences of *bank*. Each occurrence takes the sense of its most similar "
    "other occurrence (leave-one-out nearest neighbour), per layer, for the word's own vector, for the mean of "
    "the sentence's other words (topic alone) and for an untrained model of the same shape."
)
with lab_ui.friendly_errors("The sixteen-sentence measure"):
    spec = model_choice.current_spec()
    occ16 = bank_occurrences(model_choice.spec_key(spec), model_choice.get_bundle(spec).embedder)
    try:
        random_spec = model_choice.random_like(spec)
        random16 = bank_occurrences(model_choice.spec_key(random_spec), model_choice.get_bundle(random_spec).embedder)
    except ValueError:
        random16 = None  # a released ELMo: no random-init preset of its shape
    table = sense_baselines(occ16, random16, linear=False)  # the chart shows 1-NN only
    series = {"this model: the word's vector": "token_nn", "this model: bag of context": "context_nn"}
    if random16 is not None:
        series["random-init model: the word's vector"] = "random_nn"
    st.plotly_chart(
        figures.layer_bars(
            {name: {k: table[k][key] for k in ("0", "1", "2")} for name, key in series.items()},
            "nearest-neighbour sense accuracy, 16 'bank' sentences",
            "1-NN accuracy",
            reference=(table["0"]["chance"], "chance"),
        ),
        key="tour_bars",
    )
    st.markdown(  # the chart's numbers as text: a class reads them off the projector, not by hovering
        lab_ui.markdown_table(
            [
                {"": name, **{layer_label(k): f"{table[k][key]:.3f}" for k in ("0", "1", "2")}}
                for name, key in series.items()
            ]
            + [{"": "chance", **{layer_label(k): f"{table[k]['chance']:.3f}" for k in ("0", "1", "2")}}]
        )
    )
    st.markdown(
        f"**Verdict.** {sense_verdict(table)} The **Polysemy** page shows these sentences (and your own) per "
        f"layer as maps, with a cross-validated linear classifier beside the geometry. Current model: "
        f"`{bundle.name}`."
    )

st.subheader("Pages")
st.markdown("\n".join(f"- **{p['name']}**: {p['shows']}" for p in lab_ui.page_index()))

st.subheader("Model card")
with lab_ui.friendly_errors("The model card"):
    bundle = model_choice.get_bundle()
    st.markdown(f"`{bundle.name}`: {bundle.parameters:,} parameters, layer width {bundle.embedder.dim}.")
    if bundle.card:
        st.markdown(lab_ui.markdown_table(model_choice.card_summary(bundle.card)))
        with st.expander("The whole model card (JSON)"):
            st.json(bundle.card, expanded=False)
    else:
        st.info("This model has no model card (random-init models and released ELMo weights come without one).")
