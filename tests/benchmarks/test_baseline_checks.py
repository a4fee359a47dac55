"""The issue-11 single-domain check plan (benchmarks/baseline_checks.py) and the curves' precision."""

import pytest

from benchmarks import baseline_checks as bc
from benchmarks import learning_curves as lc


def test_plan_gives_every_check_a_pair_on_each_source():
    """Every check of learning_curves.CHECKS has both of its methods, in one of its variants,
    on the plan's domain of each source: no check can silently drop out of the table."""
    specs = bc.plan_specs(bc.PLAN, shots=[5], seeds=[0])
    have = {(src, s.domain, s.method, s.variant) for src, s in specs}
    for source in ("packs", "synthetic"):
        domains = {d for src, d, _, _ in have if src == source}
        assert len(domains) == 1  # ONE domain per source
        dom = domains.pop()
        for check in lc.CHECKS:
            assert any(
                (source, dom, check.method_a, v) in have
                and (source, dom, check.method_b, v) in have
                for v in check.variants
            ), f"{check.name} has no pair on {source}/{dom}"


def test_plan_order_and_preset():
    specs = bc.plan_specs(bc.PLAN, shots=[5, 1], seeds=[0])
    shots = [s.shot for _, s in specs]
    assert shots == sorted(shots, reverse=True)  # the shots in the order asked, one after the other
    assert [src for src, _ in specs][:3] == ["packs"] * 3  # the sets-mini domain first
    preset = bc.base_preset("synthetic")
    assert preset.precision == "fp32" and preset.threads == 1


def test_curve_preset_resolves_the_precision():
    from avalanche_sets.presets import resolve_preset
    from avalanche_sets.runs.folder import run_precision

    spec = lc.CurveSpec("protonet", "shapes", 1, 0)
    for asked in ("fp32", "bf16", "auto"):
        base = resolve_preset("cpu", source="synthetic", precision=asked)
        got = lc.curve_preset(base, spec, iters=5, val_episodes=4)["precision"]
        assert got == run_precision(base) and got in ("fp32", "bf16")
    fp32 = lc.curve_preset(bc.base_preset("synthetic"), spec, iters=5, val_episodes=4)
    assert fp32["precision"] == "fp32"


def test_method_options_reach_the_strategy_and_are_checked_early():
    from avalanche_sets.presets import resolve_preset

    assert lc.parse_method("lst") == ("lst", {})
    assert lc.parse_method("lst:inner_lr=0.01,n_stages=1,refine=x") == (
        "lst", {"inner_lr": 0.01, "n_stages": 1, "refine": "x"})  # fmt: skip
    with pytest.raises(ValueError, match="not key=value"):
        lc.parse_method("lst:inner_lr")
    preset = lc.curve_preset(
        resolve_preset("cpu", source="synthetic", image_size=16),
        lc.CurveSpec("x", "shapes", 1, 0), iters=2, val_episodes=2,
    )  # fmt: skip
    assert lc.build_learner("anil:inner_lr=0.1", preset, seed=0).model.inner_lr == 0.1
    assert lc.build_learner("anil", preset, seed=0).model.inner_lr == 0.01
    with pytest.raises(TypeError, match="inner_lrr"):
        lc.check_methods(["anil:inner_lrr=0.01"], preset)


def test_a_method_with_options_gets_its_base_methods_checks():
    import numpy as np

    base = np.linspace(0.3, 0.7, 40)

    def curve(acc):
        a = np.asarray(acc, float)
        return {"iterations": [0], "mean": [100 * a.mean()], "ci95": [0.0],
                "episode_acc": [a.tolist()], "digest": "d", "plateau_index": 0}  # fmt: skip

    curves = {
        ("mskm", "d", 5, "ood"): curve(base),
        ("lst", "d", 5, "ood"): curve(base - 0.1),
        ("lst:inner_lr=0.01", "d", 5, "ood"): curve(base + 0.02),
    }
    rows = {r["expected"]: (round(r["delta"], 6), r["verdict"], round(r["delta_plateau"], 6))
            for r in lc.check_rows(curves)}  # fmt: skip
    assert rows == {
        "lst > mskm": (-10.0, "contradict", -10.0),
        "lst:inner_lr=0.01 > mskm": (2.0, "agree", 2.0),
    }


def test_curve_file_names_are_portable():
    name = lc.CurveSpec("lst:inner_lr=0.1,n_stages=1", "gtsrb", 5, 0, "ood").name
    assert name == "lst@inner_lr=0.1,n_stages=1__gtsrb__5shot__seed0__ood"
    assert not set(name) & set(':*?"<>|\\/')


def test_a_stage_can_be_limited_to_some_shots():
    only5 = bc.Stage("packs", "gtsrb", ("tpn",), ("ood",), shots=(5,))
    every = bc.Stage("packs", "gtsrb", ("protonet",), ("ood",))
    specs = bc.plan_specs([only5, every], shots=[5, 1], seeds=[0])
    assert [(s.method, s.shot) for _, s in specs] == [("tpn", 5), ("protonet", 5), ("protonet", 1)]
