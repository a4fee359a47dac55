"""How often one ORDER training iteration reads a tensor's value on the host.

On a GPU every such read (``.item()``, ``float()``, ``bool()``, ``.tolist()``, ``.cpu()``,
``.numpy()``, a boolean-mask index, ``nonzero``) waits for the device to finish its queue. The
count is taken on a CPU run, where the same calls happen, over one iteration after warm-up
(replay, OOD split, MI and OT all active), counting only calls made by the package's code.

What remains on the CPU default path, 4 counted calls (3 reads, 2 of them of the device's
values on a GPU):

* ``functional/ot.py`` (``cpu`` then ``numpy``: one copy of cost and mask together): the
  exact OT plan is solved on the host (``linear_sum_assignment``); ``ot_solver="sinkhorn"``
  runs a fixed number of sweeps on the device and reads nothing.
* ``replay.py`` (``tolist``): the episode indices of the current tasks, which the memory
  stores instead of their images. Counted here, but no synchronisation on a GPU: they live in
  the batch's oracle, which stays on the host when the batch moves (``EpisodeBatch.to``).
* ``template.py`` (``bool``): the one finite check of the loss, every gradient and the
  support labels before the optimiser step. With a fused optimiser (a CUDA run's default) the
  check stays on the device and the optimiser skips a bad step there
  (``tests/training/test_deferred_check.py``).

``N`` comes from the preset (``PrototypicalModel.n_way``): the labels are checked on the device.
Every plugin works on fixed-shape, masked sets (``U_id`` is a mask, never a cut), so no size is
read either.
"""

from __future__ import annotations

import collections
import contextlib
import sys
from pathlib import Path

import torch
from avalanche.training.plugins import EvaluationPlugin

import avalanche_sets
from avalanche_sets import run_sets
from avalanche_sets.methods import build_strategy
from avalanche_sets.presets import resolve_preset
from avalanche_sets.runs.experiment import build_benchmark

torch.set_num_threads(1)

PACKAGE = str(Path(avalanche_sets.__file__).parent)
PRESET = resolve_preset(
    "quick", image_size=16, n_blocks=2, width=4, n_way=2, n_shot=1, n_query=2, n_unlabeled=2,
    n_ood=2, tasks_per_domain=12, n_test_episodes=2, n_val_episodes=2, mem_size=3,
    domains=["shapes"], ood=["rings"], eval_mb_size=4, threads=1,
)  # fmt: skip
#: The iteration measured: the memory is full and replays, every plugin has run before.
MEASURED = 4
#: Host reads of the package per ORDER iteration at this shape.
BOUND = 4

_READS = ("item", "__float__", "__bool__", "__int__", "tolist", "cpu", "numpy", "nonzero")


def _caller_in_package() -> str | None:
    frame = sys._getframe(2)
    name = frame.f_code.co_filename
    return f"{Path(name).name}:{frame.f_lineno}" if name.startswith(PACKAGE) else None


@contextlib.contextmanager
def counting_host_reads():
    """Count, by ``file:line`` of the package, calls that read a tensor's value on the host."""
    counts: collections.Counter[str] = collections.Counter()
    originals = {name: getattr(torch.Tensor, name) for name in _READS}
    getitem = torch.Tensor.__getitem__
    nonzero = torch.nonzero

    def wrap(name, fn):
        def counted(*args, **kwargs):
            where = _caller_in_package()
            if where is not None:
                counts[f"{name} {where}"] += 1
            return fn(*args, **kwargs)

        return counted

    def masked_getitem(self, index):
        items = index if isinstance(index, tuple) else (index,)
        if any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in items):
            where = _caller_in_package()
            if where is not None:
                counts[f"mask-index {where}"] += 1
        return getitem(self, index)

    try:
        for name, fn in originals.items():
            setattr(torch.Tensor, name, wrap(name, fn))
        torch.Tensor.__getitem__ = masked_getitem
        torch.nonzero = wrap("nonzero", nonzero)
        yield counts
    finally:
        for name, fn in originals.items():
            setattr(torch.Tensor, name, fn)
        torch.Tensor.__getitem__ = getitem
        torch.nonzero = nonzero


def host_reads_of_one_iteration() -> collections.Counter[str]:
    strategy = build_strategy("order", PRESET, seed=0, evaluator=EvaluationPlugin())
    measured: collections.Counter[str] = collections.Counter()
    stack = contextlib.ExitStack()
    counts: list[collections.Counter[str]] = []
    before, after = strategy._before_training_iteration, strategy._after_training_iteration

    def start(**kwargs):
        if strategy.exp_iteration == MEASURED:
            counts.append(stack.enter_context(counting_host_reads()))
        return before(**kwargs)

    def stop(**kwargs):
        out = after(**kwargs)
        if strategy.exp_iteration == MEASURED + 1:
            assert strategy.iteration.replayed is not None, "the measured iteration replays"
            measured.update(counts[0])
            stack.close()
        return out

    strategy._before_training_iteration = start
    strategy._after_training_iteration = stop
    run_sets(strategy, build_benchmark(PRESET, seed=0))
    return measured


def test_one_order_iteration_reads_the_host_a_bounded_number_of_times():
    counts = host_reads_of_one_iteration()
    total = sum(counts.values())
    assert total > 0
    assert total <= BOUND, f"{total} host reads per ORDER iteration (bound {BOUND}): " + ", ".join(
        f"{k} x{v}" for k, v in counts.most_common()
    )
