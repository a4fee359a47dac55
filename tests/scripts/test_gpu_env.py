"""``scripts/gpu_env.sh``: the set-up of the offline GPU machine.

Only what runs offline and fast is tested here: ``list`` (the first-level requirements that
``fetch`` resolves, read from ``pyproject.toml``), the script's syntax and its usage message.
``fetch`` needs a package registry and ``install`` the GPU image, so neither runs in the suite.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_env.sh"
TORCH_FAMILY = re.compile(r"^(torch|torchvision|torchaudio|triton|nvidia-.*)$")
BASH = shutil.which("bash")


def canon(name: str) -> str:
    """PEP 503 normalised package name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def req_name(req: str) -> str:
    return canon(re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req).group(1))


def run(*args: str, **env: str) -> subprocess.CompletedProcess:
    assert BASH, "bash is needed to test scripts/gpu_env.sh"
    base = {k: v for k, v in os.environ.items() if not k.startswith("GPU_ENV_")}
    return subprocess.run(
        [BASH, str(SCRIPT), *args],
        cwd=ROOT,
        env={**base, "PYTHON": sys.executable, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def listed(**env: str) -> list[str]:
    proc = run("list", **env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines and all(line.strip() == line and line for line in lines), proc.stdout
    return lines


def default_skip() -> set[str]:
    """The script's built-in list of the packages the GPU image has."""
    m = re.search(r'^DEFAULT_SKIP="([^"]*)"', SCRIPT.read_text(), re.M)
    assert m, "DEFAULT_SKIP not found in scripts/gpu_env.sh"
    return {canon(n) for n in m.group(1).split()}


def project_dependencies() -> list[str]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]["dependencies"]


def test_syntax():
    assert BASH, "bash is needed to test scripts/gpu_env.sh"
    proc = subprocess.run([BASH, "-n", str(SCRIPT)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_list_covers_every_dependency():
    names = {req_name(r) for r in listed()}
    skip = default_skip()
    assert skip, "the skip list is empty"
    for req in project_dependencies():
        n = req_name(req)
        assert n in names or n in skip or TORCH_FAMILY.match(n), f"{req} neither listed nor skipped"
    # and nothing beyond them: every run-time dependency is in pyproject.toml
    assert names <= {req_name(r) for r in project_dependencies()}, names


def test_list_never_names_the_torch_family_nor_the_image_packages():
    names = [req_name(r) for r in listed()]
    assert not [n for n in names if TORCH_FAMILY.match(n)], names
    assert not set(names) & default_skip(), names


def test_skip_list_override():
    # GPU_ENV_SKIP replaces the built-in list; the torch family stays out regardless
    names = {req_name(r) for r in listed(GPU_ENV_SKIP="")}
    assert {"numpy", "scipy", "matplotlib"} <= names
    assert not [n for n in names if TORCH_FAMILY.match(n)], names
    names = {req_name(r) for r in listed(GPU_ENV_SKIP="numpy,scipy pillow tqdm matplotlib cvxpy")}
    assert "cvxpy" not in names and "pot" in names


def test_unknown_subcommand_fails_with_usage():
    proc = run("frobnicate")
    assert proc.returncode != 0
    assert "usage:" in proc.stderr and "frobnicate" in proc.stderr
    proc = run()
    assert proc.returncode != 0 and "usage:" in proc.stderr
