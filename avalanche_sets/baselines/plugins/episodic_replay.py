"""``EpisodicReplayPlugin``: Avalanche's :class:`ReplayPlugin` over a memory of whole episodes."""

from __future__ import annotations

import math

import numpy as np
from avalanche.benchmarks.utils.data_loader import ReplayDataLoader
from avalanche.training.plugins import ReplayPlugin
from avalanche.training.storage_policy import (
    ExemplarsBuffer,
    ExperienceBalancedBuffer,
    ReservoirSamplingBuffer,
)

from ...data.episodes import collate_episodes
from ...defaults import MEM_SIZE, REPLAY_BATCH, check_mem_size
from ...training.iteration import MetaBatchReplay
from ...training.memory_fill import MemoryFilling
from ._memory import load_storage_state_dict, seeded_torch, storage_state_dict

__all__ = ["EpisodicReplayPlugin"]


class EpisodicReplayPlugin(ReplayPlugin):
    """Experience replay (Chaudhry et al. 2019, "On tiny episodic memories in continual
    learning") of whole semi-supervised episodes, with Avalanche's ReplayPlugin and storage
    policies.

    A SETS experience's dataset is an :class:`AvalancheDataset` of episodes, so Avalanche's
    storage policies store *tasks* (episodes) unchanged, and Avalanche's
    :class:`~avalanche.benchmarks.utils.data_loader.ReplayDataLoader` builds every meta-batch
    from ``train_mb_size`` current episodes plus ``replay_batch`` memory episodes, collated
    by the experience's episode collate function into **one** :class:`EpisodeBatch` (the loader
    takes ``collate_fn`` from the dataset; it is also passed explicitly here). The memory
    episodes therefore go through the same forward pass and MSKM loss as the current ones.

    What differs from :class:`ReplayPlugin` (only :meth:`before_training_exp` is overridden):

    * The current episodes keep the template's fixed order (no shuffling), and
      ``strategy.start_iteration`` is honoured, so a run resumes in the middle of a domain.
    * The memory is read in a random order drawn from ``(seed, number of memory updates)``
      and long enough for the whole experience, instead of a ``RandomSampler`` over the
      memory: the replayed episodes of iteration ``i`` are a pure function of the plugin
      state, hence identical after a resume. (With ``train_epochs > 1`` every epoch replays the
      same sequence.)

    Memory updates are Avalanche's: the storage policy is updated at the **end of each
    experience** (``after_training_exp``), so this baseline needs domain boundaries and does
    not replay during the first domain. The paper's ER uses reservoir sampling online, task by
    task. The default policy, :class:`ReservoirSamplingBuffer` (``mem_size`` tasks), keeps a
    uniform sample of every task seen so far at each boundary — the same distribution as
    online reservoir sampling (Algorithm R) at that moment; episodes of the current domain
    are simply not replayed before the domain ends. Pass ``storage_policy=
    ExperienceBalancedBuffer(mem_size)`` for Avalanche's default (equal share per domain).

    Not combinable with ORDER's memory (:attr:`CONFLICTS`, checked when the strategy is
    built): see there why.

    Args:
        mem_size: memory capacity in tasks (paper: 200).
        replay_batch: memory episodes per meta-batch (Avalanche's ``batch_size_mem``; ``None``:
            ``train_mb_size``).
        storage_policy: an Avalanche storage policy over episodes (default: reservoir).
        seed: seed of the replay order.
    """

    #: Plugins it cannot share a strategy with, and why (checked when the strategy is built).
    CONFLICTS = {
        MetaBatchReplay: (
            "this plugin's loader puts its memory episodes into the meta-batch, where ORDER's "
            "replay would take them for current tasks and store them in its own memory again "
            "(and OrderStrategy replays its own memory already); fix: drop EpisodicReplayPlugin "
            "and use ORDER's memory (mem_size, replay_batch), or use method semi-er without ORDER"
        )
    }

    def __init__(
        self,
        *,
        mem_size: int = MEM_SIZE,
        replay_batch: int | None = REPLAY_BATCH,
        storage_policy: ExemplarsBuffer | None = None,
        seed: int = 0,
    ) -> None:
        check_mem_size(mem_size)
        if replay_batch is not None and (not isinstance(replay_batch, int) or replay_batch < 1):
            raise ValueError(f"replay_batch must be a positive integer, got {replay_batch!r}")
        super().__init__(
            mem_size=mem_size,
            batch_size_mem=replay_batch,
            storage_policy=storage_policy or ReservoirSamplingBuffer(mem_size),
        )
        self.seed = int(seed)
        self.n_updates = 0

    def replay_order(self, n_items: int) -> np.ndarray:
        """Memory positions to replay, ``n_items`` long: fresh permutations of the memory, in
        sequence, drawn from ``(seed, n_updates)``."""
        size = len(self.storage_policy.buffer)
        rng = np.random.default_rng([self.seed, self.n_updates])
        perms = [rng.permutation(size) for _ in range(max(1, math.ceil(n_items / size)))]
        return np.concatenate(perms)[:n_items]

    def before_training_exp(
        self, strategy, num_workers: int = 0, drop_last: bool = False, **kwargs
    ):
        memory = self.storage_policy.buffer
        if len(memory) == 0:
            return  # nothing stored yet: the template's loader stays
        mb = self.batch_size or strategy.train_mb_size
        mb_mem = self.batch_size_mem or strategy.train_mb_size
        data = strategy.adapted_dataset
        n_iter = math.ceil(len(data) / mb)
        first = strategy.start_iteration
        order = self.replay_order(n_iter * mb_mem)[first * mb_mem :]
        if first:
            data = data.subset(range(first * mb, len(data)))
        strategy.dataloader = ReplayDataLoader(
            data,
            memory.subset(order.tolist()),
            oversample_small_tasks=True,
            batch_size=mb,
            batch_size_mem=mb_mem,
            num_workers=num_workers,
            shuffle=False,
            drop_last=drop_last,
            collate_fn=collate_episodes,
        )

    def after_training_exp(self, strategy, **kwargs):
        # ReplayPlugin calls the deprecated ``storage_policy.update``, i.e. this; seeded by the
        # plugin state (the policy draws from torch's global generator) so resumes are exact.
        with seeded_torch(self.seed, self.n_updates, 1):
            self.storage_policy.post_adapt(strategy, strategy.experience)
        self.n_updates += 1

    def memory_filling(self) -> MemoryFilling | None:
        """How the memory fills: each domain's training tasks stored at its end, in a reservoir
        (``ReservoirSamplingBuffer``) or balanced per domain (an adaptive
        ``ExperienceBalancedBuffer``); ``None`` for another storage policy, whose filling it
        does not know (:mod:`~avalanche_sets.training.memory_fill`)."""
        policy = self.storage_policy
        if type(policy) is ReservoirSamplingBuffer:
            layout = "reservoir"
        elif type(policy) is ExperienceBalancedBuffer and policy.adaptive_size:
            layout = "balanced"
        else:
            return None
        return MemoryFilling(policy.max_size, "domain", layout, type(self).__name__)

    # ------------------------------------------------------------------ checkpoint
    def state_dict(self) -> dict:
        return {"storage": storage_state_dict(self.storage_policy), "n_updates": self.n_updates}

    def load_state_dict(self, state: dict) -> None:
        load_storage_state_dict(self.storage_policy, state["storage"])
        self.n_updates = int(state["n_updates"])
