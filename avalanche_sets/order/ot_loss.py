"""``OTFeatureLossPlugin``: ORDER's optimal-transport feature regulariser (paper Eq. 9, §4.3)."""

from __future__ import annotations

import hashlib
from typing import Any

import torch
from avalanche.core import SupervisedPlugin

from .components import OptimalTransport, TransportLoss, refuse_replaced
from .replay import FeatureReservoirReplayPlugin

__all__ = ["OTFeatureLossPlugin"]


class OTFeatureLossPlugin(SupervisedPlugin):
    """Add ``β · L_OT`` between current and stored features of replayed memory tasks.

    For the memory tasks replayed in this meta-batch (see
    :class:`~avalanche_sets.order.FeatureReservoirReplayPlugin`), the current embeddings
    ``{e_i}`` of their stored inputs (support ∪ the ``U_id`` chosen at storage time) come from
    the meta-batch's single forward pass; their stored embeddings ``{g_i}`` from the memory.
    Both sides are fixed-shape, padded point sets (one row per support and unlabeled image of
    each replayed task) with a mask of the valid rows (:meth:`current_and_stored`), so the
    term reads nothing on the host except what its solver needs. At most ``max_points`` (G)
    valid pairs are drawn per step, uniformly, the same inputs on both sides, with random keys
    from the plugin's own generator on the model's device
    (:func:`~avalanche_sets.functional.ot.subsample_rows`), and

        ``L_OT = min_{W ∈ Π(μ, ν)} Σ_ij W_ij ‖e_i − g_j‖²``   (paper Eq. 9)

    with uniform ``μ, ν`` is added to the loss with weight ``β``, once per meta-batch (Eq. 10:
    ``β`` weighs it against one task's loss, as :class:`~avalanche_sets.order.OrderStrategy`
    sums the tasks' losses): :meth:`loss_term`, which the strategy's criterion adds
    (:class:`~avalanche_sets.order.OrderStrategy`'s names it in Eq. 10). The replayed tasks come from
    ``strategy.iteration.replayed``. Solvers: ``"exact"`` (default; assignment /
    network simplex, plan detached — by the envelope theorem its gradient is that of the optimal
    value; one host round trip: the cost copied over, the plan copied back without blocking),
    ``"sinkhorn"`` (plan detached; with ``tol=None``, the default here, a fixed number of
    sweeps that reads nothing on the host, for a step captured as one CUDA graph) and
    ``"cvxpylayers"`` (the paper's differentiable convex layer; slow).

    The loss itself is the plugin's :attr:`transport` (a
    :class:`~avalanche_sets.order.components.TransportLoss`): the paper's
    :class:`~avalanche_sets.order.components.OptimalTransport` by default, or one of your own
    (``transport=``), given the points, their mask and the sub-sampling generator.

    Args:
        beta: weight β (paper: 0.003). Must be ≥ 0.
        solver: ``"exact"``, ``"sinkhorn"`` or ``"cvxpylayers"``.
        max_points: G, pairs per step (``None``: all).
        eps, n_iter: Sinkhorn regularisation (absolute) and sweeps at ``eps`` (after the
            ε-scaling stages, see :func:`~avalanche_sets.functional.ot.sinkhorn_log`).
        tol: Sinkhorn's early stop on the row marginal's L1 error (a host read every 10
            sweeps); ``None`` (default): exactly ``n_iter`` sweeps, no host read.
        seed: seed of the sub-sampling generator (created on the model's device at first
            use; saved and restored with :meth:`state_dict`).
        transport: the transport loss of one's own; given, ``solver``, ``max_points``,
            ``eps``, ``n_iter`` and ``tol`` must be left at their defaults (they are the
            default's).
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
        tol: float | None = None,
        seed: int = 0,
        transport: TransportLoss | None = None,
    ) -> None:
        super().__init__()
        if not beta >= 0:
            raise ValueError(f"beta must be >= 0, got {beta}")
        options = {"solver": solver, "max_points": max_points, "eps": eps, "n_iter": n_iter}
        refuse_replaced(
            "transport loss", transport, {**options, "tol": tol}, OTFeatureLossPlugin.__init__
        )
        self.transport = transport or OptimalTransport(
            solver=solver, max_points=max_points, eps=eps, n_iter=n_iter, tol=tol
        )
        """The loss between current and stored features
        (:class:`~avalanche_sets.order.components.TransportLoss`)."""
        self.beta = float(beta)
        self.solver = solver
        self.max_points = max_points
        self.eps = eps
        self.n_iter = n_iter
        self.tol = tol
        self.seed = int(seed)
        self._generator: torch.Generator | None = None
        # A generator state not yet placed on a device (a restored checkpoint), with the
        # device type it was saved from.
        self._pending: dict[str, Any] | None = None
        self.last_value: torch.Tensor | None = None
        """The last iteration's ``L_OT`` as a detached 0-d tensor (``None``: nothing
        replayed); read it with ``float()`` when needed (reading waits for the device)."""

    def current_and_stored(self, state, replayed) -> tuple[torch.Tensor, ...]:
        """Current and stored embeddings of the replayed tasks' stored inputs, paired by row,
        and the mask of the rows that are points.

        Returns:
            ``(current, stored, mask)``: ``[R·(S+U), d]``, ``[R·(S+U), d]`` and bool
            ``[R·(S+U)]`` for ``R`` replayed tasks of ``S`` support and ``U`` unlabeled images:
            task by task, one row per support then unlabeled image; ``e_i`` from this forward
            pass (``state``), ``g_i`` from the memory (:attr:`MemoryTask.features`), ``mask``
            from :meth:`MemoryTask.feature_mask` (the support and the ``U_id`` chosen at
            storage time). Fixed shapes, built with slices and stacks: no host read.
        """
        rows = replayed.rows
        if rows.step != 1:
            raise ValueError(f"replayed rows must be contiguous, got {rows!r}")
        device = state.support_emb.device
        support = state.support_emb[rows.start : rows.stop]
        current = torch.cat([support, state.unlabeled_emb[rows.start : rows.stop]], dim=1)
        stored = torch.stack([t.features for t in replayed.tasks]).to(device)
        unlabeled_id = torch.stack([t.unlabeled_id for t in replayed.tasks]).to(device)
        mask = torch.cat(
            [unlabeled_id.new_ones(support.shape[:2]), unlabeled_id], dim=1
        )  # each task's feature_mask(), stacked
        return current.flatten(0, 1), stored.flatten(0, 1), mask.flatten()

    def generator(self, device: torch.device) -> torch.Generator:
        """The sub-sampling generator on ``device``: seeded with ``seed`` when first made,
        or restored from a checkpoint's state; a state saved from another device type
        seeds it instead (with a hash of that state: reproducible, another stream)."""
        device = torch.device(device)
        gen = self._generator
        if gen is not None and gen.device == device:
            return gen
        if gen is not None:  # the model moved: carry the stream over as a pending state
            self._pending = {"generator": gen.get_state(), "device": gen.device.type}
        gen = torch.Generator(device=device)
        pending, self._pending = self._pending, None
        if pending is None:
            gen.manual_seed(self.seed)
        elif pending["device"] == gen.device.type:
            gen.set_state(pending["generator"])
        else:
            digest = hashlib.sha256(pending["generator"].numpy().tobytes()).digest()
            gen.manual_seed(int.from_bytes(digest[:8], "little"))
        self._generator = gen
        return gen

    def before_training_iteration(self, strategy, **kwargs) -> None:
        """Make the generator on the model's device before the step (a compiled step cannot
        create one)."""
        self.generator(next(strategy.model.parameters()).device)

    def loss_term(self, strategy) -> torch.Tensor | None:
        """``β · L_OT`` of the replayed tasks (``None`` when this iteration replays none)."""
        it = strategy.iteration
        if it is None or it.replayed is None or it.state is None:
            self.last_value = None
            return None
        current, stored, mask = self.current_and_stored(it.state, it.replayed)
        value = self.transport(current, stored, mask=mask, generator=self.generator(current.device))
        self.last_value = value.detach()  # a tensor: no host synchronisation per iteration
        return self.beta * value

    def state_dict(self) -> dict:
        """``{"generator": state, "device": type}`` of the sub-sampling generator (``None``
        for both before its first use and restore)."""
        if self._generator is not None:
            return {"generator": self._generator.get_state(), "device": self._generator.device.type}
        if self._pending is not None:
            return dict(self._pending)
        return {"generator": None, "device": None}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`'s generator, placed on the model's device at its next
        use. A state without ``"device"`` is a CPU generator's."""
        self._generator = None
        if state.get("generator") is None:
            self._pending = None
            return
        # A state without a device is that of a default torch.Generator(), the host's.
        device = state.get("device") or torch.Generator().device.type
        self._pending = {"generator": state["generator"], "device": device}
