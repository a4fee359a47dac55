"""Evaluating the same episodes again reuses their collated batches (same numbers, no
resampling), within the strategy's byte budget."""

import torch

from avalanche_sets import sets_benchmark
from avalanche_sets.methods import build_strategy
from avalanche_sets.presets import resolve_preset
from avalanche_sets.training import episode_accuracies


def _setup():
    torch.set_num_threads(1)
    bench = sets_benchmark(
        "synthetic", domains=["shapes", "strokes"], n_query=2, n_unlabeled=2, n_ood=4,
        tasks_per_domain=4, n_test_episodes=5,
    )  # fmt: skip
    strategy = build_strategy("mskm", resolve_preset("quick", width=4, eval_mb_size=2), seed=0)
    calls = {"n": 0}
    for exp in bench.test_stream:
        sample = exp.sampler.sample

        def counted(index, _sample=sample):
            calls["n"] += 1
            return _sample(index)

        exp.sampler.sample = counted
    return bench, strategy, calls


def test_a_second_evaluation_reuses_the_batches_and_gives_the_same_numbers():
    bench, strategy, calls = _setup()
    first = episode_accuracies(strategy, bench.test_stream)
    assert calls["n"] == 10  # 2 domains x 5 episodes, sampled once
    second = episode_accuracies(strategy, bench.test_stream)
    assert calls["n"] == 10  # nothing sampled again
    assert all(map(torch.equal, map(torch.as_tensor, first), map(torch.as_tensor, second)))
    strategy.train(bench.train_stream[0])  # the weights change: the accuracies are recomputed
    third = episode_accuracies(strategy, bench.test_stream)
    assert calls["n"] == 10 and len(third[0]) == 5


def test_what_does_not_fit_the_budget_is_streamed_again():
    bench, strategy, calls = _setup()
    strategy.eval_cache_bytes = 0
    first = episode_accuracies(strategy, bench.test_stream)
    second = episode_accuracies(strategy, bench.test_stream)
    assert calls["n"] == 20
    assert all(map(torch.equal, map(torch.as_tensor, first), map(torch.as_tensor, second)))
