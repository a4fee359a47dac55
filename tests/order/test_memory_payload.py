"""Data of one's own on ORDER's memory tasks (``MemoryTask.payload``): a plugin learns, through
the ``on_memory_store`` event, which slot each kept current task went to, reads the payload back
when the task is replayed (``strategy.iteration.replayed``: rows, slots, tasks), and the payload survives a
checkpoint and a resume."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from avalanche.core import SupervisedPlugin
from avalanche.training.plugins import EvaluationPlugin

from avalanche_sets import run_sets
from avalanche_sets.methods import build_strategy
from avalanche_sets.models.backbone import ConvBackbone
from avalanche_sets.models.episodic import PrototypicalModel
from avalanche_sets.order import (
    MEMORY_STORE_EVENT,
    FeatureReservoirReplayPlugin,
    MemoryTask,
    StoredTask,
)
from avalanche_sets.presets import resolve_preset
from avalanche_sets.runs.experiment import build_benchmark
from avalanche_sets.training import EpisodicTemplate, silent_evaluator

torch.set_num_threads(1)

PRESET = resolve_preset(
    "quick", image_size=16, n_blocks=2, width=4, n_way=2, n_shot=1, n_query=2, n_unlabeled=2,
    n_ood=2, tasks_per_domain=8, n_test_episodes=2, n_val_episodes=2, mem_size=3,
    domains=["shapes", "strokes"], ood=["rings"], eval_mb_size=4, threads=1,
)  # fmt: skip


@pytest.fixture(scope="module")
def bench():
    return build_benchmark(PRESET, seed=0)  # the stream the preset describes


def _task(**payload) -> MemoryTask:
    return MemoryTask(
        support_x=torch.zeros(2, 4, 4, 3, dtype=torch.uint8),
        support_y=torch.arange(2),
        query_x=torch.ones(4, 4, 4, 3, dtype=torch.uint8),
        query_y=torch.tensor([0, 0, 1, 1]),
        unlabeled_x=torch.zeros(2, 4, 4, 3, dtype=torch.uint8),
        unlabeled_id=torch.tensor([True, False]),
        features=torch.randn(3, 5),
        payload=dict(payload),
    )


def test_a_payload_is_part_of_the_task():
    task = _task(logits=torch.randn(4, 2), seen=torch.tensor(7))
    plain = task.to_dict()
    assert set(plain["payload"]) == {"logits", "seen"}
    again = MemoryTask(**plain)
    assert torch.equal(again.payload["logits"], task.payload["logits"])
    assert task.nbytes == _task().nbytes + 4 * 2 * 4 + 8
    moved = task.to(torch.device("meta"))
    assert {t.device.type for t in moved.payload.values()} == {"meta"}
    assert task.to(torch.device("cpu")) is task  # nothing to move
    # A task saved before payloads existed (no "payload" key) loads with an empty one.
    old = {k: v for k, v in _task().to_dict().items() if k != "payload"}
    assert MemoryTask(**old).payload == {}


class Recorder(SupervisedPlugin):
    """Checks, every iteration, what the replay plugin tells other plugins (placed *before* it)."""

    def __init__(self) -> None:
        super().__init__()
        self.memory: FeatureReservoirReplayPlugin | None = None
        self.stored: list[list[StoredTask]] = []
        self.replayed = 0

    def before_training_iteration(self, strategy, **kwargs):
        self.memory = next(
            p for p in strategy.plugins if isinstance(p, FeatureReservoirReplayPlugin)
        )
        assert strategy.iteration.replayed is None  # the replay plugin has not run yet
        assert strategy.iteration.current_rows == range(len(strategy.mb_x))
        self.current = strategy.mb_x.query_x.clone()  # the stream's tasks only
        self.before = self.memory.tasks

    def before_forward(self, strategy, **kwargs):
        it = strategy.iteration
        info = it.replayed
        if info is None:
            assert it.current_rows == range(len(self.current)) == range(len(strategy.mb_x))
            return
        self.replayed += 1
        assert it.n_current == len(self.current) and it.current_rows == range(2)
        assert list(info.rows) == list(range(2, len(strategy.mb_x)))
        assert len(info.slots) == len(info.tasks) == len(info.rows) == 2
        for row, slot, task in zip(info.rows, info.slots, info.tasks):
            assert self.memory.tasks[slot] is task
            assert torch.equal(strategy.mb_x.query_x[row], task.images()[1])
        assert torch.equal(strategy.mb_x.query_x[:2], self.current)

    def on_memory_store(self, strategy, *, stored, **kwargs):
        self.stored.append(list(stored))
        after = self.memory.tasks
        changed = [
            s for s in range(len(after)) if s >= len(self.before) or after[s] is not self.before[s]
        ]
        assert sorted(s.slot for s in stored) == changed  # every kept task, nothing else
        for row, slot, task in stored:
            assert after[slot] is task
            assert torch.equal(task.images()[1], self.current[row])


def test_stored_tasks_come_with_their_row_and_slot_whatever_the_plugin_order(bench):
    torch.manual_seed(0)
    model = PrototypicalModel(ConvBackbone(n_blocks=2, width=4, image_size=16))
    recorder = Recorder()
    strategy = EpisodicTemplate(
        model=model, optimizer=torch.optim.Adam(model.parameters()), train_mb_size=2,
        plugins=[recorder, FeatureReservoirReplayPlugin(mem_size=3, replay_batch=2, seed=1)],
        evaluator=silent_evaluator(),
    )  # fmt: skip
    for exp in bench.train_stream:
        strategy.train(exp)
    assert len(recorder.stored) == 8  # the event fires once per training iteration
    assert recorder.replayed == 7  # every iteration after the first replays
    n_stored = sum(len(s) for s in recorder.stored)
    assert 3 < n_stored < 16  # the memory filled, then kept some tasks and dropped others
    assert MEMORY_STORE_EVENT == "on_memory_store"


class LogitPayload(SupervisedPlugin):
    """Keeps each stored task's query logits and pulls replayed tasks' logits towards them."""

    def on_memory_store(self, strategy, *, stored, **kwargs):
        logits = strategy.mb_output.detach().reshape(len(strategy.mb_x), -1, 2)
        for row, _slot, task in stored:
            task.payload["logits"] = logits[row].clone()

    TERM = "logits"

    def loss_term(self, strategy):
        info = strategy.iteration.replayed
        if info is None:
            return None
        logits = strategy.mb_output.reshape(len(strategy.mb_x), -1, 2)[info.rows.start :]
        stored = torch.stack([t.payload["logits"] for t in info.tasks])
        return F.mse_loss(logits, stored)


class MemorySnapshots(SupervisedPlugin):
    """The memory's payloads after every training iteration, by slot."""

    def __init__(self) -> None:
        super().__init__()
        self.payloads: list[list[dict]] = []

    def after_training_iteration(self, strategy, **kwargs):
        self.payloads.append(_payloads(strategy))


def _payloads(strategy) -> list[dict]:
    memory = next(p for p in strategy.plugins if isinstance(p, FeatureReservoirReplayPlugin))
    return [copy.deepcopy(t.payload) for t in memory.tasks]


def _equal(a: list[dict], b: list[dict]) -> bool:
    return len(a) == len(b) and all(
        x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x) for x, y in zip(a, b)
    )


def test_payloads_survive_checkpoint_and_resume(bench, tmp_path):
    def fresh(*plugins):
        return build_strategy(
            "order",
            PRESET,
            seed=0,
            evaluator=EvaluationPlugin(),
            plugins=[LogitPayload(), *plugins],
        )

    snapshots = MemorySnapshots()
    full_strategy = fresh(snapshots)
    full = run_sets(full_strategy, bench)
    assert (
        all(set(p) == {"logits"} for p in snapshots.payloads[-1]) and len(snapshots.payloads) == 8
    )

    # Interrupted after iteration 7 (of 8); the last checkpoint is at iteration 2 of domain 1.
    ckpt = tmp_path / "run.ckpt"
    part = run_sets(fresh(), bench, checkpoint_path=ckpt, checkpoint_every=2, stop_after=7)
    assert len(part.matrix) == 1
    resumed_strategy = fresh()
    restored = []
    resumed = run_sets(
        resumed_strategy, bench, checkpoint_path=ckpt, checkpoint_every=2,
        on_resume=lambda info: restored.append((info["position"], _payloads(resumed_strategy))),
    )  # fmt: skip
    ((position, payloads),) = restored
    assert position == {"experience": 1, "iteration": 2}
    assert len(payloads) == 3 and all(set(p) == {"logits"} for p in payloads)
    assert _equal(payloads, snapshots.payloads[5]), "the restored payloads differ"
    assert _equal(_payloads(resumed_strategy), snapshots.payloads[-1])
    assert resumed.matrix == full.matrix and resumed.episode_acc == full.episode_acc
    assert float(resumed_strategy.loss_terms["logits"]) == float(full_strategy.loss_terms["logits"])
