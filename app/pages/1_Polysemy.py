"""Polysemy: does a layer separate the senses of one word? Per layer a 2-D map coloured by sense, a
cosine heatmap and the separation numbers (silhouette, leave-one-out nearest-neighbour accuracy,
self-similarity against the anisotropy baseline).

The sentences come from the built-in *bank* set, a CoarseWSD-20 word, typed text, or the user's own
``wic`` file (``sentence<TAB>index<TAB>label[<TAB>group]``, a path inside the allowed folders or an
upload): a line gives the sentence, its target (the 0-based index), the sense (the label) and the word
(the group); the page shows one group at a time, sampled per sense like CoarseWSD."""

import data_sets
import figures
import lab_ui
import model_choice
import numpy as np
import own_file
import streamlit as st

from probing_lab.analysis import (
    collect,
    cosine_matrix,
    labelled_positions,
    layer_label,
    parse_lines,
    sense_baselines,
    sense_verdict,
    supervised_2d,
)
from probing_lab.analysis.polysemy import BANK_SENTENCES
from probing_lab.datasets.files import iter_labelled_file
from probing_lab.datasets.summary import summarise_file
from probing_lab.datasets.wsd import COARSEWSD_WORDS

DEFAULT_TYPED = "\n".join(f"{s} | {label}" for s, label in BANK_SENTENCES[:4] + BANK_SENTENCES[8:12])
BUILTIN = "bank (built-in sentences)"

lab_ui.page(
    "Polysemy: one word, many contexts",
    shows="One word in many sentences, per layer: does the layer put occurrences of the same sense together?",
    tries=(
        "the built-in *bank* set, then a CoarseWSD-20 word; compare L0 (spelling only) with L1 and L2, and "
        "each layer with its baselines below."
    ),
)
st.markdown("Each point is one occurrence of the word. If a layer encodes sense, the colours form separate groups.")


@st.cache_data(show_spinner="Embedding the sentences…", max_entries=32)
def occurrences(spec_key, sentences, target, labels, positions, halves, _embedder):
    """Cached per model and input: changing the projection must not re-embed."""
    return collect(
        _embedder,
        [list(s) if not isinstance(s, str) else s for s in sentences],
        target=target,
        labels=list(labels),
        positions=None if positions is None else list(positions),
        halves=halves,
    )


@st.cache_data(show_spinner="Fitting the sense classifiers…", max_entries=32)
def baselines_of(key, _occ, _random_occ):
    """:func:`sense_baselines` (cross-validated classifiers: most of the page's CPU), once per input
    ``key`` (model, sentences, target, labels, positions, halves): every student on the same example
    shares it."""
    return sense_baselines(_occ, _random_occ)


@st.cache_data(show_spinner="Fitting the sense classifiers…", max_entries=32)
def supervised_views(key, _occ, labels):
    return {k: supervised_2d(_occ.vectors[k], list(labels)) for k in _occ.keys}


def sample_per_sense(tokens, positions, senses, per_sense: int, seed: int):
    """At most ``per_sense`` occurrences of each sense, drawn with ``seed``, in their original order."""
    rng = np.random.default_rng(seed)
    chosen = []
    for sense in sorted({s for s in senses if s is not None}):
        idx = [i for i, s in enumerate(senses) if s == sense]
        chosen += sorted(rng.choice(idx, size=min(per_sense, len(idx)), replace=False).tolist())
    chosen.sort()
    return [tokens[i] for i in chosen], [positions[i] for i in chosen], [senses[i] for i in chosen]


def coarsewsd_sample(word: str, per_sense: int, seed: int):
    records = data_sets.dataset("coarsewsd", f"{word}/train")
    return sample_per_sense(*labelled_positions(records), per_sense, seed)


@st.cache_data(show_spinner="Reading the wic file…", max_entries=8)
def wic_file(name: str, path, data, stamp):
    """A wic file's summary and its targets per group: group -> (token lists, target indices, senses).
    Raises the reader's error (naming the file and line) on bad input; ``stamp`` re-reads a changed file."""
    with own_file.local_copy(name, path, data) as local:
        found = summarise_file(local, "wic")
        by_group: dict = {}
        for _, sentence in iter_labelled_file(local, "wic"):
            tokens, positions, senses = labelled_positions([sentence])
            group = sentence.tokens[positions[0]].lemma
            lists = by_group.setdefault(group, ([], [], []))
            lists[0].append(tokens[0])
            lists[1].append(positions[0])
            lists[2].append(senses[0])
    return found, by_group


def wic_sentences():
    """The Polysemy input from the user's wic file: (sentences, positions, labels, target word)."""
    st.markdown(
        "A **wic** file: `sentence<TAB>index<TAB>label[<TAB>group]` per line, the sentence split on spaces, "
        "`index` the 0-based target, `label` its sense, `group` the word (default: the target lower-cased)."
    )
    picked = own_file.pick_file("poly_wic", "wic file")
    if picked is None:
        st.stop()
    try:
        stamp = None
        if picked.path is not None:
            stat = picked.path.stat()
            stamp = (stat.st_mtime_ns, stat.st_size)
        found, by_group = wic_file(picked.name, None if picked.path is None else str(picked.path), picked.data, stamp)
    except (ValueError, OSError) as e:  # the reader names the file, the line and what was expected
        st.error(str(e))
        st.stop()
    words = list(found.groups)  # most occurrences first
    several = [w for w in words if len(found.groups[w]) > 1]
    word = st.selectbox(
        "Word (group)",
        words,
        index=words.index(several[0]) if several else 0,
        key="wic_group",
        format_func=lambda w: f"{w} ({sum(found.groups[w].values())} occurrences, {len(found.groups[w])} senses)",
    )
    c1, c2 = st.columns(2)
    per_sense = c1.slider("Sentences per sense", 3, 40, 12, key="wic_per_sense")
    seed = c2.number_input("Sample seed", 0, 10_000, 0, key="wic_seed")
    sentences, positions, labels = sample_per_sense(*by_group[word], per_sense, int(seed))
    st.caption(
        f"{picked.name}: {found.sentences:,} line(s), {len(words):,} word(s); `{word}`: "
        f"{len(sentences)} of {sum(found.groups[word].values())} sampled; senses: "
        + ", ".join(f"{sense} {count}" for sense, count in found.groups[word].items())
    )
    return sentences, positions, labels, word


def show_sense_baselines(occ, key, spec, halves: bool, hover, shown_labels) -> None:
    """What the target's contextual vector adds: the same measures on its L0 type vector (the L0
    row), on the mean of the sentence's other tokens ("bag of context": topic words alone) and on
    a random-init model of the same shape; then the supervised view."""
    st.subheader("Is it the word's own vector, or the words around it?")
    random_occ = None
    try:
        random_spec = model_choice.random_like(spec)
        random_occ = occurrences(
            model_choice.spec_key(random_spec),
            tuple(tuple(s) for s in occ.sentences),
            None,
            tuple(occ.labels),
            tuple(occ.positions),
            halves,
            model_choice.get_bundle(random_spec).embedder,
        )
    except ValueError as e:
        st.caption(f"No random-init baseline: {e}.")
    table = baselines_of(key, occ, random_occ)
    encoder = model_choice.static_encoder()
    if encoder is not None:  # word2vec: one vector per word form, so its token column is chance by construction
        static_occ = occurrences(
            "word2vec",
            tuple(tuple(s) for s in occ.sentences),
            None,
            tuple(occ.labels),
            tuple(occ.positions),
            False,
            encoder,
        )
        static = baselines_of(("word2vec",) + key[1:], static_occ, None)
        table = {**table, "word2vec": {**static["0"], "random_nn": None, "random_linear": None}}
    columns = {
        "1-NN: token": "token_nn",
        "1-NN: bag of context": "context_nn",
        "1-NN: random-init token": "random_nn",
        "linear (CV): token": "token_linear",
        "linear (CV): bag of context": "context_linear",
        "linear (CV): random-init token": "random_linear",
    }
    keys = occ.keys + (["word2vec"] if "word2vec" in table else [])
    rows = {"layer": [layer_label(k) if k in occ.keys else "word2vec (static)" for k in keys]}
    for title, name in columns.items():
        if random_occ is not None or not name.startswith("random"):
            rows[title] = [lab_ui.fmt(table[k][name]) for k in keys]
    majority = max(shown_labels.count(label) for label in set(shown_labels)) / occ.n
    rows["chance (1-NN) / majority"] = [f"{lab_ui.fmt(table[k]['chance'])} / {majority:.3f}" for k in keys]
    st.markdown(lab_ui.markdown_table([dict(zip(rows, values)) for values in zip(*rows.values())]))
    st.markdown(sense_verdict(table))
    st.caption(
        "**token**: the word's own vector in that layer (L0 = its spelling alone, the same in every sentence). "
        "**bag of context**: the mean of the *other* words' vectors of the sentence in the same layer: what "
        "topic words give without the word itself. **random-init token**: an untrained model of the same shape "
        "(what the architecture gives for free). **word2vec (static)**: vectors trained on the same corpus, one "
        "per word form: its token cannot tell the senses apart by construction (every occurrence is the same "
        "point), its bag of context is what static topic words give. **1-NN**: each occurrence takes the sense "
        "of its most similar other occurrence (the geometry the maps show). **linear (CV)**: a "
        "logistic-regression sense classifier, cross-validated (scored only on occurrences it was not fitted "
        "on). A sense measure means something where the token beats its L0 row, the random-init model and, "
        "ideally, the bag of context."
    )
    if not st.toggle(
        "Supervised view: is sense *linearly* there, even where it is not the main axis?",
        key="poly_supervised_on",
        help="Fits a cross-validated sense classifier per layer: drawn when asked, like an expander opened.",
    ):
        return
    views = supervised_views(key, occ, tuple(shown_labels))
    if any(v is None for v in views.values()):
        st.info("Each sense needs at least two occurrences for a cross-validated view.")
        return
    figure = lab_ui.shared_figure(
        "poly_supervised",
        key,
        lambda: figures.projection_grid(
            views,
            shown_labels,
            hover,
            f"“{occ.sentences[0][occ.positions[0]]}”: sense classifier scores",
            "out-of-fold",
            notes={k: f"CV accuracy {lab_ui.fmt(table[k]['token_linear'])}" for k in occ.keys},
        ),
    )
    st.plotly_chart(figure, key="poly_supervised")
    st.caption(
        "x: the score of a linear sense classifier fitted on the *other* folds (never on the point itself); "
        "y: the first principal component. With 1,024 dimensions and a few dozen points, a classifier fitted "
        "on all of them would separate any labels; out-of-fold scores separate only what generalises."
    )


source = st.radio("Sentences", ["Preset", "Type your own", "A wic file"], horizontal=True, key="source")
positions = None
notes = []
if source == "Preset":
    choice = st.selectbox("Word", [BUILTIN] + [f"{w} (CoarseWSD-20)" for w in COARSEWSD_WORDS], key="preset")
    if choice == BUILTIN:
        sentences = [s for s, _ in BANK_SENTENCES]
        labels = [label for _, label in BANK_SENTENCES]
        target = "bank"
    else:
        word = choice.split()[0]
        c1, c2 = st.columns(2)
        per_sense = c1.slider("Sentences per sense", 3, 40, 12, key="per_sense")
        seed = c2.number_input("Sample seed", 0, 10_000, 0, key="sample_seed")
        try:
            sentences, positions, labels = coarsewsd_sample(word, per_sense, int(seed))
        except data_sets.DataUnavailable as e:
            st.error(f"CoarseWSD-20 is not available: {e}")
            st.info("The built-in *bank* sentences and typed sentences work without it.")
            st.stop()
        target = word
        st.caption(f"CoarseWSD-20 `{word}` train split (lower-cased Wikipedia sentences), {len(sentences)} sampled.")
elif source == "A wic file":
    sentences, positions, labels, target = wic_sentences()
else:
    st.markdown(
        "One sentence per line; add `| sense` to label a line. Mark the word as `[bank]` where it is "
        "ambiguous which token you mean (the mark wins over the target word)."
    )
    text = st.text_area("Sentences", DEFAULT_TYPED, height=220, key="typed")
    target = st.text_input("Target word", "bank", key="target").strip()
    text, note = lab_ui.limit_text(text)
    if note:
        notes.append(note)
    lines = parse_lines(text)
    if len(lines) > lab_ui.MAX_SENTENCES:
        notes.append(f"{len(lines)} sentences given; only the first {lab_ui.MAX_SENTENCES} are used.")
        lines = lines[: lab_ui.MAX_SENTENCES]
    if not lines:
        st.warning("Type at least two sentences, one per line.")
        st.stop()
    if not target and "[" not in text:
        st.warning("Give a target word, or mark it in each sentence like `[bank]`.")
        st.stop()
    sentences = [s for s, _ in lines]
    labels = [label for _, label in lines]
    if any(label is not None for label in labels) and not all(label is not None for label in labels):
        notes.append("Some lines have no `| sense` label; they are shown, and counted, as one more group “unlabelled”.")
        labels = [label if label is not None else "unlabelled" for label in labels]

for note in notes:
    st.info(note)
method = lab_ui.projection_choice("poly_method")
halves = lab_ui.halves_toggle("poly_halves")

spec = model_choice.current_spec()
bundle = model_choice.get_bundle(spec)
key = (  # what the occurrences, and every number computed from them, depend on
    model_choice.spec_key(spec),
    tuple(s if isinstance(s, str) else tuple(s) for s in sentences),
    target or None,
    tuple(labels),
    None if positions is None else tuple(positions),
    halves,
)
try:
    occ = occurrences(*key, bundle.embedder)
except ValueError as e:
    st.error(f"{e}. Check the spelling of the target word, or mark it like `[bank]`.")
    st.stop()

if occ.missing:
    shown = ", ".join(str(i + 1) for i in occ.missing[:20]) + (" …" if len(occ.missing) > 20 else "")
    st.warning(f"{len(occ.missing)} sentence(s) do not contain “{target}” and are left out (line {shown}).")
if occ.n < 2:
    st.warning("The word occurs in only one sentence: similarities need at least two occurrences.")
    st.stop()

with lab_ui.friendly_errors("The polysemy view"):
    labelled = occ.labelled
    shown_labels = [label if label is not None else "unlabelled" for label in occ.labels]
    sep = occ.separation(linear=False)  # the classifiers are in the baselines table below
    st.subheader(
        f"“{target or 'marked word'}”: {occ.n} occurrences" + (f", {len(set(shown_labels))} senses" if labelled else "")
    )
    if not labelled:
        st.info(
            "Without at least two sense labels there is nothing to separate: only self-similarity is shown. "
            "Add `| sense` after each sentence."
        )

    rows = {"layer": [layer_label(k) for k in occ.keys]}
    if labelled:
        rows["silhouette (cosine)"] = [lab_ui.fmt(sep[k]["silhouette"]) for k in occ.keys]
        rows["1-NN sense accuracy (LOO)"] = [lab_ui.fmt(sep[k]["nn_accuracy"]) for k in occ.keys]
        rows["chance"] = [lab_ui.fmt(sep[k]["nn_chance"]) for k in occ.keys]
        rows["cos within sense"] = [lab_ui.fmt(sep[k]["within_sense"]) for k in occ.keys]
        rows["cos across senses"] = [lab_ui.fmt(sep[k]["between_senses"]) for k in occ.keys]
    rows["self-similarity"] = [lab_ui.fmt(sep[k]["self_similarity"]) for k in occ.keys]
    rows["random-pair baseline"] = [lab_ui.fmt(sep[k]["anisotropy"]) for k in occ.keys]
    rows["self-sim − baseline"] = [lab_ui.fmt(sep[k]["self_similarity_adjusted"]) for k in occ.keys]
    st.markdown(lab_ui.markdown_table([dict(zip(rows, values)) for values in zip(*rows.values())]))
    st.caption(
        "Silhouette: -1..1, above 0 when occurrences are closer to their own sense than to the other. "
        "1-NN accuracy: each occurrence takes the sense of its most similar other occurrence (ties share the "
        "credit); chance is what identical vectors score. Self-similarity: mean cosine between the "
        "occurrences (Ethayarajh 2019), read against the baseline = mean cosine of random token pairs of "
        "these sentences in the same layer (anisotropy)."
    )

    try:
        points = {k: lab_ui.projection(occ.vectors[k], method) for k in occ.keys}
    except ValueError as e:
        st.warning(f"{e}. Showing PCA instead.")
        method = "pca"
        points = {k: lab_ui.projection(occ.vectors[k], "pca") for k in occ.keys}
    hover = [occ.context(i, ("<b>", "</b>"), window=8) for i in range(occ.n)]
    figure = lab_ui.shared_figure(
        "poly_scatter",
        (key, method),
        lambda: figures.projection_grid(points, shown_labels, hover, f"“{target}” per layer", method),
    )
    st.plotly_chart(figure, key="poly_scatter")

    if labelled:
        show_sense_baselines(occ, key, spec, halves, hover, shown_labels)

    def heatmaps():
        order = sorted(range(occ.n), key=lambda i: (shown_labels[i], i))
        ticks = [f"#{i + 1} {shown_labels[i]}: {occ.context(i, window=4)}" for i in order]
        matrices = {k: cosine_matrix(occ.vectors[k][order]) for k in occ.keys}
        return figures.cosine_heatmaps(matrices, ticks, "cosine between occurrences (sorted by sense)")

    st.plotly_chart(lab_ui.shared_figure("poly_heatmap", key, heatmaps), key="poly_heatmap")

    st.markdown(
        """
**Why L0 collapses.** Layer 0 is ELMo's character CNN: it reads only the letters of the word, so every
occurrence of the same spelling gets **the identical vector**. In its map all points sit on one spot
(PCA puts them at the origin), its heatmap is uniformly 1, self-similarity is 1, the silhouette is 0 and
the nearest-neighbour accuracy equals chance: no sense information can be there. Inflected forms
(*banks*) get their own, different type vector. Sense can only appear in L1 and L2, which read the
sentence; Peters et al. found it strongest in the top layer.
"""
    )
    with st.expander("The sentences"):
        st.dataframe(
            {
                "#": [i + 1 for i in range(occ.n)],
                "sense": shown_labels,
                "sentence": [occ.context(i) for i in range(occ.n)],
            },
            hide_index=True,
        )
