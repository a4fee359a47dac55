"""How often one ORDER training iteration makes the host wait for the device.

On a GPU every read of a tensor's value on the host (``.item()``, ``float()``, ``bool()``,
``.tolist()``, ``.cpu()``, ``.numpy()``, a boolean-mask index, ``nonzero``) waits for the device
to finish its queue, and so does every blocking copy of host data to the device (``h2d``:
``torch.as_tensor(numpy, device=...)``, ``.to(device)`` of a tensor made from host data). The
count is taken on a CPU run, where the same calls happen, over one iteration after warm-up
(replay, OOD split, MI and OT all active), counting only calls made by the package's code, with
the counter the benchmark ``benchmarks/gpu_launches.py`` uses
(:func:`benchmarks._sync_count.counting_host_syncs`).

What remains on the CPU default path, 4 counted calls (3 reads, 2 of them of the device's
values on a GPU; no blocking copy to the device):

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

import torch
from avalanche.training.plugins import EvaluationPlugin

from avalanche_sets import run_sets
from avalanche_sets.methods import build_strategy
from avalanche_sets.presets import resolve_preset
from avalanche_sets.runs.experiment import build_benchmark
from benchmarks._sync_count import counting_host_syncs

torch.set_num_threads(1)

PRESET = resolve_preset(
    "quick", image_size=16, n_blocks=2, width=4, n_way=2, n_shot=1, n_query=2, n_unlabeled=2,
    n_ood=2, tasks_per_domain=12, n_test_episodes=2, n_val_episodes=2, mem_size=3,
    domains=["shapes"], ood=["rings"], eval_mb_size=4, threads=1,
)  # fmt: skip
#: The iteration measured: the memory is full and replays, every plugin has run before.
MEASURED = 4
#: Host reads and blocking host-to-device copies of the package per ORDER iteration here.
BOUND = 4


def host_reads_of_one_iteration() -> collections.Counter[str]:
    strategy = build_strategy("order", PRESET, seed=0, evaluator=EvaluationPlugin())
    measured: collections.Counter[str] = collections.Counter()
    stack = contextlib.ExitStack()
    counts: list[collections.Counter[str]] = []
    before, after = strategy._before_training_iteration, strategy._after_training_iteration

    def start(**kwargs):
        if strategy.exp_iteration == MEASURED:
            counts.append(stack.enter_context(counting_host_syncs()))
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


def test_the_exact_ot_plan_makes_no_blocking_copy_to_the_device():
    # the plan comes back from pinned memory without waiting (on the CPU it is there already);
    # the one copy to the host (cost and mask together) is the plan's only wait
    counts = host_reads_of_one_iteration()
    assert not {k: v for k, v in counts.items() if k.startswith("h2d:")}, counts
    assert sum(v for k, v in counts.items() if "functional/ot.py" in k) == 2, counts  # cpu, numpy


def test_copies_from_host_data_to_the_device_are_counted_where_the_package_makes_them():
    import numpy as np

    from avalanche_sets.functional import ot

    # code compiled under a package file's name counts as the package's own calls
    code = compile(
        "a = torch.as_tensor(np.arange(3), device='cpu')\n"  # host data onto the device
        "b = torch.from_numpy(np.arange(3)).to('cpu')\n"  # a host tensor moved
        "c = torch.tensor([1.0]).to(torch.float64).to(torch.zeros(1))\n"  # dtype, then move
        "d = torch.as_tensor(np.arange(3))\n"  # stays on the host: no copy
        "e = torch.zeros(3).to('cpu')\n",  # already the device's: no copy
        ot.__file__,
        "exec",
    )
    with counting_host_syncs() as counts:
        exec(code, {"torch": torch, "np": np})
    assert dict(counts) == {
        "h2d:as_tensor functional/ot.py:1": 1,
        "h2d:to functional/ot.py:2": 1,
        "h2d:to functional/ot.py:3": 1,
    }
    assert counts.events == list(counts)


def test_one_order_iteration_reads_the_host_a_bounded_number_of_times():
    counts = host_reads_of_one_iteration()
    total = sum(counts.values())
    assert total > 0
    assert total <= BOUND, f"{total} host reads per ORDER iteration (bound {BOUND}): " + ", ".join(
        f"{k} x{v}" for k, v in counts.most_common()
    )
