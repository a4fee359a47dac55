"""The library on a CUDA GPU: a paper-shaped run, checkpoints across devices, where state
lives, determinism. Skipped where CUDA is absent (CI); run on a GPU machine with

    python -m pytest -q tests/test_cuda.py

The same code paths run on the CPU in the normal suite (``tests/data/test_device_episodes.py``
checks the device-resident sampler with ``device="cpu"``; ``tests/order/test_plugin_device.py``
moves restored state to a stand-in device).
"""

from __future__ import annotations

import os

# cuBLAS needs this before CUDA starts to run deterministically (torch's documentation).
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import pytest  # noqa: E402
import torch  # noqa: E402
from avalanche.training.plugins import EvaluationPlugin  # noqa: E402

from avalanche_sets.data import DeviceEpisodeSampler, EpisodeSampler  # noqa: E402
from avalanche_sets.methods import build_strategy  # noqa: E402
from avalanche_sets.order import FeatureReservoirReplayPlugin, MIRegularizationPlugin  # noqa: E402
from avalanche_sets.presets import resolve_preset  # noqa: E402
from avalanche_sets.runs.experiment import build_benchmark, run_experiment  # noqa: E402
from avalanche_sets.training import load_checkpoint, run_sets  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

#: The paper's network and episode (84 px, 5 blocks of 64 filters, Q = 15, R = 50) on two
#: synthetic domains, short: what a GPU user runs first, in seconds.
SHORT = dict(
    source="synthetic", domains=["shapes", "strokes"], ood=["rings", "spirals"],
    tasks_per_domain=12, n_val_episodes=2, n_test_episodes=4, eval_mb_size=4, mem_size=6,
)  # fmt: skip


def _preset(device: str, **more):
    return resolve_preset("paper", device=device, **{**SHORT, **more})


def _order_plugin(strategy, kind):
    return next(p for p in strategy.plugins if isinstance(p, kind))


def test_a_paper_shaped_run_trains_and_evaluates_on_the_gpu(tmp_path):
    rec = run_experiment("order", _preset("cuda"), seed=0, out_root=tmp_path, loggers=())
    res = rec.result
    assert len(res["matrix"]) == 2 and len(res["matrix"][1]) == 2
    assert all(0.0 <= a <= 1.0 for row in res["matrix"] for a in row if a is not None)
    assert rec.provenance.machine["gpu"], "the run record names the GPU"


def test_episodes_are_gathered_on_the_gpu_and_equal_the_host_ones():
    bench = build_benchmark(_preset("cuda"), seed=0)
    sampler = bench.train_stream[0].sampler
    assert isinstance(sampler, DeviceEpisodeSampler)
    host = EpisodeSampler(
        sampler.domain, sampler.ood_sources, split=sampler.split, config=sampler.config,
        seed=sampler.seed,
    )  # fmt: skip
    for i in range(5):
        a, b = sampler.sample(i), host.sample(i)
        assert a.support_x.is_cuda and a.unlabeled_x.is_cuda
        for name in ("support_x", "support_y", "query_x", "query_y", "unlabeled_x"):
            assert torch.equal(getattr(a, name).cpu(), getattr(b, name)), name


def test_memory_features_and_mi_networks_live_on_the_models_device():
    preset = _preset("cuda")
    bench = build_benchmark(preset, seed=0)
    strategy = build_strategy("order", preset, seed=0, evaluator=EvaluationPlugin())
    strategy.train(bench.train_stream[0])
    replay = _order_plugin(strategy, FeatureReservoirReplayPlugin)
    assert len(replay) > 0
    for task in replay.tasks:
        assert task.features.is_cuda and task.images()[0].is_cuda
    mi = _order_plugin(strategy, MIRegularizationPlugin)
    assert all(p.is_cuda for p in mi.estimator.parameters())


@pytest.mark.parametrize(("first", "second"), [("cuda", "cpu"), ("cpu", "cuda")])
def test_a_checkpoint_resumes_on_the_other_device(tmp_path, first, second):
    path = tmp_path / "checkpoint.pt"
    a = _preset(first)
    s1 = build_strategy("order", a, seed=0, evaluator=EvaluationPlugin())
    # 6 iterations per domain: the run stops 2 iterations into the second domain, right
    # after a checkpoint (every 2), so the checkpoint holds the weights it stopped with
    run_sets(s1, build_benchmark(a, seed=0), checkpoint_path=path, checkpoint_every=2, stop_after=8)
    saved = {k: v.detach().cpu().clone() for k, v in s1.model.state_dict().items()}

    b = _preset(second)
    s2 = build_strategy("order", b, seed=0, evaluator=EvaluationPlugin())
    load_checkpoint(path, s2)
    for k, v in s2.model.state_dict().items():
        assert v.device.type == torch.device(second).type
        assert torch.equal(v.cpu(), saved[k]), k
    # Adam's moments next to the parameters they update (the model moves before they load)
    moments = [t for st in s2.optimizer.state.values() for n, t in st.items() if n != "step"]
    assert moments and {t.device.type for t in moments} == {torch.device(second).type}
    assert s2.optimizer.defaults["fused"] is (True if second == "cuda" else None)
    result = run_sets(s2, build_benchmark(b, seed=0), checkpoint_path=path)
    assert len(result.to_dict()["matrix"]) == 2
    replay = _order_plugin(s2, FeatureReservoirReplayPlugin)
    assert {t.features.device.type for t in replay.tasks} == {torch.device(second).type}


def test_same_seed_in_deterministic_mode_gives_the_same_record(tmp_path):
    torch.use_deterministic_algorithms(True)
    try:
        records = [
            run_experiment("order", _preset("cuda"), seed=3, out_root=tmp_path / k, loggers=())
            for k in ("a", "b")
        ]
    finally:
        torch.use_deterministic_algorithms(False)
    assert records[0].result == records[1].result


def test_the_loss_terms_are_recorded_without_a_host_synchronisation():
    """Between two logged means, recording the terms makes no synchronising CUDA call (the
    CPU side of ``tests/training/test_loss_terms.py`` counts reads of tensor values)."""
    from types import SimpleNamespace

    from avalanche_sets.training.loss_terms import LossTerms

    metric = LossTerms(every=4)
    s = SimpleNamespace(clock=SimpleNamespace(train_iterations=0), loss_terms={})
    x = torch.randn(256, 256, device="cuda")
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")  # a synchronising call raises
    try:
        for _ in range(3):
            y = torch.tanh(x @ x)
            s.loss_terms = {"meta": y.mean(), "ot": y.std().to(torch.bfloat16)}
            assert metric.after_training_iteration(s) is None
            s.clock.train_iterations += 1
    finally:
        torch.cuda.set_sync_debug_mode(0)
    s.loss_terms = {"meta": torch.ones((), device="cuda"), "ot": torch.ones((), device="cuda")}
    out = metric.after_training_iteration(s)
    assert [m.x_plot for m in out] == [4, 4]
