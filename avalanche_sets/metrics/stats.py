"""The one definition of every statistic avalanche-sets reports.

Everything that turns accuracies into a reported number goes through this module: the runner
(``result.json``, ``table.md``), the reporting tables, the Avalanche metrics
(:class:`~avalanche_sets.metrics.EpisodeAccuracy`, :class:`~avalanche_sets.metrics.AccuracyMatrix`)
and the benchmark scripts. Plain functions on numpy arrays; no state.

Confidence intervals (all two-sided 95%, returned as the half-width ``h`` of ``mean ± h``):

* over **episodes** (:func:`ci95`, :func:`stratified_ci95`, :func:`paired_difference`): a
  *normal* interval, ``1.96 · s / √n`` — hundreds of test episodes make the t quantile
  indistinguishable from 1.96 (t₀.₉₇₅ with 99 degrees of freedom is 1.984);
* over **seeds** (:func:`seed_ci95`, :func:`paired_over_seeds`): a *Student-t* interval,
  ``t₀.₉₇₅(k−1) · s / √k`` — with k = 3 seeds ``t = 4.30``, so treating seeds as normal would
  understate the width twofold.

A paired difference between two methods has both: the episode-level interval
(:func:`combine_paired`) says how well the test episodes drawn pin down *these* trained models'
difference; the seed-level one (:func:`paired_over_seeds`) says whether the difference would
hold for other training seeds. Only the latter may call a difference between methods
*resolved* (:func:`resolved_over_seeds`: at least :data:`MIN_SEEDS_TO_RESOLVE` seeds and an
interval that excludes 0).

``s`` is always the sample standard deviation (``ddof = 1``); the spread of one value is
unknown, so every CI of fewer than two values is NaN (never 0).

Accuracy matrix ``a`` of ``T`` rows (:func:`forgetting`, :func:`average_forgetting`,
:func:`backward_transfer`): ``a[i, j]`` is the accuracy on domain ``j`` after training on
domains ``0..i``; domain ``j`` is the one trained at row ``j``. Only the domains ``j < T − 1``
have a row after their own training, so the last trained domain has neither forgetting nor
backward transfer (NaN), and the rows before domain ``j`` was trained never enter its numbers:

* forgetting (Chaudhry et al. 2018): ``f_j = max_{j ≤ i < T−1} a[i, j] − a[T−1, j]``
  (positive: forgotten), average forgetting ``F = mean_{j < T−1} f_j``;
* backward transfer (Lopez-Paz & Ranzato 2017): ``BWT = mean_{j < T−1} (a[T−1, j] − a[j, j])``
  (negative: forgotten).

A NaN cell of the matrix means "not evaluated" (partial evaluations of
:class:`~avalanche_sets.metrics.AccuracyMatrix`): it is left out of the max; a domain whose
final or diagonal entry is NaN has no value, and the averages are over the domains that have one
(NaN when none does: one row, or a single domain).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import NamedTuple

import numpy as np

__all__ = [
    "Z_95",
    "ci95",
    "stratified_ci95",
    "seed_ci95",
    "t_quantile_95",
    "as_matrix",
    "average_accuracy",
    "forgetting",
    "average_forgetting",
    "backward_transfer",
    "forgetting_record",
    "paired_difference",
    "combine_paired",
    "MIN_SEEDS_TO_RESOLVE",
    "SeedPaired",
    "paired_over_seeds",
    "resolved_over_seeds",
]

#: Two-sided 95% normal quantile used for every confidence interval over episodes.
Z_95 = 1.96

ArrayLike = Sequence[float] | np.ndarray


def _vector(values: ArrayLike | Iterable[float], what: str) -> np.ndarray:
    x = np.asarray(values, dtype=np.float64).ravel()
    if np.isnan(x).any():
        raise ValueError(
            f"{what}: {int(np.isnan(x).sum())} of {x.size} values are NaN; a CI of a sample "
            "with missing values is undefined — drop or fill them explicitly first"
        )
    return x


# ---------------------------------------------------------------------------- confidence intervals
def ci95(values: ArrayLike) -> float:
    """Half-width of the normal 95% CI of the mean of ``values`` (e.g. test episodes).

    Args:
        values: ``[n]`` (any shape is flattened) sample, e.g. per-episode accuracies.

    Returns:
        ``1.96 · s / √n`` with ``s`` the sample standard deviation (``ddof = 1``); NaN for
        ``n < 2`` (one episode: the spread is unknown).

    Raises:
        ValueError: a value is NaN.
    """
    x = _vector(values, "ci95")
    if x.size < 2:
        return float("nan")
    return float(Z_95 * x.std(ddof=1) / math.sqrt(x.size))


def stratified_ci95(groups: Sequence[ArrayLike]) -> float:
    """Normal 95% CI half-width of the mean of ``D`` group means, groups fixed.

    Args:
        groups: ``D`` samples ``[n_d]`` (e.g. the episode accuracies of each domain).

    Returns:
        ``1.96 · sqrt(Σ_d s_d² / n_d) / D``: the standard error of the mean of the group means
        when only the sampling within groups varies. NaN when a group has fewer than two
        values, or there is no group.

    Raises:
        ValueError: a value is NaN.
    """
    xs = [_vector(g, "stratified_ci95") for g in groups]
    if not xs or any(x.size < 2 for x in xs):
        return float("nan")
    var = sum(x.var(ddof=1) / x.size for x in xs)
    return float(Z_95 * math.sqrt(var) / len(xs))


def _t_central_probability(t: float, df: int) -> float:
    """``P(|T| < t)`` for Student's t with ``df`` degrees of freedom (``t ≥ 0``).

    The closed form for integer ``df`` (Abramowitz & Stegun 26.7.3–4): a finite sum of powers
    of ``cos θ``, ``θ = atan(t / √df)``; exact to rounding, with the standard library alone.
    """
    theta = math.atan(t / math.sqrt(df))
    c2, s = math.cos(theta) ** 2, math.sin(theta)
    if df % 2 == 0:  # sin θ (1 + 1/2 c² + 1·3/(2·4) c⁴ + … up to c^(df−2))
        term = total = 1.0
        for k in range(1, df // 2):
            term *= c2 * (2 * k - 1) / (2 * k)
            total += term
        return s * total
    if df == 1:
        return 2 * theta / math.pi
    # (2/π)(θ + sin θ cos θ (1 + 2/3 c² + 2·4/(3·5) c⁴ + … up to c^(df−3)))
    term = total = 1.0
    for k in range(1, (df - 1) // 2):
        term *= c2 * (2 * k) / (2 * k + 1)
        total += term
    return 2 / math.pi * (theta + s * math.cos(theta) * total)


@functools.cache
def t_quantile_95(n: int) -> float:
    """``t₀.₉₇₅`` of Student's t with ``n − 1`` degrees of freedom (``n ≥ 2``).

    Solved by bisection on the exact t distribution (:func:`_t_central_probability`), so the
    seed intervals need neither scipy nor its import time (``avalanche-sets table`` reads
    thousands of records in well under a second).
    """
    if n < 2:
        raise ValueError(f"a t quantile needs at least 2 values, got {n}")
    lo, hi = Z_95 - 0.01, 20.0
    while _t_central_probability(hi, n - 1) < 0.95:  # df = 1 needs 12.71; never loops twice
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if _t_central_probability(mid, n - 1) < 0.95:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-13:
            break
    return (lo + hi) / 2


def seed_ci95(values: ArrayLike, axis: int | None = None) -> float | np.ndarray:
    """Half-width of the Student-t 95% CI of the mean over seeds.

    Args:
        values: ``[k]`` one number per training seed (e.g. each seed's mean accuracy); with
            ``axis``, an array whose ``axis`` runs over the seeds (e.g. ``[k, T, D]`` accuracy
            matrices, ``axis=0``).

    Returns:
        ``t₀.₉₇₅(k − 1) · s / √k`` (``s`` with ``ddof = 1``); NaN for one seed. With ``axis``:
        an array of them, one per position of the other axes.

    Raises:
        ValueError: a value is NaN.
    """
    if axis is None:
        x = _vector(values, "seed_ci95")
        if x.size < 2:
            return float("nan")
        return float(t_quantile_95(x.size) * x.std(ddof=1) / math.sqrt(x.size))
    x = np.asarray(values, dtype=np.float64)
    _vector(x, "seed_ci95")
    k = x.shape[axis]
    if k < 2:
        return np.full(np.delete(x.shape, axis), np.nan)
    return t_quantile_95(k) * x.std(axis=axis, ddof=1) / math.sqrt(k)


# ---------------------------------------------------------------------------- accuracy matrix
def as_matrix(matrix: np.ndarray | Sequence[Sequence[float]]) -> np.ndarray:
    """``matrix`` as a float64 ``[T, n_domains]`` array; ValueError if it is not 2-D."""
    m = np.asarray(matrix, dtype=np.float64)
    if m.ndim == 1 and m.size == 0:
        return m.reshape(0, 0)
    if m.ndim != 2:
        raise ValueError(f"an accuracy matrix must be 2-D [n_trained, n_domains], got {m.shape}")
    return m


def average_accuracy(matrix: np.ndarray | Sequence[Sequence[float]]) -> float:
    """Mean of the last row ``[T, n_domains] → float`` over its evaluated (non-NaN) entries.

    With a square matrix: the mean accuracy over all domains after the whole stream (the
    paper's headline number). NaN for an empty matrix or a last row without any value.
    """
    m = as_matrix(matrix)
    if m.shape[0] == 0:
        return float("nan")
    last = m[-1][np.isfinite(m[-1])]
    return float(last.mean()) if last.size else float("nan")


def forgetting(matrix: np.ndarray | Sequence[Sequence[float]]) -> np.ndarray:
    """Per-domain forgetting ``[T, n_domains] → [n_domains]`` (Chaudhry et al. 2018).

    ``f_j = max_{j ≤ i < T−1} a[i, j] − a[T−1, j]`` for ``j < T − 1``: the best accuracy on
    domain ``j`` from its own training until before the last row, minus the final one.
    Positive = forgotten. NaN for ``j ≥ T − 1`` (the last trained domain and any domain not
    trained yet have no later row), and where the final entry or every candidate of the max
    is NaN (not evaluated).
    """
    m = as_matrix(matrix)
    n_rows, n_cols = m.shape
    out = np.full(n_cols, np.nan)
    for j in range(min(n_cols, n_rows - 1)):
        before = m[j : n_rows - 1, j]
        before = before[np.isfinite(before)]
        if before.size and np.isfinite(m[-1, j]):
            out[j] = before.max() - m[-1, j]
    return out


def _mean_defined(values: np.ndarray) -> float:
    defined = values[np.isfinite(values)]
    return float(defined.mean()) if defined.size else float("nan")


def average_forgetting(matrix: np.ndarray | Sequence[Sequence[float]]) -> float:
    """Average forgetting ``[T, n_domains] → float``: ``mean_{j < T−1} f_j`` (:func:`forgetting`).

    The last trained domain is excluded (it has no later row); domains without a value
    (NaN cells) are left out; NaN when no domain has one (one row, or a single domain).
    """
    return _mean_defined(forgetting(matrix))


def backward_transfer(matrix: np.ndarray | Sequence[Sequence[float]]) -> float:
    """Backward transfer ``[T, n_domains] → float`` (Lopez-Paz & Ranzato 2017).

    ``BWT = mean_{j < T−1} (a[T−1, j] − a[j, j])``; negative = forgotten. Domains whose diagonal
    or final entry is NaN are left out; NaN when no domain is left (one row, a single domain).
    """
    m = as_matrix(matrix)
    n_rows, n_cols = m.shape
    diffs = np.array([m[-1, j] - m[j, j] for j in range(min(n_rows - 1, n_cols))], dtype=np.float64)
    return _mean_defined(diffs)


def forgetting_record(matrix: np.ndarray | Sequence[Sequence[float]]) -> dict:
    """The forgetting numbers of a run record, as ``result.json`` holds them: ``forgetting``
    (per domain), ``average_forgetting`` and ``bwt``, an undefined number as ``None`` (JSON has
    no NaN)."""

    def plain(v: float) -> float | None:
        return float(v) if math.isfinite(v) else None

    m = as_matrix(matrix)
    return {
        "forgetting": [plain(v) for v in forgetting(m)],
        "average_forgetting": plain(average_forgetting(m)),
        "bwt": plain(backward_transfer(m)),
    }


# ---------------------------------------------------------------------------- paired differences
def paired_difference(a: ArrayLike, b: ArrayLike) -> tuple[float, float]:
    """Mean per-episode difference ``a − b`` on the *same* episodes, with its normal 95% CI.

    Args:
        a, b: ``[n]`` per-episode accuracies of two runs evaluated on identical episodes (same
            benchmark seed), in the same order.

    Returns:
        ``(mean(d), ci95(d))`` for ``d = a − b`` (:func:`ci95`: NaN for one episode). Pairing
        removes the spread between episodes and domains that both runs share.

    Raises:
        ValueError: different lengths (not the same episodes), or a NaN value.
    """
    x, y = _vector(a, "paired_difference"), _vector(b, "paired_difference")
    if x.shape != y.shape:
        raise ValueError(
            f"paired differences need the same test episodes: {x.size} against {y.size} values"
        )
    d = x - y
    if d.size == 0:
        raise ValueError("paired differences of no episode")
    return float(d.mean()), ci95(d)


def combine_paired(pairs: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Combine per-seed paired differences ``(Δ_s, h_s)`` into ``(mean_s Δ_s, sqrt(Σ h_s²) / k)``.

    The ± is the episode-level CI of the mean of ``k`` independent per-seed means (each seed
    draws its own episodes); it does not include the variation between training seeds.

    Raises:
        ValueError: no pair.
    """
    if not pairs:
        raise ValueError("combine_paired needs at least one (delta, ci) pair")
    k = len(pairs)
    d = sum(p[0] for p in pairs) / k
    ci = math.sqrt(sum(p[1] ** 2 for p in pairs)) / k
    return d, ci


#: The fewest seeds whose paired interval may call a difference resolved: with 2 seeds the
#: interval is t₀.₉₇₅(1) = 12.7 standard errors wide and its sample standard deviation rests on
#: one degree of freedom, so no seed-level claim is made from fewer than 3.
MIN_SEEDS_TO_RESOLVE = 3


class SeedPaired(NamedTuple):
    """A paired difference over training seeds (:func:`paired_over_seeds`)."""

    delta: float
    """Mean over the paired seeds of ``a[s] − b[s]``."""
    ci95: float
    """Student-t 95% half-width over those seeds (:func:`seed_ci95`; NaN for one seed)."""
    seeds: tuple
    """The seeds both sides have, sorted: ``k = len(seeds)``."""

    @property
    def resolved(self) -> bool:
        """:func:`resolved_over_seeds` of this difference."""
        return resolved_over_seeds(self.delta, self.ci95, len(self.seeds))


def paired_over_seeds(a: Mapping[Hashable, float], b: Mapping[Hashable, float]) -> SeedPaired:
    """The paired Student-t interval over training seeds of ``a − b``, paired by seed.

    Args:
        a, b: ``{seed: value}``, one number per training seed of each side (e.g. a run's mean
            test accuracy). Values are paired by their seed, never by their position: a seed
            only one side has is left out.

    Returns:
        :class:`SeedPaired` ``(mean_s d_s, t₀.₉₇₅(k−1) · sd(d) / √k, seeds)`` for the per-seed
        differences ``d_s = a[s] − b[s]`` over the ``k`` seeds both have (``sd`` with
        ``ddof = 1``; the half-width is NaN for ``k = 1``). Unlike :func:`combine_paired` it
        includes the variation between training seeds.

    Raises:
        ValueError: no seed in common, or a NaN value.
    """
    seeds = sorted(set(a) & set(b))
    if not seeds:
        raise ValueError(
            f"paired_over_seeds: no seed in common (a has {sorted(a)}, b has {sorted(b)})"
        )
    d = _vector([a[s] - b[s] for s in seeds], "paired_over_seeds")
    return SeedPaired(float(d.mean()), float(seed_ci95(d)), tuple(seeds))


def resolved_over_seeds(delta: float, ci95: float, k: int) -> bool:
    """Whether a paired difference over ``k`` seeds is resolved: ``k ≥``
    :data:`MIN_SEEDS_TO_RESOLVE` and its seed-level interval ``delta ± ci95`` excludes 0
    (``|delta| > ci95``; an interval that ends at 0 does not exclude it)."""
    return k >= MIN_SEEDS_TO_RESOLVE and math.isfinite(ci95) and abs(delta) > ci95
