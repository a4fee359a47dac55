"""``avalanche_sets.metrics.stats`` against hand computations and scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from avalanche_sets.metrics import stats

# Four domains, entries in eighths. Row i: after training on domain i.
# Column 1 is high (7/8) before domain 1 is trained; column 3 is low before domain 3 is trained.
A = (
    np.array(
        [
            [5, 7, 1, 2],
            [6, 6, 2, 2],
            [4, 5, 7, 2],
            [3, 5, 6, 7],
        ]
    )
    / 8
)
# By hand: f_0 = max(5, 6, 4)/8 − 3/8, f_1 = max(6, 5)/8 − 5/8 (row 0 is before its training),
# f_2 = 7/8 − 6/8; domain 3 has no later row.
F_HAND = [3 / 8, 1 / 8, 1 / 8]
AVG_F_HAND = 5 / 24
BWT_HAND = ((3 - 5) + (5 - 6) + (6 - 7)) / 8 / 3  # −1/6


# ---------------------------------------------------------------------------- forgetting, BWT
def test_forgetting_and_bwt_by_hand():
    f = stats.forgetting(A)
    np.testing.assert_allclose(f[:3], F_HAND, atol=1e-15)
    assert math.isnan(f[3])  # the last domain is excluded, not counted from pre-training rows
    assert stats.average_forgetting(A) == pytest.approx(AVG_F_HAND, abs=1e-15)
    assert stats.backward_transfer(A) == pytest.approx(BWT_HAND, abs=1e-15)
    assert stats.average_accuracy(A) == pytest.approx(21 / 32)


def test_forgetting_edge_cases():
    # one row (a single trained domain), a 1 × 1 matrix, an empty one: nothing is defined
    for m in (A[:1], A[:1, :1], np.zeros((0, 0))):
        assert np.isnan(stats.forgetting(m)).all()
        assert math.isnan(stats.average_forgetting(m))
        assert math.isnan(stats.backward_transfer(m))
    assert math.isnan(stats.average_accuracy(np.zeros((0, 3))))
    # two rows of four columns: only domain 0 has a later row
    f = stats.forgetting(A[:2])
    assert f[0] == pytest.approx(5 / 8 - 6 / 8) and np.isnan(f[1:]).all()
    assert stats.backward_transfer(A[:2]) == pytest.approx(6 / 8 - 5 / 8)
    # NaN cells (not evaluated) are left out of the max; a NaN final entry leaves the domain out
    m = A.copy()
    m[1, 0] = np.nan
    assert stats.forgetting(m)[0] == pytest.approx(5 / 8 - 3 / 8)
    m[3, 1] = np.nan
    assert math.isnan(stats.forgetting(m)[1])
    assert stats.average_forgetting(m) == pytest.approx((2 / 8 + 1 / 8) / 2)
    assert stats.backward_transfer(m) == pytest.approx(((3 - 5) + (6 - 7)) / 8 / 2)
    with pytest.raises(ValueError, match="2-D"):
        stats.forgetting(np.zeros((2, 2, 2)))


# ---------------------------------------------------------------------------- CIs
def test_episode_ci_is_normal_with_the_standard_error():
    x = np.random.default_rng(0).uniform(0.2, 0.9, 50)
    sem = sps.sem(x)  # s / √n with ddof = 1
    assert stats.ci95(x) == pytest.approx(1.96 * sem, rel=1e-12)
    # the same interval as scipy's normal one (1.96 is z_0.975 rounded to three digits)
    lo, hi = sps.norm.interval(0.95, loc=x.mean(), scale=sem)
    assert stats.ci95(x) == pytest.approx((hi - lo) / 2, rel=1e-4)
    assert math.isnan(stats.ci95([0.5]))  # one episode: spread unknown, never 0
    assert math.isnan(stats.ci95([]))
    assert stats.ci95([0.5, 0.5]) == 0.0
    with pytest.raises(ValueError, match="NaN"):
        stats.ci95([0.5, float("nan"), 0.7])


def test_seed_ci_is_student_t():
    vals = [0.5, 0.6, 0.55]
    lo, hi = sps.t.interval(0.95, df=2, loc=np.mean(vals), scale=sps.sem(vals))
    assert stats.seed_ci95(vals) == pytest.approx((hi - lo) / 2, rel=1e-12)
    assert stats.seed_ci95(vals) == pytest.approx(4.302653 * 0.05 / math.sqrt(3), rel=1e-6)
    assert math.isnan(stats.seed_ci95([0.5]))
    with pytest.raises(ValueError):
        stats.t_quantile_95(1)


def test_stratified_ci_by_hand():
    g = [np.array([0.2, 0.4, 0.6]), np.array([0.5, 0.7])]
    var = 0.04 / 3 + 0.02 / 2  # s_0² = 0.04, s_1² = 0.02
    assert stats.stratified_ci95(g) == pytest.approx(1.96 * math.sqrt(var) / 2)
    assert math.isnan(stats.stratified_ci95([np.array([0.5]), np.array([0.5, 0.7])]))
    assert math.isnan(stats.stratified_ci95([]))


# ---------------------------------------------------------------------------- paired Δ
def test_paired_difference_by_hand_and_its_errors():
    a = np.array([0.6, 0.7, 0.9, 0.5])
    b = np.array([0.5, 0.7, 0.8, 0.3])
    d, ci = stats.paired_difference(a, b)
    diff = a - b  # 0.1, 0, 0.1, 0.2
    assert d == pytest.approx(0.1)
    assert ci == pytest.approx(1.96 * sps.sem(diff))
    # the paired CI is the CI of the differences, not of either run
    assert ci < stats.ci95(a)
    assert stats.paired_difference(a, a) == (0.0, 0.0)
    assert math.isnan(stats.paired_difference([0.6], [0.5])[1])
    with pytest.raises(ValueError, match="same test episodes"):
        stats.paired_difference(a, b[:3])
    with pytest.raises(ValueError, match="no episode"):
        stats.paired_difference([], [])


def test_combine_paired_over_seeds():
    d, ci = stats.combine_paired([(0.02, 0.006), (0.06, 0.008)])
    assert d == pytest.approx(0.04)
    assert ci == pytest.approx(0.01 / 2)  # sqrt(0.006² + 0.008²) / 2
    assert stats.combine_paired([(0.03, 0.01)]) == (0.03, 0.01)
    with pytest.raises(ValueError):
        stats.combine_paired([])


def test_paired_over_seeds_by_hand_pairs_by_seed_not_position():
    # b lists its seeds in another order, lacks seed 3 and has a seed 4 that a lacks
    a = {0: 0.60, 1: 0.55, 2: 0.70, 3: 0.50}
    b = {2: 0.62, 0: 0.58, 1: 0.50, 4: 0.90}
    got = stats.paired_over_seeds(a, b)
    # by hand: d = (0.60 - 0.58, 0.55 - 0.50, 0.70 - 0.62) = (0.02, 0.05, 0.08) over seeds 0, 1, 2
    # mean 0.05; deviations -0.03, 0, +0.03: sd = sqrt(2 * 0.0009 / 2) = 0.03
    # t(0.975, 2 df) = 4.302653 (printed t tables: 4.303); half-width 4.302653 * 0.03 / sqrt(3)
    assert got.seeds == (0, 1, 2)
    assert got.delta == pytest.approx(0.05)
    assert got.ci95 == pytest.approx(4.302653 * 0.03 / math.sqrt(3), rel=1e-6)
    assert got.ci95 == pytest.approx(0.0745242, rel=1e-5)
    assert not got.resolved  # 0.05 - 0.0745 < 0: the interval holds 0
    # a narrower spread: d = (0.04, 0.05, 0.06), sd 0.01, half-width 0.0248 < 0.05: resolved
    tight = stats.paired_over_seeds({0: 0.54, 1: 0.55, 2: 0.56}, {2: 0.5, 1: 0.5, 0: 0.5})
    assert tight.ci95 == pytest.approx(4.302653 * 0.01 / math.sqrt(3), rel=1e-6)
    assert tight.resolved and tight.delta == pytest.approx(0.05)
    # the same sign on both seeds and a tiny spread: still no claim from 2 seeds
    # d = (0.050, 0.051): sd = 0.001 / sqrt(2), t(0.975, 1 df) = 12.706205
    two = stats.paired_over_seeds({0: 0.550, 1: 0.551}, {0: 0.5, 1: 0.5})
    assert two.ci95 == pytest.approx(12.706205 * 0.001 / math.sqrt(2) / math.sqrt(2), rel=1e-6)
    assert abs(two.delta) > two.ci95 and not two.resolved
    one = stats.paired_over_seeds({0: 0.6}, {0: 0.5, 1: 0.4})
    assert one.seeds == (0,) and math.isnan(one.ci95) and not one.resolved
    with pytest.raises(ValueError, match="no seed in common"):
        stats.paired_over_seeds({0: 0.5}, {1: 0.5})


@pytest.mark.parametrize(
    ("delta", "half", "k", "resolved"),
    [(0.05, 0.04, 3, True), (-0.05, 0.04, 3, True), (0.05, 0.05, 3, False),
     (0.05, 0.06, 5, False), (0.05, 0.001, 2, False), (0.05, math.nan, 3, False)],
)  # fmt: skip
def test_resolved_needs_three_seeds_and_an_interval_without_zero(delta, half, k, resolved):
    assert stats.resolved_over_seeds(delta, half, k) is resolved


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 10, 11, 30, 31, 100, 1001])
def test_the_t_quantile_is_scipys_without_scipy(n):
    # odd and even degrees of freedom take different closed forms
    assert stats.t_quantile_95(n) == pytest.approx(sps.t.ppf(0.975, n - 1), rel=1e-12)


def test_seed_ci95_along_an_axis_is_the_ci_of_each_position():
    x = np.random.default_rng(0).uniform(size=(3, 2, 4))  # 3 seeds of 2 x 4 matrices
    each = stats.seed_ci95(x, axis=0)
    assert each.shape == (2, 4)
    for i in range(2):
        for j in range(4):
            assert each[i, j] == pytest.approx(stats.seed_ci95(x[:, i, j]))
    assert np.isnan(stats.seed_ci95(x[:1], axis=0)).all()
    with pytest.raises(ValueError, match="NaN"):
        stats.seed_ci95(np.array([[0.1, np.nan], [0.2, 0.3]]), axis=0)
