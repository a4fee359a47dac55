"""Episode memories shared by the continual baselines: datasets of stored episodes, sampling,
and checkpointable state of Avalanche's storage policies. What a memory keeps of an episode
(:func:`stored_episodes`, :func:`learner_batch`, :func:`episode_to_dict`,
:func:`episode_from_dict`) is the public :mod:`avalanche_sets.training.episode_memory`.

Avalanche's storage policies (:class:`~avalanche.training.storage_policy.ReservoirSamplingBuffer`,
:class:`~avalanche.training.storage_policy.ExperienceBalancedBuffer`) keep their memory as an
:class:`~avalanche.benchmarks.utils.AvalancheDataset`: for a SETS experience, a (lazy) subset of
its dataset of episodes, which keeps the episode collate function. To checkpoint such a memory,
:func:`storage_state_dict` materialises the stored episodes (uint8 images, a few hundred KB per
episode at 84 px) and :func:`load_storage_state_dict` rebuilds the same buffer from them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import numpy as np
import torch
from avalanche.benchmarks.utils import AvalancheDataset
from avalanche.training.storage_policy import (
    ExemplarsBuffer,
    ExperienceBalancedBuffer,
    ReservoirSamplingBuffer,
)
from torch import Tensor

from ...data.episodes import Episode, collate_episodes
from ...training.episode_memory import copy_episodes as stored_episodes
from ...training.episode_memory import episode_from_dict, episode_to_dict, learner_batch

__all__ = [
    "EpisodeListDataset",
    "episodes_dataset",
    "materialize",
    "episode_to_dict",
    "episode_from_dict",
    "learner_batch",
    "stored_episodes",
    "sample_episodes",
    "storage_state_dict",
    "load_storage_state_dict",
    "grad_vector",
    "seeded_torch",
    "set_grad_vector",
]


class EpisodeListDataset(torch.utils.data.Dataset):
    """A map-style dataset over a list of already drawn :class:`Episode` objects."""

    def __init__(self, episodes: Sequence[Episode]) -> None:
        self.episodes = list(episodes)
        self.targets = [0] * len(self.episodes)  # what Avalanche's buffers expect

    def __len__(self) -> int:
        return len(self.episodes)

    def __getitem__(self, index: int) -> Episode:
        return self.episodes[index]


def episodes_dataset(episodes: Sequence[Episode]) -> AvalancheDataset:
    """An :class:`AvalancheDataset` of episodes that collates with :func:`collate_episodes`."""
    return AvalancheDataset([EpisodeListDataset(episodes)], collate_fn=collate_episodes)


def materialize(dataset) -> list[Episode]:
    """Every episode of a dataset, in order."""
    return [dataset[i] for i in range(len(dataset))]


def sample_episodes(dataset, k: int, rng: np.random.Generator) -> list[Episode]:
    """``min(k, len)`` distinct episodes of ``dataset``, uniformly without replacement."""
    n = min(int(k), len(dataset))
    if n <= 0:
        return []
    return [dataset[int(i)] for i in rng.choice(len(dataset), size=n, replace=False)]


# ---------------------------------------------------------------------- storage policies
def storage_state_dict(policy: ExemplarsBuffer) -> dict:
    """Checkpointable state of a reservoir or experience-balanced buffer of episodes."""
    if isinstance(policy, ReservoirSamplingBuffer):
        return {
            "kind": "reservoir",
            "max_size": policy.max_size,
            "episodes": [episode_to_dict(e) for e in materialize(policy.buffer)],
            "weights": policy._buffer_weights.clone(),
        }
    if isinstance(policy, ExperienceBalancedBuffer):
        return {
            "kind": "experience_balanced",
            "max_size": policy.max_size,
            "num_exps": policy._num_exps,
            "groups": {k: storage_state_dict(g) for k, g in policy.buffer_groups.items()},
        }
    raise TypeError(
        f"cannot checkpoint a {type(policy).__name__}: only ReservoirSamplingBuffer and "
        "ExperienceBalancedBuffer memories of episodes are supported"
    )


def load_storage_state_dict(policy: ExemplarsBuffer, state: dict) -> None:
    """Restore :func:`storage_state_dict` into a policy of the same kind."""
    if isinstance(policy, ReservoirSamplingBuffer) and state["kind"] == "reservoir":
        policy.max_size = int(state["max_size"])
        episodes = [episode_from_dict(d) for d in state["episodes"]]
        policy.buffer = episodes_dataset(episodes)
        policy._buffer_weights = state["weights"].clone()
        return
    if isinstance(policy, ExperienceBalancedBuffer) and state["kind"] == "experience_balanced":
        policy.max_size = int(state["max_size"])
        policy._num_exps = int(state["num_exps"])
        policy.buffer_groups = {}
        for k, g in state["groups"].items():
            group = ReservoirSamplingBuffer(int(g["max_size"]))
            load_storage_state_dict(group, g)
            policy.buffer_groups[k] = group
        return
    raise TypeError(
        f"checkpointed memory of kind {state.get('kind')!r} does not match the strategy's "
        f"{type(policy).__name__}; build the strategy with the same storage policy"
    )


@contextlib.contextmanager
def seeded_torch(*key: int) -> Iterator[None]:
    """Run a block with torch's global CPU generator seeded from ``key``, then restore it.

    Avalanche's storage policies draw their reservoir weights from the global generator; a
    resumed run consumes that generator differently (a new data-loader iterator draws a seed),
    so memory updates are made a pure function of the plugin's own state instead.
    """
    seed = int(np.random.SeedSequence(list(key)).generate_state(1, dtype=np.uint64)[0] >> 1)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


# ---------------------------------------------------------------------- gradients
def grad_vector(params: Sequence[torch.nn.Parameter]) -> Tensor:
    """The concatenated gradients of ``params`` (zeros where a gradient is missing)."""
    return torch.cat(
        [p.grad.reshape(-1) if p.grad is not None else p.new_zeros(p.numel()) for p in params]
    )


def set_grad_vector(params: Sequence[torch.nn.Parameter], vector: Tensor) -> None:
    """Write a concatenated gradient back into ``params`` (skipping missing gradients)."""
    offset = 0
    for p in params:
        n = p.numel()
        if p.grad is not None:
            p.grad.copy_(vector[offset : offset + n].view_as(p))
        offset += n
