"""Train word2vec on the lab's LM corpus: the static (context-free) baseline of the probes.

The corpus is a folder written by ``probing-lab corpus build``: ``train/shard-*.txt``, one
whitespace-tokenized sentence per line, the very tokens the shipped ELMo was trained on, and
``stats.json`` with their count. The shards are streamed (never held in memory); the output folder
(written as a whole, atomically) holds ``vectors.safetensors`` (float16 ``(words, dim)`` under the
key ``vectors``), ``vocab.txt`` (one word a line, the same order: most frequent first) and
``card.json`` (how it was made). Loading them needs numpy and safetensors only
(:class:`probing_lab.static.vectors.StaticVectors`); training needs gensim (the ``word2vec`` extra).
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Callable, Iterator, Optional

import numpy as np

from ..errors import MissingExtra
from ..fileio import atomic_directory, atomic_path, check_output_dir

VECTORS_FILE = "vectors.safetensors"
VOCAB_FILE = "vocab.txt"
CARD_FILE = "card.json"
TENSOR_KEY = "vectors"


def corpus_shards(corpus_dir: str | Path) -> list[Path]:
    """The training shards of a corpus folder, in order; a clear error when there are none."""
    corpus_dir = Path(corpus_dir)
    if not corpus_dir.is_dir():
        raise FileNotFoundError(f"--corpus {corpus_dir}: no such folder (build one with `probing-lab corpus build`)")
    shards = sorted((corpus_dir / "train").glob("shard-*.txt"))
    if not shards:
        raise FileNotFoundError(
            f"--corpus {corpus_dir}: no train/shard-*.txt in it; give a folder written by `probing-lab corpus build`"
        )
    return shards


def _corpus_tokens(corpus_dir: Path) -> Optional[int]:
    """The training token count from the corpus's stats.json, or None when it has none."""
    try:
        return int(json.loads((corpus_dir / "stats.json").read_text())["train"]["tokens"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _stable_hash(text: str) -> int:
    """gensim's per-word seeding hash, independent of PYTHONHASHSEED (Python's ``hash`` is not)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


class _Progress:
    """One log line every ``every`` seconds: the pass, tokens read, the current stage's rate and the
    ETA of the whole run (the vocabulary scan reads much faster than training does: each stage's
    rate is its own)."""

    def __init__(self, total: Optional[int], passes: int, log: Callable[[str], None], every: float = 30.0):
        self.total, self.passes, self.log, self.every = total, passes, log, every
        self.start = self.last = self.stage_start = time.perf_counter()
        self.tokens = self.stage_tokens = 0  # over every pass so far; when the stage began
        self.stage = "vocabulary scan"

    def begin(self, stage: str) -> None:
        self.stage, self.stage_start, self.stage_tokens = stage, time.perf_counter(), self.tokens

    def add(self, n: int) -> None:
        self.tokens += n
        now = time.perf_counter()
        if now - self.last >= self.every:
            self.last = now
            self.line(now)

    def line(self, now: Optional[float] = None) -> None:
        now = now or time.perf_counter()
        rate = (self.tokens - self.stage_tokens) / max(now - self.stage_start, 1e-9)
        msg = f"word2vec {self.stage}: {self.tokens / 1e6:.1f}M tokens read, {rate / 1e3:.0f}k tokens/s"
        if self.total:
            grand = self.total * self.passes
            left = max(grand - self.tokens, 0) / max(rate, 1e-9)
            msg += f", {100 * min(self.tokens / grand, 1):.0f}% of {self.passes} passes, ETA {left / 60:.1f} min"
        self.log(msg + f", {(now - self.start) / 60:.1f} min so far")


class ShardSentences:
    """The corpus's sentences (lists of tokens), streamed shard by shard, line by line; iterable
    again for each pass (gensim reads it once for the vocabulary and once per epoch)."""

    def __init__(self, shards: list[Path], progress: Optional[_Progress] = None):
        self.shards, self.progress = shards, progress

    def __iter__(self) -> Iterator[list[str]]:
        for shard in self.shards:
            with open(shard, encoding="utf-8") as f:
                for line in f:
                    tokens = line.split()
                    if tokens:
                        if self.progress is not None:
                            self.progress.add(len(tokens))
                        yield tokens


def train_word2vec(
    corpus_dir: str | Path,
    out_dir: str | Path,
    dim: int = 100,
    top: int = 40000,
    epochs: int = 5,
    window: int = 5,
    min_count: int = 5,
    seed: int = 0,
    workers: int = 2,
    force: bool = False,
    log: Callable[[str], None] = lambda m: print(m, file=sys.stderr, flush=True),
    log_every: float = 30.0,
) -> dict:
    """Train word2vec on ``corpus_dir``'s training shards and write ``out_dir`` (see the module's
    docstring); returns the card (also written as ``card.json``).

    The algorithm is **skip-gram** with negative sampling (5 noise words, frequent words
    subsampled at 1e-3), not CBOW: on a corpus this small (about 12M tokens) skip-gram gives
    better vectors for the less frequent words and better semantic neighbours (Mikolov et al.
    2013, whose CBOW wins on syntax and speed only); the vectors are a baseline for sense and
    part-of-speech probes, where the quality of mid-frequency words counts, and the cost (a few
    minutes more on one core) is paid once. ``top``: only the ``top`` most frequent words (of
    those seen ``min_count`` times) are kept, most frequent first. ``workers=1`` gives the same
    vectors on every run (more workers interleave updates in the order the threads run).
    """
    for name, value in (("dim", dim), ("top", top), ("epochs", epochs), ("window", window), ("workers", workers)):
        if int(value) < 1:
            raise ValueError(f"--{name} must be at least 1, got {value}")
    if min_count < 1:
        raise ValueError(f"--min-count must be at least 1, got {min_count}")
    corpus_dir = Path(corpus_dir)
    shards = corpus_shards(corpus_dir)
    out_dir = check_output_dir(
        out_dir, corpus_dir, *shards, command="word2vec", force=force, names=(VECTORS_FILE, VOCAB_FILE, CARD_FILE)
    )
    try:
        import gensim
        from gensim.models import Word2Vec
    except ImportError:
        raise MissingExtra(
            "training word2vec needs gensim: pip install 'probing-lab[word2vec]' (or gensim==4.4.0); "
            "loading trained vectors does not"
        ) from None

    total = _corpus_tokens(corpus_dir)
    progress = _Progress(total, epochs + 1, log, every=log_every)
    sentences = ShardSentences(shards, progress)
    log(
        f"word2vec: skip-gram, dim {dim}, window {window}, min_count {min_count}, {epochs} epochs, "
        f"{workers} worker(s) on {len(shards)} shard(s) of {corpus_dir}"
        + (f" ({total / 1e6:.1f}M tokens)" if total else "")
    )
    start = time.perf_counter()
    model = Word2Vec(
        vector_size=dim,
        window=window,
        min_count=min_count,
        sg=1,
        negative=5,
        hs=0,
        sample=1e-3,
        seed=seed,
        workers=workers,
        hashfxn=_stable_hash,
    )
    model.build_vocab(sentences)
    seen = int(model.corpus_total_words)
    if not model.wv.index_to_key:
        raise ValueError(f"--corpus {corpus_dir}: no word occurs {min_count} times; nothing to train")
    progress.begin("training")
    model.train(sentences, total_examples=model.corpus_count, epochs=epochs)
    seconds = time.perf_counter() - start
    progress.line()

    words = list(model.wv.index_to_key[:top])  # gensim keeps them sorted by count, most frequent first
    counts = [int(model.wv.get_vecattr(w, "count")) for w in words]
    vectors = np.asarray(model.wv.vectors[: len(words)], dtype=np.float32)
    if not np.isfinite(vectors).all():
        raise ValueError("word2vec training gave non-finite vectors; nothing was written")
    half = vectors.astype(np.float16)
    card = {
        "kind": "word2vec",
        "algorithm": "skip-gram, negative sampling (5), subsampling 1e-3",
        "corpus": str(corpus_dir.resolve()),
        "corpus_tokens": total if total is not None else seen,
        "corpus_tokens_read": seen,
        "corpus_sentences": int(model.corpus_count),
        "dim": dim,
        "epochs": epochs,
        "window": window,
        "min_count": min_count,
        "seed": seed,
        "workers": workers,
        "vocab_trained": len(model.wv.index_to_key),
        "words": len(words),
        "top": top,
        "lowest_count_kept": counts[-1],
        "dtype": "float16",
        "training_seconds": round(seconds, 1),
        "gensim": gensim.__version__,
    }
    from safetensors.numpy import save_file

    with atomic_directory(out_dir, command="word2vec") as tmp:
        with atomic_path(tmp / VECTORS_FILE) as p:  # atomic_path gives the file the umask's permissions
            save_file({TENSOR_KEY: half}, str(p), metadata={"format": "probing-lab word2vec 1"})
        with atomic_path(tmp / VOCAB_FILE) as p:
            p.write_text("".join(w + "\n" for w in words), encoding="utf-8")
        with atomic_path(tmp / CARD_FILE) as p:
            p.write_text(json.dumps(card, indent=2) + "\n")
    log(
        f"word2vec: {len(words)} words x {dim} written to {out_dir} in {seconds:.0f} s of training "
        f"(lowest count kept {counts[-1]})"
    )
    return card
