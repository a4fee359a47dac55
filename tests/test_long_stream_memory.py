"""Memory stays flat over long streams.

A short stream here (two domains, 320 tasks, ~30 s); the full one (20,000 tasks) was measured
once, docs/results/speed.md. ORDER with every plugin (OOD split, MI, replay, OT) and the
evaluator real runs use. After warm-up (the first domain and its evaluation; the reservoir is
full by then) nothing may grow with the number of tasks seen:

* the resident set size grows by less than 5%;
* the Python objects reachable from the strategy (plugins, metrics, evaluator, loggers,
  model, optimiser) take the same number of bytes after more training iterations, and so do
  their tensors up to the size variation of one iteration's embeddings;
* Avalanche's store of every emitted metric value does not change during training iterations
  (metrics emit per evaluation, never per iteration);
* the reservoir holds at most ``mem_size`` tasks of uint8 images and float32 features, within
  the bytes that the episode shape allows;
* episodes are drawn on demand: the episode datasets hold no episodes, whatever was sampled.

The checks are plain functions over what the run recorded; the last tests feed them a leaking
metric and a reservoir of float32 images to show that they fail when something grows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from avalanche.core import SupervisedPlugin
from avalanche.evaluation import PluginMetric
from avalanche.evaluation.metric_results import MetricValue

from avalanche_sets.data.benchmark import EpisodeDataset
from avalanche_sets.data.domain import Domain
from avalanche_sets.methods import build_strategy
from avalanche_sets.metrics.memory import (
    MemoryProbe,
    ReachableBytes,
    find_memory,
    metric_values_count,
    reachable_bytes,
)
from avalanche_sets.order.replay import FeatureReservoirReplayPlugin, MemoryTask
from avalanche_sets.presets import resolve_preset
from avalanche_sets.runs.experiment import build_benchmark
from avalanche_sets.runs.experiment import evaluator as _evaluator
from avalanche_sets.training import run_sets

MEM_SIZE = 20
RSS_LIMIT_PCT = 5.0
#: Python bytes and objects the strategy's object graph may gain between two training
#: iterations of one experience (measured: at most 56 bytes and 2 objects, counters).
PYTHON_SLACK = 512
OBJECT_SLACK = 16
#: Tensor bytes it may gain: the embeddings of one meta-batch vary with the number of U_id.
TENSOR_SLACK = 256 * 1024


def tiny_preset(tasks_per_domain: int, domains: list[str]) -> dict:
    return resolve_preset(
        "quick",
        image_size=16,
        n_blocks=2,
        width=8,
        n_query=2,
        n_unlabeled=2,
        n_ood=6,
        tasks_per_domain=tasks_per_domain,
        n_val_episodes=5,
        n_test_episodes=5,
        eval_mb_size=5,
        mem_size=MEM_SIZE,
        replay_batch=2,
        threads=1,
        domains=domains,
    )


class _GraphSnapshots(SupervisedPlugin):
    """Bytes reachable from the strategy at chosen training iterations (1-based, overall)."""

    def __init__(self, at: tuple[int, ...]) -> None:
        super().__init__()
        self.at = set(at)
        self.iteration = 0
        self.snapshots: dict[int, ReachableBytes] = {}
        self.metric_values: dict[int, int] = {}

    def after_training_iteration(self, strategy, **kwargs) -> None:
        self.iteration += 1
        if self.iteration in self.at:
            # Not the probes (they keep one sample per call) nor the data (constant, large).
            self.snapshots[self.iteration] = reachable_bytes(
                strategy, skip=(MemoryProbe, _GraphSnapshots, Domain)
            )
            self.metric_values[self.iteration] = metric_values_count(strategy.evaluator)


@dataclass
class StreamRecord:
    preset: dict
    strategy: object
    benchmark: object
    probe: MemoryProbe
    graphs: _GraphSnapshots


def run_stream(tmp_path, *, tasks_per_domain, domains, snapshot_at, metrics=()) -> StreamRecord:
    preset = tiny_preset(tasks_per_domain, domains)
    bench = build_benchmark(preset, seed=0)
    evaluator = _evaluator(("csv",), tmp_path)
    evaluator.metrics.extend(metrics)
    strategy = build_strategy("order", preset, seed=0, evaluator=evaluator)
    probe = MemoryProbe(every=10)
    graphs = _GraphSnapshots(snapshot_at)
    strategy.plugins += [probe, graphs]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        run_sets(strategy, bench, checkpoint_path=tmp_path / "ckpt.pt", checkpoint_every=50)
    finally:
        torch.set_num_threads(threads)
    return StreamRecord(preset, strategy, bench, probe, graphs)


# ---------------------------------------------------------------------------- the checks
def rss_growth_pct(samples) -> tuple[float, float, float]:
    """``(RSS at the end of warm-up, max RSS after it, growth in %)``.

    Warm-up ends at the first sample after the first evaluation (the first domain trained and
    evaluated).
    """
    first_eval = next(i for i, s in enumerate(samples) if s.event == "eval")
    ref = samples[first_eval].rss_mib
    peak = max(s.rss_mib for s in samples[first_eval + 1 :])
    return ref, peak, 100.0 * (peak - ref) / ref


def graph_growth(graphs: _GraphSnapshots) -> list[str]:
    """Problems: Python or tensor bytes reachable from the strategy that grew with iterations."""
    its = sorted(graphs.snapshots)
    first, last = graphs.snapshots[its[0]], graphs.snapshots[its[-1]]
    problems = []
    d_py = last.python_bytes - first.python_bytes
    if d_py > PYTHON_SLACK:
        grew = {
            k: v - first.by_type.get(k, 0)
            for k, v in last.by_type.items()
            if v - first.by_type.get(k, 0) > 0
        }
        problems.append(
            f"Python objects reachable from the strategy grew by {d_py} bytes over "
            f"{its[-1] - its[0]} iterations: {sorted(grew.items(), key=lambda kv: -kv[1])[:8]}"
        )
    d_obj = last.n_objects - first.n_objects
    if d_obj > OBJECT_SLACK:
        problems.append(f"objects reachable from the strategy grew by {d_obj}")
    d_t = last.tensor_bytes - first.tensor_bytes
    if d_t > TENSOR_SLACK:
        problems.append(f"tensors reachable from the strategy grew by {d_t} bytes")
    values = [graphs.metric_values[i] for i in its]
    if len(set(values)) > 1:
        problems.append(f"the evaluator stored metric values during training: {values}")
    return problems


def task_bytes_bound(cfg, dim: int, image_shape) -> int:
    """Largest size of one stored task: uint8 images, int64 labels, bool mask, float32 features."""
    n_img = cfg.n_images
    n_lab = cfg.n_support_total + cfg.n_query_total
    n_feat = cfg.n_support_total + cfg.n_unlabeled_total  # S and at most every unlabeled image
    return n_img * int(np.prod(image_shape)) + 8 * n_lab + cfg.n_unlabeled_total + 4 * n_feat * dim


def reservoir_problems(plugin, bound_per_task: int) -> list[str]:
    problems = []
    n = len(plugin.reservoir)
    if n > plugin.mem_size:
        problems.append(f"reservoir holds {n} tasks, more than mem_size = {plugin.mem_size}")
    for t in plugin.tasks:
        for name, images in zip(("support_x", "query_x", "unlabeled_x"), t.images()):
            if images.dtype != torch.uint8:
                problems.append(f"stored {name} is {images.dtype}, not uint8")
        if t.features.dtype != torch.float32 or t.features.requires_grad:
            problems.append("stored features must be detached float32")
        if t.nbytes > bound_per_task:
            problems.append(f"a stored task takes {t.nbytes} bytes, over {bound_per_task}")
    if plugin.memory_bytes() > plugin.mem_size * bound_per_task:
        problems.append(
            f"reservoir takes {plugin.memory_bytes()} bytes, over "
            f"{plugin.mem_size} x {bound_per_task}"
        )
    return list(dict.fromkeys(problems))


# ---------------------------------------------------------------------------- the run
@pytest.fixture(scope="module")
def record(tmp_path_factory) -> StreamRecord:
    # 160 tasks (80 iterations) per domain; warm-up = domain 1 and its evaluation; the graph
    # is measured three times inside domain 2's training.
    return run_stream(
        tmp_path_factory.mktemp("long_stream"),
        tasks_per_domain=160,
        domains=["shapes", "strokes"],
        snapshot_at=(95, 125, 160),
    )


def test_rss_flat_after_warmup(record):
    ref, peak, growth = rss_growth_pct(record.probe.samples)
    assert growth < RSS_LIMIT_PCT, f"RSS {ref:.1f} MiB at warm-up, {peak:.1f} MiB later"


def test_nothing_reachable_from_the_strategy_grows(record):
    assert sorted(record.graphs.snapshots) == [95, 125, 160]
    assert graph_growth(record.graphs) == []


def test_metrics_grow_per_evaluation_not_per_iteration(record):
    samples = record.probe.samples
    by_exp: dict[int, set[int]] = {}
    for s in samples:
        if s.event == "train":
            by_exp.setdefault(s.experience, set()).add(s.metric_values)
    assert all(len(v) == 1 for v in by_exp.values()), by_exp
    # Values after each evaluation: the same number per evaluation, whatever the iterations.
    evals = [s.metric_values for s in samples if s.event == "eval"]
    assert len(evals) == 2 and evals[0] > 0
    # The episode metrics keep one record per evaluation (and none per episode seen in training).
    for m in record.strategy.evaluator.metrics:
        if hasattr(m, "history"):
            assert len(m.history) <= 2


def test_reservoir_bounded_and_compact(record):
    memory = find_memory(record.strategy)
    assert isinstance(memory, FeatureReservoirReplayPlugin)
    assert memory.reservoir.n_seen == record.probe.tasks_seen == 320
    assert len(memory) == MEM_SIZE
    dim = record.strategy.model.backbone.out_dim
    bound = task_bytes_bound(record.benchmark.config, dim, (16, 16, 3))
    assert reservoir_problems(memory, bound) == []
    after_full = [s.memory_bytes for s in record.probe.samples if s.tasks_seen >= MEM_SIZE]
    assert max(after_full) <= MEM_SIZE * bound
    assert all(s.memory_len == MEM_SIZE for s in record.probe.samples if s.tasks_seen >= MEM_SIZE)
    # The features (the only varying part) differ by at most the U_id rows between samples.
    spread = max(after_full) - min(after_full)
    assert spread <= MEM_SIZE * 4 * dim * record.benchmark.config.n_unlabeled_total


def test_episodes_are_drawn_on_demand(record):
    for stream in (record.benchmark.train_stream, record.benchmark.test_stream):
        for exp in stream:
            datasets = [d for d in _leaves(exp.dataset) if isinstance(d, EpisodeDataset)]
            assert len(datasets) == 1
            ds = datasets[0]
            before = reachable_bytes(ds, skip=(Domain,))
            assert before.tensor_bytes == 0  # no episode (episodes are tensors) is held
            a, b = ds[3], ds[3]
            assert torch.equal(a.support_x, b.support_x)
            assert a.support_x.data_ptr() != b.support_x.data_ptr()  # drawn again, not cached
            for i in range(len(ds)):
                ds[i]
            after = reachable_bytes(ds, skip=(Domain,))
            assert (after.python_bytes, after.numpy_bytes, after.tensor_bytes) == (
                before.python_bytes,
                before.numpy_bytes,
                before.tensor_bytes,
            )


def _leaves(dataset):
    """The plain datasets under an AvalancheDataset (through its flat-data wrappers)."""
    stack, out = [dataset], []
    while stack:
        d = stack.pop()
        children = getattr(d, "_datasets", None)
        if children is None and hasattr(d, "_flat_data"):
            children = [d._flat_data]
        if children is None:
            out.append(d)
        else:
            stack.extend(children)
    return out


# ---------------------------------------------------------------------------- the checks fail
class _LeakyMetric(PluginMetric[float]):
    """A regression: keeps something per training iteration and emits a value per iteration."""

    def __init__(self, emit: bool) -> None:
        super().__init__()
        self.emit = emit
        self.kept: list[float] = []

    def reset(self) -> None:
        pass

    def result(self) -> float:
        return float(len(self.kept))

    def after_training_iteration(self, strategy):
        self.kept.append(float(strategy.loss.detach()))
        if self.emit:
            return [MetricValue(self, "Leak/train_phase/train_stream", 0.0, len(self.kept))]
        return None


@pytest.mark.parametrize("emit", [False, True])
def test_growth_checks_catch_a_leaking_metric(tmp_path, emit):
    rec = run_stream(
        tmp_path,
        tasks_per_domain=100,
        domains=["shapes"],
        snapshot_at=(10, 50),
        metrics=[_LeakyMetric(emit)],
    )
    problems = graph_growth(rec.graphs)
    # 40 floats kept: ~1.3 kB and 40 objects more, over the slack.
    assert any("Python objects" in p for p in problems), problems
    assert any("objects reachable" in p for p in problems), problems
    assert any("metric values" in p for p in problems) == emit, problems


def test_reservoir_check_catches_float32_images():
    cfg = build_benchmark(tiny_preset(10, ["shapes"]), seed=0).config
    dim = 128
    bound = task_bytes_bound(cfg, dim, (16, 16, 3))
    plugin = FeatureReservoirReplayPlugin(mem_size=4, replay_batch=1)

    def task(dtype):
        img = lambda n: torch.zeros(n, 16, 16, 3, dtype=dtype)  # noqa: E731
        return MemoryTask(
            support_x=img(cfg.n_support_total),
            support_y=torch.zeros(cfg.n_support_total, dtype=torch.long),
            query_x=img(cfg.n_query_total),
            query_y=torch.zeros(cfg.n_query_total, dtype=torch.long),
            unlabeled_x=img(cfg.n_unlabeled_total),
            unlabeled_id=torch.ones(cfg.n_unlabeled_total, dtype=torch.bool),
            features=torch.zeros(cfg.n_support_total + cfg.n_unlabeled_total, dim),
        )

    for _ in range(10):
        plugin.reservoir.offer(task(torch.uint8))
    assert reservoir_problems(plugin, bound) == []
    plugin.reservoir._items[0] = task(torch.float32)  # a regression that stored float images
    problems = reservoir_problems(plugin, bound)
    assert any("not uint8" in p for p in problems)
    assert any("bytes, over" in p for p in problems)
    assert math.isfinite(bound) and bound < 4 * cfg.n_images * 16 * 16 * 3
