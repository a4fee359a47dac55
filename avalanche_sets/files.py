"""Atomic file writing: the one implementation every layer uses.

A reader — another process, or this one after a crash or a ``SIGKILL`` — sees either the old
file or the whole new one, never a torn one: the content goes to a temporary file in the same
folder, is flushed to disk (``fsync``) and renamed over the target (:func:`os.replace` is atomic
on POSIX file systems); the folder is then synced so the rename itself survives a power cut.

It is a room of its own on the package's ground floor, beside :mod:`avalanche_sets.defaults`:
the data packs and caches (:mod:`avalanche_sets.data`), checkpoints
(:mod:`avalanche_sets.training.checkpoint`) and run folders (:mod:`avalanche_sets.runs.folder`)
all write through it, and none of them is below the others. It needs the standard library
alone, as the command line's start imports it (through the run folders) before torch.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

__all__ = ["atomic_write"]


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # e.g. a platform without directory handles: the rename still happened
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(
    path: str | Path,
    content: str | bytes | Callable[[BinaryIO], object],
    *,
    previous: str | Path | None = None,
    single_writer: bool = False,
) -> Path:
    """Write ``content`` to ``path`` atomically; returns ``path``.

    Args:
        path: the file to write (its folder is created).
        content: text (written as UTF-8), bytes, or a function that writes to the binary file
            it is given (``lambda f: np.savez(f, **arrays)``).
        previous: when given and ``path`` exists, the file being replaced is first moved there
            (a previous good copy, as checkpoints keep).
        single_writer: the caller is the only process that writes ``path`` (it holds a run
            folder's lock). The temporary file is then ``<name>.tmp``, so one left by a killed
            process is overwritten by the next write instead of staying behind; otherwise it
            has a unique name, so that processes writing the same file (a shared data cache)
            never write into each other's temporary file.

    The file is readable by everyone (``0o644``), as a file ``open`` writes under the usual
    umask; on any error the temporary file is removed and the target is left as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not (isinstance(content, (str, bytes)) or callable(content)):
        raise TypeError(
            f"atomic_write: content must be str, bytes or a function of a binary file, got "
            f"{type(content).__name__}"
        )
    if single_writer:
        tmp = str(path.with_name(path.name + ".tmp"))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    else:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            if isinstance(content, str):
                f.write(content.encode("utf-8"))
            elif isinstance(content, bytes):
                f.write(content)
            else:
                content(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0o600 files (and umask may narrow os.open's)
        if previous is not None and path.is_file():
            os.replace(path, previous)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)
    return path
