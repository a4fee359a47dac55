"""ORDER's four replaceable parts: what each takes and gives, and the paper's own.

Each part is an argument of :class:`~avalanche_sets.order.OrderStrategy` (and of the plugin that
runs it); give your own to test an idea on one part and keep the rest of ORDER as it is:

======================  ==================  ===================================================
part                    argument            the paper's (default)
======================  ==================  ===================================================
OOD split               ``ood_detector``    :class:`PrototypeDistanceDetector`: distance to
                                            the nearest prototype, cut at ``mean + k·std`` of
                                            the query's distances (Algorithm 1)
MI estimator            ``mi_estimator``    :class:`~avalanche_sets.functional.mi.MIEstimator`:
                                            CLUB upper bound with a Gaussian ``q_φ`` and a
                                            critic ``f_ψ`` (Theorems 1 and 3)
memory policy           ``memory``          :class:`~avalanche_sets.functional.reservoir.Reservoir`:
                                            Vitter's Algorithm R over tasks
transport loss          ``transport``       :class:`OptimalTransport`: ``min_W ⟨W, C⟩``,
                                            squared-Euclidean cost, uniform weights (Eq. 9)
======================  ==================  ===================================================

The interfaces, with their shapes (``B`` episodes, ``Q`` queries, ``U`` unlabeled images, ``N``
classes, ``d`` embedding size):

* :class:`OODDetector` — ``split(query_emb [B,Q,d], unlabeled_emb [B,U,d], prototypes [B,N,d])
  -> OODSplit`` with ``is_id`` bool ``[B,U]`` and ``distances`` float ``[B,U]``, the OOD score
  (larger: more OOD; its AUROC is what the OOD metrics report). Called without gradient.
* :class:`MIBounds` — made by ``mi_estimator(dim, device)`` at first use; ``fit(e, p, is_id)``
  takes one step of its own parameters on detached pairs (``e``, ``p`` ``[n,d]``: each unlabeled
  embedding and its nearest prototype, ``is_id`` bool ``[n]``) and returns detached values to
  log; ``episode_bounds(e, p, is_id, use_id=, use_ood=)`` gives ``(I_ood, I_id)``, each ``[B]``,
  from ``[B,U,d]`` pairs with the encoder's graph (a bound not asked for is zeros); it keeps
  its state in ``state_dict``/``load_state_dict`` (a checkpoint resumes it).
* ``memory(capacity, seed=seed)`` — a :class:`~avalanche_sets.functional.reservoir.Reservoir`
  of tasks; its policy is :meth:`~avalanche_sets.functional.reservoir.Reservoir.choose_slot`
  ``(n) -> slot | None``, where the ``n``-th task offered goes (override it in a subclass).
* :class:`TransportLoss` — ``loss(current [n,d], stored [n,d], mask bool [n], generator)
  -> 0-d tensor``, between the replayed tasks' current and stored features (row ``i`` of both
  from one input; ``mask``: the rows that are points), differentiable in ``current``.

A part given replaces the default's options too: the options only the default reads
(``ood_k``, ``ood_rule``, ``ood_n_id`` of the detector; ``ot_solver``, ``ot_max_points`` of
the transport) are refused when set, like any option a run would not read.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

import torch
from torch import Tensor

from ..functional.ood import OOD_RULES, OODSplit, split_ood
from ..functional.ot import check_max_points, check_solver, ot_loss
from ..method import same_value

__all__ = [
    "MIBounds",
    "OODDetector",
    "OptimalTransport",
    "PrototypeDistanceDetector",
    "TransportLoss",
    "refuse_replaced",
]


@runtime_checkable
class OODDetector(Protocol):
    """Splits every episode's unlabeled set into ``U_id`` and ``U_ood``."""

    def split(self, query_emb: Tensor, unlabeled_emb: Tensor, prototypes: Tensor) -> OODSplit:
        """``[B,Q,d]``, ``[B,U,d]``, ``[B,N,d]`` -> :class:`OODSplit` (``is_id`` bool ``[B,U]``,
        ``distances`` float ``[B,U]``: larger is more OOD)."""
        ...


@runtime_checkable
class MIBounds(Protocol):
    """The MI terms' estimator, with parameters of its own fitted every iteration."""

    def fit(self, e: Tensor, p: Tensor, is_id: Tensor) -> dict[str, Tensor]:
        """One step on detached ``[n,d]`` pairs; detached values to log."""
        ...

    def episode_bounds(
        self, e: Tensor, p: Tensor, is_id: Tensor, *, use_id: bool, use_ood: bool
    ) -> tuple[Tensor, Tensor]:
        """``(I_ood [B], I_id [B])`` of ``[B,U,d]`` pairs, with the encoder's graph."""
        ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> Any: ...


@runtime_checkable
class TransportLoss(Protocol):
    """The transport term between current and stored features of the replayed tasks."""

    def __call__(
        self, current: Tensor, stored: Tensor, *, mask: Tensor, generator: torch.Generator
    ) -> Tensor:
        """``[n,d]``, ``[n,d]``, bool ``[n]`` -> 0-d tensor, differentiable in ``current``."""
        ...


class PrototypeDistanceDetector:
    """ORDER's OOD split (paper Algorithm 1): the score of an unlabeled image is its distance to
    the nearest prototype (L2-normalised embeddings); the query set, drawn from the episode's
    classes, calibrates the cut ``mean + k·std`` of its own distances
    (:func:`~avalanche_sets.functional.ood.split_ood`).

    Args:
        k: standard deviations above the mean (paper: 1).
        rule: ``"threshold"`` (the paper) or ``"topk"`` (the authors' code: keep the ``n_id``
            closest images, which needs the number of ID images).
        n_id: images kept as ID by ``"topk"``.
    """

    def __init__(self, *, k: float = 1.0, rule: str = "threshold", n_id: int | None = None):
        if rule not in OOD_RULES:
            raise ValueError(f"rule must be one of {OOD_RULES}, got {rule!r}")
        if not k >= 0:
            raise ValueError(f"k must be a non-negative number of standard deviations, got {k}")
        if rule == "topk" and (n_id is None or n_id < 0):
            raise ValueError("rule='topk' needs n_id >= 0 (the number of ID images to keep)")
        self.k = float(k)
        self.rule = rule
        self.n_id = n_id

    def split(self, query_emb: Tensor, unlabeled_emb: Tensor, prototypes: Tensor) -> OODSplit:
        return split_ood(
            query_emb, unlabeled_emb, prototypes, k=self.k, rule=self.rule, n_id=self.n_id
        )

    def __repr__(self) -> str:
        return f"PrototypeDistanceDetector(k={self.k}, rule={self.rule!r}, n_id={self.n_id})"


class OptimalTransport:
    """ORDER's transport loss (paper Eq. 9): ``min_{W ∈ Π(μ,ν)} Σ_ij W_ij ‖e_i − g_j‖²`` with
    uniform weights on at most ``max_points`` rows drawn uniformly (the same inputs on both
    sides; :func:`~avalanche_sets.functional.ot.ot_loss`).

    Args:
        solver: ``"exact"`` (plan detached), ``"sinkhorn"`` (plan detached) or
            ``"cvxpylayers"`` (the paper's differentiable layer; slow).
        max_points: G, pairs per step (``None``: all).
        eps, n_iter: Sinkhorn regularisation and sweeps. tol: Sinkhorn's early stop
            (``None``: exactly ``n_iter`` sweeps, no host read).
    """

    def __init__(
        self,
        *,
        solver: str = "exact",
        max_points: int | None = 250,
        eps: float = 0.05,
        n_iter: int = 200,
        tol: float | None = None,
    ) -> None:
        check_solver(solver)
        check_max_points(solver, max_points)
        if tol is not None and not tol > 0:
            raise ValueError(f"tol must be positive or None, got {tol!r}")
        self.solver = solver
        self.max_points = max_points
        self.eps = eps
        self.n_iter = n_iter
        self.tol = tol

    def __call__(
        self, current: Tensor, stored: Tensor, *, mask: Tensor, generator: torch.Generator
    ) -> Tensor:
        return ot_loss(
            current,
            stored,
            mask=mask,
            solver=self.solver,
            eps=self.eps,
            n_iter=self.n_iter,
            tol=self.tol,
            max_points=self.max_points,
            generator=generator,
            refuse_non_finite=False,  # the template refuses a non-finite term, by name
        )

    def __repr__(self) -> str:
        return f"OptimalTransport(solver={self.solver!r}, max_points={self.max_points})"


def refuse_replaced(
    part: str, given: object, options: Mapping[str, Any], of: Callable[..., Any]
) -> None:
    """Refuse ``options`` (name -> value) that only the default of ``part`` reads, set to other
    than their default in the signature of ``of`` while ``given`` replaces that default.

    Raises:
        ValueError: naming the options, the part that replaces the default, and the fix.
    """
    if given is None:
        return
    params = inspect.signature(of).parameters
    set_ = sorted(k for k, v in options.items() if not same_value(v, params[k].default))
    if set_:
        raise ValueError(
            f"option(s) {set_} are read by ORDER's own {part}, which "
            f"{_name(given)} replaces here; fix: drop them (set the replacement's own "
            "options instead)"
        )


def _name(part: object) -> str:
    """A part's name for a message: a class's (or a factory function's) own, else its class's."""
    return getattr(part, "__name__", type(part).__name__)
