"""Amnesic probing (Elazar et al. 2021): remove a property's directions from one layer of one LM
direction with INLP, then run the biLM with that projection inside it and measure what the language
model loses, against removing a random subspace of the same rank.

Properties (UD English-EWT): ``upos`` (every token) and ``number`` (the Number feature of nouns,
proper nouns, verbs and auxiliaries that have one: Sing / Plur). For each site (layer 0-2, forward or
backward LM) :func:`amnesic_site` returns the ``metrics.json`` of an amnesic run::

    {"kind": "amnesic", "property", "layer", "direction", "rank", "majority", "probe_before",
     "probe_after", "inlp_accuracy": [per iteration], "ppl_before", "ppl_after",
     "ppl_after_random": [one per random draw], "gold_logprob_change": {"all", "<UPOS>": ...},
     "gold_logprob_change_random", "agreement": {"before", "after", "after_random"} (number only),
     "tokens": {"train", "dev", "eval"}, "seconds"}

The perplexity is the intervened direction's own (the other direction never reads the change), per
word of the evaluation sentences (EWT test); ``gold_logprob_change`` is the mean change of the log
probability of the gold word (nats), overall and per UPOS of that word.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import torch

from ..datasets import load_dataset
from ..elmo.interventions import project_out
from ..features.cache import ElmoEncoder, extract_features
from ..lm.agreement import evaluate_agreement, read_pairs
from ..lm.score import score_sentences
from .inlp import inlp, random_basis

PROPERTIES = ("upos", "number")
NUMBER_POS = ("NOUN", "PROPN", "VERB", "AUX")


@dataclass(frozen=True)
class AmnesicConfig:
    property: str = "upos"
    train_sentences: int = 2000  # EWT train sentences for INLP's probes
    dev_sentences: int = 500  # EWT dev sentences: INLP's stopping accuracy
    eval_sentences: int = 300  # EWT test sentences the LM is scored on
    iterations: int = 20
    random_draws: int = 5
    agreement_pairs: int = 0  # number only: minimal pairs per construction (0: all)
    seed: int = 0


def token_property(sentences, prop: str) -> list[Optional[str]]:
    """Each token's label for ``prop`` (None: the token does not have it)."""
    if prop not in PROPERTIES:
        raise ValueError(f"unknown property {prop!r}; choose one of {list(PROPERTIES)}")
    out = []
    for s in sentences:
        for t in s.tokens:
            if prop == "upos":
                out.append(t.upos)
                continue
            feats = dict(f.split("=", 1) for f in t.extra.get("feats", "").split("|") if "=" in f)
            number = feats.get("Number")
            out.append(number if t.upos in NUMBER_POS and number in ("Sing", "Plur") else None)
    return out


def _labelled(features, sentences, prop, layer: int, side: int, index: dict):
    labels = token_property(sentences, prop)
    rows = np.array([i for i, label in enumerate(labels) if label is not None and label in index], dtype=np.int64)
    half = features.layers.shape[-1] // 2
    X = np.asarray(features.layers[layer][rows][:, side * half : (side + 1) * half], dtype=np.float32)
    return X, np.array([index[labels[i]] for i in rows], dtype=np.int64)


def _direction_scores(scores, direction: str) -> tuple[float, list[float]]:
    """Perplexity per word of one direction, and every word's log-probability."""
    per_word = [lp for s in scores for lp in (s.forward_logprob if direction == "forward" else s.backward_logprob)]
    return math.exp(-float(np.mean(per_word))), per_word


def _change_by_pos(before: list[float], after: list[float], pos: list[str]) -> dict:
    diff = np.asarray(after) - np.asarray(before)
    out = {"all": float(diff.mean())}
    for tag in sorted(set(pos)):
        chosen = [i for i, p in enumerate(pos) if p == tag]
        out[tag] = float(diff[chosen].mean())
    return out


def _agreement(lm, pairs, direction: str, interventions=()) -> dict:
    result = evaluate_agreement(lm, pairs, interventions=interventions)
    return {name: acc[direction] for name, acc in result.accuracy.items()}


class AmnesicData:
    """What every site of one property shares: the sentences, their activations, the labels, the
    LM's scores without intervention."""

    def __init__(self, lm, config: AmnesicConfig, data_dir=None, cache_dir=None, progress: bool = True):
        if config.property not in PROPERTIES:
            raise ValueError(f"unknown property {config.property!r}; choose one of {list(PROPERTIES)}")
        self.lm, self.config = lm, config
        take = {"train": config.train_sentences, "dev": config.dev_sentences, "test": config.eval_sentences}
        self.sentences = {
            role: [s for s in load_dataset("ewt", role, data_dir) if s.tokens][:n] for role, n in take.items()
        }
        encoder = ElmoEncoder(lm.bilm, lm.name)
        self.features = {
            role: extract_features(encoder, [s.words for s in self.sentences[role]], cache_dir, progress=progress)
            for role in ("train", "dev")
        }
        train_labels = [x for x in token_property(self.sentences["train"], config.property) if x is not None]
        if len(set(train_labels)) < 2:
            raise ValueError(f"property {config.property}: one label in the training sentences; nothing to remove")
        self.labels = sorted(set(train_labels))
        self.index = {label: i for i, label in enumerate(self.labels)}
        self.eval_words = [s.words for s in self.sentences["test"]]
        self.eval_pos = [t.upos for s in self.sentences["test"] for t in s.tokens]
        self.before = score_sentences(lm, self.eval_words)
        self.pairs = None
        if config.property == "number":
            pairs = read_pairs()
            if config.agreement_pairs:
                by: dict = {}
                for p in pairs:
                    by.setdefault(p.construction, []).append(p)
                pairs = [p for group in by.values() for p in group[: config.agreement_pairs]]
            self.pairs = pairs
            self.agreement_before = {d: _agreement(lm, pairs, d) for d in ("forward", "backward")}


def amnesic_site(data: AmnesicData, layer: int, direction: str, log: Callable[[str], None] = lambda m: None) -> dict:
    """INLP at one site, then the LM with the projection inside it (see the module docstring)."""
    t0 = time.perf_counter()
    config, lm = data.config, data.lm
    side = ("forward", "backward").index(direction)
    X, y = _labelled(data.features["train"], data.sentences["train"], config.property, layer, side, data.index)
    X_dev, y_dev = _labelled(data.features["dev"], data.sentences["dev"], config.property, layer, side, data.index)
    log(f"{config.property} at L{layer} {direction}: INLP on {len(y):,} tokens")
    removed = inlp(X, y, X_dev, y_dev, len(data.labels), config.iterations, log=log)
    ppl_before, lp_before = _direction_scores(data.before, direction)

    def with_basis(basis):  # rank 0 (the probe was at the majority already): nothing to remove
        iv = [project_out(layer, direction, torch.as_tensor(basis))] if len(basis) else []
        return iv, _direction_scores(score_sentences(lm, data.eval_words, interventions=iv), direction)

    iv, (ppl_after, lp_after) = with_basis(removed.basis)
    randoms = [
        with_basis(random_basis(X.shape[1], removed.rank, config.seed + 1 + i)) for i in range(config.random_draws)
    ]
    metrics = {
        "kind": "amnesic",
        "property": config.property,
        "layer": layer,
        "direction": direction,
        "rank": removed.rank,
        "majority": removed.majority,
        "probe_before": removed.accuracy[0],
        "probe_after": removed.accuracy[-1],
        "inlp_accuracy": removed.accuracy,
        "ppl_before": ppl_before,
        "ppl_after": ppl_after,
        "ppl_after_random": [r[1][0] for r in randoms],
        "gold_logprob_change": _change_by_pos(lp_before, lp_after, data.eval_pos),
        "gold_logprob_change_random": float(np.mean([np.mean(np.subtract(r[1][1], lp_before)) for r in randoms])),
        "labels": data.labels,
        "tokens": {"train": int(len(y)), "dev": int(len(y_dev)), "eval": len(lp_before)},
    }
    if data.pairs is not None:
        metrics["agreement"] = {
            "before": data.agreement_before[direction],
            "after": _agreement(lm, data.pairs, direction, iv),
            "after_random": _agreement(lm, data.pairs, direction, randoms[0][0]),
        }
    metrics["seconds"] = round(time.perf_counter() - t0, 1)
    log(
        f"{config.property} at L{layer} {direction}: rank {removed.rank}, probe {metrics['probe_before']:.3f} -> "
        f"{metrics['probe_after']:.3f} (majority {removed.majority:.3f}); perplexity {ppl_before:.1f} -> "
        f"{ppl_after:.1f} (random subspace: {np.mean(metrics['ppl_after_random']):.1f})"
    )
    return metrics
