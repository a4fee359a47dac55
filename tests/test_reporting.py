import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from avalanche_sets.runs.record import Provenance, RunRecord
from avalanche_sets.runs.report import aggregate_results, paired_difference, seed_ci95, write_table


def record(method, seed, episode_acc, n_shot=1):
    acc = np.asarray(episode_acc, dtype=float)
    return RunRecord(
        method=method, seed=seed, provenance=Provenance(seconds=1.0),
        preset={"n_shot": n_shot, "precision": "fp32"},
        code={"version": "0.1.0", "commit": "0" * 40, "dirty": False},
        result={
            "episode_acc": acc.tolist(), "mean_accuracy": float(acc.mean()),
            "mean_ci95": float(1.96 * acc.std(ddof=1) / math.sqrt(acc.size)),
            "forgetting": [None], "final": [float(acc.mean())], "domains": ["d"],
            "matrix": [[float(acc.mean())]],
        },
    )  # fmt: skip


def test_paired_difference_removes_shared_variance():
    rng = np.random.default_rng(0)
    shared = rng.uniform(0.2, 0.95, 400)  # episode difficulty both methods share
    a = record("a", 0, np.clip(shared + 0.02 + rng.normal(0, 0.02, 400), 0, 1))
    b = record("b", 0, shared)
    d, ci = paired_difference(a, b)
    assert d == pytest.approx(np.mean(np.asarray(a.result["episode_acc"]) - shared))
    assert 0 < ci < 0.01 < a.result["mean_ci95"]  # far tighter than the unpaired CI
    assert d - ci > 0  # the +2-point difference is resolved
    with pytest.raises(ValueError, match="same seed"):
        paired_difference(a, record("b", 1, shared))


def test_seed_ci_is_student_t_and_aggregation_groups():
    vals = [0.5, 0.6, 0.55]
    expected = stats.t.ppf(0.975, 2) * np.std(vals, ddof=1) / math.sqrt(3)
    assert seed_ci95(vals) == pytest.approx(expected)
    assert math.isnan(seed_ci95([0.5]))
    recs = [record("m", s, [v, v]) for s, v in enumerate(vals)] + [record("n", 0, [0.1, 0.3])]
    rows = {r["method"]: r for r in aggregate_results(recs, by=["method"])}
    assert rows["m"]["seeds"] == 3 and rows["m"]["ci_over"] == "seeds"
    assert rows["m"]["accuracy"] == pytest.approx(0.55)
    assert rows["n"]["ci_over"] == "episodes"


def test_a_one_domain_run_has_no_forgetting_and_says_so(tmp_path):
    # Joint training is one domain: forgetting and BWT are undefined, not 0
    rows = aggregate_results([record("joint", 0, [0.4, 0.6])], by=["method"])
    assert math.isnan(rows[0]["forgetting"]) and math.isnan(rows[0]["bwt"])
    line = next(x for x in write_table(rows, tmp_path / "t").splitlines() if "| joint |" in x)
    assert line.split("|")[3:5] == [" n/a ", " n/a "]


def test_a_record_without_matrix_is_named():
    rec = record("m", 0, [0.4, 0.6])
    del rec.result["matrix"]
    rec = dataclasses.replace(rec, folder=Path("runs/m/seed0"))
    with pytest.raises(ValueError, match="runs/m/seed0 has no accuracy matrix"):
        aggregate_results([rec])
