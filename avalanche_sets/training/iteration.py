"""One forward pass of the episodic template, and what plugins hand each other about it.

:class:`Iteration` is the one object through which plugins pass values within a training
iteration (or an evaluation batch): the template makes a new one before the plugins'
``before_training_iteration`` / ``before_eval_iteration`` and keeps it in
``strategy.iteration`` until the next. A plugin writes a typed field; another reads it:

* a memory plugin appends tasks to the meta-batch with :meth:`Iteration.replay`; the template
  puts them after the stream's tasks before the forward pass, and :attr:`Iteration.replayed`
  says which rows they are (ORDER's :class:`~avalanche_sets.order.FeatureReservoirReplayPlugin`
  writes it, :class:`~avalanche_sets.order.OTFeatureLossPlugin` reads it);
* :attr:`Iteration.state` holds the embeddings of the meta-batch once the model has encoded it
  (the one holder of the :class:`~avalanche_sets.models.EpisodeState`: neither the strategy nor
  the model keeps another);
* :attr:`Iteration.ood_split` holds the in-distribution / OOD decision on every unlabeled image
  (:class:`~avalanche_sets.order.OODSplitPlugin` writes it in ``after_encode``;
  :class:`~avalanche_sets.order.MIRegularizationPlugin` and the OOD-detection metric read it)
  as masks: every plugin keeps fixed shapes and reads nothing on the host.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..data.episodes import EpisodeBatch

if TYPE_CHECKING:  # types only: the template imports this module, not the other way round
    from ..functional.ood import OODSplit
    from ..models.episodic import EpisodeState

__all__ = ["Iteration", "MetaBatchReplay", "Replayed", "check_partners"]


@dataclass(frozen=True)
class Replayed:
    """Memory tasks appended to a meta-batch, after its ``n_current`` current tasks.

    Attributes:
        batch: the replayed episodes (``len(tasks)`` of them, no ground truth).
        tasks: what the memory stored for each (ORDER: a
            :class:`~avalanche_sets.order.MemoryTask` with its stored features and payload).
        slots: the memory slot each task was drawn from.
        rows: their rows in the meta-batch, ``range(n_current, n_current + len(tasks))``.
    """

    batch: EpisodeBatch
    tasks: list[Any]
    slots: list[int]
    rows: range


@dataclass
class Iteration:
    """One forward pass of the template: a training iteration or an evaluation batch.

    Attributes:
        training: whether this is a training iteration.
        n_current: the stream's tasks in the meta-batch: rows ``0 .. n_current - 1``.
        replayed: tasks a memory plugin appended (:meth:`replay`), or ``None``.
        state: the model's :class:`~avalanche_sets.models.EpisodeState` after ``encode``
            (``None`` before it, and for models without ``encode``/``classify``).
        ood_split: the :class:`~avalanche_sets.functional.ood.OODSplit` of the unlabeled
            images (``[B, U]``), when a plugin made one.
    """

    training: bool
    n_current: int
    replayed: Replayed | None = None
    state: EpisodeState | None = None
    ood_split: OODSplit | None = None

    @property
    def current_rows(self) -> range:
        """Rows of the meta-batch that hold the stream's tasks (replayed ones come after)."""
        return range(self.n_current)

    def replay(self, batch: EpisodeBatch, *, tasks: list[Any], slots: list[int]) -> Replayed:
        """Append memory tasks to this training iteration's meta-batch (once per iteration).

        Call it in ``before_training_iteration``; the template adds ``batch`` after the current
        tasks before the forward pass, so the replayed tasks receive the same loss.
        """
        if not self.training:
            raise RuntimeError("tasks are replayed in training iterations only")
        if self.replayed is not None:
            raise RuntimeError("this iteration already replays memory tasks (one memory plugin)")
        if not len(batch) == len(tasks) == len(slots):
            raise ValueError(
                f"replay got {len(batch)} episodes, {len(tasks)} tasks and {len(slots)} slots"
            )
        rows = range(self.n_current, self.n_current + len(tasks))
        self.replayed = Replayed(batch=batch, tasks=list(tasks), slots=list(slots), rows=rows)
        return self.replayed


class MetaBatchReplay:
    """Trait of a plugin that appends tasks of its own memory to every training iteration's
    meta-batch (:meth:`Iteration.replay`) and stores the iteration's current tasks in that
    memory (ORDER's :class:`~avalanche_sets.order.FeatureReservoirReplayPlugin`).

    A plugin that keeps a memory of tasks another way (a replay loader, its own training loop)
    names this trait in its ``CONFLICTS`` (:func:`check_partners`): in one strategy, each would
    store the other's replayed tasks as new ones. The trait lets it say so without importing
    the plugin that has it.
    """


def check_partners(plugin, plugins: Iterable) -> None:
    """Raise ``ValueError`` unless every partner ``plugin.PARTNERS`` names is in ``plugins``
    and no plugin ``plugin.CONFLICTS`` names is.

    ``PARTNERS`` maps a partner class to what the plugin needs it for (a plugin that reads a
    field of :class:`Iteration` another writes); ``CONFLICTS`` maps a class (or a trait:
    :class:`MetaBatchReplay`) the plugin cannot be combined with to why, and what to do
    instead. Partners are matched by class: a plugin
    that merely looks alike is not one.
    """
    plugins = list(plugins)
    have = [type(p).__name__ for p in plugins]
    for partner, why in getattr(plugin, "PARTNERS", {}).items():
        if not any(isinstance(p, partner) for p in plugins):
            raise ValueError(
                f"{type(plugin).__name__} needs {partner.__name__} in the same strategy ({why}), "
                f"but the plugins are {have}; fix: add {partner.__name__}(...) to plugins, or "
                "use OrderStrategy, which adds ORDER's plugins together"
            )
    for other, why in getattr(plugin, "CONFLICTS", {}).items():
        hit = next((p for p in plugins if isinstance(p, other) and p is not plugin), None)
        if hit is not None:
            raise ValueError(
                f"{type(plugin).__name__} cannot be used together with {type(hit).__name__} "
                f"(the plugins are {have}): {why}"
            )
