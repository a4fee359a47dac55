"""A memory that cannot evict before the last domain is named, with the numbers.

The counts of :mod:`avalanche_sets.training.memory_fill` are checked three ways: against hand
counts, against the sizes every memory of the package actually has when each domain starts on a
tiny stream (so a wrong formula fails even where a hand count agrees with it), and through a
run (stderr, ``log.txt`` and ``result.json`` once; nothing for a memory that evicts in time or a
method without one).
"""

from __future__ import annotations

import json

import pytest
import torch
from avalanche.core import SupervisedPlugin

from avalanche_sets.methods import build_strategy
from avalanche_sets.presets import resolve_preset
from avalanche_sets.runs.experiment import build_benchmark, run_experiment
from avalanche_sets.runs.folder import LOG_FILE
from avalanche_sets.runs.record import RESULT_FILE
from avalanche_sets.training import run_sets
from avalanche_sets.training.memory_fill import (
    MemoryFilling,
    memory_fill,
    memory_fills,
    strategy_memories,
)

pytestmark = pytest.mark.filterwarnings("ignore:No loggers specified")

DOMAINS = ["shapes", "strokes", "blobs"]
TASKS = 5  # training tasks per domain: meta-batches of 2, 2 and 1


def tiny(**settings):
    return resolve_preset(
        "quick", image_size=16, n_blocks=2, width=8, n_query=2, n_unlabeled=2, n_ood=4,
        tasks_per_domain=TASKS, n_test_episodes=2, eval_mb_size=2, domains=DOMAINS,
        threads=1, **settings,
    )  # fmt: skip


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


# ------------------------------------------------------------------ hand counts
def test_the_reported_stream_a_240_task_stream_and_200_tasks_evicts_only_in_the_last_domain():
    # 6 domains x 40 tasks, 2 per iteration: offer 200 is the 20th iteration of domain 5, offer
    # 201 (the first that must choose) the 1st of domain 6; domains 1-5 saw every task kept
    fill = memory_fill(
        MemoryFilling(200, "iteration", holder="FeatureReservoirReplayPlugin"),
        tasks_per_domain=[40] * 6,
        meta_batch=2,
    )
    assert fill.tasks_before_last_domain == 200
    assert fill.held_at_last_domain == 200
    assert fill.full_at == (5, 20)
    assert fill.first_eviction == (6, 1)
    assert not fill.evicts_before_last_domain
    note = fill.message()
    for part in (
        "FeatureReservoirReplayPlugin holds 200 tasks",
        "the 2 current tasks of every training iteration (40 per domain)",
        "200 training tasks come before the last domain (domain 6)",
        "it is full at iteration 20 of domain 5 and first evicts at iteration 1 of domain 6",
        "domains 1-5 train on the same memory",
        "mem_size 199 or less, or tasks_per_domain 41 or more",
    ):
        assert part in note, (part, note)
    # 160 tasks per domain: full in domain 2, evicting from then on
    long = memory_fill(MemoryFilling(200, "iteration"), tasks_per_domain=[160] * 6, meta_batch=2)
    assert (long.full_at, long.first_eviction) == ((2, 20), (2, 21))
    assert long.evicts_before_last_domain


def test_a_memory_larger_than_the_stream_never_fills():
    fill = memory_fill(MemoryFilling(300, "iteration"), tasks_per_domain=[40] * 6, meta_batch=2)
    assert fill.full_at is None and fill.first_eviction is None
    assert "it is never full (it ends with 240 of 300) and never evicts" in fill.message()


def test_a_short_last_meta_batch_is_counted():
    # 5 tasks per domain at 2 per iteration: offers 2, 4, 5 | 7, 9, 10; the 7th is iteration 1
    fill = memory_fill(MemoryFilling(7, "iteration"), tasks_per_domain=[5, 5], meta_batch=2)
    assert (fill.full_at, fill.first_eviction) == ((2, 1), (2, 2))
    fill = memory_fill(MemoryFilling(4, "iteration"), tasks_per_domain=[5, 5], meta_batch=2)
    assert (fill.full_at, fill.first_eviction) == ((1, 2), (1, 3))


def test_domain_end_memories_a_reservoir_and_per_domain_quotas():
    # reservoir of 10 over domains of 3 tasks stored at their ends: 3, 6, 9, 12
    res = memory_fill(MemoryFilling(10, "domain"), tasks_per_domain=[3] * 4, meta_batch=2)
    assert (res.held_at_last_domain, res.full_at, res.first_eviction) == (9, (4, None), (4, None))
    assert "after the last training" in res.message()
    # quotas of 10 over d domains: [10], [5, 5], [4, 3, 3], [3, 3, 2, 2] -> 3, 6, 9, 10 held
    bal = memory_fill(
        MemoryFilling(10, "domain", "balanced"), tasks_per_domain=[3] * 4, meta_batch=2
    )
    assert (bal.held_at_last_domain, bal.full_at, bal.first_eviction) == (9, (4, None), (4, None))
    # 4 tasks per domain: [4], [4, 4], [4, 3, 3] -> the 3rd domain's end evicts one of domain 2
    bal = memory_fill(
        MemoryFilling(10, "domain", "balanced"), tasks_per_domain=[4] * 4, meta_batch=2
    )
    assert (bal.held_at_last_domain, bal.full_at, bal.first_eviction) == (10, (3, None), (3, None))
    assert bal.evicts_before_last_domain


# ------------------------------------------------------------------ against the memories
class DomainStartSizes(SupervisedPlugin):
    """Records the method's memory size when each domain starts and when training ends."""

    def __init__(self) -> None:
        super().__init__()
        self.sizes: dict[int, int] = {}  # domain (from 0) -> size when it starts; -1: at the end

    @staticmethod
    def size(strategy) -> int:
        for p in strategy.plugins:
            if hasattr(p, "storage_policy"):  # semi-er
                return len(p.storage_policy.buffer)
            if hasattr(p, "storage"):  # semi-agem, semi-gem
                return len(p.storage.buffer)
            if hasattr(p, "reservoir"):  # ORDER's replay, semi-der, semi-mer
                return len(p.reservoir)
        raise AssertionError("no memory found")

    def before_training_exp(self, strategy, **kwargs):
        self.sizes.setdefault(strategy.experience.current_experience, self.size(strategy))

    def after_training_exp(self, strategy, **kwargs):
        self.sizes[-1] = self.size(strategy)


@pytest.mark.parametrize(
    "method", ["order", "semi-der", "semi-mer", "semi-er", "semi-agem", "semi-gem"]
)
@pytest.mark.parametrize("mem_size", [12, 7])
def test_the_counts_are_the_memories_sizes_after_training(method, mem_size):
    preset = tiny(mem_size=mem_size)
    sizes = DomainStartSizes()
    strategy = build_strategy(method, preset, seed=0, plugins=[sizes])
    bench = build_benchmark(preset, seed=0)
    (fill,) = memory_fills(strategy, bench)
    assert fill.filling.capacity == mem_size
    run_sets(strategy, bench)
    # when the last domain starts, and when the stream ends
    assert sizes.sizes[len(DOMAINS) - 1] == fill.held_at_last_domain, sizes.sizes
    assert sizes.sizes[-1] == fill.held_at_end, sizes.sizes
    assert (sizes.sizes[-1] == mem_size) == (fill.full_at is not None), (sizes.sizes, fill)
    # 12 tasks: 10 come before the last domain, none evicted; 7: evicted before it
    assert fill.evicts_before_last_domain == (mem_size == 7)


def test_methods_without_a_memory_declare_none():
    preset = tiny()
    for method in ("mskm", "protonet", "semi-gpm", "joint"):
        assert strategy_memories(build_strategy(method, preset, seed=0)) == [], method
    assert (
        strategy_memories(build_strategy("order", preset, seed=0, use_replay=False, use_ot=False))
        == []
    )


# ------------------------------------------------------------------ through a run
def test_a_run_whose_memory_cannot_evict_says_so_once_and_records_it(tmp_path, capsys):
    record = run_experiment("order", tiny(mem_size=12), seed=0, out_root=tmp_path, loggers=())
    err = capsys.readouterr().err
    assert err.count("memory note:") == 1, err
    assert "holds 12 tasks" in err
    assert "10 training tasks come before the last domain (domain 3)" in err
    assert (
        "it is full at iteration 1 of domain 3 and first evicts at iteration 2 of domain 3" in err
    )
    (folder,) = {p.parent for p in tmp_path.rglob(RESULT_FILE)}
    assert (folder / LOG_FILE).read_text().count("memory note:") == 1
    (memory,) = json.loads((folder / RESULT_FILE).read_text())["memory"]
    assert memory["held_at_last_domain"] == 10
    assert memory["first_eviction"] == [3, 2]
    assert memory["evicts_before_last_domain"] is False
    assert record.memory == (memory,)


@pytest.mark.parametrize("method", ["order", "mskm"])
def test_a_memory_that_evicts_in_time_or_none_says_nothing(method, tmp_path, capsys):
    record = run_experiment(method, tiny(mem_size=7), seed=0, out_root=tmp_path, loggers=())
    assert "memory note" not in capsys.readouterr().err
    (log,) = tmp_path.rglob(LOG_FILE)
    assert "memory note" not in log.read_text()
    if method == "order":
        assert record.memory[0]["evicts_before_last_domain"] is True
    else:
        assert record.memory == ()


def test_a_resumed_run_has_the_note_once_in_its_log(tmp_path, capsys, monkeypatch):
    from avalanche_sets import training

    real = training.run_sets

    def killed(*args, **kwargs):  # trains 3 iterations (a checkpoint each), then dies
        real(*args, **{**kwargs, "checkpoint_every": 1}, stop_after=3)
        raise KeyboardInterrupt

    monkeypatch.setattr(training, "run_sets", killed)
    with pytest.raises(KeyboardInterrupt):
        run_experiment("order", tiny(mem_size=12), seed=0, out_root=tmp_path, loggers=())
    monkeypatch.setattr(training, "run_sets", real)
    record = run_experiment("order", tiny(mem_size=12), seed=0, out_root=tmp_path, loggers=())
    err = capsys.readouterr().err
    assert "resuming" in err and err.count("memory note:") == 2  # each start says it
    (log,) = tmp_path.rglob(LOG_FILE)
    assert log.read_text().count("memory note:") == 1
    assert record.provenance.resumes and record.memory[0]["first_eviction"] == [3, 2]
