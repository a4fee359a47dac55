"""A run folder's lock: one process runs a run, a second sees it running.

``<folder>/.lock`` (:data:`LOCK_FILE`) is an exclusive ``flock`` held by the process running the
run (:class:`RunLock`). The lock dies with its process (even on SIGKILL), so there are no stale
locks to clean up. ``flock`` needs a local POSIX file system (on NFS it may not exclude
processes on other hosts). Standard library only.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

__all__ = ["LOCK_FILE", "RunLock", "RunLockedError"]

LOCK_FILE = ".lock"


class RunLockedError(RuntimeError):
    """The run is being run by another process (its folder's lock is held)."""


class RunLock:
    """An exclusive, non-blocking (or blocking) ``flock`` on ``<folder>/.lock``.

    Use as a context manager; ``acquire`` raises :class:`RunLockedError` when another process
    holds it and ``wait`` is false.
    """

    def __init__(self, folder: str | Path, *, wait: bool = False) -> None:
        self.path = Path(folder) / LOCK_FILE
        self.wait = wait
        self._fd: int | None = None

    def acquire(self) -> RunLock:
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
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def remove(self) -> None:
        """Delete the lock file (a finished run's folder keeps none). Safe while held: a
        process waiting on it re-checks ``result.json`` before running anything."""
        self.path.unlink(missing_ok=True)

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
