"""One accuracy matrix, every place that reports its forgetting and BWT: all the same number.

The matrix (eighths, four domains) has a last domain whose rows before its own training are
far below its final accuracy, so the old definition (which counted the last domain from those
rows) reported an average forgetting of 1/32 instead of 5/24. The places checked:

* ``result.json`` and ``table.md`` written by ``run_experiment`` (the runner's ``RunResult``);
* a format-2 ``result.json`` holding the old stored forgetting: refused by ``read_record``,
  never read with its stale number;
* the reporting tables (``aggregate_results`` / ``write_table``: markdown and CSV);
* the benchmark aggregation (``python -m benchmarks.reproduce --aggregate-only``: its table,
  ``summary.json`` and the run's refreshed ``table.md``);
* the ``AccuracyMatrix`` Avalanche metric fed the same accuracies through its callbacks.
"""

from __future__ import annotations

import csv
import json
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import avalanche_sets.training as training
from avalanche_sets.metrics import AccuracyMatrix
from avalanche_sets.presets import RunConfig, resolve_preset
from avalanche_sets.runs.experiment import run_experiment
from avalanche_sets.runs.folder import run_dir_name
from avalanche_sets.runs.record import ResultsVersionError, read_record
from avalanche_sets.runs.report import aggregate_results, find_results, write_table
from avalanche_sets.training.runner import RunResult

EIGHTHS = [
    [5, 7, 1, 2],
    [6, 6, 2, 2],
    [4, 5, 7, 2],
    [3, 5, 6, 7],
]
MATRIX = [[v / 8 for v in row] for row in EIGHTHS]
DOMAINS = ["d0", "d1", "d2", "d3"]
# By hand (see tests/metrics/test_stats.py): per-domain forgetting 3/8, 1/8, 1/8, none for d3.
FORGETTING = [3 / 8, 1 / 8, 1 / 8, None]
AVG_FORGETTING = 5 / 24  # 20.83 points
BWT = -1 / 6  # −16.67 points
OLD_AVG_FORGETTING = 1 / 32  # what the tables reported before: d3 counted as 2/8 − 7/8
EPISODES = [0.5, 0.75, 0.875, 0.625] * 5  # the final test episodes (not used for forgetting)


def _result() -> RunResult:
    ci = [[0.01] * 4 for _ in MATRIX]
    return RunResult(domains=DOMAINS, matrix=MATRIX, ci95=ci, episode_acc=EPISODES)


def _table_md_numbers(text: str) -> tuple[list[str], float, float]:
    """(per-domain forgetting cells, mean forgetting, BWT) of a run's ``table.md``, in points."""
    rows = [line.split("|")[1:-1] for line in text.splitlines() if re.match(r"\| d\d ", line)]
    mean = re.search(r"\| \*\*mean\*\* \|[^|]*\| ([^|]+) \|", text).group(1)
    bwt = re.search(r"Backward transfer \(BWT, pts\): ([^.]+\.\d+)", text).group(1)
    return [r[2].strip() for r in rows], float(mean), float(bwt)


def _pts(v: float) -> float:
    return round(100 * v, 2)


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory) -> tuple[Path, dict]:
    """One finished run of ``semi-seq`` whose runner returns the hand matrix (no training)."""
    root = tmp_path_factory.mktemp("consistency")
    # fp32: reproduce.py aggregates fp32 runs by default (a bf16 run lives in a "-bf16" folder)
    preset = resolve_preset("quick", n_shot=1, precision="fp32")
    mp = pytest.MonkeyPatch()
    mp.setattr(training, "run_sets", lambda strategy, bench, **kw: _result())
    try:
        rec = run_experiment("semi-seq", preset, seed=0, out_root=root / "runs", loggers=())
    finally:
        mp.undo()
    return root, {"preset": preset, "record": rec}


def test_result_json_and_table_md_of_run_experiment(run_folder):
    root, got = run_folder
    folder = root / "runs" / run_dir_name("semi-seq", RunConfig.of(got["preset"]), 0)
    body = json.loads((folder / "result.json").read_text())
    assert body["format"] == 3
    res = body["result"]
    np.testing.assert_allclose(res["forgetting"][:3], FORGETTING[:3], atol=1e-15)
    assert res["forgetting"][3] is None  # the last domain has no forgetting
    assert res["average_forgetting"] == pytest.approx(AVG_FORGETTING, abs=1e-15)
    assert res["bwt"] == pytest.approx(BWT, abs=1e-15)
    cells, mean, bwt = _table_md_numbers((folder / "table.md").read_text())
    assert cells == ["37.50", "12.50", "12.50", "n/a"]
    assert (mean, bwt) == (_pts(AVG_FORGETTING), _pts(BWT))


def test_a_format_2_record_with_the_old_forgetting_is_refused_not_misread(tmp_path):
    old = _result().to_dict()
    m = np.asarray(MATRIX)
    old["forgetting"] = [float(m[:-1, j].max() - m[-1, j]) for j in range(4)]  # the old rule
    del old["average_forgetting"], old["bwt"]
    assert np.mean(old["forgetting"]) == pytest.approx(OLD_AVG_FORGETTING)
    (tmp_path / "result.json").write_text(json.dumps({"format": 2, "result": old}))
    with pytest.raises(
        ResultsVersionError,
        match="result format 2.*re-run it.*read it with the version that wrote it",
    ):
        read_record(tmp_path)


def test_reporting_tables(run_folder, tmp_path):
    root, _ = run_folder
    records = find_results([root / "runs"])
    # a stale stored value must not leak into the tables: they recompute from the matrix
    records[0].result["forgetting"] = [0.0, 0.0, 0.0, -0.625]
    (row,) = aggregate_results(records, by=("method",))
    assert row["forgetting"] == pytest.approx(AVG_FORGETTING)
    assert row["bwt"] == pytest.approx(BWT)
    md = write_table([row], tmp_path / "t")
    line = next(x for x in md.splitlines() if x.startswith("| semi-seq |"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[2:4] == [f"{_pts(AVG_FORGETTING):.2f}", f"{_pts(BWT):.2f}"]
    with open(tmp_path / "t.csv") as f:
        (csv_row,) = list(csv.DictReader(f))
    assert float(csv_row["forgetting"]) == pytest.approx(AVG_FORGETTING)
    assert float(csv_row["bwt"]) == pytest.approx(BWT)


def test_benchmark_aggregation(run_folder, monkeypatch):
    root, got = run_folder
    folder = root / "runs" / run_dir_name("semi-seq", RunConfig.of(got["preset"]), 0)
    (folder / "table.md").write_text("stale\n")  # reproduce.py rewrites it from result.json
    from benchmarks import reproduce

    argv = ["reproduce.py", "table3", "--preset", "quick",
            "--seeds", "0", "--shots", "1", "--methods", "semi-seq", "--aggregate-only",
            "--out", str(root / "table3")]  # fmt: skip
    monkeypatch.setattr(sys, "argv", argv)
    reproduce.main()
    summary = json.loads((root / "table3" / "summary.json").read_text())
    (row,) = summary["rows"]
    assert row["forgetting"] == pytest.approx(AVG_FORGETTING)
    assert row["bwt"] == pytest.approx(BWT)
    table = (root / "table3" / "table.md").read_text()
    assert f"| {_pts(AVG_FORGETTING):.2f} | {_pts(BWT):.2f} |" in table
    _, mean, bwt = _table_md_numbers((folder / "table.md").read_text())
    assert (mean, bwt) == (_pts(AVG_FORGETTING), _pts(BWT))


# ---------------------------------------------------------------------------- AccuracyMatrix
def _strategy(j: int, stream: str, training_phase: bool = False) -> SimpleNamespace:
    return SimpleNamespace(
        is_training=training_phase,
        clock=SimpleNamespace(train_iterations=0),
        experience=SimpleNamespace(
            current_experience=j, domain_name=DOMAINS[j], origin_stream=SimpleNamespace(name=stream)
        ),
    )


def _one_episode(correct: int) -> dict:
    """One episode of 8 queries with ``correct`` of them right."""
    y = torch.arange(8) % 2
    pred = y.clone()
    pred[correct:] = 1 - pred[correct:]
    return {"mb_x": [None], "mb_output": torch.nn.functional.one_hot(pred, 2).float(), "mb_y": y}


def test_accuracy_matrix_metric():
    metric = AccuracyMatrix()
    emitted = {}
    for i, row in enumerate(EIGHTHS):
        s = _strategy(i, "train", training_phase=True)
        metric.before_training_exp(s)
        metric.after_training_exp(s)
        metric.before_eval(_strategy(0, "test"))
        for j, correct in enumerate(row):
            s = _strategy(j, "test")
            metric.before_eval_exp(s)
            for k, v in _one_episode(correct).items():
                setattr(s, k, v)
            metric.after_eval_iteration(s)
            metric.after_eval_exp(s)
        emitted = {mv.name: mv.value for mv in metric.after_eval(s) or []}
    np.testing.assert_array_equal(metric.matrix, MATRIX)
    f = metric.forgetting()
    np.testing.assert_allclose(f[:3], FORGETTING[:3], atol=1e-15)
    assert np.isnan(f[3])
    assert metric.average_forgetting() == pytest.approx(AVG_FORGETTING)
    assert metric.backward_transfer() == pytest.approx(BWT)
    assert emitted["AccMatrix_Forgetting/eval_phase/test_stream"] == pytest.approx(AVG_FORGETTING)
    assert emitted["AccMatrix_BWT/eval_phase/test_stream"] == pytest.approx(BWT)
