"""Token vectors ``(N, dim)`` -> points ``(N, 2)`` for a scatter plot: PCA, UMAP or t-SNE, seeded.

PCA is the default everywhere: it is fast, deterministic and linear, so what it shows is really
in the vectors. UMAP and t-SNE show neighbourhoods better but invent distances between clusters;
UMAP's first call in a process also compiles numba code (about a minute), which
:func:`warm_up_umap` pays up front.

``unit=True`` (the default) scales every row to length 1 first, so that Euclidean distance in the
projection follows cosine similarity, the measure the rest of the lab reports.
"""

from __future__ import annotations

import time

import numpy as np

METHODS = ("pca", "umap", "tsne")
MIN_POINTS = {"pca": 1, "umap": 5, "tsne": 5}  # below this a neighbour method has nothing to embed


def unit_rows(X: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1; an all-zero row stays zero (instead of NaN)."""
    X = np.asarray(X, dtype=np.float64)
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return X / np.where(norms > 0, norms, 1.0)


def project(X: np.ndarray, method: str = "pca", seed: int = 0, unit: bool = True) -> np.ndarray:
    """``(N, dim)`` -> ``(N, 2)`` float64. Raises ValueError with the reason on unusable input."""
    method = method.lower().replace("-", "")
    if method not in METHODS:
        raise ValueError(f"unknown projection {method!r}; choose one of {list(METHODS)}")
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"expected an (N, dim) array, got shape {X.shape}")
    if not np.isfinite(X).all():
        raise ValueError("the vectors contain NaN or inf")
    n = X.shape[0]
    if n < MIN_POINTS[method]:
        raise ValueError(
            f"{method.upper()} needs at least {MIN_POINTS[method]} points, got {n}; add sentences or use PCA"
        )
    if unit:
        X = unit_rows(X)
    if collapsed(X):
        # One point repeated (a word's L0 type vector in every sentence): there is nothing to lay out,
        # and t-SNE's PCA initialisation divides by a zero spread (NaN in, a crash in its tree code).
        return np.zeros((n, 2))
    if method == "pca":
        return pca_2d(X)
    if method == "umap":
        return umap_2d(X, seed)
    return tsne_2d(X, seed)


def collapsed(X: np.ndarray, tolerance: float = 1e-6) -> bool:
    """True when every row is the same point, up to rounding (relative to the rows' size)."""
    if X.shape[0] < 2:
        return True
    scale = max(float(np.abs(X).max()), 1e-30)
    return float(np.abs(X - X.mean(axis=0, keepdims=True)).max()) <= tolerance * scale


def pca_2d(X: np.ndarray) -> np.ndarray:
    """Top two principal components (SVD of the centred data), signs fixed so the output is
    reproducible; fewer than two non-trivial directions give zero columns."""
    X = np.asarray(X, dtype=np.float64)
    centred = X - X.mean(axis=0, keepdims=True)
    out = np.zeros((X.shape[0], 2))
    if X.shape[0] < 2 or not np.any(centred):
        return out
    u, s, vt = np.linalg.svd(centred, full_matrices=False)
    k = min(2, len(s))
    for j in range(k):
        if s[j] <= 1e-12 * max(s[0], 1e-300):
            continue
        v = vt[j] * (1.0 if vt[j][np.argmax(np.abs(vt[j]))] >= 0 else -1.0)  # deterministic sign
        out[:, j] = centred @ v
    return out


def umap_2d(X: np.ndarray, seed: int = 0) -> np.ndarray:
    import warnings

    import umap

    n_neighbors = max(2, min(15, X.shape[0] - 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "n_jobs overridden by random_state", spectral init on tiny data
        reducer = umap.UMAP(
            n_components=2,
            n_neighbors=n_neighbors,
            min_dist=0.1,
            metric="cosine",
            random_state=seed,
            init="spectral" if X.shape[0] > n_neighbors + 1 else "random",
        )
        return np.asarray(reducer.fit_transform(X), dtype=np.float64)


def tsne_2d(X: np.ndarray, seed: int = 0) -> np.ndarray:
    from sklearn.manifold import TSNE
    from threadpoolctl import threadpool_limits

    perplexity = float(max(1.0, min(30.0, (X.shape[0] - 1) / 3)))  # must stay below N
    tsne = TSNE(n_components=2, perplexity=perplexity, metric="cosine", init="pca", random_state=seed)
    # Small inputs run single-threaded: on a busy 2-core machine OpenMP threads waiting for each other
    # turned a 0.1 s fit into 30 s or more.
    with threadpool_limits(limits=1 if X.shape[0] < 2000 else None):
        return np.asarray(tsne.fit_transform(X), dtype=np.float64)


_UMAP_WARM = False


def warm_up_umap(seed: int = 0) -> float:
    """Run UMAP once on a tiny random set so numba compiles now; returns the seconds it took
    (near zero after the first call in a process)."""
    global _UMAP_WARM
    start = time.perf_counter()
    if not _UMAP_WARM:
        umap_2d(np.random.default_rng(seed).normal(size=(40, 8)), seed)
        _UMAP_WARM = True
    return time.perf_counter() - start


def umap_is_warm() -> bool:
    return _UMAP_WARM
