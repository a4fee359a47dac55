"""What a replay memory keeps of an episode (``avalanche_sets.training.episode_memory``): copies
of a meta-batch's rows that hold nothing of the batch and no ground truth, the learner's batch
made of them again, and their checkpoint form; and the names a plugin of one's own needs are
exported from ``avalanche_sets.training``."""

from __future__ import annotations

import io
from dataclasses import fields

import pytest
import torch

import avalanche_sets.training as training
from avalanche_sets import sets_benchmark
from avalanche_sets.baselines.plugins import _memory
from avalanche_sets.data.episodes import Episode, collate_episodes
from avalanche_sets.training import (
    copy_episodes,
    episode_from_dict,
    episode_to_dict,
    learner_batch,
)

KEPT = [f.name for f in fields(Episode) if f.name != "oracle"]


@pytest.fixture(scope="module")
def episodes() -> list[Episode]:
    bench = sets_benchmark(
        "synthetic", domains=["shapes"], n_query=2, n_unlabeled=2, n_ood=4, tasks_per_domain=4,
        n_test_episodes=2,
    )  # fmt: skip
    data = bench.train_stream[0].dataset
    return [data[i] for i in range(3)]


def test_copies_are_the_rows_own_tensors_without_the_ground_truth(episodes):
    batch, _, _ = collate_episodes(episodes)
    assert batch.oracle is not None  # the stream's batch carries it; a copy must not
    copies = copy_episodes(batch, [2, 0])
    assert len(copies) == 2 and len(copy_episodes(batch)) == 3
    for copy, row in zip(copies, [2, 0], strict=True):
        assert copy.oracle is None
        for name in KEPT:
            kept, source = getattr(copy, name), getattr(batch, name)[row]
            assert torch.equal(kept, source) and kept.dtype == source.dtype
            assert kept.device.type == "cpu" and kept.untyped_storage().data_ptr() != (
                source.untyped_storage().data_ptr()
            )
    shape = batch.support_x.shape
    assert copies[0].support_x.shape == shape[1:] and copies[0].support_x.dtype == torch.uint8
    before = copies[0].unlabeled_x.clone()
    batch.unlabeled_x.zero_()  # the batch changes in place: the copy does not
    assert torch.equal(copies[0].unlabeled_x, before) and before.any()


def test_copies_of_a_batch_in_the_graph_are_detached(episodes):
    batch, _, _ = collate_episodes(episodes)
    batch.query_y = batch.query_y.float().requires_grad_()
    (copy,) = copy_episodes(batch, [1])
    assert not copy.query_y.requires_grad and copy.query_y.grad_fn is None


def test_the_learners_batch_of_copies_is_the_batchs_without_the_ground_truth(episodes):
    batch, y, _ = collate_episodes(episodes)
    again, again_y = learner_batch(copy_episodes(batch, [2, 0]), "cpu")
    expected = batch.without_oracle().select([2, 0])
    assert again.oracle is None and len(again) == 2
    for name in KEPT:
        assert torch.equal(getattr(again, name), getattr(expected, name))
    assert torch.equal(again_y, expected.query_y.reshape(-1))
    assert torch.equal(learner_batch(episodes)[1], y)  # a dataset's episodes: the same labels
    assert learner_batch(episodes)[0].oracle is None  # and no ground truth


def test_an_episode_survives_its_checkpoint_form(episodes):
    buffer = io.BytesIO()
    torch.save([episode_to_dict(episodes[0]), episode_to_dict(copy_episodes(
        collate_episodes(episodes)[0], [0])[0])], buffer)  # fmt: skip
    buffer.seek(0)
    with_oracle, copy = (episode_from_dict(d) for d in torch.load(buffer))
    assert copy.oracle is None and with_oracle.oracle is not None
    for name in KEPT:
        assert torch.equal(getattr(with_oracle, name), getattr(episodes[0], name))
        assert torch.equal(getattr(copy, name), getattr(episodes[0], name))
    assert torch.equal(with_oracle.oracle.unlabeled_is_ood, episodes[0].oracle.unlabeled_is_ood)


#: What a plugin of one's own needs (the custom-method guide's examples import them from here).
PLUGIN_NAMES = {
    "EpisodicPlugin": "template", "EpisodicTemplate": "template", "Iteration": "iteration",
    "Replayed": "iteration", "MetaBatchReplay": "iteration", "check_partners": "iteration",
    "copy_episodes": "episode_memory", "learner_batch": "episode_memory",
    "episode_to_dict": "episode_memory", "episode_from_dict": "episode_memory",
    "quiet_evaluator": "template", "silent_evaluator": "template",
}  # fmt: skip


def test_a_plugins_names_are_exported_from_training():
    assert len(set(training.__all__)) == len(training.__all__)
    missing = sorted(set(PLUGIN_NAMES) - set(training.__all__))
    assert not missing, f"not in avalanche_sets.training.__all__: {missing}"
    for name, module in PLUGIN_NAMES.items():
        defined = getattr(getattr(training, module), name)
        assert getattr(training, name) is defined, name
        assert name in getattr(training, module).__all__
    for name in training.__all__:
        assert getattr(training, name) is not None


def test_the_baselines_memories_copy_episodes_through_the_public_functions():
    assert _memory.stored_episodes is copy_episodes
    assert _memory.learner_batch is learner_batch
    assert _memory.episode_to_dict is episode_to_dict
    assert _memory.episode_from_dict is episode_from_dict
