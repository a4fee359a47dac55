"""``examples/order_memory_payload.py``, the code of the ORDER guide's "Attaching your own data to
ORDER's memory": it runs, stores each kept task's query logits in the slot the task went to, and
adds its distillation term exactly in the iterations that replay memory tasks."""

from __future__ import annotations

import pytest
import torch
from avalanche.core import SupervisedPlugin

from avalanche_sets import run_sets, sets_benchmark
from avalanche_sets.methods import build_strategy
from avalanche_sets.order import FeatureReservoirReplayPlugin
from avalanche_sets.presets import resolve_preset


def test_the_example_runs_and_distills_on_the_memory(load_example, capsys):
    results = load_example("order_memory_payload").main(["--tiny"])
    last, before = capsys.readouterr().out.splitlines()[-1:-3:-1]
    assert last.startswith("order + distill") and "memory_logits" in last
    assert "6/6 memory tasks with logits" in last
    assert "memory_logits" not in before and "0/6 memory tasks with logits" in before
    assert set(results) == {"order", "order + distill"}


def test_the_distillation_term_reaches_the_gradient(load_example):
    """The trained weights differ with the example's term (its tiny test accuracies may not: on
    a bf16 CPU both runs score 66.5% on the 8 test episodes)."""
    example = load_example("order_memory_payload")
    preset = resolve_preset("quick", width=8, tasks_per_domain=8, n_test_episodes=4, mem_size=6)
    bench = sets_benchmark(
        "synthetic", domains=["shapes", "strokes"], n_query=5, n_unlabeled=5, n_ood=20,
        tasks_per_domain=8, n_test_episodes=4,
    )  # fmt: skip
    weights = []
    for plugins in ([], [example.MemoryLogitDistillation(0.1)]):
        strategy = build_strategy("order", preset, seed=0, plugins=plugins)
        run_sets(strategy, bench)
        weights.append([p.detach().clone() for p in strategy.model.parameters()])
    assert max((a - b).abs().max().item() for a, b in zip(*weights)) > 1e-4


class Watcher(SupervisedPlugin):
    """After the example's plugin: what each iteration replayed, added and stored."""

    def __init__(self) -> None:
        super().__init__()
        self.iterations: list[tuple[bool, bool]] = []  # (replayed?, term added?)
        self.stored: dict[int, torch.Tensor] = {}  # slot -> logits of the task stored there

    def before_backward(self, strategy, **kwargs):
        replayed = strategy.iteration.replayed is not None
        self.iterations.append((replayed, "memory_logits" in strategy.loss_terms))

    def on_memory_store(self, strategy, *, stored, **kwargs):
        logits = strategy.mb_output.detach().reshape(len(strategy.mb_x), -1, 2)
        for row, slot, _task in stored:
            self.stored[slot] = logits[row].clone()


def test_the_term_is_added_on_replayed_iterations_and_payloads_sit_in_their_slots(load_example):
    ex = load_example("order_memory_payload")
    preset = resolve_preset(
        "quick", image_size=16, n_blocks=2, width=4, n_way=2, n_shot=1, n_query=2,
        n_unlabeled=2, n_ood=2, tasks_per_domain=6, n_test_episodes=2, mem_size=4,
    )  # fmt: skip
    bench = sets_benchmark(
        "synthetic", domains=["shapes", "strokes"], n_way=2, n_shot=1, n_query=2,
        n_unlabeled=2, n_ood=2, tasks_per_domain=6, n_test_episodes=2, image_size=16,
    )  # fmt: skip
    plugin = ex.MemoryLogitDistillation(alpha=0.5)
    watcher = Watcher()
    strategy = build_strategy("order", preset, seed=0, plugins=[plugin, watcher])
    run_sets(strategy, bench)

    # 6 iterations; the memory is empty only in the first, which adds no term.
    assert watcher.iterations == [(False, False)] + [(True, True)] * 5
    assert plugin.added == 5
    assert torch.isfinite(strategy.loss_terms["memory_logits"])
    memory = next(p for p in strategy.plugins if isinstance(p, FeatureReservoirReplayPlugin))
    assert len(memory) == 4 and sorted(watcher.stored) == [0, 1, 2, 3]
    for slot, task in enumerate(memory.tasks):
        assert torch.equal(task.payload[plugin.KEY], watcher.stored[slot]), slot
    with pytest.raises(ValueError, match="alpha must be >= 0"):
        ex.MemoryLogitDistillation(alpha=-1)
