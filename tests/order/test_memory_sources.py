"""Memory tasks stored as the sampler index of their episode: the same pixels, the same run,
and checkpoints without pixels."""

from __future__ import annotations

import pytest
import torch
from avalanche.training.plugins import EvaluationPlugin

from avalanche_sets import run_sets
from avalanche_sets.methods import build_strategy
from avalanche_sets.order import FeatureReservoirReplayPlugin
from avalanche_sets.order.replay import MemoryTask
from avalanche_sets.presets import resolve_preset
from avalanche_sets.runs.experiment import build_benchmark
from avalanche_sets.training import load_checkpoint, save_checkpoint

torch.set_num_threads(1)

PRESET = resolve_preset(
    "quick", image_size=16, n_blocks=2, width=4, n_way=2, n_shot=1, n_query=2, n_unlabeled=2,
    n_ood=2, tasks_per_domain=8, n_test_episodes=2, n_val_episodes=2, mem_size=3,
    domains=["shapes", "strokes"], ood=["rings"], eval_mb_size=4, threads=1,
)  # fmt: skip


@pytest.fixture(scope="module")
def bench():
    return build_benchmark(PRESET, seed=0)


def _memory(strategy) -> FeatureReservoirReplayPlugin:
    return next(p for p in strategy.plugins if isinstance(p, FeatureReservoirReplayPlugin))


def _order():
    return build_strategy("order", PRESET, seed=0, evaluator=EvaluationPlugin())


@pytest.fixture(scope="module")
def trained(bench):
    strategy = _order()
    result = run_sets(strategy, bench)
    return strategy, result


def test_stored_tasks_are_indices_whose_images_are_the_streams(bench, trained):
    strategy, _ = trained
    memory = _memory(strategy)
    assert len(memory) == 3
    for task in memory.tasks:
        assert task.source is not None and task.support_x is None and task.unlabeled_x is None
        exp = bench.train_stream[task.source.experience]
        assert task.source.sampler == repr(exp.sampler)
        episode = exp.dataset[task.source.index]
        for got, want in zip(
            task.images(), (episode.support_x, episode.query_x, episode.unlabeled_x)
        ):
            assert torch.equal(got, want)
        assert torch.equal(task.support_y, episode.support_y)


def test_a_checkpoint_holds_no_pixels_of_sampled_tasks(trained):
    state = _memory(trained[0]).state_dict()
    for item in state["reservoir"]["items"]:
        assert not {"support_x", "query_x", "unlabeled_x"} & set(item), sorted(item)
        assert set(item["source"]) == {"experience", "index", "sampler"}
    plain = MemoryTask(**state["reservoir"]["items"][0])
    with pytest.raises(RuntimeError, match="has not seen yet"):
        plain.images()


def test_indices_and_kept_images_give_the_same_run(bench, trained, monkeypatch):
    _, by_index = trained
    monkeypatch.setattr(FeatureReservoirReplayPlugin, "_sources_of", lambda self, strategy: None)
    strategy = _order()
    kept = run_sets(strategy, bench)
    assert all(t.source is None and t.support_x is not None for t in _memory(strategy).tasks)
    assert kept.matrix == by_index.matrix and kept.episode_acc == by_index.episode_acc


def test_a_resumed_memory_refuses_another_stream(tmp_path, trained):
    strategy, _ = trained
    path = tmp_path / "run.ckpt"
    save_checkpoint(path, strategy, position={"experience": 1, "iteration": 0})
    other_bench = build_benchmark(PRESET, seed=1)
    resumed = _order()
    load_checkpoint(path, resumed)
    with pytest.raises(ValueError, match="resumed on another stream"):
        resumed.train(other_bench.train_stream[1])


def test_a_resumed_memory_draws_the_same_pixels_from_a_device_sampler(
    tmp_path, bench, trained, monkeypatch
):
    """A run resumed on another device draws its episodes with a device sampler of the same
    stream: the memory accepts it (the same episodes) and replays the very same pixels."""
    from avalanche_sets.data.device_episodes import DeviceEpisodeSampler
    from avalanche_sets.runs import experiment

    strategy, _ = trained
    path = tmp_path / "run.ckpt"
    save_checkpoint(path, strategy, position={"experience": 1, "iteration": 0})
    monkeypatch.setattr(experiment, "data_device", lambda preset: "cpu")
    device_bench = experiment.build_benchmark(PRESET, seed=0)
    assert isinstance(device_bench.train_stream[1].sampler, DeviceEpisodeSampler)
    resumed = _order()
    load_checkpoint(path, resumed)
    resumed.train(device_bench.train_stream[1])  # replays restored tasks: no refusal
    tasks = [t for t in _memory(resumed).tasks if t.source is not None]
    assert tasks
    for task in tasks:
        assert task.sampler is device_bench.train_stream[task.source.experience].sampler
        episode = bench.train_stream[task.source.experience].dataset[task.source.index]
        for got, want in zip(
            task.images(), (episode.support_x, episode.query_x, episode.unlabeled_x)
        ):
            assert torch.equal(got, want)
