"""Iterative nullspace projection (INLP; Ravfogel et al. 2020): find the linear directions that carry
a property, to remove them.

Each iteration trains a linear probe on the vectors with the directions found so far projected out,
takes the directions its weights read (for ``c`` labels, the ``c - 1`` independent contrasts between
label rows, mapped back to the vectors' own coordinates), and adds them to the removed subspace.
It stops when the probe is within ``tolerance`` of the majority baseline or after ``iterations``.
``project(X, basis)`` is the projection ``X - X B^T B`` onto what is left.

``inlp(X, y, X_dev, y_dev, ...)`` -> :class:`INLPResult`: the orthonormal ``basis (rank, dim)`` and,
per iteration, the probe's dev accuracy before that iteration's removal (the last entry: after the
final removal).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from ..probing.probes import ProbeConfig, fit_probe

# a probe per iteration, trained briefly: INLP needs the directions, not the last point of accuracy
INLP_PROBE = ProbeConfig(kind="linear", epochs=10, patience=2, lr=0.01)


@dataclass
class INLPResult:
    basis: np.ndarray  # (rank, dim), orthonormal rows: the removed directions
    accuracy: list = field(default_factory=list)  # dev accuracy per iteration; the last: after the last removal
    majority: float = 0.0  # dev accuracy of the most frequent training label
    ranks: list = field(default_factory=list)  # the removed subspace's rank after each iteration

    @property
    def rank(self) -> int:
        return int(self.basis.shape[0])


def project(X: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """``X`` with the span of ``basis``'s (orthonormal) rows removed. Computed in float64: a float32
    residue of the removed directions is correlated with ``X``, and a probe that standardises its
    inputs reads it back (UPOS removed from all 128 dimensions of a half layer still gave 0.34 against a
    majority of 0.15)."""
    if not len(basis):
        return np.asarray(X, dtype=np.float32)
    X, basis = np.asarray(X, dtype=np.float64), np.asarray(basis, dtype=np.float64)
    return (X - (X @ basis.T) @ basis).astype(np.float32)


def _directions(probe, basis: np.ndarray) -> np.ndarray:
    """The probe's label contrasts in the vectors' coordinates, orthogonal to ``basis``, orthonormal."""
    weight = probe.module.net.weight.detach().double().numpy() / probe.std.double().numpy()  # standardised -> raw
    contrasts = weight - weight.mean(0, keepdims=True)  # softmax reads only differences between rows
    if len(basis):
        contrasts = contrasts - (contrasts @ basis.T) @ basis  # in float64, unlike project()'s float32 output
    u, s, vt = np.linalg.svd(contrasts, full_matrices=False)
    keep = s > 1e-6 * max(float(s.max()), 1e-12)
    return vt[keep]


def inlp(
    X: np.ndarray,
    y: np.ndarray,
    X_dev: np.ndarray,
    y_dev: np.ndarray,
    n_labels: int,
    iterations: int = 20,
    tolerance: float = 0.02,
    config: ProbeConfig = INLP_PROBE,
    max_rank: Optional[int] = None,
    log: Callable[[str], None] = lambda message: None,
) -> INLPResult:
    """Remove the property's linear directions from ``X`` (see the module docstring)."""
    X, X_dev = np.asarray(X, dtype=np.float32), np.asarray(X_dev, dtype=np.float32)
    y, y_dev = np.asarray(y), np.asarray(y_dev)
    if n_labels < 2 or len(np.unique(y)) < 2:
        raise ValueError("INLP needs a property with at least two labels in training; this one has one")
    dim = X.shape[1]
    max_rank = dim if max_rank is None else max_rank
    if not 0 < max_rank <= dim:
        raise ValueError(f"rank {max_rank} is larger than the layer's width {dim} (or not positive)")
    majority = float((y_dev == np.bincount(y, minlength=n_labels).argmax()).mean())
    basis = np.zeros((0, dim))
    result = INLPResult(basis, [], majority, [])
    for i in range(iterations + 1):
        probe = fit_probe(project(X, basis), y, project(X_dev, basis), y_dev, n_labels, config)
        accuracy = probe.accuracy(project(X_dev, basis), y_dev)
        result.accuracy.append(accuracy)
        log(f"  INLP iteration {i}: rank {len(basis)}, dev accuracy {accuracy:.4f} (majority {majority:.4f})")
        if i == iterations or accuracy <= majority + tolerance or len(basis) >= max_rank:
            break
        new = _directions(probe, basis)[: max_rank - len(basis)]
        if not len(new):
            break
        # orthonormal again in float64: rows found one batch at a time drift from orthogonal, and a basis
        # that is not orthonormal leaves part of what it was meant to remove
        q, _ = np.linalg.qr(np.concatenate([basis, new]).T)
        basis = q.T
        result.ranks.append(len(basis))
    result.basis = basis
    return result


def random_basis(dim: int, rank: int, seed: int) -> np.ndarray:
    """An orthonormal basis of a random ``rank``-dimensional subspace (the control of a removal)."""
    if not 0 <= rank <= dim:
        raise ValueError(f"rank {rank} is larger than the layer's width {dim}")
    q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(dim, rank)))
    return q.T.astype(np.float32)
