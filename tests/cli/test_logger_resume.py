"""Every file logger of a run killed with SIGKILL in the middle of a domain and started again
with the same command holds what an uninterrupted run's holds: the same keys, at the same steps,
with the same values (a resume on the CPU is exact), each once.

The run is the real command line, ``python -m avalanche_sets run ... --loggers csv tensorboard
wandb``, on a tiny synthetic stream (two domains of 20 iterations, 1 thread), with W&B offline.
W&B's history is read from the ``.wandb`` transaction log(s) the runs leave (no network).
W&B online is covered by tests/runs/test_wandb_resume.py, against a stand-in for the server.
"""

from __future__ import annotations

import csv
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "runs"))
from logger_records import csv_rows, history, tensorboard_scalars  # noqa: E402

pytestmark = pytest.mark.slow

ITERATIONS = 20  # per domain: 40 tasks, meta-batch 2
CMD = [
    "nice", sys.executable, "-m", "avalanche_sets", "run", "--method", "order", "--seeds", "0",
    "--loggers", "csv", "tensorboard", "wandb", "--checkpoint-every", "3", "--log-every", "2",
    "--preset", "quick", "--set", "image_size=16", "--set", "n_blocks=2", "--set", "width=4",
    "--set", "n_way=3", "--set", "n_query=2", "--set", "n_unlabeled=2", "--set", "n_ood=3",
    "--set", "tasks_per_domain=40", "--set", "n_test_episodes=4",
    "--set", "domains=['shapes','strokes']", "--set", "ood=['rings']",
    "--set", "eval_mb_size=6", "--set", "mem_size=6", "--set", "threads=1",
]  # fmt: skip
#: Wall time: the same key at the same step, another value. The training epoch's running means
#: (``Top1_Acc_Epoch``, ``Loss_Epoch``) are not among them: their state is in the checkpoint.
NOT_REPRODUCED = ("Time_Epoch", "_runtime", "_timestamp")


def _env(tmp: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    return {
        **env, "PYTHONPATH": str(ROOT), "WANDB_MODE": "offline", "WANDB_SILENT": "true",
        "WANDB_DISABLE_GIT": "true", "WANDB_CONFIG_DIR": str(tmp / "wandb-config"),
        "WANDB_CACHE_DIR": str(tmp / "wandb-cache"),
    }  # fmt: skip


def _run(out: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [*CMD, "--out", str(out)], env=_env(out.parent), capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _folder(out: Path) -> Path:
    (folder,) = {p.parent for p in out.rglob("log.txt")}
    return folder


def _killed_mid_domain(out: Path) -> None:
    """Starts the run and kills it (SIGKILL) once the second domain has logged loss terms past
    iteration 24: after a checkpoint, with values logged since."""
    proc = subprocess.Popen(
        [*CMD, "--out", str(out)], env=_env(out.parent), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 300
    try:
        while True:
            assert proc.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline
            terms = list(out.rglob("loss_terms.csv"))
            if terms and any(
                r["step"].isdigit() and int(r["step"]) >= ITERATIONS + 4
                for r in csv.DictReader(terms[0].read_text().splitlines())
            ):
                break
            time.sleep(0.02)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert not list(out.rglob("result.json"))


def _wandb(folder: Path) -> tuple[list[Path], dict[int, dict]]:
    """The run's offline-run folders and its W&B history, ``{step: row}`` (a step twice fails)."""
    runs = sorted((folder / "wandb").glob("offline-run-*"))
    rows: dict[int, dict] = {}
    for run in runs:
        for row in history(*run.glob("run-*.wandb")):
            assert row["_step"] not in rows, f"step {row['_step']} twice in W&B"
            rows[row["_step"]] = row
    return runs, rows


def _same(got: dict, want: dict, where: str) -> None:
    """Same keys; the same values, but for those :data:`NOT_REPRODUCED`."""
    assert sorted(got) == sorted(want), where
    for key, value in want.items():
        if not key.startswith(NOT_REPRODUCED):
            assert got[key] == value, f"{where}: {key}"


def test_a_run_killed_mid_domain_and_resumed_logs_what_an_uninterrupted_run_logs(tmp_path):
    _run(tmp_path / "uninterrupted" / "runs")
    want = _folder(tmp_path / "uninterrupted" / "runs")
    out = tmp_path / "killed" / "runs"
    _killed_mid_domain(out)
    folder = _folder(out)
    (killed_run,) = (folder / "wandb").glob("offline-run-*")
    run_id = killed_run.name.rsplit("-", 1)[1]

    again = _run(out)
    assert "resuming" in again.stderr
    log = (folder / "log.txt").read_text()
    (resume,) = re.findall(r"^resuming .* at domain (\d+), iteration (\d+)$", log, re.M)
    assert resume[0] == "2" and 0 < int(resume[1]) < ITERATIONS, "not killed mid-domain"
    assert "cover only the iterations after the resume" not in log  # the state was saved

    # W&B: one offline run, the killed process's id, every step once, with its values
    runs, rows = _wandb(folder)
    assert [r.name.rsplit("-", 1)[1] for r in runs] == [run_id], runs
    sync = subprocess.run(
        [sys.executable, "-m", "wandb", "sync", "--dry-run", *map(str, runs)],
        env=_env(tmp_path), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert "Would sync 1 run(s)" in sync.stdout + sync.stderr, sync.stdout + sync.stderr
    _, want_rows = _wandb(want)
    assert sorted(rows) == sorted(want_rows) == [*range(2, 2 * ITERATIONS + 1, 2)]
    for step, row in want_rows.items():
        _same(rows[step], row, f"W&B step {step}")

    # TensorBoard: each tag at the same steps, once, with the same values
    got_tb, want_tb = tensorboard_scalars(folder), tensorboard_scalars(want)
    assert sorted(got_tb) == sorted(want_tb)
    for tag, points in want_tb.items():
        assert [s for s, _ in got_tb[tag]] == [s for s, _ in points], tag
        if not tag.startswith(NOT_REPRODUCED):
            assert got_tb[tag] == points, tag

    # CSV: every row once, with the same values
    for name in ("training_results.csv", "eval_results.csv", "loss_terms.csv", "ood_split.csv"):
        got_csv, want_csv = csv_rows(folder, name), csv_rows(want, name)
        assert len(got_csv) == len(want_csv), name
        for i, (a, b) in enumerate(zip(got_csv, want_csv)):
            _same(a, b, f"{name} row {i}")
    # the resumed domain's training accuracy and loss (its epoch means) are compared above
    assert [r["training_accuracy"] for r in csv_rows(folder, "training_results.csv")]

    # log.txt: the training epoch means of both domains, as the uninterrupted run's
    epoch = re.compile(r"^\s*(?:Top1_Acc|Loss)_Epoch/\S+ = .*$", re.M)
    want_epoch = epoch.findall((want / "log.txt").read_text())
    assert len(want_epoch) == 4 and epoch.findall(log) == want_epoch

    # the run log says the run and its W&B run were resumed
    assert re.search(rf"^W&B run {run_id} \(offline\) continued: .*; removed ", log, re.M), log
