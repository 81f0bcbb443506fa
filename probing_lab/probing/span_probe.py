"""The edge-probing span probe (Tenney et al. 2019, "What do you learn from context?").

A span ``[start, end)`` of a sentence is represented, per layer, by its first and last token
vectors and a learned attention pool over its tokens (a softmax over ``w . h_i`` within the span);
a span pair is the two spans' representations side by side, each span role with its own
attention. A classifier (``ProbeConfig.kind``: linear, MLP or rank) reads it. With ``mix=True``
the tokens are ``(n_layers, dim)`` and a scalar mix of the layers is learned with the probe.

``fit_span_probe(X, y, X_dev, y_dev, n_classes, config)`` has the signature of ``fit_probe``, with
:class:`SpanInputs` for ``X``, so the shared runner code (control task, online-code MDL) takes it.
Training is AdamW on minibatches of spans of similar length (:func:`length_batches`: little padding)
with early stopping on dev accuracy
(``probes.train_with_early_stopping``); ``optimizer = "lbfgs"`` is refused (the attention pool is
not a convex problem). Token features are standardised with the training tokens' mean and
deviation, on the rows a batch gathers (the token matrix is never copied).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .probes import ModuleHeads, ProbeConfig, classifier, train_with_early_stopping


@dataclass
class SpanInputs:
    """Spans over one split's token vectors.

    ``tokens``: ``(n_tokens, dim)``, or ``(n_tokens, n_layers, dim)`` for a mix, every sentence's
    tokens in order; ``span1``/``span2``: ``(n, 2)`` rows ``[start, end)`` into ``tokens`` (``span2``
    None: single spans). Indexing selects spans and keeps the tokens (what online MDL needs)."""

    tokens: np.ndarray
    span1: np.ndarray
    span2: Optional[np.ndarray] = None

    def __len__(self) -> int:
        return len(self.span1)

    def __getitem__(self, idx) -> "SpanInputs":
        return SpanInputs(self.tokens, self.span1[idx], None if self.span2 is None else self.span2[idx])

    @property
    def n_spans(self) -> int:
        return 1 if self.span2 is None else 2


class SpanProbe(nn.Module):
    """Span (or span pair) representation + classifier; ``forward(tokens, spans)`` with ``tokens``
    ``(n_tokens, [n_layers,] dim)`` already standardised rows and ``spans`` one ``(B, 2)`` long
    tensor per span role -> logits ``(B, n_classes)``."""

    def __init__(self, dim: int, n_classes: int, config: ProbeConfig, n_spans: int = 1, n_layers: int = 1):
        super().__init__()
        self.mix_weights = nn.Parameter(torch.zeros(n_layers)) if config.mix else None
        self.gamma = nn.Parameter(torch.ones(())) if config.mix else None
        self.attention = nn.ModuleList(nn.Linear(dim, 1) for _ in range(n_spans))
        self.net = classifier(3 * dim * n_spans, n_classes, config)

    def _mixed(self, h: torch.Tensor) -> torch.Tensor:
        if self.mix_weights is None:
            return h
        w = torch.softmax(self.mix_weights, 0).view(*([1] * (h.dim() - 2)), -1, 1)
        return self.gamma * (w * h).sum(-2)

    def represent(self, gather, span: torch.Tensor, attention: nn.Linear) -> torch.Tensor:
        """``(B, 3 * dim)``: first token, last token, attention pool of each span."""
        lengths = span[:, 1] - span[:, 0]
        steps = torch.arange(int(lengths.max()))
        mask = steps[None] < lengths[:, None]
        rows = torch.where(mask, span[:, :1] + steps[None], span[:, :1])  # padding repeats the first row
        h = self._mixed(gather(rows))  # (B, L, dim)
        scores = attention(h).squeeze(-1).masked_fill(~mask, float("-inf"))
        pooled = (torch.softmax(scores, -1).unsqueeze(-1) * h).sum(1)
        last = h[torch.arange(len(span)), lengths - 1]
        return torch.cat([h[:, 0], last, pooled], -1)

    def forward(self, gather, spans: list[torch.Tensor]) -> torch.Tensor:
        parts = [self.represent(gather, span, attention) for span, attention in zip(spans, self.attention)]
        return self.net(torch.cat(parts, -1))


def length_batches(X: SpanInputs, batch_size: int, generator: Optional[torch.Generator] = None) -> list[np.ndarray]:
    """Batches of span indices of similar length (a batch is padded to its longest span, and
    constituents run from 1 to 50+ tokens); with ``generator``, ties are broken at random and the
    batches come in a random order (training), else in order of length (prediction)."""
    lengths = X.span1[:, 1] - X.span1[:, 0]
    if X.span2 is not None:
        lengths = np.maximum(lengths, X.span2[:, 1] - X.span2[:, 0])
    if generator is None:
        order = np.argsort(lengths, kind="stable")
    else:
        shuffled = torch.randperm(len(X), generator=generator).numpy()
        order = shuffled[np.argsort(lengths[shuffled], kind="stable")]
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    if generator is not None:
        batches = [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]
    return batches


def _spans(X: SpanInputs, idx=None) -> list[torch.Tensor]:
    chosen = [X.span1] if X.span2 is None else [X.span1, X.span2]
    return [torch.as_tensor(s if idx is None else s[idx], dtype=torch.long) for s in chosen]


@dataclass
class TrainedSpanProbe:
    module: SpanProbe
    mean: torch.Tensor
    std: torch.Tensor
    n_classes: int
    epochs_run: int
    dev_accuracy: float
    history: list

    def gather(self, tokens: np.ndarray):
        """Rows of ``tokens``, standardised, for any index tensor."""
        source = torch.from_numpy(np.ascontiguousarray(tokens, dtype=np.float32))
        return lambda rows: (source[rows] - self.mean) / self.std

    @torch.no_grad()
    def predict_proba(self, X: SpanInputs, batch_size: int = 1024) -> np.ndarray:
        self.module.eval()
        gather = self.gather(X.tokens)
        out = np.zeros((len(X), self.n_classes), dtype=np.float32)
        for idx in length_batches(X, batch_size):
            out[idx] = torch.softmax(self.module(gather, _spans(X, idx)), -1).numpy()
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
    tokens = np.asarray(X.tokens)
    mean = np.zeros(tokens.shape[1:])
    square = np.zeros(tokens.shape[1:])
    for i in range(0, len(tokens), 65536):  # in chunks: no float64 copy of the whole matrix
        chunk = tokens[i : i + 65536].astype(np.float64)
        mean += chunk.sum(0)
        square += (chunk * chunk).sum(0)
    mean /= len(tokens)
    std = np.sqrt(np.maximum(square / len(tokens) - mean * mean, 0.0))
    return torch.as_tensor(mean, dtype=torch.float32), torch.as_tensor(std, dtype=torch.float32).clamp_min(1e-4)


def fit_span_probe(
    X: SpanInputs, y, X_dev: SpanInputs, y_dev, n_classes: int, config: Optional[ProbeConfig] = None
) -> TrainedSpanProbe:
    """Train on the spans ``X`` with labels ``y``; keep the epoch with the best dev accuracy."""
    config = config or ProbeConfig()
    if len(X) == 0:
        raise ValueError("no training spans for the probe")
    if config.optimizer != "adamw":
        raise ValueError(f"the span probe trains with adamw (got optimizer {config.optimizer!r})")
    tokens = np.asarray(X.tokens)
    if config.mix != (tokens.ndim == 3):
        raise ValueError("mix=True needs tokens (n_tokens, n_layers, dim), and only then")
    y_t = torch.as_tensor(np.asarray(y), dtype=torch.long)
    yd = np.asarray(y_dev)
    torch.manual_seed(config.seed)
    g = torch.Generator().manual_seed(config.seed)
    module = SpanProbe(tokens.shape[-1], n_classes, config, X.n_spans, tokens.shape[1] if config.mix else 1)
    mean, std = _token_statistics(X)
    trained = TrainedSpanProbe(module, mean, std, n_classes, 0, -1.0, [])
    gather = trained.gather(tokens)
    optimizer = torch.optim.AdamW(module.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    batch_size = min(config.batch_size, max(32, len(X) // 16))  # small sets still get enough updates

    def run_epoch(active) -> None:
        for idx in length_batches(X, batch_size, g):
            loss = F.cross_entropy(module(gather, _spans(X, idx)), y_t[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    def dev_accuracy(active) -> list[float]:
        return [float((trained.predict(X_dev) == yd).mean()) if len(yd) else 0.0]

    [(trained.dev_accuracy, trained.epochs_run, trained.history)] = train_with_early_stopping(
        ModuleHeads([(module, optimizer)]), run_epoch, dev_accuracy, config
    )
    return trained
