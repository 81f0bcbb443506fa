"""Attribution measured on the agreement set: does the LM's choice of verb form rest on the subject?

For each pair of a construction (``lm.agreement``), the target is ``log P(right verb) - log P(wrong
verb)`` at the verb for one direction's LM. On the pairs the LM scores right, integrated gradients
rank the words it reads; the **subject-top rate** is the share whose top word is the subject noun
(the verb excluded: the forward LM has not read it). Faithfulness: deleting the top-``k`` attributed
words must move the target more than deleting ``k`` random words among those it reads (deletion
curves). Occlusion (each word removed) is the model-agnostic check: how often its top word is
the same as integrated gradients'.
"""

from __future__ import annotations

import time
from typing import Callable, Optional, Sequence

import numpy as np

from ..lm.agreement import MinimalPair
from . import deletion_curve, integrated_gradients, lm_score, lm_target, occlusion, type_layer, visible

SUBJECT_INDEX = 1  # "The <subject> ...": every construction of the agreement set starts so


def _means(rows: list) -> list:
    """Column means of curves of unequal length (NaN-padded); None where no curve reaches."""
    if not rows:
        return []
    counts = np.sum(~np.isnan(rows), axis=0)
    sums = np.nansum(rows, axis=0)
    return [float(s / c) if c else None for s, c in zip(sums, counts)]


def evaluate(
    lm,
    pairs: Sequence[MinimalPair],
    constructions: Sequence[str] = ("simple", "prepositional_phrase"),
    per_construction: int = 40,
    direction: str = "forward",
    k_max: int = 3,
    steps: int = 32,
    on_progress: Optional[Callable[[int, int], None]] = None,
) -> dict:
    """The attribution run's metrics (``"kind": "attribution"``): per construction the pairs
    scored right, the subject-top rate (integrated gradients and occlusion), the IG-occlusion top
    agreement, deletion curves (top-k vs random, k = 1..k_max), the completeness error and the
    seconds per sentence; at the top level the simple construction's numbers."""
    chosen = {c: [p for p in pairs if p.construction == c][:per_construction] for c in constructions}
    missing = [c for c, ps in chosen.items() if not ps]
    if missing:
        raise ValueError(f"no pairs of construction(s) {missing} in the pair set")
    total, done = sum(len(ps) for ps in chosen.values()), 0
    out: dict = {
        "kind": "attribution",
        "model": lm.name,
        "direction": direction,
        "target": "log P(right verb) - log P(wrong verb) at the verb",
        "method": f"integrated gradients on L0 from zero ({steps} steps); occlusion removes one word",
        "constructions": {},
    }
    for construction, ps in chosen.items():
        right, ig_top, occ_top, same_top, errors, tops, randoms, seconds = 0, [], [], [], [], [], [], []
        for pair in ps:
            tokens, position = list(pair.grammatical), pair.verb_index
            good, bad = tokens[position], pair.ungrammatical[position]
            start = time.perf_counter()
            target = lm_target(lm, tokens, position, good, bad, direction)
            ig = integrated_gradients(target, type_layer(lm.bilm, tokens), tokens, steps)
            seconds.append(time.perf_counter() - start)
            done += 1
            if on_progress:
                on_progress(done, total)
            if ig.value <= 0:
                continue  # the LM prefers the wrong form: nothing to explain
            right += 1
            reads = visible(len(tokens), position, direction)
            ranking = sorted(reads, key=lambda j: -ig.scores[j])
            score = lm_score(lm, good, bad, direction)
            occ = occlusion(score, tokens, position)
            occ_ranking = sorted(reads, key=lambda j: -occ.scores[j])
            ig_top.append(ranking[0] == SUBJECT_INDEX)
            occ_top.append(occ_ranking[0] == SUBJECT_INDEX)
            same_top.append(ranking[0] == occ_ranking[0])
            errors.append(ig.completeness_error / max(abs(ig.value), 1e-6))
            curve = deletion_curve(score, tokens, position, ranking, reads, k_max)
            tops.append(curve["top"] + [np.nan] * (k_max - len(curve["top"])))
            randoms.append(curve["random"] + [np.nan] * (k_max - len(curve["random"])))
        out["constructions"][construction] = {
            "pairs": len(ps),
            "scored_right": right,
            "subject_top_rate": float(np.mean(ig_top)) if ig_top else None,
            "subject_top_rate_occlusion": float(np.mean(occ_top)) if occ_top else None,
            "ig_occlusion_same_top": float(np.mean(same_top)) if same_top else None,
            "deletion_top": _means(tops),
            "deletion_random": _means(randoms),
            "completeness_error_relative_median": float(np.median(errors)) if errors else None,
            "seconds_per_sentence": float(np.mean(seconds)),
        }
    simple = out["constructions"].get("simple") or next(iter(out["constructions"].values()))
    out["subject_top_rate"] = simple["subject_top_rate"]
    out["deletion_top"] = simple["deletion_top"][0] if simple["deletion_top"] else None
    out["deletion_random"] = simple["deletion_random"][0] if simple["deletion_random"] else None
    return out


def table(metrics: dict) -> str:
    """The run as Markdown: per construction the rates, the deletion curves and the cost."""

    def f(v) -> str:
        return "" if v is None else f"{v:.3f}"

    lines = [
        "| construction | pairs right | subject top (IG) | subject top (occlusion) | same top | deletion k=1..3 top | "
        "deletion k=1..3 random | completeness error (relative, median) | s / sentence |",  # k: words the LM reads
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, c in metrics["constructions"].items():
        lines.append(
            f"| {name} | {c['scored_right']}/{c['pairs']} | {f(c['subject_top_rate'])} | "
            f"{f(c['subject_top_rate_occlusion'])} | {f(c['ig_occlusion_same_top'])} | "
            f"{' / '.join(f(v) for v in c['deletion_top'] if v is not None)} | "
            f"{' / '.join(f(v) for v in c['deletion_random'] if v is not None)} | "
            f"{f(c['completeness_error_relative_median'])} | {c['seconds_per_sentence']:.2f} |"
        )
    return "\n".join(lines) + "\n"
