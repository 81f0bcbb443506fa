"""How labelled spans become minibatches, for the span probe (:mod:`.span_probe`).

Two shapes of minibatch:

- :func:`sentence_batches` + :func:`token_batch` (the linear probe): the spans of a few whole sentences,
  as in jiant's edge probing, with the tokens they cover read once (:class:`TokenBatch`); a
  sentence's ~25 tokens serve its ~25 spans, so each token is projected once per step rather than
  once per span that contains it (constituents average 8.5 tokens).
- :func:`length_batches` + :func:`gather_spans` (an MLP or rank probe, and prediction): spans of
  similar length from anywhere, each span's token rows copied out, padded to the longest.

``spans`` below are, per span role (one, or two for span pairs), ``(B, 2)`` long tensors of rows
``[start, end)`` into the token matrix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Optional

import numpy as np
import torch

from .rows import is_row_source, standardise


class StandardisedTokens:
    """A split's token vectors, each minibatch's rows standardised as they are read (with the
    training tokens' mean and deviation): ``take(rows)`` -> float32 ``(len(rows), [n_layers,] dim)``.
    ``tokens``: an array, or rows on disk (``features.cache.LayerRows``, a memory map of the feature
    cache). No standardised copy of the whole matrix is made: a fresh buffer of a mix's 290 MB took
    2.4-3.1 s to touch in a new worker on this VM, and a step reads a few hundred rows."""

    def __init__(self, tokens, mean: torch.Tensor, std: torch.Tensor):
        on_disk = is_row_source(tokens)  # LayerRows: take() through its memory map
        self.tokens = tokens if on_disk else torch.as_tensor(np.asarray(tokens))
        self.mean, self.std = mean, std

    def take(self, rows: torch.Tensor) -> torch.Tensor:
        if isinstance(self.tokens, torch.Tensor):
            x = torch.index_select(self.tokens, 0, rows).float()
        else:
            x = torch.from_numpy(self.tokens.take(rows.numpy()))
        return standardise(x, self.mean, self.std, in_place=True)


class SpanRole(NamedTuple):
    """One span role of a :class:`TokenBatch`, as indices into its tokens: each span's first and last
    token ``(B,)``; every (span, token) pair, unpadded, span by span: its token ``rows`` and its span
    ``span_of`` ``(P,)``; ``pointers`` ``(B + 1,)``: where each span's pairs begin (with ``rows``, the
    span x token membership as a CSR matrix); ``by_token``: the same membership transposed, CSR
    pointers ``(n + 1,)`` and spans ``(P,)`` of the pairs in token order."""

    first: torch.Tensor
    last: torch.Tensor
    rows: torch.Tensor
    span_of: torch.Tensor
    pointers: torch.Tensor
    by_token: tuple


@dataclass
class TokenBatch:
    """A minibatch's tokens, each once: ``tokens`` ``(n, [n_layers,] dim)``; per span role a
    :class:`SpanRole` (``P`` = the spans' summed lengths); ``runs``: each token's block of consecutive
    rows ``(n,)`` (a span lies within one: it covers consecutive rows, all of them taken)."""

    tokens: torch.Tensor
    roles: list
    runs: torch.Tensor


def token_batch(source: StandardisedTokens, spans: list[torch.Tensor]) -> TokenBatch:
    """The rows of ``source`` that the spans cover, each once, and the spans as indices into them.
    (In numpy: its sort of a minibatch's ~2,000 rows takes a quarter of torch's.)"""
    pairs = []
    for span in spans:
        span = span.numpy()
        lengths = span[:, 1] - span[:, 0]
        span_of = np.repeat(np.arange(len(span)), lengths)
        starts = np.cumsum(lengths) - lengths  # where each span's pairs begin
        pairs.append((span_of, span[span_of, 0] + np.arange(len(span_of)) - starts[span_of], starts, lengths))
    every = np.sort(np.concatenate([rows for _, rows, _, _ in pairs]))
    rows = every[np.concatenate(([True], every[1:] != every[:-1]))]  # each once, in order
    roles = []
    for span_of, rows_global, starts, lengths in pairs:
        local = np.searchsorted(rows, rows_global)
        order = np.argsort(local, kind="stable")
        by_token = np.concatenate(([0], np.cumsum(np.bincount(local, minlength=len(rows)))))
        idx = torch.from_numpy(local)
        pointers = torch.from_numpy(np.append(starts, len(local)))
        role = (idx[starts], idx[starts + lengths - 1], idx, torch.from_numpy(span_of), pointers)
        roles.append(SpanRole(*role, (torch.from_numpy(by_token), torch.from_numpy(span_of[order]))))
    runs = torch.from_numpy(np.concatenate(([0], np.cumsum(rows[1:] != rows[:-1] + 1))))
    return TokenBatch(source.take(torch.from_numpy(rows)), roles, runs)


def sentence_batches(
    units: np.ndarray, batch_size: int, generator: Optional[torch.Generator] = None
) -> list[np.ndarray]:
    """Batches of span indices, ``batch_size`` each, that keep a sentence's spans together: ``units``
    gives each span's sentence. With ``generator`` the sentences come in a random order (and the
    spans within one too), else in order."""
    if generator is None:
        order = np.argsort(units, kind="stable")
    else:
        rank = torch.randperm(int(units.max()) + 1, generator=generator).numpy()
        shuffled = torch.randperm(len(units), generator=generator).numpy()
        order = shuffled[np.argsort(rank[units[shuffled]], kind="stable")]
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def _padded(span: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(rows, mask, lengths)``: each span's rows ``(B, L)`` (padding repeats the first), which are
    real, and its length."""
    lengths = span[:, 1] - span[:, 0]
    steps = torch.arange(int(lengths.max()))
    mask = steps[None] < lengths[:, None]
    return torch.where(mask, span[:, :1] + steps[None], span[:, :1]), mask, lengths


def gather_spans(source: StandardisedTokens, spans: list[torch.Tensor]) -> list[tuple]:
    """Per span role, ``(h, mask, lengths)``: the span's token rows ``(B, L, [n_layers,] dim)`` of
    ``source`` (padding repeats the first row), which of them are real, and each span's length.
    Read once per minibatch, for every probe trained on it."""
    out = []
    for rows, mask, lengths in map(_padded, spans):
        h = source.take(rows.reshape(-1))
        out.append((h.view(*rows.shape, *h.shape[1:]), mask, lengths))
    return out


def length_batches(
    lengths: np.ndarray, batch_size: int, generator: Optional[torch.Generator] = None
) -> list[np.ndarray]:
    """Batches of span indices of similar length (a batch is padded to its longest span, and
    constituents run from 1 to 50+ tokens); with ``generator``, ties are broken at random and the
    batches come in a random order (training), else in order of length (prediction)."""
    if generator is None:
        order = np.argsort(lengths, kind="stable")
    else:
        shuffled = torch.randperm(len(lengths), generator=generator).numpy()
        order = shuffled[np.argsort(lengths[shuffled], kind="stable")]
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    if generator is not None:
        batches = [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]
    return batches
