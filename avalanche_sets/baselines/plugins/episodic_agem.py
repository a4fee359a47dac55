"""``EpisodicAGEMPlugin``: Avalanche's :class:`AGEMPlugin` on meta-batches of episodes."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch
from avalanche.training.plugins import AGEMPlugin
from avalanche.training.storage_policy import ExperienceBalancedBuffer

from ...defaults import MEM_SIZE, check_mem_size
from ...training.memory_fill import MemoryFilling
from ._memory import (
    learner_batch,
    load_storage_state_dict,
    sample_episodes,
    seeded_torch,
    storage_state_dict,
)

__all__ = ["EpisodicAGEMPlugin"]


def _contiguous_grad(param: torch.Tensor) -> None:
    """Post-accumulate hook: store the gradient contiguously (Avalanche flattens with view)."""
    if param.grad is not None and not param.grad.is_contiguous():
        param.grad = param.grad.contiguous()


class EpisodicAGEMPlugin(AGEMPlugin):
    """Averaged GEM (Chaudhry, Ranzato, Rohrbach, Elhoseiny, ICLR 2019, "Efficient Lifelong
    Learning with A-GEM") on semi-supervised episodes.

    Avalanche's A-GEM math is used unchanged: ``before_training_iteration`` computes the
    reference gradient ``g_ref`` of the MSKM meta-loss on a memory sample, and
    ``after_backward`` replaces the current gradient ``g`` by ``g − (gᵀg_ref / g_refᵀg_ref) g_ref``
    whenever ``gᵀg_ref < 0``, so the applied gradient never increases the memory loss to first
    order (``g̃ᵀg_ref ≥ 0``).

    Adapted (a thin subclass) where Avalanche's plugin assumes tuple mini-batches of patterns:

    * **Memory** (:meth:`update_memory`, at each experience end, as Avalanche's): whole episodes,
      ``mem_size`` tasks in total, divided equally among the domains seen so far by Avalanche's
      :class:`ExperienceBalancedBuffer` (random tasks within a domain, drawn from a generator
      seeded by the plugin state so that a resumed run stores the same tasks), instead of a
      fixed ``patterns_per_experience`` that grows without bound. ``self.buffers`` are its
      groups.
    * **Sampling** (:meth:`sample_from_memory`): ``sample_size`` episodes spread equally over
      the domains (at least one per domain), uniformly without replacement, drawn with the
      plugin's own generator and collated with the episode collate into an ``EpisodeBatch``
      *without* the oracle, plus the flattened query labels; Avalanche's
      ``avalanche_forward`` then calls the strategy's model on that batch. This replaces
      Avalanche's infinite ``GroupBalancedInfiniteDataLoader``, whose generator made the
      plugin unpicklable, could not be checkpointed (a resumed run would sample differently)
      and fails when ``sample_size < number of domains`` (a per-domain batch of 0).

    Unlabeled and OOD images are part of every stored episode and go through MSKM as in
    training. Needs domain boundaries (memory is filled at experience ends).

    Args:
        mem_size: memory capacity in tasks (paper: 200).
        sample_size: episodes in the reference batch.
        seed: seed of the memory sampling.
    """

    def __init__(self, *, mem_size: int = MEM_SIZE, sample_size: int = 2, seed: int = 0) -> None:
        check_mem_size(mem_size)
        if not isinstance(sample_size, int) or sample_size < 1:
            raise ValueError(f"sample_size must be a positive integer, got {sample_size!r}")
        super().__init__(patterns_per_experience=mem_size, sample_size=sample_size)
        self.mem_size = mem_size
        self.storage = ExperienceBalancedBuffer(max_size=mem_size, adaptive_size=True)
        self.seed = int(seed)
        self._rng = np.random.default_rng(seed)

    # Avalanche's A-GEM flattens gradients with ``p.grad.view(-1)``, which fails for the
    # channels-last weights of a channels-last backbone (their gradients are channels-last
    # too). Both callbacks that read gradients therefore see contiguous copies; the math is
    # Avalanche's, unchanged.
    def before_training_iteration(self, strategy, **kwargs) -> None:
        params = [p for p in strategy.model.parameters() if p.requires_grad]
        handles = [p.register_post_accumulate_grad_hook(_contiguous_grad) for p in params]
        try:
            super().before_training_iteration(strategy, **kwargs)
        finally:
            for h in handles:
                h.remove()

    def after_backward(self, strategy, **kwargs) -> None:
        for p in strategy.model.parameters():
            _contiguous_grad(p)
        super().after_backward(strategy, **kwargs)

    @torch.no_grad()
    def update_memory(self, dataset, num_workers: int = 0, **kwargs) -> None:
        with seeded_torch(self.seed, len(self.storage.buffer_groups)):
            self.storage.post_adapt(None, SimpleNamespace(dataset=dataset))
        self.buffers = [g.buffer for g in self.storage.buffer_groups.values()]

    def sample_from_memory(self):
        per_group = max(1, self.sample_size // len(self.buffers))
        episodes = [e for buf in self.buffers for e in sample_episodes(buf, per_group, self._rng)]
        x, y = learner_batch(episodes)
        return x, y, torch.zeros_like(y)

    def memory_filling(self) -> MemoryFilling:
        """How the memory fills: each domain's training tasks stored at its end, ``mem_size``
        balanced over the domains seen (:mod:`~avalanche_sets.training.memory_fill`)."""
        return MemoryFilling(self.mem_size, "domain", "balanced", type(self).__name__)

    # ------------------------------------------------------------------ checkpoint
    def state_dict(self) -> dict:
        return {"storage": storage_state_dict(self.storage), "rng": self._rng.bit_generator.state}

    def load_state_dict(self, state: dict) -> None:
        load_storage_state_dict(self.storage, state["storage"])
        self.buffers = [g.buffer for g in self.storage.buffer_groups.values()]
        self._rng.bit_generator.state = state["rng"]
