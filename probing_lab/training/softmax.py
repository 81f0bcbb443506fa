"""The language model's output layer, shared by the forward and backward LMs: a full softmax
for small vocabularies and TensorFlow-style sampled softmax with log-uniform negatives drawn
without replacement (what bilm-tf trained the released ELMo with)."""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


class LogUniformSampler:
    """Zipfian candidates over ids ``0..range_max-1`` (ids sorted by decreasing frequency):
    ``P(k) = (log(k + 2) - log(k + 1)) / log(range_max + 1)``, as TF's
    ``log_uniform_candidate_sampler``. ``sample`` draws with replacement until ``n`` distinct
    ids are found and returns them with the number of draws it took, from which the
    expected count of an id is ``1 - (1 - P(k)) ** tries``."""

    def __init__(self, range_max: int):
        if range_max < 2:
            raise ValueError("the log-uniform sampler needs a vocabulary of at least 2 ids")
        self.range_max = range_max
        self.log_range = math.log(range_max + 1)

    def probability(self, ids: torch.Tensor) -> torch.Tensor:
        ids = ids.double()
        return (torch.log(ids + 2) - torch.log(ids + 1)) / self.log_range

    def expected_count(self, ids: torch.Tensor, tries: int) -> torch.Tensor:
        p = self.probability(ids)
        return -torch.expm1(tries * torch.log1p(-p))

    def sample(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, int]:
        if n >= self.range_max:
            raise ValueError(
                f"{n} negative samples from a vocabulary of {self.range_max}: a sampled softmax needs fewer "
                "negatives than the vocabulary; use the full softmax (n_negative_samples = 0) for small vocabularies"
            )
        found: list[int] = []
        seen: set[int] = set()
        tries = 0
        while len(found) < n:
            chunk = 2 * (n - len(found)) + 16
            u = torch.rand(chunk, generator=generator, dtype=torch.float64)
            draws = (torch.exp(u * self.log_range).floor().long() - 1).clamp_(0, self.range_max - 1).tolist()
            for k, value in enumerate(draws):
                if value not in seen:
                    seen.add(value)
                    found.append(value)
                    if len(found) == n:
                        tries += k + 1
                        break
            else:
                tries += chunk
        return torch.tensor(found, dtype=torch.long), tries


class SoftmaxHead(nn.Module):
    """``weight (vocab, dim)``, ``bias (vocab)``. ``loss(h, targets)`` is the mean negative log
    likelihood of ``targets (N,)`` given ``h (N, dim)``: full softmax when ``n_negative == 0``
    or in eval mode, else sampled softmax with ``n_negative`` log-uniform negatives."""

    def __init__(self, vocab_size: int, dim: int, n_negative: int = 0):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(vocab_size, dim))
        self.bias = nn.Parameter(torch.zeros(vocab_size))
        nn.init.normal_(self.weight, 0.0, 1.0 / math.sqrt(dim))
        self.n_negative = n_negative
        self.sampler: Optional[LogUniformSampler] = None
        if n_negative:
            self.sampler = LogUniformSampler(vocab_size)
            if n_negative >= vocab_size:
                self.sampler.sample(n_negative, torch.Generator())  # raises the explanatory error

    def full_loss(self, h: torch.Tensor, targets: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
        return F.cross_entropy(F.linear(h, self.weight, self.bias), targets, reduction=reduction)

    def sampled_logits(self, h: torch.Tensor, targets: torch.Tensor, sampled: torch.Tensor, tries: int) -> torch.Tensor:
        """``(N, 1 + S)`` logits, column 0 the true class, each minus log(expected count);
        sampled ids equal to a row's target are removed (-inf), as TF's remove_accidental_hits."""
        assert self.sampler is not None
        # One gather for the true and the sampled rows: the backward of each gather writes a
        # dense zero gradient the size of the whole softmax, so two would cost twice.
        rows = torch.cat([targets, sampled])
        weight, bias = self.weight[rows], self.bias[rows]
        log_expected = torch.log(self.sampler.expected_count(rows, tries)).to(h.dtype)
        n = len(targets)
        true_logit = (h * weight[:n]).sum(-1) + bias[:n] - log_expected[:n]
        sampled_logit = torch.addmm(bias[n:] - log_expected[n:], h, weight[n:].t())
        hits = targets.unsqueeze(1) == sampled.unsqueeze(0)
        sampled_logit = sampled_logit.masked_fill(hits, float("-inf"))
        return torch.cat([true_logit.unsqueeze(1), sampled_logit], dim=1)

    def loss(
        self,
        h: torch.Tensor,
        targets: torch.Tensor,
        generator: Optional[torch.Generator] = None,
        reduction: str = "mean",
    ) -> torch.Tensor:
        if not self.n_negative or not self.training:
            return self.full_loss(h, targets, reduction)
        sampled, tries = self.sampler.sample(self.n_negative, generator or torch.default_generator)
        logits = self.sampled_logits(h, targets, sampled.to(h.device), tries)
        return F.cross_entropy(
            logits, torch.zeros(len(targets), dtype=torch.long, device=h.device), reduction=reduction
        )


def log_uniform_table(range_max: int) -> np.ndarray:
    """All ``P(k)``, for tests and plots."""
    k = np.arange(range_max, dtype=np.float64)
    return (np.log(k + 2) - np.log(k + 1)) / np.log(range_max + 1)
