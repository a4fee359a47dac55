"""`avalanche-sets run --loggers`: the names it lists and accepts, and wandb's extra."""

from __future__ import annotations

import importlib.util
import re

import pytest

from avalanche_sets.cli import build_parser, main
from avalanche_sets.runs.folder import LISTED_LOGGERS, LOGGERS


def _loggers_option():
    run = build_parser()._subparsers._group_actions[0].choices["run"]
    (action,) = [a for a in run._actions if a.dest == "loggers"]
    return action


def test_the_help_lists_the_loggers_a_user_chooses_from():
    """The help names progress, interactive, csv, tensorboard and wandb; not `text` (the
    always-on log.txt), so it matches the documented synopsis."""
    action = _loggers_option()
    assert action.choices is None  # argparse would list every accepted name, text included
    assert "wandb" in LISTED_LOGGERS and "text" not in LISTED_LOGGERS
    for name in LISTED_LOGGERS:
        assert re.search(rf"\b{name}\b", action.help), name
    assert not re.search(r"\btext\b", action.help)


def test_text_is_still_accepted_and_unknown_names_are_refused(capsys):
    parser = build_parser()
    assert parser.parse_args(["run", "--loggers", "text", "csv"]).loggers == ["text", "csv"]
    assert set(LOGGERS) - set(LISTED_LOGGERS) == {"text"}
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
