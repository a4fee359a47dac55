"""One sweep (``avalanche_sets.runs.sweep``) for the command line and ``reproduce.py``: the
runs in order, a locked run waited for (not run twice), a failing run reported, and both
entry points handing their grid to the same ``run_sweep``."""

from __future__ import annotations

import sys

import pytest

from avalanche_sets.cli import main
from avalanche_sets.presets import resolve_preset
from avalanche_sets.runs import sweep
from avalanche_sets.runs.folder import RunLockedError
from avalanche_sets.runs.record import Provenance, RunRecord
from avalanche_sets.runs.sweep import RunSpec, run_sweep

PRESET = resolve_preset("quick")


def fake_record(method: str, seed: int, status: str, accuracy: float) -> RunRecord:
    """What ``run_experiment`` returns for a run that took one second, without a run."""
    return RunRecord(
        method=method, seed=seed, preset={}, code={}, result={"mean_accuracy": accuracy},
        provenance=Provenance(seconds=1.0), status=status,
    )  # fmt: skip


class FakeRuns:
    """``run_experiment`` without training: records each call; ``locked`` runs raise
    :class:`RunLockedError` unless waited for, ``failing`` ones raise."""

    def __init__(self, locked=(), failing=()):
        self.calls: list[tuple[str, int, bool, bool]] = []
        self.locked, self.failing = set(locked), set(failing)

    def __call__(self, method, preset, *, seed, wait=False, checked=False, **kwargs):
        self.calls.append((method, seed, wait, checked))
        if (method, seed) in self.failing:
            raise RuntimeError("the loss is NaN")
        if (method, seed) in self.locked and not wait:
            raise RunLockedError("held by another process")
        status = "finished before" if (method, seed) in self.locked else "ran"
        return fake_record(method, seed, status, seed / 10)


def _specs(tmp_path, *pairs):
    return [RunSpec(m, PRESET, s, tmp_path) for m, s in pairs]


def test_runs_in_order_and_waits_for_locked_runs_instead_of_running_them_twice(
    tmp_path, monkeypatch
):
    fake = FakeRuns(locked=[("mskm", 1)])
    monkeypatch.setattr(sweep, "run_experiment", fake)
    seen = []
    out = run_sweep(_specs(tmp_path, ("order", 0), ("mskm", 1), ("order", 2)), on_done=seen.append,
                    progress=False)  # fmt: skip
    assert [(o.spec.method, o.spec.seed, o.status) for o in out] == [
        ("order", 0, "ran"), ("mskm", 1, "finished before"), ("order", 2, "ran"),
    ]  # fmt: skip
    assert [o.accuracy for o in out] == [0.0, 0.1, 0.2]
    # the locked run: tried once without waiting, then waited for after the sweep's own runs
    assert fake.calls == [("order", 0, False, True), ("mskm", 1, False, True),
                          ("order", 2, False, True), ("mskm", 1, True, True)]  # fmt: skip
    assert [o.status for o in seen] == ["ran", "ran", "finished before"]  # never "locked"


def test_a_failing_run_stops_the_sweep_unless_keep_going(tmp_path, monkeypatch):
    specs = _specs(tmp_path, ("order", 0), ("order", 1), ("order", 2))
    monkeypatch.setattr(sweep, "run_experiment", FakeRuns(failing=[("order", 1)]))
    with pytest.raises(RuntimeError, match="NaN"):
        run_sweep(specs, progress=False)
    out = run_sweep(specs, keep_going=True, progress=False)
    assert [o.status for o in out] == ["ran", "failed", "ran"]
    assert out[1].error == "order seed 1: RuntimeError: the loss is NaN"
    assert out[1].record is None and out[1].accuracy != out[1].accuracy  # NaN


def test_every_run_is_checked_before_the_first_starts(tmp_path, monkeypatch):
    fake = FakeRuns()
    monkeypatch.setattr(sweep, "run_experiment", fake)
    with pytest.raises(TypeError, match=r"does not accept option\(s\) \['lamb'\].*'lam'"):
        RunSpec("order", PRESET, 1, tmp_path, strategy_overrides={"lamb": 1.0})  # typed here
    refused = RunSpec("order", PRESET, 1, tmp_path,
                      strategy_overrides={"use_ood_split": False})  # fmt: skip
    with pytest.raises(ValueError, match=r"use_mi=True needs use_ood_split=True"):
        run_sweep([*_specs(tmp_path, ("order", 0)), refused], progress=False)
    assert fake.calls == []
    with pytest.raises(ValueError, match="jobs must be a positive number"):
        run_sweep([refused], jobs=0)


@pytest.fixture
def recorded_sweeps(monkeypatch):
    """``run_sweep`` replaced by a recorder of the specs and options each caller hands it."""
    calls = []

    def record(specs, **options):
        calls.append((list(specs), options))
        return [sweep.RunOutcome(s, "finished before", record=fake_record(
            s.method, s.seed, "finished before", 0.5)) for s in specs]  # fmt: skip

    monkeypatch.setattr(sweep, "run_sweep", record)
    return calls


def test_the_command_lines_sweep_and_reproduce_use_the_one_sweep(
    tmp_path, monkeypatch, recorded_sweeps
):
    assert main(["sweep", "--methods", "order", "mskm", "--seeds", "0", "1", "--jobs", "2",
                 "--out", str(tmp_path / "cli")]) == 0  # fmt: skip
    ((specs, options),) = recorded_sweeps
    assert [(s.method, s.seed) for s in specs] == [("order", 0), ("order", 1), ("mskm", 0),
                                                   ("mskm", 1)]  # fmt: skip
    assert options["jobs"] == 2 and options["ray_address"] is None

    from benchmarks import reproduce

    monkeypatch.setattr(sys, "argv", ["reproduce.py", "table2", "--preset", "quick",
                                      "--methods", "order", "--seeds", "3", "--shots", "1",
                                      "--jobs", "3", "--out", str(tmp_path / "table2")])  # fmt: skip
    with pytest.raises(SystemExit, match="no finished run"):  # the recorder ran nothing
        reproduce.main()
    (specs, options) = recorded_sweeps[1]
    assert [(s.method, s.seed, s.preset.n_shot) for s in specs] == [("order", 3, 1)]
    assert options["jobs"] == 3 and options["keep_going"] is True


@pytest.mark.slow
def test_parallel_runs_take_one_thread_each_unless_told_otherwise(tmp_path):
    """``threads=1`` (the default) gives every run of a pool one thread; ``None`` keeps the
    preset's (``--set threads=N`` on the command line)."""
    tiny = resolve_preset(
        "quick", tasks_per_domain=2, n_test_episodes=2, n_query=2, n_unlabeled=2, n_ood=4,
        width=4, domains=["shapes"], eval_mb_size=2, threads=2,
    )  # fmt: skip
    for threads, expected in ((1, 1), (None, 2)):
        out = tmp_path / str(threads)
        specs = [RunSpec("protonet", tiny, s, out) for s in (0, 1)]
        done = run_sweep(specs, jobs=2, threads=threads, progress=False)
        assert [o.record.preset["threads"] for o in done] == [expected, expected]
    with pytest.raises(ValueError, match="threads must be a positive number or None"):
        run_sweep([], threads=0)
