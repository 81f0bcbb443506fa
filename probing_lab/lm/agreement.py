"""Targeted syntactic evaluation: subject-verb agreement minimal pairs (after Linzen et al. 2016
and Marvin & Linzen 2018), generated from the lab's own templates and word lists.

Each pair is a grammatical sentence and the same sentence with the verb that must agree with the
subject in the other number. The model prefers the grammatical one when its total log-probability
(forward, backward, or both summed) is higher. The attractor constructions put a noun of the other
number between subject and verb.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

from ..fileio import atomic_path
from ..paths import AGREEMENT_PAIRS_FILE
from .language_model import LanguageModel
from .score import score_sentences

# (singular, plural) subjects; people, so that every verb phrase fits every noun
NOUNS = [
    ("author", "authors"), ("pilot", "pilots"), ("surgeon", "surgeons"), ("farmer", "farmers"),
    ("manager", "managers"), ("customer", "customers"), ("officer", "officers"), ("teacher", "teachers"),
    ("senator", "senators"), ("dancer", "dancers"), ("lawyer", "lawyers"), ("doctor", "doctors"),
    ("student", "students"), ("painter", "painters"), ("guard", "guards"), ("minister", "ministers"),
    ("driver", "drivers"), ("soldier", "soldiers"), ("child", "children"), ("woman", "women"),
]  # fmt: skip
# (singular, plural, what follows): -s verbs, is/are, has/have, was/were
VERBS = [
    ("laughs", "laugh", ""), ("smiles", "smile", ""), ("swims", "swim", ""), ("sleeps", "sleep", ""),
    ("waits", "wait", ""), ("speaks", "speak", "slowly"), ("is", "are", "tired"), ("is", "are", "here"),
    ("has", "have", "left"), ("has", "have", "arrived"), ("was", "were", "late"), ("was", "were", "happy"),
]  # fmt: skip
# transitive verbs of the relative clauses (singular, plural)
RELATIVE_VERBS = [("likes", "like"), ("hates", "hate"), ("admires", "admire"), ("knows", "know"), ("meets", "meet")]
PREPOSITIONS = ["near", "behind", "beside", "with", "next to"]
ADVERBS = ["probably", "certainly", "usually", "clearly", "never"]

CONSTRUCTIONS = ("simple", "prepositional_phrase", "subject_relative", "object_relative", "adverb")
DESCRIPTIONS = {
    "simple": "The author laughs / *laugh",
    "prepositional_phrase": "The author near the guards laughs / *laugh (an attractor of the other number)",
    "subject_relative": "The author that likes the guards laughs / *laugh",
    "object_relative": "The author that the guards like laughs / *laugh",
    "adverb": "The author probably laughs / *laugh",
}
PAIRS_FILE = AGREEMENT_PAIRS_FILE


@dataclass(frozen=True)
class MinimalPair:
    construction: str
    subject_number: str  # "singular" or "plural": the number the verb must have
    verb_index: int  # position of the verb that differs
    grammatical: tuple[str, ...]
    ungrammatical: tuple[str, ...]


def _sentence(construction: str, rng: random.Random, plural: bool) -> tuple[list[str], list[str], int]:
    """One sentence of a construction in both verb numbers; returns (grammatical, ungrammatical, verb index)."""
    noun = rng.choice(NOUNS)
    other = rng.choice([n for n in NOUNS if n != noun])[0 if plural else 1]  # the attractor: the other number
    subject = noun[1 if plural else 0]
    singular, plural_form, tail = rng.choice(VERBS)
    right, wrong = (plural_form, singular) if plural else (singular, plural_form)
    prefix = ["The", subject]
    if construction == "prepositional_phrase":
        prefix += [*rng.choice(PREPOSITIONS).split(), "the", other]
    elif construction == "subject_relative":  # the relative verb agrees with the head noun
        rel = rng.choice(RELATIVE_VERBS)[1 if plural else 0]
        prefix += ["that", rel, "the", other]
    elif construction == "object_relative":  # the relative verb agrees with the attractor
        rel = rng.choice(RELATIVE_VERBS)[0 if plural else 1]
        prefix += ["that", "the", other, rel]
    elif construction == "adverb":
        prefix += [rng.choice(ADVERBS)]
    elif construction != "simple":
        raise ValueError(f"unknown construction {construction!r}; known: {', '.join(CONSTRUCTIONS)}")
    suffix = [*tail.split(), "."]
    return [*prefix, right, *suffix], [*prefix, wrong, *suffix], len(prefix)


def generate_pairs(per_construction: int = 240, seed: int = 0) -> list[MinimalPair]:
    """``per_construction`` distinct pairs of each construction, half with a singular subject;
    the same seed gives the same pairs."""
    rng = random.Random(seed)
    pairs = []
    for construction in CONSTRUCTIONS:
        seen: set[tuple[str, ...]] = set()
        for k in range(50 * per_construction):
            if len(seen) == per_construction:
                break
            plural = k % 2 == 1
            good, bad, verb = _sentence(construction, rng, plural)
            if tuple(good) in seen:
                continue
            seen.add(tuple(good))
            pairs.append(MinimalPair(construction, "plural" if plural else "singular", verb, tuple(good), tuple(bad)))
        if len(seen) < per_construction:
            raise ValueError(f"{construction}: the word lists give only {len(seen)} distinct pairs")
    return pairs


def write_pairs(pairs: Sequence[MinimalPair], path: str | Path) -> None:
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        for p in pairs:
            f.write(json.dumps({**asdict(p), "grammatical": " ".join(p.grammatical),
                                "ungrammatical": " ".join(p.ungrammatical)}) + "\n")  # fmt: skip


def read_pairs(path: str | Path = PAIRS_FILE) -> list[MinimalPair]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no minimal pairs; `probing-lab lm agreement --write-pairs {path}` makes them")
    pairs = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            pair = MinimalPair(
                d["construction"],
                d["subject_number"],
                int(d["verb_index"]),
                tuple(d["grammatical"].split()),
                tuple(d["ungrammatical"].split()),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise ValueError(f"{path}, line {n}: not a minimal pair ({type(e).__name__}: {e})") from None
        problem = pair_problem(pair)
        if problem:
            raise ValueError(f"{path}, line {n}: not a minimal pair: {problem}")
        pairs.append(pair)
    return pairs


def pair_problem(pair: MinimalPair) -> Optional[str]:
    """Why ``pair`` cannot be scored as a minimal pair (it would count as right or wrong for no
    reason), or None: an empty sentence, the same sentence twice, or a ``verb_index`` that is not
    a position where the two sentences differ."""
    good, bad, i = pair.grammatical, pair.ungrammatical, pair.verb_index
    if not good or not bad:
        return f"the {'grammatical' if not good else 'ungrammatical'} sentence is empty"
    if good == bad:
        return "the grammatical and the ungrammatical sentence are the same"
    if not 0 <= i < min(len(good), len(bad)):
        return f"verb_index {i} is outside the sentences ({len(good)} and {len(bad)} tokens; 0-based)"
    if good[i] == bad[i]:
        return f"verb_index {i} points at {good[i]!r} in both sentences, not at the verb that differs"
    return None


@dataclass
class AgreementResult:
    model: str
    # construction -> {"pairs": n, "forward": acc, "backward": acc, "both": acc}
    accuracy: dict[str, dict[str, float]]

    def table(self) -> str:
        lines = ["| construction | pairs | forward | backward | both |", "|---|---|---|---|---|"]
        for name, a in self.accuracy.items():
            lines.append(f"| {name} | {a['pairs']} | {a['forward']:.3f} | {a['backward']:.3f} | {a['both']:.3f} |")
        return "\n".join(lines) + "\n"


def evaluate_agreement(
    lm: LanguageModel,
    pairs: Optional[Sequence[MinimalPair]] = None,
    on_progress: Optional[Callable[[float], None]] = None,
    batch_size: int = 64,
    interventions: Sequence = (),
) -> AgreementResult:
    """Accuracy per construction (and ``overall``): the share of pairs whose grammatical sentence
    gets the higher total log-probability, per direction and with both directions summed
    (``interventions``: with the biLM's layers changed, see ``probing_lab.elmo.interventions``)."""
    pairs = list(pairs if pairs is not None else read_pairs())
    if not pairs:
        raise ValueError("no minimal pairs to evaluate")
    wins: dict[str, list[tuple[bool, bool, bool]]] = {}
    for start in range(0, len(pairs), batch_size):
        chunk = pairs[start : start + batch_size]
        sentences = [s for p in chunk for s in (p.grammatical, p.ungrammatical)]
        scores = score_sentences(lm, sentences, batch_size, interventions)
        for p, good, bad in zip(chunk, scores[0::2], scores[1::2]):
            f = good.forward_total > bad.forward_total
            b = good.backward_total > bad.backward_total
            both = good.forward_total + good.backward_total > bad.forward_total + bad.backward_total
            wins.setdefault(p.construction, []).append((f, b, both))
        if on_progress:
            on_progress(min(1.0, (start + len(chunk)) / len(pairs)))
    wins["overall"] = [w for name in list(wins) for w in wins[name]]
    accuracy = {
        name: {
            "pairs": len(w),
            **{d: sum(x[i] for x in w) / len(w) for i, d in enumerate(("forward", "backward", "both"))},
        }
        for name, w in wins.items()
    }
    return AgreementResult(lm.name, accuracy)
