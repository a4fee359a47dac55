"""``MIRegularizationPlugin``: ORDER's mutual-information regulariser (Theorems 1 and 3, Eq. 8)."""

from __future__ import annotations

import torch
from avalanche.core import SupervisedPlugin

from ..functional.mi import MIEstimator, pair_with_prototypes

__all__ = ["MIRegularizationPlugin"]


class MIRegularizationPlugin(SupervisedPlugin):
    """Add ``λ (I_ood − I_id)`` to the loss of every episode in the meta-batch (paper Eq. 8).

    For each episode, every unlabeled embedding ``e`` is paired with its nearest support
    prototype ``p_{c'}``, ``c' = argmin_c ‖e − p_c‖``; the pairs of ``U_ood`` and ``U_id`` (from
    :class:`~avalanche_sets.order.OODSplitPlugin`) give

    * ``I_ood`` — Theorem 1's variational upper bound (CLUB-style) with a Gaussian
      ``q_φ(p | e)``: ``mean_i log q(p_i|e_i) − mean_{i,j} log q(p_i|e_j)``;
    * ``I_id`` — Theorem 3's lower bound with ``a(y) = 1`` and a critic ``f_ψ`` of one hidden
      layer of 10 units: ``mean_i f(e_i,p_i) − mean_{i,j} exp f(e_i,p_j) + 1``.

    Every iteration, ``φ`` (maximum likelihood on the OOD pairs) and ``ψ`` (maximising ``I_id``
    on the ID pairs) take one step of their own Adam optimisers on **detached** pairs, then the
    encoder receives ``λ (I_ood − I_id)`` averaged over the episodes, with ``φ, ψ`` fixed
    (``before_backward``). This is what the paper defines; the authors' code never trains these
    networks and inverts their signs (design §3), which we do not copy.

    Args:
        lam: λ (paper: 1e-5). Must be ≥ 0.
        use_id / use_ood: keep the ``I_id`` / ``I_ood`` term (fine-grained ablation).
        critic_hidden: hidden units of ``f_ψ`` (paper: 10). q_hidden: of ``q_φ``.
        lr: learning rate of both variational optimisers.
        seed: seed of the variational networks' initialisation.
    """

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
    ) -> None:
        super().__init__()
        if not lam >= 0:
            raise ValueError(f"lam (λ) must be >= 0, got {lam}")
        if not (use_id or use_ood):
            raise ValueError("at least one of use_id / use_ood must be True")
        self.lam = float(lam)
        self.use_id = bool(use_id)
        self.use_ood = bool(use_ood)
        self.critic_hidden = critic_hidden
        self.q_hidden = q_hidden
        self.lr = lr
        self.seed = seed
        self.estimator: MIEstimator | None = None
        self.last_values: dict[str, float] = {}

    def _build(self, dim: int, device) -> MIEstimator:
        # A private generator keeps the model's initialisation independent of this plugin.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            est = MIEstimator(
                dim,
                q_hidden=self.q_hidden,
                critic_hidden=self.critic_hidden,
                lr_q=self.lr,
                lr_critic=self.lr,
            )
        return est.to(device)

    def pairs(self, state):
        """Per-episode ``(e_id, p_id, e_ood, p_ood)`` from the state's OOD split."""
        split = state.extras.get("ood_split")
        if split is None:
            raise RuntimeError(
                "MIRegularizationPlugin needs OODSplitPlugin (it separates U_id from U_ood) "
                "before it in the plugin list"
            )
        out = []
        for b in range(len(state)):
            e = state.unlabeled_emb[b]
            p = pair_with_prototypes(e, state.prototypes[b])
            m = split.is_id[b]
            out.append((e[m], p[m], e[~m], p[~m]))
        return out

    def before_backward(self, strategy, **kwargs) -> None:
        state = strategy.episode_state
        if state is None or not strategy.is_training:
            return
        pairs = self.pairs(state)
        if self.estimator is None:
            self.estimator = self._build(state.unlabeled_emb.shape[-1], state.unlabeled_emb.device)
        cat = lambda i: torch.cat([p[i] for p in pairs]).detach()  # noqa: E731
        fit = self.estimator.fit_step(cat(0), cat(1), cat(2), cat(3))
        regs, i_oods, i_ids = [], [], []
        for e_id, p_id, e_ood, p_ood in pairs:
            i_ood, i_id = self.estimator.bounds(
                e_id, p_id, e_ood, p_ood, use_id=self.use_id, use_ood=self.use_ood
            )
            regs.append(i_ood - i_id)
            i_oods.append(float(i_ood.detach()))
            i_ids.append(float(i_id.detach()))
        reg = torch.stack(regs).mean()
        self.last_values = {
            "I_ood": sum(i_oods) / len(i_oods),
            "I_id": sum(i_ids) / len(i_ids),
            "q_nll": fit["nll"],
        }
        strategy.add_loss_term("mi", self.lam * reg)

    def state_dict(self) -> dict:
        if self.estimator is None:
            return {"estimator": None}
        return {"estimator": self.estimator.state_dict(), "dim": self.estimator.q.e_dim}

    def load_state_dict(self, state: dict) -> None:
        if state["estimator"] is None:
            self.estimator = None
            return
        self.estimator = self._build(state["dim"], "cpu")
        self.estimator.load_state_dict(state["estimator"])
