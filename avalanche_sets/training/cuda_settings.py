"""The fast paths of a CUDA run that change no CPU number: Adam's fused step and cuDNN's
autotuner. Both apply only where the parameters train on a CUDA device, so every CPU run
keeps its exact numbers (the fused step sums in another order than the default one)."""

from __future__ import annotations

from collections.abc import Iterable

import torch

__all__ = ["default_adam", "use_cudnn_autotuner"]


def _is_cuda(device: str | torch.device | None) -> bool:
    return device is not None and torch.device(device).type == "cuda"


def default_adam(
    params: Iterable[torch.nn.Parameter], *, lr: float, device: str | torch.device | None
) -> torch.optim.Adam:
    """``Adam(params, lr)``, the paper's optimiser, with ``fused=True`` when ``device`` (where
    the strategy trains the parameters, which may still be on the CPU when it is built) is a
    CUDA device: one kernel per step for all parameters instead of several per tensor."""
    if _is_cuda(device):
        return torch.optim.Adam(params, lr=lr, fused=True)
    return torch.optim.Adam(params, lr=lr)


def use_cudnn_autotuner(device: str | torch.device | None) -> None:
    """On a CUDA device, let cuDNN time its convolution algorithms once per input shape and
    keep the fastest (``torch.backends.cudnn.benchmark``): an episodic run feeds the backbone
    a handful of fixed shapes (a meta-batch, its replayed tasks, an evaluation batch), so the
    timing is paid a few times and every later step gains. Left off where deterministic
    algorithms are asked for (``torch.use_deterministic_algorithms``), so that two processes
    cannot pick different algorithms. Process-wide, as cuDNN's setting is."""
    if _is_cuda(device) and not torch.are_deterministic_algorithms_enabled():
        torch.backends.cudnn.benchmark = True
