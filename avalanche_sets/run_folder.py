"""The on-disk layout of one run folder: deterministic results, provenance, a lock.

A finished run folder holds

* ``result.json`` — what the run *computed*: method, seed, settings and metrics, and the
  format version. It depends only on the code, the settings and the seed, so two runs with the
  same seed write byte-identical files (CPU), and an interrupted-and-resumed run writes the
  same file as an uninterrupted one;
* ``run.json`` — how it was computed: wall time, date, machine, command, and any resumes
  (which checkpoint, which damaged ones were skipped). It differs from run to run by nature.

While a run is in progress the folder holds its checkpoint and ``.lock``, an exclusive
``flock`` held by the process running it: a second process (another sweep pointed at the same
folder) sees the lock and does not run it again. The lock dies with its process (even on
SIGKILL), so there are no stale locks to clean up. ``flock`` needs a local POSIX file system
(on NFS it may not exclude processes on other hosts).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = [
    "RESULT_FORMAT",
    "READABLE_FORMATS",
    "ResultsVersionError",
    "RunLockedError",
    "RunConflictError",
    "RunLock",
    "read_record",
    "write_record",
]

RESULT_FORMAT = 3
"""3: as 2, with ``result.forgetting`` of :mod:`avalanche_sets.metrics.stats` (the last domain
``null``) and ``result.average_forgetting`` / ``result.bwt``; 2: ``result.json``
(deterministic) + ``run.json`` (provenance); 1: one ``result.json``."""
READABLE_FORMATS = (1, 2, 3)


class ResultsVersionError(ValueError):
    """A run folder written by a version of avalanche-sets whose format this one cannot read."""


class RunLockedError(RuntimeError):
    """The run is being run by another process (its folder's lock is held)."""


class RunConflictError(ValueError):
    """A run folder already holds a finished run whose settings differ from the asked ones."""


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_record(folder: str | Path, result: dict, provenance: dict) -> None:
    """Write ``run.json`` then ``result.json`` (atomically; ``result.json`` marks it finished)."""
    folder = Path(folder)
    _atomic_write(folder / "run.json", json.dumps(provenance, indent=2) + "\n")
    body = {"format": RESULT_FORMAT, **result}
    _atomic_write(folder / "result.json", json.dumps(body, indent=2) + "\n")


def read_record(folder: str | Path) -> dict:
    """The record of a finished run: ``result.json`` merged with ``run.json``.

    Raises:
        FileNotFoundError: the folder has no ``result.json`` (not finished).
        ResultsVersionError: the folder was written in a format this version cannot read.
        ValueError: ``result.json`` is not valid JSON (names the file).
    """
    folder = Path(folder)
    path = folder / "result.json"
    try:
        rec = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} is not valid JSON ({err}); delete the folder to re-run") from None
    fmt = rec.get("format", 1) if isinstance(rec, dict) else None
    if fmt not in READABLE_FORMATS:
        raise ResultsVersionError(
            f"{folder} was written by another version of avalanche-sets (result format "
            f"{fmt!r}, by avalanche-sets {rec.get('avalanche_sets', '?') if isinstance(rec, dict) else '?'}); "
            f"this version ({_version()}) reads formats {list(READABLE_FORMATS)}. Read it with "
            "that version, or write this run to a new --out folder"
        )
    if fmt >= 2:
        run = folder / "run.json"
        if run.is_file():
            rec.update(json.loads(run.read_text()))
    if fmt < 3:
        _upgrade_derived_metrics(rec)
    return rec


def _upgrade_derived_metrics(rec: dict) -> None:
    """Replace a format-1/2 record's stored forgetting by today's definition, from its matrix.

    Formats 1 and 2 stored a forgetting that also counted the last domain, with rows from
    before it was trained (and no BWT). Every reader sees the one definition of
    :mod:`avalanche_sets.metrics.stats` instead, recomputed from the stored accuracy matrix;
    the file itself is left as it was.
    """
    res = rec.get("result")
    if not isinstance(res, dict) or "matrix" not in res:
        return
    # the runner owns the schema of "result"; imported here because it loads torch, and the
    # command line reads this module (its lock error) before any command that needs torch
    from .training.runner import RunResult

    derived = RunResult(domains=res.get("domains", []), matrix=res["matrix"]).to_dict()
    for key in ("forgetting", "average_forgetting", "bwt"):
        res[key] = derived[key]


def _version() -> str:
    from . import __version__

    return __version__


class RunLock:
    """An exclusive, non-blocking (or blocking) ``flock`` on ``<folder>/.lock``.

    Use as a context manager; ``acquire`` raises :class:`RunLockedError` when another process
    holds it and ``wait`` is false.
    """

    def __init__(self, folder: str | Path, *, wait: bool = False) -> None:
        self.path = Path(folder) / ".lock"
        self.wait = wait
        self._fd: int | None = None

    def acquire(self) -> RunLock:
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if self.wait else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            raise RunLockedError(
                f"{self.path.parent} is being run by another process (lock {self.path}); "
                "it is not run twice — wait for it, or use another --out folder"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            import fcntl

            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
