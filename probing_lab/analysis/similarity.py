"""Comparing representations directly: linear CKA (Kornblith et al. 2019) between any two layer
representations of the same tokens, its debiased form for small samples, and the per-layer geometry
of a corpus sample: anisotropy and self-similarity (Ethayarajh 2019).

CKA is 1 for representations that differ by a rotation and an isotropic scaling, and near 0
(debiased: about 0) for independent ones. It compares the *similarity structure* over the tokens,
so two layers of different widths, or two models, can be compared.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Optional, Sequence

import numpy as np

from .geometry import random_pair_cosine, self_similarity


def _hsic_debiased(X: np.ndarray, Y: np.ndarray) -> float:
    """The unbiased HSIC estimator (Song et al. 2012) of the linear kernels ``K = X X^T`` and
    ``L = Y Y^T`` (rows: tokens), as used by debiased CKA (Nguyen et al. 2021). Computed from the
    features, never forming the (n, n) Gram matrices: with ``K~`` = ``K`` with a zero diagonal,
    ``tr(K~ L~) = ||X^T Y||_F^2 - sum_i K_ii L_ii`` and ``K~ 1 = X (X^T 1) - diag(K)``, so the cost is
    O(n p q), not O(n^2 (p + q)) (7 s -> 0.1 s for 3 x 3 layers of 2,300 tokens)."""
    n = X.shape[0]
    k, l_ = np.einsum("ij,ij->i", X, X), np.einsum("ij,ij->i", Y, Y)  # the Gram diagonals
    trace = np.linalg.norm(X.T @ Y) ** 2 - k @ l_
    k_rows, l_rows = X @ X.sum(0) - k, Y @ Y.sum(0) - l_  # row sums of K~ and L~
    return float(
        (trace + k_rows.sum() * l_rows.sum() / ((n - 1) * (n - 2)) - 2.0 * (k_rows @ l_rows) / (n - 2)) / (n * (n - 3))
    )


def linear_cka(X: np.ndarray, Y: np.ndarray, debiased: bool = False) -> float:
    """Linear CKA between ``X (n, p)`` and ``Y (n, q)``, rows the same n tokens.

    Plain: ``||Yc^T Xc||_F^2 / (||Xc^T Xc||_F ||Yc^T Yc||_F)`` with column-centred ``Xc``, ``Yc``.
    Debiased: the same ratio of unbiased HSIC estimates, which removes the upward bias of plain CKA
    when there are few tokens for the dimension (needs n >= 4)."""
    X, Y = np.asarray(X, dtype=np.float64), np.asarray(Y, dtype=np.float64)
    if X.ndim != 2 or Y.ndim != 2 or X.shape[0] != Y.shape[0]:
        raise ValueError(f"CKA needs two (n, dim) matrices of the same n tokens, got {X.shape} and {Y.shape}")
    n = X.shape[0]
    if n < (4 if debiased else 2):
        raise ValueError(f"CKA needs at least {4 if debiased else 2} tokens, got {n}")
    Xc, Yc = X - X.mean(0), Y - Y.mean(0)
    if debiased:
        xy, xx, yy = _hsic_debiased(Xc, Yc), _hsic_debiased(Xc, Xc), _hsic_debiased(Yc, Yc)
    else:
        xy = np.linalg.norm(Yc.T @ Xc) ** 2
        xx, yy = np.linalg.norm(Xc.T @ Xc), np.linalg.norm(Yc.T @ Yc)
        xx, yy = xx**2, yy**2
    if xx <= 0 or yy <= 0:
        return float("nan")  # a constant representation has no similarity structure
    return float(xy / np.sqrt(xx * yy))


def cka_matrix(
    a: dict[str, np.ndarray], b: dict[str, np.ndarray], debiased: bool = False
) -> tuple[list[str], list[str], np.ndarray]:
    """CKA between every representation of ``a`` (rows) and of ``b`` (columns): name -> (n, dim)."""
    rows, cols = list(a), list(b)
    M = np.array([[linear_cka(a[r], b[c], debiased) for c in cols] for r in rows])
    return rows, cols, M


def corpus_geometry(
    layers: dict[str, np.ndarray], words: Sequence[str], sentence_of: Sequence[int], max_occurrences: int = 20
) -> list[dict]:
    """Per layer: anisotropy (mean cosine of random token pairs), the mean self-similarity of the
    words that occur in at least two sentences (their occurrences in different sentences, at most
    ``max_occurrences`` each), and the self-similarity with the anisotropy subtracted (Ethayarajh 2019:
    contextualisation shows as low adjusted self-similarity)."""
    by_word: dict[str, list[int]] = defaultdict(list)
    seen: set[tuple[str, int]] = set()
    for row, (word, sentence) in enumerate(zip(words, sentence_of)):
        key = (word, sentence)  # ELMo is case-sensitive: "The" and "the" are two types
        if key not in seen and len(by_word[word]) < max_occurrences:
            seen.add(key)
            by_word[word].append(row)
    repeated = [rows for rows in by_word.values() if len(rows) >= 2]
    out = []
    for name, X in layers.items():
        anisotropy = random_pair_cosine(X)
        sims = [self_similarity(X[rows]) for rows in repeated]
        sims = [s for s in sims if s is not None]
        self_sim: Optional[float] = float(np.mean(sims)) if sims else None
        out.append(
            {
                "layer": name,
                "anisotropy": anisotropy,
                "self_similarity": self_sim,
                "adjusted_self_similarity": None if self_sim is None or anisotropy is None else self_sim - anisotropy,
                "words": len(repeated),
            }
        )
    return out
