"""A small BiLSTM tagger whose input per token is a static word embedding, ELMo, or both.

``Tagger`` (Peters et al. 2018's feature-based use of ELMo, on a one-layer BiLSTM):

* the static embedding ``(n_words, static_dim)`` is learned with the task (random init, or
  initialised from static vectors such as word2vec);
* ELMo comes in as ``(B, T, n_layers, dim)`` frozen layer activations, combined by a learned scalar
  mix ``gamma * sum_j softmax(s)_j h_j`` (with one layer: ``gamma * h``) and concatenated with the
  static embedding (the paper's ELMo_task);
* with ``mix_at_output`` a second scalar mix of ELMo is concatenated with the BiLSTM's output as
  well (the paper's section 5.2).

``train_tagger`` trains with Adam (the embedding with its lazy, sparse variant) on minibatches of
sentences of similar length, evaluates on dev every epoch (small training sets: every
``eval_every_updates`` updates at least), stops after ``patience`` evaluations without a better
dev score, and keeps the best state. A NaN loss stops the training with a message in the result, the
best state so far kept.
"""

from __future__ import annotations

import copy
import math
from dataclasses import asdict, dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np
import torch
from torch import nn

from ..settings import config_from_dict
from .scoring import accuracy, span_f1

PAD, UNK = 0, 1


@dataclass(frozen=True)
class TaggerConfig:
    """The ``[tagger]`` table of a transfer experiment."""

    hidden: int = 128  # BiLSTM units per direction
    static_dim: int = 100  # the static word embedding's width (that of the static vectors, when given)
    dropout: float = 0.3  # on the BiLSTM's input and output
    lr: float = 1e-3  # Adam
    batch_size: int = 32  # sentences
    max_epochs: int = 30
    patience: int = 4  # dev evaluations without a better score before stopping
    min_updates: int = 400  # a small training set gets more epochs, up to this many updates in all
    eval_every_updates: int = 40  # a small training set is evaluated every this many updates, not every epoch
    mix_at_output: bool = False  # a second ELMo mix next to the BiLSTM's output (Peters et al. 5.2)

    POSITIVE = ("hidden", "static_dim", "lr", "batch_size", "max_epochs", "patience", "min_updates")
    POSITIVE += ("eval_every_updates",)

    @classmethod
    def from_dict(cls, data: dict, where: str = "tagger") -> "TaggerConfig":
        config = config_from_dict(cls, data, where)
        if not 0 <= config.dropout < 1:
            raise ValueError(f"{where}: dropout must be in [0, 1), got {config.dropout}")
        return config

    def to_dict(self) -> dict:
        return asdict(self)


class ScalarMix(nn.Module):
    """``gamma * sum_j softmax(s)_j h_j`` over the layer axis of ``(..., n_layers, dim)``."""

    def __init__(self, n_layers: int):
        super().__init__()
        self.weights = nn.Parameter(torch.zeros(n_layers))
        self.gamma = nn.Parameter(torch.ones(()))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.gamma * (torch.softmax(self.weights, 0)[:, None] * h).sum(-2)

    def softmax(self) -> list[float]:
        return torch.softmax(self.weights.detach(), 0).tolist()


class Tagger(nn.Module):
    """``forward(words (B, T), elmo (B, T, n_layers, dim) or None, lengths (B,))`` -> logits
    ``(B, T, n_tags)``; ``elmo_layers = 0``: the static embedding alone."""

    def __init__(
        self,
        n_words: int,
        n_tags: int,
        config: TaggerConfig,
        elmo_layers: int = 0,
        elmo_dim: int = 0,
        vectors: Optional[np.ndarray] = None,
    ):
        super().__init__()
        # sparse: an update touches the rows of its batch's words only (a dense Adam step over every
        # row of the vocabulary was a quarter of the training time)
        self.embedding = nn.Embedding(n_words, config.static_dim, padding_idx=PAD, sparse=True)
        if vectors is not None:  # words without a vector start at the vectors' own scale, not N(0, 1)
            with torch.no_grad():
                found = ~np.isnan(vectors).any(1)
                known = torch.as_tensor(vectors[found], dtype=torch.float32)
                if len(known) > 1:
                    self.embedding.weight.mul_(known.std())
                self.embedding.weight[torch.as_tensor(found)] = known
                self.embedding.weight[PAD] = 0.0
        self.mix = ScalarMix(elmo_layers) if elmo_layers else None
        self.output_mix = ScalarMix(elmo_layers) if elmo_layers and config.mix_at_output else None
        self.dropout = nn.Dropout(config.dropout)
        width = config.static_dim + (elmo_dim if elmo_layers else 0)
        self.lstm = nn.LSTM(width, config.hidden, batch_first=True, bidirectional=True)
        out = 2 * config.hidden + (elmo_dim if self.output_mix is not None else 0)
        self.classifier = nn.Linear(out, n_tags)

    def forward(self, words: torch.Tensor, elmo: Optional[torch.Tensor], lengths: torch.Tensor) -> torch.Tensor:
        x = self.embedding(words)
        if self.mix is not None:
            x = torch.cat([x, self.mix(elmo)], -1)
        packed = nn.utils.rnn.pack_padded_sequence(self.dropout(x), lengths, batch_first=True, enforce_sorted=False)
        h, _ = self.lstm(packed)
        h, _ = nn.utils.rnn.pad_packed_sequence(h, batch_first=True, total_length=words.shape[1])
        if self.output_mix is not None:
            h = torch.cat([h, self.output_mix(elmo)], -1)
        return self.classifier(self.dropout(h))


@dataclass
class Vocabulary:
    """Word and tag indices, from the training sentences."""

    words: dict
    tags: list

    @classmethod
    def build(cls, sentences: Sequence[Sequence[str]], tags: Sequence[Sequence[Optional[str]]]) -> "Vocabulary":
        words = {"<pad>": PAD, "<unk>": UNK}
        for s in sentences:
            for w in s:
                words.setdefault(w, len(words))
        labels = sorted({t for ts in tags for t in ts if t is not None})
        return cls(words, labels)

    def word_ids(self, sentence: Sequence[str]) -> list[int]:
        return [self.words.get(w, UNK) for w in sentence]

    def tag_ids(self, tags: Sequence[Optional[str]]) -> list[int]:
        index = {t: i for i, t in enumerate(self.tags)}
        return [index.get(t, -100) if t is not None else -100 for t in tags]  # unseen and unlabelled: no loss


@dataclass
class TrainedTagger:
    model: Tagger
    vocabulary: Vocabulary
    dev_score: float
    epochs: int
    updates: int
    history: list = field(default_factory=list)
    stopped: Optional[str] = None  # why training stopped early (a NaN loss), else None

    def mix_weights(self) -> Optional[list[float]]:
        return self.model.mix.softmax() if self.model.mix is not None else None


# ``elmo(indices) -> (B, T, n_layers, dim)`` float32 tensor for those sentences of a set, padded with zeros
ElmoBatch = Callable[[Sequence[int]], torch.Tensor]


def _batches(lengths: Sequence[int], batch_size: int, rng: Optional[np.random.Generator]) -> list[np.ndarray]:
    """Sentence indices in batches of similar length; shuffled ties and batch order with ``rng``."""
    order = np.arange(len(lengths)) if rng is None else rng.permutation(len(lengths))
    order = order[np.argsort(np.asarray(lengths)[order], kind="stable")]
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    if rng is not None:
        batches = [batches[i] for i in rng.permutation(len(batches))]
    return batches


def _pad(rows: list[list[int]], value: int) -> torch.Tensor:
    out = torch.full((len(rows), max(len(r) for r in rows)), value, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.as_tensor(r)
    return out


@torch.no_grad()
def predict(
    trained_model: Tagger, vocabulary: Vocabulary, words, elmo: Optional[ElmoBatch], batch_size: int = 64
) -> list[list[str]]:
    """Predicted tags of every sentence of ``words`` (its ELMo rows from ``elmo``)."""
    trained_model.eval()
    out: list = [None] * len(words)
    for idx in _batches([len(w) for w in words], batch_size, None):
        ids = _pad([vocabulary.word_ids(words[i]) for i in idx], PAD)
        lengths = torch.as_tensor([len(words[i]) for i in idx])
        logits = trained_model(ids, elmo(idx) if elmo is not None else None, lengths)
        best = logits.argmax(-1)
        for row, i in enumerate(idx):
            out[i] = [vocabulary.tags[k] for k in best[row, : len(words[i])].tolist()]
    return out


def score(metric: str, gold, predicted) -> float:
    return span_f1(gold, predicted)["f1"] if metric == "f1" else accuracy(gold, predicted)


def train_tagger(
    train,
    dev,
    config: TaggerConfig,
    metric: str,
    seed: int,
    elmo_train: Optional[ElmoBatch] = None,
    elmo_dev: Optional[ElmoBatch] = None,
    elmo_shape: tuple[int, int] = (0, 0),
    vectors: Optional[Callable[[dict], np.ndarray]] = None,
    log: Callable[[str], None] = lambda message: None,
) -> TrainedTagger:
    """Train on ``train`` (a ``data.TaggingSet``), early-stopped on ``dev``'s ``metric``.
    ``elmo_*``: the ELMo rows of each set (None: the static input alone), ``elmo_shape`` their
    ``(n_layers, dim)``; ``vectors(word index) -> (n_words, static_dim)`` static vectors (NaN rows:
    words without one) to initialise the embedding."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    vocabulary = Vocabulary.build(train.words, train.tags)
    n_layers, dim = elmo_shape if elmo_train is not None else (0, 0)
    model = Tagger(
        len(vocabulary.words),
        len(vocabulary.tags),
        config,
        n_layers,
        dim,
        vectors(vocabulary.words) if vectors else None,
    )
    dense = [p for name, p in model.named_parameters() if not name.startswith("embedding.")]
    optimizers = [torch.optim.Adam(dense, lr=config.lr), torch.optim.SparseAdam([model.embedding.weight], lr=config.lr)]
    word_rows = [vocabulary.word_ids(s) for s in train.words]
    tag_rows = [vocabulary.tag_ids(t) for t in train.tags]
    per_epoch = math.ceil(len(train) / config.batch_size)
    epochs = max(config.max_epochs, min(math.ceil(config.min_updates / per_epoch), 10 * config.max_epochs))
    every = max(1, math.ceil(config.eval_every_updates / per_epoch))  # epochs between dev evaluations
    best, best_state, bad, history, updates, stopped = -1.0, None, 0, [], 0, None
    loss_fn = nn.CrossEntropyLoss(ignore_index=-100)
    epoch = 0
    for epoch in range(1, epochs + 1):
        model.train()
        for idx in _batches([len(w) for w in word_rows], config.batch_size, rng):
            lengths = torch.as_tensor([len(word_rows[i]) for i in idx])
            logits = model(_pad([word_rows[i] for i in idx], PAD), elmo_train(idx) if elmo_train else None, lengths)
            loss = loss_fn(logits.flatten(0, 1), _pad([tag_rows[i] for i in idx], -100).flatten())
            if not torch.isfinite(loss):
                stopped = f"loss {loss.item()} at epoch {epoch}, update {updates + 1}: stopped, the best state kept"
                break
            for optimizer in optimizers:
                optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(dense, 5.0)
            for optimizer in optimizers:
                optimizer.step()
            updates += 1
        if stopped:
            log(f"    {stopped}")
            break
        if epoch % every and epoch != epochs:
            continue
        value = score(metric, dev.tags, predict(model, vocabulary, dev.words, elmo_dev))
        history.append(round(value, 5))
        if value > best + 1e-6:
            best, best_state, bad = value, copy.deepcopy(model.state_dict()), 0
        else:
            bad += 1
            if bad >= config.patience:
                break
    if best_state is None:  # a NaN before the first evaluation: the state reached so far
        best_state = model.state_dict()
    model.load_state_dict(best_state)
    return TrainedTagger(model, vocabulary, best, epoch, updates, history, stopped)
