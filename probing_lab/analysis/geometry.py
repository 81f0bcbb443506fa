"""Geometry of token vectors in one layer: cosine similarities, how well a word's senses separate,
and how similar a word is to itself across contexts.

Everything is in cosine terms (distance = 1 - cosine), the measure used by Ethayarajh (2019) and by
Peters et al.'s nearest-centroid WSD. Numbers that cannot be defined (one sense only, fewer than two
occurrences) are ``None``, never a made-up 0; the app shows them as "n/a".

- :func:`silhouette_cosine`: how much closer an occurrence is to its own sense than to the nearest
  other sense, -1..1 (Rousseeuw 1987; equals ``sklearn.metrics.silhouette_score(metric="cosine")``).
- :func:`loo_nn_accuracy`: each occurrence takes the sense of its most similar other occurrence;
  ties share the credit, so identical vectors score exactly the chance rate that is returned with it.
- :func:`self_similarity` and :func:`random_pair_cosine`: Ethayarajh's self-similarity and the
  anisotropy baseline it must be read against (in a layer where every pair of tokens has cosine
  0.6, a self-similarity of 0.7 says little).
- :func:`linear_cv_accuracy` and :func:`supervised_2d`: is sense *linearly* there at all, where it
  is not the main axis of variation: a linear classifier's cross-validated accuracy, and each point
  placed by a classifier that never saw it.
- :func:`nearest_contexts`: the corpus tokens most similar to a vector.
"""

from __future__ import annotations

import functools
from typing import Optional, Sequence

import numpy as np

from .logistic import BalancedLogistic
from .projections import unit_rows

TIE_TOLERANCE = 1e-6  # cosines this close count as the same neighbour distance


def cosine_matrix(X: np.ndarray, Y: Optional[np.ndarray] = None) -> np.ndarray:
    """``(N, dim)``, ``(M, dim)`` -> ``(N, M)`` cosines in [-1, 1] (zero vectors give 0)."""
    A = unit_rows(X)
    B = A if Y is None else unit_rows(Y)
    return np.clip(A @ B.T, -1.0, 1.0)


def _check(X: np.ndarray, labels: Sequence) -> tuple[np.ndarray, np.ndarray]:
    X = np.asarray(X, dtype=np.float64)
    labels = np.asarray(list(labels), dtype=object)
    if X.ndim != 2 or X.shape[0] != len(labels):
        raise ValueError(f"need one label per row: vectors {X.shape}, {len(labels)} labels")
    return X, labels


def silhouette_cosine(X: np.ndarray, labels: Sequence) -> Optional[float]:
    """Mean silhouette with cosine distance; None with fewer than 2 senses or when every point is
    its own sense. A point alone in its sense scores 0 (the usual convention)."""
    X, labels = _check(X, labels)
    names = sorted(set(labels), key=str)
    n = len(labels)
    if len(names) < 2 or len(names) >= n:
        return None
    D = np.clip(1.0 - cosine_matrix(X), 0.0, 2.0)
    groups = {name: np.flatnonzero(labels == name) for name in names}
    scores = np.zeros(n)
    for i in range(n):
        own = groups[labels[i]]
        if len(own) == 1:
            continue
        a = D[i, own].sum() / (len(own) - 1)  # D[i, i] = 0
        b = min(D[i, idx].mean() for name, idx in groups.items() if name != labels[i])
        top = max(a, b)
        # distances at rounding level (identical vectors in float32) are no separation, not noise/noise
        scores[i] = 0.0 if top <= TIE_TOLERANCE else (b - a) / top
    return float(scores.mean())


def loo_nn_credit(X: np.ndarray, labels: Sequence) -> tuple[Optional[np.ndarray], Optional[np.ndarray]]:
    """Per point: its leave-one-out 1-NN credit (1 when the nearest other point has its sense; with
    ties at the top similarity, the fraction of tied neighbours sharing it) and its chance credit
    (the share of other points with its sense: what identical vectors would get). (None, None)
    with fewer than 2 senses or 2 points."""
    X, labels = _check(X, labels)
    n = len(labels)
    if n < 2 or len(set(labels)) < 2:
        return None, None
    S = cosine_matrix(X)
    np.fill_diagonal(S, -np.inf)
    same = labels[:, None] == labels[None, :]
    np.fill_diagonal(same, False)
    credit = np.empty(n)
    for i in range(n):
        tied = S[i] >= S[i].max() - TIE_TOLERANCE
        credit[i] = same[i, tied].mean()
    return credit, same.sum(axis=1) / (n - 1)


def loo_nn_accuracy(X: np.ndarray, labels: Sequence) -> tuple[Optional[float], Optional[float]]:
    """(leave-one-out 1-NN sense accuracy, chance rate): the means of :func:`loo_nn_credit`. None
    with fewer than 2 senses (nothing to tell apart) or fewer than 2 points."""
    credit, chance = loo_nn_credit(X, labels)
    if credit is None:
        return None, None
    return float(credit.mean()), float(chance.mean())


def _mean_upper(S: np.ndarray) -> Optional[float]:
    n = S.shape[0]
    if n < 2:
        return None
    iu = np.triu_indices(n, k=1)
    return float(S[iu].mean())


def self_similarity(X: np.ndarray) -> Optional[float]:
    """Mean cosine over all pairs of a word's occurrences (Ethayarajh 2019); None below 2."""
    return _mean_upper(cosine_matrix(X))


def random_pair_cosine(X: np.ndarray, n_pairs: int = 2000, seed: int = 0) -> Optional[float]:
    """Anisotropy baseline: mean cosine of random pairs of distinct tokens of a corpus ``(N, dim)``
    in one layer. With few tokens every pair is used (exact); None below 2 tokens."""
    X = np.asarray(X, dtype=np.float64)
    n = X.shape[0]
    if n < 2:
        return None
    if n * (n - 1) // 2 <= n_pairs:
        return _mean_upper(cosine_matrix(X))
    rng = np.random.default_rng(seed)
    i = rng.integers(0, n, size=n_pairs)
    j = (i + rng.integers(1, n, size=n_pairs)) % n  # j != i, uniform over the others
    U = unit_rows(X)
    return float(np.clip(np.einsum("ij,ij->i", U[i], U[j]), -1, 1).mean())


def sense_similarities(X: np.ndarray, labels: Sequence) -> tuple[Optional[float], Optional[float]]:
    """(mean cosine between occurrences of the same sense, mean cosine across senses)."""
    X, labels = _check(X, labels)
    S = cosine_matrix(X)
    same = labels[:, None] == labels[None, :]
    upper = np.triu(np.ones_like(S, dtype=bool), k=1)
    within, between = S[upper & same], S[upper & ~same]
    return (float(within.mean()) if within.size else None, float(between.mean()) if between.size else None)


def _folds(labels: np.ndarray, folds: int, seed: int) -> Optional[list]:
    """Stratified folds as ``[(fit rows, test rows), ...]``, or None when a sense has fewer than 2
    occurrences or there is one sense."""
    return _stratified_folds(tuple(labels.astype(str).tolist()), folds, seed)


@functools.lru_cache(maxsize=64)
def _stratified_folds(labels: tuple, folds: int, seed: int) -> Optional[list]:
    # kept: a word's token, bag-of-context and random-init rows of every layer share one set of labels
    # (nine cross-validations on the Polysemy page), and scikit-learn's splitter cost what a fit costs
    from collections import Counter

    counts = Counter(labels)
    if len(counts) < 2 or min(counts.values()) < 2:
        return None
    from sklearn.model_selection import StratifiedKFold

    splitter = StratifiedKFold(n_splits=min(folds, min(counts.values())), shuffle=True, random_state=seed)
    return list(splitter.split(np.zeros(len(labels)), np.array(labels)))


def linear_cv_accuracy(X: np.ndarray, labels: Sequence, folds: int = 5, seed: int = 0) -> Optional[float]:
    """Cross-validated sense accuracy of a linear classifier (logistic regression with balanced class
    weights, :class:`~.logistic.BalancedLogistic`, on unit-length rows; stratified folds: never scored
    on the points it was fitted on). None when a sense has fewer than 2 occurrences. Balanced, because
    a fold's training part is never balanced (stratified folds of 8 + 8 leave 7 + 6) and an unweighted
    model on uninformative vectors predicts that part's majority, the sense the test part has more
    of: below chance (the Polysemy page's L0 and mean rows read 0.367 against a majority of 0.5).
    Identical vectors carry nothing: balanced, they score about chance."""
    X, labels = _check(X, labels)
    cv = _folds(labels, folds, seed)
    if cv is None:
        return None
    U, labels = unit_rows(X), labels.astype(str)
    right = [(BalancedLogistic().fit(U[fit], labels[fit]).predict(U[test]) == labels[test]).mean() for fit, test in cv]
    return float(np.mean(right))


def supervised_2d(X: np.ndarray, labels: Sequence, folds: int = 5, seed: int = 0) -> Optional[np.ndarray]:
    """``(N, dim)`` -> ``(N, 2)``: each point placed by the decision scores of a linear sense
    classifier fitted on the *other* folds (so a separation in the picture is one that generalises,
    not a fit to the points themselves: with 1,024 dimensions and 20 points any labels separate).
    Two senses: x = the score, y = the first principal component; more: the scores' first two
    principal components. None when a sense has fewer than 2 occurrences."""
    from .projections import pca_2d

    X, labels = _check(X, labels)
    cv = _folds(labels, folds, seed)
    if cv is None:
        return None
    U, labels = unit_rows(X), labels.astype(str)
    n_senses = len(set(labels.tolist()))
    scores = np.zeros((len(U), 1 if n_senses == 2 else n_senses))
    for fit, test in cv:
        scores[test] = BalancedLogistic().fit(U[fit], labels[fit]).decision_function(U[test]).reshape(len(test), -1)
    if n_senses == 2:
        return np.column_stack([scores[:, 0], pca_2d(U)[:, 0]])
    return pca_2d(scores)


def separation(X: np.ndarray, labels: Sequence, baseline: Optional[float] = None, linear: bool = True) -> dict:
    """Every per-layer number the Polysemy page shows for one word's occurrences ``(n, dim)``.
    ``baseline`` is :func:`random_pair_cosine` of the same layer (None: not reported); ``linear=False``
    skips the cross-validated classifier (the slow part; ``linear_accuracy`` is then None)."""
    accuracy, chance = loo_nn_accuracy(X, labels)
    within, between = sense_similarities(X, labels)
    self_sim = self_similarity(X)
    return {
        "silhouette": silhouette_cosine(X, labels),
        "nn_accuracy": accuracy,
        "nn_chance": chance,
        "linear_accuracy": linear_cv_accuracy(X, labels) if linear else None,
        "within_sense": within,
        "between_senses": between,
        "self_similarity": self_sim,
        "anisotropy": baseline,
        "self_similarity_adjusted": None if self_sim is None or baseline is None else self_sim - baseline,
    }


def nearest_contexts(
    query: np.ndarray, corpus: np.ndarray, k: int = 5, exclude: Optional[Sequence[int]] = None
) -> list[tuple[int, float]]:
    """The ``k`` rows of ``corpus (N, dim)`` most similar in cosine to ``query (dim,)``, as
    ``(row, cosine)`` best first; rows in ``exclude`` (e.g. the query itself) are skipped."""
    sims = cosine_matrix(np.asarray(query, dtype=np.float64)[None, :], corpus)[0]
    if exclude is not None and len(exclude):
        sims[np.asarray(list(exclude), dtype=np.int64)] = -np.inf
    k = max(0, min(k, int(np.isfinite(sims).sum())))
    order = np.argsort(-sims, kind="stable")[:k]
    return [(int(i), float(sims[i])) for i in order]
