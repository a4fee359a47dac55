"""Tests of the OT feature loss (paper Eq. (OTloss))."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from scipy.optimize import linprog

from avalanche_sets.functional import (
    CVXPYLAYERS_MAX_ENTRIES,
    OT_SOLVERS,
    check_solver,
    ot_loss,
    ot_plan,
    squared_euclidean,
    subsample_rows,
)

# cvxpylayers 1.2 / diffcp with NumPy 2 warn on every solve (third-party, harmless).
pytestmark = [
    pytest.mark.filterwarnings(
        "ignore:__array__ implementation doesn't accept a copy keyword:DeprecationWarning"
    ),
    pytest.mark.filterwarnings("ignore:JAXopt is no longer maintained:DeprecationWarning"),
]


def _points(n: int, d: int, seed: int, dtype=torch.float64) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g, dtype=dtype)


def _cost(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The cost :func:`ot_loss` transports on: squared Euclidean, expanded form."""
    return squared_euclidean(x, y, expand=True)


def _lp_value(cost: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    n, m = cost.shape
    a_eq = np.zeros((n + m, n * m))
    for i in range(n):
        a_eq[i, i * m : (i + 1) * m] = 1.0
    for j in range(m):
        a_eq[n + j, j::m] = 1.0
    res = linprog(
        cost.ravel(), A_eq=a_eq, b_eq=np.concatenate([a, b]), bounds=(0, None), method="highs"
    )
    assert res.success
    return float(res.fun)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("n", [2, 4, 6])
def test_exact_equals_brute_force_over_permutations(n, seed):
    x, y = _points(n, 3, seed), _points(n, 3, 100 + seed)
    c = _cost(x, y).numpy()
    best = min(sum(c[i, p[i]] for i in range(n)) for p in itertools.permutations(range(n))) / n
    value = ot_loss(x, y, solver="exact")
    assert value.item() == pytest.approx(best, rel=1e-12, abs=1e-12)
    plan = ot_plan(_cost(x, y))
    torch.testing.assert_close(plan.sum(0), torch.full((n,), 1.0 / n, dtype=plan.dtype))
    torch.testing.assert_close(plan.sum(1), torch.full((n,), 1.0 / n, dtype=plan.dtype))


@pytest.mark.parametrize("seed", range(3))
def test_exact_unequal_sizes_and_weights_agree_with_linprog(seed):
    n, m = 5, 7
    c = _cost(_points(n, 2, seed), _points(m, 2, 50 + seed))
    uniform = ot_plan(c)
    assert uniform.shape == (n, m)
    assert (uniform * c).sum().item() == pytest.approx(
        _lp_value(c.numpy(), np.full(n, 1 / n), np.full(m, 1 / m)), rel=1e-9
    )
    rng = np.random.default_rng(seed)
    a, b = rng.random(n) + 0.1, rng.random(m) + 0.1
    a, b = a / a.sum(), b / b.sum()
    plan = ot_plan(c, a=torch.as_tensor(a), b=torch.as_tensor(b))
    assert (plan * c).sum().item() == pytest.approx(_lp_value(c.numpy(), a, b), rel=1e-9)
    np.testing.assert_allclose(plan.sum(1).numpy(), a, atol=1e-12)
    np.testing.assert_allclose(plan.sum(0).numpy(), b, atol=1e-12)
    # equal sizes but non-uniform weights take the ot.emd path too
    sq = _cost(_points(4, 2, seed), _points(4, 2, 9 + seed))
    w = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64)
    plan = ot_plan(sq, a=w)
    u = np.full(4, 0.25)
    assert (plan * sq).sum().item() == pytest.approx(_lp_value(sq.numpy(), w.numpy(), u), rel=1e-9)


@pytest.mark.parametrize("seeds", [(3, 4), (0, 1)])
def test_sinkhorn_converges_to_exact_as_eps_decreases(seeds):
    x, y = _points(8, 2, seeds[0]), _points(8, 2, seeds[1])
    c = _cost(x, y)  # costs up to ~15, exact value ~1
    exact = (ot_plan(c) * c).sum().item()
    uniform = torch.full((8,), 1 / 8, dtype=torch.float64)
    errors = []
    for eps in [1.0, 0.3, 0.1, 0.03, 0.01]:
        plan = ot_plan(c, solver="sinkhorn", eps=eps, n_iter=1000)
        torch.testing.assert_close(plan.sum(0), uniform, atol=1e-9, rtol=0)  # exact by design
        torch.testing.assert_close(plan.sum(1), uniform, atol=1e-4, rtol=0)
        errors.append(abs((plan * c).sum().item() - exact) / exact)
    assert errors[-1] < 1e-2
    assert errors[0] > errors[1] > errors[2] > errors[-1]
    assert all(e2 <= e1 + 1e-3 for e1, e2 in zip(errors, errors[1:]))


def test_sinkhorn_is_stable_for_tiny_eps_and_large_costs():
    x, y = _points(6, 4, 5) * 30, _points(6, 4, 6) * 30
    plan = ot_plan(_cost(x, y), solver="sinkhorn", eps=1e-3, n_iter=50)
    assert torch.isfinite(plan).all()
    value = ot_loss(x.float(), y.float(), solver="sinkhorn", eps=1e-3, n_iter=50)
    assert torch.isfinite(value)


def test_cvxpylayers_value_and_gradient_agree_with_exact():
    quad_reg = 1e-3
    n = 8
    x, y = _points(n, 3, 7).requires_grad_(True), _points(n, 3, 8)
    v_cvx = ot_loss(x, y, solver="cvxpylayers", quad_reg=quad_reg)
    (g_cvx,) = torch.autograd.grad(v_cvx, x)
    x2 = x.detach().clone().requires_grad_(True)
    v_ex = ot_loss(x2, y, solver="exact")
    (g_ex,) = torch.autograd.grad(v_ex, x2)
    # <W_reg, C> + q|W_reg|² <= <W*, C> + q|W*|² = exact + q/n, and <W_reg, C> >= exact.
    assert -1e-6 <= v_cvx.item() - v_ex.item() <= quad_reg / n + 1e-6
    assert torch.isfinite(g_cvx).all()
    torch.testing.assert_close(g_cvx, g_ex, atol=5e-3, rtol=0)
    c = _cost(x.detach(), y)
    plan = ot_plan(c, solver="cvxpylayers", quad_reg=quad_reg)
    assert not plan.requires_grad
    torch.testing.assert_close(plan, ot_plan(c), atol=1e-3, rtol=0)


def test_cvxpylayers_refuses_problems_too_large_to_canonicalise():
    x = _points(CVXPYLAYERS_MAX_ENTRIES // 100 + 1, 2, 0)
    with pytest.raises(ValueError, match="max_points"):
        ot_loss(x, x[:100], solver="cvxpylayers")


def test_the_points_rule_has_one_home_for_the_plugin_and_the_methods_check():
    from avalanche_sets.functional.ot import check_max_points
    from avalanche_sets.methods import check_method
    from avalanche_sets.order.ot_loss import OTFeatureLossPlugin
    from avalanche_sets.presets import resolve_preset

    side = int(CVXPYLAYERS_MAX_ENTRIES**0.5)
    assert check_max_points("cvxpylayers", side) == side
    assert check_max_points("exact", None) is None and check_max_points("exact", 10**6) == 10**6
    for bad in (0, -3, 2.5, True, "100"):
        with pytest.raises(ValueError, match="must be a positive integer or None"):
            check_max_points("exact", bad)
    too_many = rf"above the {CVXPYLAYERS_MAX_ENTRIES} entries.*fix: pass {{}}={side} or less"
    with pytest.raises(ValueError, match=too_many.format("max_points")):
        OTFeatureLossPlugin(solver="cvxpylayers", max_points=side + 1)
    with pytest.raises(ValueError, match=r"max_points=None would build OT problems of any"):
        OTFeatureLossPlugin(solver="cvxpylayers", max_points=None)
    OTFeatureLossPlugin(solver="cvxpylayers", max_points=side)  # the largest it can build
    with pytest.raises(ValueError, match=too_many.format("ot_max_points")):
        check_method("order", resolve_preset("quick"), {"ot_solver": "cvxpylayers"})
    check_method(
        "order", resolve_preset("quick"), {"ot_solver": "cvxpylayers", "ot_max_points": side}
    )


@pytest.mark.parametrize("solver", OT_SOLVERS)
def test_gradient_steps_move_features_toward_stored_targets(solver):
    n = 6 if solver == "cvxpylayers" else 12
    stored = _points(n, 4, 11, dtype=torch.float32) * 3
    current = (stored + 0.5 * _points(n, 4, 12, dtype=torch.float32)).requires_grad_(True)
    opt = torch.optim.SGD([current], lr=n / 4)
    start_gap = (current - stored).norm(dim=1).mean().item()
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = ot_loss(current, stored, solver=solver, eps=0.01, n_iter=500)
        loss.backward()
        assert torch.isfinite(current.grad).all()
        opt.step()
        losses.append(loss.item())
    end_gap = (current - stored).norm(dim=1).mean().item()
    assert losses[-1] < 0.5 * losses[0]
    assert end_gap < 0.5 * start_gap


def test_subsampling_respects_max_points_and_is_reproducible():
    current, stored = _points(20, 3, 1), _points(20, 3, 2)
    idx = subsample_rows(20, 5, generator=torch.Generator().manual_seed(123))
    assert idx is not None and idx.numel() == 5 and idx.unique().numel() == 5
    assert subsample_rows(20, 25) is None and subsample_rows(20, None) is None
    v1 = ot_loss(current, stored, max_points=5, generator=torch.Generator().manual_seed(123))
    v2 = ot_loss(current, stored, max_points=5, generator=torch.Generator().manual_seed(123))
    ref = ot_loss(current[idx], stored[idx])
    assert v1.item() == v2.item() == ref.item()
    v3 = ot_loss(current, stored, max_points=5, generator=torch.Generator().manual_seed(7))
    assert v3.item() != v1.item()
    # unequal sizes: each side subsampled to max_points
    v4 = ot_loss(current, stored[:15], max_points=4, generator=torch.Generator().manual_seed(0))
    assert torch.isfinite(v4)


def test_empty_inputs_give_zero_with_graph():
    current = torch.zeros(0, 3, requires_grad=True)
    loss = ot_loss(current, torch.zeros(0, 3))
    assert loss.item() == 0.0
    loss.backward()
    assert ot_plan(torch.zeros(0, 4)).shape == (0, 4)


def test_bad_inputs_raise():
    x = _points(4, 3, 0)
    with pytest.raises(ValueError, match="exact"):
        ot_loss(x, x, solver="emd")
    with pytest.raises(ValueError, match="sinkhorn"):
        check_solver("nope")
    assert check_solver("sinkhorn") == "sinkhorn"
    with pytest.raises(ValueError, match="feature size"):
        ot_loss(x, _points(4, 2, 0))
    with pytest.raises(ValueError, match=r"\[n, d\]"):
        ot_loss(x[0], x[0])
    bad = x.clone()
    bad[1, 2] = float("nan")
    with pytest.raises(ValueError, match="non-finite"):
        ot_loss(bad, x)
    with pytest.raises(ValueError, match="non-finite"):
        ot_plan(torch.full((2, 2), float("inf")))
    with pytest.raises(ValueError, match="max_points"):
        ot_loss(x, x, max_points=0)
    with pytest.raises(ValueError, match="eps"):
        ot_loss(x, x, solver="sinkhorn", eps=0.0)
    with pytest.raises(ValueError, match="mass"):
        ot_plan(_cost(x, x), a=torch.ones(4, dtype=torch.float64))
    with pytest.raises(ValueError, match="shape"):
        ot_plan(_cost(x, x), b=torch.ones(3, dtype=torch.float64) / 3)
    with pytest.raises(TypeError):
        ot_loss(x.numpy(), x)
    with pytest.raises(ValueError, match="floating"):
        ot_loss(torch.ones(3, 2, dtype=torch.long), torch.ones(3, 2, dtype=torch.long))


def test_cvxpylayers_problem_cache_is_bounded():
    """Point counts vary with |U_id|: the compiled-problem cache must not grow with them."""
    from avalanche_sets.functional import ot as ot_mod

    ot_mod._CVXPY_LAYERS.clear()
    for n in range(2, 2 + ot_mod._CVXPY_LAYERS_MAX + 5):
        ot_mod._build_cvxpy_layer(n, 2, 1e-3)
    assert len(ot_mod._CVXPY_LAYERS) == ot_mod._CVXPY_LAYERS_MAX
    assert (2, 2, 1e-3) not in ot_mod._CVXPY_LAYERS  # the least recently used went first
    newest = (2 + ot_mod._CVXPY_LAYERS_MAX + 4, 2, 1e-3)
    assert next(reversed(ot_mod._CVXPY_LAYERS)) == newest


# ---------------------------------------------------------------------- against POT
@pytest.mark.parametrize("seed, n, m, eps", [(0, 20, 20, 0.5), (1, 15, 25, 0.5), (2, 20, 20, 0.25)])
def test_sinkhorn_value_gradient_and_plan_match_pot(seed, n, m, eps):
    """Our log-domain Sinkhorn (kept for speed, see ``benchmarks/ot_sinkhorn.py``) against POT's
    ``ot.solve(..., reg=eps, grad="envelope")`` (its log-domain Sinkhorn with the torch backend,
    run to convergence) on the same random points: the same plan, the same transport value
    ``<P, C>`` and the same gradient (the plan, by the envelope theorem) w.r.t. the points."""
    import ot

    x, y = _points(n, 6, seed), _points(m, 6, seed + 100) + 0.5
    a = torch.full((n,), 1.0 / n, dtype=torch.float64)
    b = torch.full((m,), 1.0 / m, dtype=torch.float64)
    ours_x = x.clone().requires_grad_(True)
    if n == m:
        ours = ot_loss(ours_x, y, solver="sinkhorn", eps=eps, n_iter=3000)
    else:  # ot_loss pairs rows only when n == m; the plan is the same function either way
        cost = _cost(ours_x, y)
        ours = (ot_plan(cost, solver="sinkhorn", eps=eps, n_iter=3000) * cost).sum()
    (ours_grad,) = torch.autograd.grad(ours, ours_x)

    pot_x = x.clone().requires_grad_(True)
    res = ot.solve(_cost(pot_x, y), a, b, reg=eps, grad="envelope", max_iter=50_000,
                   tol=1e-13)  # fmt: skip
    (pot_grad,) = torch.autograd.grad(res.value, pot_x)

    plan = ot_plan(_cost(x, y), solver="sinkhorn", eps=eps, n_iter=3000)
    torch.testing.assert_close(plan, res.plan, atol=1e-7, rtol=1e-4)
    assert ours.item() == pytest.approx(float(res.value_linear), rel=1e-6)
    torch.testing.assert_close(ours_grad, pot_grad, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("solver", ["exact", "sinkhorn", "cvxpylayers"])
@pytest.mark.parametrize("bad_value", [float("nan"), float("inf")])
def test_a_non_finite_input_makes_the_loss_nan_when_the_caller_checks_it(solver, bad_value):
    x, y = _points(4, 3, 0), _points(4, 3, 1)
    bad = x.clone()
    bad[2, 1] = bad_value
    with pytest.raises(ValueError, match="non-finite"):
        ot_loss(bad, y, solver=solver)
    value = ot_loss(bad, y, solver=solver, refuse_non_finite=False)
    assert value.isnan(), value
    with pytest.raises(ValueError, match="cost contains non-finite"):
        ot_plan(_cost(bad, y), solver=solver)
    plan = ot_plan(_cost(bad, y), solver=solver, refuse_non_finite=False)
    assert plan.shape == (4, 4) and plan.isnan().all()
    # finite inputs: the same loss and gradient either way
    for refuse in (True, False):
        x_ = x.clone().requires_grad_(True)
        ot_loss(x_, y, solver=solver, refuse_non_finite=refuse).backward()
        if refuse:
            want_grad = x_.grad
        else:
            assert torch.equal(x_.grad, want_grad)


def test_the_exact_loss_reads_the_device_once_when_the_caller_checks_it(monkeypatch):
    x, y = _points(6, 3, 0), _points(6, 3, 1)
    reads = []
    for name in ("__bool__", "item", "tolist", "cpu"):
        original = getattr(torch.Tensor, name)
        monkeypatch.setattr(
            torch.Tensor,
            name,
            lambda t, *a, _f=original, _n=name, **k: reads.append(_n) or _f(t, *a, **k),
        )
    ot_loss(x, y, solver="exact", refuse_non_finite=False)
    assert reads == ["cpu"], reads
