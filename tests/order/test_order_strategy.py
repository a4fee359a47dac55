"""ORDER end to end: plugins wired together, no oracle reads, bad settings, learning, resume."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from avalanche.training.plugins import EvaluationPlugin

from avalanche_sets import OrderStrategy, run_sets, sets_benchmark
from avalanche_sets.data.episodes import collate_episodes
from avalanche_sets.models.backbone import ConvBackbone
from avalanche_sets.models.episodic import PrototypicalModel
from avalanche_sets.order import (
    FeatureReservoirReplayPlugin,
    MIRegularizationPlugin,
    OODSplitPlugin,
    OTFeatureLossPlugin,
)

torch.set_num_threads(1)


def tiny_model(seed: int = 0) -> PrototypicalModel:
    torch.manual_seed(seed)
    return PrototypicalModel(ConvBackbone(n_blocks=3, width=8, image_size=32), refine="soft_kmeans")


@pytest.fixture(scope="module")
def bench():
    """Two synthetic domains (the offline default), small episodes, 32 px."""
    return sets_benchmark(
        "synthetic", domains=["shapes", "strokes"], n_way=3, n_shot=1, n_query=3,
        n_unlabeled=3, n_ood=6, tasks_per_domain=120, n_test_episodes=40, n_val_episodes=2,
        seed=0,
    )  # fmt: skip


def order(model=None, **kw) -> OrderStrategy:
    model = model or tiny_model()
    kw = {"mem_size": 8, "replay_batch": 2, "lam": 1e-2, "beta": 0.1, "ot_max_points": 20, **kw}
    return OrderStrategy(
        model=model,
        optimizer=torch.optim.Adam(model.parameters(), lr=3e-3),
        evaluator=EvaluationPlugin(),
        eval_mb_size=10,
        **kw,
    )


def test_plugins_in_order_and_defaults():
    s = OrderStrategy(evaluator=EvaluationPlugin())
    kinds = [type(p) for p in s.order_plugins]
    assert kinds == [
        FeatureReservoirReplayPlugin,
        OODSplitPlugin,
        MIRegularizationPlugin,
        OTFeatureLossPlugin,
    ]
    assert s.order_plugins[2].lam == 1e-5 and s.order_plugins[3].beta == 0.003
    assert s.order_plugins[0].mem_size == 200 and s.train_mb_size == 2
    assert s.optimizer.param_groups[0]["lr"] == 1e-3


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"lam": -1.0}, "lam"),
        ({"beta": -0.1}, "beta"),
        ({"ot_solver": "hungarian"}, "solver"),
        ({"mem_size": 0}, "mem_size"),
        ({"train_mb_size": 0}, "train_mb_size"),
        ({"mi_terms": ("id", "xx")}, "mi_terms"),
        ({"use_ood_split": False}, "use_mi=True needs use_ood_split"),
        ({"use_replay": False}, "use_ot=True needs use_replay"),
        ({"ood_rule": "topk"}, "n_id"),
    ],
)
def test_bad_settings_raise_at_construction(kwargs, message):
    with pytest.raises(ValueError, match=message):
        OrderStrategy(evaluator=EvaluationPlugin(), **kwargs)


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({"use_mi": False}, {FeatureReservoirReplayPlugin, OODSplitPlugin, OTFeatureLossPlugin}),
        ({"use_replay": False, "use_ot": False}, {OODSplitPlugin, MIRegularizationPlugin}),
        ({"use_mi": False, "use_replay": False, "use_ot": False}, {OODSplitPlugin}),
        ({"use_ot": False}, {FeatureReservoirReplayPlugin, OODSplitPlugin, MIRegularizationPlugin}),
    ],
)
def test_ablations_are_plugin_toggles(kwargs, expected):
    s = OrderStrategy(evaluator=EvaluationPlugin(), **kwargs)
    assert {type(p) for p in s.order_plugins} == expected


def _train_step(bench, batch_eps, oracle_mode: str) -> dict:
    """One ORDER training iteration on a fixed meta-batch, after memory is warm."""
    torch.manual_seed(0)
    s = order(tiny_model(1))
    exp = bench.train_stream[0]
    s.train(exp)  # warm: memory non-empty, variational nets fitted
    batch = collate_episodes(batch_eps)
    x = batch[0]
    if oracle_mode == "permuted":
        o = copy.deepcopy(x.oracle)
        o.unlabeled_is_ood = o.unlabeled_is_ood[:, torch.randperm(o.unlabeled_is_ood.shape[1])]
        o.unlabeled_source = o.unlabeled_source.flip(-1)
        o.class_ids = o.class_ids.flip(-1)
        x.oracle = o
    elif oracle_mode == "deleted":
        x.oracle = None

    class _Fixed(torch.utils.data.Dataset):
        def __len__(self):
            return 1

        def __getitem__(self, i):
            return batch

    # Feed exactly this meta-batch through the real training loop.
    s.make_train_dataloader = lambda **kw: setattr(
        s, "dataloader", torch.utils.data.DataLoader(_Fixed(), batch_size=None)
    )
    s.train(exp)
    return {k: v.detach().clone() for k, v in s.model.state_dict().items()}


def test_no_learner_reads_the_ood_ground_truth(bench):
    eps = [bench.train_stream[1].dataset[i] for i in range(2)]
    ref = _train_step(bench, eps, "intact")
    for mode in ("permuted", "deleted"):
        other = _train_step(bench, eps, mode)
        for k in ref:
            assert torch.equal(ref[k], other[k]), f"{mode}: {k} differs"


def test_memory_stores_compact_tasks_with_features(bench):
    s = order(mem_size=5)
    s.train(bench.train_stream[0])
    replay = s.order_plugins[0]
    assert len(replay) == 5 and replay.reservoir.n_seen == 120
    cfg = bench.config
    for task in replay.tasks:
        assert task.images()[0].dtype == torch.uint8
        n_feat = cfg.n_way * cfg.n_shot + task.unlabeled_id.numel()  # S + U, fixed shape
        assert task.features.shape == (n_feat, s.model.backbone.out_dim)
        # Images + features + masks: bounded by the raw episode plus d floats per stored input.
        raw = cfg.n_images * 32 * 32 * 3
        assert task.nbytes <= raw + n_feat * s.model.backbone.out_dim * 4 + 2048
    # Replay appends memory tasks to the meta-batch and OT sees matching pairs.
    ot = s.order_plugins[3]
    assert ot.last_value is not None and ot.last_value >= 0


def test_ot_pulls_replayed_features_toward_stored_ones(bench):
    """With β large, the OT term dominates: replayed features end closer to their targets."""
    s = order(beta=50.0, lam=0.0, mem_size=4, replay_batch=4)
    s.train(bench.train_stream[0])
    replay, ot = s.order_plugins[0], s.order_plugins[3]
    old_tasks = replay.tasks  # tasks of domain 0, with their stored features

    def drift():
        s.model.eval()
        with torch.no_grad():
            state = s.model.encode(replay._batch_of(old_tasks))
        total = 0.0
        for b, task in enumerate(old_tasks):
            cur = torch.cat([state.support_emb[b], state.unlabeled_emb[b][task.unlabeled_id]])
            stored = task.features[task.feature_mask()]
            total += float(((cur - stored) ** 2).sum(1).mean())
        return total

    # Train on the next domain from the same state, with and without the OT term.
    snapshot = [copy.deepcopy(c.state_dict()) for c in (s.model, s.optimizer, replay, ot)]
    s.train(bench.train_stream[1])
    with_ot = drift()
    for c, sd in zip((s.model, s.optimizer, replay, ot), snapshot):
        c.load_state_dict(copy.deepcopy(sd))
    ot.beta = 0.0
    s.train(bench.train_stream[1])
    without_ot = drift()
    assert with_ot < without_ot


def test_short_run_learns_and_resume_matches(bench, tmp_path):
    torch.manual_seed(0)
    s = order(tiny_model(2))
    first = run_sets_first_eval(s, bench)
    full = run_sets(s, bench)
    chance = 1 / bench.config.n_way
    assert min(full.final) > chance + 0.15, full.final
    assert full.matrix[0][0] > first[0] + 0.04, (first, full.matrix)

    # Interrupted at iteration 8 of domain 0, resumed from the checkpoint in a new process-like
    # fresh strategy: the same final metrics as an uninterrupted run.
    def fresh():
        torch.manual_seed(0)
        return order(tiny_model(3))

    ref = run_sets(fresh(), bench)
    ckpt = tmp_path / "run.ckpt"
    part = run_sets(fresh(), bench, checkpoint_path=ckpt, checkpoint_every=4, stop_after=8)
    assert part.matrix == []
    resumed = run_sets(fresh(), bench, checkpoint_path=ckpt, checkpoint_every=4)
    np.testing.assert_allclose(resumed.matrix, ref.matrix, atol=1e-6)
    assert resumed.episode_acc == pytest.approx(ref.episode_acc)


def run_sets_first_eval(strategy, bench) -> list[float]:
    from avalanche_sets.training import episode_accuracies

    return [float(a.mean()) for a in episode_accuracies(strategy, bench.test_stream)]
