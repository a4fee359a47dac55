"""The device-resident sampler gives the host sampler's episodes, tensor for tensor.

A GPU run gathers episodes from image pools on the GPU (``DeviceEpisodeSampler``); the CPU suite
runs the same code with ``device="cpu"``, so a wrong row, source or label order fails here.
"""

from __future__ import annotations

from dataclasses import fields

import numpy as np
import pytest
import torch
from avalanche.training.plugins import EvaluationPlugin

from avalanche_sets.data import (
    DeviceEpisodeSampler,
    DeviceImagePools,
    Domain,
    EpisodeConfig,
    EpisodeSampler,
    collate_episodes,
    sets_benchmark,
)
from avalanche_sets.methods import build_strategy
from avalanche_sets.presets import resolve_preset
from avalanche_sets.runs.experiment import build_benchmark, data_device


def _domain(name: str, seed: int, n_classes: int = 12, per_class: int = 15) -> Domain:
    rng = np.random.default_rng(seed)
    split = np.array(["train"] * (n_classes - 8) + ["val"] * 4 + ["test"] * 4)
    return Domain(
        name,
        rng.integers(0, 256, (n_classes * per_class, 6, 6, 3), dtype=np.uint8),
        np.repeat(np.arange(n_classes), per_class),
        [f"{name}{c}" for c in range(n_classes)],
        split,
    )


DOMAIN = _domain("d", 0)
OOD = [_domain("o1", 1), _domain("o2", 2), _domain("o3", 3)]
CFG = EpisodeConfig(n_way=3, n_shot=2, n_query=3, n_unlabeled=4, n_ood=7)


def _assert_same_episode(a, b) -> None:
    for f in fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if f.name == "oracle":
            for g in fields(x):
                assert torch.equal(getattr(x, g.name), getattr(y, g.name)), g.name
            continue
        assert x.dtype == y.dtype and x.device == y.device, f.name
        assert torch.equal(x, y), f"{f.name} differs"


@pytest.mark.parametrize("split", ["train", "val", "test"])
def test_device_sampler_gives_the_host_samplers_episodes(split):
    pools = DeviceImagePools("cpu")
    host = EpisodeSampler(DOMAIN, OOD, split=split, config=CFG, seed=11)
    device = DeviceEpisodeSampler(DOMAIN, OOD, pools=pools, split=split, config=CFG, seed=11)
    for i in range(25):
        a, b = host.sample(i), device.sample(i)
        _assert_same_episode(a, b)
    # every source contributed: the test would not notice a wrong OOD pool otherwise
    sources = torch.cat([host.sample(i).oracle.unlabeled_source for i in range(25)])
    assert set(sources.tolist()) == {-1, 0, 1, 2}


def test_pools_are_copied_once_per_domain_and_shared_by_the_streams():
    bench = sets_benchmark(
        "synthetic", domains=["shapes", "strokes"], ood=["rings"], n_way=3, n_shot=1, n_query=2,
        n_unlabeled=2, n_ood=4, tasks_per_domain=4, n_val_episodes=2, n_test_episodes=2,
        image_size=16, data_device="cpu",
    )  # fmt: skip
    samplers = [exp.sampler for s in (bench.train_stream, bench.test_stream) for exp in s]
    assert all(isinstance(s, DeviceEpisodeSampler) for s in samplers)
    pools = {id(s.pools) for s in samplers}
    assert len(pools) == 1, "one set of pools per benchmark"
    held = samplers[0].pools.nbytes
    assert held == sum(d.images.nbytes for d in [*bench.domains, *bench.ood_sources])
    assert bench.settings["data_device"] == "cpu"


def test_a_run_on_device_pools_trains_the_same_weights_as_on_host_episodes():
    preset = resolve_preset(
        "quick", image_size=16, n_blocks=2, width=4, n_way=2, n_shot=1, n_query=2,
        n_unlabeled=2, n_ood=2, tasks_per_domain=8, n_test_episodes=2, n_val_episodes=2,
        mem_size=4, domains=["shapes"], ood=["rings"], eval_mb_size=4,
    )  # fmt: skip
    weights = []
    for where in (None, "cpu"):
        bench = sets_benchmark(
            "synthetic", domains=["shapes"], ood=["rings"], n_way=2, n_shot=1, n_query=2,
            n_unlabeled=2, n_ood=2, tasks_per_domain=8, n_test_episodes=2, n_val_episodes=2,
            image_size=16, seed=0, data_device=where,
        )  # fmt: skip
        torch.manual_seed(0)
        strategy = build_strategy("order", preset, seed=0, evaluator=EvaluationPlugin())
        strategy.train(bench.train_stream[0])
        weights.append([p.detach().clone() for p in strategy.model.parameters()])
        batch, _, _ = collate_episodes([bench.train_stream[0].sampler.sample(i) for i in (0, 1)])
        assert batch.support_x.dtype == torch.uint8
    for a, b in zip(*weights):
        assert torch.equal(a, b)


def test_a_gpu_preset_gathers_on_its_gpu_and_a_cpu_preset_on_the_host():
    assert data_device(resolve_preset("paper")) == "cuda"
    assert data_device(resolve_preset("quick")) is None
    bench = build_benchmark(
        resolve_preset("quick", tasks_per_domain=4, n_test_episodes=2, n_val_episodes=2), seed=0
    )
    assert type(bench.train_stream[0].sampler) is EpisodeSampler


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error where CUDA is absent")
def test_pools_on_a_gpu_without_cuda_are_refused_with_a_fix():
    with pytest.raises(ValueError, match="need CUDA.*fix: use device='cpu'"):
        DeviceImagePools("cuda")
