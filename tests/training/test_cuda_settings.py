"""The CUDA fast paths (fused Adam, cuDNN's autotuner) switch on for a CUDA device only, so a
CPU run keeps its exact numbers; checked without a GPU (nothing here runs a CUDA kernel)."""

from __future__ import annotations

import pytest
import torch

from avalanche_sets.methods import build_strategy
from avalanche_sets.presets import resolve_preset
from avalanche_sets.training.cuda_settings import default_adam, use_cudnn_autotuner

TINY = dict(source="synthetic", domains=["shapes"], image_size=16, n_blocks=2, width=4,
            n_ood=4, threads=1, tasks_per_domain=4)  # fmt: skip


@pytest.fixture
def cudnn_benchmark():
    before = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = False
    yield
    torch.backends.cudnn.benchmark = before


@pytest.mark.parametrize(("device", "fused"), [("cuda", True), ("cuda:0", True), ("cpu", None),
                                               (None, None)])  # fmt: skip
def test_adam_is_fused_on_a_cuda_device_only(device, fused):
    opt = default_adam([torch.nn.Parameter(torch.zeros(3))], lr=1e-3, device=device)
    assert opt.defaults["fused"] is fused and opt.defaults["lr"] == 1e-3


@pytest.mark.parametrize(("method", "module"), [("order", "avalanche_sets.order.strategy"),
                                               ("mskm", "avalanche_sets.baselines.meta")])  # fmt: skip
def test_the_methods_default_optimiser_follows_the_training_device(method, module, monkeypatch):
    import importlib

    seen = []

    def spy(params, *, lr, device):
        seen.append(device)
        return default_adam(params, lr=lr, device=device)

    # a CUDA strategy cannot be built without a GPU: the device must reach default_adam
    monkeypatch.setattr(importlib.import_module(module), "default_adam", spy)
    cpu = build_strategy(method, resolve_preset("cpu", **TINY, device="cpu"), seed=0)
    assert seen == ["cpu"]
    assert cpu.optimizer.defaults["fused"] is None  # the default step: CPU numbers unchanged


def test_the_cudnn_autotuner_is_for_cuda_and_never_in_deterministic_mode(cudnn_benchmark):
    use_cudnn_autotuner("cpu")
    assert torch.backends.cudnn.benchmark is False
    torch.use_deterministic_algorithms(True)
    try:
        use_cudnn_autotuner("cuda")
    finally:
        torch.use_deterministic_algorithms(False)
    assert torch.backends.cudnn.benchmark is False
    use_cudnn_autotuner(torch.device("cuda"))
    assert torch.backends.cudnn.benchmark is True
