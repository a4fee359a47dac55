"""Run folders: deterministic result.json + run.json, version checks, and the run lock."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from avalanche_sets.cli import main
from avalanche_sets.presets import resolve_preset
from avalanche_sets.runs.experiment import run_experiment
from avalanche_sets.runs.folder import RunLock, RunLockedError
from avalanche_sets.runs.record import (
    RESULT_FORMAT,
    Provenance,
    ResultsVersionError,
    RunRecord,
    read_record,
    write_record,
)
from avalanche_sets.runs.report import find_results

RESULT = {"method": "order", "seed": 0, "preset": {"n_shot": 1}, "result": {"mean_accuracy": 0.5},
          "code": {"version": "0.1.0", "commit": None}}  # fmt: skip


def test_write_then_read_keeps_the_provenance_apart(tmp_path):
    written = RunRecord(**RESULT, provenance=Provenance(seconds=12.5, date="2026-11-22"))
    write_record(tmp_path, written)
    body = json.loads((tmp_path / "result.json").read_text())
    assert body["format"] == RESULT_FORMAT and "seconds" not in body  # results only
    rec = read_record(tmp_path)
    assert rec == written and rec.folder == tmp_path
    assert rec.seconds == 12.5 and rec.result["mean_accuracy"] == 0.5
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize("fmt", [1, 2])
def test_a_record_older_than_the_format_is_refused_with_the_fix(tmp_path, fmt, capsys):
    """Format 1 (no "format" key, provenance inside) and format 2 are refused, naming the
    format found, the format read, and the two fixes: re-run it, or read it with the version
    that wrote it (no pointer to a script the installed package does not hold)."""
    run = tmp_path / "runs" / "order" / "x-seed0"
    run.mkdir(parents=True)
    old = {**RESULT, "seconds": 3.0} if fmt == 1 else {**RESULT, "format": 2}
    (run / "result.json").write_text(json.dumps(old))
    with pytest.raises(ResultsVersionError) as err:
        read_record(run)
    message = str(err.value)
    assert f"{run} holds a run record of result format {fmt} " in message
    assert f"older than the format {RESULT_FORMAT} this version" in message
    assert "re-run it" in message
    assert "read it with the version that wrote it" in message
    assert "git show" not in message and "migrate" not in message
    assert main(["table", str(tmp_path)]) == 2  # the table command says so, too
    assert "read it with the version that wrote it" in capsys.readouterr().err


def test_another_versions_folder_is_refused_by_name(tmp_path, capsys):
    run = tmp_path / "runs" / "order" / "x-seed0"
    run.mkdir(parents=True)
    (run / "result.json").write_text(json.dumps({**RESULT, "format": 7, "avalanche_sets": "9.0"}))
    with pytest.raises(ResultsVersionError, match=rf"{run} was written by another version.*"
                       r"format 7, by avalanche-sets 9.0.*reads format 3\."):  # fmt: skip
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
    from avalanche_sets.runs.folder import run_dir_name

    run = tmp_path / run_dir_name("protonet", preset, 0)
    run.mkdir(parents=True)
    (run / "result.json").write_text(json.dumps({**RESULT, "format": RESULT_FORMAT + 1}))
    with pytest.raises(ResultsVersionError):
        run_experiment("protonet", preset, seed=0, out_root=tmp_path, loggers=())


def test_lock_excludes_a_second_holder_and_dies_with_its_process(tmp_path):
    with RunLock(tmp_path):
        with pytest.raises(RunLockedError, match="being run by another process"):
            RunLock(tmp_path).acquire()
    RunLock(tmp_path).acquire().release()  # free again after release

    # Held by another process, then that process is SIGKILLed: no stale lock remains.
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from avalanche_sets.runs.folder import RunLock; "
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


# --- Run folder names: runs that compute different things never share a folder ---------------

TINY = dict(
    tasks_per_domain=4, n_test_episodes=2, n_query=2, n_unlabeled=2, n_ood=4,
    width=4, domains=["shapes", "strokes"], eval_mb_size=2, interim_test_episodes=2,
)  # fmt: skip


def test_run_names_tell_apart_every_setting_and_keep_plain_presets_short():
    from avalanche_sets.runs.folder import run_dir_name

    cpu = resolve_preset("cpu", n_shot=5, precision="fp32")
    assert run_dir_name("order", cpu, 0) == "order/packs-o1-5w5s-R50-seed0"
    assert run_dir_name("order", cpu.replace(precision="bf16"), 0) == (
        "order/packs-o1-5w5s-R50-seed0-bf16"
    )
    # where the data lives does not change what is computed (its content is checked instead);
    # the thread count does, and is named when it is not the preset's own
    assert run_dir_name("order", cpu.replace(root="/else"), 0) == "order/packs-o1-5w5s-R50-seed0"
    assert run_dir_name("order", cpu.replace(threads=2), 0) == "order/packs-o1-5w5s-R50-seed0-t2"
    assert run_dir_name("order", resolve_preset("quick", threads=2), 0) == (
        run_dir_name("order", resolve_preset("quick"), 0)
    )
    names = {
        run_dir_name("order", cpu, 0),
        run_dir_name("order", cpu.replace(mem_size=50), 0),
        run_dir_name("order", cpu.replace(image_size=16), 0),
        run_dir_name("order", cpu.replace(precision="bf16"), 0),
        run_dir_name("order", cpu, 0, strategy_overrides={"lam": 1e-4}),
        run_dir_name("order", cpu, 0, eval_stream="valid"),
        run_dir_name("order", cpu, 1),
        run_dir_name("order", resolve_preset("converged", n_shot=5, precision="fp32"), 0),
        run_dir_name("order", cpu.replace(threads=2), 0),
    }
    assert len(names) == 9
    # the converged regime differs from cpu only in its length: spelled out, never cpu's name
    assert run_dir_name("order", resolve_preset("converged", n_shot=5, precision="fp32"), 0) == (
        "order/packs-o1-5w5s-R50-seed0-tasks_per_domain1400"
    )
    assert run_dir_name("order", cpu.replace(mem_size=50), 0) == (
        "order/packs-o1-5w5s-R50-seed0-mem_size50"
    )
    assert run_dir_name("order", cpu, 0, strategy_overrides={"lam": 1e-4, "beta": 0.01},
                        eval_stream="valid") == "order/packs-o1-5w5s-R50-seed0-beta0.01-lam0.0001-valid"  # fmt: skip


def test_committed_runs_are_found_under_the_names_this_version_gives_them():
    from pathlib import Path

    from avalanche_sets.runs.folder import record_dir_name

    runs = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "runs"
    folders = sorted(runs.glob("*/*/result.json"))
    if not folders:
        pytest.skip("no committed runs")
    for path in folders:
        rec = read_record(path.parent)
        assert "unread_settings" in json.loads(path.read_text())
        name = record_dir_name(rec)
        assert path.parent.relative_to(runs).as_posix() == name


def test_a_setting_the_asked_run_does_not_read_is_no_conflict(tmp_path):
    """A record names the settings its run did not read (``unread_settings``): they are no
    part of its identity, and a record written before records named them is still the asked
    run when it differs only in one of them."""
    from avalanche_sets.runs.experiment import run_settings
    from avalanche_sets.runs.folder import (
        RunConflictError,
        check_finished,
        identity_differences,
        record_identity,
        run_identity,
    )

    preset = resolve_preset("quick", **TINY)
    where = run_settings("mskm", preset)
    assert set(where["unread"]) == {"mem_size", "replay_batch", "n_val_episodes"}
    asked = run_identity("mskm", preset, **where, data=None)
    assert not set(where["unread"]) & set(asked["preset"])
    rec = run_experiment("mskm", preset, seed=0, out_root=tmp_path, loggers=())
    assert rec.unread_settings == where["unread"] and record_identity(rec) == asked
    folder = next(tmp_path.glob("mskm/*"))
    body = json.loads((folder / "result.json").read_text())
    old = {k: v for k, v in body.items() if k != "unread_settings"}  # an older record
    old["preset"] = {**old["preset"], "mem_size": 7}
    (folder / "result.json").write_text(json.dumps(old))
    old = read_record(folder)
    assert "mem_size" in record_identity(old)["preset"]
    assert identity_differences(record_identity(old), asked) == []
    assert check_finished(folder, asked, 0).preset["mem_size"] == 7
    again = run_experiment("mskm", preset.replace(mem_size=7), seed=0, out_root=tmp_path,
                           loggers=())  # fmt: skip
    assert again.status == "finished before"  # the same folder: mem_size names none
    with pytest.raises(RunConflictError, match="n_shot: 1 there, 2 asked"):
        check_finished(folder, {**asked, "preset": {**asked["preset"], "n_shot": 2}}, 0)


def test_a_finished_run_with_other_settings_is_never_returned(tmp_path):
    from avalanche_sets.runs.folder import RunConflictError

    small = resolve_preset("quick", mem_size=10, **TINY)
    big = resolve_preset("quick", mem_size=20, **TINY)
    a = run_experiment("order", small, seed=0, out_root=tmp_path, loggers=())
    b = run_experiment("order", big, seed=0, out_root=tmp_path, loggers=())
    assert a.preset["mem_size"] == 10 and b.preset["mem_size"] == 20  # b really ran
    assert len(list(tmp_path.glob("order/*/result.json"))) == 2
    # A folder an older version named without the difference: refused, with the difference named.
    from avalanche_sets.runs.folder import run_dir_name

    old = tmp_path / "old" / run_dir_name("order", big, 0)
    old.parent.mkdir(parents=True)
    (tmp_path / "order" / run_dir_name("order", small, 0).split("/")[1]).rename(old)
    with pytest.raises(RunConflictError, match=r"mem_size: 10 there, 20 asked.*another --out"):
        run_experiment("order", big, seed=0, out_root=tmp_path / "old", loggers=())
    assert main(["run", "--method", "order", "--preset", "quick", "--seeds", "0", "--out",
                 str(tmp_path / "old"), "--set", "mem_size=20",
                 *[f"--set={k}={v}" for k, v in TINY.items()]]) == 2  # fmt: skip


def test_a_run_finished_by_another_process_while_waiting_for_the_lock_is_not_reported_as_ran(
    tmp_path, monkeypatch
):
    """The race that made two sweeps both say "ran": the other process finishes the run
    between this call's ``result.json`` check and its taking of the lock."""
    import shutil

    from avalanche_sets import training
    from avalanche_sets.runs.folder import run_dir_name
    from avalanche_sets.runs.sweep import RunSpec, run_one

    preset = resolve_preset("quick", **TINY)
    done = run_experiment("protonet", preset, seed=0, out_root=tmp_path / "other", loggers=())
    assert done.status == "ran"
    name = run_dir_name("protonet", preset, 0)
    acquire = RunLock.acquire

    def other_process_finishes_first(self):
        shutil.copytree(tmp_path / "other" / name, tmp_path / "here" / name, dirs_exist_ok=True)
        return acquire(self)

    def no_training(*a, **k):
        raise AssertionError("the finished run was run again")

    monkeypatch.setattr(RunLock, "acquire", other_process_finishes_first)
    monkeypatch.setattr(training, "run_sets", no_training)
    got = run_one(RunSpec("protonet", preset, 0, str(tmp_path / "here")))  # a sweep's run
    assert (got.spec.method, got.spec.seed, got.status) == ("protonet", 0, "finished before")
    assert got.accuracy == done.mean_accuracy
    # And a plain second call, found finished before the lock: the same status.
    again = run_experiment("protonet", preset, seed=0, out_root=tmp_path / "other", loggers=())
    assert again.status == "finished before" and again.result == done.result


def test_the_compute_matched_joint_run_trains_on_more_tasks_and_is_scored_on_the_same_episodes(
    tmp_path, monkeypatch
):
    from avalanche_sets.runs import experiment

    preset = resolve_preset("quick", **TINY)
    seen = {}

    def record(strategy, bench, **kw):  # the training loop, replaced: what was it handed?
        seen[strategy.train_mb_size] = bench
        return real(strategy, bench, **kw)

    real = experiment.training.run_sets
    monkeypatch.setattr(experiment.training, "run_sets", record)
    joint = run_experiment("joint", preset, seed=0, out_root=tmp_path, loggers=())
    matched = run_experiment("joint-matched", preset, seed=0, out_root=tmp_path, loggers=())
    b, r = preset.meta_batch, preset.replay_batch
    plain, more = seen[b], seen[b + r]
    assert len(more.train_stream[0].dataset) * b == len(plain.train_stream[0].dataset) * (b + r)
    assert more.settings["tasks_per_domain"] == preset.tasks_per_domain * (b + r) // b
    test_a, test_b = plain.test_stream[0].dataset[0], more.test_stream[0].dataset[0]
    assert torch.equal(test_a.query_x, test_b.query_x)
    # the folder and the record keep the preset asked for; the method's name says the rest
    assert matched.preset["tasks_per_domain"] == joint.preset["tasks_per_domain"]
    assert (tmp_path / "joint-matched").is_dir()
