"""Tests of the task reservoir (Vitter's Algorithm R)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from avalanche_sets.functional import Reservoir


def test_fills_slots_in_order_then_replaces():
    r = Reservoir(3, seed=0)
    assert [r.offer(i) for i in range(3)] == [0, 1, 2]
    assert r.items == [0, 1, 2] and len(r) == 3 and r.n_seen == 3 and r.is_full()
    for i in range(3, 100):
        slot = r.offer(i)
        assert slot is None or (0 <= slot < 3 and r[slot] == i)
    assert r.n_seen == 100 and len(r) == 3


def test_keep_frequency_is_uniform_over_a_long_stream():
    n, m, runs = 1000, 50, 400
    counts = np.zeros(n, dtype=np.int64)
    for seed in range(runs):
        r = Reservoir(m, seed=seed)
        for i in range(n):
            r.offer(i)
        kept = r.items
        assert len(set(kept)) == m
        counts[kept] += 1
    q = m / n
    # chi-square over items; each count is Binomial(runs, M/n) (sum fixed: n - 1 dof)
    stat = float(((counts - runs * q) ** 2).sum() / (runs * q * (1 - q)))
    assert stats.chi2.sf(stat, n - 1) > 1e-3, stat
    # per-item binomial bound with a Bonferroni correction
    alpha = 1e-3 / n
    lo, hi = stats.binom.ppf(alpha / 2, runs, q), stats.binom.isf(alpha / 2, runs, q)
    assert counts.min() >= lo and counts.max() <= hi, (counts.min(), counts.max(), lo, hi)
    # early and late items are kept equally often (no recency bias)
    assert abs(counts[:500].mean() - counts[500:].mean()) < 2.0


def test_state_dict_round_trip_gives_identical_future_decisions():
    a = Reservoir(20, seed=5)
    for i in range(300):
        a.offer(i)
    b = Reservoir(20, seed=999)
    b.load_state_dict(a.state_dict())
    assert b.items == a.items and b.n_seen == a.n_seen
    assert [a.offer(i) for i in range(300, 800)] == [b.offer(i) for i in range(300, 800)]
    assert a.items == b.items
    assert a.sample(5) == b.sample(5)
    with pytest.raises(ValueError, match="capacity"):
        Reservoir(10).load_state_dict(a.state_dict())


def test_same_seed_same_decisions_different_seed_different():
    def run(seed):
        r = Reservoir(10, seed=seed)
        return [r.offer(i) for i in range(200)]

    assert run(1) == run(1)
    assert run(1) != run(2)


def test_sample():
    r = Reservoir(10, seed=0)
    assert r.sample(3) == []
    for i in range(25):
        r.offer(i)
    s = r.sample(4)
    assert len(s) == 4 and len(set(s)) == 4 and set(s) <= set(r.items)
    assert sorted(r.sample(50)) == sorted(r.items)  # b > len: everything once
    g1, g2 = np.random.default_rng(3), np.random.default_rng(3)
    assert r.sample(5, g1) == r.sample(5, g2)
    t1, t2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    assert r.sample(5, t1) == r.sample(5, t2)
    # sampling does not perturb the keep/replace decisions
    a, b = Reservoir(5, seed=1), Reservoir(5, seed=1)
    for i in range(50):
        a.offer(i)
        b.offer(i)
        a.sample(2)
    assert a.items == b.items
    with pytest.raises(ValueError):
        r.sample(-1)


@pytest.mark.parametrize("capacity", [0, -3, 2.5, True])
def test_bad_capacity_raises(capacity):
    with pytest.raises(ValueError, match="capacity"):
        Reservoir(capacity)


def test_draw_is_uniform_on_zero_to_n_minus_one_inclusive():
    calls = []

    class Stub:
        def __init__(self, value):
            self.value = value

        def integers(self, low, high):
            calls.append((low, high))
            return self.value(high)

    r = Reservoir(3, seed=0)
    for i in range(3):
        r.offer(i)
    r._rng = Stub(lambda high: high - 1)  # the largest value j = n - 1 >= M: discarded
    assert r.offer(3) is None and calls[-1] == (0, 4)  # numpy's high is exclusive
    r._rng = Stub(lambda high: 2)  # j = M - 1: kept, slot M - 1
    assert r.offer(4) == 2 and r.items == [0, 1, 4] and calls[-1] == (0, 5)
