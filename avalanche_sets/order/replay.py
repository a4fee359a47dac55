"""``FeatureReservoirReplayPlugin``: task-level reservoir memory with stored features (ORDER §4.3)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any, NamedTuple

import numpy as np
import torch
from avalanche.core import SupervisedPlugin
from avalanche.training.utils import trigger_plugins
from torch import Tensor

from ..data.device_episodes import to_device
from ..data.episodes import EpisodeBatch
from ..defaults import MEM_SIZE, REPLAY_BATCH, check_mem_size
from ..functional.reservoir import Reservoir
from ..training.iteration import MetaBatchReplay
from ..training.memory_fill import MemoryFilling

__all__ = [
    "FeatureReservoirReplayPlugin",
    "MemoryTask",
    "EpisodeSource",
    "StoredTask",
    "MEMORY_STORE_EVENT",
]

MEMORY_STORE_EVENT = "on_memory_store"
"""The plugin event :class:`FeatureReservoirReplayPlugin` fires after storing a meta-batch's
current tasks: ``plugin.on_memory_store(strategy, stored=[StoredTask, ...])``."""


def _episodes_key(sampler: Any) -> str:
    """What decides ``sampler``'s episodes (``episodes_key()``, or its ``repr`` for a sampler
    without one)."""
    key = getattr(sampler, "episodes_key", None)
    return key() if callable(key) else repr(sampler)


@dataclass(frozen=True)
class EpisodeSource:
    """Where a stored task's images come from: episode ``index`` of the training sampler of
    experience ``experience`` (an episode is a pure function of the sampler's seed and its
    index, so the index stands for the images).

    ``sampler`` is what decides the sampler's episodes (:func:`_episodes_key`: its domain,
    split, episode shape, OOD sources and seed, not its device): a run resumed on another
    stream is refused instead of replaying other images; one resumed on another device, whose
    sampler draws the same pixels there, is not.
    """

    experience: int
    index: int
    sampler: str

    def to_dict(self) -> dict[str, Any]:
        return {"experience": self.experience, "index": self.index, "sampler": self.sampler}


@dataclass(kw_only=True)
class MemoryTask:
    """One stored task: its episode (as images, or as the sampler index that regenerates
    them), the features of ``S ∪ U_id`` at storage time, and what other plugins attach to it.

    Attributes:
        support_y, query_y: the episode's labels.
        support_x, query_x, unlabeled_x: its uint8 images when the memory keeps them (episodes
            no sampler can regenerate, e.g. batches a caller built); ``None`` when ``source``
            stands for them. Read the images with :meth:`images` either way.
        source: the :class:`EpisodeSource` that regenerates the images, or ``None``.
        unlabeled_id: bool ``[U]``, the ``U_id`` mask decided when the task was stored (all
            ``False`` when the memory keeps no unlabeled features).
        features: float32 ``[|S| + U, d]``, ``h_θ`` of the support images followed by one row
            per unlabeled image, computed when the task was stored (the OT targets ``g_i``):
            a fixed shape, so tasks stack and nothing depends on ``|U_id|``. Only the rows
            :meth:`feature_mask` marks hold features (the support's and ``U_id``'s); the
            others hold zeros. A task saved with only its ``|S| + |U_id|`` valid rows is
            padded into this layout when it is built.
        payload: tensors other plugins keep with the task, by name (e.g. its query logits at
            storage time), attached when it is stored (see :class:`StoredTask`) and read when
            it is replayed (``strategy.iteration.replayed.tasks``). Saved in checkpoints with the task and
            moved with it by :meth:`to`. Put them on the task's device
            (``task.features.device``) and keep names unique to the plugin.
    """

    support_y: Tensor
    query_y: Tensor
    unlabeled_id: Tensor
    features: Tensor
    support_x: Tensor | None = None
    query_x: Tensor | None = None
    unlabeled_x: Tensor | None = None
    source: EpisodeSource | None = None
    payload: dict[str, Tensor] = field(default_factory=dict)
    #: The sampler behind ``source`` once the memory knows it (not saved).
    sampler: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.source, dict):  # as a checkpoint stores it
            self.source = EpisodeSource(**self.source)
        images = [self.support_x, self.query_x, self.unlabeled_x]
        if self.source is None and any(t is None for t in images):
            raise ValueError(
                "a MemoryTask needs its images (support_x, query_x, unlabeled_x) or a source"
            )
        n_support, n_unlabeled = self.support_y.shape[-1], self.unlabeled_id.shape[-1]
        if self.features.dim() != 2 or self.features.shape[0] != n_support + n_unlabeled:
            self.features = self._padded(self.features, n_support)

    def _padded(self, valid: Tensor, n_support: int) -> Tensor:
        """Features holding only the ``|S| + |U_id|`` valid rows, in order, laid out as
        :attr:`features` (a zero row for every image outside ``U_id``); reads the mask on
        the host, which only a task built from such rows (an older checkpoint) needs."""
        is_id = self.unlabeled_id.to(valid.device)
        n_id = int(is_id.sum())
        if valid.dim() != 2 or valid.shape[0] != n_support + n_id:
            raise ValueError(
                f"features must have shape [|S| + U, d] = [{n_support + is_id.numel()}, d] (or "
                f"[|S| + |U_id|, d] = [{n_support + n_id}, d], the valid rows only), got "
                f"{tuple(valid.shape)}"
            )
        out = valid.new_zeros((n_support + is_id.numel(), valid.shape[1]))
        out[:n_support] = valid[:n_support]
        out[n_support:][is_id] = valid[n_support:]
        return out

    def _tensors(self) -> dict[str, Tensor]:
        skip = ("payload", "source", "sampler")
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in skip}
        return {name: t for name, t in out.items() if t is not None}

    @property
    def nbytes(self) -> int:
        """Bytes of every tensor the task holds, its payload included (regenerated images are
        not held)."""
        tensors = [*self._tensors().values(), *self.payload.values()]
        return sum(t.nbytes for t in tensors)

    def feature_mask(self) -> Tensor:
        """bool ``[|S| + U]``: the rows of :attr:`features` that hold features (every support
        row, then ``unlabeled_id``), on the task's device; reads nothing on the host."""
        support = self.unlabeled_id.new_ones(self.support_y.shape[-1])
        return torch.cat([support, self.unlabeled_id])

    def images(self) -> tuple[Tensor, Tensor, Tensor]:
        """``(support_x, query_x, unlabeled_x)`` on the task's device (``features.device``):
        the stored images, or those its sampler regenerates (the very same pixels)."""
        if self.source is None:
            return self.support_x, self.query_x, self.unlabeled_x
        if self.sampler is None:
            raise RuntimeError(
                f"the images of memory task {self.source} come from the training sampler of "
                f"domain {self.source.experience + 1}, which the memory has not seen yet: a "
                "restored memory learns the stream's samplers when training starts"
            )
        episode = self.sampler.sample(self.source.index)
        device = self.features.device
        return tuple(
            to_device(t, device) for t in (episode.support_x, episode.query_x, episode.unlabeled_x)
        )

    def to_dict(self) -> dict[str, Any]:
        """The task as a plain dict of tensors (``payload`` a nested dict, ``source`` a dict of
        numbers and a string); the inverse is ``MemoryTask(**d)``. What a checkpoint stores:
        a task with a source holds no images there."""
        out = {**self._tensors(), "payload": dict(self.payload)}
        if self.source is not None:
            out["source"] = self.source.to_dict()
        return out

    def to(self, device: torch.device) -> MemoryTask:
        """This task with every tensor, payload included, on ``device`` (itself when they are
        there already)."""
        if self.features.device == device and all(
            t.device == device for t in self.payload.values()
        ):
            return self
        return replace(
            self,
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


class FeatureReservoirReplayPlugin(MetaBatchReplay, SupervisedPlugin):
    """Reservoir memory of whole tasks, replayed with the full loss (paper Eq. 10, Alg. 2).

    * **Storage** (``after_training_iteration``): every training task of the meta-batch is
      offered to a reservoir of ``mem_size`` tasks (Vitter's Algorithm R at the level of tasks,
      appendix B: the ``n``-th task seen is kept with probability ``M / n``). A kept task is
      stored compactly together with the embeddings ``h_θ(x)`` of its support set and of its
      detected-ID unlabeled images ``U_id`` at storage time (the forward pass that trained on
      it; no extra forward), in a fixed shape: one row per support and unlabeled image, zero
      outside ``S ∪ U_id`` (:attr:`MemoryTask.features`), chosen with masks on the device, so
      storing reads nothing on the host. Without an OOD split plugin every unlabeled image
      counts as ``U_id``; with ``store_unlabeled_features=False`` only support features are
      kept (the paper's "OT without U_id" ablation: no unlabeled row is valid).
    * **Images as indices**: an episode of the stream is a pure function of its sampler's seed
      and its index, so a task whose images the experience's sampler drew is stored as that
      index (an :class:`EpisodeSource`) and its images are drawn again when it is replayed —
      the same pixels, gathered on the model's device by a device-resident sampler. Memory
      and checkpoints then hold labels, masks and features, not pixels (≈ 0.76 GB of pixels
      at the paper's 200 tasks of 84 px). Tasks no sampler can regenerate (batches a caller
      built, or batches a transform changed: checked once per experience, with a warning)
      keep their uint8 images. A restored memory learns the samplers from the stream when
      training starts (``before_training_exp``) and refuses a stream whose sampler differs.
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

    **The memory's policy** (which tasks are kept) is :attr:`reservoir`'s
    :meth:`~avalanche_sets.functional.reservoir.Reservoir.choose_slot`: Algorithm R by default;
    ``memory=`` makes it of another class (a subclass of
    :class:`~avalanche_sets.functional.reservoir.Reservoir` with its own ``choose_slot``),
    built as ``memory(mem_size, seed=seed)``.

    Args:
        mem_size: capacity ``M`` in tasks (paper: 200).
        replay_batch: memory tasks replayed per iteration ``|B|``.
        store_unlabeled_features: keep ``U_id`` features besides the support's.
        seed: seed of the reservoir decisions and of replay sampling.
        memory: ``(capacity, seed=...) -> Reservoir``, the memory and its policy (default:
            :class:`~avalanche_sets.functional.reservoir.Reservoir`, Algorithm R).
    """

    def __init__(
        self,
        *,
        mem_size: int = MEM_SIZE,
        replay_batch: int = REPLAY_BATCH,
        store_unlabeled_features: bool = True,
        seed: int = 0,
        memory: Callable[..., Reservoir] | None = None,
    ) -> None:
        super().__init__()
        check_mem_size(mem_size, when=" when replay is on")
        if not isinstance(replay_batch, int) or replay_batch < 1:
            raise ValueError(f"replay_batch must be a positive integer, got {replay_batch!r}")
        self.mem_size = mem_size
        self.replay_batch = replay_batch
        self.store_unlabeled_features = bool(store_unlabeled_features)
        self.reservoir = (memory or Reservoir)(mem_size, seed=seed)
        """The stored tasks, by slot; its ``choose_slot`` is the memory's policy."""
        if not isinstance(self.reservoir, Reservoir) or self.reservoir.capacity != mem_size:
            raise TypeError(
                f"memory={getattr(memory, '__name__', memory)!r} made a "
                f"{type(self.reservoir).__name__}; fix: give a Reservoir subclass (its policy "
                f"in choose_slot), built as memory(capacity, seed=...) with capacity {mem_size}"
            )
        self._rng = np.random.default_rng([seed, 1])
        # The training samplers of the experiences seen so far, by experience index, and the
        # sources of this iteration's current tasks (None: their images are kept).
        self._samplers: dict[int, Any] = {}
        self._checked: set[int] = set()
        self._sources: list[EpisodeSource] | None = None

    # ------------------------------------------------------------------ memory
    def __len__(self) -> int:
        return len(self.reservoir)

    def memory_filling(self) -> MemoryFilling:
        """How the memory fills: each iteration's current tasks offered to a reservoir of
        ``mem_size`` (:mod:`~avalanche_sets.training.memory_fill`)."""
        return MemoryFilling(self.mem_size, "iteration", "reservoir", type(self).__name__)

    @property
    def tasks(self) -> list[MemoryTask]:
        """The stored tasks, by slot (a shallow copy of the list: the tasks themselves)."""
        return list(self.reservoir.items)

    def memory_bytes(self) -> int:
        return sum(t.nbytes for t in self.reservoir.items)

    def _batch_of(self, tasks: list[MemoryTask]) -> EpisodeBatch:
        support_x, query_x, unlabeled_x = zip(*(self._bound(t).images() for t in tasks))
        return EpisodeBatch(
            support_x=torch.stack(support_x),
            support_y=torch.stack([t.support_y for t in tasks]),
            query_x=torch.stack(query_x),
            query_y=torch.stack([t.query_y for t in tasks]),
            unlabeled_x=torch.stack(unlabeled_x),
        )

    def _bound(self, task: MemoryTask) -> MemoryTask:
        """``task`` with the sampler its source names (a restored task learns it here)."""
        if task.source is None or task.sampler is not None:
            return task
        sampler = self._samplers.get(task.source.experience)
        if sampler is not None and _episodes_key(sampler) != task.source.sampler:
            raise ValueError(
                f"the memory holds episode {task.source.index} of {task.source.sampler}, but "
                f"domain {task.source.experience + 1} of this stream is drawn by {sampler!r}: "
                "the run resumed on another stream; resume with the stream (preset, domains, "
                "seed) that wrote the checkpoint"
            )
        task.sampler = sampler
        return task

    # ------------------------------------------------------------------ callbacks
    def before_training_exp(self, strategy, **kwargs) -> None:
        """Learn the training samplers of this experience and of the stream's earlier ones
        (a memory restored from a checkpoint regenerates their episodes)."""
        current = strategy.experience
        try:
            seen = [
                e
                for e in current.origin_stream
                if e.current_experience <= current.current_experience
            ]
        except (AttributeError, TypeError):  # an experience outside a stream
            seen = []
        for exp in [*seen, current]:
            sampler = getattr(exp, "sampler", None)
            if sampler is not None and callable(getattr(sampler, "sample", None)):
                self._samplers[int(exp.current_experience)] = sampler

    def _sources_of(self, strategy) -> list[EpisodeSource] | None:
        """The sources of the meta-batch's current tasks when the experience's sampler drew
        them (their oracle names the episodes); ``None`` when their images must be kept."""
        oracle = strategy.mb_x.oracle
        exp = getattr(getattr(strategy, "experience", None), "current_experience", None)
        sampler = self._samplers.get(exp)
        if oracle is None or sampler is None:
            return None
        indices = oracle.episode_index.tolist()
        if exp not in self._checked:  # once per experience: the sampler gives these images
            self._checked.add(exp)
            drawn = sampler.sample(indices[0]).support_x.to(strategy.mb_x.support_x.device)
            if not torch.equal(drawn, strategy.mb_x.support_x[0]):
                warnings.warn(
                    f"the training batches of domain {exp + 1} are not the episodes its "
                    "sampler draws (a transform or another plugin changed them), so the replay "
                    "memory keeps their images",
                    stacklevel=2,
                )
                self._samplers.pop(exp)
                return None
        return [
            EpisodeSource(experience=int(exp), index=int(i), sampler=_episodes_key(sampler))
            for i in indices
        ]

    def before_training_iteration(self, strategy, **kwargs) -> None:
        self._sources = self._sources_of(strategy)
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
        n_current = it.n_current
        unlabeled = state.unlabeled_emb[:n_current]
        # U_id of every current task, [n_current, U], on the embeddings' device
        if not self.store_unlabeled_features:
            u_id = unlabeled.new_zeros(unlabeled.shape[:2], dtype=torch.bool)
        elif it.ood_split is not None:
            u_id = it.ood_split.is_id[:n_current].to(unlabeled.device)
        else:
            u_id = unlabeled.new_ones(unlabeled.shape[:2], dtype=torch.bool)
        # [n_current, S + U, d]: the support's rows, then U_id's, zero rows elsewhere
        features = torch.cat(
            [state.support_emb[:n_current], torch.where(u_id.unsqueeze(-1), unlabeled, 0.0)],
            dim=1,
        ).float()
        for b in it.current_rows:
            if self._sources is None:
                images = {
                    "support_x": batch.support_x[b].clone(),
                    "query_x": batch.query_x[b].clone(),
                    "unlabeled_x": batch.unlabeled_x[b].clone(),
                }
            else:
                source = self._sources[b]
                images = {"source": source, "sampler": self._samplers[source.experience]}
            task = MemoryTask(
                **images,
                support_y=batch.support_y[b].clone(),
                query_y=batch.query_y[b].clone(),
                unlabeled_id=u_id[b].clone(),
                features=features[b].clone(),
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
