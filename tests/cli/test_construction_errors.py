"""Any exception from building a user's method is a one-line error of the command line.

A method class of one's own whose constructor raises a ``TypeError``, or whose ``model_arguments``
raises a ``KeyError``: ``run`` and ``sweep`` print one ``error:`` line naming the method and the
exception's type (exit code 2, as every refused command), and the traceback under ``-v``. The
exception itself reaches a Python caller unchanged.
"""

from __future__ import annotations

import pytest

from avalanche_sets.cli import main
from avalanche_sets.methods import build_strategy
from avalanche_sets.methods.build import building_method

pytestmark = pytest.mark.filterwarnings("ignore:No loggers specified")

USER_CODE = """
from avalanche_sets.baselines import MSKM


class NeedsWidget(MSKM):
    name = "needs-widget"
    summary = "a constructor that passes an argument its base does not take"

    def __init__(self, **kwargs):
        super().__init__(widget=3, **kwargs)


class NoModel(MSKM):
    name = "no-model"
    summary = "a model_arguments that fails"

    @classmethod
    def model_arguments(cls, config, backbone, options):
        return {"a": 1}["model"]
"""

TINY = ["--set", "tasks_per_domain=4", "--set", "n_test_episodes=2", "--set", "threads=1"]


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    (tmp_path / "mine.py").write_text(USER_CODE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    ("method", "kind", "message"),
    [
        ("mine:NeedsWidget", "TypeError", "unexpected keyword argument: widget"),
        ("mine:NoModel", "KeyError", "'model'"),
    ],
)
@pytest.mark.parametrize("command", ["run", "sweep"])
def test_a_construction_error_of_any_type_is_one_line_naming_method_and_type(
    user_module, capsys, command, method, kind, message
):
    flag = "--method" if command == "run" else "--methods"
    rc = main([command, flag, method, "--out", "runs", *TINY])
    out, err = capsys.readouterr()
    assert rc == 2
    (line,) = err.strip().splitlines()  # one line, no traceback
    assert line.startswith(f"error: building method {method!r} raised {kind}: "), line
    assert message in line and line.endswith("(-v prints the traceback)"), line
    assert "Traceback" not in err
    assert "SETS benchmark" not in out  # before the stream was built
    assert not (user_module / "runs").exists()


def test_verbose_adds_the_traceback(user_module, capsys):
    rc = main(["run", "--method", "mine:NeedsWidget", "--out", "runs", "-v", *TINY])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("Traceback (most recent call last):"), err
    assert "super().__init__(widget=3, **kwargs)" in err  # the user's own line
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: building method 'mine:NeedsWidget' raised TypeError: ")
    assert "-v prints" not in last


def test_python_callers_get_the_exception_itself(user_module):
    with pytest.raises(TypeError, match="widget") as caught:
        build_strategy("mine:NeedsWidget", "quick")
    assert building_method(caught.value) == "mine:NeedsWidget"
    assert building_method(ValueError("elsewhere")) is None


def test_a_bug_outside_construction_still_raises(monkeypatch):
    """Only construction errors (and the refusals of bad input) are one line: a bug elsewhere
    keeps its traceback."""
    import avalanche_sets.cli as cli

    def broken(args):
        raise KeyError("a bug")

    monkeypatch.setattr(cli, "_cmd_presets", broken)
    with pytest.raises(KeyError, match="a bug"):
        main(["presets"])
