"""Scores of a tagger: conlleval's span F1 for BIO tags, accuracy for the others.

conlleval (CoNLL-2000) counts a chunk as correct when its type, start and end all match the gold
chunk's; F1 is micro-averaged over chunk types. As in conlleval, an ``I-X`` that does not follow
a ``B-X``/``I-X`` starts a chunk, and ``O`` (or anything without a ``B-``/``I-`` prefix) is outside.
"""

from __future__ import annotations

from typing import Iterable, Optional, Sequence

from ..datasets.span_tasks import chunk_spans


def bio_spans(tags: Sequence[str]) -> set[tuple[int, int, str]]:
    """``(start, end, type)`` of the chunks of one sentence's BIO tags (end exclusive)."""
    return {(e.span1[0], e.span1[1], e.label) for e in chunk_spans(tags)}


def span_f1(gold: Iterable[Sequence[str]], predicted: Iterable[Sequence[str]]) -> dict:
    """conlleval's precision, recall and F1 over sentences of BIO tags."""
    correct = n_gold = n_predicted = 0
    for g, p in zip(gold, predicted):
        gs, ps = bio_spans(g), bio_spans(p)
        correct += len(gs & ps)
        n_gold += len(gs)
        n_predicted += len(ps)
    precision = correct / n_predicted if n_predicted else 0.0
    recall = correct / n_gold if n_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "gold_spans": n_gold}


def accuracy(gold: Iterable[Sequence[Optional[str]]], predicted: Iterable[Sequence[str]]) -> float:
    """Token accuracy over the labelled tokens (a gold label None is skipped)."""
    hits = total = 0
    for g, p in zip(gold, predicted):
        for a, b in zip(g, p):
            if a is not None:
                hits += a == b
                total += 1
    return hits / total if total else float("nan")
