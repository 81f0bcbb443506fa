"""A biLM together with the softmax both its directions share, and the vocabulary it scores.

A model directory carries its softmax as two extra files next to ``model.safetensors``:
``softmax.safetensors`` (``weight (V, proj)``, ``bias (V,)``) and ``vocab.txt`` (its V words,
``<S>``, ``</S>``, ``<UNK>`` first). ``probing-lab export RUN --with-softmax --corpus C`` writes them.
Released ELMo weights and random-init presets come without one; a random-init baseline gets a
random softmax over the shipped model's vocabulary, so that it scores the same words.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch

from ..elmo import ElmoBiLM, get_preset, load_checkpoint
from ..elmo.weights import CHECKPOINT_CARD, check_recorded_sha256
from ..paths import CANDIDATE_MODEL_DIR, SHIPPED_MODEL_DIR

# the softmax files of a model directory are written by training.checkpoint (export), read here
from ..training.checkpoint import SOFTMAX_VOCAB, SOFTMAX_WEIGHTS, load_lm, save_softmax  # noqa: F401 (save_softmax: its public home for the lm API)
from ..training.vocab import Vocabulary


class NoSoftmaxError(ValueError):
    """The model has no language-model softmax, so it cannot score or predict words."""


@dataclass
class LanguageModel:
    bilm: ElmoBiLM
    weight: torch.Tensor  # (V, proj)
    bias: torch.Tensor  # (V,)
    vocab: Vocabulary
    name: str

    def log_probs(self, h: torch.Tensor) -> torch.Tensor:
        """``h (..., proj)`` top-layer states -> log-probabilities over the vocabulary (full softmax)."""
        return torch.log_softmax(torch.nn.functional.linear(h, self.weight, self.bias), dim=-1)


def _load_softmax(directory: Path, proj_dim: int) -> tuple[torch.Tensor, torch.Tensor, Vocabulary]:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    if not (directory / SOFTMAX_WEIGHTS).is_file() or not (directory / SOFTMAX_VOCAB).is_file():
        raise NoSoftmaxError(
            f"{directory} has no language-model softmax ({SOFTMAX_WEIGHTS} and {SOFTMAX_VOCAB}), so it cannot "
            "score or predict words. Export a training run with `probing-lab export RUN --out DIR --with-softmax "
            "--corpus CORPUS`; released ELMo weights come without their softmax."
        )
    check_recorded_sha256(directory / SOFTMAX_WEIGHTS, directory / CHECKPOINT_CARD, "softmax_sha256")
    try:
        tensors = load_file(str(directory / SOFTMAX_WEIGHTS))
        weight, bias = tensors["weight"].float(), tensors["bias"].float()
    except (SafetensorError, OSError, KeyError) as e:
        raise ValueError(
            f"{directory / SOFTMAX_WEIGHTS}: cannot be read ({e}); the file is truncated or corrupt"
        ) from None
    vocab = Vocabulary.load(directory / SOFTMAX_VOCAB)
    if weight.shape != (len(vocab), proj_dim) or bias.shape != (len(vocab),):
        raise ValueError(
            f"{directory / SOFTMAX_WEIGHTS}: shape {tuple(weight.shape)} does not fit {len(vocab)} words of "
            f"{SOFTMAX_VOCAB} and the model's projection of {proj_dim}"
        )
    return weight, bias, vocab


def _training_state(directory: Path, model: Optional[str]) -> LanguageModel:
    """A training checkpoint, snapshot or warm-start state: the biLM and softmax it holds, with the
    words of ``vocab.txt`` next to it (``export --warm-start --corpus C`` puts it there)."""
    if not (directory / SOFTMAX_VOCAB).is_file():
        raise NoSoftmaxError(
            f"{directory} holds a softmax but not its words: copy the first lines of the corpus's vocab.txt "
            f"next to it as {SOFTMAX_VOCAB}, or export with `probing-lab export RUN --with-softmax --corpus C`"
        )
    lm, info = load_lm(directory)
    vocab = Vocabulary.load(directory / SOFTMAX_VOCAB, max_size=info["vocab_size"])
    if len(vocab) != info["vocab_size"]:
        raise ValueError(f"{directory / SOFTMAX_VOCAB} has {len(vocab)} words, the softmax {info['vocab_size']}")
    weight, bias = lm.softmax.weight.detach(), lm.softmax.bias.detach()
    return LanguageModel(lm.bilm.eval(), weight, bias, vocab, f"snapshot:{model}")


def load_language_model(model: Optional[str] = None, seed: int = 0) -> LanguageModel:
    """``model`` as everywhere in the lab (a model directory, ``random:PRESET``, or the shipped
    model when None); raises :class:`NoSoftmaxError` when it has no softmax."""
    if model is not None and model.startswith("random:"):
        generator = torch.Generator().manual_seed(seed)
        bilm = ElmoBiLM(get_preset(model.split(":", 1)[1]))
        bilm.reset_parameters(generator)
        source = next((d for d in (SHIPPED_MODEL_DIR, CANDIDATE_MODEL_DIR) if (d / SOFTMAX_VOCAB).is_file()), None)
        if source is None:
            raise NoSoftmaxError(
                f"a random-init language model borrows the lab's vocabulary, and neither {SHIPPED_MODEL_DIR} nor "
                f"{CANDIDATE_MODEL_DIR} has a {SOFTMAX_VOCAB}"
            )
        vocab = Vocabulary.load(source / SOFTMAX_VOCAB)
        dim = bilm.options.projection_dim
        weight = torch.randn(len(vocab), dim, generator=generator) / math.sqrt(dim)  # as SoftmaxHead starts
        return LanguageModel(bilm.eval(), weight, torch.zeros(len(vocab)), vocab, f"{model} (seed {seed})")
    directory = Path(model) if model is not None else SHIPPED_MODEL_DIR
    if (directory / "lm.safetensors").is_file():  # a training checkpoint, snapshot or warm-start state
        return _training_state(directory, model)
    bilm = load_checkpoint(directory)
    weight, bias, vocab = _load_softmax(directory, bilm.options.projection_dim)
    name = f"shipped:{directory.name}" if model is None else f"checkpoint:{model}"
    return LanguageModel(bilm.eval(), weight, bias, vocab, name)
