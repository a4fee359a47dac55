"""Deprecated alias of :mod:`avalanche_sets.runs` (one run: :mod:`.runs.experiment`; the run
folder's name and identity: :mod:`.runs.folder`; its table: :mod:`.runs.report`).

Kept for one release so that existing imports keep working; import from
:mod:`avalanche_sets.runs` instead. (No ``DeprecationWarning``: the benchmark scripts still
import these names, and a warning on every run would bury their output.)
"""

from .runs.experiment import build_benchmark, run_experiment
from .runs.experiment import evaluator as _evaluator
from .runs.folder import (
    LOG_FILE,
    LOGGERS,
    machine_info,
    record_identity,
    run_dir_name,
    run_identity,
    run_precision,
)
from .runs.report import run_table

__all__ = [
    "run_experiment",
    "build_benchmark",
    "run_dir_name",
    "run_identity",
    "record_identity",
    "run_table",
    "run_precision",
    "LOGGERS",
    "LOG_FILE",
    "machine_info",
    "_evaluator",
]
