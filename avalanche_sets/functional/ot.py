"""Optimal-transport feature loss of ORDER (paper Eq. (OTloss), §4.3; design note §3.6).

Given the current embeddings ``{e_i}`` of stored inputs and the embeddings ``{g_j}`` stored with
them, the loss is the optimal value of the discrete OT problem

.. math::

    L_{OT} = \\min_{W \\in \\Pi(\\mu, \\nu)} \\sum_{ij} W_{ij} \\, d(e_i, g_j),

with uniform marginals by default and the squared Euclidean cost ``d``
(:func:`~avalanche_sets.functional.distance.squared_euclidean`, expanded form). Three solvers:

* ``"exact"``: the LP optimum. For ``n == m`` with uniform weights the optimum is attained
  at a (scaled) permutation matrix (Birkhoff–von Neumann), so the assignment problem is solved
  with :func:`scipy.optimize.linear_sum_assignment`; otherwise POT's network simplex
  :func:`ot.emd`.
* ``"sinkhorn"``: entropic OT, log-domain stabilised Sinkhorn iterations in torch (stable for
  small ``eps``), returning the plan. Our own (:func:`sinkhorn_log`) rather than POT's, for
  speed at equal accuracy: see that function.
* ``"cvxpylayers"``: the paper's choice — a differentiable convex-optimisation layer
  (Agrawal et al. 2019). A small quadratic term ``quad_reg * ||W||²`` makes the solution map
  single-valued and differentiable (a pure LP's is not, everywhere). Slow, and limited to
  ``n·m <= CVXPYLAYERS_MAX_ENTRIES`` (100x100): use ``max_points`` (G) with it.

For ``"exact"`` and ``"sinkhorn"`` the plan ``W*`` is *detached* and the loss is
``<W*, C(θ)>``: by the envelope (Danskin) theorem the gradient of the optimal value with respect
to the cost is the optimal plan, so no differentiation through the solver is needed. For
``"cvxpylayers"`` the loss is ``<W*(C), C>`` with the gradient flowing through both factors,
as in the paper.

All functions are pure (no global state except the cache of built cvxpylayers problems).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any

import numpy as np
import torch
from torch import Tensor

from .distance import squared_euclidean

__all__ = [
    "OT_SOLVERS",
    "CVXPYLAYERS_MAX_ENTRIES",
    "check_solver",
    "ot_plan",
    "sinkhorn_log",
    "cvxpylayers_plan",
    "subsample_pairs",
    "ot_loss",
]

#: Names accepted by ``solver=``.
OT_SOLVERS: tuple[str, ...] = ("exact", "sinkhorn", "cvxpylayers")

#: Largest ``n·m`` accepted by the cvxpylayers solver. cvxpy 1.9 canonicalises the parametric
#: problem into matrices whose index arrays grow like ``(n·m)²``: 100x100 builds in ~6 s and
#: solves in ~1 s, 150x150 already needs > 4 GiB and 250x250 ~30 GiB.
CVXPYLAYERS_MAX_ENTRIES = 10_000

# Built CvxpyLayer objects keyed by (n, m, quad_reg): building one costs ~50 ms at n = 20.
# Compiled cvxpylayers problems, least recently used first. A problem depends on the point
# counts (n, m), which vary with |U_id| from step to step, so an unbounded cache would grow
# with every new size seen (up to ~2.6 MiB per 100x100 problem); 16 cover the sizes in use.
_CVXPY_LAYERS: OrderedDict[tuple[int, int, float], Any] = OrderedDict()
_CVXPY_LAYERS_MAX = 16


def check_solver(name: str) -> str:
    """Validate an OT solver name (call it when a strategy/plugin is built, to fail early).

    Returns:
        ``name`` unchanged.

    Raises:
        ValueError: ``name`` is not one of :data:`OT_SOLVERS`.
    """
    if name not in OT_SOLVERS:
        raise ValueError(f"unknown OT solver {name!r}; valid solvers are {list(OT_SOLVERS)}")
    return name


def _check_points(name: str, x: Tensor, *, finite: bool = True) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 2:
        raise ValueError(f"{name} must have shape [n, d], got {tuple(x.shape)}")
    if not x.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor, got {x.dtype}")
    if finite and x.numel() and not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name} contains non-finite values")


def _non_finite_plan(cost: Tensor, refuse: bool) -> Tensor:
    """Refuse a non-finite cost, or (``refuse=False``) give the all-NaN plan that makes the
    loss NaN for a caller that checks the loss itself."""
    if refuse:
        raise ValueError("cost contains non-finite values")
    return torch.full_like(cost.detach(), float("nan"))


def _weights(w: Tensor | np.ndarray | None, n: int, name: str) -> np.ndarray:
    if w is None:
        return np.full(n, 1.0 / n) if n else np.zeros(0)
    arr = w.detach().cpu().double().numpy() if isinstance(w, Tensor) else np.asarray(w, float)
    if arr.shape != (n,):
        raise ValueError(f"{name} must have shape [{n}], got {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"{name} must be finite and non-negative")
    return arr


def _is_uniform(w: np.ndarray) -> bool:
    return w.size == 0 or bool(np.allclose(w, w[0], rtol=1e-12, atol=0.0))


def sinkhorn_log(
    cost: Tensor,
    a: Tensor,
    b: Tensor,
    *,
    eps: float,
    n_iter: int = 200,
    tol: float = 1e-9,
    eps_scaling: bool = True,
) -> Tensor:
    """Entropic OT plan by log-domain Sinkhorn (Peyré & Cuturi 2019, §4.4, log form).

    Solves ``min_W <W, C> - eps·H(W)`` over ``Π(a, b)`` with dual potentials ``f, g`` updated as
    ``f = eps (log a - LSE_j((g_j - C_ij)/eps))`` and symmetrically for ``g``; every quantity is a
    log-sum-exp, so nothing under- or overflows for small ``eps``. Runs in float64, no graph.

    With ``eps_scaling`` (default) the potentials are warm-started by a short annealing
    ``eps_k = max(eps, max(C)·2^-k)`` (10 sweeps per stage, ≈ ``10·log2(max C / eps)`` sweeps in
    all), which makes small ``eps`` converge in far fewer sweeps than a cold start.

    Args:
        cost: ``[n, m]``.
        a: ``[n]`` source weights, b: ``[m]`` target weights (non-negative, same total mass).
        eps: entropic regularisation, in the units of ``cost`` (absolute, like POT's ``reg``).
        n_iter: maximum number of (f, g) sweeps at the target ``eps``.
        tol: stop when the L1 error of the row marginal falls below ``tol`` (checked every 10).
        eps_scaling: anneal ``eps`` from the cost scale down to ``eps`` first.

    Returns:
        plan ``[n, m]`` (float64, detached). Its column marginal is exact, its row marginal is
        within ``tol`` once converged.

    Why not POT (a dependency), measured by ``benchmarks/ot_sinkhorn.py`` (64-d points,
    n = 50, 120 and 250 per side,
    eps = 0.05 (ORDER's default) and 0.5, the solvers taking turns on one thread): POT's
    torch-backend log-domain solver ``ot.bregman.sinkhorn_log`` (also behind
    ``ot.solve(..., reg=eps)``) starts cold. With ORDER's 200 sweeps it takes 0.6-0.8x our
    time, but at eps = 0.05 its plan is far from feasible (marginal L1 error 0.12-0.13, ours
    2.3e-3-3.4e-3) and its transport value 3.9e-3-4.2e-3 (relative) off the entropic optimum
    (ours ≤ 4.1e-5); with 2,000 iterations it reaches our accuracy at 6.1-8.1x our time. POT's
    ``sinkhorn_epsilon_scaling`` is more accurate (marginal error ≤ 4.4e-5) but takes 1.8-7.2x
    our time up to n = 120 (the order of what the ``cpu`` preset feeds the OT loss) and at
    eps = 0.5; only at n = 250, eps = 0.05 is it as fast (0.89x); it also warns that it did
    not converge at its defaults. Where both converge, plans, values and gradients agree
    (``tests/functional/test_ot.py::test_sinkhorn_value_gradient_and_plan_match_pot``, against
    ``ot.solve(..., grad="envelope")``).
    """
    if not eps > 0:
        raise ValueError(f"eps must be positive, got {eps}")
    with torch.no_grad():
        c = cost.detach().double()
        a64, b64 = a.double().to(c.device), b.double().to(c.device)
        log_a, log_b = a64.log(), b64.log()
        f = torch.zeros_like(log_a)
        g = torch.zeros_like(log_b)

        def sweep(f: Tensor, g: Tensor, e: float) -> tuple[Tensor, Tensor]:
            f = e * (log_a - torch.logsumexp((g.unsqueeze(0) - c) / e, dim=1))
            g = e * (log_b - torch.logsumexp((f.unsqueeze(1) - c) / e, dim=0))
            return f, g

        if eps_scaling and c.numel():
            stage_eps = float(c.max())
            while stage_eps > eps:
                for _ in range(10):
                    f, g = sweep(f, g, stage_eps)
                stage_eps /= 2.0
        for it in range(int(n_iter)):
            f, g = sweep(f, g, eps)
            if it % 10 == 9:
                row = torch.exp((f.unsqueeze(1) + g.unsqueeze(0) - c) / eps).sum(1)
                if float((row - a64).abs().sum()) < tol:
                    break
        return torch.exp((f.unsqueeze(1) + g.unsqueeze(0) - c) / eps)


def _build_cvxpy_layer(n: int, m: int, quad_reg: float):
    # cvxpy and cvxpylayers take seconds to import; only solver="cvxpylayers" needs them.
    import cvxpy as cp
    from cvxpylayers.torch import CvxpyLayer

    key = (n, m, float(quad_reg))
    layer = _CVXPY_LAYERS.get(key)
    if layer is not None:
        _CVXPY_LAYERS.move_to_end(key)
    else:
        w = cp.Variable((n, m), nonneg=True)
        c = cp.Parameter((n, m))
        a = cp.Parameter(n, nonneg=True)
        b = cp.Parameter(m, nonneg=True)
        objective = cp.sum(cp.multiply(c, w))
        if quad_reg > 0:
            objective = objective + float(quad_reg) * cp.sum_squares(w)
        problem = cp.Problem(
            cp.Minimize(objective), [cp.sum(w, axis=1) == a, cp.sum(w, axis=0) == b]
        )
        layer = CvxpyLayer(problem, parameters=[c, a, b], variables=[w])
        _CVXPY_LAYERS[key] = layer
        while len(_CVXPY_LAYERS) > _CVXPY_LAYERS_MAX:
            _CVXPY_LAYERS.popitem(last=False)
    return layer


def cvxpylayers_plan(
    cost: Tensor,
    a: Tensor | None = None,
    b: Tensor | None = None,
    *,
    quad_reg: float = 1e-3,
    solver_args: dict[str, Any] | None = None,
) -> Tensor:
    """Differentiable OT plan from a cvxpylayers problem (the paper's solver).

    ``W*(C) = argmin_{W ≥ 0, W1 = a, Wᵀ1 = b} <W, C> + quad_reg·||W||²_F``. The problem is built
    once per ``(n, m, quad_reg)`` and kept in a cache of the 16 most recently used problems.

    Args:
        cost: ``[n, m]`` (may require grad).
        a, b: ``[n]`` / ``[m]`` weights; uniform when ``None``.
        quad_reg: weight of the quadratic smoothing term (≥ 0). Its effect on the optimal
            value is at most ``quad_reg·||W||²`` (≈ ``quad_reg/n`` for uniform weights).
        solver_args: forwarded to the layer (e.g. ``{"eps": 1e-8}``).

    Returns:
        plan ``[n, m]``, differentiable w.r.t. ``cost`` (and ``a``, ``b``), dtype of ``cost``.
    """
    if quad_reg < 0:
        raise ValueError(f"quad_reg must be non-negative, got {quad_reg}")
    n, m = cost.shape
    if n * m > CVXPYLAYERS_MAX_ENTRIES:
        raise ValueError(
            f"the cvxpylayers OT problem with {n}x{m} points is too large to canonicalise "
            f"(cvxpy's parametric matrices grow like (n·m)²; limit n·m <= "
            f"{CVXPYLAYERS_MAX_ENTRIES}, e.g. 100x100): subsample with max_points or use "
            f"solver='exact'"
        )
    a_t = cost.new_full((n,), 1.0 / n) if a is None else a.to(cost)
    b_t = cost.new_full((m,), 1.0 / m) if b is None else b.to(cost)
    layer = _build_cvxpy_layer(n, m, float(quad_reg))
    device, dtype = cost.device, cost.dtype
    (plan,) = layer(
        cost.double().cpu(), a_t.double().cpu(), b_t.double().cpu(), solver_args=solver_args
    )
    return plan.to(device=device, dtype=dtype)


def ot_plan(
    cost: Tensor,
    *,
    solver: str = "exact",
    eps: float = 0.05,
    n_iter: int = 200,
    a: Tensor | None = None,
    b: Tensor | None = None,
    quad_reg: float = 1e-3,
    refuse_non_finite: bool = True,
) -> Tensor:
    """Optimal transport plan for a cost matrix (detached, no graph).

    Args:
        cost: ``[n, m]`` finite costs.
        solver: one of :data:`OT_SOLVERS`.
            ``"exact"``: ``linear_sum_assignment`` when ``n == m`` and both weights are uniform
            (the LP optimum is then a permutation scaled by ``1/n``), POT ``ot.emd`` otherwise.
            ``"sinkhorn"``: :func:`sinkhorn_log` with ``eps`` and ``n_iter``.
            ``"cvxpylayers"``: :func:`cvxpylayers_plan` with ``quad_reg`` (detached here).
        eps, n_iter: Sinkhorn options. quad_reg: cvxpylayers option.
        a, b: ``[n]`` / ``[m]`` non-negative weights with equal totals; uniform when ``None``.
        refuse_non_finite: raise ``ValueError`` on a non-finite cost (default); ``False``
            returns an all-NaN plan instead, for a caller that checks its loss itself (ORDER's
            OT plugin: the template refuses a non-finite term).

    Returns:
        plan ``[n, m]`` with row sums ``a`` and column sums ``b``, dtype/device of ``cost``.

    The exact solver reads the device once: the cost it copies to the host, whose finiteness
    is checked there. The other solvers check it on the device first (one read).
    """
    check_solver(solver)
    if not isinstance(cost, Tensor) or cost.dim() != 2:
        raise ValueError(f"cost must be a [n, m] tensor, got {getattr(cost, 'shape', cost)!r}")
    if solver != "exact" and cost.numel() and not bool(torch.isfinite(cost).all()):
        return _non_finite_plan(cost, refuse_non_finite)
    n, m = cost.shape
    a_np, b_np = _weights(a, n, "a"), _weights(b, m, "b")
    if n == 0 or m == 0:
        return cost.detach().new_zeros((n, m))
    if not math.isclose(a_np.sum(), b_np.sum(), rel_tol=1e-9, abs_tol=1e-12):
        raise ValueError(
            f"a and b must have the same total mass, got {a_np.sum()} and {b_np.sum()}"
        )
    c_det = cost.detach()
    if solver == "exact":
        c_host = c_det.double().cpu().numpy()  # the one host read of this solver
        if not np.isfinite(c_host).all():
            return _non_finite_plan(cost, refuse_non_finite)
        if n == m and _is_uniform(a_np) and _is_uniform(b_np):
            from scipy.optimize import linear_sum_assignment  # heavy; only this solver path

            rows, cols = linear_sum_assignment(c_host)
            plan = c_det.new_zeros((n, m))
            plan[
                torch.as_tensor(rows, device=plan.device), torch.as_tensor(cols, device=plan.device)
            ] = float(a_np[0])
            return plan
        import ot  # POT: heavy to import, needed only for unequal or weighted marginals

        plan_np = ot.emd(a_np, b_np, np.ascontiguousarray(c_host))
        return torch.as_tensor(plan_np).to(c_det)
    if solver == "sinkhorn":
        plan = sinkhorn_log(
            c_det, torch.as_tensor(a_np), torch.as_tensor(b_np), eps=eps, n_iter=n_iter
        )
        return plan.to(c_det)
    with torch.no_grad():
        return cvxpylayers_plan(
            c_det, torch.as_tensor(a_np), torch.as_tensor(b_np), quad_reg=quad_reg
        ).detach()


def subsample_pairs(
    n: int, max_points: int | None, generator: torch.Generator | None = None
) -> Tensor | None:
    """Indices of at most ``max_points`` of ``n`` paired points (uniform, without replacement).

    Returns ``None`` when no subsampling is needed (``max_points`` is ``None`` or ≥ ``n``);
    otherwise a sorted ``LongTensor [max_points]`` drawn with ``torch.randperm(generator=...)``,
    so a seeded generator reproduces it.
    """
    if max_points is None:
        return None
    if (
        isinstance(max_points, bool)
        or not isinstance(max_points, (int, np.integer))
        or max_points < 1
    ):
        raise ValueError(f"max_points must be a positive integer or None, got {max_points!r}")
    if n <= max_points:
        return None
    idx = torch.randperm(n, generator=generator)[: int(max_points)]
    return idx.sort().values


def ot_loss(
    current: Tensor,
    stored: Tensor,
    *,
    solver: str = "exact",
    eps: float = 0.05,
    n_iter: int = 200,
    max_points: int | None = None,
    generator: torch.Generator | None = None,
    quad_reg: float = 1e-3,
    solver_args: dict[str, Any] | None = None,
    refuse_non_finite: bool = True,
) -> Tensor:
    """ORDER's OT feature loss ``L_OT = <W*, C(current, stored)>`` (paper Eq. (OTloss)).

    Args:
        current: ``[n, d]`` embeddings of the stored inputs under the current model (the
            gradient flows into them).
        stored: ``[m, d]`` embeddings stored with those inputs (normally ``m == n`` and row ``i``
            of both comes from the same input; usually without grad).
        solver: ``"exact"`` (default; plan detached), ``"sinkhorn"`` (plan detached) or
            ``"cvxpylayers"`` (differentiable through the solution map, the paper's choice).
        eps, n_iter: Sinkhorn regularisation (absolute, units of the squared distances) and
            maximum iterations.
        max_points: G, the maximum number of points per side. When ``n == m`` the **same**
            indices are drawn on both sides (the current and stored embeddings of the same
            inputs); otherwise each side is subsampled independently (same generator).
        generator: torch generator for the subsampling (CPU); global RNG when ``None``.
        quad_reg: quadratic smoothing of the cvxpylayers problem.
        solver_args: forwarded to the cvxpylayers layer.
        refuse_non_finite: raise on non-finite points or costs (default: one host read per
            side besides the solver's). ``False``: a non-finite input makes the loss NaN
            instead, for a caller that checks its loss itself; with the exact solver the loss
            then reads the device once, to copy the cost to the host (see :func:`ot_plan`).

    Returns:
        scalar tensor (0 when a side is empty), differentiable w.r.t. ``current``.

    Raises:
        ValueError: bad shapes, non-finite values, unknown solver, bad ``max_points``, a
            cvxpylayers problem above ``CVXPYLAYERS_MAX_ENTRIES``.
    """
    check_solver(solver)
    _check_points("current", current, finite=refuse_non_finite)
    _check_points("stored", stored, finite=refuse_non_finite)
    if current.shape[1] != stored.shape[1]:
        raise ValueError(
            f"current and stored must have the same feature size, got {tuple(current.shape)} "
            f"and {tuple(stored.shape)}"
        )
    subsample_pairs(0, max_points)  # validates max_points
    n, m = current.shape[0], stored.shape[0]
    if n == 0 or m == 0:
        return current.sum() * 0.0
    stored = stored.to(device=current.device, dtype=current.dtype)
    if n == m:
        idx = subsample_pairs(n, max_points, generator)
        if idx is not None:
            idx = idx.to(current.device)
            current, stored = current[idx], stored[idx]
    else:
        idx_c = subsample_pairs(n, max_points, generator)
        idx_s = subsample_pairs(m, max_points, generator)
        if idx_c is not None:
            current = current[idx_c.to(current.device)]
        if idx_s is not None:
            stored = stored[idx_s.to(current.device)]
    cost = squared_euclidean(current, stored, expand=True)  # memory O(nm), not O(nmd)
    if solver == "cvxpylayers":
        if refuse_non_finite or bool(torch.isfinite(cost).all()):
            plan = cvxpylayers_plan(cost, quad_reg=quad_reg, solver_args=solver_args)
        else:
            plan = _non_finite_plan(cost, refuse=False)
    else:
        plan = ot_plan(
            cost, solver=solver, eps=eps, n_iter=n_iter, refuse_non_finite=refuse_non_finite
        )
    return (plan * cost).sum()
