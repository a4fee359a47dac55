"""The command line shows each warning as one line, ``warning: <message>`` (no file path), and
each distinct one once per command: a sweep of two seeds whose method warns each time it is
built (a check, then every run, in the driver or in worker processes) says each once."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from avalanche_sets.runs.terminal_warnings import one_line_warnings

ROOT = Path(__file__).resolve().parents[2]

USER_CODE = """
import warnings

import torch
from avalanche_sets.baselines import MSKM


class Warns(MSKM):
    name = "warns"
    summary = "MSKM that warns when it is built"

    def __init__(self, **kwargs):
        seed = torch.initial_seed()  # the run's: its model is seeded before it is built
        warnings.warn(f"Warns: built for seed {seed}\\nof a sweep", UserWarning)
        super().__init__(**kwargs)
"""

TINY = [
    "--set", "tasks_per_domain=4", "--set", "n_test_episodes=2", "--set", "width=4",
    "--set", "n_blocks=2", "--set", "image_size=16", "--set", "domains=['shapes','strokes']",
    "--set", "threads=1", "--seeds", "0", "1",
]  # fmt: skip


@pytest.fixture
def user_module(tmp_path):
    (tmp_path / "warner.py").write_text(USER_CODE)
    return tmp_path


def _python(folder, *args: str) -> subprocess.CompletedProcess:
    """The command line as a user runs it, in ``folder`` (the warnings as a terminal shows
    them: pytest records those of its own process)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(folder)])}
    return subprocess.run([sys.executable, *args], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=600)  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_sweep_of_two_seeds_says_each_warning_once_in_one_line(user_module, jobs):
    proc = _python(user_module, "-m", "avalanche_sets", "sweep", "--methods", "warner:Warns",
                   "--out", "runs", "--jobs", jobs, *TINY)  # fmt: skip
    err = proc.stderr
    assert proc.returncode == 0, err[-3000:]
    # seed 0's: the driver's check and a run; seed 1's: a run only (a worker's with --jobs 2)
    said = re.findall(r"warning: Warns: built[^\n]*", err)  # a progress bar may precede it
    assert sorted(said) == [f"warning: Warns: built for seed {s} of a sweep" for s in (0, 1)], err
    assert "UserWarning" not in err and "warner.py" not in err, err
    assert len(list((user_module / "runs").rglob("result.json"))) == 2


def test_distinct_warnings_each_once_and_ignored_ones_stay_ignored(tmp_path):
    (tmp_path / "script.py").write_text(
        "import warnings\n"
        "from avalanche_sets.runs.terminal_warnings import one_line_warnings\n"
        "with one_line_warnings():\n"
        "    warnings.filterwarnings('ignore', message='hidden')\n"
        "    for _ in range(3):\n"
        "        warnings.warn('first\\nline', UserWarning)\n"
        "        warnings.warn('second', RuntimeWarning)\n"
        "        warnings.warn('hidden', UserWarning)\n"
    )
    proc = _python(tmp_path, "script.py")
    assert proc.stderr.splitlines() == ["warning: first line", "warning: second"], proc.stderr


def test_a_caller_recording_warnings_still_gets_every_one():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with one_line_warnings():
            for _ in range(2):
                warnings.warn("recorded", UserWarning, stacklevel=1)
    assert [str(w.message) for w in caught] == ["recorded", "recorded"]
