"""The package as a user installs it: build, check, install the wheel apart, run it (``make wheel-check``).

``make test`` runs the checkout. This runs what ``pip install`` gives a user instead:

1. ``python -m build`` makes the sdist, then the wheel from the sdist (so the sdist is checked to
   hold what building needs); ``twine check --strict`` checks their metadata (the README as the
   long description).
2. Every file git tracks under ``avalanche_sets/`` is in the wheel and in the sdist, and the wheel
   holds no other top-level folder than the package and its ``.dist-info``. A file the package
   reads at run time that is not a ``.py`` needs ``[tool.setuptools.package-data]`` in
   ``pyproject.toml``; left out, it is missing here.
3. A fresh virtual environment (no system site-packages) gets the wheel with its ``test`` extra,
   its dependencies resolved by pip from the wheel's own metadata. Only torch, torchvision and what
   they require are taken from the environment that runs this script (``.venv``): a ``.pth``
   file names a folder of links to exactly those distributions' files (several GB that pip would
   otherwise unpack again), never the folder that holds the checkout's editable install.
4. From a folder outside the checkout: ``avalanche-sets run`` (the installed console script) for
   ORDER and Semi-ER on a tiny stream, then a smoke subset of the tests, copied out of the
   checkout, whose ``conftest.py`` refuses to run unless ``avalanche_sets`` is imported from the
   fresh environment's site-packages and no ``sys.path`` entry lies inside the checkout.

Exits 1 at the first step that fails, naming it. ``--keep DIR`` keeps the work folder (the
built files, the environment, the runs) in ``DIR`` instead of a temporary one.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Iterable, Sequence
from importlib import metadata
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

__all__ = [
    "PACKAGE",
    "SMOKE_TESTS",
    "TINY",
    "WheelCheckError",
    "archive_problems",
    "distribution_closure",
    "link_distributions",
    "package_files",
    "sdist_members",
    "wheel_members",
]

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "avalanche_sets"
#: The distributions taken from the running environment instead of being installed again.
LINKED_ROOTS = ("torch", "torchvision")
#: The command line's tiny stream (as ``tests/cli/test_cli.py``'s): two domains, four tasks each.
TINY = [
    "--set", "tasks_per_domain=4", "--set", "n_test_episodes=2",
    "--set", "n_query=2", "--set", "n_unlabeled=2", "--set", "n_ood=4", "--set", "width=4",
    "--set", "domains=['shapes','strokes']", "--set", "eval_mb_size=2",
]  # fmt: skip
#: ORDER, a continual baseline, and the two MAML meta-learners (the package's own MAML step).
CLI_METHODS = ("order", "semi-er", "anil", "lst")
#: Test files run against the installed package: the command line (every subcommand's help, bad
#: input, a tiny run, a sweep and a table), the presets, a method of one's own (package.module:
#: factory), and the lazy names of ``avalanche_sets.data`` read from the installed source.
SMOKE_TESTS = (
    "tests/cli/test_cli.py",
    "tests/test_presets.py",
    "tests/test_custom_methods.py",
    "tests/data/test_package.py",
)
#: The smoke tests' ``conftest.py``: where ``avalanche_sets`` comes from, checked in the process
#: that runs them.
SMOKE_CONFTEST = '''\
"""Refuse to test anything but the installed package (written by scripts/wheel_check.py)."""

import os
import sys
from pathlib import Path

import pytest

import avalanche_sets

SITE = Path(os.environ["WHEEL_CHECK_SITE"]).resolve()
CHECKOUT = Path(os.environ["WHEEL_CHECK_CHECKOUT"]).resolve()
HERE = Path(avalanche_sets.__file__).resolve()


def pytest_report_header(config):
    return f"avalanche_sets imported from {HERE}"


def pytest_sessionstart(session):
    if not HERE.is_relative_to(SITE):
        raise pytest.UsageError(f"avalanche_sets comes from {HERE}, not from {SITE}")
    inside = [p for p in sys.path if Path(p or ".").resolve().is_relative_to(CHECKOUT)]
    if inside:
        raise pytest.UsageError(f"sys.path reaches into the checkout {CHECKOUT}: {inside}")
'''


class WheelCheckError(RuntimeError):
    """A step of the check failed; the message says which and what was wrong."""


def package_files(checkout: Path) -> set[str]:
    """The files under ``checkout/avalanche_sets`` that git tracks (paths relative to
    ``checkout``, with ``/``); without git, every file there but ``__pycache__``."""
    if (checkout / ".git").exists() and shutil.which("git"):
        out = subprocess.run(
            ["git", "-C", str(checkout), "ls-files", "-z", "--", PACKAGE],
            capture_output=True,
            text=True,
            check=True,
        )
        return {name for name in out.stdout.split("\0") if name}
    return {
        path.relative_to(checkout).as_posix()
        for path in (checkout / PACKAGE).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }


def wheel_members(wheel: Path) -> set[str]:
    """The file names inside a wheel."""
    with zipfile.ZipFile(wheel) as archive:
        return {name for name in archive.namelist() if not name.endswith("/")}


def sdist_members(sdist: Path) -> set[str]:
    """The file names inside an sdist, without its ``<name>-<version>/`` folder."""
    with tarfile.open(sdist) as archive:
        return {
            m.name.split("/", 1)[1] for m in archive.getmembers() if m.isfile() and "/" in m.name
        }


def archive_problems(expected: Iterable[str], wheel: set[str], sdist: set[str]) -> list[str]:
    """What is wrong with the built files: a package file missing from the wheel or from the
    sdist, or a top-level folder of the wheel that is neither the package nor its metadata."""
    problems = [f"missing from the wheel: {name}" for name in sorted(set(expected) - wheel)]
    problems += [f"missing from the sdist: {name}" for name in sorted(set(expected) - sdist)]
    tops = {name.split("/", 1)[0] for name in wheel}
    problems += [
        f"the wheel holds {top}/, which is not part of the package"
        for top in sorted(tops)
        if top != PACKAGE and not top.endswith(".dist-info")
    ]
    return problems


def distribution_closure(roots: Sequence[str]) -> list[metadata.Distribution]:
    """The installed distributions ``roots`` and everything they require, with the extras they
    name (``cuda-toolkit[cublas,...]``), markers evaluated for this interpreter; each once."""
    found: dict[str, metadata.Distribution] = {}
    done: set[tuple[str, str]] = set()
    todo = [(name, "") for name in roots]
    while todo:
        name, extra = todo.pop()
        name = canonicalize_name(name)
        if (name, extra) in done:
            continue
        done.add((name, extra))
        if name not in found:
            try:
                found[name] = metadata.distribution(name)
            except metadata.PackageNotFoundError as exc:
                raise WheelCheckError(
                    f"{name} (required by {', '.join(roots)}) is not installed"
                ) from exc
        for text in found[name].requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": extra}):
                todo += [(req.name, "")] + [(req.name, e) for e in sorted(req.extras)]
    return list(found.values())


def link_distributions(dists: Iterable[metadata.Distribution], dest: Path, checkout: Path) -> int:
    """Link the top-level files and folders of ``dists`` (as their ``RECORD`` lists them) into
    ``dest``; returns how many. Refuses a link into the package, or into ``checkout`` outside
    this interpreter's environment (which may itself sit in the checkout, as ``.venv`` does)."""
    dest.mkdir(parents=True, exist_ok=True)
    env = Path(sys.prefix).resolve()
    count = 0
    for dist in dists:
        site = Path(dist.locate_file("")).resolve()
        tops = {Path(f).parts[0] for f in dist.files or () if not str(f).startswith("..")}
        for top in sorted(tops - {"__pycache__"}):
            source = site / top
            real = source.resolve()
            if top.split(".")[0] == PACKAGE or (
                real.is_relative_to(checkout) and not real.is_relative_to(env)
            ):
                raise WheelCheckError(f"{dist.name} would link {source} into the environment")
            if source.exists() and not (dest / top).exists():
                (dest / top).symlink_to(source)
                count += 1
    return count


def _pytest_ini(checkout: Path) -> str:
    """The checkout's pytest options, less ``pythonpath`` and ``testpaths`` (which name the
    checkout's folders), as a ``pytest.ini``."""
    options = tomllib.loads((checkout / "pyproject.toml").read_text())["tool"]["pytest"]
    options = {
        k: v for k, v in options["ini_options"].items() if k not in {"pythonpath", "testpaths"}
    }
    options["addopts"] = f"{options.get('addopts', '')} -p no:cacheprovider".strip()
    lines = ["[pytest]"]
    for key, value in options.items():
        values = value if isinstance(value, list) else [value]
        lines.append(f"{key} =" + "".join(f"\n    {v}" for v in values))
    return "\n".join(lines) + "\n"


def _run(argv: Sequence[str | Path], *, cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run ``argv``; its output on failure, as a :class:`WheelCheckError`."""
    shown = " ".join(str(a) for a in argv)
    print(f"  $ {shown}", flush=True)
    done = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise WheelCheckError(f"{shown} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def _clean_env(venv: Path) -> dict[str, str]:
    """This process's environment for a command of ``venv``: its ``bin`` first on ``PATH``, no
    variable that would point Python elsewhere, one torch thread."""
    env = {
        k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"}
    }
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def check(checkout: Path, work: Path) -> None:
    """Every step of the module's docstring, in ``work``; raises :class:`WheelCheckError`."""
    checkout = checkout.resolve()
    if work.resolve().is_relative_to(checkout):
        raise WheelCheckError(f"the work folder {work} must lie outside the checkout {checkout}")
    dist, venv, outside = work / "dist", work / "venv", work / "outside"
    outside.mkdir(parents=True)

    step = _Steps()
    with step("build the sdist, then the wheel from it"):
        _run([sys.executable, "-m", "build", "--outdir", dist, checkout], cwd=checkout)
        (wheel,) = dist.glob("*.whl")
        (sdist,) = dist.glob("*.tar.gz")
    with step("twine check --strict"):
        _run([sys.executable, "-m", "twine", "check", "--strict", wheel, sdist], cwd=work)
    with step("package files in the wheel and the sdist"):
        expected = package_files(checkout)
        problems = archive_problems(expected, wheel_members(wheel), sdist_members(sdist))
        if problems:
            raise WheelCheckError(
                "\n".join(problems) + "\n(a file that is not .py needs "
                "[tool.setuptools.package-data] in pyproject.toml)"
            )
        print(f"  {len(expected)} package files in both")

    with step("fresh environment with the wheel and its test extra"):
        _run([sys.executable, "-m", "venv", venv], cwd=work)
        env = _clean_env(venv)
        purelib = _run(
            [
                venv / "bin" / "python",
                "-c",
                "import sysconfig; print(sysconfig.get_path('purelib'))",
            ],
            cwd=outside,
            env=env,
        ).strip()
        linked = distribution_closure(LINKED_ROOTS)
        n = link_distributions(linked, work / "torch-site", checkout)
        (Path(purelib) / "torch_from_dev_env.pth").write_text(f"{work / 'torch-site'}\n")
        print(f"  torch from the running environment: {len(linked)} distributions, {n} links")
        _run(
            # --no-compile: the runs below compile what they import; compiling all of ~1 GB made
            # this step 307 s instead of 182 s here (a loaded 2-core machine)
            [
                venv / "bin" / "python",
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-compile",
                f"{wheel}[test]",
            ],
            cwd=outside,
            env=env,
        )
        where = _run(
            [venv / "bin" / "python", "-c", f"import {PACKAGE}; print({PACKAGE}.__file__)"],
            cwd=outside,
            env=env,
        ).strip()
        print(f"  {PACKAGE} imported from {where}")
        if not Path(where).resolve().is_relative_to(Path(purelib).resolve()):
            raise WheelCheckError(f"{PACKAGE} imports from {where}, not from {purelib}")

    for method in CLI_METHODS:
        with step(f"avalanche-sets run --method {method} on a tiny stream"):
            runs = outside / "runs"
            out = _run(
                [venv / "bin" / "avalanche-sets", "run", "--method", method, "--out", runs, *TINY],
                cwd=outside,
                env=env,
            )
            print("  " + "\n  ".join(out.strip().splitlines()[-3:]))
            if not list((runs / method).rglob("result.json")):
                raise WheelCheckError(f"no result.json under {runs / method}")

    with step("smoke tests against the installed package"):
        smoke = work / "smoke"
        for name in SMOKE_TESTS:
            (smoke / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(checkout / name, smoke / name)
        (smoke / "conftest.py").write_text(SMOKE_CONFTEST)
        (smoke / "pytest.ini").write_text(_pytest_ini(checkout))
        test_env = {**env, "WHEEL_CHECK_SITE": purelib, "WHEEL_CHECK_CHECKOUT": str(checkout)}
        out = _run([venv / "bin" / "python", "-m", "pytest", *SMOKE_TESTS], cwd=smoke, env=test_env)
        lines = out.strip().splitlines()
        print("  " + "\n  ".join([*(x for x in lines if "imported from" in x), lines[-1]]))
    print(f"wheel check passed in {step.total:.0f} s")


class _Steps:
    """Times and names each step: ``with step("what"):``."""

    def __init__(self) -> None:
        self.total = 0.0
        self._name = ""
        self._start = 0.0

    def __call__(self, name: str) -> _Steps:
        self._name = name
        return self

    def __enter__(self) -> None:
        print(f"[wheel-check] {self._name}", flush=True)
        self._start = time.perf_counter()

    def __exit__(self, kind, exc, tb) -> None:
        took = time.perf_counter() - self._start
        self.total += took
        if exc is None:
            print(f"  ok ({took:.1f} s)", flush=True)
        elif isinstance(exc, WheelCheckError):
            raise WheelCheckError(f"step '{self._name}' failed: {exc}") from exc


def main(argv: Sequence[str] | None = None) -> int:
    """Run the check; 0 when it passes, 1 (with the failing step and its output) when not."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--keep", type=Path, help="work in this (new or empty) folder and keep it")
    args = parser.parse_args(argv)
    if args.keep is not None and args.keep.exists() and any(args.keep.iterdir()):
        parser.error(f"--keep {args.keep}: the folder is not empty; name a new one")
    work = args.keep or Path(tempfile.mkdtemp(prefix="wheel-check-"))
    try:
        check(ROOT, work)
    except WheelCheckError as exc:
        print(f"[wheel-check] FAILED: {exc}", file=sys.stderr)
        return 1
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
