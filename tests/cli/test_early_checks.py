"""User code is checked before data loads, and a run that fails before training leaves no folder.

A user's method class builds a plugin whose own argument check raises: the command line
(``run`` and ``sweep``) refuses it before the stream is built or described and before any run
folder exists, and ``run_experiment`` builds the strategy before the benchmark. A run whose data
does not load removes the folder it made; a folder that was there (a stub of an earlier attempt,
a checkpoint to resume, a finished run) is never removed.
"""

from __future__ import annotations

import pytest

from avalanche_sets.cli import main
from avalanche_sets.presets import resolve_preset
from avalanche_sets.runs import experiment
from avalanche_sets.runs.experiment import _remove_unstarted, run_experiment
from avalanche_sets.runs.folder import CHECKPOINT_FILE, LOG_FILE, run_folder
from avalanche_sets.runs.record import RESULT_FILE

pytestmark = pytest.mark.filterwarnings("ignore:No loggers specified")

FACTORY = """
from avalanche_sets.baselines import MSKM
from avalanche_sets.training.template import EpisodicPlugin


class HardReplay(EpisodicPlugin):
    def __init__(self, policy):
        super().__init__()
        if policy not in ("hardest", "uniform"):
            raise ValueError(f"HardReplay: policy must be 'hardest' or 'uniform', got {policy!r}")
        self.policy = policy


class SemiHard(MSKM):
    name = "semi-hard"
    summary = "MSKM with hard replay"

    def __init__(self, *, policy: str = "hardest", plugins=None, **kwargs):
        super().__init__(plugins=[HardReplay(policy), *(plugins or [])], **kwargs)
"""

TINY = [
    "--set", "tasks_per_domain=4", "--set", "n_test_episodes=2", "--set", "width=8",
    "--set", "domains=['shapes','strokes']", "--set", "threads=1",
]  # fmt: skip


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    (tmp_path / "hardreplay.py").write_text(FACTORY)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def tiny_packs(tmp_path):
    """A packs preset on a folder whose packs cannot be read (checked by content hash alone
    before data loads: the bytes hash, the packs fail to load)."""
    root = tmp_path / "packs"
    root.mkdir()
    for name in ("a", "b"):
        (root / f"{name}.npz").write_bytes(b"not a pack")
    return resolve_preset("cpu", root=str(root), tasks_per_domain=4, threads=1, n_ood=0)


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_a_plugins_bad_argument_is_refused_before_the_stream_is_described(
    user_module, capsys, command
):
    method = ["--method"] if command == "run" else ["--methods"]
    rc = main(
        [command, *method, "hardreplay:SemiHard", "--strategy-set", "policy=semi_hard",
         "--out", "runs", *TINY]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert rc == 2
    assert "HardReplay: policy must be 'hardest' or 'uniform', got 'semi_hard'" in err
    # nothing of the stream was built, described or drawn, and no run folder was made
    assert "SETS benchmark" not in out and "one episode per domain" not in out, out
    assert "sweep:" not in out
    assert not (user_module / "runs").exists()


@pytest.mark.parametrize(
    ("device", "message"),
    [("cuda:99", "needs a CUDA GPU of that index"), ("gpu", "is no torch device")],
)
def test_a_device_this_machine_lacks_is_refused_before_the_stream(
    tmp_path, monkeypatch, capsys, device, message
):
    monkeypatch.chdir(tmp_path)
    rc = main(["run", "--out", "runs", *TINY, "--set", f"device={device}"])
    out, err = capsys.readouterr()
    assert rc == 2 and message in err and "fix: --set device=cpu" in err, err
    assert "SETS benchmark" not in out
    assert not (tmp_path / "runs").exists()


def test_the_same_command_with_a_good_argument_runs(user_module, capsys):
    rc = main(
        ["run", "--method", "hardreplay:SemiHard", "--strategy-set", "policy=uniform",
         "--out", "runs", "--loggers", *TINY]
    )  # fmt: skip
    assert rc == 0
    assert "SETS benchmark" in capsys.readouterr().out
    assert len(list((user_module / "runs").rglob(RESULT_FILE))) == 1


def test_run_experiment_builds_the_strategy_before_the_benchmark(user_module, monkeypatch):
    def no_data(*args, **kwargs):
        raise AssertionError("the benchmark was built before the strategy")

    monkeypatch.setattr(experiment, "build_benchmark", no_data)
    preset = resolve_preset("quick", tasks_per_domain=4, threads=1)
    with pytest.raises(ValueError, match="policy must be 'hardest' or 'uniform'"):
        run_experiment(
            "hardreplay:SemiHard", preset, seed=0, out_root=user_module / "runs", loggers=(),
            strategy_overrides={"policy": "semi_hard"},
        )  # fmt: skip
    assert not (user_module / "runs").exists()


@pytest.mark.parametrize("loggers", [(), ("csv", "tensorboard")])
def test_a_run_whose_data_does_not_load_leaves_no_folder(tmp_path, loggers):
    preset = tiny_packs(tmp_path)
    out_root = tmp_path / "runs"
    with pytest.raises(ValueError, match="not a readable .npz file"):
        run_experiment("mskm", preset, seed=0, out_root=out_root, loggers=loggers)
    assert not out_root.exists()
    # an out folder that was there stays, with what it held
    out_root.mkdir()
    (out_root / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not a readable .npz file"):
        run_experiment("mskm", preset, seed=0, out_root=out_root, loggers=loggers)
    assert [p.name for p in out_root.iterdir()] == ["notes.txt"]


@pytest.mark.parametrize("held", [LOG_FILE, CHECKPOINT_FILE])
def test_a_folder_that_was_there_is_never_removed(tmp_path, held):
    # a stub of an earlier attempt (log.txt) or a checkpoint to resume
    preset = tiny_packs(tmp_path)
    folder = run_folder(tmp_path / "runs", "mskm", preset, 0)
    folder.mkdir(parents=True)
    (folder / held).write_bytes(b"earlier")
    with pytest.raises(ValueError, match="not a readable .npz file"):
        run_experiment("mskm", preset, seed=0, out_root=tmp_path / "runs", loggers=())
    assert (folder / held).read_bytes().startswith(b"earlier")  # appended to, not removed


@pytest.mark.parametrize("held", [CHECKPOINT_FILE, RESULT_FILE])
def test_a_folder_with_a_checkpoint_or_a_result_is_never_removed(tmp_path, held):
    folder = tmp_path / "runs" / "m" / "run"
    folder.mkdir(parents=True)
    (folder / held).write_text("{}")
    _remove_unstarted(folder, tmp_path / "runs")
    assert (folder / held).exists()
    (folder / held).unlink()
    (folder / LOG_FILE).write_text("stub")
    _remove_unstarted(folder, tmp_path / "runs")  # what it made, up to runs/
    assert not (tmp_path / "runs").exists()
