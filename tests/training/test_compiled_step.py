"""One training step as one graph: ``torch._dynamo.explain`` of ``EpisodicTemplate.training_step``
finds no graph break for ProtoNet, MSKM and ORDER (with the sync-free OT plan and the fused Adam
of a CUDA run), and ``compile_training_step`` trains with the very numbers of the eager step.

Tiny shapes on the CPU; the CUDA-graph replay of the same step is measured on a GPU
(``benchmarks/gpu_step.py --variants captured``, a stage of ``scripts/gpu_check.sh``).
"""

from __future__ import annotations

from unittest import mock

import pytest
import torch
from avalanche.core import SupervisedPlugin

from avalanche_sets.functional import fused_adam
from avalanche_sets.methods import build_strategy
from avalanche_sets.presets import resolve_preset
from avalanche_sets.runs.experiment import build_benchmark
from avalanche_sets.training import silent_evaluator
from benchmarks._timing import train_range

PRESET = resolve_preset(
    "quick", image_size=16, n_blocks=2, width=4, n_way=2, n_shot=1, n_query=2, n_unlabeled=2,
    n_ood=2, tasks_per_domain=16, n_test_episodes=2, n_val_episodes=2, mem_size=3,
    domains=["shapes"], ood=["rings"], eval_mb_size=4, threads=1, precision="fp32",
)  # fmt: skip
#: What keeps a step free of host reads: ORDER's OT plan on the device.
OPTIONS = {"protonet": {}, "mskm": {}, "order": {"ot_solver": "sinkhorn"}}


class _LossProbe(SupervisedPlugin):
    """Every training iteration's loss, read after the step."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[float] = []

    def after_training_iteration(self, strategy, **kwargs) -> None:
        self.seen.append(float(strategy.loss))


@pytest.fixture(scope="module")
def experience():
    return build_benchmark(PRESET, seed=0).train_stream[0]


def _strategy(method: str, **options):
    torch.manual_seed(0)
    s = build_strategy(method, PRESET, seed=0, evaluator=silent_evaluator(), **options)
    s.optimizer = torch.optim.Adam(s.model.parameters(), lr=PRESET.lr, fused=True)
    return s


def _explain_one_step(strategy, experience, at: int):
    """``torch._dynamo.explain`` of the training step of iteration ``at`` (the memory replays)."""
    train_range(strategy, experience, 0, at)
    found = {}
    step = strategy.training_step

    def explained() -> None:
        with torch._dynamo.config.patch(trace_autograd_ops=True):
            found["explain"] = torch._dynamo.explain(step)()  # it runs the step, too
        torch._dynamo.reset()

    strategy.training_step = explained
    try:
        train_range(strategy, experience, at, at + 1)
    finally:
        del strategy.training_step
    return found["explain"]


@pytest.mark.slow
@pytest.mark.parametrize("method", list(OPTIONS))
def test_one_training_step_is_one_graph(method, experience):
    strategy = _strategy(method, **OPTIONS[method])
    explain = _explain_one_step(strategy, experience, at=4)
    if method == "order":
        assert strategy.iteration.replayed is not None, "the explained step replays"
    reasons = [b.reason.splitlines()[0] for b in explain.break_reasons]
    assert (explain.graph_count, explain.graph_break_count) == (1, 0), reasons


@pytest.mark.slow
def test_the_exact_ot_plan_is_the_only_break_of_orders_step(experience):
    explain = _explain_one_step(_strategy("order"), experience, at=4)
    assert explain.graph_break_count > 0  # the exact plan is solved on the host
    # every break is the host solve's, or its consequence: the backward pass then runs in a
    # frame of its own, on a graph the frames before it built
    sites = {
        frame.filename.rsplit("/", 1)[-1]
        for b in explain.break_reasons
        if not b.reason.startswith("autograd.grad")
        for frame in b.user_stack[-1:]
    }
    assert sites == {"ot.py"}, sites


@pytest.mark.slow
@pytest.mark.parametrize("method", ["mskm", "order"])
def test_the_compiled_step_trains_with_the_eager_steps_numbers(method, experience):
    """Dynamo's graph run by its ``eager`` backend: the same operators as the eager step (the
    first step eager, then Adam's foreach form, as a compiled step runs them), so the same
    weights bit for bit after 8 iterations (ORDER's memory replays from the 2nd)."""
    weights = []
    for compiled in (False, True):
        strategy = _strategy(method, **OPTIONS[method])
        if compiled:
            strategy.compile_training_step(backend="eager")
            train_range(strategy, experience, 0, 8)
        else:  # the first step eager, then the Adam update a compiled step runs (foreach)
            train_range(strategy, experience, 0, 1)
            with mock.patch.object(fused_adam.torch.compiler, "is_compiling", lambda: True):
                train_range(strategy, experience, 1, 8)
        weights.append([p.detach().clone() for p in strategy.model.parameters()])
        torch._dynamo.reset()
    moved = [
        not torch.equal(a, b) for a, b in zip(weights[0], _strategy(method).model.parameters())
    ]
    assert any(moved), "the steps trained"
    for a, b in zip(*weights):
        assert torch.equal(a, b)


@pytest.mark.slow
def test_the_step_compiles_through_aot_autograd(experience):
    """AOTAutograd (what Inductor and CUDA graphs compile) functionalises the whole step, Adam's
    update included (its foreach form): the run's losses follow the eager run's."""
    losses = []
    for compiled in (False, True):
        strategy = _strategy("mskm")
        if compiled:
            strategy.compile_training_step(backend="aot_eager")
        probe = _LossProbe()
        strategy.plugins.append(probe)
        train_range(strategy, experience, 0, 6)
        losses.append(probe.seen)
        torch._dynamo.reset()
    assert len(losses[1]) == 6
    torch.testing.assert_close(losses[1], losses[0], rtol=1e-3, atol=1e-4)


def test_compiling_the_step_needs_a_fused_optimiser():
    strategy = build_strategy("protonet", PRESET, seed=0, evaluator=silent_evaluator())
    with pytest.raises(ValueError, match="fused optimiser"):
        strategy.compile_training_step()
