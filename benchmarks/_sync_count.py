"""Count, on a CPU run, the host synchronisations the package's code would make on a GPU.

A CUDA run waits for the device's queue to drain whenever the host needs a value computed on
the device, and whenever a tensor built from host memory is copied to the device without
``non_blocking`` from pinned memory (PyTorch follows a pageable copy with a stream
synchronisation). A CPU run makes the same Python calls, so they are counted here by
patching the calls themselves, attributed to the ``file:line`` of the package that made them
(only calls made directly by the package's code count):

* reads: ``Tensor.item``, ``float()``, ``bool()``, ``int()``, ``tolist``, ``cpu``, ``numpy``,
  ``torch.nonzero`` / ``Tensor.nonzero``, and indexing or assigning with a boolean mask
  (its size is read on the host);
* host→device copies (``h2d``): ``torch.as_tensor`` / ``torch.tensor`` / ``torch.asarray`` of
  host data (a NumPy array, a list, a scalar, or a tensor made from one) given a ``device``;
  and ``Tensor.to(device)`` / ``Tensor.to(other_tensor)`` / ``Tensor.cuda()`` of a tensor made
  from host data (``torch.from_numpy``, or one of those constructors without a device),
  unless the copy is ``non_blocking`` from pinned memory. A host tensor that went through
  another operation first (``torch.from_numpy(a).long().to(device)``) is not followed: such a
  copy is missed.

On the CPU every ``device`` is the CPU, so a constructor given a ``device`` is taken to name
the run's device (on a GPU, the GPU).
"""

from __future__ import annotations

import collections
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

import torch
from torch.utils.weak import WeakIdKeyDictionary

__all__ = ["SyncCounts", "counting_host_syncs", "package_root"]

_READS = ("item", "__float__", "__bool__", "__int__", "tolist", "cpu", "numpy", "nonzero")
_CONSTRUCTORS = ("as_tensor", "tensor", "asarray")


def package_root() -> str:
    """The folder of the imported ``avalanche_sets`` (the package whose calls count)."""
    import avalanche_sets

    return str(Path(avalanche_sets.__file__).parent)


class SyncCounts(collections.Counter):
    """Calls by ``"<kind> <file>:<line>"`` (the file relative to the package), and ``events``:
    every counted call's key in the order made (to cut the counts by iteration)."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[str] = []

    def add(self, key: str) -> None:
        self[key] += 1
        self.events.append(key)


def _names_a_device(args: tuple, kwargs: dict) -> bool:
    """Whether ``Tensor.to(*args, **kwargs)`` names a device (may move the tensor)."""
    if kwargs.get("device") is not None:
        return True
    return any(isinstance(a, (torch.device, str, int, torch.Tensor)) for a in args)


@contextlib.contextmanager
def counting_host_syncs(root: str | None = None) -> Iterator[SyncCounts]:
    """Count the host reads and blocking host→device copies made by the package's code (the
    package at ``root``, by default the imported ``avalanche_sets``) while the context is open;
    yields the :class:`SyncCounts`, filled as calls happen."""
    root = root or package_root()
    counts = SyncCounts()
    host: WeakIdKeyDictionary = WeakIdKeyDictionary()  # tensors made from host data

    def caller() -> str | None:
        frame = sys._getframe(2)
        name = frame.f_code.co_filename
        if not name.startswith(root):
            return None
        return f"{Path(name).relative_to(root).as_posix()}:{frame.f_lineno}"

    def wrap(kind, fn):
        def counted(*args, **kwargs):
            where = caller()
            if where is not None:
                counts.add(f"{kind} {where}")
            return fn(*args, **kwargs)

        return counted

    def has_mask(index) -> bool:
        items = index if isinstance(index, tuple) else (index,)
        return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in items)

    getitem, setitem = torch.Tensor.__getitem__, torch.Tensor.__setitem__

    def masked_getitem(self, index):
        if has_mask(index):
            where = caller()
            if where is not None:
                counts.add(f"mask-index {where}")
        return getitem(self, index)

    def masked_setitem(self, index, value):
        if has_mask(index):
            where = caller()
            if where is not None:
                counts.add(f"mask-index {where}")
        return setitem(self, index, value)

    def is_host_data(data) -> bool:
        return not isinstance(data, torch.Tensor) or data in host

    def constructor(kind, fn):
        def made(data, *args, **kwargs):
            out = fn(data, *args, **kwargs)
            if is_host_data(data):
                if kwargs.get("device") is not None:
                    where = caller()
                    if where is not None:
                        counts.add(f"h2d:{kind} {where}")
                elif isinstance(out, torch.Tensor):
                    host[out] = True
            return out

        return made

    from_numpy = torch.from_numpy

    def counted_from_numpy(array):
        out = from_numpy(array)
        host[out] = True
        return out

    to, cuda = torch.Tensor.to, torch.Tensor.cuda

    def counted_to(self, *args, **kwargs):
        out = to(self, *args, **kwargs)
        if self in host:
            if _names_a_device(args, kwargs):
                pinned_async = kwargs.get("non_blocking", False) and self.is_pinned()
                where = caller()
                if where is not None and not pinned_async:
                    counts.add(f"h2d:to {where}")
            elif out is not self:
                host[out] = True  # a dtype change of host data stays host data
        return out

    def counted_cuda(self, *args, **kwargs):
        if self in host and not (kwargs.get("non_blocking", False) and self.is_pinned()):
            where = caller()
            if where is not None:
                counts.add(f"h2d:cuda {where}")
        return cuda(self, *args, **kwargs)

    reads = {name: getattr(torch.Tensor, name) for name in _READS}
    constructors = {name: getattr(torch, name) for name in _CONSTRUCTORS}
    nonzero = torch.nonzero
    try:
        for name, fn in reads.items():
            setattr(torch.Tensor, name, wrap(name, fn))
        for name, fn in constructors.items():
            setattr(torch, name, constructor(name, fn))
        torch.Tensor.__getitem__ = masked_getitem
        torch.Tensor.__setitem__ = masked_setitem
        torch.nonzero = wrap("nonzero", nonzero)
        torch.from_numpy = counted_from_numpy
        torch.Tensor.to = counted_to
        torch.Tensor.cuda = counted_cuda
        yield counts
    finally:
        for name, fn in reads.items():
            setattr(torch.Tensor, name, fn)
        for name, fn in constructors.items():
            setattr(torch, name, fn)
        torch.Tensor.__getitem__, torch.Tensor.__setitem__ = getitem, setitem
        torch.nonzero = nonzero
        torch.from_numpy = from_numpy
        torch.Tensor.to, torch.Tensor.cuda = to, cuda
