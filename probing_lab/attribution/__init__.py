"""Attribution: which input words a prediction rests on (after Captum, LIT and diagNNose).

A *target* is a function of the type layer's output (L0, the token embeddings, ``(batch, T + 2,
proj)`` with ``<S>`` and ``</S>``) to one number per batch row, run through the biLM by its
intervention hook (``probing_lab.elmo.interventions``: layer 0 replaced on both sides):

- :func:`lm_target`: ``log P(good) - log P(bad)`` where one direction's LM predicts the word at
  ``position`` (e.g. "are" against "is");
- :func:`probe_target`: a trained linear probe's logit for a label at one word of one layer.

:func:`integrated_gradients` attributes the target to each position with Captum's integrated
gradients from an all-zero L0 (the sum over the embedding dimension per position), and reports
the completeness error ``|sum of attributions - (f(x) - f(baseline))|``; :func:`occlusion` is the
model-agnostic check: the target's change when each word is removed. :func:`deletion_curve`
measures faithfulness: the target's drop after deleting the ``k`` most attributed words against
``k`` random ones.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np
import torch

from ..elmo import batch_to_ids
from ..elmo.interventions import Intervention

Target = Callable[[torch.Tensor], torch.Tensor]


def type_layer(bilm, tokens: Sequence[str]) -> torch.Tensor:
    """L0 (the token embeddings) of one sentence: ``(1, n + 2, proj)`` with the boundaries."""
    with torch.no_grad():
        out = bilm(batch_to_ids([list(tokens)]))
    return out.layers[0][..., : out.layers[0].shape[-1] // 2].clone()


def _run_from(bilm, tokens: Sequence[str], embeddings: torch.Tensor):
    """The biLM on ``tokens`` with its type layer replaced by ``embeddings`` (a batch of rows)."""
    ids = batch_to_ids([list(tokens)]).expand(len(embeddings), -1, -1)
    replace = [Intervention(0, d, fn=lambda h: embeddings) for d in ("forward", "backward")]
    return bilm(ids, interventions=replace)


def lm_target(lm, tokens: Sequence[str], position: int, good: str, bad: str, direction: str = "forward") -> Target:
    """``f(L0) = log P(good) - log P(bad)`` at word ``position`` (0-based) for the forward LM (which
    reads the words before it) or the backward LM (the words after it)."""
    if direction not in ("forward", "backward"):
        raise ValueError(f"direction must be forward or backward, got {direction!r}")
    if not 0 <= position < len(tokens):
        raise ValueError(f"position {position} is not a word of the sentence (0-{len(tokens) - 1})")
    ids = [lm.vocab.id(good), lm.vocab.id(bad)]
    if ids[0] == ids[1]:
        raise ValueError(f"{good!r} and {bad!r} are one word to the LM (out of its vocabulary?)")

    def f(embeddings: torch.Tensor) -> torch.Tensor:
        top = _run_from(lm.bilm, tokens, embeddings).layers[-1]
        proj = top.shape[-1] // 2
        # the forward state at x[position] predicts x[position + 1]; the backward one at x[position + 2]
        h = top[:, position, :proj] if direction == "forward" else top[:, position + 2, proj:]
        logits = torch.nn.functional.linear(h, lm.weight[ids], lm.bias[ids])
        return logits[:, 0] - logits[:, 1]

    return f


def probe_target(bilm, tokens: Sequence[str], probe, layer: int, word: int, label: int) -> Target:
    """``f(L0)`` = the logit of ``label`` of a linear probe (``probing.probes.TrainedProbe`` on layer
    ``layer``'s full vectors) at word ``word`` (0-based)."""
    if not 0 <= word < len(tokens):
        raise ValueError(f"word {word} is not in the sentence (0-{len(tokens) - 1})")

    def f(embeddings: torch.Tensor) -> torch.Tensor:
        x = _run_from(bilm, tokens, embeddings).layers[layer][:, word + 1]
        return probe.module((x - probe.mean) / probe.std)[:, label]

    return f


@dataclass
class Attribution:
    tokens: list[str]
    scores: np.ndarray  # per word (boundaries dropped)
    value: float  # the target on the sentence
    completeness_error: Optional[float] = None  # integrated gradients only


def integrated_gradients(
    target: Target, embeddings: torch.Tensor, tokens: Sequence[str], steps: int = 64
) -> Attribution:
    """Captum's integrated gradients of ``target`` from an all-zero type layer to ``embeddings``."""
    from captum.attr import IntegratedGradients

    baseline = torch.zeros_like(embeddings)
    attributions, delta = IntegratedGradients(target).attribute(
        embeddings, baselines=baseline, n_steps=steps, internal_batch_size=steps, return_convergence_delta=True
    )
    per_position = attributions.sum(-1)[0].detach().numpy()
    with torch.no_grad():
        value = float(target(embeddings)[0])
    return Attribution(list(tokens), per_position[1:-1], value, float(abs(delta[0])))


def occlusion(score: Callable[[list[str], int], float], tokens: Sequence[str], position: int) -> Attribution:
    """Per word ``j``: ``score(tokens, position) - score(tokens without word j, the same word's new
    position)``; the word at ``position`` itself is not removed (its score is 0). ``score`` runs the
    model on a token list and a position (e.g. :func:`lm_score`)."""
    tokens = list(tokens)
    full = score(tokens, position)
    out = np.zeros(len(tokens))
    for j in range(len(tokens)):
        if j != position:
            out[j] = full - score(tokens[:j] + tokens[j + 1 :], position - (j < position))
    return Attribution(tokens, out, full)


def lm_score(lm, good: str, bad: str, direction: str = "forward") -> Callable[[list[str], int], float]:
    """``(tokens, position) -> log P(good) - log P(bad)`` there (for :func:`occlusion`)."""

    def score(tokens: list[str], position: int) -> float:
        target = lm_target(lm, tokens, position, good, bad, direction)
        with torch.no_grad():
            return float(target(type_layer(lm.bilm, tokens))[0])

    return score


def visible(n_words: int, position: int, direction: str) -> list[int]:
    """The words one direction's LM reads before predicting the word at ``position``."""
    return list(range(position)) if direction == "forward" else list(range(position + 1, n_words))


def deletion_curve(
    score: Callable[[list[str], int], float],
    tokens: Sequence[str],
    position: int,
    ranking: Sequence[int],
    candidates: Sequence[int],
    k_max: int = 3,
    random_draws: int = 10,
    seed: int = 0,
) -> dict:
    """The drop of ``score`` after deleting the first ``k`` words of ``ranking`` (most attributed
    first) against deleting ``k`` random words (the mean of ``random_draws`` draws), for
    ``k = 1 .. k_max``; both among ``candidates`` (the words the target reads: :func:`visible`),
    never the word at ``position``."""
    tokens = list(tokens)
    full = score(tokens, position)
    others = [j for j in candidates if j != position]
    ranking = [j for j in ranking if j in others]

    def drop(deleted: Sequence[int]) -> float:
        keep = [t for j, t in enumerate(tokens) if j not in set(deleted)]
        return full - score(keep, position - sum(j < position for j in deleted))

    rng = random.Random(seed)
    top, rand = [], []
    for k in range(1, min(k_max, len(others)) + 1):
        top.append(drop(ranking[:k]))
        rand.append(float(np.mean([drop(rng.sample(others, k)) for _ in range(random_draws)])))
    return {"top": top, "random": rand}
