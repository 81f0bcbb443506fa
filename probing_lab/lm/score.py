"""Score token lists with both directions of the biLM, and list what each direction predicts.

For a sentence ``w_0 .. w_{n-1}`` the biLM reads ``<S> w_0 .. w_{n-1} </S>`` from a zero state.
``forward_logprob[i] = log P(w_i | <S> w_0 .. w_{i-1})`` and ``backward_logprob[i] = log P(w_i |
w_{i+1} .. w_{n-1} </S>)``, natural log, full softmax; ``forward_eos = log P(</S> | <S> w_0 ..)``
and ``backward_bos = log P(<S> | .. w_{n-1} </S>)``. Words outside the vocabulary are scored as
``<UNK>`` and their indices listed in ``unk``. ``interventions`` (``probing_lab.elmo.interventions``)
run the biLM with layer outputs changed: the scores then say what the change does to the LM.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Iterator, Sequence

import torch

from ..elmo import batch_to_ids
from ..elmo.chars import check_sentences
from ..training.vocab import BOS_ID, EOS_ID, UNK_ID
from .language_model import LanguageModel


@dataclass
class SentenceScore:
    tokens: list[str]
    forward_logprob: list[float]
    backward_logprob: list[float]
    forward_eos: float
    backward_bos: float
    unk: list[int]

    @property
    def forward_total(self) -> float:
        """log P(sentence) under the forward LM, its end included."""
        return math.fsum(self.forward_logprob) + self.forward_eos

    @property
    def backward_total(self) -> float:
        return math.fsum(self.backward_logprob) + self.backward_bos

    def perplexity(self, direction: str) -> float:
        """Per-prediction perplexity of one direction (``n`` words plus the boundary)."""
        total = self.forward_total if direction == "forward" else self.backward_total
        return math.exp(-total / (len(self.tokens) + 1))

    def to_json(self) -> dict:
        return {
            **asdict(self),
            "forward_perplexity": self.perplexity("forward"),
            "backward_perplexity": self.perplexity("backward"),
        }


@dataclass
class Prediction:
    """The top-k words each direction expects at position ``i`` of the sentence."""

    position: int
    token: str
    forward: list[tuple[str, float]]  # (word, probability), given the words before
    backward: list[tuple[str, float]]  # given the words after


def _target_ids(lm: LanguageModel, tokens: Sequence[str]) -> list[int]:
    return [BOS_ID, *(lm.vocab.id(t) for t in tokens), EOS_ID]


@torch.no_grad()
def _top_states(
    lm: LanguageModel, sentences: Sequence[Sequence[str]], interventions: Sequence = ()
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Per sentence: the forward and backward top-layer states ``(n + 1, proj)`` that predict:
    row ``i`` of the forward one predicts ``x[i + 1]`` from ``x[: i + 1]``, row ``i`` of the
    backward one predicts ``x[i]`` from ``x[i + 1 :]``, where ``x = <S> w_0 .. w_{n-1} </S>``."""
    check_sentences(sentences)
    top = lm.bilm(batch_to_ids(sentences), interventions=interventions).layers[-1]
    proj = top.shape[-1] // 2
    for b, tokens in enumerate(sentences):
        length = len(tokens) + 2
        yield top[b, : length - 1, :proj], top[b, 1:length, proj:]


def _target_log_probs(lm: LanguageModel, h: torch.Tensor, targets: torch.Tensor, rows: int = 512) -> list[float]:
    """log P(target) for each row of ``h``, in chunks of rows (a full ``(n, V)`` matrix of a long
    sentence would not fit)."""
    out = []
    for start in range(0, len(h), rows):
        log_probs = lm.log_probs(h[start : start + rows])
        out += log_probs.gather(1, targets[start : start + rows, None]).squeeze(1).tolist()
    return out


def score_sentences(
    lm: LanguageModel, sentences: Sequence[Sequence[str]], batch_size: int = 32, interventions: Sequence = ()
) -> list[SentenceScore]:
    """Score token lists (see the module docstring); an empty list scores only its boundary."""
    scores = []
    for start in range(0, len(sentences), batch_size):
        batch = [list(s) for s in sentences[start : start + batch_size]]
        for tokens, (forward, backward) in zip(batch, _top_states(lm, batch, interventions)):
            ids = torch.tensor(_target_ids(lm, tokens))
            fwd = _target_log_probs(lm, forward, ids[1:])  # x[1:] given what precedes
            bwd = _target_log_probs(lm, backward, ids[:-1])  # x[:-1] given what follows
            scores.append(
                SentenceScore(
                    tokens=tokens,
                    forward_logprob=fwd[:-1],
                    backward_logprob=bwd[1:],
                    forward_eos=fwd[-1],
                    backward_bos=bwd[0],
                    unk=[i for i, t in enumerate(ids[1:-1].tolist()) if t == UNK_ID],
                )
            )
    return scores


def predict(lm: LanguageModel, tokens: Sequence[str], k: int = 5) -> list[Prediction]:
    """For every position of ``tokens``: the ``k`` words each direction finds most probable there."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    ((forward, backward),) = list(_top_states(lm, [list(tokens)]))
    words = lm.vocab.words
    out = []
    for i, token in enumerate(tokens):
        best = []
        for h in (forward[i], backward[i + 1]):
            values, indices = lm.log_probs(h).exp().topk(min(k, len(words)))
            best.append([(words[j], float(v)) for v, j in zip(values.tolist(), indices.tolist())])
        out.append(Prediction(i, token, best[0], best[1]))
    return out
