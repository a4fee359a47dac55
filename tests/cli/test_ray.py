"""`avalanche-sets sweep --ray-address local`: runs as Ray tasks on a local cluster, resumable."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from avalanche_sets.runs.record import read_record

pytest.importorskip("ray", reason="ray is not installed: pip install 'avalanche-sets[ray]'")

ROOT = Path(__file__).resolve().parents[2]
TINY = [
    "--set", "tasks_per_domain=4", "--set", "n_test_episodes=2",
    "--set", "n_query=2", "--set", "n_unlabeled=2", "--set", "n_ood=4", "--set", "width=4",
    "--set", "domains=['shapes','strokes']", "--set", "eval_mb_size=2",
]  # fmt: skip


def _sweep(out: Path, cwd: Path) -> subprocess.CompletedProcess:
    # A subprocess: the command a user types, with Ray's start-up and shutdown in it. The
    # timeout is generous: starting a Ray cluster on a loaded 2-core machine takes a while.
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [sys.executable, "-m", "avalanche_sets", "sweep", "--methods", "protonet",
         "--seeds", "0", "1", "--out", str(out), "--ray-address", "local", *TINY],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="two Ray workers at once need 2 CPUs")
def test_sweep_on_a_local_ray_cluster_runs_each_run_once_on_separate_workers(tmp_path):
    first = _sweep(Path("runs"), tmp_path)  # a relative --out: workers get it resolved
    assert first.returncode == 0, first.stderr[-4000:]
    folders = sorted(p.parent for p in (tmp_path / "runs").rglob("result.json"))
    assert [f.name.split("-seed")[1][0] for f in folders] == ["0", "1"]
    records = [read_record(f) for f in folders]
    # Each run was a Ray task in a worker process (not this test's process), and the two runs
    # (one CPU each on a 2-CPU cluster) ran side by side in two different workers.
    pids = {r.provenance.pid for r in records}
    assert len(pids) == 2 and os.getpid() not in pids
    assert {r.provenance.host for r in records} == {os.uname().nodename}
    assert all(r.preset["threads"] == 1 for r in records)
    assert first.stdout.count(", ran)") == 2 and "finished before" not in first.stdout

    # Resume: with seed 1's run gone, the same command runs seed 1 again and only seed 1.
    stamp = (folders[0] / "result.json").stat().st_mtime_ns
    shutil.rmtree(folders[1])
    again = _sweep(Path("runs"), tmp_path)
    assert again.returncode == 0, again.stderr[-4000:]
    assert "seed 0:" in again.stdout and ", finished before)" in again.stdout
    assert again.stdout.count(", ran)") == 1
    assert (folders[0] / "result.json").stat().st_mtime_ns == stamp
    assert read_record(folders[0]).provenance.pid == records[0].provenance.pid
    assert read_record(folders[1]).result == records[1].result  # same seed, same numbers


@pytest.mark.slow
def test_a_method_of_ones_own_runs_as_ray_tasks(tmp_path):
    """``--method module:Class`` from the folder that holds the module: the workers import
    it as the driver does."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-m", "avalanche_sets", "sweep", "--methods",
         "custom_method:MSKMSpread", "--seeds", "0", "1", "--out", str(tmp_path),
         "--ray-address", "local", *TINY],
        cwd=ROOT / "examples", env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    records = [read_record(p.parent) for p in tmp_path.rglob("result.json")]
    assert sorted(r.seed for r in records) == [0, 1]
    assert {r.method for r in records} == {"custom_method:MSKMSpread"}
    assert os.getpid() not in {r.provenance.pid for r in records}  # run by Ray workers
