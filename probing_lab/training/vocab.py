"""The word vocabulary of the language model's softmax, in bilm-tf's ``vocab.txt`` format:
one token per line, ``<S>``, ``</S>``, ``<UNK>`` first, then types by decreasing frequency
(the order the log-uniform sampler assumes)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Iterable, Optional

from ..elmo.chars import BOS_TOKEN, EOS_TOKEN
from ..fileio import atomic_path

UNK_TOKEN = "<UNK>"
SPECIALS = (BOS_TOKEN, EOS_TOKEN, UNK_TOKEN)
BOS_ID, EOS_ID, UNK_ID = 0, 1, 2


class Vocabulary:
    def __init__(self, words: Iterable[str]):
        words = list(words)
        if tuple(words[:3]) != SPECIALS:
            raise ValueError(f"a vocabulary starts with {', '.join(SPECIALS)}; got {words[:3]}")
        self.words = words
        self.index = {w: i for i, w in enumerate(words)}
        if len(self.index) != len(words):
            dupes = [w for w, n in Counter(words).items() if n > 1][:5]
            raise ValueError(f"vocabulary has repeated tokens: {dupes}")

    @classmethod
    def from_counts(cls, counts: Counter, min_count: int = 1, max_size: Optional[int] = None) -> "Vocabulary":
        ranked = sorted(
            (w for w, n in counts.items() if n >= min_count and w not in SPECIALS), key=lambda w: (-counts[w], w)
        )
        if max_size is not None:
            ranked = ranked[: max(0, max_size - len(SPECIALS))]
        return cls([*SPECIALS, *ranked])

    @classmethod
    def load(cls, path: str | Path, max_size: Optional[int] = None) -> "Vocabulary":
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no vocabulary file; `probing-lab corpus build` writes vocab.txt")
        words = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        if max_size is not None:
            words = words[:max_size]
        try:
            return cls(words)
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None

    def save(self, path: str | Path) -> None:
        with atomic_path(path) as tmp:
            tmp.write_text("".join(w + "\n" for w in self.words), encoding="utf-8")

    def __len__(self) -> int:
        return len(self.words)

    def id(self, word: str) -> int:
        return self.index.get(word, UNK_ID)
