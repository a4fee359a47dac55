"""`avalanche-sets run --loggers`: the names it lists and accepts, and wandb's extra."""

from __future__ import annotations

import importlib.util
import re

import pytest

from avalanche_sets.cli import build_parser, main
from avalanche_sets.training.loggers import LOGGERS


def _loggers_option():
    run = build_parser()._subparsers._group_actions[0].choices["run"]
    (action,) = [a for a in run._actions if a.dest == "loggers"]
    return action


def test_the_help_lists_the_loggers_a_user_chooses_from():
    """The help names progress, interactive, csv, tensorboard and wandb; not `text` (the
    always-on log.txt), so it matches the documented synopsis."""
    action = _loggers_option()
    assert action.choices is None  # argparse would list the names again, unworded
    assert "wandb" in LOGGERS and "text" not in LOGGERS
    for name in LOGGERS:
        assert re.search(rf"\b{name}\b", action.help), name
    assert not re.search(r"\btext\b", action.help)


def test_unknown_names_are_refused_text_included(capsys):
    """``text`` is no logger: the run folder's log.txt is always written, and the refusal
    says so."""
    parser = build_parser()
    assert parser.parse_args(["run", "--loggers", "csv"]).loggers == ["csv"]
    with pytest.raises(SystemExit):
        parser.parse_args(["run", "--loggers", "text", "csv"])
    assert "unknown logger(s) ['text']" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parser.parse_args(["run", "--loggers", "tensorbored"])
    assert "unknown logger(s) ['tensorbored']" in capsys.readouterr().err


def test_wandb_without_wandb_is_an_error_naming_the_extra(monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a)
    )
    with pytest.raises(SystemExit) as exc:
        main(["run", "--loggers", "wandb"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "argument --loggers" in err and 'pip install "avalanche-sets[wandb]"' in err


def test_a_file_logger_a_finished_run_ran_without_is_refused_before_data_loads(
    tmp_path, monkeypatch, capsys
):
    """`run --loggers csv tensorboard` on a run that finished with csv only: tb/ would stay
    empty (a finished run is not run again), so the command stops before loading any data and
    says how to get the logs; the loggers the run had are accepted."""
    from avalanche_sets.presets import resolve_preset
    from avalanche_sets.runs import experiment
    from avalanche_sets.runs.folder import run_folder

    folder = run_folder(tmp_path, "order", resolve_preset("quick"), 0, strategy_overrides={})
    (folder / "csv").mkdir(parents=True)
    (folder / "csv" / "training_results.csv").write_text("training_exp,epoch\n")
    (folder / "result.json").write_text("{}")

    def no_data(*args, **kwargs):
        raise AssertionError("data loaded")

    monkeypatch.setattr(experiment, "build_benchmark", no_data)
    argv = ["run", "--seeds", "0", "--out", str(tmp_path), "--loggers", "csv", "tensorboard"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"the run in {folder} finished without the tensorboard logger(s)" in err
    assert "fix: run it into another folder with --out DIR, or remove" in err
    # csv alone passes the loggers' check; the stub record is then refused, still before data
    assert main(argv[:-1]) == 2
    assert "result format" in capsys.readouterr().err
