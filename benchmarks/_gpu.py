"""Shared helpers of the GPU benchmarks (``gpu_step.py``, ``paper_scale.py``): what GPU made a
number, a clock that waits for the device, the rule that a CPU run is only a smoke test, a
result file rewritten whole after every stage (so a run cut short keeps what it measured), how
busy the GPU was in a profile (inside given windows: the training steps), whether Inductor
replaced the backbone's ATen kernels, and ``torch.compile``'s recompilations made visible."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import torch
from avalanche.core import SupervisedPlugin

__all__ = [
    "BUSY_COUNTS",
    "BUSY_SHARE",
    "StepClock",
    "busy_device_us",
    "compile_counters",
    "device_clock",
    "gpu_arguments",
    "gpu_info",
    "gpu_line",
    "guard_recompiles",
    "inductor_evidence",
    "is_device_work",
    "is_inductor_kernel",
    "results_folder",
    "write_json_atomic",
]


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


def write_json_atomic(path: Path, data) -> None:
    """Write ``data`` as JSON through a temporary file and a rename: a run killed while writing
    (a stage's timeout) leaves the previous whole file, never half of one."""
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    os.replace(tmp, path)


class StepClock(SupervisedPlugin):
    """Wall time of each training iteration (``iteration``) and of the gaps between two
    iterations of one pass (``gap``: waiting for the next meta-batch), read with a clock that
    waits for the device. Put :meth:`head` first in ``strategy.plugins``."""

    def __init__(self, clock) -> None:
        super().__init__()
        self.clock = clock
        self.t: dict[str, list[float]] = defaultdict(list)
        self._end: float | None = None
        self._start = 0.0

    def head(self) -> SupervisedPlugin:
        """The plugin that starts the clock; it must run before every other plugin."""
        outer = self

        class _Start(SupervisedPlugin):
            def before_training_iteration(self, strategy, **kw):
                now = outer.clock()
                if outer._end is not None:
                    outer.t["gap"].append(now - outer._end)
                outer._start = now

        return _Start()

    def before_training_exp(self, strategy, **kw):
        self._end = None  # a new pass: its first gap includes the loader's set-up

    def after_training_iteration(self, strategy, **kw):
        self._end = self.clock()
        self.t["iteration"].append(self._end - self._start)


#: What :func:`busy_device_us` counts, written into a record beside its busy shares (a record
#: without it counted the annotation ranges too: its shares are upper bounds).
BUSY_COUNTS = "kernels, memcpy and memset; annotation ranges left out"

#: What a ``gpu_step`` record's ``gpu_busy`` divides by what (a record without it divided the
#: busy time by the profiled pass's wall time, set-up and profiler included).
BUSY_SHARE = (
    "device-busy ms per iteration inside the profiled steps (busy_ms_per_it) over the median "
    "step of the timed rounds (ms)"
)

#: Kineto's activity types of the device-side ranges that are annotations, not work.
_ANNOTATION_TYPES = frozenset({"gpu_user_annotation", "user_annotation"})


def is_device_work(event) -> bool:
    """Whether a profiler event (or a ``key_averages()`` row) is the GPU doing work: a kernel, a
    memcpy or a memset. A ``record_function`` range (``Optimizer.step#Adam.step``, the
    DataLoader's ``enumerate(DataLoader)#...__next__``) is also drawn on the GPU's timeline, as a
    ``gpu_user_annotation`` with a CUDA device type spanning its first to its last kernel, gaps
    included: it is not work, and counting it would make the GPU look busier than it was."""
    from torch.autograd import DeviceType

    if getattr(event, "device_type", None) != DeviceType.CUDA:
        return False
    if getattr(event, "is_user_annotation", False):
        return False
    return getattr(event, "activity_type", None) not in _ANNOTATION_TYPES


def _merged(spans: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def busy_device_us(events: Iterable, windows: Iterable[tuple[float, float]] | None = None) -> float:
    """Microseconds during which the GPU ran at least one kernel (or copy), from a profile's
    events (``prof.events()``); with ``windows`` (``(start, end)`` on the profile's clock, such
    as the training steps' ranges), only the busy time inside them.

    Only the device's own work counts (:func:`is_device_work`): kernels, memcpy and memset, each
    once, overlapping ones (several streams) merged into one interval; annotation ranges on the
    GPU's timeline are left out. The CPU operator that launched a kernel also reports that
    kernel's time (its ``self_device_time_total``), so summing that column over every row
    counts each kernel twice.
    """
    busy = _merged(
        (e.time_range.start, e.time_range.end)
        for e in events
        if is_device_work(e) and e.time_range.end > e.time_range.start
    )
    if windows is None:
        return float(sum(end - start for start, end in busy))
    total, wins = 0.0, _merged(windows)
    for start, end in busy:
        for w_start, w_end in wins:
            total += max(0.0, min(end, w_end) - max(start, w_start))
    return float(total)


#: Kernel names of ATen's batch-norm and max-pool (the backbone's blocks), and of Inductor's
#: generated kernels: what :func:`inductor_evidence` tells apart.
_ATEN_BACKBONE = ("batch_norm", "max_pool")


def is_inductor_kernel(name: str) -> bool:
    """Whether a kernel's name is one Inductor generates (``triton_poi_fused_...``, a name
    naming ``inductor``, or Inductor's ``_fused_`` infix)."""
    return name.startswith("triton_") or "inductor" in name.lower() or "_fused_" in name


def inductor_evidence(kernel_rows: Iterable) -> dict:
    """Whether ``torch.compile``'s Inductor replaced the backbone's ATen kernels, from every
    kernel row of a profile (``key_averages()`` rows that are device work): calls and ms of
    Inductor's kernels and of ATen's batch-norm and max-pool kernels, a few names of each, and
    ``inductor_replaced_backbone``, true only when ATen's are gone and Inductor's ran."""
    groups = {"inductor": [], "aten_backbone": []}
    for e in kernel_rows:
        if is_inductor_kernel(e.key):
            groups["inductor"].append(e)
        elif any(k in e.key for k in _ATEN_BACKBONE):
            groups["aten_backbone"].append(e)
    out = {
        name: {
            "calls": sum(e.count for e in rows),
            "ms": sum(e.self_device_time_total for e in rows) / 1e3,
            "names": [e.key[:100] for e in rows[:5]],
        }
        for name, rows in groups.items()
    }
    out["inductor_replaced_backbone"] = (
        out["aten_backbone"]["calls"] == 0 and out["inductor"]["calls"] > 0
    )
    return out


def guard_recompiles(limit: int = 64) -> None:
    """Let each compiled function keep up to ``limit`` graphs (varying batch sizes, several
    instances), and make hitting that limit an error: by default ``torch._dynamo`` then falls
    back to eager with only a log line, and a "compiled" timing would silently be an eager one."""
    import torch._dynamo.config as dynamo

    dynamo.recompile_limit = max(int(dynamo.recompile_limit), limit)
    dynamo.accumulated_recompile_limit = max(int(dynamo.accumulated_recompile_limit), 8 * limit)
    dynamo.fail_on_recompile_limit_hit = True


def compile_counters() -> dict:
    """``torch._dynamo``'s counters (frames compiled, graphs, graph breaks, recompilations),
    as plain numbers."""
    from torch._dynamo.utils import counters

    return {group: dict(c) for group, c in counters.items() if c}
