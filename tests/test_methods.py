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


def test_a_continual_baseline_takes_its_tuned_options_from_their_one_home(monkeypatch):
    """``avalanche_sets.baselines.tuned`` is the one source of the tuned values: change it and
    the built strategy changes; an option handed to ``build_strategy`` still wins."""
    from avalanche_sets.baselines import tuned

    preset = resolve_preset("quick", width=4, mem_size=4)
    gpm = tuned.TUNED[tuned.DEFAULTS_TUNED_ON]["semi-gpm"]
    assert build_strategy("semi-gpm", preset).cl_plugin.threshold == gpm["threshold"]
    monkeypatch.setitem(tuned.TUNED[tuned.DEFAULTS_TUNED_ON], "semi-gpm", {**gpm, "threshold": 0.5})
    monkeypatch.setitem(
        tuned.TUNED[tuned.DEFAULTS_TUNED_ON], "semi-der", {"alpha": 0.25, "beta": 0.75}
    )
    assert build_strategy("semi-gpm", preset).cl_plugin.threshold == 0.5
    der = build_strategy("semi-der", preset).cl_plugin
    assert (der.alpha, der.beta) == (0.25, 0.75)
    assert build_strategy("semi-der", preset, alpha=0.125).cl_plugin.alpha == 0.125
