"""Which code and which arithmetic made a run, and how: the ``code`` and ``numerics`` of its
record, and the provenance of its ``run.json`` (:func:`provenance`: command, date, machine).

A run's ``result.json`` names

* ``code`` (:func:`code_info`): the package version, the git commit of the checkout the package
  runs from and whether its tracked files differ from that commit (``dirty``), ``package``: the
  content hash of the package's own files (:func:`package_fingerprint`, recorded with or
  without git, so two installed versions of different files are told apart), and the torch
  and avalanche-lib versions;
* ``user_code`` (:func:`user_code`): the content hash of the source of a method of one's own
  and of every plugin added to a run whose class is defined outside this package (absent for a
  run of built-in code only);
* ``numerics`` (:func:`numerics_info`): what decides the arithmetic: the precision and the
  device type that ran, torch's thread count, and whether the CPU has oneDNN's native bf16 path.

The commit is read from the checkout's ``.git`` files (``HEAD``, the branch's ref file or
``packed-refs``), so it needs no ``git`` program and costs a few file reads; ``dirty`` asks
``git status`` (tracked files only: run folders written into the checkout do not make it
dirty) and is ``None`` where no ``git`` program is found. Outside a checkout (an installed
package) both are ``None``. The package counts as running from a checkout when the folder
above ``avalanche_sets/`` holds ``.git``, as in this repository's layout; a wheel installed
into a virtual environment inside some repository is not taken for that repository's code.

A content hash (:func:`tree_fingerprint`) is the SHA-256 of a folder's files, sorted by their
path relative to it, each as its path and its bytes (``__pycache__`` folders and ``*.pyc`` files
left out: Python writes them; nothing else in the package is written while it runs).

This module loads with the standard library alone; :func:`numerics_info` and
:func:`machine_info` import torch where they use it.
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import importlib
import importlib.metadata
import os
import platform
import re
import shutil
import subprocess
import sys
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .. import __version__

__all__ = [
    "package_checkout",
    "git_commit",
    "git_dirty",
    "tree_fingerprint",
    "package_fingerprint",
    "source_fingerprint",
    "user_code",
    "NO_SOURCE",
    "code_info",
    "numerics_info",
    "machine_info",
    "utc_now",
    "command_line",
    "provenance",
]

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


def _digest(files: Iterable[tuple[str, Path]]) -> str:
    """SHA-256 of ``(relative path, file)`` pairs, sorted by path: each path, its length in
    bytes and its bytes (so no two sets of files hash alike by moving bytes between them)."""
    sha = hashlib.sha256()
    for rel, path in sorted(files):
        data = path.read_bytes()
        sha.update(f"{rel}\0{len(data)}\0".encode())
        sha.update(data)
    return sha.hexdigest()


def tree_fingerprint(folder: str | Path, *, python_only: bool = False) -> str:
    """The content hash of every file under ``folder`` (only its ``.py`` files when
    ``python_only``), ``__pycache__`` folders and ``*.pyc`` files left out (see the module's
    docstring)."""
    folder = Path(folder)
    files = []
    for where, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in names:
            if name.endswith(".pyc") or (python_only and not name.endswith(".py")):
                continue
            path = Path(where) / name
            files.append((path.relative_to(folder).as_posix(), path))
    return _digest(files)


def _package_folder() -> Path:
    return Path(__file__).resolve().parents[1]


@functools.lru_cache(maxsize=1)
def package_fingerprint() -> str:
    """The content hash of the ``avalanche_sets`` package this process runs (every file under
    its folder: :func:`tree_fingerprint`), computed once per process."""
    return tree_fingerprint(_package_folder())


NO_SOURCE = "(no source file)"
"""The :func:`user_code` value of code that has no source file to hash (a class typed into an
interactive session or a notebook, a compiled module): such a run is recorded and warned about,
and a finished run of it is never taken for the same run (nothing says its code is unchanged)."""


def _source_unit(module_name: str) -> tuple[str, Path | None, bool]:
    """``(name, path, is_folder)``: what :func:`source_fingerprint` hashes for a module.

    A module of a package stands for its top-level package (the outermost enclosing package
    with a file of its own, so a namespace package is passed by): its folder's ``.py`` files.
    A top-level module stands for its file; ``__main__`` for the script that runs (``python -m
    pkg.mod`` is ``pkg.mod``). ``path`` is ``None`` where there is no source file.
    """
    if module_name == "__main__":
        main = sys.modules.get("__main__")
        spec = getattr(main, "__spec__", None)
        if spec is not None and spec.name and spec.name != "__main__":
            return _source_unit(spec.name)
        file = getattr(main, "__file__", None)
        return "__main__", (Path(file).resolve() if file else None), False
    parts = module_name.split(".")
    for i in range(1, len(parts) + 1):
        name = ".".join(parts[:i])
        try:
            module = sys.modules.get(name) or importlib.import_module(name)
        except ImportError:
            return name, None, False
        file = getattr(module, "__file__", None)
        if not file:  # a namespace package: look further down
            continue
        path = Path(file).resolve()
        if hasattr(module, "__path__"):  # a regular package: its folder
            return name, path.parent, True
        if path.suffix != ".py":  # compiled: no source to hash
            return name, None, False
        return name, path, False
    return module_name, None, False


def source_fingerprint(module_name: str) -> tuple[str, str]:
    """``(name, hash)`` of the source a module belongs to (:func:`_source_unit`): the content
    hash of its top-level package's ``.py`` files, of its own file, or of the running script
    for ``__main__``; the hash is :data:`NO_SOURCE` where no source file exists."""
    name, path, folder = _source_unit(module_name)
    if path is None or not path.exists():
        return name, NO_SOURCE
    if folder:
        return name, tree_fingerprint(path, python_only=True)
    return name, _digest([(path.name, path)])


def _outside_package(module_name: str) -> bool:
    return module_name.split(".")[0] != __name__.split(".")[0]


def user_code(method: str, plugins: Iterable[object] = ()) -> dict[str, str]:
    """The ``user_code`` of a run: ``{source name: content hash}`` of the code of one's own that
    defines it, read from the files as they are when it is called (the run's start).

    Counted: a method of one's own (``package.module:Class`` or an installed entry point whose
    module lies outside this package: the module it names and the module that defines the
    class) and every plugin in ``plugins`` whose class is defined
    outside this package, each by :func:`source_fingerprint` (a module of a package counts its
    whole top-level package, so a helper module it imports from that package counts too).
    Empty for built-in methods with built-in plugins (the package's own hash is in
    :func:`code_info`). Code without a source file is recorded as :data:`NO_SOURCE`, with a
    warning.
    """
    from ..methods import is_custom_method, method_class, method_target

    modules: list[str] = []
    if is_custom_method(method):
        modules.append(method_target(method).partition(":")[0])
        modules.append(method_class(method).__module__)
    modules += [type(p).__module__ for p in plugins]
    out: dict[str, str] = {}
    for module in modules:
        if not _outside_package(module):
            continue
        name, digest = source_fingerprint(module)
        if digest == NO_SOURCE and name not in out:
            warnings.warn(
                f"the code of module {module!r} has no source file to fingerprint: the run "
                "records it as not fingerprinted, and a finished run of it is never taken for "
                "the same run again; fix: define it in a .py file",
                stacklevel=2,
            )
        out[name] = digest
    return dict(sorted(out.items()))


@functools.lru_cache(maxsize=1)
def code_info() -> dict[str, Any]:
    """The ``code`` of a record this process writes (computed once per process)::

        {"version", "commit", "dirty", "package", "torch", "avalanche"}

    ``commit`` and ``dirty`` are ``None`` outside a checkout (:func:`package_checkout`);
    ``package`` (:func:`package_fingerprint`) is recorded in and outside a checkout.
    """
    top = package_checkout()
    return {
        "version": __version__,
        "commit": None if top is None else git_commit(top),
        "dirty": None if top is None else git_dirty(top),
        "package": package_fingerprint(),
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


def machine_info() -> dict[str, Any]:
    """The machine a number was measured on: CPU model and cores, torch threads, GPU, versions."""
    import torch  # see the module's docstring

    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "platform": platform.platform(),
    }


def utc_now() -> str:
    """The current UTC time, ISO 8601 to the second (the ``date`` of every record)."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def command_line() -> str:
    """The command line of this process, with the program's name instead of its path."""
    if not sys.argv:
        return ""
    prog = Path(sys.argv[0]).name
    if prog == "__main__.py":  # python -m avalanche_sets
        prog = f"python -m {Path(sys.argv[0]).parent.name}"
    return " ".join([prog, *sys.argv[1:]])


def provenance(*, command: str | None = None, **extra: Any) -> dict[str, Any]:
    """How a result was made: ``{"command", "date", "machine", "code", **extra}``.

    The one builder of provenance: a run's ``run.json`` and every benchmark script's summary
    use it. ``command`` defaults to :func:`command_line`; ``code`` is
    :func:`code_info` (version, commit, dirty, package, torch, avalanche).
    """
    return {
        "command": command_line() if command is None else command,
        "date": utc_now(),
        "machine": machine_info(),
        "code": code_info(),
        **extra,
    }
