"""The GPU benchmarks run unchanged on the CPU as smoke tests, and never file CPU figures as GPU
ones: a CPU run must name its own output folder and judges no GPU target."""

from __future__ import annotations

import json

import pytest

from benchmarks import gpu_step, paper_scale
from benchmarks._gpu import BUSY_COUNTS, BUSY_SHARE

TINY = ["--set", "image_size=16", "--set", "n_blocks=2", "--set", "width=4", "--set", "threads=1"]


def test_gpu_step_measures_every_configuration_on_the_cpu(tmp_path):
    gpu_step.main(
        ["--device", "cpu", "--out", str(tmp_path), "--methods", "mskm", "order",
         "--n-ood", "4", "--variants", "eager", "--data", "device", "host",
         "--iters", "2", "--warm", "2", "--round", "2", *TINY]
    )  # fmt: skip
    summary = json.loads((tmp_path / "gpu_step.json").read_text())
    rows = summary["rows"]
    assert {(r["method"], r["data"]) for r in rows} == {
        (m, d) for m in ("mskm", "order") for d in ("device", "host")
    }
    for r in rows:
        assert len(r["ms_all"]) == 2 and r["ms"] > 0  # the warm-up is not timed
        assert 0.0 <= r["data_wait"] < 1.0
        assert r["backbone_tflop"] > 0
        assert r["gpu_busy"] is None and r["peak_gib"] is None  # no GPU, no GPU figures
    order = [r for r in rows if r["method"] == "order"]
    for name in ("MIRegularizationPlugin.loss_term", "MIRegularizationPlugin.after_forward"):
        assert all(name in r["order_parts_ms"] for r in order)
    # the backbone's FLOPs count the images each method embeds: ORDER its 2 replayed tasks too
    images = {(r["method"], r["data"]): r["backbone_images_per_it"] for r in rows}
    assert images["order", "device"] == 2 * images["mskm", "device"]
    for r in rows:
        assert r["backbone_tflop"] == pytest.approx(
            r["backbone_images_per_it"] * r["flops_per_image"] / 1e12
        )
    assert {(r["R"], r["data"]) for r in summary["ratios"]} == {(4, "device"), (4, "host")}
    assert summary["gpu"] is None and summary["targets"] == []
    # the record says what its busy shares count (a record without it counted annotations too)
    assert summary["gpu_busy_counts"] == BUSY_COUNTS
    assert summary["gpu_busy_share"] == BUSY_SHARE
    md = (tmp_path / "README.md").read_text()
    assert "GPU: none" in md and "not judged" in md
    assert (tmp_path / "gpu_step.png").stat().st_size > 0


def test_a_cpu_run_without_its_own_folder_is_refused():
    for script in (gpu_step, paper_scale):
        with pytest.raises(SystemExit, match="Pass --out"):
            script.main(["--device", "cpu"])


def test_paper_scale_runs_each_method_through_the_run_folder_and_resumes(tmp_path):
    args = ["--device", "cpu", "--out", str(tmp_path), *TINY, "--set", "tasks_per_domain=4",
            "--set", "n_test_episodes=2", "--set", "n_val_episodes=2",
            "--set", "domains=['shapes','strokes']", "--set", "n_ood=4"]  # fmt: skip
    paper_scale.main(args)
    summary = json.loads((tmp_path / "paper_scale.json").read_text())
    assert [r["method"] for r in summary["rows"]] == ["order", "mskm"]
    assert all(r["status"] == "ran" and len(r["final"]) == 2 for r in summary["rows"])
    assert len(list((tmp_path / "runs").glob("*/*/result.json"))) == 2
    paper_scale.main(args)  # the finished runs are read, not repeated
    again = json.loads((tmp_path / "paper_scale.json").read_text())
    assert [r["status"] for r in again["rows"]] == ["finished before"] * 2
    assert [r["mean_accuracy"] for r in again["rows"]] == [
        r["mean_accuracy"] for r in summary["rows"]
    ]
    assert "not judged" in (tmp_path / "README.md").read_text()


def test_paper_scale_short_writes_each_iteration_and_evaluation_and_computes_the_whole_run(
    tmp_path,
):
    args = ["--device", "cpu", "--out", str(tmp_path), *TINY, "--short", "2",
            "--methods", "order", "--stem", "short", "--set", "n_test_episodes=2",
            "--set", "n_val_episodes=2", "--set", "domains=['shapes','strokes']",
            "--set", "n_ood=4"]  # fmt: skip
    paper_scale.main(args)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["short.json"]  # no run folder
    summary = json.loads((tmp_path / "short.json").read_text())
    rec = summary["methods"]["order"]
    assert summary["short_iterations_per_domain"] == 2
    assert summary["full_iterations_per_domain"] == 6000  # the paper preset's
    assert [len(d["iterations"]) for d in rec["domains"]] == [2, 2]
    assert [len(d["gaps"]) for d in rec["domains"]] == [1, 1]  # the data path between them
    assert [e["after_domain"] for e in rec["evaluations"]] == [1, 2]
    assert all(e["episodes"] == 2 * 2 for e in rec["evaluations"])  # every domain's test set
    assert rec["stage"] == "done" and rec["checkpoint_s"] > 0
    assert rec["whole_run"]["label"] == "computed" and rec["whole_run"]["complete"]
