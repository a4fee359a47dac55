"""Learning curves per domain: checkpoints, fixed evaluation episodes, plateau, resume, checks."""

import hashlib
import json

import numpy as np
import pytest

from avalanche_sets.presets import resolve_preset
from benchmarks import learning_curves as lc

TINY = dict(source="synthetic", image_size=16, n_query=2, n_unlabeled=2, n_ood=4, eval_mb_size=4)


def _base():
    return resolve_preset("cpu", **TINY)


def _run(spec, out, **kw):
    args = dict(base_preset=_base(), iters=5, every=2, val_episodes=4, out=out, log=lambda s: None)
    return lc.run_curve(spec, **{**args, **kw})


@pytest.fixture(scope="module")
def curves(tmp_path_factory):
    """Two methods and two seeds on one synthetic domain (5 iterations, evaluated at 0,2,4,5)."""
    out = tmp_path_factory.mktemp("curves")
    recs = {
        (m, s): _run(lc.CurveSpec(m, "shapes", 1, s), out)
        for m in ("protonet", "mskm")
        for s in (0, 1)
    }
    return out, recs


def _val_digest(eval_seed):
    """SHA-256 of the validation episodes, drawn here independently of the tool's evaluation."""
    from avalanche_sets.data.episodes import collate_episodes
    from avalanche_sets.runs.experiment import build_benchmark

    spec = lc.CurveSpec("protonet", "shapes", 1, 0)
    preset = lc.curve_preset(_base(), spec, iters=5, val_episodes=4)
    data = build_benchmark(preset, seed=eval_seed).valid_stream[0].dataset
    assert len(data) == preset["eval_mb_size"]  # one evaluation batch
    h = hashlib.sha256()
    lc._digest_batch(h, collate_episodes([data[i] for i in range(len(data))])[0])
    return h.hexdigest()


def test_eval_iterations():
    assert lc.eval_iterations(600, 50) == list(range(0, 601, 50))
    assert lc.eval_iterations(5, 2) == [0, 2, 4, 5]
    with pytest.raises(ValueError, match="every must be positive"):
        lc.eval_iterations(10, 0)


def test_curve_has_the_right_checkpoints(curves):
    _, recs = curves
    for rec in recs.values():
        assert rec["finished"]
        assert [p["iteration"] for p in rec["points"]] == [0, 2, 4, 5]
        for p in rec["points"]:
            assert p["n_episodes"] == 4 == len(p["episode_acc"])
            assert p["mean"] == pytest.approx(np.mean(p["episode_acc"]))
    # training moves the learner: not every point of a curve is the same
    assert any(len({tuple(p["episode_acc"]) for p in r["points"]}) > 1 for r in recs.values())


def test_evaluation_episodes_are_the_same_everywhere(curves):
    _, recs = curves
    digests = {p["episodes_sha256"] for r in recs.values() for p in r["points"]}
    assert len(digests) == 1  # every checkpoint, every method, every training seed
    assert digests == {_val_digest(0)}  # and they are the validation episodes of eval seed 0
    assert _val_digest(1) != _val_digest(0)  # the digest does tell episodes apart


def test_training_seed_changes_the_curve_not_the_episodes(curves):
    _, recs = curves
    a = [p["episode_acc"] for p in recs[("mskm", 0)]["points"]]
    b = [p["episode_acc"] for p in recs[("mskm", 1)]["points"]]
    assert a[0] != b[0] or a[-1] != b[-1]  # another initialisation, other training episodes


@pytest.mark.parametrize(
    ("acc", "tol", "expected"),
    [
        ([20, 30, 34, 33.5, 34.2], 1.0, 2),  # rises, then flat within 1 point
        ([20, 35, 10, 36.5, 36], 1.0, 3),  # dips, then recovers above the first peak
        ([30, 40, 39, 25, 41.5, 41], 1.0, 4),  # a deep dip: the plateau is after it
        ([10, 20, 30, 40], 1.0, 3),  # still rising: the last point
        ([50, 49.5, 49, 49.2], 1.0, 0),  # flat from the start
        ([20, 35, 10, 36.5, 36], 2.0, 1),  # a larger tolerance accepts the first peak
        ([20, 30, 30, 30], 0.0, 1),  # tolerance 0: the first time the best is reached
    ],
)
def test_plateau_index(acc, tol, expected):
    assert lc.plateau_index(acc, tol) == expected


def test_plateau_refuses_bad_input():
    with pytest.raises(ValueError, match="empty"):
        lc.plateau_index([], 1.0)
    with pytest.raises(ValueError, match="tolerance"):
        lc.plateau_index([1, 2], -1.0)


def test_aggregate_averages_seeds_per_episode_and_reports_the_plateau(curves):
    out, recs = curves
    agg = lc.aggregate(lc.load_curves(out), tolerance=1.0)
    c = agg[("mskm", "shapes", 1, "ood")]
    assert c["seeds"] == [0, 1] and c["iterations"] == [0, 2, 4, 5]
    want = np.mean([recs[("mskm", s)]["points"][-1]["episode_acc"] for s in (0, 1)], axis=0)
    assert c["episode_acc"][-1] == pytest.approx(want.tolist())
    assert c["mean"][-1] == pytest.approx(100 * want.mean())
    assert c["plateau_iteration"] == c["iterations"][lc.plateau_index(c["mean"], 1.0)]


def test_resume_continues_from_the_last_point_with_the_same_numbers(tmp_path):
    spec = lc.CurveSpec("mskm", "shapes", 1, 0)
    whole = _run(spec, tmp_path / "whole")

    class Killed(Exception):
        pass

    def die_at_2(line):
        if "it 2/5" in line:
            raise Killed

    with pytest.raises(Killed):
        _run(spec, tmp_path / "cut", log=die_at_2)
    saved = json.loads((tmp_path / "cut" / "curves" / f"{spec.name}.json").read_text())
    assert [p["iteration"] for p in saved["points"]] == [0, 2] and not saved["finished"]
    lines = []
    resumed = _run(spec, tmp_path / "cut", log=lines.append)
    assert lines[0] == f"{spec.name}: resuming at iteration 2"
    assert [line.split(" acc")[0] for line in lines[1:]] == [
        f"{spec.name}: it 4/5",
        f"{spec.name}: it 5/5",
    ]
    assert [p["episode_acc"] for p in resumed["points"]] == [
        p["episode_acc"] for p in whole["points"]
    ]
    assert not list((tmp_path / "cut" / "curves").glob("*.ckpt*"))  # cleaned up when finished


def test_finished_curve_is_skipped_and_other_settings_refused(tmp_path, monkeypatch):
    spec = lc.CurveSpec("protonet", "shapes", 1, 0)
    first = _run(spec, tmp_path)

    def no_training(*a, **k):
        raise AssertionError("a finished curve was trained again")

    monkeypatch.setattr(lc, "build_learner", no_training)
    lines = []
    assert _run(spec, tmp_path, log=lines.append) == first
    assert lines == [f"{spec.name}: finished before, skipped"]
    with pytest.raises(ValueError, match="other settings.*every"):
        _run(spec, tmp_path, every=1)


def test_clean_variant_has_no_distractors():
    spec = lc.CurveSpec("mskm", "shapes", 1, 0, "clean")
    preset = lc.curve_preset(_base(), spec, iters=5, val_episodes=4)
    train, val = lc.domain_experiences(preset, seed=0, eval_seed=0)
    for exp in (train, val):
        assert not bool(exp.dataset[0].oracle.unlabeled_is_ood.any())
    ood = lc.curve_preset(_base(), lc.CurveSpec("mskm", "shapes", 1, 0), iters=5, val_episodes=4)
    assert bool(lc.domain_experiences(ood, seed=0, eval_seed=0)[1].dataset[0].oracle
                .unlabeled_is_ood.any())  # fmt: skip
    with pytest.raises(ValueError, match="unknown variant"):
        lc.curve_preset(_base(), lc.CurveSpec("mskm", "shapes", 1, 0, "dirty"), iters=5,
                        val_episodes=4)  # fmt: skip


def test_soft_kmeans_is_the_plain_refinement_head():
    preset = lc.curve_preset(_base(), lc.CurveSpec("x", "shapes", 1, 0), iters=5, val_episodes=4)
    s = lc.build_learner("soft-kmeans", preset, seed=0)
    assert s.model.refine == "soft_kmeans"
    m = lc.build_learner("mskm", preset, seed=0)
    assert m.model.refine == "mskm"
    p = lc.build_learner("protonet", preset, seed=0)
    for a, b in zip(s.model.backbone.parameters(), p.model.backbone.parameters()):
        assert bool((a == b).all())  # the same initialisation as the other methods
    with pytest.raises(ValueError, match="did you mean 'mskm'"):
        lc.check_methods(["mskmm"], preset)


# --------------------------------------------------------------------------- checks table
def _curve(episode_acc, digest="d"):
    acc = [np.asarray(a, float) for a in episode_acc]
    means = [100 * a.mean() for a in acc]
    return {
        "iterations": list(range(len(acc))),
        "mean": means,
        "ci95": [0.0] * len(acc),
        "episode_acc": [a.tolist() for a in acc],
        "digest": digest,
        "plateau_index": lc.plateau_index(means, 1.0),
    }


def test_paired_delta_pairs_the_same_episodes():
    rng = np.random.default_rng(0)
    base = rng.uniform(0.2, 0.9, size=50)  # large spread between episodes
    a, b = _curve([base + 0.04]), _curve([base])
    delta, ci, n = lc.paired_delta(a, b)
    assert delta == pytest.approx(4.0) and ci == pytest.approx(0.0, abs=1e-9) and n == 50
    assert lc.verdict("greater", delta, ci) == "agree"  # unpaired, the CI would cover 0
    with pytest.raises(ValueError, match="same evaluation episodes"):
        lc.paired_delta(a, _curve([base], digest="other"))


def test_paired_delta_at_plateau_uses_each_curves_plateau_point():
    a = _curve([[0.2, 0.2], [0.6, 0.6], [0.6, 0.6]])  # plateau at index 1
    b = _curve([[0.1, 0.1], [0.1, 0.1], [0.5, 0.5]])  # plateau at index 2
    assert lc.paired_delta(a, b, at="plateau")[0] == pytest.approx(10.0)
    assert lc.paired_delta(a, b, at="final")[0] == pytest.approx(10.0)
    c = _curve([[0.2, 0.2], [0.9, 0.9], [0.3, 0.3]])  # plateau at index 1, final much lower
    assert lc.paired_delta(c, b, at="plateau")[0] == pytest.approx(40.0)
    assert lc.paired_delta(c, b, at="final")[0] == pytest.approx(-20.0)


@pytest.mark.parametrize(
    ("direction", "delta", "ci", "expected"),
    [
        ("greater", 3.0, 1.0, "agree"),
        ("greater", -3.0, 1.0, "contradict"),
        ("greater", 0.5, 1.0, "inconclusive"),
        ("greater", -0.5, 1.0, "inconclusive"),
        ("within", 1.0, 1.5, "agree"),
        ("within", -1.0, 1.5, "agree"),
        ("within", 6.0, 1.0, "contradict"),
        ("within", -6.0, 1.0, "contradict"),
        ("within", 2.5, 1.0, "inconclusive"),
    ],
)
def test_verdict(direction, delta, ci, expected):
    assert lc.verdict(direction, delta, ci, margin=3.0) == expected


def test_check_rows_direction_and_variants():
    rng = np.random.default_rng(1)
    base = rng.uniform(0.3, 0.7, size=40)
    curves = {
        ("protonet", "d", 5, "clean"): _curve([base]),
        ("mskm", "d", 5, "clean"): _curve([base + 0.05]),  # refinement helps: agree
        ("protonet", "d", 5, "ood"): _curve([base]),
        ("mskm", "d", 5, "ood"): _curve([base - 0.05]),  # hurt by distractors: contradict
        ("anil", "d", 5, "ood"): _curve([base + 0.01]),  # within 3 points: agree
        ("tpn", "d", 5, "ood"): _curve([base - 0.06]),  # TPN below ProtoNet: contradict
    }
    rows = lc.check_rows(curves, margin=3.0)
    got = {(r["check"].split(" (")[0], r["variant"]): (round(r["delta"], 6), r["verdict"])
           for r in rows}  # fmt: skip
    assert got == {
        ("masked refinement helps with clean U", "clean"): (5.0, "agree"),
        ("masked refinement helps with distractors", "ood"): (-5.0, "contradict"),
        ("TPN ≥ ProtoNet", "ood"): (-6.0, "contradict"),
        ("ANIL within a few points of ProtoNet", "ood"): (1.0, "agree"),
    }  # no soft-kmeans, LST or clean-U TPN/ANIL curve: those checks have no row
    curves[("anil", "d", 5, "ood")] = _curve([base + 0.01], digest="other episodes")
    (row,) = [r for r in lc.check_rows(curves) if r["check"].startswith("ANIL")]
    assert row["verdict"].startswith("not paired") and np.isnan(row["delta"])


def test_report_writes_tables_plots_and_checks(curves, tmp_path):
    out, _ = curves
    summary = lc.write_report(out, tolerance=1.0)
    assert (
        "within 1 point(s) of the best accuracy over the remaining curve"
        in (summary["plateau_definition"])
    )
    assert {(c["method"], c["seeds"] == [0, 1]) for c in summary["curves"]} == {
        ("mskm", True), ("protonet", True)
    }  # fmt: skip
    points = (out / "points.csv").read_text().splitlines()
    assert len(points) == 1 + 4 * 4  # header + 4 curves × 4 points
    md = (out / "README.md").read_text()
    assert "| mskm | shapes | 1 | ood |" in md and "plateau" in md
    assert (out / "curves_1shot.png").stat().st_size > 10_000
    checks = (out / "checks.md").read_text()
    assert "masked refinement helps with distractors (Ren et al. 2018) | shapes | 1 | ood" in checks
    assert "load_average" in json.loads((out / "summary.json").read_text())
