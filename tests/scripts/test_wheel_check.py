"""``scripts/wheel_check.py`` (``make wheel-check``): the parts that decide its verdict.

The whole check builds, installs and runs for minutes, so CI runs it as its own step after the
suite; here are the comparisons it fails on, the environment it borrows torch from, and the
guard that keeps its smoke tests off the checkout.
"""

from __future__ import annotations

import importlib.util
import io
import os
import subprocess
import sys
import tarfile
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("wheel_check", ROOT / "scripts" / "wheel_check.py")
wheel_check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(wheel_check)

PACKAGE_FILES = {"avalanche_sets/__init__.py", "avalanche_sets/data/names.json"}


def _wheel(path: Path, names: list[str]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name in names:
            archive.writestr(name, "x")
    return path


def _sdist(path: Path, names: list[str]) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for name in names:
            info = tarfile.TarInfo(f"avalanche_sets-0.1.0/{name}")
            info.size = 1
            archive.addfile(info, io.BytesIO(b"x"))
    return path


def test_the_package_files_are_what_git_tracks_under_the_package():
    files = wheel_check.package_files(ROOT)
    assert "avalanche_sets/__init__.py" in files and "avalanche_sets/cli.py" in files
    assert all(f.startswith("avalanche_sets/") and "__pycache__" not in f for f in files)
    assert "pyproject.toml" not in files


def test_built_files_holding_every_package_file_pass(tmp_path):
    wheel = _wheel(tmp_path / "a.whl", [*PACKAGE_FILES, "avalanche_sets-0.1.0.dist-info/RECORD"])
    sdist = _sdist(tmp_path / "a.tar.gz", [*PACKAGE_FILES, "pyproject.toml"])
    members = wheel_check.wheel_members(wheel), wheel_check.sdist_members(sdist)
    assert "avalanche_sets/data/names.json" in members[1]  # the sdist's top folder is stripped
    assert wheel_check.archive_problems(PACKAGE_FILES, *members) == []


def test_a_data_file_left_out_of_the_wheel_or_the_sdist_is_named(tmp_path):
    wheel = _wheel(tmp_path / "a.whl", ["avalanche_sets/__init__.py"])
    sdist = _sdist(tmp_path / "a.tar.gz", ["avalanche_sets/__init__.py"])
    problems = wheel_check.archive_problems(
        PACKAGE_FILES, wheel_check.wheel_members(wheel), wheel_check.sdist_members(sdist)
    )
    assert problems == [
        "missing from the wheel: avalanche_sets/data/names.json",
        "missing from the sdist: avalanche_sets/data/names.json",
    ]


def test_a_folder_outside_the_package_in_the_wheel_is_named(tmp_path):
    wheel = _wheel(tmp_path / "a.whl", [*PACKAGE_FILES, "tests/test_cli.py"])
    problems = wheel_check.archive_problems(
        PACKAGE_FILES, wheel_check.wheel_members(wheel), PACKAGE_FILES
    )
    assert problems == ["the wheel holds tests/, which is not part of the package"]


def test_the_borrowed_distributions_are_torch_and_everything_it_requires():
    closure = wheel_check.distribution_closure(wheel_check.LINKED_ROOTS)
    names = {canonicalize_name(d.name) for d in closure}
    assert {"torch", "torchvision"} <= names and "avalanche-sets" not in names
    for dist in closure:  # closed: every requirement that applies, with the extras it names
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                assert canonicalize_name(req.name) in names, (dist.name, text)
                for extra in req.extras:
                    for inner in metadata.distribution(req.name).requires or []:
                        needed = Requirement(inner)
                        if needed.marker is not None and needed.marker.evaluate({"extra": extra}):
                            assert canonicalize_name(needed.name) in names, (req.name, inner)


def test_links_name_the_distributions_files_and_never_the_package(tmp_path):
    dist = metadata.distribution("packaging")
    assert wheel_check.link_distributions([dist], tmp_path / "site", ROOT) >= 2
    linked = {p.name for p in (tmp_path / "site").iterdir()}
    assert "packaging" in linked and any(n.endswith(".dist-info") for n in linked)
    with pytest.raises(wheel_check.WheelCheckError, match="would link"):
        wheel_check.link_distributions(
            [metadata.distribution("avalanche-sets")], tmp_path / "x", ROOT
        )


def test_the_smoke_tests_options_are_the_checkouts_without_its_paths():
    ini = wheel_check._pytest_ini(ROOT)
    assert ini.startswith("[pytest]\n") and "--import-mode=importlib" in ini
    assert "pythonpath" not in ini and "testpaths" not in ini
    assert "ignore:No loggers specified" in ini


def test_the_smoke_tests_refuse_to_run_on_the_checkout(tmp_path):
    """The guard in the smoke tests' conftest.py: with the checkout importable, nothing runs."""
    (tmp_path / "conftest.py").write_text(wheel_check.SMOKE_CONFTEST)
    (tmp_path / "test_nothing.py").write_text("def test_nothing():\n    pass\n")
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "WHEEL_CHECK_SITE": str(tmp_path / "site-packages"),
        "WHEEL_CHECK_CHECKOUT": str(ROOT),
    }
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_nothing.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 4, done.stdout + done.stderr  # pytest's usage error
    assert f"avalanche_sets comes from {ROOT / 'avalanche_sets' / '__init__.py'}" in done.stderr
