"""Activation patching on agreement minimal pairs: where does the biLM decide the verb's number?

For a pair of sentences that differ in one word, the *clean* one and the *corrupt* one, the
corrupt sentence is run again with one layer's output at one position copied from the clean run
(``probing_lab.elmo.interventions.copy_from``), and the change of a logit difference is measured:

* forward LM: the subject's number differs (``The author ... laughs`` vs ``The authors ...
  laughs``); the measure is ``logit(right verb) - logit(wrong verb)`` at the verb, the right verb
  being the clean sentence's. Only positions up to the verb can matter (the forward LM has not read
  the others).
* backward LM: the verb differs (``... laughs .`` vs ``... laugh .``); the measure is
  ``logit(clean subject) - logit(other-number subject)`` at the subject, which the backward LM
  predicts from the words after it, the verb among them.

The effect of a patch is normalised: 0 = the corrupt sentence's difference, 1 = the clean one's.
:func:`patch_construction` averages it over the pairs of a construction: a ``(layers, positions)``
heatmap, positions in sentence order with ``<S>`` first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np
import torch

from ..elmo import batch_to_ids
from ..elmo.interventions import copy_from
from ..lm.agreement import NOUNS, RELATIVE_VERBS, MinimalPair

SINGULAR_TO_PLURAL = {s: p for s, p in [*NOUNS, *RELATIVE_VERBS]}
OTHER_NUMBER = {**SINGULAR_TO_PLURAL, **{p: s for s, p in SINGULAR_TO_PLURAL.items()}}


@dataclass
class PatchResult:
    direction: str
    tokens: list  # the clean sentence with <S> and </S>: the heatmap's columns
    effect: np.ndarray  # (layers, positions): normalised change of the logit difference
    clean: float  # the logit difference of the clean sentence
    corrupt: float  # ... and of the corrupt one
    pairs: int = 1
    changed: tuple = ()  # the columns (of ``tokens``) where clean and corrupt differ

    def strongest_other(self) -> Optional[tuple[int, int, float]]:
        """``(layer, column, effect)`` of the strongest patch outside the changed words' columns
        (patching a changed word restores the difference trivially: it copies the change back)."""
        effect = self.effect.copy()
        effect[:, list(self.changed)] = np.nan
        if np.all(np.isnan(effect)):
            return None
        layer, column = np.unravel_index(np.nanargmax(effect), effect.shape)
        return int(layer), int(column), float(effect[layer, column])


def counterpart(pair: MinimalPair) -> tuple[tuple, tuple, int]:
    """``(clean, corrupt, target)`` for the forward LM: the grammatical sentence and the same with the
    subject (and a subject relative clause's verb) in the other number; the verb's index."""
    clean = list(pair.grammatical)
    corrupt = list(clean)
    corrupt[1] = OTHER_NUMBER[clean[1]]
    if pair.construction == "subject_relative":  # "The author that likes ...": the relative verb follows
        corrupt[3] = OTHER_NUMBER[clean[3]]
    return tuple(clean), tuple(corrupt), pair.verb_index


def _check_lengths(clean: Sequence[str], corrupt: Sequence[str]) -> None:
    if len(clean) != len(corrupt):
        raise ValueError(
            f"patching needs two sentences of the same length: {' '.join(clean)!r} has {len(clean)} tokens, "
            f"{' '.join(corrupt)!r} has {len(corrupt)}"
        )


def _logit_difference(lm, tokens, position: int, good: str, bad: str, direction: str, interventions=()) -> float:
    """``logit(good) - logit(bad)`` where ``direction``'s LM predicts the word at token index ``position``."""
    with torch.no_grad():
        top = lm.bilm(batch_to_ids([list(tokens)]), interventions=interventions).layers[-1][0]
    proj = top.shape[-1] // 2
    # forward: the state at <S>-based position p has read tokens < p and predicts token p (position p + 1)
    h = top[position, :proj] if direction == "forward" else top[position + 2, proj:]
    ids = [lm.vocab.id(good), lm.vocab.id(bad)]
    logits = torch.nn.functional.linear(h, lm.weight[ids], lm.bias[ids])
    return float(logits[0] - logits[1])


def _layer_outputs(lm, tokens) -> list[torch.Tensor]:
    with torch.no_grad():
        return lm.bilm(batch_to_ids([list(tokens)])).layers


def patch_pair(lm, pair: MinimalPair, direction: str) -> PatchResult:
    """The heatmap of one minimal pair (see the module docstring)."""
    if direction == "forward":
        clean, corrupt, target = counterpart(pair)
        good, bad = clean[target], pair.ungrammatical[target]
    elif direction == "backward":
        clean, corrupt, target = tuple(pair.grammatical), tuple(pair.ungrammatical), 1  # the subject
        good, bad = clean[1], OTHER_NUMBER[clean[1]]
    else:
        raise ValueError(f"direction must be forward or backward, got {direction!r}")
    return patch_tokens(lm, clean, corrupt, target, good, bad, direction)


def patch_tokens(lm, clean, corrupt, target: int, good: str, bad: str, direction: str) -> PatchResult:
    """The heatmap of any two sentences of one length: ``logit(good) - logit(bad)`` where
    ``direction``'s LM predicts token ``target``, in ``corrupt`` with one layer at one position
    copied from ``clean``; only the positions that LM has read before predicting it are patched."""
    if direction not in ("forward", "backward"):
        raise ValueError(f"direction must be forward or backward, got {direction!r}")
    clean, corrupt = tuple(clean), tuple(corrupt)
    _check_lengths(clean, corrupt)
    if not 0 <= target < len(clean):
        raise ValueError(f"target {target} is not a token of {' '.join(clean)!r} (0-{len(clean) - 1})")
    if lm.vocab.id(good) == lm.vocab.id(bad):
        raise ValueError(f"{good!r} and {bad!r} are one word to the LM (out of its vocabulary?)")
    # forward: <S> .. the word before the target; backward: the word after it .. </S>
    positions = range(target + 1) if direction == "forward" else range(target + 2, len(clean) + 2)
    side = 0 if direction == "forward" else 1
    source = _layer_outputs(lm, clean)
    base_clean = _logit_difference(lm, clean, target, good, bad, direction)
    base_corrupt = _logit_difference(lm, corrupt, target, good, bad, direction)
    span = base_clean - base_corrupt
    n_layers, T = len(source), len(clean) + 2
    effect = np.full((n_layers, T), np.nan)
    for layer, output in enumerate(source):
        half = output.shape[-1] // 2
        values = output[..., side * half : (side + 1) * half]
        for p in positions:
            iv = [copy_from(layer, direction, values, positions=[p])]
            patched = _logit_difference(lm, corrupt, target, good, bad, direction, iv)
            effect[layer, p] = (patched - base_corrupt) / span if abs(span) > 1e-6 else 0.0
    changed = tuple(i + 1 for i, (a, b) in enumerate(zip(clean, corrupt)) if a != b)  # +1: the <S> column
    return PatchResult(direction, ["<S>", *clean, "</S>"], effect, base_clean, base_corrupt, 1, changed)


def patch_construction(
    lm,
    pairs: Sequence[MinimalPair],
    construction: str,
    direction: str,
    limit: Optional[int] = None,
    on_progress: Optional[Callable[[float], None]] = None,
) -> PatchResult:
    """The mean heatmap over a construction's pairs that share its most common shape (verb index and
    length), so that columns line up; the columns are named after the first such pair."""
    chosen = [p for p in pairs if p.construction == construction]
    if not chosen:
        raise ValueError(f"no pairs of construction {construction!r}")
    shapes = [(p.verb_index, len(p.grammatical)) for p in chosen]
    common = max(set(shapes), key=shapes.count)
    chosen = [p for p, s in zip(chosen, shapes) if s == common][:limit]
    results = []
    for i, pair in enumerate(chosen):
        results.append(patch_pair(lm, pair, direction))
        if on_progress:
            on_progress((i + 1) / len(chosen))
    return PatchResult(
        direction,
        results[0].tokens,
        np.mean([r.effect for r in results], axis=0),
        float(np.mean([r.clean for r in results])),
        float(np.mean([r.corrupt for r in results])),
        len(results),
        results[0].changed,  # one shape: the same columns in every pair
    )


def save_heatmap(results: Sequence[PatchResult], title: str, path) -> None:
    """A PNG of one or more heatmaps side by side (layers x positions, effect 0..1)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(5.5 * len(results), 3.2), squeeze=False)
    for ax, r in zip(axes[0], results):
        image = ax.imshow(r.effect, cmap="viridis", vmin=0, vmax=1, aspect="auto")
        ax.set_xticks(range(len(r.tokens)), r.tokens, rotation=45, ha="right", fontsize=8)
        ax.set_yticks(range(r.effect.shape[0]), [f"L{k}" for k in range(r.effect.shape[0])])
        ax.set_title(f"{r.direction} LM ({r.pairs} pairs; blank: cannot matter)", fontsize=9)
        fig.colorbar(image, ax=ax, label="share of the clean logit difference restored")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=110)
    plt.close(fig)
