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


# ------------------------------------------------------------------ a class is its method
def _described(strategy) -> dict:
    """What a strategy is: its plugins (class and plain settings, in order), its optimiser's
    class and hyper-parameters, its batch sizes and device, its model's weights."""
    plain = (bool, int, float, str, tuple, type(None))

    def settings(obj) -> dict:
        return {k: v for k, v in vars(obj).items() if isinstance(v, plain) and k[0] != "_"}

    return {
        "plugins": [(type(p).__name__, settings(p)) for p in strategy.plugins],
        "optimizer": (type(strategy.optimizer).__name__, strategy.optimizer.defaults),
        "strategy": {k: getattr(strategy, k) for k in ("train_mb_size", "eval_mb_size")},
        "device": str(strategy.device),
        "model": {k: v.clone() for k, v in strategy.model.state_dict().items()},
    }


def _built_directly(name: str, preset):
    """Method ``name``'s class built as a Python user builds it: the preset's network from the
    seed, its batch sizes, device, learning rate and memory, the seed; nothing of the class's
    own (its fixed and tuned options are its own business)."""
    from avalanche_sets.methods import make_backbone, method_options
    from avalanche_sets.training import quiet_evaluator

    cls = method_class(name)
    takes = method_options(name)[0]
    torch.manual_seed(0)
    kwargs = dict(cls.model_arguments(preset, make_backbone(preset), {}))
    kwargs.update(train_mb_size=preset.meta_batch, eval_mb_size=preset.eval_mb_size)
    kwargs.update(device=preset.device, evaluator=quiet_evaluator())
    if cls.own_lr is None:
        kwargs["lr"] = preset.lr
    kwargs.update({k: getattr(preset, k) for k in ("mem_size", "replay_batch") if k in takes})
    if "seed" in takes:
        kwargs["seed"] = 0
    return cls(**kwargs)


@pytest.mark.parametrize("name", builtin_methods())
def test_a_class_built_directly_is_the_method_build_strategy_builds(name, bench):
    """Every built-in class, built directly with the preset's options, is the strategy
    ``build_strategy`` (the command line's) builds: the same plugins with the same settings,
    the same optimiser, weights and, trained on the same stream, the same results."""
    torch.set_num_threads(1)
    preset = resolve_preset("quick", width=4, mem_size=4, threads=1)
    built, direct = build_strategy(name, preset, seed=0), _built_directly(name, preset)
    a, b = _described(built), _described(direct)
    assert a["plugins"] == b["plugins"] and a["optimizer"] == b["optimizer"]
    assert a["strategy"] == b["strategy"] and a["device"] == b["device"]
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    stream = training_benchmark(name, bench, seed=0)
    results = [run_sets(s, stream, threads=1, interim_episodes=1) for s in (built, direct)]
    assert results[0].final == results[1].final and results[0].matrix == results[1].matrix
    trained = [s.model.state_dict() for s in (built, direct)]
    assert all(torch.equal(trained[0][k], trained[1][k]) for k in trained[0])


def test_an_ablation_built_directly_is_the_ablation():
    from avalanche_sets.order import OrderStrategy, OTFeatureLossPlugin
    from avalanche_sets.order.variants import OrderMIOnly, OrderNoOT

    no_ot = OrderNoOT(seed=0)
    assert no_ot.ot is None and not any(isinstance(p, OTFeatureLossPlugin) for p in no_ot.plugins)
    assert no_ot.replay is not None and no_ot.mi is not None
    with pytest.raises(ValueError, match=r"use_ot=True contradicts it; fix: use method 'order'"):
        OrderNoOT(use_ot=True)
    assert OrderNoOT(use_ot=False).ot is None  # the fixed value itself is no contradiction
    mi_only = OrderMIOnly(seed=0)
    assert mi_only.replay is None and mi_only.ot is None and mi_only.mi is not None
    assert type(OrderStrategy(seed=0).ot) is OTFeatureLossPlugin


def test_a_class_of_ones_own_applies_its_fixed_and_tuned_options_when_built_directly():
    from avalanche_sets.baselines import LST, SemiDER
    from avalanche_sets.order import OrderStrategy

    class Quiet(OrderStrategy):
        name, summary = "quiet-order", "ORDER with a small β and no MI"
        fixed = {"use_mi": False}
        tuned = {"beta": 0.5}

    s = Quiet()
    assert s.mi is None and s.ot.beta == 0.5 and Quiet(beta=0.1).ot.beta == 0.1
    with pytest.raises(ValueError, match=r"method 'quiet-order' is ORDER with use_mi=False"):
        Quiet(use_mi=True)

    class OneStage(LST):  # a tuned option of its model goes to the model
        name, summary = "one-stage-lst", "LST with one self-training stage"
        tuned = {"n_stages": 1}

    assert OneStage().model.n_stages == 1
    assert OneStage(model_options={"n_stages": 2}).model.n_stages == 2
    assert SemiDER().cl_plugin.logit_weight == SemiDER.tuned["logit_weight"]
