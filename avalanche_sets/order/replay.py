"""``FeatureReservoirReplayPlugin``: task-level reservoir memory with stored features (ORDER §4.3)."""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import torch
from avalanche.core import SupervisedPlugin
from torch import Tensor

from ..data.episodes import EpisodeBatch
from ..defaults import MEM_SIZE, REPLAY_BATCH, check_mem_size
from ..functional.reservoir import Reservoir

__all__ = ["FeatureReservoirReplayPlugin", "MemoryTask", "ReplayInfo"]


@dataclass
class MemoryTask:
    """One stored task: its raw uint8 episode and the features of ``S ∪ U_id`` at storage time.

    Attributes:
        support_x, support_y, query_x, query_y, unlabeled_x: the episode (no ground truth).
        unlabeled_id: bool ``[U]``, the ``U_id`` mask decided when the task was stored.
        features: float32 ``[|S| + |U_id|, d]``, ``h_θ`` of the support images followed by the
            ``U_id`` images, computed when the task was stored (the OT targets ``g_i``).
    """

    support_x: Tensor
    support_y: Tensor
    query_x: Tensor
    query_y: Tensor
    unlabeled_x: Tensor
    unlabeled_id: Tensor
    features: Tensor

    @property
    def nbytes(self) -> int:
        return sum(getattr(self, f.name).nbytes for f in fields(self))

    def to_dict(self) -> dict[str, Tensor]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def to(self, device: torch.device) -> MemoryTask:
        """This task with every tensor on ``device`` (itself when they are there already)."""
        if self.features.device == device:
            return self
        return MemoryTask(**{name: t.to(device) for name, t in self.to_dict().items()})


@dataclass
class ReplayInfo:
    """Which rows of the current meta-batch are replayed memory tasks (for the OT plugin)."""

    rows: range
    tasks: list[MemoryTask]


class FeatureReservoirReplayPlugin(SupervisedPlugin):
    """Reservoir memory of whole tasks, replayed with the full loss (paper Eq. 10, Alg. 2).

    * **Storage** (``after_training_iteration``): every training task of the meta-batch is
      offered to a reservoir of ``mem_size`` tasks (Vitter's Algorithm R at the level of tasks,
      appendix B: the ``n``-th task seen is kept with probability ``M / n``). A kept task is
      stored compactly — its uint8 images — together with the embeddings ``h_θ(x)`` of its
      support set and of its detected-ID unlabeled images ``U_id`` at storage time (the
      forward pass that trained on it; no extra forward). Without an OOD split plugin every
      unlabeled image counts as ``U_id``; with ``store_unlabeled_features=False`` only support
      features are kept (the paper's "OT without U_id" ablation).
    * **Where**: stored tasks live on the device of the batch that stored them, the model's
      (a GPU run keeps its memory on the GPU: storing and replaying copy nothing across);
      tasks restored from a checkpoint, which is read onto the CPU, move next to the model at
      their first replay.
    * **Replay** (``before_training_iteration``): ``replay_batch`` tasks drawn uniformly from
      the memory are appended to the meta-batch, so they go through the same single forward
      pass and receive the full loss ``L_total`` (meta loss, and MI when that plugin is on):
      the ``Σ_{T_i ∈ B} L_total(T_i)`` term of Eq. 10. :class:`ReplayInfo` in
      ``strategy.replay_info`` tells the OT plugin where they are.

    The memory never holds ground truth: the episode's oracle is dropped before storage.

    Args:
        mem_size: capacity ``M`` in tasks (paper: 200).
        replay_batch: memory tasks replayed per iteration ``|B|``.
        store_unlabeled_features: keep ``U_id`` features besides the support's.
        seed: seed of the reservoir decisions and of replay sampling.
    """

    def __init__(
        self,
        *,
        mem_size: int = MEM_SIZE,
        replay_batch: int = REPLAY_BATCH,
        store_unlabeled_features: bool = True,
        seed: int = 0,
    ) -> None:
        super().__init__()
        check_mem_size(mem_size, when=" when replay is on")
        if not isinstance(replay_batch, int) or replay_batch < 1:
            raise ValueError(f"replay_batch must be a positive integer, got {replay_batch!r}")
        self.mem_size = mem_size
        self.replay_batch = replay_batch
        self.store_unlabeled_features = bool(store_unlabeled_features)
        self.reservoir = Reservoir(mem_size, seed=seed)
        self._rng = np.random.default_rng([seed, 1])
        self._n_current = 0

    # ------------------------------------------------------------------ memory
    def __len__(self) -> int:
        return len(self.reservoir)

    @property
    def tasks(self) -> list[MemoryTask]:
        return list(self.reservoir.items)

    def memory_bytes(self) -> int:
        return sum(t.nbytes for t in self.reservoir.items)

    def _batch_of(self, tasks: list[MemoryTask]) -> EpisodeBatch:
        return EpisodeBatch(
            support_x=torch.stack([t.support_x for t in tasks]),
            support_y=torch.stack([t.support_y for t in tasks]),
            query_x=torch.stack([t.query_x for t in tasks]),
            query_y=torch.stack([t.query_y for t in tasks]),
            unlabeled_x=torch.stack([t.unlabeled_x for t in tasks]),
        )

    # ------------------------------------------------------------------ callbacks
    def before_training_iteration(self, strategy, **kwargs) -> None:
        current: EpisodeBatch = strategy.mb_x
        self._n_current = len(current)
        strategy.replay_info = None
        if len(self.reservoir) == 0:
            return
        n = min(self.replay_batch, len(self.reservoir))
        pick = self._rng.choice(len(self.reservoir), size=n, replace=False)
        device = current.support_x.device
        if self.reservoir[0].features.device != device:  # restored from a checkpoint
            self.reservoir.map_items(lambda task: task.to(device))
        tasks = [self.reservoir[int(i)] for i in pick]
        memory = self._batch_of(tasks)
        learner = current.without_oracle()
        merged = EpisodeBatch(
            support_x=torch.cat([learner.support_x, memory.support_x]),
            support_y=torch.cat([learner.support_y, memory.support_y]),
            query_x=torch.cat([learner.query_x, memory.query_x]),
            query_y=torch.cat([learner.query_y, memory.query_y]),
            unlabeled_x=torch.cat([learner.unlabeled_x, memory.unlabeled_x]),
        )
        strategy.replace_batch(merged, merged.query_y.reshape(-1))
        strategy.replay_info = ReplayInfo(
            rows=range(self._n_current, self._n_current + n), tasks=tasks
        )

    @torch.no_grad()
    def after_training_iteration(self, strategy, **kwargs) -> None:
        state = strategy.episode_state
        batch: EpisodeBatch = strategy.mb_x
        if state is None:
            raise RuntimeError(
                "FeatureReservoirReplayPlugin needs a model with encode()/classify() "
                "(e.g. PrototypicalModel) to store features"
            )
        for b in range(self._n_current):
            if self.store_unlabeled_features:
                u_id = state.unlabeled_weight[b] > 0.5
            else:
                u_id = torch.zeros_like(state.unlabeled_weight[b], dtype=torch.bool)
            features = torch.cat([state.support_emb[b], state.unlabeled_emb[b][u_id]])
            task = MemoryTask(
                support_x=batch.support_x[b].clone(),
                support_y=batch.support_y[b].clone(),
                query_x=batch.query_x[b].clone(),
                query_y=batch.query_y[b].clone(),
                unlabeled_x=batch.unlabeled_x[b].clone(),
                unlabeled_id=u_id.clone(),
                features=features.detach().float().clone(),
            )
            self.reservoir.offer(task)
        strategy.replay_info = None

    # ------------------------------------------------------------------ checkpoint
    def state_dict(self) -> dict:
        res = self.reservoir.state_dict()
        res["items"] = [t.to_dict() for t in res["items"]]
        return {"reservoir": res, "rng": self._rng.bit_generator.state}

    def load_state_dict(self, state: dict) -> None:
        res = dict(state["reservoir"])
        res["items"] = [MemoryTask(**t) for t in res["items"]]
        self.reservoir.load_state_dict(res)
        self._rng.bit_generator.state = state["rng"]
