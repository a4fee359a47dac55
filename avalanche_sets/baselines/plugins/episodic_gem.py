"""``EpisodicGEMPlugin``: Avalanche's :class:`GEMPlugin` on meta-batches of episodes."""

from __future__ import annotations

import numpy as np
import torch
from avalanche.training.plugins import GEMPlugin
from avalanche.training.storage_policy import ExperienceBalancedBuffer

from ...defaults import MEM_SIZE, check_mem_size
from ...training.memory_fill import MemoryFilling
from ._memory import (
    grad_vector,
    learner_batch,
    load_storage_state_dict,
    sample_episodes,
    seeded_torch,
    set_grad_vector,
    storage_state_dict,
)

__all__ = ["EpisodicGEMPlugin"]


class EpisodicGEMPlugin(GEMPlugin):
    """Gradient Episodic Memory (Lopez-Paz & Ranzato, NeurIPS 2017) on semi-supervised episodes.

    One constraint per past domain: with ``g_k`` the gradient of the MSKM meta-loss on memory
    episodes of domain ``k``, the applied gradient ``g̃`` must satisfy ``g̃ᵀg_k ≥ 0`` for every
    ``k``; when the current gradient violates one, it is projected with Avalanche's
    :meth:`GEMPlugin.solve_quadprog` (GEM's dual QP solved by ``quadprog``, margin
    ``memory_strength``), unchanged.

    Adapted where Avalanche's plugin does not fit episodes (the QP is reused as is):

    * **Memory**: whole episodes, ``mem_size`` tasks in total divided equally among the domains
      seen (Avalanche's :class:`ExperienceBalancedBuffer`, updated at each experience end with
      a generator seeded by the plugin state),
      instead of per-experience *tensors* of patterns (``torch.cat`` of mini-batches, which an
      ``EpisodeBatch`` is not) of a fixed, growing ``patterns_per_experience``.
    * **No clock**: Avalanche's GEM counts past experiences with ``strategy.clock``, which a
      checkpoint does not restore (a resumed run would forget its constraints and overwrite
      domain 0's memory); here the constraints are the memory's groups.
    * **Constraint gradients** on ``constraint_batch`` episodes sampled per past domain at every
      iteration (plugin generator; ``None`` = the domain's whole memory, as GEM). The paper's
      memory of 200 tasks would otherwise cost up to 200 extra episode forward/backward
      passes per iteration; sampling keeps the cost at ``constraint_batch`` per past domain
      (a stochastic estimate of GEM's constraints — a documented deviation).
    * Memory episodes reach the model without their oracle, collated into one ``EpisodeBatch``.

    Args:
        mem_size: memory capacity in tasks (paper: 200).
        memory_strength: GEM's margin γ (Avalanche's ``memory_strength``).
        constraint_batch: memory episodes per past domain per iteration (``None``: all).
        seed: seed of the memory sampling.
    """

    def __init__(
        self,
        *,
        mem_size: int = MEM_SIZE,
        memory_strength: float = 0.5,
        constraint_batch: int | None = 2,
        seed: int = 0,
    ) -> None:
        check_mem_size(mem_size)
        if constraint_batch is not None and (
            not isinstance(constraint_batch, int) or constraint_batch < 1
        ):
            raise ValueError(
                f"constraint_batch must be a positive integer or None, got {constraint_batch!r}"
            )
        if not memory_strength >= 0:
            raise ValueError(f"memory_strength must be >= 0, got {memory_strength!r}")
        super().__init__(patterns_per_experience=mem_size, memory_strength=memory_strength)
        self.mem_size = mem_size
        self.constraint_batch = constraint_batch
        self.storage = ExperienceBalancedBuffer(max_size=mem_size, adaptive_size=True)
        self.seed = int(seed)
        self._rng = np.random.default_rng(seed)

    @property
    def groups(self) -> list:
        """The memory of each past domain (AvalancheDatasets of episodes)."""
        return [g.buffer for g in self.storage.buffer_groups.values()]

    def before_training_iteration(self, strategy, **kwargs):
        """Gradients ``g_k`` of the meta-loss on each past domain's memory → ``self.G``."""
        groups = self.groups
        if not groups:
            self.G = torch.empty(0)
            return
        params = list(strategy.model.parameters())
        strategy.model.train()
        rows = []
        for data in groups:
            k = len(data) if self.constraint_batch is None else self.constraint_batch
            x, y = learner_batch(sample_episodes(data, k, self._rng), strategy.device)
            strategy.optimizer.zero_grad()
            strategy._criterion(strategy.model(x), y).backward()
            rows.append(grad_vector(params))
        strategy.optimizer.zero_grad()
        self.G = torch.stack(rows)  # (past domains, parameters)

    @torch.no_grad()
    def after_backward(self, strategy, **kwargs):
        """Project the gradient with GEM's QP when it violates a memory constraint."""
        if self.G.numel() == 0:
            return
        params = list(strategy.model.parameters())
        g = grad_vector(params)
        if (torch.mv(self.G, g) < 0).any():
            set_grad_vector(params, self.solve_quadprog(g).to(g.device))

    def after_training_exp(self, strategy, **kwargs):
        with seeded_torch(self.seed, len(self.storage.buffer_groups)):
            self.storage.post_adapt(strategy, strategy.experience)

    def memory_filling(self) -> MemoryFilling:
        """How the memory fills: each domain's training tasks stored at its end, ``mem_size``
        balanced over the domains seen (:mod:`~avalanche_sets.training.memory_fill`)."""
        return MemoryFilling(self.mem_size, "domain", "balanced", type(self).__name__)

    # ------------------------------------------------------------------ checkpoint
    def state_dict(self) -> dict:
        return {"storage": storage_state_dict(self.storage), "rng": self._rng.bit_generator.state}

    def load_state_dict(self, state: dict) -> None:
        load_storage_state_dict(self.storage, state["storage"])
        self._rng.bit_generator.state = state["rng"]
