"""How sure a number is: bootstrap intervals over the independent test units, paired comparisons,
and the one function that says them in words (CLI, ``report``, the app and the docs).

A probe's test score is a ratio of sums over test items, ``sum(value) / sum(weight)`` (accuracy:
value 1 for a right answer, weight 1; UUAS: per sentence the right edges over its gold edges).
Items of one unit (a sentence: its tokens, spans, dependents or sense instances) are correlated,
so the bootstrap resamples *units*, not items (Dror et al. 2018; Berg-Kirkpatrick et al. 2012 for
the paired test). One :class:`Bootstrap` draws its resamples once per test set and every score and
baseline of a run is computed on the same ones: a layer and a baseline are compared *paired*, on
the same resampled test sets, which is what makes a small difference on a large test set
detectable.

Why not ``scipy.stats.bootstrap``: it draws new resamples on every call, so two scores of the same
run would not share them and their difference could not be read off paired; here one resample is
a row of unit indices and a score on all of them is one gather and a sum (or, for counts, one
product with how often each unit is drawn), for any number of scorers. The interval is the
percentile interval (its coverage is tested in ``tests/test_stats.py``: 93-97% of 400 synthetic
test sets with a known accuracy).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

RESAMPLES = 2000
LEVEL = 0.95
COUNTS_BYTES = 64 << 20  # the draw counts as a matrix up to this size (2,000 resamples of 4,000 units)
SMALL_UNITS = 50  # fewer test units than this: a warning
WIDE = 0.05  # a half-width above this at the majority rate: a warning


@dataclass(frozen=True)
class Outcomes:
    """One scorer on one test set: ``value`` and ``weight`` per item, ``unit`` the item's
    independent unit (a sentence), numbered 0..n_units-1. Score = sum(value) / sum(weight)."""

    value: np.ndarray
    unit: np.ndarray
    weight: Optional[np.ndarray] = None

    @property
    def score(self) -> float:
        w = np.ones(len(self.value)) if self.weight is None else self.weight
        return float(np.sum(self.value) / np.sum(w)) if np.sum(w) else float("nan")

    def per_unit(self, n_units: int) -> tuple[np.ndarray, np.ndarray]:
        """(sum of values, sum of weights) per unit."""
        w = np.ones(len(self.value)) if self.weight is None else self.weight
        unit = np.asarray(self.unit, dtype=np.int64)
        return (
            np.bincount(unit, weights=np.asarray(self.value, dtype=np.float64), minlength=n_units),
            np.bincount(unit, weights=np.asarray(w, dtype=np.float64), minlength=n_units),
        )


def unit_ids(keys: Sequence) -> np.ndarray:
    """Unit numbers 0, 1, ... for items given by any hashable key (a sentence index, its words),
    in order of first appearance."""
    seen: dict = {}
    return np.array([seen.setdefault(k, len(seen)) for k in keys], dtype=np.int64)


class Bootstrap:
    """``resamples`` draws of ``n_units`` units with replacement (seeded), shared by every score."""

    def __init__(self, n_units: int, resamples: int = RESAMPLES, seed: int = 0):
        if n_units < 1:
            raise ValueError("a bootstrap needs at least one test unit")
        self.n_units = n_units
        rng = np.random.default_rng(seed)
        self.draws = rng.integers(0, n_units, size=(resamples, n_units), dtype=np.int32)
        self._done: dict[int, tuple[Outcomes, np.ndarray]] = {}  # a scorer's interval and comparisons share it
        self._counts: Optional[np.ndarray] = None  # (resamples, n_units): how often each resample draws each unit

    def distribution(self, outcomes: Outcomes) -> np.ndarray:
        """The score on each resampled test set, ``(resamples,)``; computed once per scorer."""
        seen = self._done.get(id(outcomes))
        if seen is not None and seen[0] is outcomes:
            return seen[1]
        num, den = outcomes.per_unit(self.n_units)
        totals = self._sums(den)
        with np.errstate(invalid="ignore", divide="ignore"):
            scores = self._sums(num) / totals
        self._done[id(outcomes)] = (outcomes, scores)  # the scorer is kept, so its id is not reused
        return scores

    def _sums(self, per_unit: np.ndarray) -> np.ndarray:
        """Each resample's sum of the per-unit values, ``(resamples,)``. Whole numbers (counts: right
        answers, items) are summed as one product with how often each resample draws each unit, which
        gives the same numbers in any order of adding (EWT's 2,077 test sentences: 1.2 ms against 15-20 ms
        gathered and summed; a run computes dozens); others, or draws too many for that matrix
        (``COUNTS_BYTES``), are gathered and summed."""
        whole = np.array_equal(per_unit, np.round(per_unit)) and np.abs(per_unit).sum() < 2**52 / self.n_units
        if not whole or self.draws.size * 8 > COUNTS_BYTES:
            return per_unit[self.draws].sum(axis=1)
        if self._counts is None:
            resamples, n = self.draws.shape
            cells = (np.arange(resamples, dtype=np.int64)[:, None] * n + self.draws).ravel()
            self._counts = np.bincount(cells, minlength=resamples * n).reshape(resamples, n).astype(np.float64)
        return self._counts @ per_unit.astype(np.float64)

    def interval(self, outcomes: Outcomes, level: float = LEVEL) -> list[float]:
        """The percentile interval of the score, ``[lo, hi]``."""
        d = self.distribution(outcomes)
        d = d[np.isfinite(d)]
        if not len(d):
            return [float("nan"), float("nan")]
        lo, hi = np.quantile(d, [(1 - level) / 2, 1 - (1 - level) / 2])
        return [float(lo), float(hi)]

    def compare(self, a: Outcomes, b: Outcomes, level: float = LEVEL) -> dict:
        """a - b on the same test items: the difference, its paired-bootstrap interval and the
        two-sided p-value of "no difference" (the share of resampled differences, centred on the
        observed one, at least as far from 0 as the observed one)."""
        diff = a.score - b.score
        d = self.distribution(a) - self.distribution(b)
        d = d[np.isfinite(d)]
        lo, hi = np.quantile(d, [(1 - level) / 2, 1 - (1 - level) / 2])
        p = float(np.mean(np.abs(d - diff) >= abs(diff) - 1e-12))
        return {"diff": float(diff), "ci95": [float(lo), float(hi)], "p": p}


def check_seeds(seeds) -> list[int]:
    """A list of seeds: whole numbers >= 0, at least one, none repeated (a repeated seed would count
    one fit twice in the sd)."""
    if not isinstance(seeds, list) or not seeds:
        raise ValueError(f"seeds must be a non-empty list of whole numbers >= 0, e.g. [0, 1, 2], got {seeds!r}")
    bad = [s for s in seeds if not isinstance(s, int) or isinstance(s, bool) or s < 0]
    if bad:
        raise ValueError(f"seeds must be whole numbers >= 0, got {bad}")
    repeated = sorted({s for s in seeds if seeds.count(s) > 1})
    if repeated:
        raise ValueError(f"seeds {repeated} are repeated: each seed once")
    return seeds


def half_width(ci: Sequence[float]) -> float:
    return (ci[1] - ci[0]) / 2


def differs(comparison: dict) -> bool:
    """True when the interval of the difference excludes 0: the one test every claim passes."""
    lo, hi = comparison["ci95"]
    return lo > 0 or hi < 0


# --- in words --------------------------------------------------------------------------------------


def fmt(score: float, ci: Optional[Sequence[float]] = None, digits: int = 3, style: str = "interval") -> str:
    """``0.934 [0.931, 0.937]`` (``style="interval"``), ``0.934 ±0.003`` (``"plus_minus"``, the
    half-width: the docs tables), or the score alone without an interval; "n/a" without a score."""
    if score is None or score != score:
        return "n/a"
    if ci is None or any(c != c for c in ci):
        return f"{score:.{digits}f}"
    if style == "plus_minus":
        return f"{score:.{digits}f} ±{half_width(ci):.{digits}f}"
    return f"{score:.{digits}f} [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


def plus_minus(score: Optional[float], ci: Optional[Sequence[float]] = None, digits: int = 3) -> str:
    """``0.934 ±0.003``; an empty cell without a score."""
    return "" if score is None or score != score else fmt(score, ci, digits, "plus_minus")


def verdict(a: str, score_a: float, ci_a, b: str, comparison: dict, digits: int = 3) -> str:
    """One comparison in words: "L1 0.934 [0.931, 0.937] beats L2 by 0.003 [0.001, 0.005]", or
    "L1 and L2 do not differ (difference 0.003 [-0.002, 0.008])"."""
    diff, (lo, hi) = comparison["diff"], comparison["ci95"]
    interval = f"[{lo:.{digits}f}, {hi:.{digits}f}]"
    if not differs(comparison):
        return f"{a} and {b} do not differ (difference {diff:+.{digits}f} {interval})"
    if diff > 0:
        return f"{a} {fmt(score_a, ci_a, digits)} beats {b} by {diff:.{digits}f} {interval}"
    return f"{a} {fmt(score_a, ci_a, digits)} is below {b} by {-diff:.{digits}f} [{-hi:.{digits}f}, {-lo:.{digits}f}]"
