"""Which loggers a run can add, and the checks of that choice: :data:`LOGGERS`,
:func:`check_loggers` (the command line checks ``--loggers`` while it parses, before torch
loads), :func:`check_finished_loggers` (file loggers asked of a run that finished without
them) and :func:`check_resumed_loggers` (history loggers added or removed when a run resumes;
:func:`record_loggers` writes what it started with). This module loads with the standard
library alone; the loggers themselves are in :mod:`avalanche_sets.training.run_loggers`.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from ..files import atomic_write

__all__ = [
    "LOGGERS",
    "LOGGER_FOLDERS",
    "WANDB_INSTALL",
    "check_loggers",
    "check_finished_loggers",
    "HISTORY_LOGGERS",
    "LOGGERS_FILE",
    "record_loggers",
    "check_resumed_loggers",
    "keep_history",
]

LOGGERS = ("progress", "interactive", "csv", "tensorboard", "wandb")
"""Loggers a run can add: ``progress`` (one bar per domain on stderr), ``interactive``
(Avalanche's bars and metric values on stdout), ``csv`` (``csv/``), ``tensorboard``
(``tb/``), ``wandb`` (Weights & Biases, ``wandb/``; offline unless ``WANDB_MODE`` says
otherwise; needs the ``wandb`` extra). The run folder's ``log.txt`` (every metric value) is
always written and is no logger to choose. ``csv``, ``tensorboard`` and ``wandb`` continue
where a resumed run's checkpoint left them (:mod:`avalanche_sets.training.run_loggers`)."""

WANDB_INSTALL = 'pip install "avalanche-sets[wandb]"'
"""How to install the wandb release the ``wandb`` logger is tested with."""


def check_loggers(loggers) -> tuple[str, ...]:
    """``loggers`` as a tuple, once every name is one of :data:`LOGGERS` that this environment
    can run (``wandb`` needs wandb installed), checked without importing any of them.

    Raises:
        ValueError: an unknown logger, or ``wandb`` without wandb (names the extra).
    """
    loggers = tuple(loggers)
    unknown = sorted(set(loggers) - set(LOGGERS))
    if unknown:
        raise ValueError(
            f"unknown logger(s) {unknown}; choose from {', '.join(LOGGERS)} (the run folder's "
            "log.txt of every metric value is always written)"
        )
    if "wandb" in loggers:
        if importlib.util.find_spec("wandb") is None:
            raise ValueError(
                f"the wandb logger needs wandb, which is not installed: {WANDB_INSTALL}"
            )
    return loggers


#: The file loggers and the folder each writes in a run folder.
LOGGER_FOLDERS = {"csv": "csv", "tensorboard": "tb", "wandb": "wandb"}


def check_finished_loggers(folder: str | Path, loggers) -> None:
    """Refuse file loggers (:data:`LOGGER_FOLDERS`) for the finished run in ``folder`` when it
    was run without them: a finished run is not run again, so their folder would stay empty.

    Raises:
        ValueError: names the loggers and the fix (another ``--out``, or remove the folder).
    """
    folder = Path(folder)

    def written(name: str) -> bool:
        path = folder / LOGGER_FOLDERS[name]
        return path.is_dir() and any(path.iterdir())

    missing = [name for name in loggers if name in LOGGER_FOLDERS and not written(name)]
    if missing:
        made = ", ".join(f"{LOGGER_FOLDERS[n]}/" for n in missing)
        raise ValueError(
            f"the run in {folder} finished without the {', '.join(missing)} logger(s): a "
            f"finished run is not run again, so {made} would stay empty (its result.json holds "
            "the accuracy matrix and its metrics, not the loss terms or the per-step values "
            "these loggers write); fix: run it into another folder with --out DIR, or remove "
            f"{folder} to run it again, or leave {' '.join(missing)} out of --loggers"
        )


HISTORY_LOGGERS = tuple(LOGGER_FOLDERS)
"""The loggers that write a history (a resumed run continues it): ``csv``, ``tensorboard`` and
``wandb``. Adding or removing one when a run resumes is refused (:func:`check_resumed_loggers`):
its history would begin at the resume, or stop there. ``progress`` and ``interactive`` write
to the terminal only and may change on a resume."""

LOGGERS_FILE = "loggers.json"
"""The file of a run in progress that records the loggers it started with (removed with its
checkpoints when it finishes)."""


def record_loggers(folder: str | Path, loggers) -> Path:
    """Write the loggers a run starts with into ``folder`` (:data:`LOGGERS_FILE`), where a resume
    reads them (:func:`check_resumed_loggers`); returns the file."""
    return atomic_write(Path(folder) / LOGGERS_FILE, json.dumps(list(loggers)) + "\n")


def check_resumed_loggers(folder: str | Path, loggers) -> None:
    """Refuse resuming the run in ``folder`` with other history loggers (:data:`HISTORY_LOGGERS`)
    than it started with (:func:`record_loggers`): an added one would begin at the resume, with
    the domains before it missing, and a removed one would stop there. A folder without the
    record (a run started by an earlier avalanche-sets) is not checked.

    Raises:
        ValueError: names the loggers added and removed, and the fix (the loggers it started
            with, or another folder).
    """
    path = Path(folder) / LOGGERS_FILE
    if not path.is_file():
        return
    started = tuple(json.loads(path.read_text()))
    was = [n for n in started if n in HISTORY_LOGGERS]
    now = [n for n in loggers if n in HISTORY_LOGGERS]
    added = [n for n in now if n not in was]
    removed = [n for n in was if n not in now]
    if not added and not removed:
        return
    change = "; ".join(
        f"{what} {', '.join(names)}"
        for what, names in (("adds", added), ("removes", removed))
        if names
    )
    flag = f"--loggers {' '.join(started)}".rstrip()  # no name: --loggers alone
    raise ValueError(
        f"the run in {folder} resumes from its checkpoint, and this command {change} "
        f"(it started with {list(started)}): a history logger added on a resume would begin "
        "at the resume, the domains before it missing, and one removed would stop there; "
        f"fix: resume with the loggers it started with: {flag} (in Python "
        f"loggers={started!r}); or start anew into another folder with another --out or --tag"
    )


def keep_history(folder: str | Path, loggers, *, resuming: bool) -> None:
    """Record the loggers of a run that starts in ``folder`` (:func:`record_loggers`); refuse
    other history loggers than those for a run that resumes (:func:`check_resumed_loggers`).

    Raises:
        ValueError: as :func:`check_resumed_loggers`.
    """
    if resuming:
        check_resumed_loggers(folder, loggers)
    else:
        record_loggers(folder, loggers)
