"""Plugin state follows the model's device (issue 11: "resuming on a GPU breaks").

No GPU is needed: PyTorch's ``meta`` device stands in for "a device other than the CPU" —
state restored from a CPU checkpoint must end up wherever it is used, with its optimiser
moments, never on a hard-coded device. ``load_checkpoint`` reads onto the CPU (RNG states must
be CPU tensors) and the model's state is copied to the model's device by ``load_state_dict``;
ORDER's replay memory moves to the model's device at its first replay.
"""

from __future__ import annotations

import copy
import re
import warnings
from pathlib import Path

import pytest
import torch
from avalanche.training.plugins import EvaluationPlugin

import avalanche_sets
from avalanche_sets import sets_benchmark
from avalanche_sets.methods import build_strategy
from avalanche_sets.order import MIRegularizationPlugin
from avalanche_sets.presets import resolve_preset
from avalanche_sets.training import load_checkpoint, save_checkpoint

torch.set_num_threads(1)

DIM = 8


def _trained_plugin() -> MIRegularizationPlugin:
    """An MI plugin whose networks took a few steps (non-trivial Adam moments)."""
    mi = MIRegularizationPlugin(seed=3)
    est = mi.estimator_on(DIM, torch.device("cpu"))
    gen = torch.Generator().manual_seed(0)
    for _ in range(3):
        e, p = torch.randn(20, DIM, generator=gen), torch.randn(20, DIM, generator=gen)
        est.fit_step(e[:10], p[:10], e[10:], p[10:])
    return mi


def _moments(est):
    return [
        (key, value)
        for opt in (est.opt_q, est.opt_critic)
        for state in opt.state.values()
        for key, value in state.items()
        if key != "step"  # Adam keeps its step counter on the CPU by design
    ]


def test_restored_mi_networks_are_built_where_they_are_used():
    saved = copy.deepcopy(_trained_plugin().state_dict())
    restored = MIRegularizationPlugin(seed=3)
    restored.load_state_dict(copy.deepcopy(saved))
    assert restored.estimator is None, "built before the model's device is known"
    assert restored.state_dict() is not None and restored.state_dict()["dim"] == DIM

    # Used with embeddings on another device ("meta" standing in for a GPU): networks, their
    # optimisers' parameters and moments all live there.
    other = copy.deepcopy(restored)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "copying into a meta parameter is a no-op"
        est = other.estimator_on(DIM, torch.device("meta"))
    assert {p.device.type for p in est.parameters()} == {"meta"}
    for opt, module in ((est.opt_q, est.q), (est.opt_critic, est.critic)):
        assert [id(p) for p in opt.param_groups[0]["params"]] == [
            id(p) for p in module.parameters()
        ]
    moments = _moments(est)
    assert len(moments) == 2 * len(list(est.parameters()))
    assert {v.device.type for _, v in moments} == {"meta"}

    # On the CPU: exactly the saved networks and moments.
    est = restored.estimator_on(DIM, torch.device("cpu"))
    reference = MIRegularizationPlugin(seed=3)
    reference.load_state_dict(saved)
    for (name, a), b in zip(est.state_dict().items(), saved["estimator"].values()):
        if isinstance(a, torch.Tensor):
            assert torch.equal(a, b), name
    assert len(_moments(est)) == len(moments)
    assert all(
        torch.equal(a, b)
        for (_, a), (_, b) in zip(_moments(est), _moments(reference.estimator_on(DIM, "cpu")))
    )


def test_restored_state_of_another_size_is_refused():
    restored = MIRegularizationPlugin()
    restored.load_state_dict(_trained_plugin().state_dict())
    with pytest.raises(ValueError, match="take 8-d embeddings but the model gives 4-d"):
        restored.estimator_on(4, "cpu")


PRESET = resolve_preset(
    "quick", image_size=16, n_blocks=2, width=4, n_way=2, n_shot=1, n_query=2, n_unlabeled=2,
    n_ood=2, tasks_per_domain=8, n_test_episodes=2, n_val_episodes=2, mem_size=4,
    domains=["shapes"], ood=["rings"], eval_mb_size=4,
)  # fmt: skip


def test_checkpoint_is_read_onto_the_cpu_and_resumes_next_to_the_model(tmp_path, monkeypatch):
    bench = sets_benchmark(
        "synthetic", domains=PRESET.domains, ood=PRESET.ood, n_way=2, n_shot=1,
        n_query=2, n_unlabeled=2, n_ood=2, tasks_per_domain=8, n_test_episodes=2,
        n_val_episodes=2, image_size=16, seed=0,
    )  # fmt: skip
    first = build_strategy("order", PRESET, seed=0, evaluator=EvaluationPlugin())
    first.train(bench.train_stream[0])
    path = save_checkpoint(tmp_path / "c.pt", first, position={"experience": 1, "iteration": 0})

    loads = []
    real_load = torch.load
    monkeypatch.setattr(
        torch, "load", lambda *a, **kw: loads.append(kw.get("map_location")) or real_load(*a, **kw)
    )
    resumed = build_strategy("order", PRESET, seed=1, evaluator=EvaluationPlugin())
    load_checkpoint(path, resumed)
    assert loads == ["cpu"], "load_checkpoint must say where it reads to"

    mi = next(p for p in resumed.plugins if isinstance(p, MIRegularizationPlugin))
    devices = []
    real_on = mi.estimator_on
    mi.estimator_on = lambda dim, device: devices.append(device) or real_on(dim, device)
    for s in (first, resumed):
        torch.manual_seed(5)
        s.train(bench.train_stream[0])
    model_device = next(resumed.model.parameters()).device
    assert devices and all(torch.device(d) == model_device for d in devices)
    original = next(p for p in first.plugins if isinstance(p, MIRegularizationPlugin))
    for a, b in zip(original.estimator.parameters(), mi.estimator.parameters()):
        assert b.device == model_device
        assert torch.equal(a, b), "the resumed MI networks differ from the uninterrupted ones"


def test_no_plugin_hard_codes_a_device():
    """Plugins choose devices from the model or the data, never from a literal. (Copies to the
    CPU with ``.cpu()`` for compact storage are deliberate and allowed.)"""
    root = Path(avalanche_sets.__file__).parent
    files = [*root.glob("order/*.py"), *root.glob("baselines/plugins/*.py")]
    assert len(files) > 8
    literal = re.compile(r"""(?<![\w.])(["'])(cpu|cuda(:\d+)?|mps)\1""")
    offenders = [
        f"{f.relative_to(root)}:{i}: {line.strip()}"
        for f in files
        for i, line in enumerate(f.read_text().splitlines(), 1)
        if literal.search(line) and not line.lstrip().startswith("#")
    ]
    assert not offenders, offenders


def test_a_restored_replay_memory_moves_next_to_the_model_at_its_first_replay():
    """A checkpoint is read onto the CPU; a GPU run's memory must go back to the GPU (here the
    ``meta`` device) once, whole, before it is stacked with the current batch."""
    from avalanche_sets.data import EpisodeBatch
    from avalanche_sets.order import FeatureReservoirReplayPlugin
    from avalanche_sets.order.replay import MemoryTask
    from avalanche_sets.training.iteration import Iteration

    def task(seed: int) -> MemoryTask:
        g = torch.Generator().manual_seed(seed)
        img = lambda n: torch.randint(0, 255, (n, 4, 4, 3), generator=g, dtype=torch.uint8)  # noqa: E731
        return MemoryTask(
            support_x=img(2), support_y=torch.tensor([0, 1]), query_x=img(2),
            query_y=torch.tensor([0, 1]), unlabeled_x=img(3),
            unlabeled_id=torch.tensor([True, False, True]), features=torch.randn(4, DIM, generator=g),
        )  # fmt: skip

    saved = FeatureReservoirReplayPlugin(mem_size=3, replay_batch=2, seed=0)
    for s in range(5):
        saved.reservoir.offer(task(s))
    restored = FeatureReservoirReplayPlugin(mem_size=3, replay_batch=2, seed=0)
    restored.load_state_dict(copy.deepcopy(saved.state_dict()))
    assert {t.features.device.type for t in restored.tasks} == {"cpu"}

    class Strategy:
        mb_x = EpisodeBatch(
            support_x=torch.empty(1, 2, 4, 4, 3, dtype=torch.uint8, device="meta"),
            support_y=torch.empty(1, 2, dtype=torch.long, device="meta"),
            query_x=torch.empty(1, 2, 4, 4, 3, dtype=torch.uint8, device="meta"),
            query_y=torch.empty(1, 2, dtype=torch.long, device="meta"),
            unlabeled_x=torch.empty(1, 3, 4, 4, 3, dtype=torch.uint8, device="meta"),
        )

        iteration = Iteration(training=True, n_current=1)

    strategy = Strategy()
    restored.before_training_iteration(strategy)
    assert {t.features.device.type for t in restored.tasks} == {"meta"}
    assert {t.support_x.device.type for t in restored.tasks} == {"meta"}
    replayed = strategy.iteration.replayed.batch  # what the template appends to the batch
    assert replayed.support_x.shape[0] == 2 and replayed.support_x.is_meta
    # the memory's content and the reservoir's decisions are those of the saved plugin
    assert restored.reservoir.n_seen == saved.reservoir.n_seen == 5
    assert [t.features.shape for t in restored.tasks] == [t.features.shape for t in saved.tasks]
