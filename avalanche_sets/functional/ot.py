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
    "check_max_points",
    "check_solver",
    "ot_plan",
    "sinkhorn_log",
    "cvxpylayers_plan",
    "subsample_rows",
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


def check_max_points(
    solver: str,
    max_points: int | None,
    *,
    option: str = "max_points",
    solver_option: str = "solver",
) -> int | None:
    """Validate ``max_points`` (G: the most points per side of an OT problem; ``None``: all)
    for ``solver``: a positive integer or ``None``, and for ``"cvxpylayers"`` at most
    ``√CVXPYLAYERS_MAX_ENTRIES`` (100), the largest problem cvxpy can canonicalise.
    ``option`` and ``solver_option`` are the names the caller's user gave the two values
    (``ot_max_points`` and ``ot_solver`` of ORDER's options), used in the message.

    Returns:
        ``max_points`` unchanged.

    Raises:
        ValueError: a ``max_points`` of another kind, or too large for ``cvxpylayers``; names
            the fix.
    """
    if max_points is not None and (
        isinstance(max_points, bool) or not isinstance(max_points, int) or max_points < 1
    ):
        raise ValueError(f"{option} must be a positive integer or None, got {max_points!r}")
    side = int(CVXPYLAYERS_MAX_ENTRIES**0.5)
    if solver == "cvxpylayers" and (max_points is None or max_points > side):
        size = "any number of" if max_points is None else f"up to {max_points}x{max_points}"
        raise ValueError(
            f"{solver_option}='cvxpylayers' with {option}={max_points!r} would build OT "
            f"problems of {size} points, above the {CVXPYLAYERS_MAX_ENTRIES} entries cvxpy can "
            f"canonicalise (memory grows like (n·m)²); fix: pass {option}={side} or less, or "
            f"{solver_option}='exact'"
        )
    return max_points


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


#: Added to every row/column sum of the scaled kernel before it divides a marginal: a
#: zero-mass (masked) row then gets scaling 0 instead of 0/0, and a row whose kernel underflowed
#: gets a huge but finite scaling; negligible against any non-underflowed sum.
_SCALING_FLOOR = 1e-300


def sinkhorn_log(
    cost: Tensor,
    a: Tensor,
    b: Tensor,
    *,
    eps: float,
    n_iter: int = 200,
    tol: float | None = 1e-9,
    eps_scaling: bool = True,
    eps_stages: int = 12,
    stage_sweeps: int = 10,
) -> Tensor:
    """Entropic OT plan by log-stabilised Sinkhorn with ε-scaling (Schmitzer 2019, §3;
    Peyré & Cuturi 2019, §4.4).

    Solves ``min_W <W, C> - eps·H(W)`` over ``Π(a, b)``. The plan is kept as
    ``W_ij = u_i · exp((f_i + g_j - C_ij)/ε) · v_j``: the dual potentials ``f, g`` (log domain)
    are absorbed into the kernel ``K`` once per stage, and within a stage the sweeps only
    rescale, ``u = a / (K v)``, ``v = b / (Kᵀ u)``: two matrix-vector products and two
    divisions per sweep (4 aten ops, each one kernel on a GPU; ``K`` is computed once per
    stage). The plan is the same fixed point as log-domain Sinkhorn's; absorbing at every stage
    keeps ``u, v`` near 1, so nothing under- or overflows in float64 for small ``eps``.

    With ``eps_scaling`` (default) the potentials are warm-started by ``eps_stages`` stages of
    ``stage_sweeps`` sweeps each, at ``ε_k`` spaced geometrically from ``max(C)`` down to
    ``eps`` (``ε_k = eps·(max C/eps)^{(K-k)/K}``, ``k = 0..K-1``; all ``eps`` when
    ``max C <= eps``), then ``n_iter`` sweeps run at ``eps``. The schedule is computed on the
    device from ``max(C)``: it reads nothing on the host.

    Args:
        cost: ``[n, m]``.
        a: ``[n]`` source weights, b: ``[m]`` target weights (non-negative, same total mass;
            zero-mass rows/columns, e.g. masked points, get an exactly zero plan row/column).
        eps: entropic regularisation, in the units of ``cost`` (absolute, like POT's ``reg``).
        n_iter: sweeps at the target ``eps`` (the most of them with ``tol``).
        tol: stop when the L1 error of the row marginal falls below ``tol`` (checked every 10
            sweeps: a host read each). ``None``: run exactly ``n_iter`` sweeps and read nothing
            on the host (the mode for a step captured as one CUDA graph or compiled with
            ``fullgraph=True``).
        eps_scaling: anneal ``eps`` from the cost scale down to ``eps`` first.
        eps_stages, stage_sweeps: the annealing's stages and sweeps per stage.

    Returns:
        plan ``[n, m]`` (float64, detached). Its column marginal is exact, its row marginal is
        within ``tol`` once converged.

    Why not POT (a dependency): measured by ``benchmarks/ot_sinkhorn.py``, whose results say
    how our solver compares with POT's ``ot.bregman.sinkhorn_log`` and
    ``sinkhorn_epsilon_scaling`` in time, feasibility and value; where both converge, plans,
    values and gradients agree
    (``tests/functional/test_ot.py::test_sinkhorn_value_gradient_and_plan_match_pot``, against
    ``ot.solve(..., grad="envelope")``).
    """
    if not eps > 0:
        raise ValueError(f"eps must be positive, got {eps}")
    if tol is not None and not tol > 0:
        raise ValueError(f"tol must be positive or None, got {tol}")
    for name, value in (("n_iter", n_iter), ("eps_stages", eps_stages)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    if isinstance(stage_sweeps, bool) or not isinstance(stage_sweeps, int) or stage_sweeps < 1:
        raise ValueError(f"stage_sweeps must be a positive integer, got {stage_sweeps!r}")
    with torch.no_grad():
        c = cost.detach().double()
        n, m = c.shape
        if n == 0 or m == 0:
            return c.new_zeros((n, m))
        a64, b64 = a.to(c.device, torch.float64), b.to(c.device, torch.float64)
        floor_n, floor_m = c.new_full((n,), _SCALING_FLOOR), c.new_full((m,), _SCALING_FLOOR)
        f, g = c.new_zeros(n), c.new_zeros(m)

        def stage(f: Tensor, g: Tensor, e: Tensor | float, sweeps: int, check: bool):
            kernel = torch.exp((f.unsqueeze(1) + g.unsqueeze(0) - c) / e)  # once per stage
            kernel_t, v = kernel.T, torch.ones_like(g)  # a view, taken once per stage
            for it in range(sweeps):
                u = a64 / torch.addmv(floor_n, kernel, v)
                v = b64 / torch.addmv(floor_m, kernel_t, u)
                if check and it % 10 == 9:
                    row = u * (kernel @ v)
                    if float((row - a64).abs().sum()) < tol:
                        break
            return u, v, kernel

        if eps_scaling and eps_stages:
            # ε_k on the device: log(max C / eps), floored at 0, sets the geometric spacing.
            log_ratio = torch.log(c.max() / eps).clamp_min(0.0)
            for k in range(eps_stages):
                e = eps * torch.exp(log_ratio * ((eps_stages - k) / eps_stages))
                u, v, _ = stage(f, g, e, stage_sweeps, check=False)
                f, g = f + e * torch.log(u), g + e * torch.log(v)  # absorb into the potentials
        if n_iter == 0:
            return torch.exp((f.unsqueeze(1) + g.unsqueeze(0) - c) / eps)
        u, v, kernel = stage(f, g, eps, n_iter, check=tol is not None)
        return u.unsqueeze(1) * kernel * v.unsqueeze(0)


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


def _check_mask(mask: Tensor, n: int, m: int) -> None:
    if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
        raise ValueError(f"mask must be a bool tensor, got {getattr(mask, 'dtype', mask)!r}")
    if n != m or mask.shape != (n,):
        raise ValueError(
            f"mask marks paired rows: it needs n == m and shape [{n}], got a {n}x{m} problem "
            f"and mask {tuple(mask.shape)}"
        )


def _to_device_of(plan: np.ndarray, like: Tensor) -> Tensor:
    """``plan`` as a tensor of ``like``'s dtype on its device; to a CUDA device from pinned
    memory with a non-blocking copy, so the host does not wait for the device's queue."""
    host = torch.from_numpy(plan).to(like.dtype)
    if like.device.type == "cpu":
        return host  # there already
    if like.device.type == "cuda" and torch.cuda.is_available():
        return host.pin_memory().to(like.device, non_blocking=True)
    return host.to(like.device)


def _exact_plan(
    cost: Tensor,
    mask: Tensor | None,
    a_np: np.ndarray | None,
    b_np: np.ndarray | None,
    refuse_non_finite: bool,
) -> Tensor:
    """The LP optimum on the host: one device→host copy (the cost, with the mask as an extra
    row), the positive-mass block solved (``linear_sum_assignment`` for equal uniform masses,
    POT ``ot.emd`` otherwise), the plan sent back with :func:`_to_device_of`."""
    n, m = cost.shape
    c64 = cost.detach().double()
    if mask is not None:
        host = torch.cat([c64, mask.to(c64.dtype).unsqueeze(0)]).cpu().numpy()  # the one read
        c_host, valid = host[:-1], host[-1] > 0.5
        k = int(valid.sum())
        a_np = b_np = np.where(valid, 1.0 / max(k, 1), 0.0)
    else:
        c_host = c64.cpu().numpy()  # the one host read of this solver
    rows, cols = np.flatnonzero(a_np > 0), np.flatnonzero(b_np > 0)
    block = np.ascontiguousarray(c_host[np.ix_(rows, cols)])
    if not np.isfinite(block).all():
        return _non_finite_plan(cost, refuse_non_finite)
    plan = np.zeros((n, m))
    if rows.size == 0 or cols.size == 0:
        return _to_device_of(plan, cost)
    a_sub, b_sub = a_np[rows], b_np[cols]
    if rows.size == cols.size and _is_uniform(a_sub) and _is_uniform(b_sub):
        from scipy.optimize import linear_sum_assignment  # heavy; only this solver path

        r, c = linear_sum_assignment(block)
        plan[rows[r], cols[c]] = a_sub[0]
    else:
        import ot  # POT: heavy to import, needed only for unequal or weighted marginals

        plan[np.ix_(rows, cols)] = ot.emd(a_sub, b_sub, block)
    return _to_device_of(plan, cost)


def ot_plan(
    cost: Tensor,
    *,
    solver: str = "exact",
    eps: float = 0.05,
    n_iter: int = 200,
    tol: float | None = 1e-9,
    a: Tensor | None = None,
    b: Tensor | None = None,
    mask: Tensor | None = None,
    quad_reg: float = 1e-3,
    refuse_non_finite: bool = True,
) -> Tensor:
    """Optimal transport plan for a cost matrix (detached, no graph).

    Args:
        cost: ``[n, m]`` finite costs (on the rows and columns that carry mass).
        solver: one of :data:`OT_SOLVERS`.
            ``"exact"``: ``linear_sum_assignment`` when the positive masses are equally many
            and uniform (the LP optimum is then a scaled permutation), POT ``ot.emd``
            otherwise.
            ``"sinkhorn"``: :func:`sinkhorn_log` with ``eps``, ``n_iter`` and ``tol``.
            ``"cvxpylayers"``: :func:`cvxpylayers_plan` with ``quad_reg`` (detached here).
        eps, n_iter, tol: Sinkhorn options (``tol=None``: a fixed number of sweeps, no host
            read). quad_reg: cvxpylayers option.
        a, b: ``[n]`` / ``[m]`` non-negative weights with equal totals; uniform when ``None``.
        mask: bool ``[n]`` for a square cost whose rows and columns are paired (row ``i`` and
            column ``i`` are the same point): the ``k`` rows it marks carry mass ``1/k`` on
            both sides, the others none, and their plan rows and columns are zero. Exclusive
            with ``a``/``b``. Built on the device: the marginals read nothing on the host.
        refuse_non_finite: raise ``ValueError`` on a non-finite cost (default); ``False``
            returns an all-NaN plan instead (Sinkhorn: a NaN plan, computed without a check),
            for a caller that checks its loss itself (ORDER's OT plugin: the template refuses
            a non-finite term).

    Returns:
        plan ``[n, m]`` with row sums ``a`` and column sums ``b``, dtype/device of ``cost``.

    Host reads: the exact solver copies the cost (and the mask) to the host once, checks
    finiteness there and sends the plan back with a non-blocking copy (from pinned memory to a
    CUDA device). Sinkhorn with ``tol=None``, uniform or masked weights and
    ``refuse_non_finite=False`` reads nothing; otherwise one finiteness read first.
    """
    check_solver(solver)
    if not isinstance(cost, Tensor) or cost.dim() != 2:
        raise ValueError(f"cost must be a [n, m] tensor, got {getattr(cost, 'shape', cost)!r}")
    n, m = cost.shape
    if mask is not None:
        _check_mask(mask, n, m)
        if a is not None or b is not None:
            raise ValueError("give either mask or the weights a, b, not both")
    weighted = a is not None or b is not None
    a_np = b_np = None
    if weighted or (solver == "exact" and mask is None):
        a_np, b_np = _weights(a, n, "a"), _weights(b, m, "b")
        if n and m and not math.isclose(a_np.sum(), b_np.sum(), rel_tol=1e-9, abs_tol=1e-12):
            raise ValueError(
                f"a and b must have the same total mass, got {a_np.sum()} and {b_np.sum()}"
            )
    if n == 0 or m == 0:
        return cost.detach().new_zeros((n, m))
    c_det = cost.detach()
    if solver == "exact":
        return _exact_plan(c_det, mask, a_np, b_np, refuse_non_finite)
    # Sinkhorn turns a non-finite cost into a NaN plan by itself: checked only to refuse it.
    check = refuse_non_finite or solver == "cvxpylayers"
    if check and not bool(torch.isfinite(c_det).all()):
        return _non_finite_plan(cost, refuse_non_finite)
    if weighted:
        a_t, b_t = torch.as_tensor(a_np), torch.as_tensor(b_np)
    elif mask is not None:
        a_t = mask.to(torch.float64) / mask.sum().clamp_min(1)
        b_t = a_t
    else:
        a_t, b_t = c_det.new_full((n,), 1.0 / n), c_det.new_full((m,), 1.0 / m)
    if solver == "sinkhorn":
        plan = sinkhorn_log(c_det, a_t, b_t, eps=eps, n_iter=n_iter, tol=tol)
        return plan.to(c_det)
    with torch.no_grad():
        return cvxpylayers_plan(c_det, a_t, b_t, quad_reg=quad_reg).detach()


def subsample_rows(
    n: int,
    max_points: int | None,
    *,
    mask: Tensor | None = None,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> Tensor | None:
    """Indices of at most ``max_points`` of ``n`` rows, uniform without replacement among the
    rows ``mask`` marks (all rows without a mask), in a shape that does not depend on the mask.

    Every row gets a random key (``torch.rand`` on the rows' device, from ``generator``);
    unmarked rows get key 2, above every drawn key; the ``max_points`` smallest keys are taken.
    So when ``k >= max_points`` rows are marked, the result is a uniform random
    ``max_points``-subset of them; when fewer, it holds all ``k`` and ``max_points - k``
    unmarked rows (keep them masked). Nothing is read on the host.

    Args:
        n: the number of rows.
        max_points: G (``None``: no sub-sampling).
        mask: bool ``[n]``, the rows that may be drawn.
        generator: a ``torch.Generator`` on ``device`` (the global generator when ``None``).
        device: where the rows live (default: ``mask``'s device, else the generator's).

    Returns:
        ``None`` when no sub-sampling is needed (``max_points`` is ``None`` or ≥ ``n``);
        otherwise sorted indices ``LongTensor [max_points]`` on ``device``.
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
    if device is None:
        device = mask.device if mask is not None else getattr(generator, "device", "cpu")
    keys = torch.rand(n, generator=generator, device=device)
    if mask is not None:
        keys = keys.masked_fill(~mask, 2.0)
    return keys.topk(int(max_points), largest=False, sorted=False).indices.sort().values


def ot_loss(
    current: Tensor,
    stored: Tensor,
    *,
    mask: Tensor | None = None,
    solver: str = "exact",
    eps: float = 0.05,
    n_iter: int = 200,
    tol: float | None = 1e-9,
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
        mask: bool ``[n]`` (needs ``m == n``): the rows that are points, on both sides. The
            ``k`` marked rows carry mass ``1/k`` each, the others none: the loss equals the
            loss of the marked rows alone, whatever the other rows hold (they are zeroed
            before the cost, so not even a non-finite value there reaches the loss or the
            gradient). Lets a caller keep fixed-shape, padded point sets.
        solver: ``"exact"`` (default; plan detached), ``"sinkhorn"`` (plan detached) or
            ``"cvxpylayers"`` (differentiable through the solution map, the paper's choice).
        eps, n_iter, tol: Sinkhorn regularisation (absolute, units of the squared distances),
            sweeps at ``eps`` and early-stop tolerance (``None``: exactly ``n_iter`` sweeps,
            no host read; see :func:`sinkhorn_log`).
        max_points: G, the most points per side, drawn by :func:`subsample_rows`. When
            ``n == m`` the **same** rows are drawn on both sides (the current and stored
            embeddings of the same inputs), among the marked rows when there is a mask;
            otherwise each side is sub-sampled independently (same generator).
        generator: torch generator of the sub-sampling, on ``current``'s device; the global
            generator when ``None``.
        quad_reg: quadratic smoothing of the cvxpylayers problem.
        solver_args: forwarded to the cvxpylayers layer.
        refuse_non_finite: raise on non-finite points or costs (default: one host read per
            side besides the solver's). ``False``: a non-finite input makes the loss NaN
            instead, for a caller that checks its loss itself; the exact solver then reads
            the device once (see :func:`ot_plan`), Sinkhorn with ``tol=None`` never.

    Returns:
        scalar tensor (0 when a side is empty or nothing is marked), differentiable w.r.t.
        ``current``.

    Raises:
        ValueError: bad shapes or mask, non-finite values, unknown solver, bad
            ``max_points``, a cvxpylayers problem above ``CVXPYLAYERS_MAX_ENTRIES``.
    """
    mask = _check_loss_inputs(current, stored, mask, solver, max_points)
    n, m = current.shape[0], stored.shape[0]
    if n == 0 or m == 0:
        return current.sum() * 0.0
    stored = stored.to(device=current.device, dtype=current.dtype)
    if mask is not None:  # padding rows hold zeros: finite, and no gradient reaches them
        keep = mask.unsqueeze(1)
        current, stored = torch.where(keep, current, 0.0), torch.where(keep, stored, 0.0)
    if refuse_non_finite:
        _check_points("current", current)
        _check_points("stored", stored)
    current, stored, mask = _subsample_points(current, stored, mask, max_points, generator)
    cost = squared_euclidean(current, stored, expand=True)  # memory O(nm), not O(nmd)
    if solver == "cvxpylayers":
        plan = _differentiable_plan(cost, mask, quad_reg, solver_args, refuse_non_finite)
    else:
        plan = ot_plan(
            cost,
            solver=solver,
            eps=eps,
            n_iter=n_iter,
            tol=tol,
            mask=mask,
            refuse_non_finite=refuse_non_finite,
        )
    return (plan * cost).sum()


def _differentiable_plan(
    cost: Tensor,
    mask: Tensor | None,
    quad_reg: float,
    solver_args: dict[str, Any] | None,
    refuse_non_finite: bool,
) -> Tensor:
    """The cvxpylayers plan of :func:`ot_loss` (with the gradient), NaN for a non-finite cost."""
    if refuse_non_finite or bool(torch.isfinite(cost).all()):
        if mask is None:
            a = b = None
        else:
            a = b = mask.to(cost.dtype) / mask.sum().clamp_min(1)
        return cvxpylayers_plan(cost, a, b, quad_reg=quad_reg, solver_args=solver_args)
    return _non_finite_plan(cost, refuse=False)


def _check_loss_inputs(
    current: Tensor, stored: Tensor, mask: Tensor | None, solver: str, max_points: int | None
) -> Tensor | None:
    """Refuse bad :func:`ot_loss` arguments (values checked later); ``mask`` on the device."""
    check_solver(solver)
    _check_points("current", current, finite=False)
    _check_points("stored", stored, finite=False)
    if current.shape[1] != stored.shape[1]:
        raise ValueError(
            f"current and stored must have the same feature size, got {tuple(current.shape)} "
            f"and {tuple(stored.shape)}"
        )
    if mask is not None:
        _check_mask(mask, current.shape[0], stored.shape[0])
        mask = mask.to(current.device)
    subsample_rows(0, max_points)  # validates max_points
    return mask


def _subsample_points(
    current: Tensor,
    stored: Tensor,
    mask: Tensor | None,
    max_points: int | None,
    generator: torch.Generator | None,
) -> tuple[Tensor, Tensor, Tensor | None]:
    """At most ``max_points`` rows per side: the same rows on both when ``n == m``."""
    n, m = current.shape[0], stored.shape[0]
    draw = dict(max_points=max_points, generator=generator, device=current.device)
    if n == m:
        idx = subsample_rows(n, mask=mask, **draw)
        if idx is not None:
            current, stored = current.index_select(0, idx), stored.index_select(0, idx)
            mask = None if mask is None else mask.index_select(0, idx)
    else:
        idx_c, idx_s = subsample_rows(n, **draw), subsample_rows(m, **draw)
        current = current if idx_c is None else current.index_select(0, idx_c)
        stored = stored if idx_s is None else stored.index_select(0, idx_s)
    return current, stored, mask
