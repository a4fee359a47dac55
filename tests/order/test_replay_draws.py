"""Which memory slots ORDER's replay draws: every slot, uniformly, from the plugin's own seeded
generator, and the same draws after a checkpoint and resume."""

from __future__ import annotations

import copy

import numpy as np
import torch
from scipy.stats import chi2

from avalanche_sets.data import EpisodeBatch
from avalanche_sets.order import FeatureReservoirReplayPlugin
from avalanche_sets.order.replay import MemoryTask
from avalanche_sets.training.iteration import Iteration

MEM, REPLAY, ITERATIONS = 10, 2, 2000


def _task(seed: int) -> MemoryTask:
    g = torch.Generator().manual_seed(seed)
    img = lambda n: torch.randint(0, 255, (n, 4, 4, 3), generator=g, dtype=torch.uint8)  # noqa: E731
    return MemoryTask(
        support_x=img(2), support_y=torch.tensor([0, 1]), query_x=img(2),
        query_y=torch.tensor([0, 1]), unlabeled_x=img(3),
        unlabeled_id=torch.tensor([True, False, True]), features=torch.randn(4, 8, generator=g),
    )  # fmt: skip


class _Strategy:
    """The two attributes the replay reads in ``before_training_iteration``."""

    def __init__(self) -> None:
        self.mb_x = EpisodeBatch(
            support_x=torch.zeros(1, 2, 4, 4, 3, dtype=torch.uint8),
            support_y=torch.zeros(1, 2, dtype=torch.long),
            query_x=torch.zeros(1, 2, 4, 4, 3, dtype=torch.uint8),
            query_y=torch.zeros(1, 2, dtype=torch.long),
            unlabeled_x=torch.zeros(1, 3, 4, 4, 3, dtype=torch.uint8),
        )
        self.iteration = Iteration(training=True, n_current=1)


def _filled(seed: int = 3) -> FeatureReservoirReplayPlugin:
    plugin = FeatureReservoirReplayPlugin(mem_size=MEM, replay_batch=REPLAY, seed=seed)
    for s in range(MEM + 5):  # full, and some slots replaced
        plugin.reservoir.offer(_task(s))
    return plugin


def _draws(plugin: FeatureReservoirReplayPlugin, n: int, *, disturb: bool = False) -> list:
    out = []
    for i in range(n):
        if disturb:  # other code using the global generators must not move the draws
            torch.manual_seed(1000 + i)
            torch.rand(3)
            np.random.seed(i)
            np.random.rand(2)
        strategy = _Strategy()
        plugin.before_training_iteration(strategy)
        replayed = strategy.iteration.replayed
        assert [t is plugin.tasks[s] for t, s in zip(replayed.tasks, replayed.slots)] == [True] * 2
        out.append(tuple(replayed.slots))
    return out


def test_every_slot_is_replayed_uniformly_without_repeats_in_an_iteration():
    draws = _draws(_filled(), ITERATIONS)
    assert all(len(set(d)) == REPLAY for d in draws), "a task replayed twice in one iteration"
    counts = np.bincount([s for d in draws for s in d], minlength=MEM)
    assert counts.size == MEM and counts.min() > 0, counts
    expected = ITERATIONS * REPLAY / MEM
    stat = float(((counts - expected) ** 2 / expected).sum())
    # A fixed seed makes the statistic a fixed number; the bound is the chi-square 0.999 quantile
    # (9 degrees of freedom, about 27.9): a sampler biased towards some slots exceeds it.
    bound = float(chi2.ppf(0.999, MEM - 1))
    assert stat < bound, (
        f"slot counts {counts.tolist()} are not uniform (chi2 {stat:.1f} >= {bound:.1f})"
    )


def test_draws_come_from_the_plugins_own_seeded_generator():
    reference = _draws(_filled(), 50)
    assert _draws(_filled(), 50, disturb=True) == reference
    other = FeatureReservoirReplayPlugin(mem_size=MEM, replay_batch=REPLAY, seed=4)
    for s in range(MEM + 5):
        other.reservoir.offer(_task(s))
    assert _draws(other, 50) != reference, "the seed does not choose the draws"


def test_draws_continue_identically_after_a_checkpoint_and_resume():
    plugin = _filled()
    _draws(plugin, 37)
    saved = copy.deepcopy(plugin.state_dict())
    after = _draws(plugin, 60)
    resumed = FeatureReservoirReplayPlugin(mem_size=MEM, replay_batch=REPLAY, seed=3)
    resumed.load_state_dict(saved)
    assert _draws(resumed, 60, disturb=True) == after
    fresh = _filled()
    assert _draws(fresh, 60) != after, "the resumed draws would match without the saved state"
