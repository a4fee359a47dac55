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

__all__ = ["adam_step", "fused_adam_step", "foreach_adam_step"]


def _state(optimizer: torch.optim.Adam, params: list[Tensor]) -> tuple[list, list, list]:
    """The moments and step counts of ``params``, made as ``Adam(fused=True).step()`` makes
    them at the first step."""
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
    return exp_avgs, exp_avg_sqs, steps


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
    with torch.no_grad():  # as step() updates: outside autograd
        exp_avgs, exp_avg_sqs, steps = _state(optimizer, params)
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


def foreach_adam_step(
    optimizer: torch.optim.Adam, grads: Sequence[Tensor | None], *, found_inf: Tensor | None = None
) -> None:
    """Adam's update of :func:`fused_adam_step` written with ``torch._foreach_*`` operators, for
    a step compiled through AOTAutograd (Inductor, CUDA graphs), which cannot functionalise
    the fused kernel. The same update up to rounding; ``found_inf`` keeps parameters, moments
    and step counts as they were. The optimiser's state is shared with ``step()``."""
    group = optimizer.param_groups[0]
    pairs = [(p, g) for p, g in zip(group["params"], grads) if g is not None]
    if not pairs:
        return
    params, grads = [p for p, _ in pairs], [g for _, g in pairs]
    beta1, beta2 = group["betas"]
    lr, eps = group["lr"], group["eps"]
    with torch.no_grad():
        m, v, steps = _state(optimizer, params)
        n = len(params)
        keep = None if found_inf is None else found_inf.reshape(()).to(params[0].dtype)
        go = torch.ones_like(steps[0]) if keep is None else (1.0 - keep).to(steps[0].dtype)
        if group["weight_decay"]:
            grads = torch._foreach_add(grads, params, alpha=group["weight_decay"])
        if group["maximize"]:
            grads = torch._foreach_neg(grads)
        # tensor operands as lists: a 0-d tensor taken as a scalar would be read on the host
        new_steps = torch._foreach_add(steps, [go] * n)
        new_m = torch._foreach_lerp(m, grads, 1.0 - beta1)
        new_v = torch._foreach_addcmul(torch._foreach_mul(v, beta2), grads, grads, 1.0 - beta2)
        step = new_steps[0]  # every parameter counts the same steps
        bias1 = 1.0 - torch.pow(beta1, step)
        bias2_sqrt = torch.sqrt(1.0 - torch.pow(beta2, step))
        denom = torch._foreach_div(torch._foreach_sqrt(new_v), [bias2_sqrt] * n)
        denom = torch._foreach_add(denom, eps)
        scale = (-lr / bias1 * go).to(params[0].dtype)
        update = torch._foreach_mul(torch._foreach_div(new_m, denom), [scale] * n)
        if keep is not None:  # a skipped step leaves the moments as they were
            new_m = [torch.where(keep > 0, a, b) for a, b in zip(m, new_m)]
            new_v = [torch.where(keep > 0, a, b) for a, b in zip(v, new_v)]
        torch._foreach_add_(params, update)
        torch._foreach_copy_(m, new_m)
        torch._foreach_copy_(v, new_v)
        torch._foreach_copy_(steps, new_steps)


def adam_step(
    optimizer: torch.optim.Adam, grads: Sequence[Tensor | None], *, found_inf: Tensor | None = None
) -> None:
    """One step of a fused Adam with ``grads``: the fused kernel (:func:`fused_adam_step`, what
    ``step()`` runs), or its foreach form (:func:`foreach_adam_step`) while ``torch.compile``
    traces a step, which cannot functionalise the fused kernel."""
    if torch.compiler.is_compiling():
        foreach_adam_step(optimizer, grads, found_inf=found_inf)
    else:
        fused_adam_step(optimizer, grads, found_inf=found_inf)
