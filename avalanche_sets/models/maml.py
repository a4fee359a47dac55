"""MAML's inner loop for a module: differentiable clones adapted by plain gradient steps
(Finn et al., ICML 2017, "Model-Agnostic Meta-Learning for Fast Adaptation of Deep Networks").

ANIL and LST (:mod:`avalanche_sets.baselines`) adapt a linear head per episode with it. The
arithmetic is learn2learn 0.2.0's ``MAML`` (``clone``, ``adapt``, ``detach_module``), step for
step, so a run gives the same numbers with either; it lives in the package because learn2learn
has no wheel for current Python versions and its sdist no longer builds, which would leave
ANIL and LST out of a plain ``pip install``.

* :func:`clone_module` — a copy of a module whose parameters are ``clone()`` s of the
  original's: gradients through the copy reach the original.
* :class:`MAMLLearner` — wraps a module (its ``state_dict`` keys are ``module.<name>``); its
  :meth:`~MAMLLearner.clone` is the per-episode learner, :meth:`~MAMLLearner.adapt` one step
  ``θ ← θ + (−lr · ∇θ loss)`` that replaces the clone's parameter tensors (never in place), and
  :meth:`~MAMLLearner.detached` a clone cut off from the original.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

__all__ = ["MAMLLearner", "clone_module"]


def clone_module(module: nn.Module) -> nn.Module:
    """A copy of ``module`` (submodules included) whose parameters are ``p.clone()``: the copy
    stays in the autograd graph, so a loss of the copy back-propagates into ``module``.

    A parameter shared by several submodules is cloned once and stays shared. Buffers and every
    other attribute are shared with ``module`` (a shallow copy), as the inner loop only replaces
    parameters.
    """
    clones: dict[int, Tensor] = {}

    def copy(m: nn.Module) -> nn.Module:
        c = m.__new__(type(m))
        c.__dict__ = m.__dict__.copy()
        c._parameters = m._parameters.copy()
        c._buffers = m._buffers.copy()
        c._modules = {k: None if s is None else copy(s) for k, s in m._modules.items()}
        for key, p in m._parameters.items():
            if p is not None:
                if id(p) not in clones:
                    clones[id(p)] = p.clone()
                c._parameters[key] = clones[id(p)]
        return c

    return copy(module)


def _replace_parameters(module: nn.Module, new: dict[int, Tensor]) -> None:
    """Put ``new[id(p)]`` in place of every parameter ``p`` of ``module`` found in ``new``."""
    for m in module.modules():
        for key in list(m._parameters):
            p = m._parameters[key]
            if p is not None and id(p) in new:
                m._parameters[key] = new[id(p)]


class MAMLLearner(nn.Module):
    """``module`` with MAML's inner loop: :meth:`clone` it per task, :meth:`adapt` the clone.

    Args:
        module: the module adapted in the inner loop (registered as ``self.module``).
        lr: the inner loop's step size (an attribute: not in the ``state_dict``).
        first_order: first-order MAML by default in :meth:`adapt`: no graph through the inner
            steps' gradients, so the meta-gradient skips their second derivatives.

    Calling it calls ``module``.
    """

    def __init__(self, module: nn.Module, *, lr: float, first_order: bool = False) -> None:
        super().__init__()
        self.module = module
        self.lr = lr
        self.first_order = bool(first_order)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.module(*args, **kwargs)

    def clone(self, *, first_order: bool | None = None) -> MAMLLearner:
        """A learner over :func:`clone_module` of ``module`` (same ``lr``; ``first_order``
        default: this learner's)."""
        first_order = self.first_order if first_order is None else first_order
        return MAMLLearner(clone_module(self.module), lr=self.lr, first_order=first_order)

    def adapt(self, loss: Tensor, *, first_order: bool | None = None) -> None:
        """One gradient step on ``loss``: every parameter ``θ`` of ``module`` is replaced by
        ``θ + (−lr · ∂loss/∂θ)``, a new tensor (the old one, and whatever it was cloned from,
        is not modified). Second-order (``first_order=False``) keeps the gradients in the graph,
        so a later loss differentiates through this step.

        Raises:
            RuntimeError: (from autograd) a parameter does not take part in ``loss``.
        """
        first_order = self.first_order if first_order is None else first_order
        params = list(self.module.parameters())
        grads = torch.autograd.grad(
            loss, params, retain_graph=not first_order, create_graph=not first_order
        )
        _replace_parameters(self.module, {id(p): p + -self.lr * g for p, g in zip(params, grads)})

    def detached(self, *, first_order: bool | None = None) -> MAMLLearner:
        """A :meth:`clone` whose parameters are new leaves holding the same values
        (``requires_grad`` as the originals'): gradients through it reach neither this learner
        nor anything upstream of it."""
        clone = self.clone(first_order=first_order)
        params = list(clone.module.parameters())
        _replace_parameters(
            clone.module,
            {id(p): p.detach().requires_grad_(p.requires_grad) for p in params},
        )
        return clone
