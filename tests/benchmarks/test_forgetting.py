"""benchmarks/forgetting.py reads the right run folders and reports the single definitions."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from avalanche_sets.runs.record import RunRecord, write_record
from benchmarks import forgetting

DOMAINS = ["a_one", "b_two", "c_three"]
SUFFIX = "-tasks_per_domain1400-bf16"


def _write(runs: Path, method: str, seed: int, matrix, suffix: str = SUFFIX) -> None:
    folder = runs / method / f"packs-o1-5w5s-R50-seed{seed}{suffix}"
    folder.mkdir(parents=True)
    record = RunRecord(method=method, seed=seed, preset={"n_shot": 5}, code={},
                       result={"domains": DOMAINS, "matrix": matrix})  # fmt: skip
    write_record(folder, record)


def test_summary_over_seeds_uses_forgetting_bwt_and_a_t_interval(tmp_path):
    # seed 0: domain a falls 0.8 -> 0.5 (forgetting 30 pts), b stays; seed 1: a falls 0.6 -> 0.5
    _write(tmp_path, "semi-seq", 0, [[0.8, 0.1, 0.1], [0.7, 0.9, 0.1], [0.5, 0.9, 0.7]])
    _write(tmp_path, "semi-seq", 1, [[0.6, 0.1, 0.1], [0.6, 0.8, 0.1], [0.5, 0.7, 0.7]])
    # another regime (a setting between the seed and the suffix) and the cpu run: not read
    _write(tmp_path, "semi-seq", 2, [[0.0] * 3] * 3, suffix="-mem_size50" + SUFFIX)
    _write(tmp_path, "semi-seq", 3, [[0.0] * 3] * 3, suffix="")
    records = forgetting.find_runs(tmp_path, "semi-seq", 5, SUFFIX)
    assert [r.seed for r in records] == [0, 1]
    row = forgetting.summarise(records)
    # forgetting excludes the last domain: seed 0 (30 + 0) / 2 = 15, seed 1 (10 + 10) / 2 = 10
    assert row["forgetting_per_seed"] == pytest.approx([15.0, 10.0])
    # BWT: seed 0 ((50-80) + (90-90)) / 2 = -15, seed 1 ((50-60) + (70-80)) / 2 = -10
    assert row["bwt_per_seed"] == pytest.approx([-15.0, -10.0])
    assert row["accuracy_per_seed"] == pytest.approx([70.0, 190 / 3])
    assert row["forgetting"] == pytest.approx(12.5)
    # Student-t with 1 degree of freedom: 12.706 * sd / sqrt(2)
    assert row["forgetting_ci95"] == pytest.approx(
        12.706 * np.std([15, 10], ddof=1) / 2**0.5, rel=1e-3
    )


def test_joint_over_several_seeds_has_no_forgetting_and_its_accuracy_still_averages(tmp_path):
    # Joint's matrix has one row: forgetting and BWT are undefined on every seed (this crashed
    # the report once a second Joint seed finished)
    _write(tmp_path, "joint", 0, [[0.7, 0.8, 0.9]])
    _write(tmp_path, "joint", 1, [[0.6, 0.8, 0.7]])
    row = forgetting.summarise(forgetting.find_runs(tmp_path, "joint", 5, SUFFIX))
    assert np.isnan(row["forgetting"]) and row["forgetting_ci95"] is None
    assert np.isnan(row["bwt"]) and row["bwt_ci95"] is None
    assert row["accuracy"] == pytest.approx(75.0)
    assert row["accuracy_ci95"] == pytest.approx(
        12.706 * np.std([80, 70], ddof=1) / 2**0.5, rel=1e-3
    )
    line = forgetting.markdown_rows([{**row, "method": "joint", "n_shot": 5}])
    assert line.startswith("| joint | 5 | [0, 1] | 75.00 ± ") and "| n/a | n/a |" in line


def test_report_lists_missing_methods_and_draws_the_pictures(tmp_path, monkeypatch):
    runs, out = tmp_path / "runs", tmp_path / "out"
    _write(runs, "semi-seq", 0, [[0.8, 0.1, 0.1], [0.7, 0.9, 0.1], [0.5, 0.9, 0.7]])
    _write(runs, "joint", 0, [[0.7, 0.8, 0.9]])  # one row: nothing to forget
    argv = ["forgetting.py", "--runs", str(runs), "--out", str(out), "--shots", "5",
            "--methods", "semi-seq", "joint", "order"]  # fmt: skip
    monkeypatch.setattr(sys, "argv", argv)
    forgetting.main()
    md = (out / "README.md").read_text()
    assert "| semi-seq | 5 | [0] | 70.00 (1 seed) | 15.00 (1 seed) | -15.00 (1 seed) |" in md
    assert "| joint | 5 | [0] | 80.00 (1 seed) | n/a | n/a |" in md
    assert "Not run (yet): order 5-shot." in md
    assert (out / "stream_5shot.png").is_file() and (out / "heatmaps_5shot.png").is_file()
    assert json.loads((out / "results.json").read_text())["missing"] == ["order 5-shot"]


def test_joint_is_checked_as_the_upper_bound_seed_by_seed():
    def row(method, seeds, acc):
        return {"method": method, "n_shot": 5, "seeds": seeds, "accuracy_per_seed": acc}

    table = [row("semi-seq", [0, 1, 2], [60.0, 62.0, 61.0]), row("joint", [0, 1], [65.0, 61.5]),
             row("joint-matched", [0, 1, 2], [66.0, 63.0, 61.0]), row("order", [0], [70.0])]  # fmt: skip
    got = {r["method"]: r for r in forgetting.upper_bound_rows(table)}
    assert set(got) == {"joint", "joint-matched"}  # only Joint variants are checked
    assert got["joint"]["seeds"] == [0, 1]  # the seeds both have
    assert got["joint"]["delta_per_seed"] == pytest.approx([5.0, -0.5])
    assert not got["joint"]["holds"]  # below on seed 1
    assert got["joint-matched"]["holds"]  # equal counts as ≥
    md = forgetting.upper_bound_md(list(got.values()))
    assert "joint 5-shot − semi-seq, per seed [0, 1]: +5.00, -0.50 points: **not**" in md


def test_other_baselines_get_their_own_stream_plot_with_the_references_beside_them():
    rows = {m: {"method": m} for m in ["semi-seq", "order", "joint", "semi-der", "tpn"]}
    groups = forgetting.stream_groups(rows)
    assert list(groups[""]) == ["semi-seq", "order", "joint"]  # no other baseline in the main plot
    assert list(groups["_others"]) == ["semi-seq", "order", "semi-der", "tpn"]
    # only main rows: one plot; only other baselines: their plot alone (no empty main plot)
    assert list(forgetting.stream_groups({"order": {}})) == [""]
    assert list(forgetting.stream_groups({"lst": {}})) == ["_others"]
    # every method of the default list is in exactly one group
    assert set(forgetting.MAIN_METHODS).isdisjoint(forgetting.OTHER_METHODS)


def test_report_draws_the_other_baselines_plot_and_links_it(tmp_path, monkeypatch):
    runs, out = tmp_path / "runs", tmp_path / "out"
    _write(runs, "semi-seq", 0, [[0.8, 0.1, 0.1], [0.7, 0.9, 0.1], [0.5, 0.9, 0.7]])
    _write(runs, "semi-der", 0, [[0.8, 0.1, 0.1], [0.8, 0.9, 0.1], [0.8, 0.9, 0.7]])
    argv = ["forgetting.py", "--runs", str(runs), "--out", str(out), "--shots", "5",
            "--methods", "semi-seq", "semi-der"]  # fmt: skip
    monkeypatch.setattr(sys, "argv", argv)
    forgetting.main()
    md = (out / "README.md").read_text()
    assert (out / "stream_5shot_others.png").is_file()
    assert "![5-shot stream, other baselines](stream_5shot_others.png)" in md
    assert "| semi-der | 5 | [0] | 80.00 (1 seed) | 0.00 (1 seed) | 0.00 (1 seed) |" in md
