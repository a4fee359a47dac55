"""The contract between ORDER's plugins: what each hands to the others, typed, in one place.

ORDER's objective (paper Eq. 10),
``H = Σ_{T ∈ meta-batch ∪ B} [L_meta(T) + λ(I_ood(T) − I_id(T))] + β L_OT``, is assembled by
:class:`~avalanche_sets.order.OrderStrategy` and four plugins. Each term, who adds it, and
what it reads from whom:

+---------------------------+--------------------------------+--------------------------------+
| term of Eq. 10            | added by                       | reads (from)                   |
+===========================+================================+================================+
| ``L_meta(T)``, every task | ``OrderStrategy.criterion``    | the meta-batch: current tasks, |
| of the meta-batch         | (sum of each task's mean query | then the replayed ones         |
| (``T_t`` and ``T_i ∈ B``) | cross-entropy)                 | (``FeatureReservoirReplay-``   |
|                           |                                | ``Plugin`` appends them)       |
+---------------------------+--------------------------------+--------------------------------+
| ``λ(I_ood(T) − I_id(T))``,| ``MIRegularizationPlugin``     | :class:`OODSplitResult`        |
| every task of the         | (``before_backward``)          | (``OODSplitPlugin``, Algorithm |
| meta-batch                |                                | 1): :func:`ood_split_of`       |
+---------------------------+--------------------------------+--------------------------------+
| ``β · L_OT``, once per    | ``OTFeatureLossPlugin``        | :class:`ReplayInfo` (rows of   |
| meta-batch                | (``before_backward``)          | the replayed tasks, each       |
|                           |                                | :class:`MemoryTask` with its   |
|                           |                                | stored ``S ∪ U_id`` features;  |
|                           |                                | ``FeatureReservoirReplay-``    |
|                           |                                | ``Plugin``): :func:`replay_    |
|                           |                                | info_of`                       |
+---------------------------+--------------------------------+--------------------------------+

``OODSplitPlugin`` adds no term: it writes the :class:`OODSplitResult` to
``episode_state.extras[OOD_SPLIT_KEY]`` and the ``U_id`` mask to
``episode_state.unlabeled_weight`` (the prototypes' refinement uses ``U_id`` only).
``FeatureReservoirReplayPlugin`` adds no term either: it appends the replayed tasks to the
meta-batch (so their ``L_meta`` and MI terms enter the sums above) and writes a
:class:`ReplayInfo` to ``strategy.replay_info``.

A plugin that reads what another writes names that partner in ``PARTNERS``; the
:class:`~avalanche_sets.training.EpisodicTemplate` calls :func:`check_partners` on its plugin
list when it is constructed, so a missing partner fails there with a clear error, not mid-run.
The partner is matched by class: a plugin that merely looks alike (DER's and MER's plugins also
keep a ``reservoir``) is not a partner. A plugin that cannot share a strategy with another
names it in ``CONFLICTS`` instead, checked by the same call.

**Other plugins next to ORDER's memory.** Once ``FeatureReservoirReplayPlugin`` has appended
the replayed tasks, ``strategy.mb_x`` holds more than the stream's tasks; :func:`current_rows`
says which rows are the current ones. The baseline plugins handle this as follows:

* ``DERPlugin`` stores only the current rows (a replayed task is not stored again);
  ``EpisodicAGEMPlugin``, ``EpisodicGEMPlugin`` and ``GPMPlugin`` read their memories from the
  experience's own episodes at its end, never from the meta-batch. All four can be added to
  ``OrderStrategy(plugins=[...])``.
* ``EpisodicReplayPlugin`` (its loader puts its memory episodes into the meta-batch, where
  ORDER would take them for current tasks and store them again) and ``MERPlugin`` (it needs
  ``SemiMER``'s training loop) declare ``CONFLICTS`` with ``FeatureReservoirReplayPlugin``
  and are refused when the strategy is built.

A plugin of one's own keeps data with ORDER's stored tasks through
:attr:`MemoryTask.payload` (see :class:`FeatureReservoirReplayPlugin`: the
``on_memory_store`` event and :class:`StoredTask`), and reads it back on replay from
:class:`ReplayInfo`.
"""

from __future__ import annotations

from collections.abc import Iterable

from .ood_split import OOD_SPLIT_KEY, OODSplitResult
from .replay import MEMORY_STORE_EVENT, MemoryTask, ReplayInfo, StoredTask

__all__ = [
    "OOD_SPLIT_KEY",
    "OODSplitResult",
    "ReplayInfo",
    "MemoryTask",
    "StoredTask",
    "MEMORY_STORE_EVENT",
    "ood_split_of",
    "replay_info_of",
    "current_rows",
    "check_partners",
]


def ood_split_of(state) -> OODSplitResult | None:
    """The OOD split of an :class:`~avalanche_sets.models.EpisodeState` (``None`` if none)."""
    return state.extras.get(OOD_SPLIT_KEY)


def replay_info_of(strategy) -> ReplayInfo | None:
    """Where this meta-batch's replayed memory tasks are (``None`` when none are replayed)."""
    return getattr(strategy, "replay_info", None)


def current_rows(strategy) -> range:
    """The rows of ``strategy.mb_x`` that are this training iteration's current tasks.

    Replayed memory tasks are appended after them (:class:`ReplayInfo`), so the current tasks
    are always a prefix: ``range(ReplayInfo.n_current)``, or every row when nothing is replayed.
    Valid in every callback of a training iteration up to ``FeatureReservoirReplayPlugin``'s
    ``after_training_iteration``, which clears ``strategy.replay_info``; in particular in
    ``before_training_iteration`` whatever the plugin order (before the replay plugin has run,
    the meta-batch holds only current tasks). A plugin that stores current tasks in its
    ``after_training_iteration`` therefore counts them in its ``before_training_iteration``, as ``DERPlugin`` does.
    """
    info = replay_info_of(strategy)
    return range(len(strategy.mb_x) if info is None else info.n_current)


def check_partners(plugin, plugins: Iterable) -> None:
    """Raise ``ValueError`` unless every partner ``plugin.PARTNERS`` names is in ``plugins``
    and no plugin ``plugin.CONFLICTS`` names is.

    ``PARTNERS`` maps a partner class to what the plugin needs it for; ``CONFLICTS`` maps a
    class the plugin cannot be combined with to why, and what to do instead.
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
        if any(isinstance(p, other) for p in plugins):
            raise ValueError(
                f"{type(plugin).__name__} cannot be used together with {other.__name__} "
                f"(the plugins are {have}): {why}"
            )
