"""``scripts/install.sh`` (``make install``) installs the torch build the README names: by
default the pinned releases from pip's own indexes, with ``TORCH_INDEX`` PyTorch's CPU wheels of
the same releases, exactly the README's CPU-only command.

The script runs for real against a stand-in for the environment's ``python`` that records every
call (and says torch is missing), so nothing is installed.
"""

from __future__ import annotations

import os
import re
import shlex
import stat
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"

_FAKE_PYTHON = """#!/usr/bin/env bash
printf '%s\\n' "$*" >> "$(dirname "$0")/calls.txt"
case "$*" in *"import torch, torchvision; assert"*) exit 1;; esac
"""


def torch_install(tmp_path: Path, **env: str) -> list[str]:
    """The arguments of the ``pip install`` of torch that install.sh runs."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(_FAKE_PYTHON)
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    environ = {k: v for k, v in os.environ.items() if k != "TORCH_INDEX"}
    environ.update(VENV=str(venv), AVALANCHE_SETS_CHROMIUM="/bin/sh", **env)  # no apt-get
    subprocess.run(["bash", "scripts/install.sh"], cwd=ROOT, env=environ, check=True)
    calls = (venv / "bin" / "calls.txt").read_text().splitlines()
    (line,) = [c for c in calls if re.search(r"\bpip install .*\btorch==", c)]
    return line.split()[line.split().index("install") + 1 :]


def readme_cpu_command() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    (line,) = [ln for ln in text.splitlines() if ln.startswith("pip install torch==")]
    argv = shlex.split(line, comments=True)
    assert f"--index-url {CPU_INDEX}" in line, line
    return argv[2:]


def test_install_sh_takes_the_pinned_torch_from_pips_indexes(tmp_path):
    script = (ROOT / "scripts" / "install.sh").read_text()
    pins = re.findall(r'^TORCH(?:VISION)?_PIN="(\S+)"', script, flags=re.M)
    assert len(pins) == 2
    args = torch_install(tmp_path)
    assert "--index-url" not in args
    assert [a for a in args if "==" in a] == pins


def test_torch_index_takes_the_readmes_cpu_wheels(tmp_path):
    args = torch_install(tmp_path, TORCH_INDEX=CPU_INDEX)
    assert args[args.index("--index-url") + 1] == CPU_INDEX
    assert sorted(a for a in args if a != "--quiet") == sorted(readme_cpu_command())
