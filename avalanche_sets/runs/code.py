"""Which code and which arithmetic made a run, and how: the ``code`` and ``numerics`` of its
record, and the provenance of its ``run.json`` (:func:`provenance`: command, date, machine).

A run's ``result.json`` names

* ``code`` (:func:`code_info`): the package version, the git commit of the checkout the package
  runs from and whether its tracked files differ from that commit (``dirty``), ``package``: the
  content hash of the package's own files (:func:`package_fingerprint`, recorded with or
  without git, so two installed versions of different files are told apart), and the torch
  and avalanche-lib versions;
* ``user_code`` (:func:`user_code`): the content hash of the source of a method of one's own,
  of every plugin added to a run whose class is defined outside this package and of every
  module of one's own their files import (an installed distribution: its version, git commit
  and files); absent for a run of built-in code only;
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

import ast
import datetime as _dt
import functools
import hashlib
import importlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import shutil
import site
import subprocess
import sys
import sysconfig
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
    "short_code",
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


def _locate(module_name: str) -> tuple[str, Path, bool] | None:
    """``(name, path, is_folder)`` of the source unit module ``module_name`` belongs to, found
    without running it: a loaded module's file, else where the import system would find it.

    The unit is the outermost enclosing package with a file of its own (a namespace package is
    passed by): its folder; or the top-level module's file. ``None``: nothing is found, or it
    has no file (built in, frozen).
    """
    parts = module_name.split(".")
    for i in range(1, len(parts) + 1):
        name = ".".join(parts[:i])
        module = sys.modules.get(name)
        if module is not None:
            file, package = getattr(module, "__file__", None), hasattr(module, "__path__")
        else:
            try:
                spec = importlib.util.find_spec(name)  # a parent it imports is a namespace
            except (ImportError, ValueError):
                return None
            if spec is None:
                return None
            file = spec.origin if spec.has_location else None
            package = spec.submodule_search_locations is not None
        if not file:
            if package:  # a namespace package: look further down
                continue
            return None
        path = Path(file).resolve()
        return (name, path.parent, True) if package else (name, path, False)
    return None


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
    try:
        importlib.import_module(module_name)  # a method's or plugin's module: loaded already
    except ImportError:
        return module_name, None, False
    unit = _locate(module_name)
    if unit is None:
        return module_name, None, False
    name, path, folder = unit
    if not folder and path.suffix != ".py":  # compiled: no source to hash
        return name, None, False
    return unit


def _unit_files(path: Path, folder: bool) -> list[tuple[str, Path]]:
    """The files a source unit is hashed by: a folder's ``.py`` files (``__pycache__`` left
    out), or the one file, each with its path relative to the folder (a file: its name)."""
    if not folder:
        return [(path.name, path)]
    files = []
    for where, dirs, names in os.walk(path):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in names:
            if name.endswith(".py"):
                file = Path(where) / name
                files.append((file.relative_to(path).as_posix(), file))
    return files


def source_fingerprint(module_name: str) -> tuple[str, str]:
    """``(name, hash)`` of the source a module belongs to (:func:`_source_unit`): the content
    hash of its top-level package's ``.py`` files, of its own file, or of the running script
    for ``__main__``; the hash is :data:`NO_SOURCE` where no source file exists."""
    name, path, folder = _source_unit(module_name)
    if path is None or not path.exists():
        return name, NO_SOURCE
    return name, _digest(_unit_files(path, folder))


def _outside_package(module_name: str) -> bool:
    return module_name.split(".")[0] != __name__.split(".")[0]


@functools.lru_cache(maxsize=1)
def _installation() -> tuple[Path, ...]:
    """The folders of the Python installation: the standard library (this environment's and
    its base's), the site-packages folders and, in a virtual environment, its prefix."""
    found = []
    for base in ({}, {"base": sys.base_prefix, "platbase": sys.base_exec_prefix}):
        paths = sysconfig.get_paths(vars=base or None)
        found += [paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")]
    found += getattr(site, "getsitepackages", list)()
    if sys.prefix != sys.base_prefix:
        found.append(sys.prefix)
    return tuple(sorted({Path(p).resolve() for p in found}))


def _installed(path: Path) -> bool:
    """Whether ``path`` is part of the Python installation (:func:`_installation`, or any
    ``site-packages`` or ``dist-packages`` folder) rather than code of one's own."""
    if {"site-packages", "dist-packages"} & set(path.parts):
        return True
    return any(path.is_relative_to(top) for top in _installation())


def _imported_names(files: Iterable[tuple[str, Path]]) -> set[str]:
    """The modules the ``.py`` files import by absolute name, anywhere in them (relative
    imports stay inside their package: a unit hashed already). ``from a import b`` names ``a``
    and ``a.b`` (``b`` may be a module). A file that does not parse imports nothing."""
    names: set[str] = set()
    for _, path in files:
        if path.suffix != ".py":
            continue
        try:
            tree = ast.parse(path.read_bytes(), filename=str(path))
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names.add(node.module)
                names.update(f"{node.module}.{a.name}" for a in node.names if a.name != "*")
    names.discard("__main__")
    return names


def _distribution_entry(name: str, path: Path, *, root: bool) -> dict[str, str]:
    """``{distribution: "version V[, commit C], files H"}`` of the installed distribution that
    provides unit ``name`` at ``path``: one in the unit's site folder whose ``RECORD`` lists a
    file of it (its ``top_level.txt``, where it has one, must name the module).

    A unit the run names (``root``: the method's or a plugin's module) records its
    distribution; a unit the code of one's own imports records it when it was installed from
    a direct URL (a ``direct_url.json``: a git URL, a local folder or archive; a library from
    a package index is the environment, as torch's version is). ``C``: the
    ``vcs_info.commit_id`` of ``direct_url.json``; ``H``: the content hash of the files its
    ``RECORD`` lists (its metadata folder, bytecode and files outside its site folder, such as
    scripts, left out). Empty where no distribution of the site folder claims the unit.
    """
    parts = name.split(".")
    site_dir = path.parents[len(parts) - 1]
    out = {}
    for dist in importlib.metadata.distributions(path=[str(site_dir)]):
        direct = dist.read_text("direct_url.json")
        top = (dist.read_text("top_level.txt") or parts[0]).split()
        if (direct is None and not root) or parts[0] not in top:
            continue
        files = [
            (f.as_posix(), site_dir / f)
            for f in dist.files or ()
            if f.parts and f.parts[0] != ".." and not f.parts[0].endswith(".dist-info")
            and f.suffix != ".pyc" and (site_dir / f).is_file()
        ]  # fmt: skip
        if not any(file.is_relative_to(path) for _, file in files):
            continue  # another distribution of the folder, or of a shared namespace
        try:
            commit = json.loads(direct or "{}").get("vcs_info", {}).get("commit_id")
        except (ValueError, AttributeError):
            commit = None
        where = f", commit {commit}" if commit else ""
        out[dist.metadata["Name"] or parts[0]] = (
            f"version {dist.version}{where}, files {_digest(files)}"
        )
    return dict(sorted(out.items()))


def _no_source(module: str) -> None:
    warnings.warn(
        f"the code of module {module!r} has no source file to fingerprint: the run "
        "records it as not fingerprinted, and a finished run of it is never taken for "
        "the same run again; fix: define it in a .py file",
        stacklevel=3,
    )


def _code_of(units: list[tuple[str, Path, bool]]) -> dict[str, str]:
    """``{name: hash}`` of the source units a run names (``units``: those of its method and
    plugins) and of every unit of one's own they import, directly or through one another
    (:func:`user_code` says which count)."""
    out: dict[str, str] = {}
    pending = [(unit, True) for unit in units]
    seen: set[str] = set()
    while pending:
        (name, path, folder), root = pending.pop(0)
        if name in seen:
            continue
        seen.add(name)
        if _installed(path):
            found = _distribution_entry(name, path, root=root)
            out.update(found)
            if found or not root:
                continue  # else: an installed unit no distribution claims, hashed as files
        if not path.exists():
            _no_source(name)
            out[name] = NO_SOURCE
            continue
        files = _unit_files(path, folder)
        out[name] = _digest(files)
        for imported in sorted(_imported_names(files)):
            unit = _locate(imported)
            if unit is not None and _outside_package(unit[0]) and unit[0] not in seen:
                pending.append((unit, False))
    return out


def user_code(method: str, plugins: Iterable[object] = ()) -> dict[str, str]:
    """The ``user_code`` of a run: ``{source name: content hash}`` of the code of one's own that
    defines it, read from the files as they are when it is called (the run's start).

    The run names its sources: a method of one's own (``package.module:Class`` or an installed
    entry point whose module lies outside this package: the module it names and the module
    that defines the class) and every plugin in ``plugins`` whose class is defined outside
    this package. Each source is a unit (:func:`source_fingerprint`: a module of a package
    counts its whole top-level package's ``.py`` files, a top-level module its file, a class of
    the running script the script). Counted with them: every unit of one's own that their files
    import by an ``import`` statement, directly or through one another (a flat helper module
    next to the method file, a local package), each by its own hash; not the modules the
    process loaded for other reasons (a test runner's files, the script that starts the run).
    A unit in the Python installation (:func:`_installed`) is an installed distribution,
    recorded by name, version, git commit and files (:func:`_distribution_entry`): the one that
    provides a method or plugin, and one its code imports that was installed from a direct
    URL. Empty for built-in methods with built-in plugins (the package's own hash is in
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
    units = []
    for module in modules:
        if not _outside_package(module):
            continue
        name, path, folder = _source_unit(module)
        if path is None or not path.exists():
            if name not in out:
                _no_source(module)
            out[name] = NO_SOURCE
        else:
            units.append((name, path, folder))
    out.update({k: v for k, v in _code_of(units).items() if out.get(k) != NO_SOURCE})
    return dict(sorted(out.items()))


_LONG_HEX = re.compile(r"\b([0-9a-f]{7})(?:[0-9a-f]{57}|[0-9a-f]{33})\b")


def short_code(value: str) -> str:
    """A ``user_code`` value as a message or a table shows it: every content hash (64 hex
    digits) and commit (40) in it cut to its first 7 digits, as git shortens a commit."""
    return _LONG_HEX.sub(r"\1", value)


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
