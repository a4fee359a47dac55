"""The continual baselines' validation-stream grid (benchmarks/baseline_tuning.py)."""

import json

import pytest

from avalanche_sets.methods import check_method, method_options, normal_options
from avalanche_sets.presets import PRESETS, RunConfig, resolve_preset
from avalanche_sets.runs.record import RunRecord
from benchmarks import _methods
from benchmarks import baseline_tuning as bt


def test_every_grid_point_is_distinct_and_accepted_and_the_default_is_one_of_them():
    preset = resolve_preset("cpu", source="synthetic")
    for method, grid in bt.GRIDS.items():
        assert 2 <= len(grid) <= 4 and len({json.dumps(p, sort_keys=True) for p in grid}) == len(
            grid
        )
        options, _ = method_options(method)  # the strategy's defaults
        assert {k: options[k].default for k in grid[0]} in grid, method  # the chosen point
        for point in grid:
            check_method(method, preset, point)  # raises on an option the method lacks


def test_jobs_start_with_the_reference_and_refuse_unknown_methods():
    preset = resolve_preset("cpu", source="synthetic")
    jobs = bt.jobs_for(["semi-gpm"], preset, 0)
    assert jobs[0] == (bt.REFERENCE, preset, 0, {})
    assert [j[3] for j in jobs[1:]] == bt.GRIDS["semi-gpm"]
    with pytest.raises(ValueError, match="no tuning grid for \\['semi-er'\\]"):
        bt.jobs_for(["semi-er"], preset, 0)


def _record(method, over, accs, seed=0, shot=1):
    """A finished-run record whose validation episodes scored ``accs``, its options as a run
    records them (those equal to the method's defaults left out)."""
    import numpy as np

    preset = {**PRESETS["cpu"], "n_shot": shot}
    return RunRecord(
        method=method, seed=seed, eval_stream="valid",
        strategy_overrides=normal_options(method, RunConfig.of(preset), over),
        preset=preset, code={"version": "0.1.0"},
        result={"mean_accuracy": float(np.mean(accs)), "mean_ci95": 0.01,
                "final": [float(np.mean(accs))], "episode_acc": list(accs)},
    )  # fmt: skip


def test_rows_pair_the_same_episodes_and_choose_takes_the_best():
    g = bt.GRIDS["semi-gpm"]
    recs = [
        _record("semi-seq", {}, [0.5, 0.6, 0.7, 0.8]),
        _record("semi-gpm", g[0], [0.4, 0.5, 0.6, 0.7]),
        _record("semi-gpm", g[2], [0.6, 0.6, 0.8, 0.8]),
        _record("semi-gpm", g[1], [0.9, 0.9, 0.9, 0.9], seed=1),  # another seed: not this table
        _record("semi-gpm", g[1], [0.9, 0.9, 0.9, 0.9], shot=5),  # another shot: neither
    ]
    rows = bt.rows_for(recs, shot=1, seed=0)
    assert [json.loads(r["options"]) for r in rows] == [g[0], g[2]]
    assert {r["role"] for r in rows} == {"grid"}
    default, tuned = rows
    assert default["default"] and default["delta_vs_default"] == 0.0
    assert default["delta_vs_semi_seq"] == pytest.approx(-10.0)
    assert tuned["delta_vs_default"] == pytest.approx(15.0)  # (.2+.1+.2+.1)/4 in points
    assert tuned["delta_vs_semi_seq"] == pytest.approx(5.0)
    assert bt.choose(rows) == {"semi-gpm": g[2]}


def test_diagnosis_runs_are_reported_but_never_chosen():
    g = bt.GRIDS["semi-gpm"]
    sgd = bt.DIAGNOSIS["semi-seq"][0]
    free_bn = bt.DIAGNOSIS["semi-gpm"][0]
    recs = [
        _record("semi-seq", {}, [0.5, 0.6, 0.7, 0.8]),
        _record("semi-seq", sgd, [0.4, 0.4, 0.5, 0.5]),
        _record("semi-gpm", g[0], [0.4, 0.5, 0.6, 0.7]),
        _record("semi-gpm", free_bn, [0.9, 0.9, 0.9, 0.9]),  # the best run, but a diagnosis
    ]
    rows = bt.rows_for(recs, shot=1, seed=0)
    roles = {(r["method"], r["options"]): r["role"] for r in rows}
    assert roles == {
        ("semi-gpm", json.dumps(g[0], sort_keys=True)): "grid",
        ("semi-gpm", json.dumps(free_bn, sort_keys=True)): "diagnosis",
        ("semi-seq", json.dumps(sgd, sort_keys=True)): "diagnosis",
    }
    seq_sgd = next(r for r in rows if r["method"] == "semi-seq")
    assert seq_sgd["delta_vs_default"] == pytest.approx(-20.0)  # vs Semi-Seq's own default run
    assert bt.choose(rows) == {"semi-gpm": g[0]}
    jobs = bt.jobs_for(["semi-gpm"], resolve_preset("cpu", source="synthetic"), 0, diagnosis=True)
    assert [(m, o) for m, _, _, o in jobs[-2:]] == [("semi-seq", sgd), ("semi-gpm", free_bn)]


def test_the_library_holds_the_values_the_committed_record_chose():
    """The library's tuned values (each method's, read by :mod:`benchmarks._methods`) are the
    chosen points of the committed record (:data:`bt.RECORD`, which no code reads), the record
    is the grid rule applied to the stored rows, every tuned method has a grid and a why line,
    and every value is an option its strategy accepts."""
    chosen = json.loads(bt.RECORD.read_text())
    tuned = {m: t for m in _methods.names() if (t := _methods.tuned(m))}
    assert {bt.PRESET: tuned} == chosen
    summary = json.loads((bt.OUT / "summary.json").read_text())
    assert {bt.PRESET: bt.choose(summary["rows"])} == chosen  # the rule on the stored rows
    assert list(bt.GRIDS) == list(bt.WHY) == list(tuned)
    preset = resolve_preset(bt.PRESET, source="synthetic")
    for method, options in tuned.items():
        check_method(method, preset, options)
        assert options in bt.GRIDS[method]  # the chosen value is a point of its grid
    assert _methods.tuned("semi-er") == {}  # untuned: class defaults


def test_a_grid_point_at_the_defaults_is_found_in_its_normalized_record():
    # a run records a grid point less its options at the method's defaults: the tuned point
    # of semi-gpm is no override at all, one that differs only in lr keeps lr alone
    tuned = _methods.tuned("semi-gpm")
    other = {**tuned, "lr": 0.1}
    recs = [_record("semi-gpm", tuned, [0.5] * 4), _record("semi-gpm", other, [0.6] * 4)]
    assert [r.strategy_overrides for r in recs] == [{}, {"lr": 0.1}]
    assert bt._find(recs, "semi-gpm", tuned, 1, 0) is recs[0]
    assert bt._find(recs, "semi-gpm", other, 1, 0) is recs[1]
    assert bt._find(recs, "semi-gpm", {**tuned, "lr": 0.2}, 1, 0) is None


def test_a_flat_grid_keeps_the_class_default():
    g = bt.GRIDS["semi-agem"]
    recs = [
        _record("semi-agem", g[0], [0.5, 0.6, 0.7, 0.8]),
        _record("semi-agem", g[1], [0.52, 0.58, 0.72, 0.79]),  # best mean, but Δ not resolved
        _record("semi-agem", g[2], [0.3, 0.3, 0.3, 0.3]),
    ]
    rows = bt.rows_for(recs, shot=1, seed=0)
    best = max(rows, key=lambda r: r["val_accuracy"])
    assert json.loads(best["options"]) == g[1] and best["delta_vs_default"] > 0
    assert best["delta_vs_default"] - best["ci_vs_default"] < 0
    assert bt.choose(rows) == {"semi-agem": g[0]}
