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
    ``tokens``: an array, or rows on disk (``features.layer_rows.LayerRows``, a memory map of the feature
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
    """One span role of a :class:`TokenBatch`: each span's first and last token ``(B,)``, as rows of
    the batch's tokens (a span's tokens are the rows between, all of them: it lies within one run);
    ``members``: the span x token membership as a 0/1 matrix in CSR form, pointers ``(B + 1,)`` and
    token rows ``(P,)`` (``P`` = the spans' summed lengths), then its transpose's, pointers ``(n + 1,)``
    and spans ``(P,)`` (None when every span is one token long: nothing to pool)."""

    first: torch.Tensor
    last: torch.Tensor
    members: Optional[tuple] = None

    @property
    def one_token(self) -> bool:
        """Whether every span is one token long."""
        return self.members is None

    def pairs(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Every (span, token) pair, span by span: its token's row and its span, ``(P,)`` each (``P`` =
        the spans' summed lengths): the rows of ``members``, each with the span its pointers give it."""
        spans = torch.arange(len(self.first))
        if self.members is None:  # one token each
            return self.first, spans
        pointers, rows = self.members[:2]
        return rows, torch.repeat_interleave(spans, pointers.diff())


@dataclass
class TokenBatch:
    """A minibatch's tokens, each once, in order: ``tokens`` ``(n, [n_layers,] dim)``; per span role a
    :class:`SpanRole`; ``runs``: each token's run of consecutive rows ``(n,)`` (a span lies within one:
    its tokens are consecutive rows, all of them taken)."""

    tokens: torch.Tensor
    roles: list
    runs: torch.Tensor


def token_batch(source: StandardisedTokens, spans: list[torch.Tensor]) -> TokenBatch:
    """The rows of ``source`` that the spans cover, each once and in order, and the spans as indices
    into them. The covered rows are the union of the spans' intervals, found from the spans alone (sorted
    by start, a run of rows begins where a span starts beyond every earlier span's end): no work per
    (span, token) pair."""
    bounds = [span.numpy() for span in spans]
    every = np.concatenate(bounds)
    order = np.argsort(every[:, 0], kind="stable")
    start, reach = every[order, 0], np.maximum.accumulate(every[order, 1])
    begins = np.flatnonzero(np.concatenate(([True], start[1:] > reach[:-1])))  # a span that starts a run
    run_start = start[begins]
    run_length = reach[np.append(begins[1:], len(start)) - 1] - run_start
    offset = np.cumsum(run_length) - run_length  # where each run's rows begin in the batch
    runs = np.repeat(np.arange(len(begins)), run_length)
    rows = np.arange(len(runs)) + np.repeat(run_start - offset, run_length)
    first = np.empty(len(every), dtype=np.int64)  # each span's first row in the batch: its run's offset + its place
    first[order] = start + np.repeat(offset - run_start, np.diff(np.append(begins, len(start))))
    last = first + (every[:, 1] - every[:, 0]) - 1
    at, roles = np.cumsum([0] + [len(b) for b in bounds]), []
    for i in range(len(bounds)):
        ends = first[at[i] : at[i + 1]], last[at[i] : at[i + 1]]
        members = None if np.array_equal(*ends) else _membership(*ends, len(rows))
        roles.append(SpanRole(*map(torch.from_numpy, ends), members))
    return TokenBatch(source.take(torch.from_numpy(rows)), roles, torch.from_numpy(runs))


def _membership(first: np.ndarray, last: np.ndarray, n: int) -> tuple:
    """``SpanRole.members`` of spans ``first..last`` over ``n`` rows."""
    lengths = last - first + 1
    pointers = np.concatenate(([0], np.cumsum(lengths)))
    rows = np.arange(pointers[-1]) + np.repeat(first - pointers[:-1], lengths)
    span_of = np.repeat(np.arange(len(first)), lengths)
    order = np.argsort(rows.astype(np.uint16) if n <= 1 << 16 else rows, kind="stable")  # uint16: a radix sort
    by_token = np.concatenate(([0], np.cumsum(np.bincount(rows, minlength=n))))
    return tuple(torch.from_numpy(a) for a in (pointers, rows, by_token, span_of[order]))


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
