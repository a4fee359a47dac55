"""Runs survive SIGKILL, give identical files for identical seeds, and sweeps share folders.

Every test drives the real command line in subprocesses, as a user (or a cluster scheduler)
would: ``python -m avalanche_sets run ...`` killed with SIGKILL at a random point and started
again with the same command; two sweeps started at the same time on one results folder.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from avalanche_sets.runs.record import read_record

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = [
    "--preset", "quick", "--set", "image_size=16", "--set", "n_blocks=2", "--set", "width=4",
    "--set", "n_way=3", "--set", "n_query=2", "--set", "n_unlabeled=2", "--set", "n_ood=3",
    "--set", "tasks_per_domain=120", "--set", "n_test_episodes=6",
    "--set", "domains=['shapes','strokes']", "--set", "ood=['rings']",
    "--set", "eval_mb_size=6", "--set", "mem_size=6", "--set", "threads=1",
]  # fmt: skip
RUN_FILES = ("result.json", "table.md", "accuracy_matrix.png")


def _without(args: list[str], *items: str) -> list[str]:
    """``args`` without the ``--set ITEM`` of each item."""
    out: list[str] = []
    for a in args:
        if a in items and out[-1:] == ["--set"]:
            out.pop()
        elif a not in items:
            out.append(a)
    return out


def _cmd(out: Path, seed: int, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "avalanche_sets", "run", "--method", "order", "--seeds", str(seed),
        "--out", str(out), "--loggers", "--checkpoint-every", "3", *SETTINGS, *extra,
    ]  # fmt: skip


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "default"}


def _run(out: Path, seed: int = 0) -> subprocess.CompletedProcess:
    proc = subprocess.run(_cmd(out, seed), env=_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _folder(out: Path, seed: int = 0) -> Path:
    (folder,) = [
        p.parent for p in out.rglob("result.json") if f"-seed{seed}-" in f"{p.parent.name}-"
    ]
    return folder


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("reference")
    _run(out)
    return _folder(out)


def test_same_seed_same_files_different_seed_differs(reference, tmp_path):
    _run(tmp_path / "again")
    again = _folder(tmp_path / "again")
    for name in RUN_FILES:
        assert (again / name).read_bytes() == (reference / name).read_bytes(), name
    # the provenance differs by nature (date, wall time) and lives apart from the results
    assert (again / "run.json").is_file()
    _run(tmp_path / "other", seed=1)
    other = _folder(tmp_path / "other", seed=1)
    assert (other / "result.json").read_bytes() != (reference / "result.json").read_bytes()
    assert read_record(other).result["episode_acc"] != read_record(reference).result["episode_acc"]


def _kill_at_random_point(out: Path, rng: random.Random) -> None:
    """Start the run, wait for its first checkpoint, SIGKILL it a random moment later."""
    proc = subprocess.Popen(_cmd(out, 0), env=_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + 300
    while not list(out.rglob("checkpoint.pt")):
        assert proc.poll() is None, "the run ended before its first checkpoint"
        assert time.monotonic() < deadline
        time.sleep(0.02)
    time.sleep(rng.uniform(0.0, 0.6))
    assert proc.poll() is None, "the run finished before it could be killed: make it longer"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not list(out.rglob("result.json"))


def test_sigkill_and_rerun_resumes_with_identical_results(reference, tmp_path):
    seed = random.randrange(10**6)  # a different kill point every time (printed on failure)
    out = tmp_path / f"killed-rng{seed}"
    _kill_at_random_point(out, random.Random(seed))
    again = _run(out)
    assert "resuming" in again.stderr  # it continued from a checkpoint, not from scratch
    folder = _folder(out)
    for name in RUN_FILES:
        assert (folder / name).read_bytes() == (reference / name).read_bytes(), name
    rec = read_record(folder)
    (resume,) = rec.provenance.resumes
    assert resume["skipped_damaged"] == []
    assert not list(folder.glob("checkpoint.pt*")) and not list(folder.glob("*.tmp"))


def test_corrupt_checkpoint_is_reported_and_the_previous_one_used(reference, tmp_path):
    out = tmp_path / "corrupt"
    _kill_at_random_point(out, random.Random(7))
    # the newest checkpoint: killed between its two renames, only <name>.prev is there
    (ckpt,) = list(out.rglob("checkpoint.pt")) or list(out.rglob("checkpoint.pt.prev"))
    data = ckpt.read_bytes()
    ckpt.write_bytes(data[: len(data) // 3])  # truncated, as by a full disk
    again = _run(out)
    assert f"checkpoint {ckpt} is corrupt" in again.stderr
    folder = _folder(out)
    rec = read_record(folder)
    resumes = rec.provenance.resumes
    if resumes:  # a previous good checkpoint existed: it was used, and said so
        assert resumes[0]["from"].endswith("checkpoint.pt.prev")
        assert resumes[0]["skipped_damaged"]
    else:  # killed before a second checkpoint: the run said it starts over
        assert "starts over" in again.stderr
    assert (folder / "result.json").read_bytes() == (reference / "result.json").read_bytes()


def test_two_sweeps_on_one_folder_run_each_run_once(tmp_path):
    out = tmp_path / "shared"
    cmd = [
        sys.executable, "-m", "avalanche_sets", "sweep", "--methods", "protonet", "mskm",
        "--seeds", "0", "1", "--out", str(out),
        *_without(SETTINGS, "mem_size=6", "tasks_per_domain=120"),
        "--set", "tasks_per_domain=20",
    ]  # fmt: skip
    procs = [
        subprocess.Popen(cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=600) for p in procs]
    for p, (_, stderr) in zip(procs, outputs):
        assert p.returncode == 0, stderr[-3000:]
    lines = [ln for stdout, _ in outputs for ln in stdout.splitlines() if " seed " in ln]
    ran = [re.match(r"(\S+)\s+seed (\d+):", ln).groups() for ln in lines if ln.endswith(", ran)")]
    assert len(lines) == 8  # each sweep reports all 4 runs
    assert sorted(ran) == sorted((m, s) for m in ("protonet", "mskm") for s in "01"), (
        lines
    )  # every run ran exactly once, in one of the two sweeps
    folders = sorted(p.parent for p in out.rglob("result.json"))
    assert len(folders) == 4
    for folder in folders:
        rec = read_record(folder)  # valid JSON, complete
        assert rec.result["matrix"] and rec.provenance.resumes == ()
        assert not list(folder.glob("*.tmp")) and not list(folder.glob("checkpoint.pt*"))
        assert not (folder / ".lock").exists()  # removed once the run is finished
