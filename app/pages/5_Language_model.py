"""Language model: ELMo is two language models. Per word, how surprised each direction is and what it
expected instead; the sentence's perplexity per direction; and subject-verb agreement minimal pairs."""

import json
import math

import figures
import lab_ui
import model_choice
import streamlit as st

from probing_lab.lm.agreement import DESCRIPTIONS, evaluate_agreement, read_pairs
from probing_lab.lm.blimp import blimp_table
from probing_lab.lm.language_model import NoSoftmaxError
from probing_lab.lm.score import predict, score_sentences
from probing_lab.paths import LM_RESULTS_DIR
from probing_lab.stats import plus_minus
from probing_lab.text import tokenize
from probing_lab.training.vocab import UNK_TOKEN

MAX_TOKENS = 60  # one sentence; a strip beyond this is unreadable
DEFAULT = "The keys to the cabinet are on the table ."

lab_ui.page(
    "Language model: what each direction predicts",
    shows=(
        "ELMo as the two language models it is: how surprised each direction is by each word, and the "
        "subject-verb agreement test."
    ),
    tries='"The keys to the cabinet are" against "is": which direction gets the agreement right?',
)
st.markdown(
    "ELMo's biLM is **two language models** that share the word (L0) layer and the softmax. The **forward** LM "
    "reads left to right and, at each word, predicts it from the words *before* it; the **backward** LM reads "
    "right to left and predicts each word from the words *after* it. Neither sees the word it predicts. "
    "L1 and L2 are the concatenation of the two LMs' states, which is why a layer knows both sides of a word. "
    "Surprisal is -log2 P(word): 1 bit is a coin flip, 10 bits is a 1-in-1,000 guess."
)

spec = model_choice.current_spec()
try:
    lm = model_choice.language_model(spec)
except NoSoftmaxError as e:
    st.info(f"{spec.label} has no language-model softmax: {e}")
    st.markdown(
        "On the **Model** page choose the *shipped model* or its *early snapshot*, which carry their softmax, "
        "or a random-init model (the chance baseline)."
    )
    st.stop()
except Exception as e:  # noqa: BLE001 - every load failure becomes a message
    st.error(model_choice.model_error(spec, e))
    st.stop()

text = st.text_input("A sentence", DEFAULT, key="lm_text")
tokens = tokenize(lab_ui.cut_text(text, 1000))
if not tokens:
    st.warning("Type a sentence to score.")
    st.stop()
if len(tokens) > MAX_TOKENS:
    st.info(f"The sentence has {len(tokens)} tokens; the first {MAX_TOKENS} are scored.")
    tokens = tokens[:MAX_TOKENS]


hide_unk = st.toggle(
    "Leave <UNK> out of the expected words",
    value=True,
    key="lm_hide_unk",
    help="<UNK> is not a word: it stands for every word outside the model's vocabulary at once, so as one class "
    "it is often the single most probable 'word'. Left out, the next most probable word takes its place.",
)
SHOWN = 5  # expected words per direction and position


@st.cache_data(show_spinner="Scoring…", max_entries=32)
def scored(spec_key, tokens, _lm):
    (score,) = score_sentences(_lm, [list(tokens)])
    return score, predict(_lm, list(tokens), k=SHOWN + 1)  # one spare for <UNK>


def expected(words: list) -> list:
    """The SHOWN most probable (word, probability) pairs, without <UNK> when the toggle says so."""
    return [(w, p) for w, p in words if not (hide_unk and w == UNK_TOKEN)][:SHOWN]


with lab_ui.friendly_errors("The language-model view"):
    score, predictions = scored(model_choice.spec_key(spec), tuple(tokens), lm)
    bits = {
        "forward": [-x / math.log(2) for x in score.forward_logprob],
        "backward": [-x / math.log(2) for x in score.backward_logprob],
    }
    hover = {
        d: ["<br>".join(f"{word}: {prob:.1%}" for word, prob in expected(getattr(pred, d))) for pred in predictions]
        for d in ("forward", "backward")
    }
    st.plotly_chart(figures.surprisal_strip(tokens, bits, hover), key="strip")
    c1, c2, c3 = st.columns(3)
    c1.metric("Perplexity, forward", f"{score.perplexity('forward'):.1f}")
    c2.metric("Perplexity, backward", f"{score.perplexity('backward'):.1f}")
    c3.metric("Unknown words (scored as <UNK>)", len(score.unk))
    st.caption(
        f"Model: {lm.name}, a vocabulary of {len(lm.vocab):,} words. Hover over a cell for the five words that "
        "direction found most probable there"
        + (" (<UNK>, the class of all out-of-vocabulary words, left out)" if hide_unk else "")
        + ". Perplexity counts the sentence's end too."
    )
    rows = [
        {
            "position": p.position,
            "token": p.token + (" (<UNK>)" if p.position in score.unk else ""),
            "forward bits": round(bits["forward"][p.position], 2),
            "forward expected": ", ".join(w for w, _ in expected(p.forward)),
            "backward bits": round(bits["backward"][p.position], 2),
            "backward expected": ", ".join(w for w, _ in expected(p.backward)),
        }
        for p in predictions
    ]
    narrow = {k: st.column_config.Column(width="small") for k in ("position", "forward bits", "backward bits")}
    st.dataframe(rows, hide_index=True, column_config=narrow)  # room for both "expected" columns

st.subheader("Why this word? Attribution")
st.markdown(
    "Which words does one LM's choice between two words rest on? **Integrated gradients** (Captum) move the "
    "word vectors (L0) from zero to the sentence's and add up how the choice changes; **occlusion** removes one "
    "word at a time and re-scores. Blue: the word pushes towards the sentence's word, red: towards the other."
)
c1, c2, c3 = st.columns(3)
default_position = next((i for i, t in enumerate(tokens) if t.lower() in ("are", "is")), len(tokens) - 1)
position = c1.selectbox(
    "Word the LM chooses",
    range(len(tokens)),
    index=default_position,
    format_func=lambda i: f"{i}: {tokens[i]}",
    key=lab_ui.key_on("attr_position", *tokens),
)
contrast = c2.text_input(
    "Against", {"are": "is", "is": "are"}.get(tokens[position].lower(), ""), key=lab_ui.key_on("attr_contrast", *tokens)
).strip()
attr_direction = c3.radio("Language model", ["forward", "backward"], horizontal=True, key="attr_direction")


if not contrast:
    st.info("Type the other word the LM could have chosen there (e.g. *is* against *are*).")
else:
    with lab_ui.friendly_errors("Attribution"):
        ig, occ = lab_ui.lm_attribution(
            model_choice.spec_key(spec), tuple(tokens), position, tokens[position], contrast, attr_direction, lm
        )
        choice = "prefers" if ig.value > 0 else "does not prefer"
        st.markdown(
            f"The {attr_direction} LM **{choice}** *{tokens[position]}* over *{contrast}* here: log-probability "
            f"difference {ig.value:+.2f}."
        )
        st.markdown("**Integrated gradients**")
        st.html(figures.attribution_html(tokens, ig.scores, position))
        st.markdown("**Occlusion** (the difference's change when the word is removed)")
        st.html(figures.attribution_html(tokens, occ.scores, position))
        read = "before" if attr_direction == "forward" else "after"
        st.caption(
            f"The {attr_direction} LM reads only the words {read} the chosen one: the others get 0. The integrated "
            f"gradients add up to the difference's change from an all-zero L0 within {ig.completeness_error:.4f} "
            "(completeness error). Measured on the agreement set: `probing-lab attribute agreement` (docs)."
        )

st.subheader("Subject-verb agreement")
st.markdown(
    "A minimal pair differs only in the verb's number: *The author near the guards **laughs*** / "
    "*\\*laugh*. The model passes a pair when it gives the grammatical sentence the higher probability. "
    "The forward LM must carry the subject's number past the words in between; in the attractor constructions "
    "a noun of the other number stands in the way. LSTM LMs get about 80% on agreement in BLiMP "
    "(docs/published-results.md)."
)
st.dataframe([{"construction": k, "example": v} for k, v in DESCRIPTIONS.items()], hide_index=True)


results = st.session_state.setdefault("agreement_results", {})  # spec key -> accuracy, for this session
key = model_choice.spec_key(spec)
if st.button("Evaluate agreement on this model (1,200 pairs, about a minute on two cores)", key="run_agreement"):
    with lab_ui.friendly_errors("The agreement test"):
        bar = st.progress(0.0, text="Scoring 1,200 minimal pairs…")
        result = evaluate_agreement(lm, read_pairs(), on_progress=lambda f: bar.progress(f, text="Scoring pairs…"))
        bar.empty()
        results[key] = result.accuracy
if key in results:
    st.plotly_chart(figures.agreement_bars(results[key], f"Agreement accuracy, {lm.name}"), key="agreement")
    st.dataframe([{"construction": k, **v} for k, v in results[key].items()], hide_index=True)

st.subheader("BLiMP: the field's benchmark of grammar")
blimp_runs = {p.parent.name: p for p in sorted(LM_RESULTS_DIR.glob("*/metrics.json"))}
blimp = {}
for name, path in blimp_runs.items():
    with lab_ui.friendly_errors(f"The BLiMP run {name}"):
        record = json.loads(path.read_text(encoding="utf-8"))
        if record.get("kind") == "blimp":
            blimp[name] = record
if not blimp:
    st.info(f"No committed BLiMP run in {LM_RESULTS_DIR}: `probing-lab lm blimp --out {LM_RESULTS_DIR}/NAME`.")
else:
    c1, c2 = st.columns(2)
    name = c1.selectbox("Run", list(blimp), key="blimp_run", format_func=lambda n: f"{n} ({blimp[n]['model']})")
    run = blimp[name]
    direction = c2.radio("Direction", ["both", "forward", "backward"], horizontal=True, key="blimp_direction")
    overall = run["overall"]
    st.markdown(
        f"Warstadt et al. (2020): 67 paradigms of 1,000 minimal pairs. A pair is right when the good sentence has "
        f"the higher total log-probability. **{run['model']}**: forward "
        f"{plus_minus(overall['forward'], overall['forward_ci95'])}, backward "
        f"{plus_minus(overall['backward'], overall['backward_ci95'])}, both "
        f"{plus_minus(overall['both'], overall['both_ci95'])} over {run['pairs']:,} pairs"
        + (
            "; published: "
            + ", ".join(f"{label} {overall['published'][k]:.3f}" for k, (label, _) in figures.BLIMP_MARKS.items())
            if "published" in overall
            else ""
        )
        + (f"; humans {overall['human']:.3f}." if "human" in overall else ".")
    )
    st.plotly_chart(figures.blimp_bars(run, direction), key="blimp_bars")
    st.caption(
        f"Bars: this model with 95% bootstrap intervals (pairs resampled within each paradigm); marks: the "
        "published models (their LSTM read about 83M tokens of Wikipedia; the shipped model 25M token positions "
        "of a 12-13M-token corpus, its model card). "
        f"{run['oov']['pairs_with_oov']:,} pairs hold a word outside this model's vocabulary (scored as <UNK>)."
    )
    st.markdown(blimp_table(run))
