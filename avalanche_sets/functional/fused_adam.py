"""One step of a fused Adam with gradients handed over, that ``torch.compile`` can trace.

``torch.optim.Adam.step`` breaks a compiled graph on purpose (it switches autograd off around
the update), so a training step compiled whole (``fullgraph=True``) cannot call it. The fused
update is one ATen operator, ``torch._fused_adam_``: :func:`fused_adam_step` calls it as
``Adam(fused=True).step()`` does, on the optimiser's own state, with the same arithmetic, and
can skip the step on the device (``found_inf``) without reading anything on the host.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

__all__ = ["fused_adam_step"]


def fused_adam_step(
    optimizer: torch.optim.Adam, grads: Sequence[Tensor], *, found_inf: Tensor | None = None
) -> None:
    """Update the parameters of ``optimizer`` (an ``Adam(..., fused=True)`` with one parameter
    group) with ``grads``, one per parameter in the group's order (``None``: the parameter is
    left alone this step, as ``step()`` leaves a parameter without a gradient).

    ``found_inf``: a one-element float tensor on the parameters' device; where it is non-zero
    the step is skipped there (parameters, moments and step count unchanged), as a gradient
    scaler skips a step. The optimiser's ``state`` is created on the first call as ``step()``
    creates it, so ``state_dict()``/``load_state_dict()`` and ``step()`` keep working.
    """
    if not optimizer.defaults.get("fused") or len(optimizer.param_groups) != 1:
        raise ValueError(
            "fused_adam_step needs a torch.optim.Adam(..., fused=True) with one parameter group"
        )
    group = optimizer.param_groups[0]
    if group["amsgrad"] or group.get("decoupled_weight_decay", False):
        raise ValueError("fused_adam_step supports plain Adam (amsgrad=False)")
    if len(grads) != len(group["params"]):
        raise ValueError(
            f"fused_adam_step got {len(grads)} gradients for {len(group['params'])} parameters"
        )
    pairs = [(p, g) for p, g in zip(group["params"], grads) if g is not None]
    if not pairs:
        return
    params, grads = [p for p, _ in pairs], [g for _, g in pairs]
    exp_avgs, exp_avg_sqs, steps = [], [], []
    for p in params:
        state = optimizer.state[p]
        if not state:
            state["step"] = torch.zeros((), dtype=torch.float32, device=p.device)
            state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        exp_avgs.append(state["exp_avg"])
        exp_avg_sqs.append(state["exp_avg_sq"])
        steps.append(state["step"])
    beta1, beta2 = group["betas"]
    if found_inf is not None:
        found_inf = found_inf.reshape(())
    torch._foreach_add_(steps, 1)
    torch._fused_adam_(
        params,
        grads,
        exp_avgs,
        exp_avg_sqs,
        [],
        steps,
        amsgrad=False,
        lr=group["lr"],
        beta1=beta1,
        beta2=beta2,
        weight_decay=group["weight_decay"],
        eps=group["eps"],
        maximize=group["maximize"],
        grad_scale=None,
        found_inf=found_inf,
    )
    if found_inf is not None:
        torch._foreach_sub_(steps, [found_inf] * len(steps))
