"""Keep freed memory in the process: the CPU step's hidden cost is page faults, not FLOPs.

glibc's ``malloc`` serves every block above its mmap threshold (dynamic, at most 32 MiB) with a
fresh ``mmap`` and returns it to the system on ``free``. A training step of the CPU presets
allocates activations of tens of MiB (a meta-batch of 260 images at 32 px through 32 filters:
17 MiB per bf16 feature map, twice that for the max-pool indices), so every iteration pays
for zero-filling and faulting in those pages again — on a 2-core AMD EPYC this made the
backbone step 1.5× slower at 260 images and 1.8× at 520 (ORDER's meta-batch with its replayed
tasks), i.e. it grew faster than the batch (measured by ``benchmarks/step_speed.py``).

:func:`keep_freed_memory` tells glibc (``mallopt``) to serve large blocks from the heap and
never trim it, so the memory of one step is reused by the next. Numbers are unchanged (only
where memory comes from changes); the process keeps its peak memory until it exits. It is a
no-op off glibc (macOS, Windows, musl) and when ``AVALANCHE_SETS_MALLOC=system`` is set.

The setting is the process's, so a run makes it, never a constructor: every run calls it once
as it starts (:func:`~avalanche_sets.training.run_sets`, hence ``avalanche-sets run`` and
``sweep``, ``run_experiment`` and the benchmark scripts' timed iterations); building a strategy
leaves the process as it was. A script that trains with ``strategy.train`` itself gets it with
``avalanche_sets.training.keep_freed_memory()``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

__all__ = ["keep_freed_memory", "allocator_mode"]

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_MMAP_MAX = -4
_GLIBC_DEFAULT_MMAP_MAX = 65536
_state = {"mode": "system"}


def _libc():
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        libc = ctypes.CDLL(name)
        return libc if hasattr(libc, "mallopt") and hasattr(libc, "gnu_get_libc_version") else None
    except OSError:
        return None


def keep_freed_memory(enabled: bool = True) -> bool:
    """Serve large allocations from a heap that is never trimmed (``enabled``), or go back to
    glibc's steady state after warm-up (``enabled=False``: blocks above 32 MiB mmap'd, heap
    trimmed above 64 MiB). Returns whether the setting was applied (glibc only)."""
    if os.environ.get("AVALANCHE_SETS_MALLOC", "") == "system":
        return False
    libc = _libc()
    if libc is None:
        return False
    if enabled:
        ok = libc.mallopt(_M_MMAP_MAX, 0) and libc.mallopt(_M_TRIM_THRESHOLD, 2**31 - 1)
    else:
        ok = (
            libc.mallopt(_M_MMAP_MAX, _GLIBC_DEFAULT_MMAP_MAX)
            and libc.mallopt(_M_MMAP_THRESHOLD, 32 * 2**20)
            and libc.mallopt(_M_TRIM_THRESHOLD, 64 * 2**20)
        )
        if ok:
            libc.malloc_trim(0)
    if ok:
        _state["mode"] = "kept" if enabled else "system"
    return bool(ok)


def allocator_mode() -> str:
    """``"kept"`` after :func:`keep_freed_memory`, else ``"system"``."""
    return _state["mode"]
