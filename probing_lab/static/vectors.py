"""Static word vectors (word2vec) loaded from a folder, and an encoder that lets the probes treat them
as "a model with one context-free layer".

A vectors folder (written by :func:`probing_lab.static.word2vec.train_word2vec`, ``probing-lab
word2vec``) holds ``vectors.safetensors`` (``vectors``: float16 or float32 ``(words, dim)``),
``vocab.txt`` (one word a line, row order) and ``card.json``. Loading needs numpy and safetensors
only: no gensim, no pickle.

Out-of-vocabulary policy of :meth:`StaticVectors.vector`: the word itself, else its lowercased
form, else a zero vector (counted in ``oov``; ``lookups`` counts every lookup).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from .word2vec import CARD_FILE, TENSOR_KEY, VECTORS_FILE, VOCAB_FILE

# the encoder's output depends on the vectors, the vocabulary and the OOV policy: bump this when the policy changes
POLICY_VERSION = "exact-lower-zero-1"


class StaticVectors:
    """Word vectors: ``matrix`` (float16 or float32 ``(len(words), dim)``), ``words`` (row order)."""

    def __init__(
        self, matrix: np.ndarray, words: Sequence[str], path: Optional[Path] = None, card: Optional[dict] = None
    ):
        matrix = np.asarray(matrix)
        if matrix.ndim != 2:
            raise ValueError(f"vectors must be a (words, dim) matrix, got shape {matrix.shape}")
        if len(words) != matrix.shape[0]:
            raise ValueError(f"{len(words)} words but {matrix.shape[0]} vectors")
        self.matrix = matrix
        self.words = list(words)
        self.index = {w: i for i, w in enumerate(self.words)}
        if len(self.index) != len(self.words):
            dup = next(w for i, w in enumerate(self.words) if self.index[w] != i)
            raise ValueError(f"the vocabulary lists {dup!r} twice")
        self.path = path
        self.card = card or {}
        self.oov = 0
        self.lookups = 0
        self._unit: Optional[np.ndarray] = None

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[1])

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: str) -> bool:
        return word in self.index or word.lower() in self.index

    @classmethod
    def load(cls, directory: str | Path) -> "StaticVectors":
        """Read a vectors folder; a missing, corrupt or mismatched file is an error naming it."""
        import json

        directory = Path(directory)
        if not directory.is_dir():
            raise FileNotFoundError(
                f"{directory}: no such folder of static vectors (train one with `probing-lab word2vec`)"
            )
        vec_path, vocab_path = directory / VECTORS_FILE, directory / VOCAB_FILE
        for p in (vec_path, vocab_path):
            if not p.is_file():
                raise FileNotFoundError(f"{p}: missing; a static vectors folder holds {VECTORS_FILE} and {VOCAB_FILE}")
        matrix = _read_matrix(vec_path)
        try:
            text = vocab_path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"{vocab_path}: not UTF-8 text ({e.reason})") from None
        words = text.split("\n")
        if words and words[-1] == "":
            words.pop()
        if len(words) != matrix.shape[0]:
            raise ValueError(
                f"{vocab_path} lists {len(words)} words but {vec_path} holds {matrix.shape[0]} vectors: "
                "the two files do not belong together (retrain, or restore both)"
            )
        bad = next((i for i, w in enumerate(words) if not w or w != w.strip() or len(w.split()) != 1), None)
        if bad is not None:
            raise ValueError(f"{vocab_path}, line {bad + 1}: {words[bad]!r} is not one word")
        card = {}
        if (directory / CARD_FILE).is_file():
            try:
                card = json.loads((directory / CARD_FILE).read_text())
            except ValueError as e:
                raise ValueError(f"{directory / CARD_FILE}: not JSON ({e})") from None
        try:
            return cls(matrix, words, directory, card)
        except ValueError as e:
            raise ValueError(f"{vocab_path}: {e}") from None

    def row(self, word: str) -> Optional[int]:
        """The row of ``word`` (exact, else lowercased), or None."""
        i = self.index.get(word)
        if i is None:
            i = self.index.get(word.lower())
        return i

    def vector(self, word: str) -> np.ndarray:
        """float32 ``(dim,)``: the word's vector, else its lowercased form's, else zeros (counted in ``oov``)."""
        self.lookups += 1
        i = self.row(word)
        if i is None:
            self.oov += 1
            return np.zeros(self.dim, dtype=np.float32)
        return self.matrix[i].astype(np.float32)

    def sentence(self, tokens: Sequence[str]) -> np.ndarray:
        """float32 ``(len(tokens), dim)``: :meth:`vector` of each token."""
        out = np.zeros((len(tokens), self.dim), dtype=np.float32)
        for j, t in enumerate(tokens):
            out[j] = self.vector(t)
        return out

    def table(self, words: Sequence[str]) -> np.ndarray:
        """float32 ``(len(words), dim)``: each word's vector (exact, else lowercased), NaN rows for
        words without one (an embedding initialised from it keeps those rows as they are)."""
        out = np.full((len(words), self.dim), np.nan, dtype=np.float32)
        for j, w in enumerate(words):
            i = self.row(w)
            if i is not None:
                out[j] = self.matrix[i]
        return out

    def unit(self) -> np.ndarray:
        """float32 rows scaled to length 1 (a zero row stays zero); computed once."""
        if self._unit is None:
            m = self.matrix.astype(np.float32)
            self._unit = m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)
        return self._unit

    def similarity(self, a: str, b: str) -> float:
        """Cosine of two words' vectors (0.0 when either is out of the vocabulary)."""
        i, j = self.row(a), self.row(b)
        if i is None or j is None:
            return 0.0
        u = self.unit()
        return float(u[i] @ u[j])

    def nearest(self, word: str, k: int = 10) -> list[tuple[str, float]]:
        """The ``k`` words nearest to ``word`` by cosine (itself excluded); [] when it is out of the vocabulary."""
        i = self.row(word)
        if i is None:
            return []
        u = self.unit()
        scores = u @ u[i]
        scores[i] = -np.inf
        k = min(k, len(self.words) - 1)
        if k <= 0:
            return []
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(self.words[t], float(scores[t])) for t in top]

    def fingerprint(self) -> str:
        """sha256 of the matrix (shape, dtype, bytes), the vocabulary and the OOV policy."""
        h = hashlib.sha256()
        h.update(f"static-vectors {POLICY_VERSION} {self.matrix.shape} {self.matrix.dtype}".encode())
        h.update(np.ascontiguousarray(self.matrix).tobytes())
        h.update("\n".join(self.words).encode("utf-8"))
        return h.hexdigest()


def _read_matrix(path: Path) -> np.ndarray:
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="numpy") as f:
            keys = list(f.keys())
            if TENSOR_KEY not in keys:
                raise ValueError(
                    f"{path}: no tensor {TENSOR_KEY!r} in it (found {keys[:5]}); not a static vectors file"
                )
            matrix = f.get_tensor(TENSOR_KEY)
    except ValueError:
        raise
    except Exception as e:  # safetensors' own error type for a truncated or corrupt file
        raise ValueError(
            f"{path}: not a readable safetensors file ({type(e).__name__}: {e}); corrupt or truncated?"
        ) from None
    if matrix.ndim != 2 or matrix.shape[0] == 0 or matrix.shape[1] == 0:
        raise ValueError(f"{path}: {TENSOR_KEY!r} must be a non-empty (words, dim) matrix, got shape {matrix.shape}")
    if matrix.dtype not in (np.float16, np.float32):
        raise ValueError(f"{path}: {TENSOR_KEY!r} must be float16 or float32, got {matrix.dtype}")
    if not np.isfinite(matrix).all():
        raise ValueError(f"{path}: {TENSOR_KEY!r} holds NaN or infinite values")
    return matrix


class StaticEncoder:
    """Static vectors as "a model with a single context-free layer" for the probes and
    :func:`probing_lab.features.cache.extract_features` (the protocol of ``ElmoEncoder``):
    ``embed(sentences)`` gives each sentence a float32 ``(1, n, dim)`` array, every occurrence of a
    word the same vector. ``vectors``: a :class:`StaticVectors` or the path of a vectors folder."""

    n_layers = 1

    def __init__(self, vectors: StaticVectors | str | Path, name: str = "word2vec"):
        self.vectors = vectors if isinstance(vectors, StaticVectors) else StaticVectors.load(vectors)
        self.name = name
        self.dim = self.vectors.dim
        self._fingerprint: Optional[str] = None

    def embed(self, sentences: Sequence[Sequence[str]]) -> list[np.ndarray]:
        return [self.vectors.sentence(s)[None] for s in sentences]

    def fingerprint(self) -> str:
        if self._fingerprint is None:
            self._fingerprint = self.vectors.fingerprint()
        return self._fingerprint
