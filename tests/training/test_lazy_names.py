"""``avalanche_sets.training`` loads its names on first use: the command line checks
``--loggers`` (:mod:`avalanche_sets.training.loggers`) without torch, and every public name
still loads."""

from __future__ import annotations

import subprocess
import sys

from avalanche_sets import training


def test_every_public_name_is_lazy_and_loads():
    assert sorted(training.__all__) == sorted(training._LAZY)
    for name in training.__all__:
        value = getattr(training, name)
        assert getattr(value, "__name__", name) == name, name


def _printed_by(code: str) -> str:
    """What ``code`` prints, run in a fresh interpreter (nothing imported before it)."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_the_logger_checks_load_without_torch():
    code = (
        "import sys; from avalanche_sets.training import loggers; "
        "loggers.check_loggers(['csv', 'tensorboard']); "
        "print(sorted(m for m in ('torch', 'avalanche', 'numpy') if m in sys.modules))"
    )
    assert _printed_by(code) == "[]"


def test_the_command_line_parses_loggers_without_torch():
    code = (
        "import sys; from avalanche_sets import cli; "
        "cli.build_parser().parse_args(['run', '--method', 'order', '--loggers', 'csv']); "
        "print('torch' in sys.modules)"
    )
    assert _printed_by(code) == "False"
