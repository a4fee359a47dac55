"""Every registered method runs end to end through the public entry point used by the CLI and
the benchmark scripts (channels-last backbone, two domains, so memories and projections act)."""

import math

import pytest
import torch

from avalanche_sets import run_sets, sets_benchmark
from avalanche_sets.methods import (
    MethodOptionError,
    build_strategy,
    builtin_methods,
    check_method,
    method_class,
    training_benchmark,
)
from avalanche_sets.presets import resolve_preset


@pytest.fixture(scope="module")
def bench():
    return sets_benchmark(
        "synthetic", domains=["shapes", "strokes"], n_query=2, n_unlabeled=2, n_ood=4,
        tasks_per_domain=6, n_test_episodes=3,
    )  # fmt: skip


@pytest.mark.parametrize("name", builtin_methods())
def test_every_method_runs_with_the_preset_backbone(name, bench):
    torch.set_num_threads(1)
    preset = resolve_preset("quick", width=4, mem_size=4, threads=1)
    strategy = build_strategy(name, preset, seed=0)
    assert strategy.model.backbone.channels_last
    assert strategy.model.backbone.precision == preset.precision == "auto"
    trained_on = training_benchmark(name, bench, seed=0)
    if trained_on is not bench:  # the joint methods: the domains' mixture
        result = run_sets(strategy, trained_on)
    else:
        result = run_sets(strategy, bench)
        assert len(result.matrix) == 2
    assert all(math.isfinite(a) and 0 <= a <= 1 for a in result.final)


def test_unknown_method_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown method"):
        build_strategy("ordr", resolve_preset("quick"))


#: The strategy options each meta-learner took (``--strategy-set KEY=VALUE``) when it still
#: re-declared its model's options (each given a value other than its default); they are its
#: model's options now, and must all still work.
META_OPTIONS = {
    "protonet": {"bf16": True},
    "mskm": {"bf16": True},
    "anil": {"n_way": 3, "inner_steps": 2, "inner_lr": 0.02, "first_order": False,
             "eval_inner_steps": 3, "bf16": True},
    "tpn": {"alpha": 0.5, "k": 3, "sigma_hidden": (4,), "bf16": True, "sigma_mode": "raw",
            "self_loops": True, "support_loss": True},
    "lst": {"n_way": 3, "inner_steps": 2, "inner_lr": 0.02, "retrain_steps": 1,
            "finetune_steps": 1, "n_select": 2, "n_stages": 1, "swn_hidden": (4,),
            "first_order": False, "bf16": True},
}  # fmt: skip
#: Where a built strategy keeps the options its model does not store under their own name.
_READ = {
    "sigma_hidden": lambda s: (s.model.sigma_net[0].out_features,),
    "swn_hidden": lambda s: (s.model.swn.net[0].out_features,),
    "support_loss": lambda s: s.support_loss,
}


@pytest.mark.parametrize("name", list(META_OPTIONS))
def test_every_meta_learner_option_reaches_its_model(name):
    preset = resolve_preset("quick", width=4)
    options = META_OPTIONS[name]
    check_method(name, preset, options)
    strategy = build_strategy(name, preset, seed=0, **options)
    for key, value in options.items():
        got = _READ[key](strategy) if key in _READ else getattr(strategy.model, key)
        assert got == value, key


def test_meta_learner_option_errors_name_the_option():
    preset = resolve_preset("quick", width=4)
    with pytest.raises(MethodOptionError, match=r"\['n_stagez'\] \(did you mean 'n_stages'\?\)"):
        check_method("lst", preset, {"n_stagez": 1})
    with pytest.raises(ValueError, match="n_stages must be an integer >= 1, got 0"):
        build_strategy("lst", preset, n_stages=0)
    with pytest.raises(MethodOptionError, match=r"\['alpha'\]"):  # a TPN option, not LST's
        check_method("lst", preset, {"alpha": 0.5})


def test_a_continual_baseline_takes_its_tuned_options_from_their_one_home(monkeypatch):
    """A method class's ``tuned`` is the one source of its tuned values: change it and the
    built strategy changes; an option handed to ``build_strategy`` still wins; the class built
    by hand has the same defaults."""
    from avalanche_sets.baselines import SemiDER, SemiGPM

    preset = resolve_preset("quick", width=4, mem_size=4)
    gpm, der = method_class("semi-gpm"), method_class("semi-der")
    assert gpm is SemiGPM and der is SemiDER
    assert build_strategy("semi-gpm", preset).cl_plugin.threshold == gpm.tuned["threshold"]
    assert SemiGPM().cl_plugin.threshold == gpm.tuned["threshold"]
    assert SemiDER().cl_plugin.logit_weight == der.tuned["logit_weight"]
    monkeypatch.setattr(SemiGPM, "tuned", {**gpm.tuned, "threshold": 0.5})
    monkeypatch.setattr(SemiDER, "tuned", {"logit_weight": 0.25, "label_weight": 0.75})
    assert build_strategy("semi-gpm", preset).cl_plugin.threshold == 0.5
    plugin = build_strategy("semi-der", preset).cl_plugin
    assert (plugin.logit_weight, plugin.label_weight) == (0.25, 0.75)
    built = build_strategy("semi-der", preset, logit_weight=0.125)
    assert built.cl_plugin.logit_weight == 0.125
