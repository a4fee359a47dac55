"""Run folders: deterministic result.json + run.json, version checks, and the run lock."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from avalanche_sets.cli import main
from avalanche_sets.experiment import run_experiment
from avalanche_sets.presets import resolve_preset
from avalanche_sets.reporting import find_results
from avalanche_sets.run_folder import (
    RESULT_FORMAT,
    ResultsVersionError,
    RunLock,
    RunLockedError,
    read_record,
    write_record,
)

RESULT = {"method": "order", "seed": 0, "preset": {"n_shot": 1}, "result": {"mean_accuracy": 0.5}}


def test_write_then_read_merges_provenance(tmp_path):
    write_record(tmp_path, RESULT, {"seconds": 12.5, "date": "2026-11-22"})
    body = json.loads((tmp_path / "result.json").read_text())
    assert body["format"] == RESULT_FORMAT and "seconds" not in body  # results only
    rec = read_record(tmp_path)
    assert rec["seconds"] == 12.5 and rec["result"]["mean_accuracy"] == 0.5
    assert not list(tmp_path.glob("*.tmp"))


def test_format_1_folders_are_still_read(tmp_path):
    legacy = {**RESULT, "seconds": 3.0, "machine": {"cores": 2}}  # no "format" key
    (tmp_path / "result.json").write_text(json.dumps(legacy))
    assert read_record(tmp_path)["seconds"] == 3.0


def test_another_versions_folder_is_refused_by_name(tmp_path, capsys):
    run = tmp_path / "runs" / "order" / "x-seed0"
    run.mkdir(parents=True)
    (run / "result.json").write_text(json.dumps({**RESULT, "format": 7, "avalanche_sets": "9.0"}))
    with pytest.raises(ResultsVersionError, match=rf"{run} was written by another version.*"
                       r"format 7, by avalanche-sets 9.0.*reads formats \[1, 2\]"):  # fmt: skip
        read_record(run)
    with pytest.raises(ResultsVersionError):
        find_results([tmp_path])
    assert main(["table", str(tmp_path)]) == 2
    assert "written by another version" in capsys.readouterr().err


def test_damaged_result_json_is_named(tmp_path):
    (tmp_path / "result.json").write_text('{"method": "ord')
    with pytest.raises(ValueError, match=f"{tmp_path / 'result.json'} is not valid JSON"):
        read_record(tmp_path)


def test_run_experiment_refuses_a_newer_folder_instead_of_rerunning(tmp_path):
    preset = resolve_preset("quick")
    from avalanche_sets.experiment import run_dir_name

    run = tmp_path / run_dir_name("protonet", preset, 0)
    run.mkdir(parents=True)
    (run / "result.json").write_text(json.dumps({**RESULT, "format": 3}))
    with pytest.raises(ResultsVersionError):
        run_experiment("protonet", preset, seed=0, out_root=tmp_path, loggers=())


def test_lock_excludes_a_second_holder_and_dies_with_its_process(tmp_path):
    with RunLock(tmp_path):
        with pytest.raises(RunLockedError, match="being run by another process"):
            RunLock(tmp_path).acquire()
    RunLock(tmp_path).acquire().release()  # free again after release

    # Held by another process, then that process is SIGKILLed: no stale lock remains.
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from avalanche_sets.run_folder import RunLock; "
         f"RunLock({str(tmp_path)!r}).acquire(); print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()},
    )  # fmt: skip
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(RunLockedError):
        RunLock(tmp_path).acquire()
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    deadline = time.monotonic() + 10
    while True:
        try:
            RunLock(tmp_path).acquire().release()
            break
        except RunLockedError:
            assert time.monotonic() < deadline
            time.sleep(0.05)
