"""Shared helpers of the GPU benchmarks (``gpu_step.py``, ``paper_scale.py``): what GPU made a
number, a clock that waits for the device, and the rule that a CPU run is only a smoke test."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import torch


def gpu_info(device: str) -> dict | None:
    """The GPU behind ``device``: model, driver, CUDA and torch versions, memory, bf16 support
    (``None`` for a CPU device)."""
    dev = torch.device(device)
    if dev.type != "cuda":
        return None
    props = torch.cuda.get_device_properties(dev)
    try:
        driver = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout.strip().splitlines()[0]  # fmt: skip
    except (OSError, subprocess.SubprocessError, IndexError):
        driver = None
    return {
        "name": props.name,
        "driver": driver,
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "capability": f"{props.major}.{props.minor}",
        "memory_gib": round(props.total_memory / 2**30, 1),
        "multiprocessors": props.multi_processor_count,
        "bf16": bool(torch.cuda.is_bf16_supported()),
    }


def device_clock(device: str):
    """``time.perf_counter`` that first waits for the device's queued work (a GPU runs ahead
    of the host: without the wait a timer measures only the launching)."""
    if torch.device(device).type == "cuda":

        def clock() -> float:
            torch.cuda.synchronize()
            return time.perf_counter()

        return clock
    return time.perf_counter


def gpu_arguments(ap) -> None:
    """The options every GPU benchmark takes: ``--device``, ``--out`` and ``--set``."""
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", default=None, help="results folder (required off a GPU)")
    ap.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE",
        help="override a setting of the paper preset (checked like the CLI's --set)",
    )  # fmt: skip


def results_folder(args, default: Path) -> Path:
    """Parse ``args.set`` (in place) and return the results folder, created: ``default`` (the
    committed results folder) only for a GPU run. A CPU run of a GPU benchmark is a smoke test
    of the script and must name its own ``--out``, so that no CPU figure is ever filed as a GPU
    one; ``--device cuda`` on a machine without CUDA is refused."""
    from avalanche_sets.cli import _parse_sets

    args.set = _parse_sets(args.set, grid=False)
    on_gpu = torch.device(args.device).type == "cuda"
    if on_gpu and not torch.cuda.is_available():
        raise SystemExit("--device cuda: this machine has no CUDA device; see the script's help")
    if args.out is None and not on_gpu:
        raise SystemExit(
            f"--device {args.device}: this benchmark measures a GPU; on a CPU it only checks "
            "that the script runs. Pass --out <folder> for such a run (the committed results "
            "are GPU measurements)"
        )
    out = Path(args.out) if args.out is not None else default
    out.mkdir(parents=True, exist_ok=True)
    return out


def gpu_line(gpu: dict | None) -> str:
    """One Markdown line naming the GPU (or saying that none was used)."""
    if gpu is None:
        return "- GPU: none (a CPU smoke run: its times are not GPU figures)\n"
    return (
        f"- GPU: {gpu['name']} ({gpu['memory_gib']} GiB, compute capability "
        f"{gpu['capability']}), driver {gpu['driver']}, CUDA {gpu['cuda']}, torch {gpu['torch']}\n"
    )
