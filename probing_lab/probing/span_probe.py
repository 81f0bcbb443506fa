"""The edge-probing span probe (Tenney et al. 2019, "What do you learn from context?").

A span ``[start, end)`` of a sentence is represented, per layer, by its first and last token
vectors and a learned attention pool over its tokens (a softmax over ``w . h_i`` within the span);
a span pair is the two spans' representations side by side, each span role with its own
attention. A classifier (``ProbeConfig.kind``: linear, MLP or rank) reads it. With ``mix=True``
the tokens are ``(n_layers, dim)`` and a scalar mix of the layers is learned with the probe.

``fit_span_probe(X, y, X_dev, y_dev, n_classes, config)`` has the signature of ``fit_probe``, with
:class:`SpanInputs` for ``X``, so the shared runner code (control task, online-code MDL) takes it.
Training is AdamW with early stopping on dev accuracy (``heads.train_with_early_stopping``);
``optimizer = "lbfgs"`` is refused (the attention pool is not a convex problem). A linear probe (the
edge-probing default) trains as :class:`~.span_heads.StackedSpanLinear` (gradient and AdamW written
out, no autograd) on minibatches of whole sentences' spans (``SpanInputs.units``), as jiant's edge
probing does, with each token read once (:mod:`.span_batches`); an MLP or rank probe as torch modules
on minibatches of spans of similar length (little padding). Token features are standardised with
the training tokens' mean and deviation as a minibatch reads them (``span_batches.StandardisedTokens``:
from an array, or from the feature cache's memory map, with no copy of the whole token matrix).
``fit_span_probes`` trains the probes of several label sets (a task and its control task) on the
same minibatches, read once; ``fit_span_layers`` (linear probes) those of several layers of one model and
their mix too, side by side on the tokens of every layer, each as it would train alone.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .heads import ModuleHeads, minibatch_size, train_with_early_stopping
from .probes import ProbeConfig, classifier
from .rows import is_row_source
from .span_batches import StandardisedTokens, gather_spans, length_batches, sentence_batches, token_batch
from .span_heads import StackedSpanLinear


@dataclass
class SpanInputs:
    """Spans over one split's token vectors.

    ``tokens``: ``(n_tokens, dim)``, or ``(n_tokens, n_layers, dim)`` for a mix, every sentence's
    tokens in order (an array, or rows on disk: ``features.layer_rows.LayerRows``); ``span1``/``span2``:
    ``(n, 2)`` rows ``[start, end)`` into ``tokens`` (``span2`` None: single spans); ``units``: each
    example's sentence (what the linear probe's minibatches keep together; None: every example its
    own). Indexing selects spans and keeps the tokens (what online MDL needs)."""

    tokens: np.ndarray  # or LayerRows
    span1: np.ndarray
    span2: Optional[np.ndarray] = None
    units: Optional[np.ndarray] = None

    def __len__(self) -> int:
        return len(self.span1)

    def __getitem__(self, idx) -> "SpanInputs":
        pick = lambda a: None if a is None else a[idx]  # noqa: E731
        return SpanInputs(self.tokens, self.span1[idx], pick(self.span2), pick(self.units))

    @property
    def roles(self) -> list[np.ndarray]:
        """The spans of each role: ``[span1]``, or ``[span1, span2]`` for pairs."""
        return [self.span1] if self.span2 is None else [self.span1, self.span2]

    @property
    def lengths(self) -> np.ndarray:
        """Each example's length in tokens (of the longer span of a pair)."""
        lengths = self.span1[:, 1] - self.span1[:, 0]
        return lengths if self.span2 is None else np.maximum(lengths, self.span2[:, 1] - self.span2[:, 0])

    def sentence_ids(self) -> np.ndarray:
        """``units``, or each example its own unit."""
        return np.arange(len(self)) if self.units is None else np.asarray(self.units)

    @property
    def n_spans(self) -> int:
        return 1 if self.span2 is None else 2


class SpanProbe(nn.Module):
    """Span (or span pair) representation + classifier; ``forward(gathered)`` with ``gathered``
    one :func:`gather_spans` triple per span role -> logits ``(B, n_classes)``."""

    def __init__(self, dim: int, n_classes: int, config: ProbeConfig, n_spans: int = 1, n_layers: int = 1):
        super().__init__()
        self.mix_weights = nn.Parameter(torch.zeros(n_layers)) if config.mix else None
        self.gamma = nn.Parameter(torch.ones(())) if config.mix else None
        self.attention = nn.ModuleList(nn.Linear(dim, 1) for _ in range(n_spans))
        self.net = classifier(3 * dim * n_spans, n_classes, config)

    def _mixed(self, h: torch.Tensor) -> torch.Tensor:
        """``(..., n_layers, dim) -> (..., dim)`` with a mix, else ``h`` itself."""
        if self.mix_weights is None:
            return h
        w = torch.softmax(self.mix_weights, 0).view(-1, 1)
        return self.gamma * (w * h).sum(-2)

    def represent(self, h: torch.Tensor, mask: torch.Tensor, lengths: torch.Tensor, attention: nn.Linear):
        """``(B, 3 * dim)``: first token, last token, attention pool of each span. With a mix, the
        scores and the pool are taken per layer and then mixed (both are linear in the mix), so the
        mixed ``(B, L, dim)`` rows are never formed: a mix costs little more than one layer."""
        B, L = mask.shape
        scores = torch.matmul(h, attention.weight[0])  # (B, L, [n_layers])
        if self.mix_weights is not None:
            scores = self.gamma * (scores @ torch.softmax(self.mix_weights, 0))
        scores = (scores + attention.bias).masked_fill(~mask, float("-inf"))
        pooled = torch.bmm(torch.softmax(scores, -1).unsqueeze(1), h.reshape(B, L, -1)).view(B, *h.shape[2:])
        ends = torch.stack([h[:, 0], h[torch.arange(B), lengths - 1], pooled], 1)  # (B, 3, [n_layers,] dim)
        return self._mixed(ends).reshape(B, -1)

    def forward(self, gathered: list) -> torch.Tensor:
        parts = [self.represent(*g, attention) for g, attention in zip(gathered, self.attention)]
        return self.net(torch.cat(parts, -1))


def _spans(X: SpanInputs, idx=None) -> list[torch.Tensor]:
    return [torch.as_tensor(s if idx is None else s[idx], dtype=torch.long) for s in X.roles]


@dataclass
class TrainedSpanProbe:
    module: SpanProbe
    mean: torch.Tensor
    std: torch.Tensor
    n_classes: int
    epochs_run: int
    dev_accuracy: float
    history: list

    @torch.no_grad()
    def predict_proba(self, X: SpanInputs, batch_size: int = 1024) -> np.ndarray:
        self.module.eval()
        source = StandardisedTokens(X.tokens, self.mean, self.std)
        out = np.zeros((len(X), self.n_classes), dtype=np.float32)
        for idx in length_batches(X.lengths, batch_size):
            out[idx] = torch.softmax(self.module(gather_spans(source, _spans(X, idx))), -1).numpy()
        return out

    def predict(self, X: SpanInputs) -> np.ndarray:
        return self.predict_proba(X).argmax(-1)

    def accuracy(self, X: SpanInputs, y) -> float:
        return float((self.predict(X) == np.asarray(y)).mean()) if len(y) else float("nan")

    def mix_weights(self) -> Optional[list[float]]:
        if self.module.mix_weights is None:
            return None
        return torch.softmax(self.module.mix_weights.detach(), 0).tolist()


def _token_statistics(X: SpanInputs) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and deviation of the training tokens, per feature (and layer), in float64."""
    on_disk = is_row_source(X.tokens)  # LayerRows, read a chunk at a time; an array is sliced as it is
    tokens = X.tokens if on_disk else np.asarray(X.tokens)
    mean = np.zeros(tokens.shape[1:])
    square = np.zeros(tokens.shape[1:])
    rows = max(1, (8 << 20) // (8 * int(np.prod(tokens.shape[1:]))))  # 8 MiB float64 chunks, reused: a fresh
    for i in range(0, len(tokens), rows):  # 400 MB one (a mix's 65,536 rows) took seconds to touch on this VM
        j = min(i + rows, len(tokens))
        chunk = (tokens.read(i, j) if on_disk else tokens[i:j]).astype(np.float64)
        mean += chunk.sum(0)
        chunk *= chunk  # in place: no second float64 copy
        square += chunk.sum(0)
    mean /= len(tokens)
    std = np.sqrt(np.maximum(square / len(tokens) - mean * mean, 0.0))
    return torch.as_tensor(mean, dtype=torch.float32), torch.as_tensor(std, dtype=torch.float32).clamp_min(1e-4)


def _token_shape(X: SpanInputs) -> tuple:
    """The shape of ``X``'s tokens: an array, LayerRows, or a nested list."""
    return getattr(X.tokens, "shape", None) or np.shape(X.tokens)


def _one_token_roles(*inputs: SpanInputs) -> list[bool]:
    """Per span role, whether every span of ``inputs`` is one token long."""
    return [all(bool(np.all(s[:, 1] - s[:, 0] == 1)) for s in spans) for spans in zip(*(x.roles for x in inputs))]


def fit_span_probe(
    X: SpanInputs, y, X_dev: SpanInputs, y_dev, n_classes: int, config: Optional[ProbeConfig] = None
) -> TrainedSpanProbe:
    """Train on the spans ``X`` with labels ``y``; keep the epoch with the best dev accuracy."""
    return fit_span_probes(X, [y], X_dev, [y_dev], n_classes, config)[0]


def fit_span_probes(
    X: SpanInputs, ys: list, X_dev: SpanInputs, ys_dev: list, n_classes: int, config: Optional[ProbeConfig] = None
) -> list[TrainedSpanProbe]:
    """One span probe per label set (a task and its control task), trained together as
    :func:`~.probes.fit_probes` does: each minibatch's token rows are gathered once for all of
    them; each probe has its own initialisation, optimizer and early stopping and sees the same
    minibatches, so it is the probe :func:`fit_span_probe` trains alone (an MLP's dropout aside)."""
    config = config or ProbeConfig()
    shape = _token_shape(X)
    if config.mix != (len(shape) == 3):
        raise ValueError("mix=True needs tokens (n_tokens, n_layers, dim), and only then")
    return _fit(X, ys, X_dev, ys_dev, n_classes, config, [None if config.mix else -1])[0]


def fit_span_layers(
    X: SpanInputs, ys: list, X_dev: SpanInputs, ys_dev: list, n_classes: int, config: ProbeConfig, keys: list[str]
) -> dict[str, list[TrainedSpanProbe]]:
    """The linear span probes of several layer entries of one model (``keys``: a layer's index, or
    "mix"), one per label set each, trained side by side on tokens of every layer ``(n, n_layers,
    dim)`` (``LayerRows`` "mix"): each probe is the one :func:`fit_span_probes` trains on its layer
    alone (``config`` with ``mix`` set for "mix"), and every step's reading of the minibatch and its
    few dozen small operations are shared. Returns per key its probes, in the order of ``ys``."""
    shape = _token_shape(X)
    if len(shape) != 3:
        raise ValueError("fit_span_layers needs tokens of every layer (n_tokens, n_layers, dim)")
    if config.kind != "linear":
        raise ValueError(f"only linear span probes train side by side across layers (got kind {config.kind!r})")
    bad = [k for k in keys if k != "mix" and not (str(k).isdigit() and int(k) < shape[1])]
    if bad or not keys:
        raise ValueError(f"layer entries {bad or keys} are not layers of these tokens (0..{shape[1] - 1}) or 'mix'")
    reads = [None if k == "mix" else int(k) for k in keys]
    probes = _fit(X, ys, X_dev, ys_dev, n_classes, config, reads)
    return dict(zip(keys, probes))


def _fit(X: SpanInputs, ys: list, X_dev: SpanInputs, ys_dev: list, n_classes: int, config, reads: list) -> list:
    """Per entry of ``reads`` (a layer of the tokens ``(n, n_layers, dim)``, None: their learned mix, -1:
    the tokens as they are, one layer) the probes of the label sets ``ys``, trained side by side."""
    if len(X) == 0:
        raise ValueError("no training spans for the probe")
    if config.optimizer != "adamw":
        raise ValueError(f"the span probe trains with adamw (got optimizer {config.optimizer!r})")
    shape = _token_shape(X)
    Y = torch.stack([torch.as_tensor(np.asarray(y), dtype=torch.long) for y in ys], 1)  # (N, label sets)
    Yd = np.stack([np.asarray(y) for y in ys_dev], 1) if len(X_dev) else np.zeros((0, len(ys)), dtype=np.int64)
    Y, Yd = Y.repeat(1, len(reads)), np.tile(Yd, len(reads))  # (N, heads): entry by entry, a head per label set
    g = torch.Generator().manual_seed(config.seed)
    mean, std = _token_statistics(X)
    modules, trained = [], []
    for layer in reads:
        layer_config = replace(config, mix=layer is None)
        for _ in ys:
            torch.manual_seed(config.seed)  # every probe starts where it would alone
            modules.append(SpanProbe(shape[-1], n_classes, layer_config, X.n_spans, shape[1] if layer is None else 1))
            stats = (mean, std) if layer is None or layer < 0 else (mean[layer], std[layer])
            trained.append(TrainedSpanProbe(modules[-1], *stats, n_classes, 0, -1.0, []))
    stacked = config.kind == "linear"  # written out, no autograd; an MLP or rank probe as modules
    batch_size = minibatch_size(config, len(X))
    if stacked:
        layers = None if reads == [-1] else [layer for layer in reads for _ in ys]
        heads = StackedSpanLinear(modules, config, _one_token_roles(X, X_dev), len(X), layers)
    else:
        optimizer = lambda m: torch.optim.AdamW(  # noqa: E731
            m.parameters(), lr=config.lr, weight_decay=config.weight_decay, foreach=True
        )
        heads = ModuleHeads([(module, optimizer(module)) for module in modules])
    # a linear probe reads whole sentences' spans with their tokens once (TokenBatch); modules read
    # spans of similar length, each span's rows copied out
    if stacked:
        batches = lambda X, size, g=None: sentence_batches(X.sentence_ids(), size, g)  # noqa: E731
        read = token_batch
    else:
        batches = lambda X, size, g=None: length_batches(X.lengths, size, g)  # noqa: E731
        read = gather_spans
    source = StandardisedTokens(X.tokens, mean, std)
    dev_source = StandardisedTokens(X_dev.tokens, mean, std) if len(X_dev) else None
    dev_batches = batches(X_dev, 1024) if len(X_dev) else []

    def run_epoch(active: list[int]) -> None:
        for idx in batches(X, batch_size, g):
            batch = read(source, _spans(X, idx))
            if stacked:
                heads.step(batch, Y[idx], active)
                continue
            loss = sum(F.cross_entropy(heads.pairs[h][0](batch), Y[idx, h]) for h in active)
            for h in active:
                heads.pairs[h][1].zero_grad()
            loss.backward()  # each head's gradient is that of its own loss
            for h in active:
                heads.pairs[h][1].step()

    def dev_accuracies(active: list[int]) -> list[float]:
        if dev_source is None:
            return [0.0] * len(active)
        right = np.zeros(len(active))
        for idx in dev_batches:
            batch = read(dev_source, _spans(X_dev, idx))
            if stacked:
                right += (heads.logits(batch)[:, active].argmax(-1).numpy() == Yd[idx][:, active]).sum(0)
                continue
            for k, h in enumerate(active):
                right[k] += (heads.pairs[h][0](batch).argmax(-1).numpy() == Yd[idx, h]).sum()
        return (right / len(Yd)).tolist()

    results = train_with_early_stopping(heads, run_epoch, dev_accuracies, config)
    for h, (probe, (best, epochs_run, history)) in enumerate(zip(trained, results)):
        probe.dev_accuracy, probe.epochs_run, probe.history = best, epochs_run, history
        if stacked:
            heads.copy_head_into(h, probe.module)
    return [trained[i : i + len(ys)] for i in range(0, len(trained), len(ys))]
