"""Which loggers a run can add, and the checks of that choice: :data:`LOGGERS`,
:func:`check_loggers` (the command line checks ``--loggers`` while it parses, before torch
loads) and :func:`check_finished_loggers` (file loggers asked of a run that finished without
them). This module loads with the standard library alone; the loggers themselves are in
:mod:`avalanche_sets.training.run_loggers`.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

__all__ = [
    "LOGGERS",
    "LOGGER_FOLDERS",
    "WANDB_INSTALL",
    "check_loggers",
    "check_finished_loggers",
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
