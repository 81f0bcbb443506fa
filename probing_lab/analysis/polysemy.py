"""One word in many sentences -> its vector in every layer, ready for the sense-separation numbers.

The target is found per sentence either by a mark (``I sat on the [bank] .``: the token in square
brackets, which wins) or by the target word, case-insensitively and with simple inflections
(``bank`` also finds ``Banks``, ``banked``, ``banking``), first exact match first. Sentences without
it are reported back by number instead of being dropped silently.

Typed input is one sentence per line with an optional sense label after ``|``::

    I paid the cheque into the bank. | money
    We walked along the river bank. | river
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

from ..features.activations import embed_activations
from ..stats import Bootstrap, Outcomes, differs, fmt, unit_ids, verdict
from ..text import tokenize
from .geometry import loo_nn_credit, random_pair_cosine, separation

# Sixteen sentences of "bank", eight of the money sense and eight of the river: the Polysemy page's
# preset, the Tour's verdict and `probing-lab demo` measure sense separation on them.
BANK_SENTENCES = [
    ("I paid the cheque into my account at the bank.", "money"),
    ("The bank raised its interest rates again.", "money"),
    ("She works as a teller at a small savings bank.", "money"),
    ("The central bank printed more money.", "money"),
    ("He asked the bank for a loan to buy a house.", "money"),
    ("Thieves robbed the bank on Friday morning.", "money"),
    ("The bank charges a fee for every transfer.", "money"),
    ("Our bank closed its branch in the village.", "money"),
    ("We had a picnic on the grassy bank of the river.", "river"),
    ("The boat drifted towards the muddy bank.", "river"),
    ("Fishermen lined the bank of the stream.", "river"),
    ("Heavy rain made the river burst its bank.", "river"),
    ("Reeds grew thickly along the bank of the canal.", "river"),
    ("The children slid down the steep bank into the water.", "river"),
    ("A heron stood still on the far bank.", "river"),
    ("They pulled the canoe up on the bank.", "river"),
]

_MARKED = re.compile(r"^\[(\S+)\]$")


def parse_marked(tokens: Sequence[str]) -> tuple[list[str], Optional[int]]:
    """Remove one ``[word]`` mark: either a single token ``"[bank]"`` or the three tokens
    ``"[" "bank" "]"`` the tokenizer makes of it. Returns (clean tokens, index of the marked word)."""
    tokens = list(tokens)
    for i, t in enumerate(tokens):
        m = _MARKED.match(t)
        if m:
            return tokens[:i] + [m.group(1)] + tokens[i + 1 :], i
        if t == "[" and i + 2 < len(tokens) and tokens[i + 2] == "]" and tokens[i + 1] not in "[]":
            return tokens[:i] + [tokens[i + 1]] + tokens[i + 3 :], i
    return tokens, None


def inflections(word: str) -> set[str]:
    """Lower-cased forms that count as the word: -s -es -ed -d -ing, y -> ies/ied, e-drop before
    -ing, final-consonant doubling (``run`` -> ``running``)."""
    w = word.lower()
    forms = {w, w + "s", w + "es", w + "ed", w + "d", w + "ing"}
    if len(w) > 1 and w.endswith("y"):
        forms |= {w[:-1] + "ies", w[:-1] + "ied"}
    if len(w) > 1 and w.endswith("e"):
        forms.add(w[:-1] + "ing")
    if len(w) > 1 and w[-1] not in "aeiouwxy":
        forms |= {w + w[-1] + "ed", w + w[-1] + "ing"}
    return forms


def find_target(tokens: Sequence[str], target: str) -> Optional[int]:
    """Index of the target in ``tokens`` (exact form first, then an inflection), or None."""
    target = target.strip().lower()
    if not target:
        return None
    lowered = [t.lower() for t in tokens]
    if target in lowered:
        return lowered.index(target)
    forms = inflections(target)
    for i, t in enumerate(lowered):
        if t in forms:
            return i
    return None


def parse_lines(text: str) -> list[tuple[str, Optional[str]]]:
    """Typed text -> [(sentence, sense label or None)], one per non-empty line."""
    out = []
    for line in text.splitlines():
        sentence, _, label = line.partition("|")
        if sentence.strip():
            out.append((sentence.strip(), label.strip() or None))
    return out


@dataclass
class Occurrences:
    """The target's vectors: ``vectors[key]`` is ``(n, dim)`` for the n sentences that have it."""

    sentences: list  # token lists (marks removed) of the sentences kept
    positions: list  # index of the target in each kept sentence
    labels: list  # sense label per kept sentence (None where not given)
    vectors: dict  # layer key -> (n, dim)
    baselines: dict  # layer key -> mean cosine of random token pairs of these sentences
    missing: list = field(default_factory=list)  # input numbers (0-based) without the target
    source: list = field(default_factory=list)  # input number of each kept sentence
    # the "bag of context" baseline: layer key -> (n, dim) mean of the *other* tokens' vectors of each
    # sentence; what a sense measure gets from the topic words alone, without the target's own vector
    context_vectors: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.positions)

    @property
    def keys(self) -> list[str]:
        return list(self.vectors)

    @property
    def labelled(self) -> bool:
        return all(label is not None for label in self.labels) and len(set(self.labels)) >= 2

    def separation(self, context: bool = False, linear: bool = True) -> dict:
        """layer key -> :func:`probing_lab.analysis.geometry.separation` numbers of the target's
        vectors (``context``: of the bag-of-context vectors; ``linear=False``: no classifier)."""
        labels = self.labels if all(label is not None for label in self.labels) else ["?"] * self.n
        vectors = self.context_vectors if context else self.vectors
        return {k: separation(vectors[k], labels, self.baselines.get(k), linear) for k in self.keys}

    def context(self, i: int, marker: tuple[str, str] = ("[", "]"), window: Optional[int] = None) -> str:
        """Kept sentence i as text with the target marked (hover text, tables); ``window`` keeps
        that many tokens either side, with … where cut."""
        tokens = list(self.sentences[i])
        p = self.positions[i]
        tokens[p] = f"{marker[0]}{tokens[p]}{marker[1]}"
        if window is None:
            return " ".join(tokens)
        lo, hi = max(0, p - window), min(len(tokens), p + window + 1)
        return ("… " if lo else "") + " ".join(tokens[lo:hi]) + (" …" if hi < len(tokens) else "")


def locate(sentences: Sequence, target: Optional[str] = None) -> tuple[list[list[str]], list[Optional[int]]]:
    """Sentences (strings, tokenized here, or token lists) -> (clean token lists, target index or
    None each): the marked token if any, else :func:`find_target`."""
    token_lists, positions = [], []
    for s in sentences:
        tokens = tokenize(s) if isinstance(s, str) else list(s)
        tokens, marked = parse_marked(tokens)
        token_lists.append(tokens)
        positions.append(marked if marked is not None else (find_target(tokens, target) if target else None))
    return token_lists, positions


def collect(
    embedder,
    sentences: Sequence,
    target: Optional[str] = None,
    labels: Optional[Sequence] = None,
    positions: Optional[Sequence[Optional[int]]] = None,
    n_pairs: int = 2000,
    seed: int = 0,
    halves: bool = False,
) -> Occurrences:
    """Embed the sentences that contain the target and pick out its vector in every layer (with
    ``halves`` also in the forward and backward halves of L1, L2, ...).

    ``positions`` (one index or None per sentence) skips the search, e.g. for a WSD data set that
    marks its target. Raises ValueError when no sentence has the target."""
    if positions is None:
        token_lists, positions = locate(sentences, target)
    else:
        token_lists = [tokenize(s) if isinstance(s, str) else list(s) for s in sentences]
        if len(positions) != len(token_lists):
            raise ValueError(f"{len(positions)} positions for {len(token_lists)} sentences")
    labels = list(labels) if labels is not None else [None] * len(token_lists)
    if len(labels) != len(token_lists):
        raise ValueError(f"{len(labels)} labels for {len(token_lists)} sentences")
    keep = [i for i, p in enumerate(positions) if p is not None and 0 <= p < len(token_lists[i])]
    kept_set = set(keep)
    missing = [i for i in range(len(token_lists)) if i not in kept_set]
    if not keep:
        what = f"the word {target!r}" if target else "a [marked] word"
        raise ValueError(f"none of the {len(token_lists)} sentences contains {what}")
    kept = [token_lists[i] for i in keep]
    layers = embed_activations(embedder, kept)
    rows = np.array([layers.row(j, positions[i]) for j, i in enumerate(keep)], dtype=np.int64)
    by_key = layers.by_key(halves)
    vectors = {k: v[rows] for k, v in by_key.items()}
    baselines = {k: random_pair_cosine(v, n_pairs=n_pairs, seed=seed) for k, v in by_key.items()}
    others = [[layers.row(j, t) for t in range(len(kept[j])) if t != positions[i]] for j, i in enumerate(keep)]
    context = {  # a one-word sentence has no context: a zero vector (cosine 0 to everything)
        k: np.stack([v[r].mean(axis=0) if r else np.zeros(v.shape[1], v.dtype) for r in others])
        for k, v in by_key.items()
    }
    return Occurrences(
        kept, [positions[i] for i in keep], [labels[i] for i in keep], vectors, baselines, missing, keep, context
    )


def labelled_positions(records) -> tuple[list[list[str]], list[Optional[int]], list[Optional[str]]]:
    """Sense-annotated dataset sentences (``Sentence`` records) -> (token lists, index of the first
    token carrying a sense or None, that sense)."""
    token_lists, positions, senses = [], [], []
    for record in records:
        token_lists.append([t.form for t in record.tokens])
        hit = next((j for j, t in enumerate(record.tokens) if t.sense is not None), None)
        positions.append(hit)
        senses.append(None if hit is None else str(record.tokens[hit].sense))
    return token_lists, positions, senses


def sense_baselines(occ: Occurrences, random_occ: Optional[Occurrences] = None, linear: bool = True) -> dict:
    """layer key -> how well the senses separate, by 1-NN (leave one out) and by a cross-validated
    linear classifier, for the target's own vector (``token``), the mean of the sentence's other
    words (``context``) and the same target in a random-init model (``random``, when given), with
    the 1-NN chance rate. What the contextual vector adds is token against the other two.
    ``linear=False`` leaves the classifier out (its accuracies None): 1-NN alone is instant."""
    token, context = occ.separation(linear=linear), occ.separation(context=True, linear=linear)
    rand = random_occ.separation(linear=linear) if random_occ is not None else {}
    out = {}
    for k in occ.keys:
        row = {"chance": token[k]["nn_chance"]}
        for name, sep in (("token", token), ("context", context), ("random", rand)):
            row[f"{name}_nn"] = sep[k]["nn_accuracy"] if k in sep else None
            row[f"{name}_linear"] = sep[k]["linear_accuracy"] if k in sep else None
        row.update(_nn_intervals(occ, random_occ, k))
        out[k] = row
    return out


def _nn_intervals(occ: Occurrences, random_occ: Optional[Occurrences], key: str) -> dict:
    """The 1-NN accuracy's 95% interval and its paired comparisons with chance, the bag of context
    and the random-init model, by a bootstrap over the sentences (``probing_lab.stats``). The
    leave-one-out credits of one set of occurrences are not fully independent (each point's
    neighbour is another point), so on a handful of sentences these intervals are a lower bound."""
    labels = occ.labels if all(label is not None for label in occ.labels) else None
    if labels is None:
        return {}
    token, chance = loo_nn_credit(occ.vectors[key], labels)
    if token is None:
        return {}
    unit = unit_ids(tuple(s) for s in occ.sentences)
    boot = Bootstrap(int(unit.max()) + 1)
    scorers = {"token": token, "chance": chance, "context": loo_nn_credit(occ.context_vectors[key], labels)[0]}
    if random_occ is not None and key in random_occ.keys:
        scorers["random"] = loo_nn_credit(random_occ.vectors[key], labels)[0]
    found = {name: Outcomes(v, unit) for name, v in scorers.items() if v is not None}
    return {
        "token_nn_ci95": boot.interval(found["token"]),
        "vs": {name: boot.compare(found["token"], o) for name, o in found.items() if name != "token"},
    }


def sense_verdict(baselines: dict) -> str:
    """One sentence on the upper layer with the higher 1-NN sense accuracy against chance, the
    random-init model and the bag of context, each difference with its paired-bootstrap interval
    (``probing_lab.stats.verdict``): a gain is claimed only where that interval excludes 0."""
    upper = [k for k in ("1", "2") if k in baselines and baselines[k]["token_nn"] is not None]
    if not upper:
        return "No labelled senses to compare."
    top = max(upper, key=lambda k: baselines[k]["token_nn"])
    row = baselines[top]
    names = {"chance": "chance", "random": "the random-init model", "context": "the bag of context"}
    vs = row.get("vs", {})
    head = (
        f"L{top} (the higher of the upper layers): nearest-neighbour sense accuracy "
        f"{fmt(row['token_nn'], row.get('token_nn_ci95'), 2)}"
    )
    said = [verdict(f"L{top}", row["token_nn"], None, names[k], c, 2) for k, c in vs.items()]
    missed = [names[k] for k, c in vs.items() if not (differs(c) and c["diff"] > 0)]
    if not missed:
        beyond = ", ".join(names[k] for k in vs)
        return f"{head}: the word's own vector separates the senses beyond {beyond} ({'; '.join(said)})."
    return f"{head}: no gain over {' or '.join(missed)} that the data supports ({'; '.join(said)})."
