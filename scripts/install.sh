#!/usr/bin/env bash
# Idempotent set-up of avalanche-sets in a virtual environment (default: ./.venv).
#
# Why a script and not just `pip install -e .`:
#   * torch/torchvision are pinned to the releases that lie on this machine kind's disk, so pip
#     takes them locally instead of downloading several GB of CUDA wheels; elsewhere, on a
#     CPU-only machine, TORCH_INDEX=https://download.pytorch.org/whl/cpu takes PyTorch's CPU
#     wheels of the same releases (PyPI's Linux build carries CUDA: 3 GB, 5.5 GB installed);
#   * the documentation's browser test needs Chromium, a system package (installed below).
set -euo pipefail

VENV="${VENV:-.venv}"
PY="${PYTHON:-python3.11}"
TORCH_PIN="torch==2.14.1"
TORCHVISION_PIN="torchvision==0.29.1"
TORCH_INDEX="${TORCH_INDEX:-}"  # the index torch and torchvision come from (empty: pip's own)

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"

if [ ! -x "$VENV/bin/python" ]; then
  echo "[install] creating virtual environment $VENV"
  "$PY" -m venv "$VENV"
fi
pip() { "$VENV/bin/python" -m pip "$@"; }

pip install --quiet --upgrade "pip>=23" "setuptools>=68" wheel

if ! "$VENV/bin/python" -c "import torch, torchvision; assert torch.__version__.startswith('2.14.1')" >/dev/null 2>&1; then
  echo "[install] torch + torchvision (${TORCH_INDEX:-local wheels where available})"
  pip install --quiet ${TORCH_INDEX:+--index-url "$TORCH_INDEX"} "$TORCH_PIN" "$TORCHVISION_PIN"
fi

echo "[install] avalanche-sets and its dependencies (with the test, ray, docs and wandb extras)"
pip install --quiet -e ".[test,ray,docs,wandb]"

# The documentation's browser test opens the built site in Chromium from the system packages
# (Playwright's own browser download does not work offline). Debian/Ubuntu: apt-get.
if [ ! -x "${AVALANCHE_SETS_CHROMIUM:-/usr/bin/chromium}" ]; then
  if command -v apt-get >/dev/null 2>&1; then
    echo "[install] chromium (Debian package) for the documentation's browser test"
    sudo_=""; [ "$(id -u)" -ne 0 ] && sudo_="sudo"
    $sudo_ apt-get install -y -qq chromium >/dev/null 2>&1 || {
      $sudo_ apt-get update -qq >/dev/null && $sudo_ apt-get install -y -qq chromium >/dev/null
    }
  else
    echo "[install] no apt-get: install Chromium yourself and set AVALANCHE_SETS_CHROMIUM to it" >&2
    echo "[install] (or AVALANCHE_SETS_NO_BROWSER=1 to skip the documentation's browser test)" >&2
  fi
fi
echo "[install] done: $("$VENV/bin/python" -c 'import torch, avalanche; print("torch", torch.__version__, "| avalanche", avalanche.__version__)')"
