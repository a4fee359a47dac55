"""ORDER's memory stores features in a fixed shape, ``[|S| + U, d]`` with a row mask derived
from ``unlabeled_id``, chosen with masks on the device (no host read), and still loads a
checkpoint whose tasks hold only their ``|S| + |U_id|`` valid rows. The OT plugin pairs the
replayed tasks' current and stored rows in that shape, with its sub-sampling generator on the
model's device, saved and restored with the plugin."""

from __future__ import annotations

import copy

import pytest
import torch

from avalanche_sets.data import EpisodeBatch
from avalanche_sets.functional.ood import OODSplit
from avalanche_sets.models.episodic import EpisodeState
from avalanche_sets.order import FeatureReservoirReplayPlugin, MemoryTask, OTFeatureLossPlugin
from avalanche_sets.training.iteration import Iteration
from tests.functional.test_ot_masked import _counting_host_reads

S, Q, U, D, B = 2, 4, 5, 3, 3  # support, query, unlabeled images; feature size; tasks


def _batch(b: int = B) -> EpisodeBatch:
    g = torch.Generator().manual_seed(0)
    img = lambda n: torch.randint(0, 255, (b, n, 4, 4, 3), generator=g, dtype=torch.uint8)  # noqa: E731
    return EpisodeBatch(
        support_x=img(S), support_y=torch.arange(S).repeat(b, 1), query_x=img(Q),
        query_y=torch.arange(S).repeat_interleave(Q // S).repeat(b, 1), unlabeled_x=img(U),
    )  # fmt: skip


def _state(b: int = B, seed: int = 0) -> EpisodeState:
    g = torch.Generator().manual_seed(seed)
    return EpisodeState(
        support_emb=torch.randn(b, S, D, generator=g),
        query_emb=torch.randn(b, Q, D, generator=g),
        unlabeled_emb=torch.randn(b, U, D, generator=g),
        support_y=torch.arange(S).repeat(b, 1),
        n_way=S,
        prototypes=torch.randn(b, S, D, generator=g),
        unlabeled_weight=torch.ones(b, U),
    )


IS_ID = torch.tensor(
    [[True, False, True, True, False], [False] * U, [True] * U]
)  # some, none, all of U ID


class _Strategy:
    def __init__(self, plugin, *, split: bool = True) -> None:
        self.mb_x = _batch()
        self.plugins = [plugin]
        self.iteration = Iteration(training=True, n_current=B)
        self.iteration.state = _state()
        if split:
            z = torch.zeros(B, U)
            self.iteration.ood_split = OODSplit(IS_ID, z, z[:, 0], z.long())


def _stored(plugin) -> list[MemoryTask]:
    tasks = plugin.tasks
    assert len(tasks) == B
    return tasks


@pytest.mark.parametrize("split", [True, False])
def test_stored_features_are_s_then_every_unlabeled_row_zero_outside_u_id(split):
    plugin = FeatureReservoirReplayPlugin(mem_size=B, replay_batch=1)
    strategy = _Strategy(plugin, split=split)
    with _counting_host_reads() as reads:
        plugin.after_training_iteration(strategy)
    assert reads == [], reads  # the features are chosen on the device
    state = strategy.iteration.state
    for b, task in enumerate(_stored(plugin)):
        is_id = IS_ID[b] if split else torch.ones(U, dtype=torch.bool)
        assert torch.equal(task.unlabeled_id, is_id)
        assert task.features.shape == (S + U, D) and task.features.dtype == torch.float32
        assert torch.equal(task.feature_mask(), torch.cat([torch.ones(S, dtype=torch.bool), is_id]))
        assert torch.equal(task.features[:S], state.support_emb[b])
        assert torch.equal(task.features[S:][is_id], state.unlabeled_emb[b][is_id])
        assert not task.features[S:][~is_id].any()
        assert task.nbytes == sum(t.nbytes for t in task._tensors().values())
    assert plugin.memory_bytes() == sum(t.nbytes for t in plugin.tasks)


def test_without_unlabeled_features_no_unlabeled_row_is_valid():
    plugin = FeatureReservoirReplayPlugin(mem_size=B, store_unlabeled_features=False)
    strategy = _Strategy(plugin)
    plugin.after_training_iteration(strategy)
    for b, task in enumerate(_stored(plugin)):
        assert not task.unlabeled_id.any() and task.feature_mask().sum() == S
        assert torch.equal(task.features[:S], strategy.iteration.state.support_emb[b])
        assert not task.features[S:].any()


def test_a_checkpoint_with_only_the_valid_rows_loads_into_the_fixed_shape():
    """A task saved as ``features [|S| + |U_id|, d]`` (support, then U_id's rows in order),
    hand-built as older checkpoints hold it, is padded on load to the layout a new run stores."""
    plugin = FeatureReservoirReplayPlugin(mem_size=B, replay_batch=1)
    plugin.after_training_iteration(_Strategy(plugin))
    state = plugin.state_dict()
    old = copy.deepcopy(state)
    for item in old["reservoir"]["items"]:
        item["features"] = item["features"][torch.cat([torch.ones(S, dtype=torch.bool),
                                                       item["unlabeled_id"]])]  # fmt: skip
    assert [len(i["features"]) for i in old["reservoir"]["items"]] == [S + 3, S, S + U]
    restored = FeatureReservoirReplayPlugin(mem_size=B, replay_batch=1)
    restored.load_state_dict(old)
    for new, task in zip(plugin.tasks, restored.tasks):
        assert torch.equal(task.features, new.features)
        assert torch.equal(task.feature_mask(), new.feature_mask())
    bad = copy.deepcopy(old["reservoir"]["items"][0])
    bad["features"] = bad["features"][:-1]
    with pytest.raises(ValueError, match=r"features must have shape \[\|S\| \+ U, d\]"):
        MemoryTask(**bad)


def _replayed(plugin: FeatureReservoirReplayPlugin, ot: OTFeatureLossPlugin):
    """Store B tasks, then replay 2 of them behind one current task."""
    plugin.after_training_iteration(_Strategy(plugin))
    strategy = _Strategy(plugin)
    strategy.mb_x = _batch(1)
    strategy.iteration = Iteration(training=True, n_current=1)
    plugin.before_training_iteration(strategy)
    it = strategy.iteration
    it.state = _state(1 + len(it.replayed.tasks), seed=5)
    return strategy


def test_ot_pairs_the_replayed_rows_in_the_fixed_shape_with_their_mask():
    plugin = FeatureReservoirReplayPlugin(mem_size=B, replay_batch=2)
    ot = OTFeatureLossPlugin(max_points=4, seed=1)
    strategy = _replayed(plugin, ot)
    it = strategy.iteration
    with _counting_host_reads() as reads:
        current, stored, mask = ot.current_and_stored(it.state, it.replayed)
    assert reads == []
    assert current.shape == stored.shape == (2 * (S + U), D) and mask.shape == (2 * (S + U),)
    for i, (row, task) in enumerate(zip(it.replayed.rows, it.replayed.tasks)):
        block = slice(i * (S + U), (i + 1) * (S + U))
        assert torch.equal(mask[block], task.feature_mask())
        assert torch.equal(stored[block], task.features)
        want = torch.cat([it.state.support_emb[row], it.state.unlabeled_emb[row]])
        assert torch.equal(current[block], want)
    assert ot.loss_term(strategy) is not None and ot.last_value >= 0


def test_the_sub_sampling_generator_is_saved_restored_and_old_checkpoints_load():
    plugin = FeatureReservoirReplayPlugin(mem_size=B, replay_batch=2)
    ot = OTFeatureLossPlugin(max_points=4, seed=1)
    assert ot.state_dict() == {"generator": None, "device": None}  # made at first use
    strategy = _replayed(plugin, ot)
    gen = ot.generator(torch.device("cpu"))
    assert gen is ot.generator(torch.device("cpu"))
    saved = copy.deepcopy(ot.state_dict())
    first = [ot.loss_term(strategy).item() for _ in range(4)]
    resumed = OTFeatureLossPlugin(max_points=4, seed=1)
    resumed.load_state_dict(saved)
    assert [resumed.loss_term(strategy).item() for _ in range(4)] == first
    assert len(set(first)) > 1  # the draws move on
    # the old format: a CPU torch.Generator's state, without a device
    old = {"generator": torch.Generator().manual_seed(1).get_state()}
    resumed = OTFeatureLossPlugin(max_points=4, seed=1)
    resumed.load_state_dict(old)
    fresh = OTFeatureLossPlugin(max_points=4, seed=1)
    assert resumed.loss_term(strategy).item() == fresh.loss_term(strategy).item()
    # a state from another device type seeds the generator reproducibly
    other = OTFeatureLossPlugin(max_points=4, seed=1)
    other.load_state_dict({"generator": saved["generator"], "device": "meta"})
    again = OTFeatureLossPlugin(max_points=4, seed=1)
    again.load_state_dict({"generator": saved["generator"], "device": "meta"})
    assert other.generator("cpu").initial_seed() == again.generator("cpu").initial_seed()
