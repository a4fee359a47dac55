"""The ``--method``/``--methods`` help offers only the names a run accepts: the built-in and
installed methods and ``package.module:Class`` (a factory function is refused)."""

from __future__ import annotations

import pytest

from avalanche_sets.cli import build_parser
from avalanche_sets.methods import method_class, method_names


def _help(command: str, *, list_methods: bool = True) -> str:
    parser = build_parser(list_methods=list_methods)
    sub = parser._subparsers._group_actions[0].choices[command]
    (action,) = [a for a in sub._actions if a.dest in ("method", "methods")]
    return " ".join(action.help.split())


@pytest.mark.parametrize("list_methods", [True, False])
@pytest.mark.parametrize("command", ["run", "sweep"])
def test_the_method_help_offers_what_is_accepted_and_no_factory(command, list_methods):
    text = _help(command, list_methods=list_methods)
    assert "package.module:Class" in text, text
    assert "factory" not in text, text
    if list_methods:
        assert all(name in text for name in method_names()), text


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_no_help_text_of_run_or_sweep_offers_a_factory(command):
    parser = build_parser()
    sub = parser._subparsers._group_actions[0].choices[command]
    assert "factory" not in sub.format_help()


def test_what_the_help_offers_is_accepted_and_a_factory_is_not(tmp_path, monkeypatch):
    (tmp_path / "offered.py").write_text(
        "from avalanche_sets.baselines import MSKM\n\n\n"
        "class Mine(MSKM):\n    name = 'mine'\n    summary = 'mine'\n\n\n"
        "def make_mine(**kwargs):\n    return Mine(**kwargs)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert method_class("offered:Mine").__name__ == "Mine"  # package.module:Class
    with pytest.raises((TypeError, ValueError)):
        method_class("offered:make_mine")  # a factory function
