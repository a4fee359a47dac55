"""The OT loss on padded, masked, fixed-shape point sets (ORDER's replayed features): masked
rows carry no mass, sub-sampling draws a uniform subset of the valid rows with random keys, and
the sync-free Sinkhorn (``tol=None``) reads nothing on the host and tracks the exact plan."""

from __future__ import annotations

import contextlib
import itertools
import math

import numpy as np
import pytest
import torch
from scipy.stats import chi2

from avalanche_sets.functional import ot_loss, ot_plan, squared_euclidean, subsample_rows


def _points(n: int, d: int, seed: int, dtype=torch.float64) -> torch.Tensor:
    return torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _mask(n: int, valid: list[int]) -> torch.Tensor:
    mask = torch.zeros(n, dtype=torch.bool)
    mask[valid] = True
    return mask


def _brute_force(x: torch.Tensor, y: torch.Tensor) -> float:
    c = squared_euclidean(x, y, expand=True).numpy()
    k = len(c)
    return min(sum(c[i, p[i]] for i in range(k)) for p in itertools.permutations(range(k))) / k


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("valid", [[0, 2, 3], [1, 4], [0, 1, 2, 3, 4], [3]])
def test_the_masked_loss_is_the_loss_of_the_valid_rows(valid, seed):
    """Exact solver: the masked loss is the optimum over permutations of the valid rows alone;
    whatever the padding rows hold (noise, huge values, NaN, inf) changes neither the loss nor
    the gradient of the valid rows, and the padding rows get no gradient."""
    n = 5
    x, y = _points(n, 3, seed), _points(n, 3, 50 + seed)
    mask = _mask(n, valid)
    expected = _brute_force(x[mask], y[mask])
    value = ot_loss(x, y, mask=mask)
    assert value.item() == pytest.approx(expected, rel=1e-10, abs=1e-12)
    assert ot_loss(x[mask], y[mask]).item() == pytest.approx(expected, rel=1e-10, abs=1e-12)

    grads = []
    for fill in (0.0, 1e6, float("nan"), float("inf"), None):
        xp, yp = x.clone(), y.clone()
        if fill is None:
            xp[~mask], yp[~mask] = _points(n, 3, 99)[~mask], _points(n, 3, 98)[~mask]
        else:
            xp[~mask], yp[~mask] = fill, -fill if fill == fill else fill
        xp.requires_grad_(True)
        v = ot_loss(xp, yp, mask=mask, refuse_non_finite=fill is not None and math.isfinite(fill))
        assert v.item() == pytest.approx(expected, rel=1e-10, abs=1e-12), fill
        (grad,) = torch.autograd.grad(v, xp)
        assert not grad[~mask].any() and torch.isfinite(grad).all()
        grads.append(grad)
    for g in grads[1:]:
        torch.testing.assert_close(g, grads[0])


@pytest.mark.parametrize("solver", ["exact", "sinkhorn"])
def test_the_masked_plan_has_uniform_marginals_on_the_valid_rows_only(solver):
    n, valid = 9, [0, 3, 4, 7]
    x, y = _points(n, 4, 1), _points(n, 4, 2)
    mask = _mask(n, valid)
    plan = ot_plan(squared_euclidean(x, y, expand=True), solver=solver, mask=mask, eps=0.01)
    want = mask.double() / len(valid)
    torch.testing.assert_close(plan.sum(1), want, atol=1e-8, rtol=0)
    torch.testing.assert_close(plan.sum(0), want, atol=1e-8, rtol=0)
    assert not plan[~mask].any() and not plan[:, ~mask].any() and (plan >= 0).all()
    empty = ot_plan(squared_euclidean(x, y), solver=solver, mask=torch.zeros(n, dtype=torch.bool))
    assert not empty.any()  # nothing valid: no mass, no NaN
    assert ot_loss(x, y, mask=torch.zeros(n, dtype=torch.bool), solver=solver).item() == 0.0


def test_a_bad_mask_is_refused():
    x = _points(4, 2, 0)
    with pytest.raises(ValueError, match="bool"):
        ot_loss(x, x, mask=torch.ones(4))
    with pytest.raises(ValueError, match=r"n == m and shape \[4\]"):
        ot_loss(x, x, mask=torch.ones(3, dtype=torch.bool))
    with pytest.raises(ValueError, match="n == m"):
        ot_loss(x, x[:3], mask=torch.ones(4, dtype=torch.bool))
    with pytest.raises(ValueError, match="either mask or the weights"):
        ot_plan(squared_euclidean(x, x), mask=torch.ones(4, dtype=torch.bool), a=torch.ones(4) / 4)


def test_subsampling_draws_a_uniform_subset_of_the_valid_rows():
    """8 rows, 5 valid, G = 3: every one of the C(5, 3) = 10 subsets of valid rows is equally
    likely (chi-square over 6,000 draws, p > 1e-4), and no masked row is ever drawn."""
    n, valid, g, draws = 8, [0, 2, 3, 5, 6], 3, 6000
    mask = _mask(n, valid)
    gen = torch.Generator().manual_seed(0)
    counts: dict[tuple[int, ...], int] = {}
    for _ in range(draws):
        idx = subsample_rows(n, g, mask=mask, generator=gen)
        assert idx.shape == (g,) and mask[idx].all()
        key = tuple(idx.tolist())
        counts[key] = counts.get(key, 0) + 1
    assert set(counts) == set(itertools.combinations(valid, g))
    observed = np.array(list(counts.values()), dtype=float)
    expected = draws / len(observed)
    stat = float(((observed - expected) ** 2 / expected).sum())
    assert chi2.sf(stat, df=len(observed) - 1) > 1e-4, counts


def test_subsampling_keeps_every_valid_row_when_there_are_few():
    """k < G valid rows: all of them, plus masked rows to fill the fixed shape G (which carry
    no mass); a padded set no larger than G is not sub-sampled at all."""
    n, valid = 10, [1, 8]
    mask = _mask(n, valid)
    for seed in range(20):
        idx = subsample_rows(n, 4, mask=mask, generator=torch.Generator().manual_seed(seed))
        assert idx.shape == (4,) and set(valid) <= set(idx.tolist())
    assert subsample_rows(n, 10, mask=mask) is None
    x, y = _points(n, 3, 0), _points(n, 3, 1)
    full = ot_loss(x, y, mask=mask)
    sub = ot_loss(x, y, mask=mask, max_points=4, generator=torch.Generator().manual_seed(3))
    assert sub.item() == pytest.approx(full.item(), rel=1e-12)


def _replayed_like(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """ORDER's paper shape: 2 replayed tasks x (5 support + 100 unlabeled) rows of 256-d
    features, about 70% of the unlabeled rows valid (U_id). Stored features: 5 class clusters
    (centres N(0, 1) per coordinate, spread 0.5, after a ReLU, like a backbone's output);
    current = stored + a drift of 0.1 per coordinate (the network moved since storage)."""
    g = torch.Generator().manual_seed(seed)
    tasks, rows, d = 2, 105, 256
    centres = torch.randn(tasks, 5, d, generator=g)
    labels = torch.randint(0, 5, (tasks, rows), generator=g)
    stored = (centres.gather(1, labels[..., None].expand(-1, -1, d))
              + 0.5 * torch.randn(tasks, rows, d, generator=g)).relu()  # fmt: skip
    current = stored + 0.1 * torch.randn(tasks, rows, d, generator=g)
    mask = torch.ones(tasks, rows, dtype=torch.bool)
    mask[:, 5:] = torch.rand(tasks, 100, generator=g) < 0.7
    stored = torch.where(mask[..., None], stored, 0.0)
    return current.flatten(0, 1), stored.flatten(0, 1), mask.flatten()


@pytest.mark.parametrize("seed", range(2))
def test_sync_free_sinkhorn_tracks_the_exact_plan_at_paper_shapes(seed):
    """The plugin's defaults (eps 0.05, 200 sweeps after 12 annealing stages, no early stop)
    at ORDER's paper shape: loss within 1% of the exact optimum and gradient w.r.t. the
    current features within 5% (relative L2 norm) of the exact plan's (see
    benchmarks/ot_sinkhorn.py for the measurement behind the defaults)."""
    current, stored, mask = _replayed_like(seed)
    out = {}
    for solver, tol in (("exact", None), ("sinkhorn", None)):
        x = current.clone().requires_grad_(True)
        value = ot_loss(x, stored, mask=mask, solver=solver, tol=tol, max_points=250)
        (grad,) = torch.autograd.grad(value, x)
        out[solver] = (value.item(), grad)
    (v_ex, g_ex), (v_sk, g_sk) = out["exact"], out["sinkhorn"]
    assert v_sk == pytest.approx(v_ex, rel=1e-2)
    assert float((g_sk - g_ex).norm() / g_ex.norm()) < 5e-2


_READS = ("item", "__float__", "__bool__", "__int__", "tolist", "cpu", "numpy")


@contextlib.contextmanager
def _counting_host_reads():
    """Count calls that read a tensor's value on the host (as tests/training/test_host_reads)."""
    reads: list[str] = []
    originals = {name: getattr(torch.Tensor, name) for name in _READS}

    def wrap(name, fn):
        def counted(*args, **kwargs):
            reads.append(name)
            return fn(*args, **kwargs)

        return counted

    try:
        for name, fn in originals.items():
            setattr(torch.Tensor, name, wrap(name, fn))
        yield reads
    finally:
        for name, fn in originals.items():
            setattr(torch.Tensor, name, fn)


def test_the_sync_free_sinkhorn_loss_reads_nothing_on_the_host():
    current, stored, mask = _replayed_like(0)
    x = current.clone().requires_grad_(True)
    gen = torch.Generator().manual_seed(0)
    with _counting_host_reads() as reads:
        value = ot_loss(
            x, stored, mask=mask, solver="sinkhorn", tol=None, max_points=150, generator=gen,
            refuse_non_finite=False,
        )  # fmt: skip
        value.backward()
    assert reads == [], reads
    # the counter counts: the exact solver's one copy, early-stopping Sinkhorn's checks
    with _counting_host_reads() as reads:
        ot_loss(x, stored, mask=mask, solver="exact", refuse_non_finite=False)
    assert reads == ["cpu", "numpy"], reads
    with _counting_host_reads() as reads:
        ot_loss(x, stored, mask=mask, solver="sinkhorn", tol=1e-9, refuse_non_finite=False)
    assert "__float__" in reads
