"""What a replay memory keeps of an episode, and how it gives it back to a learner.

A plugin that replays episodes keeps copies of the meta-batch's tasks
(:func:`copy_episodes`, in ``after_training_iteration``), collates some of them into a
meta-batch again when it replays them (:func:`learner_batch`) and, to be checkpointed,
turns them into plain dictionaries of tensors and back (:func:`episode_to_dict`,
:func:`episode_from_dict`). The built-in memories (DER, MER, A-GEM, GEM, GPM) use these
functions; the "Writing your own method" guide has a replay plugin made of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, fields

import torch
from torch import Tensor

from ..data.episodes import Episode, EpisodeBatch, EpisodeOracle, collate_episodes

__all__ = ["copy_episodes", "learner_batch", "episode_to_dict", "episode_from_dict"]

#: The fields a memory keeps: the inputs and labels, never the oracle.
_KEPT = tuple(f.name for f in fields(Episode) if f.name != "oracle")


def copy_episodes(batch: EpisodeBatch, rows: Iterable[int] | None = None) -> list[Episode]:
    """Copies of the episodes in rows ``rows`` (default: every row) of a meta-batch, as a
    memory keeps them.

    For a meta-batch of ``B`` episodes (``strategy.mb_x``, an :class:`EpisodeBatch` with
    ``support_x`` ``[B, N*K, H, W, 3]`` uint8 and so on), each copy is one :class:`Episode`:
    ``support_x`` ``[N*K, H, W, 3]``, ``support_y`` ``[N*K]``, ``query_x`` ``[N*Q, H, W, 3]``,
    ``query_y`` ``[N*Q]`` and ``unlabeled_x`` ``[U, H, W, 3]``, in the batch's dtypes (uint8
    images, int64 labels). What is copied: those five tensors, detached, on the CPU and in
    storage of their own (``clone``), so a copy holds neither the meta-batch nor device
    memory nor the autograd graph alive, and later in-place changes to the batch do not reach
    it. What is not: the oracle (``oracle`` is ``None``), the ground truth of which unlabeled
    image is out-of-distribution, which no learner may read. Pass ``rows`` to keep only some
    tasks: ``strategy.iteration.current_rows`` are the stream's tasks of a training iteration
    (the rows after them are tasks another memory replayed).
    """
    out = []
    for b in range(len(batch)) if rows is None else rows:
        episode = batch.episode(b)
        out.append(Episode(**{n: getattr(episode, n).detach().cpu().clone() for n in _KEPT}))
    return out


def learner_batch(
    episodes: Sequence[Episode], device: str | torch.device | None = None
) -> tuple[EpisodeBatch, Tensor]:
    """The meta-batch a learner may see made of ``episodes`` (copies or a dataset's episodes),
    and its query labels.

    Returns ``(batch, y)``: ``batch`` stacks the episodes along a first dimension
    (``support_x`` ``[len(episodes), N*K, H, W, 3]`` ...) without an oracle, ``y`` is the query
    labels flattened, ``[len(episodes) * N*Q]`` (what ``strategy.mb_y`` is). Both are moved to
    ``device`` when it is given. The episodes must have one shape (one N, K, Q, U, image size).
    """
    batch, y, _ = collate_episodes(list(episodes))
    batch = batch.without_oracle()
    if device is not None:
        batch, y = batch.to(device), y.to(device)
    return batch, y


def episode_to_dict(episode: Episode) -> dict:
    """A plain dictionary of the episode's tensors (the oracle's nested, or ``None``), for a
    plugin's ``state_dict``: checkpoints save it with ``torch.save``."""
    return asdict(episode)


def episode_from_dict(d: dict) -> Episode:
    """The :class:`Episode` :func:`episode_to_dict` made (for a plugin's ``load_state_dict``)."""
    d = dict(d)
    oracle = d.pop("oracle", None)
    return Episode(**d, oracle=None if oracle is None else EpisodeOracle(**oracle))
