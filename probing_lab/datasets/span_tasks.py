"""Edge-probing datasets derived from the treebanks we have (Tenney et al. 2019's span tasks):
copies of the sentences with their labelled spans in ``Sentence.spans`` (:class:`LabelledSpan`),
for the ``span_label`` task. Sentences without a span are left out.

* ``ptb-constituents`` (:func:`constituents`): every phrasal node of the PTB-sample trees as a span
  labelled with its category, function tags and indices stripped (``NP-SBJ-1`` -> ``NP``); of a
  unary chain (the same span twice) the upper node's label. Negatives: per sentence, half as many
  spans of two or more tokens that are no constituent, labelled ``NONE`` (seeded per sentence).
* ``conll2000-chunks`` (:func:`chunks`): the CoNLL-2000 chunks (``B-``/``I-`` runs) labelled with
  their type (NP, VP, PP, ...). CoNLL-2000 has train and test only: ``train`` is its train part
  less the last tenth of its sentences, ``dev`` that tenth (running text: few documents cut).
* ``gum-entities`` (:func:`entities`): GUM's entity mentions (``Entity`` in MISC, the bracket
  notation of UD GUM: ``(eid-type-...`` opens a mention, ``eid)`` closes it) labelled with the
  entity type (person, place, organization, abstract, ...).
* ``gum-coref`` (:func:`coreference`): pairs of GUM mentions in a window of two sentences of one
  document (the previous sentence and the current one, embedded together), the second mention in
  the current sentence: ``same`` entity or ``different``, balanced per split by keeping as many
  (seeded) different pairs as there are same pairs.
* ``ewt-deprel-spans`` (:func:`dependency_spans`): each dependency of EWT as a span pair (head,
  dependent), one token each, labelled with the universal relation (``nsubj:pass`` -> ``nsubj``).

GUM has dev and test only: for the GUM datasets ``train`` is GUM dev less every fifth document,
``dev`` those documents, ``test`` GUM test (:func:`gum_documents`).
"""

from __future__ import annotations

import re
import zlib
from collections import defaultdict
from typing import Sequence

import numpy as np

from .records import LabelledSpan, Sentence
from .sentence_tasks import seed_of

# name -> the dataset each span dataset is made from (splits train, dev, test; see load_span_dataset)
SPAN_DATASETS = {
    "ptb-constituents": "ptb",
    "conll2000-chunks": "conll2000",
    "gum-entities": "gum",
    "gum-coref": "gum",
    "ewt-deprel-spans": "ewt",
}
NONE = "NONE"  # the label of a non-constituent span
SAME, DIFFERENT = "same", "different"


def _copy(sentence: Sentence, spans: list[LabelledSpan], tokens=None, id: str | None = None) -> Sentence:
    """A new sentence with ``spans`` over the same token objects: the span datasets read freshly parsed
    sentences and nothing writes to their tokens (copying each token took deprel_spans_ewt 1.5 s)."""
    return Sentence(list(tokens or sentence.tokens), id or sentence.id, sentence.source, sentence.label, spans)


def _seed(*parts) -> int:
    return zlib.crc32("\x1f".join(map(str, parts)).encode("utf-8"))


# --- constituents --------------------------------------------------------------------------------


def category(label: str) -> str:
    """A PTB node label without function tags and indices: ``NP-SBJ-1`` -> ``NP``, ``S=2`` -> ``S``."""
    return re.split(r"[-=]", label)[0] or label


def constituents(sentences: Sequence[Sentence], seed: int = 0) -> list[Sentence]:
    """Copies of PTB sentences (``extra``-free trees read by ``ptb.parse_mrg``, whose constituents
    are in ``Sentence.spans``) with half as many non-constituent ``NONE`` spans added."""
    out = []
    for s in sentences:
        if not s.spans:
            continue
        gold = {(e.span1[0], e.span1[1]) for e in s.spans}
        n = len(s.tokens)
        candidates = [(i, j) for i in range(n) for j in range(i + 2, n + 1) if (i, j) not in gold]
        rng = np.random.default_rng(_seed(seed, s.id))
        k = min(len(candidates), len([e for e in s.spans if e.span1[1] - e.span1[0] >= 2]) // 2)
        negatives = [candidates[i] for i in sorted(rng.choice(len(candidates), size=k, replace=False))] if k else []
        spans = [LabelledSpan(e.span1, None, category(e.label)) for e in s.spans]
        spans += [LabelledSpan(span, None, NONE) for span in negatives]
        out.append(_copy(s, sorted(spans, key=lambda e: e.span1)))
    return out


# --- chunks ----------------------------------------------------------------------------------------


def chunk_spans(tags: Sequence[str]) -> list[LabelledSpan]:
    """BIO chunk tags -> labelled spans; an ``I-X`` after another type starts a new chunk."""
    spans, start, kind = [], None, None
    for i, tag in enumerate([*tags, "O"]):
        prefix, _, name = tag.partition("-")
        if start is not None and (prefix != "I" or name != kind):
            spans.append(LabelledSpan((start, i), None, kind))
            start, kind = None, None
        if prefix == "B" or (prefix == "I" and start is None):
            start, kind = i, name
    return spans


def chunks(sentences: Sequence[Sentence]) -> list[Sentence]:
    """Copies of CoNLL-2000 sentences with their chunks as spans."""
    out = []
    for s in sentences:
        spans = chunk_spans([t.extra.get("chunk", "O") for t in s.tokens])
        if spans:
            out.append(_copy(s, spans))
    return out


# --- GUM entity mentions ------------------------------------------------------------------------


_ENTITY = re.compile(r"\((\d+)-([^-()]+)[^()]*(\))?|(\d+)\)")


def mentions(sentence: Sentence) -> list[tuple[int, int, str, str]]:
    """``(start, end, entity id, type)`` of the sentence's GUM mentions, from ``Entity=`` in MISC
    (mentions still open at the sentence's end are dropped)."""
    found, open_ = [], defaultdict(list)
    for i, t in enumerate(sentence.tokens):
        value = next((p[7:] for p in (t.extra.get("misc") or "").split("|") if p.startswith("Entity=")), "")
        for m in _ENTITY.finditer(value):
            eid, kind, closed, closing = m.groups()
            if eid is not None:
                if closed:
                    found.append((i, i + 1, eid, kind))
                else:
                    open_[eid].append((i, kind))
            elif open_.get(closing):
                start, kind = open_[closing].pop()
                found.append((start, i + 1, closing, kind))
    return sorted(found)


def outermost_bio(sentence: Sentence) -> list[str]:
    """BIO tags of the sentence's outermost GUM mentions (a mention inside another is dropped),
    typed: ``B-person``, ``I-person``, ``O``, ..."""
    tags = ["O"] * len(sentence.tokens)
    end = 0
    for start, stop, _, kind in sorted(mentions(sentence), key=lambda m: (m[0], -m[1])):
        if start >= end:
            tags[start:stop] = [f"B-{kind}"] + [f"I-{kind}"] * (stop - start - 1)
            end = stop
    return tags


def entities(sentences: Sequence[Sentence]) -> list[Sentence]:
    """Copies of GUM sentences with their mentions as spans labelled with the entity type."""
    out = []
    for s in sentences:
        spans = [LabelledSpan((a, b), None, kind) for a, b, _, kind in mentions(s)]
        if spans:
            out.append(_copy(s, spans))
    return out


def document(sentence_id: str) -> str:
    """GUM's document of a sentence id: ``GUM_academic_art-12`` -> ``GUM_academic_art``."""
    return sentence_id.rsplit("-", 1)[0]


def coreference(sentences: Sequence[Sentence], seed: int = 0) -> list[Sentence]:
    """Two-sentence windows of GUM (previous + current sentence of one document) with mention
    pairs as span pairs, ``same`` or ``different`` entity, balanced (see the module docstring)."""
    windows, pairs = [], []
    previous = None
    for s in sentences:
        prior = previous if previous is not None and document(previous.id) == document(s.id) else None
        offset = len(prior.tokens) if prior else 0
        found = [(a + offset, b + offset, eid) for a, b, eid, _ in mentions(s)]
        before = [(a, b, eid) for a, b, eid, _ in mentions(prior)] if prior else []
        candidates = []
        for j, (a2, b2, e2) in enumerate(found):
            for a1, b1, e1 in before + found[:j]:
                if (a1, b1) != (a2, b2):
                    candidates.append(((a1, b1), (a2, b2), SAME if e1 == e2 else DIFFERENT))
        if candidates:
            tokens = (prior.tokens if prior else []) + s.tokens
            windows.append((s, tokens, prior))
            pairs.append(candidates)
        previous = s
    same = sum(label == SAME for c in pairs for *_, label in c)
    different = [(w, k) for w, c in enumerate(pairs) for k, (*_, label) in enumerate(c) if label == DIFFERENT]
    rng = np.random.default_rng(seed)
    kept = {different[i] for i in rng.choice(len(different), size=min(same, len(different)), replace=False)}
    out = []
    for w, ((s, tokens, prior), candidates) in enumerate(zip(windows, pairs)):
        spans = [
            LabelledSpan(a, b, label) for k, (a, b, label) in enumerate(candidates) if label == SAME or (w, k) in kept
        ]
        if spans:
            out.append(_copy(s, spans, tokens, f"{prior.id}+{s.id}" if prior else s.id))
    return out


def gum_documents(sentences: Sequence[Sentence], part: str) -> list[Sentence]:
    """GUM dev's ``train`` part (4 of every 5 documents) or ``dev`` part (every fifth)."""
    order = {d: i for i, d in enumerate(dict.fromkeys(document(s.id) for s in sentences))}
    return [s for s in sentences if (order[document(s.id)] % 5 == 4) == (part == "dev")]


# --- dependencies ---------------------------------------------------------------------------------


def dependency_spans(sentences: Sequence[Sentence]) -> list[Sentence]:
    """Copies of UD sentences with every dependency (not the root) as a (head, dependent) pair."""
    out = []
    for s in sentences:
        spans = [
            LabelledSpan((t.head - 1, t.head), (i, i + 1), t.deprel.split(":")[0])
            for i, t in enumerate(s.tokens)
            if t.head and t.deprel
        ]
        if spans:
            out.append(_copy(s, spans))
    return out


def base_split(name: str, split: str, load) -> list[Sentence]:
    """The sentences of ``split`` of the dataset the span dataset ``name`` is made from: GUM's
    by document (:func:`gum_documents`), CoNLL-2000's dev carved from its train part; ``load(base,
    split)`` reads a base dataset (the registry's ``load_dataset``). The transfer tasks use the same."""
    base = SPAN_DATASETS[name]
    if base == "gum":
        return load("gum", "test") if split == "test" else gum_documents(load("gum", "dev"), split)
    if base == "conll2000":
        if split == "test":
            return load("conll2000", "test")
        train = load("conll2000", "train")
        cut = len(train) - len(train) // 10
        return train[:cut] if split == "train" else train[cut:]
    return load(base, split)


def load_span_dataset(name: str, split: str, load) -> list[Sentence]:
    """The span dataset ``name`` (a key of :data:`SPAN_DATASETS`), split train, dev or test."""
    sentences = base_split(name, split, load)
    if name == "gum-entities":
        return entities(sentences)
    if name == "gum-coref":
        return coreference(sentences, seed_of(split))
    if name == "conll2000-chunks":
        return chunks(sentences)
    if name == "ptb-constituents":
        return constituents(sentences, seed_of(split))
    return dependency_spans(sentences)
