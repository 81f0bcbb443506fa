"""The notebook and CLI entry point: sentences in, per-layer arrays out.

    >>> from probing_lab.elmo import Embedder
    >>> elmo = Embedder.from_files("options.json", "weights.hdf5")   # a released ELMo
    >>> elmo = Embedder.from_checkpoint("data/models/...")           # the lab's own format
    >>> [bank] = elmo.embed([["I", "sat", "by", "the", "river", "bank"]])
    >>> bank.shape                                                  # (layers, tokens, 2*proj)
    (3, 6, 1024)

Stateless by default: every batch starts from a zero LSTM state, so a sentence gets the same
vectors whatever it is batched with. ``stateful=True`` carries the final state of each batch
row into the next call, as AllenNLP's ``Elmo`` and bilm-tf do (for parity with the original).

One Embedder may serve several threads (the app's sessions): it runs one forward pass at a time, as
torch already spreads one pass over the cores (10 threads embedding five sentences each: 0.24-0.29 s
of CPU at once, 0.18-0.19 s one after the other), and stateful mode needs the order anyway.
"""

from __future__ import annotations

import threading
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator, Optional, Sequence

import numpy as np
import torch

from .bilm import BiLMOutput, ElmoBiLM
from .chars import BOS_CHAR_IDS, EOS_CHAR_IDS, check_sentences, token_to_char_ids
from .modules import LstmState


class Embedder:
    def __init__(
        self,
        model: ElmoBiLM,
        batch_size: int = 64,
        stateful: bool = False,
        fused: bool = False,
        device: Optional[str | torch.device] = None,
    ):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if stateful and fused:
            raise ValueError("stateful mode needs the exact LSTM path; drop fused=True")
        self.device = torch.device(device) if device else next(model.parameters()).device
        self.model = model.to(self.device).eval()
        self.batch_size = batch_size
        self.stateful = stateful
        self.fused = fused
        self._state: Optional[LstmState] = None
        self._type_index: dict[str, int] = {}
        self._type_vectors: Optional[torch.Tensor] = None
        self._lock = threading.Lock()  # one forward pass at a time (see the module's docstring)

    # --- construction ---------------------------------------------------------------
    @classmethod
    def from_files(cls, options: str | Path, weights: str | Path, **kwargs) -> "Embedder":
        from .weights import load_hdf5_model

        return cls(load_hdf5_model(options, weights), **kwargs)

    @classmethod
    def from_checkpoint(cls, directory: str | Path, **kwargs) -> "Embedder":
        from .weights import load_checkpoint

        return cls(load_checkpoint(directory), **kwargs)

    @property
    def n_layers(self) -> int:
        return self.model.n_layers

    @property
    def dim(self) -> int:
        return self.model.output_dim

    # --- state ----------------------------------------------------------------------
    def reset_state(self) -> None:
        """Forget the carried LSTM state (stateful mode)."""
        self._state = None

    def _take_state(self, batch: int) -> Optional[LstmState]:
        if not self.stateful or self._state is None:
            return None
        h, c = self._state
        have = h.shape[2]
        if have < batch:  # new rows start from zero
            zh, zc = self.model.lstm.zero_state(batch - have, self.device)
            h, c = torch.cat([h, zh], dim=2), torch.cat([c, zc], dim=2)
        return h[:, :, :batch].contiguous(), c[:, :, :batch].contiguous()

    def _keep_state(self, new: LstmState) -> None:
        if not self.stateful:
            return
        batch = new[0].shape[2]
        if self._state is None or self._state[0].shape[2] <= batch:
            self._state = (new[0].clone(), new[1].clone())
        else:  # a smaller batch updates the first rows only
            h, c = self._state
            h[:, :, :batch], c[:, :, :batch] = new
            self._state = (h, c)

    # --- type-vector cache ----------------------------------------------------------
    def set_vocabulary(self, words: Iterable[str], batch_size: int = 512) -> None:
        """Precompute the char-CNN type vectors of ``words`` (plus the sentence boundaries);
        later calls look those up and run the CNN only for words outside the list."""
        words = list(dict.fromkeys(w for w in words if w))
        rows = [BOS_CHAR_IDS, EOS_CHAR_IDS] + [token_to_char_ids(w) for w in words]
        with torch.inference_mode():
            self._type_vectors = torch.cat(
                [self._encode(rows[i : i + batch_size]) for i in range(0, len(rows), batch_size)]
            )
        self._type_index = {w: i + 2 for i, w in enumerate(words)}

    def clear_vocabulary(self) -> None:
        self._type_index, self._type_vectors = {}, None

    MAX_VOCABULARY = 100_000  # words one vocabulary_of() precomputes: ~100 MB at 256 dims

    @contextmanager
    def vocabulary_of(self, sentences: Sequence[Sequence[str]]) -> Iterator[None]:
        """While inside, the char-CNN type vectors of these sentences' words (their
        ``MAX_VOCABULARY`` most frequent, when more) are computed once, up front, instead of once
        per batch that holds them: for a file or a dataset, where the CNN was 39% of an extraction
        (EWT dev + test: 50,241 tokens of 8,833 words, 11.3 -> 8.1 s). The vectors then come from
        CNN batches of other shapes: the same to float32 rounding (one float16 step in 0.1% of the
        stored values). For an Embedder of one's own (it is not meant for one other threads are
        using); a vocabulary already set is kept."""
        if self._type_vectors is not None:
            yield
            return
        counts = Counter(w for s in sentences for w in s)
        self.set_vocabulary(w for w, _ in counts.most_common(self.MAX_VOCABULARY))
        try:
            yield
        finally:
            self.clear_vocabulary()

    CNN_CHUNK = 512  # words per char-CNN call: bounds its (words, positions, filters) intermediate

    def _encode(self, char_rows: list[list[int]]) -> torch.Tensor:
        """Char-id rows (unshifted) -> type vectors ``(n, proj)``."""
        if not char_rows:
            return torch.zeros(0, self.model.options.projection_dim, device=self.device)
        ids = (torch.tensor(char_rows, dtype=torch.long) + 1).to(self.device)
        encode = self.model.token_encoder
        return torch.cat([encode(chunk.unsqueeze(0))[0] for chunk in ids.split(self.CNN_CHUNK)])

    def _token_vectors(self, sentences: Sequence[Sequence[str]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Type vectors ``(batch, T, proj)`` with the boundaries (zero at padding) and the mask.

        The char CNN runs once per distinct word of the batch, not once per token (exact: the
        type layer is context-free), and not at all for words of :meth:`set_vocabulary`."""
        T = max((len(s) for s in sentences), default=0) + 2
        words: dict[str, int] = {}  # the batch's distinct words, in order of appearance
        index = torch.zeros(len(sentences), T, dtype=torch.long)  # 0 padding, 1 <S>, 2 </S>, 3 + j word j
        for b, sentence in enumerate(sentences):
            row = [3 + words.setdefault(w, len(words)) for w in sentence]
            index[b, : len(row) + 2] = torch.tensor([1, *row, 2])
        # table: a zero row, then <S>, </S> (and the vocabulary when cached), then the other words
        base = self._type_vectors if self._type_vectors is not None else self._encode([BOS_CHAR_IDS, EOS_CHAR_IDS])
        fresh = [w for w in words if w not in self._type_index]
        fresh_row = {w: 1 + len(base) + k for k, w in enumerate(fresh)}
        rows = [0, 1, 2] + [1 + self._type_index[w] if w in self._type_index else fresh_row[w] for w in words]
        table = torch.cat([base.new_zeros(1, base.shape[1]), base, self._encode([token_to_char_ids(w) for w in fresh])])
        return table[torch.tensor(rows)[index].to(self.device)], (index > 0).to(self.device)

    # --- embedding ------------------------------------------------------------------
    def run_batch(self, sentences: Sequence[Sequence[str]], keep_boundaries: bool = False) -> BiLMOutput:
        """One forward pass over one batch, tensors out (``layers[k] (batch, T, dim)``)."""
        check_sentences(sentences)
        with self._lock, torch.inference_mode():
            vectors, mask = self._token_vectors(sentences)
            out = self.model.from_token_vectors(vectors, mask, state=self._take_state(len(sentences)), fused=self.fused)
            self._keep_state(out.state)
        return out if keep_boundaries else out.without_boundaries()

    def embed_batch(self, sentences: Sequence[Sequence[str]], keep_boundaries: bool = False) -> list[np.ndarray]:
        """One batch -> one float32 array ``(layers, n_tokens, dim)`` per sentence."""
        out = self.run_batch(sentences, keep_boundaries)
        stacked = torch.stack(out.layers, dim=1).cpu().numpy()  # (batch, layers, T, dim)
        lengths = out.mask.sum(dim=1).tolist()
        return [stacked[i, :, :n] for i, n in enumerate(lengths)]

    def embed(
        self,
        sentences: Sequence[Sequence[str]],
        batch_size: Optional[int] = None,
        progress: bool = False,
        keep_boundaries: bool = False,
    ) -> list[np.ndarray]:
        """Many sentences -> one array ``(layers, n_tokens, dim)`` each, in input order.

        Stateless mode batches sentences of similar length together (less padding);
        stateful mode keeps the given order, batch row ``i`` of call ``k`` continuing the
        state of row ``i`` of call ``k-1``. An empty sentence gives ``(layers, 0, dim)``.
        """
        results: list[Optional[np.ndarray]] = [None] * len(sentences)
        for i, array in self.embed_iter(sentences, batch_size, progress, keep_boundaries):
            results[i] = array
        return results  # type: ignore[return-value]

    def embed_iter(
        self,
        sentences: Sequence[Sequence[str]],
        batch_size: Optional[int] = None,
        progress: bool = False,
        keep_boundaries: bool = False,
    ) -> Iterator[tuple[int, np.ndarray]]:
        """Like :meth:`embed`, but yields ``(input index, array)`` batch by batch (in the order
        they are computed), so that a caller can write them out without holding them all."""
        check_sentences(sentences)
        batch_size = batch_size or self.batch_size
        order = list(range(len(sentences)))
        if not self.stateful:
            order.sort(key=lambda i: len(sentences[i]))
        bar = _progress(len(sentences), progress)
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            yield from zip(chunk, self.embed_batch([sentences[i] for i in chunk], keep_boundaries))
            bar.update(len(chunk))
        bar.close()

    def embed_text(self, text: str, **kwargs) -> tuple[list[list[str]], list[np.ndarray]]:
        """Raw text -> (tokenized sentences, arrays), with the lab's PTB-style tokenizer."""
        from ..text import split_and_tokenize

        sentences = split_and_tokenize(text)
        if not sentences:
            raise ValueError("the text is empty: nothing to embed")
        return sentences, self.embed(sentences, **kwargs)


def _progress(total: int, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="sent", disable=not enabled, dynamic_ncols=True)
