"""Which code and which arithmetic made a run: the ``code`` and ``numerics`` of its record.

A run's ``result.json`` names

* ``code`` (:func:`code_info`): the package version, the git commit of the checkout the package
  runs from and whether its tracked files differ from that commit (``dirty``), the torch and
  avalanche-lib versions, and ``recovered`` (``false`` for every record a run writes; ``true``
  only for records written before this key existed, whose commit was read from the history of
  the repository that holds them, once, by a migration script);
* ``numerics`` (:func:`numerics_info`): what decides the arithmetic: the precision and the
  device type that ran, torch's thread count, and whether the CPU has oneDNN's native bf16 path.

The commit is read from the checkout's ``.git`` files (``HEAD``, the branch's ref file or
``packed-refs``), so it needs no ``git`` program and costs a few file reads; ``dirty`` asks
``git status`` (tracked files only: run folders written into the checkout do not make it
dirty) and is ``None`` where no ``git`` program is found. Outside a checkout (an installed
package) both are ``None``. The package counts as running from a checkout when the folder
above ``avalanche_sets/`` holds ``.git``, as in this repository's layout; a wheel installed
into a virtual environment inside some repository is not taken for that repository's code.

This module loads with the standard library alone; :func:`numerics_info` imports torch.
"""

from __future__ import annotations

import functools
import importlib.metadata
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from .. import __version__

__all__ = ["package_checkout", "git_commit", "git_dirty", "code_info", "numerics_info"]

_HEX40 = re.compile(r"[0-9a-f]{40}")


def package_checkout() -> Path | None:
    """The git work tree this package runs from, or ``None`` (an installed package)."""
    top = Path(__file__).resolve().parents[2]
    return top if (top / ".git").exists() else None


def _git_dir(top: Path) -> Path | None:
    """``top/.git``, or the folder a worktree's ``.git`` file points to."""
    dot = top / ".git"
    if dot.is_dir():
        return dot
    try:
        text = dot.read_text().strip()
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    where = Path(text.split(":", 1)[1].strip())
    return where if where.is_absolute() else (top / where).resolve()


def git_commit(top: str | Path) -> str | None:
    """The commit checked out in the work tree ``top`` (40 hex digits), read from its ``.git``
    files without running git; ``None`` when ``top`` is no work tree or the ref is unreadable."""
    git = _git_dir(Path(top))
    if git is None:
        return None
    try:
        head = (git / "HEAD").read_text().strip()
    except OSError:
        return None
    if not head.startswith("ref:"):
        return head if _HEX40.fullmatch(head) else None
    ref = head.split(":", 1)[1].strip()
    common = git
    if (git / "commondir").is_file():  # a linked worktree keeps its refs in the main .git
        common = (git / (git / "commondir").read_text().strip()).resolve()
    for folder in (git, common):
        try:
            value = (folder / ref).read_text().strip()
        except OSError:
            continue
        if _HEX40.fullmatch(value):
            return value
    try:
        packed = (common / "packed-refs").read_text().splitlines()
    except OSError:
        return None
    for line in packed:
        parts = line.split()
        if len(parts) == 2 and parts[1] == ref and _HEX40.fullmatch(parts[0]):
            return parts[0]
    return None


def git_dirty(top: str | Path) -> bool | None:
    """Whether a tracked file of the work tree ``top`` differs from its commit; ``None`` when
    no ``git`` program is found or it fails (untracked files, such as run folders, do not
    count)."""
    git = shutil.which("git")
    if git is None:
        return None
    try:
        out = subprocess.run(
            [git, "-C", str(top), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return bool(out.stdout.strip())


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.lru_cache(maxsize=1)
def code_info() -> dict[str, Any]:
    """The ``code`` of a record this process writes (computed once per process)::

        {"version", "commit", "dirty", "recovered": False, "torch", "avalanche"}

    ``commit`` and ``dirty`` are ``None`` outside a checkout (:func:`package_checkout`).
    """
    top = package_checkout()
    return {
        "version": __version__,
        "commit": None if top is None else git_commit(top),
        "dirty": None if top is None else git_dirty(top),
        "recovered": False,
        "torch": _version("torch"),
        "avalanche": _version("avalanche-lib"),
    }


def numerics_info(*, device: str, precision: str) -> dict[str, Any]:
    """The ``numerics`` of a run on ``device`` in this process: ``{"precision", "device",
    "threads", "cpu_bf16"}``.

    ``precision``: the precision the run computed in (``"fp32"`` or ``"bf16"``); ``device``: the
    type of the run's torch device (``"cpu"``, ``"cuda"``); ``threads``: torch's thread count now
    (call it after the run set it); ``cpu_bf16``: oneDNN's native bf16 path on this CPU, which
    decides bf16 arithmetic on a CPU (two CPUs with and without it give different bf16 numbers).
    """
    import torch

    from ..models.backbone import bf16_supported

    return {
        "precision": precision,
        "device": device.split(":")[0],
        "threads": torch.get_num_threads(),
        "cpu_bf16": bf16_supported("cpu"),
    }
