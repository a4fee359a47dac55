"""``OTFeatureLossPlugin``: ORDER's optimal-transport feature regulariser (paper Eq. 9, §4.3)."""

from __future__ import annotations

import torch
from avalanche.core import SupervisedPlugin

from ..functional.ot import CVXPYLAYERS_MAX_ENTRIES, check_solver, ot_loss
from .replay import FeatureReservoirReplayPlugin

__all__ = ["OTFeatureLossPlugin"]


class OTFeatureLossPlugin(SupervisedPlugin):
    """Add ``β · L_OT`` between current and stored features of replayed memory tasks.

    For the memory tasks replayed in this meta-batch (see
    :class:`~avalanche_sets.order.FeatureReservoirReplayPlugin`), the current embeddings
    ``{e_i}`` of their stored inputs (support ∪ the ``U_id`` chosen at storage time) come from
    the meta-batch's single forward pass; their stored embeddings ``{g_i}`` from the memory.
    At most ``max_points`` (G) pairs are drawn per step, the same inputs on both sides, and

        ``L_OT = min_{W ∈ Π(μ, ν)} Σ_ij W_ij ‖e_i − g_j‖²``   (paper Eq. 9)

    with uniform ``μ, ν`` is added to the loss with weight ``β``, once per meta-batch (Eq. 10:
    ``β`` weighs it against one task's loss, as :class:`~avalanche_sets.order.OrderStrategy`
    sums the tasks' losses): :meth:`loss_term`, which the strategy's criterion adds
    (:class:`~avalanche_sets.order.OrderStrategy`'s names it in Eq. 10). The replayed tasks come from
    ``strategy.iteration.replayed``. Solvers: ``"exact"`` (default; assignment /
    network simplex, plan detached — by the envelope theorem its gradient is that of the optimal
    value), ``"sinkhorn"`` and ``"cvxpylayers"`` (the paper's differentiable convex layer; slow).

    Args:
        beta: weight β (paper: 0.003). Must be ≥ 0.
        solver: ``"exact"``, ``"sinkhorn"`` or ``"cvxpylayers"``.
        max_points: G, pairs per step (``None``: all).
        eps, n_iter: Sinkhorn parameters.
        seed: seed of the sub-sampling generator.
    """

    #: The plugins it reads from (checked when the strategy is built).
    PARTNERS = {FeatureReservoirReplayPlugin: "it regularises the replayed tasks' features"}
    #: The name of its term in ``strategy.loss_terms``.
    TERM = "ot"

    def __init__(
        self,
        *,
        beta: float = 0.003,
        solver: str = "exact",
        max_points: int | None = 250,
        eps: float = 0.05,
        n_iter: int = 200,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if not beta >= 0:
            raise ValueError(f"beta must be >= 0, got {beta}")
        check_solver(solver)
        if max_points is not None and (not isinstance(max_points, int) or max_points < 1):
            raise ValueError(f"max_points must be a positive integer or None, got {max_points!r}")
        if solver == "cvxpylayers":
            side = int(CVXPYLAYERS_MAX_ENTRIES**0.5)
            if max_points is None or max_points > side:
                raise ValueError(
                    f"solver='cvxpylayers' builds problems of at most {side}x{side} points, but "
                    f"max_points={max_points!r}; set max_points <= {side} (ot_max_points in "
                    "OrderStrategy) or use solver='exact'"
                )
        self.beta = float(beta)
        self.solver = solver
        self.max_points = max_points
        self.eps = eps
        self.n_iter = n_iter
        self._generator = torch.Generator().manual_seed(int(seed))
        self.last_value: torch.Tensor | None = None
        """The last iteration's ``L_OT`` as a detached 0-d tensor (``None``: nothing
        replayed); read it with ``float()`` when needed (reading waits for the device)."""

    def current_and_stored(self, state, replayed) -> tuple[torch.Tensor, torch.Tensor]:
        """Current and stored embeddings of the replayed tasks' stored inputs, paired by row:
        ``e_i`` from this forward pass (``state``), ``g_i`` from the memory."""
        current, stored = [], []
        for row, task in zip(replayed.rows, replayed.tasks):
            u_id = task.id_rows().to(state.unlabeled_emb.device)  # fixed-shape: no host read
            unlabeled = state.unlabeled_emb[row].index_select(0, u_id)
            current.append(torch.cat([state.support_emb[row], unlabeled]))
            stored.append(task.features)
        return torch.cat(current), torch.cat(stored).to(state.support_emb.device)

    def loss_term(self, strategy) -> torch.Tensor | None:
        """``β · L_OT`` of the replayed tasks (``None`` when this iteration replays none)."""
        it = strategy.iteration
        if it is None or it.replayed is None or it.state is None:
            self.last_value = None
            return None
        value = ot_loss(
            *self.current_and_stored(it.state, it.replayed),
            solver=self.solver,
            eps=self.eps,
            n_iter=self.n_iter,
            max_points=self.max_points,
            generator=self._generator,
            refuse_non_finite=False,  # the template refuses a non-finite term, by name
        )
        self.last_value = value.detach()  # a tensor: no host synchronisation per iteration
        return self.beta * value

    def state_dict(self) -> dict:
        return {"generator": self._generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self._generator.set_state(state["generator"])
