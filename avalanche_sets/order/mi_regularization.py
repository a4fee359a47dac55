"""``MIRegularizationPlugin``: ORDER's mutual-information regulariser (Theorems 1 and 3, Eq. 8)."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
from avalanche.core import SupervisedPlugin

from ..functional.mi import MIEstimator, pair_with_prototypes
from ..functional.ood import OODSplit
from .components import MIBounds, refuse_replaced
from .ood_split import OODSplitPlugin

__all__ = ["MIRegularizationPlugin", "MIPairs", "REDUCTIONS"]

#: How the episodes' terms of a meta-batch are combined.
REDUCTIONS = ("mean", "sum")


class MIPairs(NamedTuple):
    """The MI pairs of a meta-batch of ``B`` episodes with ``U`` unlabeled images each.

    Attributes:
        e: ``[B, U, d]`` unlabeled embeddings (with the encoder's graph).
        p: ``[B, U, d]`` the nearest support prototype of each (``p_{c'}``).
        is_id: bool ``[B, U]``, ``U_id`` (its complement is ``U_ood``).
    """

    e: torch.Tensor
    p: torch.Tensor
    is_id: torch.Tensor


class MIRegularizationPlugin(SupervisedPlugin):
    """Add ``λ (I_ood − I_id)`` to the loss of every episode in the meta-batch (paper Eq. 8).

    For each episode, every unlabeled embedding ``e`` is paired with its nearest support
    prototype ``p_{c'}``, ``c' = argmin_c ‖e − p_c‖``; the pairs of ``U_ood`` and ``U_id`` (from
    :class:`~avalanche_sets.order.OODSplitPlugin`, read from ``strategy.iteration.ood_split``)
    give

    * ``I_ood`` — Theorem 1's variational upper bound (CLUB-style) with a Gaussian
      ``q_φ(p | e)``: ``mean_i log q(p_i|e_i) − mean_{i,j} log q(p_i|e_j)``;
    * ``I_id`` — Theorem 3's lower bound with ``a(y) = 1`` and a critic ``f_ψ`` of one hidden
      layer of 10 units: ``mean_i f(e_i,p_i) − mean_{i,j} exp f(e_i,p_j) + 1``.

    Every iteration, ``φ`` (maximum likelihood on the OOD pairs) and ``ψ`` (maximising ``I_id``
    on the ID pairs) take one step of their own Adam optimisers on **detached** pairs, then the
    encoder receives ``λ (I_ood − I_id)`` of every episode of the meta-batch (current and
    replayed), with ``φ, ψ`` fixed. The two happen in two places: the networks' step in
    :meth:`after_forward` (the forward pass is done, the split is made, no loss is computed
    yet), the term in :meth:`loss_term`, which the strategy's criterion adds
    (:class:`~avalanche_sets.order.OrderStrategy`'s names it in Eq. 10) and which only reads the
    networks. The order is the algorithm's: this iteration's term uses the networks after this
    iteration's step. This is what the paper defines; the authors' code never trains these
    networks and inverts their signs (design §3), which we do not copy.

    The episodes' terms are combined like the strategy combines the episodes' meta losses
    (``reduction``): ``"sum"`` in :class:`~avalanche_sets.order.OrderStrategy`, whose objective
    sums every task's ``L_total`` as paper Eq. 10 does; ``"mean"`` for a strategy whose meta loss
    is a mean over the meta-batch (the template's default), so that λ keeps its meaning
    relative to one task's loss either way.

    The variational networks are built at their first use on the device of the embeddings
    they see (the model's device), and so is a state restored by :meth:`load_state_dict`:
    a checkpoint written on one device resumes on the device the model lives on.

    The bounds and their networks are the plugin's :attr:`estimator`, made at first use by
    ``estimator(dim, device)`` (an :class:`~avalanche_sets.order.components.MIBounds`; default:
    :class:`~avalanche_sets.functional.mi.MIEstimator` with ``q_hidden``, ``critic_hidden`` and
    ``lr``), initialised from the plugin's ``seed``.

    Args:
        lam: λ (paper: 1e-5). Must be ≥ 0.
        use_id / use_ood: keep the ``I_id`` / ``I_ood`` term (fine-grained ablation).
        critic_hidden: hidden units of ``f_ψ`` (paper: 10). q_hidden: of ``q_φ``.
        lr: learning rate of both variational optimisers.
        seed: seed of the variational networks' initialisation.
        reduction: ``"mean"`` (default) or ``"sum"`` of the episodes' ``λ (I_ood − I_id)``.
        estimator: ``(dim, device) -> MIBounds``, the estimator of one's own; given,
            ``critic_hidden``, ``q_hidden`` and ``lr`` must be left at their defaults (they are
            the default's).
    """

    #: The plugins it reads from (checked when the strategy is built).
    PARTNERS = {OODSplitPlugin: "it separates U_id from U_ood for the MI terms"}
    #: The name of its term in ``strategy.loss_terms``.
    TERM = "mi"

    def __init__(
        self,
        *,
        lam: float = 1e-5,
        use_id: bool = True,
        use_ood: bool = True,
        critic_hidden: int = 10,
        q_hidden: int = 64,
        lr: float = 1e-3,
        seed: int = 0,
        reduction: str = "mean",
        estimator: Callable[[int, torch.device], MIBounds] | None = None,
    ) -> None:
        super().__init__()
        options = {"critic_hidden": critic_hidden, "q_hidden": q_hidden, "lr": lr}
        refuse_replaced("MI estimator", estimator, options, MIRegularizationPlugin.__init__)
        if not lam >= 0:
            raise ValueError(f"lam (λ) must be >= 0, got {lam}")
        if reduction not in REDUCTIONS:
            raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
        if not (use_id or use_ood):
            raise ValueError("at least one of use_id / use_ood must be True")
        self.lam = float(lam)
        self.use_id = bool(use_id)
        self.use_ood = bool(use_ood)
        self.critic_hidden = critic_hidden
        self.q_hidden = q_hidden
        self.lr = lr
        self.seed = seed
        self.reduction = reduction
        self.make_estimator = estimator or self._paper_estimator
        """``(dim, device) -> MIBounds``: what :attr:`estimator` is made by."""
        self.estimator: MIBounds | None = None
        self._dim: int | None = None
        # A restored state waits here until the device it belongs on is known (first use).
        self._restored: dict | None = None
        # This iteration's (state, pairs) once the networks took their step on them.
        self._fitted: tuple[object, MIPairs] | None = None
        self.last_values: dict[str, torch.Tensor] = {}
        """The last iteration's mean ``I_ood``, ``I_id`` and the fit's ``q_nll``, as detached
        0-d tensors (read them with ``float()`` when needed: reading waits for the device)."""

    def _paper_estimator(self, dim: int, device) -> MIEstimator:
        """The paper's networks: a Gaussian ``q_φ`` and a critic ``f_ψ``."""
        return MIEstimator(
            dim,
            q_hidden=self.q_hidden,
            critic_hidden=self.critic_hidden,
            lr_q=self.lr,
            lr_critic=self.lr,
            device=device,
        )

    def _build(self, dim: int, device) -> MIBounds:
        # The networks are initialised on the CPU from the CPU generator seeded with the
        # plugin's seed, inside a fork that restores its state afterwards: the model's
        # initialisation stays independent of this plugin. Only the CPU generator is seeded
        # (torch.manual_seed would also reseed every CUDA generator, which the fork does not
        # restore, and change the random numbers of the rest of a GPU run).
        with torch.random.fork_rng(devices=[]):
            torch.random.default_generator.manual_seed(self.seed)
            return self.make_estimator(dim, device)

    def estimator_on(self, dim: int, device: torch.device | str) -> MIBounds:
        """The variational networks, built on ``device`` at first use — with the restored
        checkpoint state, if any (its optimiser moments follow the parameters' device)."""
        if self.estimator is None:
            est = self._build(dim, device)
            if self._restored is not None:
                if self._restored["dim"] != dim:
                    raise ValueError(
                        f"the restored MI networks take {self._restored['dim']}-d embeddings but "
                        f"the model gives {dim}-d ones; resume with the model that was saved"
                    )
                est.load_state_dict(self._restored["estimator"])
                self._restored = None
            self.estimator, self._dim = est, dim
        return self.estimator

    def pairs(self, state, split: OODSplit | None) -> MIPairs:
        """Every unlabeled embedding of the meta-batch with its nearest support prototype, and
        the split's masks: fixed-shape ``[B, U, d]`` pairs, ``U_id`` and ``U_ood`` as masks
        (nothing is cut to a data-dependent size, nothing read on the host)."""
        if split is None:
            raise RuntimeError(
                "MIRegularizationPlugin needs OODSplitPlugin (it separates U_id from U_ood) "
                "in the same strategy"
            )
        e = state.unlabeled_emb
        return MIPairs(e=e, p=pair_with_prototypes(e, state.prototypes), is_id=split.is_id)

    def after_forward(self, strategy, **kwargs) -> None:
        """One step of each variational network on this meta-batch's detached pairs (every
        episode's ID pairs together, and its OOD pairs), before :meth:`loss_term` reads them."""
        self._fitted = None
        it = strategy.iteration
        if it is None or it.state is None or not it.training:
            return
        state = it.state
        pairs = self.pairs(state, it.ood_split)
        estimator = self.estimator_on(state.unlabeled_emb.shape[-1], state.unlabeled_emb.device)
        d = pairs.e.shape[-1]
        e, p, is_id = pairs.e.reshape(-1, d), pairs.p.reshape(-1, d), pairs.is_id.reshape(-1)
        self.last_values = dict(estimator.fit(e.detach(), p.detach(), is_id))
        self._fitted = (state, pairs)

    def loss_term(self, strategy) -> torch.Tensor | None:
        """``λ (I_ood − I_id)`` of the meta-batch's episodes, combined by :attr:`reduction`,
        with the networks :meth:`after_forward` fitted on them (``None`` outside training)."""
        it = strategy.iteration
        if it is None or it.state is None or not it.training:
            return None
        if self._fitted is None or self._fitted[0] is not it.state:
            raise RuntimeError(
                "MIRegularizationPlugin.loss_term reads the pairs its after_forward fitted the "
                "MI networks on in this iteration, but after_forward did not see this forward "
                "pass; call loss_term from the criterion or before backward, after the forward "
                "pass of the strategy's training loop"
            )
        pairs = self._fitted[1]
        self._fitted = None  # read once; the pairs hold the iteration's graph
        # Every episode at once: [B, U, d] pairs, each episode's bounds over its masked rows.
        i_ood, i_id = self.estimator.episode_bounds(
            pairs.e, pairs.p, pairs.is_id, use_id=self.use_id, use_ood=self.use_ood
        )
        reg = (i_ood - i_id).reshape(-1)
        reg = reg.sum() if self.reduction == "sum" else reg.mean()
        # detached tensors on the device: no host synchronisation per iteration
        self.last_values = {
            "I_ood": i_ood.detach().mean(),
            "I_id": i_id.detach().mean(),
            **self.last_values,
        }
        return self.lam * reg

    def after_training_iteration(self, strategy, **kwargs) -> None:
        self._fitted = None  # the pairs hold the iteration's graph: let it go

    def state_dict(self) -> dict:
        if self.estimator is None:
            return self._restored or {"estimator": None}
        return {"estimator": self.estimator.state_dict(), "dim": self._dim}

    def load_state_dict(self, state: dict) -> None:
        # Not rebuilt here: the plugin does not know the model's device yet. The networks are
        # rebuilt at their next use, on the device of the embeddings (estimator_on).
        self.estimator = None
        self._restored = None if state["estimator"] is None else dict(state)
