"""The language model being trained: the biLM and the softmax both directions share, its one
forward path (training loss and heldout evaluation use the same), and heldout perplexity."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..elmo import ElmoBiLM, ElmoOptions
from ..elmo.modules import LstmState
from .config import TrainingError
from .data import BOS_TYPE, EOS_TYPE, Corpus, SentenceArray, TokenTable, WindowStream, read_sentences
from .errors import CorpusError
from .softmax import SoftmaxHead
from .vocab import Vocabulary


class BiLanguageModel(nn.Module):
    """The biLM plus the softmax both directions share."""

    def __init__(self, options: ElmoOptions, vocab_size: int, n_negative: int = 0, dropout: float = 0.0):
        super().__init__()
        self.bilm = ElmoBiLM(options)
        self.softmax = SoftmaxHead(vocab_size, options.projection_dim, n_negative)
        self.dropout = dropout

    def top_layer(
        self, char_ids: torch.Tensor, positions: torch.Tensor, state: LstmState
    ) -> tuple[torch.Tensor, LstmState]:
        """The biLM's top layer ``(2, batch, T, proj)`` over a window (each direction in its own
        reading order) and the state after it; dropout as configured, in training mode only.
        The char CNN runs once per distinct token (both streams hold the same words)."""
        tokens = self.bilm.token_encoder(char_ids.unsqueeze(0))[0][positions]  # (2, batch, T, proj)
        top, state = self.bilm.lstm.forward_streams(tokens, state, self.dropout)
        if self.dropout:
            top = F.dropout(top, self.dropout, self.training)
        return top, state

    def forward(
        self,
        char_ids: torch.Tensor,
        positions: torch.Tensor,
        targets: torch.Tensor,
        state: LstmState,
        generator: Optional[torch.Generator] = None,
    ) -> tuple[torch.Tensor, torch.Tensor, LstmState]:
        """``char_ids (U, 50)``: the distinct tokens of the window; ``positions (2, batch, T)``:
        which of them stands at each position (index 0 forward stream, 1 backward);
        ``targets (2, batch, T)`` softmax ids. Returns the mean forward loss, the mean backward loss
        and the LSTM state after the window."""
        top, state = self.top_layer(char_ids, positions, state)
        # Both directions in one softmax call (one set of sampled negatives, one gather).
        losses = self.softmax.loss(top.reshape(-1, top.shape[-1]), targets.reshape(-1), generator, reduction="none")
        loss_f, loss_b = losses.view(2, -1).mean(dim=1)
        return loss_f, loss_b, state


@torch.no_grad()
def evaluate_lm(
    lm: BiLanguageModel,
    corpus_dir: str | Path,
    vocab_size: Optional[int],
    file: Optional[Path] = None,
    batch_size: int = 32,
    unroll_steps: int = 20,
    max_tokens: Optional[int] = None,
    progress: bool = True,
    device=None,
    first_tokens: Optional[int] = None,
) -> dict:
    """Heldout perplexity per direction (full softmax, state carried across windows).

    ``max_tokens`` caps the windows read from the (shuffled) heldout stream: a sample spread over
    the file, what the training curves measure. ``first_tokens`` instead evaluates the first N
    tokens of the file only (``eval-lm --max-tokens N``; the last sentence read is cut), with the
    batch size that scores the most of them; the result then says how many tokens it read."""
    corpus_dir = Path(corpus_dir)
    path = file or corpus_dir / "heldout.txt"
    if not path.is_file():
        raise CorpusError(f"{path}: no heldout file")
    vocab = Vocabulary.load(corpus_dir / "vocab.txt", max_size=vocab_size)
    if len(vocab) != lm.softmax.weight.shape[0]:
        raise TrainingError(
            f"the model's softmax has {lm.softmax.weight.shape[0]} words, {corpus_dir}/vocab.txt gives {len(vocab)}"
        )
    table = TokenTable(vocab)
    sentences = read_sentences([path], table)
    total = sentences.n_tokens
    if first_tokens is not None:
        if first_tokens < 1:
            raise ValueError(f"first_tokens must be >= 1, got {first_tokens}")
        sentences = _first_tokens(sentences, first_tokens)
        unroll_steps = max(1, min(unroll_steps, len(sentences.flat) - 1))
        batch_size = _covering_batch_size(len(sentences.flat), unroll_steps, batch_size)
    batch_size = max(1, min(batch_size, len(sentences.flat) // (unroll_steps + 1)))
    stream = WindowStream(sentences, batch_size, unroll_steps, seed=0)
    corpus = Corpus(vocab, table, sentences)
    n_windows = stream.windows_per_epoch
    if max_tokens:
        n_windows = max(1, min(n_windows, max_tokens // (batch_size * unroll_steps)))
    lm.eval()
    state = lm.bilm.lstm.zero_state(batch_size, device)
    nll = torch.zeros(2, dtype=torch.float64)
    count = 0
    iterator = range(n_windows)
    if progress:
        from tqdm import tqdm

        iterator = tqdm(iterator, desc="eval-lm", unit="window", file=sys.stderr)
    for k in iterator:
        types, targets = stream.window(0, k)
        char_ids, positions, target_ids = (t.to(device) for t in corpus.tensors(types, targets))
        batch, T = positions.shape[1:]
        top, state = lm.top_layer(char_ids, positions, state)
        for d in range(2):
            nll[d] += (
                lm.softmax.full_loss(top[d].reshape(-1, top.shape[-1]), target_ids[d].reshape(-1), reduction="sum")
                .double()
                .cpu()
            )
        count += batch * T
    ppl = torch.exp(nll / count).tolist()
    return {
        "perplexity_forward": ppl[0],
        "perplexity_backward": ppl[1],
        "perplexity": 0.5 * (ppl[0] + ppl[1]),
        "tokens": count,
        "file": str(path),
        **({"heldout_tokens": sentences.n_tokens, "heldout_tokens_total": total} if first_tokens else {}),
    }


def _first_tokens(sentences: SentenceArray, n: int) -> SentenceArray:
    """The first ``n`` tokens of ``sentences`` in file order (the last sentence cut to fit), each
    sentence still wrapped in <S> ... </S>."""
    pieces, left = [], n
    for i in range(len(sentences)):
        if left <= 0:
            break
        words = sentences.flat[sentences.offsets[i] + 1 : sentences.offsets[i + 1] - 1][:left]
        pieces.append(np.concatenate([[BOS_TYPE], words, [EOS_TYPE]]).astype(np.int32))
        left -= len(words)
    if not pieces:
        return sentences
    offsets = np.concatenate([[0], np.cumsum([len(p) for p in pieces])])
    return SentenceArray(np.concatenate(pieces), offsets)


def _covering_batch_size(length: int, unroll_steps: int, largest: int) -> int:
    """The batch size up to ``largest`` whose full windows cover the most of a ``length``-token stream."""

    def covered(b: int) -> int:
        return b * unroll_steps * max(0, (length // b - 1) // unroll_steps)

    return max(range(1, largest + 1), key=lambda b: (covered(b), b))
