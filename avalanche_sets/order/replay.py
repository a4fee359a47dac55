"""``FeatureReservoirReplayPlugin``: task-level reservoir memory with stored features (ORDER §4.3)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

import numpy as np
import torch
from avalanche.core import SupervisedPlugin
from avalanche.training.utils import trigger_plugins
from torch import Tensor

from ..data.episodes import EpisodeBatch
from ..defaults import MEM_SIZE, REPLAY_BATCH, check_mem_size
from ..functional.reservoir import Reservoir

__all__ = ["FeatureReservoirReplayPlugin", "MemoryTask", "StoredTask", "MEMORY_STORE_EVENT"]

MEMORY_STORE_EVENT = "on_memory_store"
"""The plugin event :class:`FeatureReservoirReplayPlugin` fires after storing a meta-batch's
current tasks: ``plugin.on_memory_store(strategy, stored=[StoredTask, ...])``."""


@dataclass
class MemoryTask:
    """One stored task: its raw uint8 episode, the features of ``S ∪ U_id`` at storage time,
    and what other plugins attach to it.

    Attributes:
        support_x, support_y, query_x, query_y, unlabeled_x: the episode (no ground truth).
        unlabeled_id: bool ``[U]``, the ``U_id`` mask decided when the task was stored.
        features: float32 ``[|S| + |U_id|, d]``, ``h_θ`` of the support images followed by the
            ``U_id`` images, computed when the task was stored (the OT targets ``g_i``).
        payload: tensors other plugins keep with the task, by name (e.g. its query logits at
            storage time), attached when it is stored (see :class:`StoredTask`) and read when
            it is replayed (``strategy.iteration.replayed.tasks``). Saved in checkpoints with the task and
            moved with it by :meth:`to`. Put them on the task's device
            (``task.features.device``) and keep names unique to the plugin.
    """

    support_x: Tensor
    support_y: Tensor
    query_x: Tensor
    query_y: Tensor
    unlabeled_x: Tensor
    unlabeled_id: Tensor
    features: Tensor
    payload: dict[str, Tensor] = field(default_factory=dict)

    def _tensors(self) -> dict[str, Tensor]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "payload"}

    @property
    def nbytes(self) -> int:
        """Bytes of every tensor of the task, its payload included."""
        tensors = [*self._tensors().values(), *self.payload.values()]
        return sum(t.nbytes for t in tensors)

    def to_dict(self) -> dict[str, Any]:
        """The task as a plain dict of tensors (``payload`` a nested dict); the inverse is
        ``MemoryTask(**d)``. What a checkpoint stores."""
        return {**self._tensors(), "payload": dict(self.payload)}

    def to(self, device: torch.device) -> MemoryTask:
        """This task with every tensor, payload included, on ``device`` (itself when they are
        there already)."""
        if self.features.device == device and all(
            t.device == device for t in self.payload.values()
        ):
            return self
        return MemoryTask(
            **{name: t.to(device) for name, t in self._tensors().items()},
            payload={name: t.to(device) for name, t in self.payload.items()},
        )


class StoredTask(NamedTuple):
    """A current task of the meta-batch that the memory kept in this iteration.

    ``row`` is its row in ``strategy.mb_x`` (and in the query logits ``strategy.mb_output``
    reshaped to ``[len(mb_x), N*Q, N]``), ``slot`` the memory slot it now occupies
    (``replay_plugin.tasks[slot] is task``), ``task`` the stored :class:`MemoryTask`, whose
    :attr:`~MemoryTask.payload` a plugin may fill.
    """

    row: int
    slot: int
    task: MemoryTask


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
      the ``Σ_{T_i ∈ B} L_total(T_i)`` term of Eq. 10. They are handed over with
      ``strategy.iteration.replay(...)``; the template appends them after the current tasks,
      and ``strategy.iteration.replayed`` (a :class:`~avalanche_sets.training.iteration.Replayed`)
      tells the OT plugin which rows they are.
    * **U_id**: the unlabeled images of ``strategy.iteration.ood_split`` that it calls ID; all
      of them when there is no split.

    The memory never holds ground truth: the episode's oracle is dropped before storage.

    **Other plugins' data on the stored tasks.** Each :class:`MemoryTask` has a ``payload``
    dict of tensors that travels with it (checkpoints included). A plugin attaches its own by
    defining the method ``on_memory_store(self, strategy, *, stored, **kwargs)``: after storing
    the current tasks of an iteration, this plugin calls it on every plugin of the strategy
    that has it, whatever their order, with ``stored``, a list of :class:`StoredTask`
    ``(row, slot, task)``, one per current task kept in the memory (its row of the meta-batch,
    the memory slot it went to, the task); it runs under ``torch.no_grad()``, after the
    optimiser step, so ``strategy.mb_output`` still holds the logits of the forward pass that
    trained on the tasks. The payload is thus in place before any plugin after this one runs
    its ``after_training_iteration`` (a checkpoint saved then holds it). The name has no
    ``after_`` prefix because Avalanche warns about plugin methods named like callbacks its
    template does not fire. When the task is replayed, ``strategy.iteration.replayed`` gives
    its row, slot and payload; ``strategy.iteration.current_rows`` are the current tasks.

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

    # ------------------------------------------------------------------ memory
    def __len__(self) -> int:
        return len(self.reservoir)

    @property
    def tasks(self) -> list[MemoryTask]:
        """The stored tasks, by slot (a shallow copy of the list: the tasks themselves)."""
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
        if len(self.reservoir) == 0:
            return
        n = min(self.replay_batch, len(self.reservoir))
        pick = self._rng.choice(len(self.reservoir), size=n, replace=False)
        device = strategy.mb_x.support_x.device
        if self.reservoir[0].features.device != device:  # restored from a checkpoint
            self.reservoir.map_items(lambda task: task.to(device))
        slots = [int(i) for i in pick]
        tasks = [self.reservoir[i] for i in slots]
        strategy.iteration.replay(self._batch_of(tasks), tasks=tasks, slots=slots)

    @torch.no_grad()
    def after_training_iteration(self, strategy, **kwargs) -> None:
        it = strategy.iteration
        state, batch = it.state, strategy.mb_x
        if state is None:
            raise RuntimeError(
                "FeatureReservoirReplayPlugin needs a model with encode()/classify() "
                "(e.g. PrototypicalModel) to store features"
            )
        kept: dict[int, StoredTask] = {}  # by slot: a later task of the batch may replace one
        for b in it.current_rows:
            if not self.store_unlabeled_features:
                u_id = torch.zeros(state.unlabeled_emb.shape[1], dtype=torch.bool)
            elif it.ood_split is not None:
                u_id = it.ood_split.is_id[b]
            else:
                u_id = torch.ones(state.unlabeled_emb.shape[1], dtype=torch.bool)
            u_id = u_id.to(state.unlabeled_emb.device)
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
            slot = self.reservoir.offer(task)
            if slot is not None:
                kept[slot] = StoredTask(row=b, slot=slot, task=task)
        stored = sorted(kept.values(), key=lambda s: s.row)
        trigger_plugins(strategy, MEMORY_STORE_EVENT, stored=stored)

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
