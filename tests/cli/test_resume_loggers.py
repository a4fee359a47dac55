"""A run killed after a checkpoint resumes only with the history loggers it started with.

The real command line in subprocesses: a tiny run started without loggers is killed (SIGKILL)
after its first checkpoint; started again with ``--loggers csv`` it is refused before training
(the checkpoint untouched, no ``csv/``, no resume in ``log.txt``), naming the loggers it started
with; started again with those, or with only a terminal logger changed, it resumes and finishes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from avalanche_sets.training.loggers import LOGGERS_FILE, check_resumed_loggers, record_loggers

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = [
    "--preset", "quick", "--set", "image_size=16", "--set", "n_blocks=2", "--set", "width=4",
    "--set", "n_way=3", "--set", "n_query=2", "--set", "n_unlabeled=2", "--set", "n_ood=3",
    "--set", "tasks_per_domain=120", "--set", "n_test_episodes=4",
    "--set", "domains=['shapes','strokes']", "--set", "ood=['rings']",
    "--set", "eval_mb_size=6", "--set", "mem_size=6", "--set", "threads=1",
]  # fmt: skip


def _cmd(out: Path, *loggers: str) -> list[str]:
    return [
        sys.executable, "-m", "avalanche_sets", "run", "--method", "order", "--seeds", "0",
        "--out", str(out), "--checkpoint-every", "3", *SETTINGS, "--loggers", *loggers,
    ]  # fmt: skip


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _killed_after_a_checkpoint(out: Path) -> Path:
    """Start the run without loggers, SIGKILL it once its first checkpoint is written."""
    proc = subprocess.Popen(_cmd(out), env=_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + 300
    try:
        while not list(out.rglob("checkpoint.pt")):
            assert proc.poll() is None, "the run ended before its first checkpoint"
            assert time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    (checkpoint,) = out.rglob("checkpoint.pt")
    assert not list(out.rglob("result.json"))
    return checkpoint.parent


@pytest.mark.slow
def test_a_history_logger_added_on_a_resume_is_refused_before_training(tmp_path):
    out = tmp_path / "runs"
    folder = _killed_after_a_checkpoint(out)
    checkpoint = (folder / "checkpoint.pt").read_bytes()

    added = subprocess.run(_cmd(out, "progress", "csv"), env=_env(), capture_output=True,
                           text=True, timeout=600)  # fmt: skip
    assert added.returncode == 2, added.stderr[-3000:]
    (line,) = [x for x in added.stderr.splitlines() if x.startswith("error: ")]
    assert "adds csv" in line and "it started with []" in line, line
    assert "fix: resume with the loggers it started with: --loggers " in line, line
    assert "--out or --tag" in line, line
    # refused before training: nothing resumed, written or opened
    assert "resuming" not in added.stderr
    assert "resuming" not in (folder / "log.txt").read_text()
    assert (folder / "checkpoint.pt").read_bytes() == checkpoint
    assert not (folder / "csv").exists()

    # the loggers it started with (a terminal logger may change): it resumes and finishes
    same = subprocess.run(_cmd(out, "progress"), env=_env(), capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert same.returncode == 0, same.stderr[-3000:]
    assert "resuming" in same.stderr
    assert (folder / "result.json").is_file()
    assert not (folder / LOGGERS_FILE).exists()  # removed with the checkpoints
    assert not (folder / "csv").exists()


def test_the_check_names_added_and_removed_history_loggers_only(tmp_path):
    record_loggers(tmp_path, ["progress", "csv", "tensorboard"])
    check_resumed_loggers(tmp_path, ["csv", "interactive", "tensorboard"])  # terminal only
    with pytest.raises(ValueError) as err:
        check_resumed_loggers(tmp_path, ["progress", "wandb", "csv"])
    text = str(err.value)
    assert "adds wandb; removes tensorboard" in text
    assert "--loggers progress csv tensorboard" in text
    check_resumed_loggers(tmp_path / "elsewhere", ["wandb"])  # no record: not checked
