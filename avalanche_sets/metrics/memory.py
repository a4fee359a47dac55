"""Memory of a long run: resident set size over time, and what a Python object graph holds.

SETS streams are long (paper: 72K tasks), so nothing a learner keeps may grow with the number
of tasks seen: episodes are drawn on access, the task memory is a fixed-capacity reservoir of
uint8 episodes and float features, and the metrics keep one record per *evaluation*, never
one per training iteration. The tools here check it:

* :func:`rss_mib`: the process's resident set size now (Linux ``/proc/self/statm``; falls
  back to the peak RSS of :mod:`resource` elsewhere);
* :func:`malloc_mib`: what the C heap has handed out and what it keeps free (glibc), to tell
  a leak (in use grows) from fragmentation (RSS grows, in use does not);
* :func:`reachable_bytes`: bytes reachable from some objects — Python objects, tensor
  storages and numpy buffers, each counted once — to find a container that grows;
* :class:`MemoryProbe`: an Avalanche plugin that samples RSS (and the size of a task memory,
  the number of tasks seen and the evaluator's stored metric values) every ``every`` training
  iterations and after every evaluation.

``tests/test_long_stream_memory.py`` runs a short stream with it and checks that nothing grows;
ORDER over 20,000 tasks, measured once with it, is on the documentation's speed page.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
import resource
import sys
import time
import types
from collections import Counter
from dataclasses import asdict, dataclass

import numpy as np
import torch
from avalanche.core import SupervisedPlugin

__all__ = [
    "rss_mib",
    "malloc_mib",
    "reachable_bytes",
    "ReachableBytes",
    "metric_values_count",
    "find_memory",
    "MemorySample",
    "MemoryProbe",
]

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_mib() -> float:
    """Resident set size of this process now, in MiB.

    Reads ``/proc/self/statm`` (Linux). Where it does not exist, returns the *peak* RSS from
    :func:`resource.getrusage`, which can only grow: still an upper bound for a flatness check.
    """
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * _PAGE / 2**20
    except OSError:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


class _Mallinfo2(ctypes.Structure):
    """glibc's ``struct mallinfo2``."""

    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd",
            "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


_MALLINFO2 = None


def malloc_mib() -> tuple[float, float]:
    """``(in use, free but kept)`` bytes of the C heap in MiB (glibc ``mallinfo2``), all arenas.

    *In use* is what ``malloc`` has handed out and not got back (small blocks plus mmapped
    ones): it grows when memory leaks. *Free but kept* is heap memory the allocator holds for
    reuse: RSS that grows while *in use* stays flat is fragmentation, not a leak. ``(nan,
    nan)`` where glibc's ``mallinfo2`` is not available (other C libraries, glibc < 2.33).
    """
    global _MALLINFO2
    if _MALLINFO2 is None:
        _MALLINFO2 = False
        try:
            fn = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallinfo2
            fn.restype = _Mallinfo2
            _MALLINFO2 = fn
        except (OSError, AttributeError):
            pass
    if not _MALLINFO2:
        return float("nan"), float("nan")
    info = _MALLINFO2()
    return (info.uordblks + info.hblkhd) / 2**20, info.fordblks / 2**20


@dataclass
class ReachableBytes:
    """What :func:`reachable_bytes` found: totals and the largest contributors by type."""

    python_bytes: int
    tensor_bytes: int
    numpy_bytes: int
    n_objects: int
    by_type: dict[str, int]

    @property
    def total(self) -> int:
        return self.python_bytes + self.tensor_bytes + self.numpy_bytes


_SKIP = (
    types.ModuleType,
    type,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.CodeType,
    types.FrameType,
    types.TracebackType,
    types.MethodWrapperType,
    types.WrapperDescriptorType,
    types.MethodDescriptorType,
    types.GetSetDescriptorType,
    types.MemberDescriptorType,
)


def reachable_bytes(*roots, skip: tuple = ()) -> ReachableBytes:
    """Bytes held by everything reachable from ``roots`` (``gc.get_referents``), counted once.

    Python objects count ``sys.getsizeof``; a tensor counts its storage once (shared storages
    and views are not counted twice); a numpy array counts the buffer it owns. Modules,
    classes, functions, code and frames are not followed (they are not data), nor are objects
    of the types in ``skip``.

    Comparing two calls on the same roots (after warm-up, and later) tells whether a container
    grows; ``by_type`` (bytes by type name) says which.
    """
    stop = _SKIP + tuple(skip)
    seen: set[int] = set()
    storages: set[int] = set()
    py = tens = npy = 0
    by_type: Counter[str] = Counter()
    stack = list(roots)
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, stop):
            continue
        seen.add(id(obj))
        name = type(obj).__name__
        if isinstance(obj, torch.Tensor):
            try:
                storage = obj.untyped_storage()
                key = storage.data_ptr()
                if key not in storages:
                    storages.add(key)
                    tens += storage.nbytes()
                    by_type[name] += storage.nbytes()
            except (RuntimeError, NotImplementedError):  # sparse, meta, ...
                pass
        elif isinstance(obj, np.ndarray):
            # ndarrays are not tracked by the gc (no referents): walk to the array that owns
            # the buffer by hand and count that one once.
            root = obj
            while isinstance(root.base, np.ndarray):
                root = root.base
            if root is obj or id(root) not in seen:
                seen.add(id(root))
                npy += root.nbytes
                by_type[name] += root.nbytes
        else:
            try:
                size = sys.getsizeof(obj)
            except TypeError:
                size = 0
            py += size
            by_type[name] += size
        stack.extend(gc.get_referents(obj))
    return ReachableBytes(
        python_bytes=py,
        tensor_bytes=tens,
        numpy_bytes=npy,
        n_objects=len(seen),
        by_type=dict(by_type.most_common()),
    )


def metric_values_count(evaluator) -> int:
    """How many metric values an Avalanche ``EvaluationPlugin`` keeps (``all_metric_results``).

    Avalanche stores every emitted value when ``collect_all=True`` (its default): the count
    grows with every *emission*, so it must not grow during training iterations.
    """
    results = getattr(evaluator, "all_metric_results", None) or {}
    return int(sum(len(xs) for xs, _ in results.values()))


def find_memory(strategy):
    """The strategy's task memory: the first plugin with ``memory_bytes()`` (``None`` if none)."""
    for p in getattr(strategy, "plugins", []):
        if callable(getattr(p, "memory_bytes", None)):
            return p
    return None


@dataclass
class MemorySample:
    """One sample of :class:`MemoryProbe`."""

    iteration: int
    tasks_seen: int
    rss_mib: float
    malloc_in_use_mib: float
    malloc_free_mib: float
    memory_bytes: int
    memory_len: int
    metric_values: int
    gc_objects: int
    seconds: float
    event: str
    experience: int
    evaluations: int

    def to_dict(self) -> dict:
        return asdict(self)


class MemoryProbe(SupervisedPlugin):
    """Samples the process's resident memory along a training stream.

    Before the first training iteration, every ``every`` training iterations and after every
    ``eval`` call, it appends a
    :class:`MemorySample`: the iteration, the number of training tasks seen (episodes of the
    stream, replayed ones not counted), RSS, the C heap in use and free (:func:`malloc_mib`),
    the task memory's ``memory_bytes()`` and length
    (the first plugin that has one, e.g. ORDER's reservoir), the evaluator's stored metric
    values, the number of objects the garbage collector tracks, and the seconds since the
    probe was built. The probe's own list grows by one sample per ``every`` iterations (a few
    hundred bytes each): sample sparsely on long runs.

    Args:
        every: iterations between samples.
        count_objects: also count ``gc.get_objects()`` (a few ms per sample).
        callback: called with each new sample (e.g. to print progress).
    """

    def __init__(self, *, every: int = 50, count_objects: bool = True, callback=None) -> None:
        super().__init__()
        if not isinstance(every, int) or every < 1:
            raise ValueError(f"every must be a positive integer, got {every!r}")
        self.every = every
        self.count_objects = count_objects
        self.callback = callback
        self.samples: list[MemorySample] = []
        self.iterations = 0
        self.tasks_seen = 0
        self.evaluations = 0
        self._start = time.perf_counter()

    def _sample(self, strategy, event: str) -> MemorySample:
        memory = find_memory(strategy)
        exp = getattr(strategy, "experience", None)
        in_use, free = malloc_mib()
        sample = MemorySample(
            iteration=self.iterations,
            tasks_seen=self.tasks_seen,
            rss_mib=rss_mib(),
            malloc_in_use_mib=in_use,
            malloc_free_mib=free,
            memory_bytes=int(memory.memory_bytes()) if memory is not None else 0,
            memory_len=len(memory) if memory is not None else 0,
            metric_values=metric_values_count(getattr(strategy, "evaluator", None)),
            gc_objects=len(gc.get_objects()) if self.count_objects else -1,
            seconds=time.perf_counter() - self._start,
            event=event,
            experience=int(getattr(exp, "current_experience", -1) if exp is not None else -1),
            evaluations=self.evaluations,
        )
        self.samples.append(sample)
        if self.callback is not None:
            self.callback(sample)
        return sample

    def before_training(self, strategy, **kwargs) -> None:
        if not self.samples:  # a reference before the first iteration
            self._sample(strategy, "start")

    def after_training_iteration(self, strategy, **kwargs) -> None:
        self.iterations += 1
        self.tasks_seen += strategy.iteration.n_current  # the stream's tasks, not replayed ones
        if self.iterations % self.every == 0:
            self._sample(strategy, "train")

    def after_eval(self, strategy, **kwargs) -> None:
        self.evaluations += 1
        self._sample(strategy, "eval")
