"""Every registered method runs end to end through the public entry point used by the CLI and
the benchmark scripts (channels-last backbone, two domains, so memories and projections act)."""

import math

import pytest
import torch

from avalanche_sets import run_sets, sets_benchmark
from avalanche_sets.methods import JOINT_METHODS, METHODS, build_strategy
from avalanche_sets.presets import resolve_preset


@pytest.fixture(scope="module")
def bench():
    return sets_benchmark(
        "synthetic", domains=["shapes", "strokes"], n_query=2, n_unlabeled=2, n_ood=4,
        tasks_per_domain=6, n_test_episodes=3,
    )  # fmt: skip


@pytest.mark.parametrize("name", METHODS)
def test_every_method_runs_with_the_preset_backbone(name, bench):
    torch.set_num_threads(1)
    preset = resolve_preset("quick", width=4, mem_size=4)
    strategy = build_strategy(name, preset, seed=0)
    assert strategy.model.backbone.channels_last
    assert strategy.model.backbone.precision == preset["precision"] == "auto"
    if name in JOINT_METHODS:
        from avalanche_sets.baselines import joint_benchmark

        result = run_sets(strategy, joint_benchmark(bench))
    else:
        result = run_sets(strategy, bench)
        assert len(result.matrix) == 2
    assert all(math.isfinite(a) and 0 <= a <= 1 for a in result.final)


def test_unknown_method_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown method"):
        build_strategy("ordr", resolve_preset("quick"))
