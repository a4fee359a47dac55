"""Baseline memory plugins next to ORDER (``OrderStrategy(plugins=[...])``): ORDER's replay
appends memory tasks to the meta-batch, so a plugin that stores tasks from ``strategy.mb_x``
must store only the current ones (DER does), and one that cannot is refused when the strategy
is built, naming itself, why, and what to do (``CONFLICTS`` in order/contract.py)."""

from __future__ import annotations

import pytest
import torch

from avalanche_sets.baselines.plugins import (
    DERPlugin,
    EpisodicAGEMPlugin,
    EpisodicGEMPlugin,
    EpisodicReplayPlugin,
    GPMPlugin,
    MERPlugin,
)
from avalanche_sets.methods import build_strategy
from avalanche_sets.models.backbone import ConvBackbone
from avalanche_sets.models.episodic import PrototypicalModel
from avalanche_sets.order import FeatureReservoirReplayPlugin
from avalanche_sets.presets import resolve_preset
from avalanche_sets.runs.experiment import build_benchmark
from avalanche_sets.training import EpisodicTemplate, silent_evaluator

torch.set_num_threads(1)

TASKS = 12  # per domain, 2 domains: 24 training tasks, 12 iterations of 2

PRESET = resolve_preset(
    "quick", image_size=16, n_blocks=2, width=4, n_way=2, n_shot=1, n_query=2, n_unlabeled=2,
    n_ood=2, tasks_per_domain=TASKS, n_test_episodes=2, n_val_episodes=2, mem_size=6,
    domains=["shapes", "strokes"], ood=["rings"], eval_mb_size=4,
)  # fmt: skip


@pytest.fixture(scope="module")
def bench():
    return build_benchmark(PRESET, seed=0)  # the stream the preset describes


def _train(strategy, bench) -> None:
    for exp in bench.train_stream:
        strategy.train(exp)


def test_der_next_to_order_stores_every_stream_task_once_and_no_replayed_one(bench):
    der = DERPlugin(mem_size=50, replay_batch=2, seed=0)
    strategy = build_strategy("order", PRESET, seed=0, plugins=[der])
    _train(strategy, bench)
    memory = next(p for p in strategy.plugins if isinstance(p, FeatureReservoirReplayPlugin))
    assert len(memory) == 6  # ORDER's memory is full, so every iteration after the first replays
    assert der.reservoir.n_seen == 2 * TASKS  # was 46: 24 + ORDER's 22 replayed tasks
    stream = [exp.dataset[i] for exp in bench.train_stream for i in range(TASKS)]
    for slot, (item, episode) in enumerate(zip(der.reservoir.items, stream, strict=True)):
        assert torch.equal(item["episode"].query_x, episode.query_x), slot
        assert item["logits"].shape == (2 * 2, 2)  # the task's own query logits [N*Q, N]


@pytest.mark.parametrize(
    ("plugin", "why"),
    [
        (EpisodicReplayPlugin(mem_size=4), "its memory episodes into the meta-batch"),
        (MERPlugin(mem_size=4), "SemiMER's own training loop"),
    ],
    ids=["er", "mer"],
)
def test_a_replay_plugin_that_cannot_share_the_meta_batch_is_refused(plugin, why):
    name = type(plugin).__name__
    with pytest.raises(ValueError) as refused:
        build_strategy("order", PRESET, seed=0, plugins=[plugin])
    message = str(refused.value)
    assert message.startswith(f"{name} cannot be used together with FeatureReservoirReplayPlugin")
    assert why in message and "fix: " in message
    # The same whatever the order of the plugins, and without OrderStrategy.
    model = PrototypicalModel(ConvBackbone(n_blocks=2, width=4, image_size=16))
    for plugins in (
        [plugin, FeatureReservoirReplayPlugin()],
        [FeatureReservoirReplayPlugin(), plugin],
    ):
        with pytest.raises(ValueError, match=f"^{name} cannot be used together"):
            EpisodicTemplate(
                model=model, optimizer=torch.optim.Adam(model.parameters()), plugins=plugins,
                evaluator=silent_evaluator(),
            )  # fmt: skip
    # ORDER without its memory has nothing to conflict with.
    build_strategy("order-mi-only", PRESET, seed=0, plugins=[plugin])


def test_memories_filled_from_the_experience_are_accepted_and_hold_its_tasks_only(bench):
    for plugin in (EpisodicGEMPlugin(mem_size=4), GPMPlugin(n_episodes=2)):
        build_strategy("order", PRESET, seed=0, plugins=[plugin])
    agem = EpisodicAGEMPlugin(mem_size=50, sample_size=2)
    _train(build_strategy("order", PRESET, seed=0, plugins=[agem]), bench)
    assert [len(group) for group in agem.buffers] == [TASKS, TASKS]
