"""Training data for the biLM: a corpus's sentences as id arrays, cut into windows.

bilm-tf's batching: each of ``batch_size`` rows is a long stream of whole sentences, each
wrapped in ``<S> ... </S>``; a step reads the next ``unroll_steps`` tokens of every row and the
LSTM state carries over from the previous window of the same row. The backward LM reads a
parallel stream where every sentence is reversed, so both directions are "next token" models
over their own stream. Everything is a function of (seed, epoch, window index), so a resumed
run reads exactly the windows an uninterrupted one would.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import torch

from ..elmo.chars import BOS_CHAR_IDS, BOS_TOKEN, EOS_CHAR_IDS, EOS_TOKEN, token_to_char_ids
from .errors import CorpusError
from .vocab import Vocabulary

BOS_TYPE, EOS_TYPE = 0, 1


class TokenTable:
    """Every distinct token string seen (not only the vocabulary): its char ids (shifted by
    +1, as the model reads them) and its softmax id (``<UNK>`` outside the vocabulary)."""

    def __init__(self, vocab: Vocabulary):
        self.vocab = vocab
        self.types: list[str] = [BOS_TOKEN, EOS_TOKEN]
        self.index = {BOS_TOKEN: BOS_TYPE, EOS_TOKEN: EOS_TYPE}

    def ids(self, tokens: Sequence[str]) -> list[int]:
        out = []
        for t in tokens:
            i = self.index.get(t)
            if i is None:
                i = self.index[t] = len(self.types)
                self.types.append(t)
            out.append(i)
        return out

    def char_table(self) -> torch.Tensor:
        rows = [BOS_CHAR_IDS, EOS_CHAR_IDS] + [token_to_char_ids(t) for t in self.types[2:]]
        return torch.tensor(rows, dtype=torch.int16) + 1

    def vocab_ids(self) -> torch.Tensor:
        return torch.tensor([self.vocab.id(t) for t in self.types], dtype=torch.long)


@dataclass
class SentenceArray:
    """Sentences as one flat array of type ids, each wrapped in <S> ... </S>."""

    flat: np.ndarray  # int32
    offsets: np.ndarray  # (n + 1,)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def n_tokens(self) -> int:
        """Tokens without the boundaries."""
        return int(len(self.flat) - 2 * len(self))


def read_sentences(files: Sequence[Path], table: TokenTable, max_sentences: Optional[int] = None) -> SentenceArray:
    pieces: list[list[int]] = []
    for path in files:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise CorpusError(f"{path}: cannot be read as UTF-8 text ({e})") from None
        for line in text.splitlines():
            tokens = line.split()
            if tokens:
                pieces.append([BOS_TYPE, *table.ids(tokens), EOS_TYPE])
                if max_sentences and len(pieces) >= max_sentences:
                    break
    lengths = np.array([len(p) for p in pieces], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    flat = np.fromiter((i for p in pieces for i in p), dtype=np.int32, count=int(offsets[-1]))
    return SentenceArray(flat, offsets)


class WindowStream:
    """Windows ``(2, batch, unroll)`` of type ids and next-token targets for one rank."""

    def __init__(self, sentences: SentenceArray, batch_size: int, unroll_steps: int, seed: int):
        self.sentences = sentences
        self.batch_size = batch_size
        self.unroll = unroll_steps
        self.seed = seed
        row_length = len(sentences.flat) // batch_size
        self.windows_per_epoch = (row_length - 1) // unroll_steps
        if self.windows_per_epoch < 1:
            raise CorpusError(
                f"the corpus ({sentences.n_tokens:,} tokens in {len(sentences):,} sentences) is smaller than one "
                f"batch of {batch_size} rows x {unroll_steps + 1} tokens; lower batch_size or unroll_steps, or add text"
            )
        self._epoch: Optional[int] = None
        self._rows: Optional[np.ndarray] = None

    def _build(self, epoch: int) -> np.ndarray:
        order = np.random.default_rng([self.seed, epoch]).permutation(len(self.sentences))
        s, off = self.sentences.flat, self.sentences.offsets
        forward = np.concatenate([s[off[i] : off[i + 1]] for i in order])
        backward = np.concatenate([s[off[i] : off[i + 1]][::-1] for i in order])
        n = (len(forward) // self.batch_size) * self.batch_size
        return np.stack([forward[:n], backward[:n]]).reshape(2, self.batch_size, -1)

    def window(self, epoch: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Inputs and targets, both ``(2, batch, unroll)`` type ids; index 0 forward, 1 backward."""
        if epoch != self._epoch:
            self._rows, self._epoch = self._build(epoch), epoch
        start = k * self.unroll
        chunk = torch.from_numpy(np.ascontiguousarray(self._rows[:, :, start : start + self.unroll + 1])).long()
        return chunk[:, :, :-1], chunk[:, :, 1:]


# --- a corpus folder, loaded -------------------------------------------------------------------


@dataclass
class Corpus:
    vocab: Vocabulary
    table: TokenTable
    sentences: SentenceArray
    char_table: torch.Tensor = field(init=False)
    vocab_ids: torch.Tensor = field(init=False)

    def __post_init__(self):
        self.char_table = self.table.char_table()
        self.vocab_ids = self.table.vocab_ids()

    def tensors(self, types: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Window type ids -> (distinct char ids (U, 50), positions into them, softmax targets)."""
        distinct, positions = torch.unique(types, return_inverse=True)
        return self.char_table[distinct].long(), positions, self.vocab_ids[targets]


def train_files(corpus_dir: Path) -> list[Path]:
    """The train shards; when the corpus has its ``stats.json``, every shard it lists must be there."""
    import json

    stats = corpus_dir / "stats.json"
    if stats.is_file():
        try:
            expected = int(json.loads(stats.read_text(encoding="utf-8"))["train"]["shards"])
        except (ValueError, KeyError, TypeError) as e:
            raise CorpusError(f"{stats}: not the stats of `probing-lab corpus build` ({e}); rebuild it") from None
        names = [corpus_dir / "train" / f"shard-{k:03d}.txt" for k in range(expected)]
        missing = [p.name for p in names if not p.is_file()]
        if missing:
            raise CorpusError(
                f"{corpus_dir}: {len(missing)} of the {expected} train shards in stats.json are missing or not files "
                f"({', '.join(missing[:5])}); training on the rest would use part of the corpus. Rebuild it with "
                "`probing-lab corpus build`"
            )
        return names
    files = sorted(p for p in (corpus_dir / "train").glob("*") if p.is_file() and not p.name.startswith("."))
    if not files:
        raise CorpusError(
            f"{corpus_dir}: no files in train/; "
            f"build a corpus with `probing-lab corpus build --out {corpus_dir} SOURCES...`"
        )
    return files


def load_corpus(corpus_dir: str | Path, vocab_size: Optional[int], files: Optional[list[Path]] = None) -> Corpus:
    corpus_dir = Path(corpus_dir)
    if not corpus_dir.is_dir():
        raise CorpusError(
            f"{corpus_dir}: no such corpus folder; `probing-lab corpus build --out {corpus_dir} ...` makes one"
        )
    vocab = Vocabulary.load(corpus_dir / "vocab.txt", max_size=vocab_size)
    table = TokenTable(vocab)
    sentences = read_sentences(files if files is not None else train_files(corpus_dir), table)
    if len(sentences) == 0:
        raise CorpusError(f"{corpus_dir}: the training files hold no sentences")
    return Corpus(vocab, table, sentences)
