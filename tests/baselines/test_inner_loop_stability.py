"""ANIL's and LST's inner loop stays stable at the embedding scale their backbone reaches.

The head is adapted by plain gradient descent; GD on a linear softmax head is stable while
``inner_lr`` times the curvature (about a fifth of the embeddings' squared norm) stays below 2.
The probe of LST's collapse (docs/verification/baselines.md, check 2) measured
support-embedding norms of 12-20 in training and evaluation; with the former default
``inner_lr = 0.1`` the inner loop diverged there and the meta-gradient exploded. These tests
build embeddings shaped like the backbone's (non-negative, a shared mean plus class offsets) at
those norms and check the defaults (ANIL's and LST's, read from the classes, not restated).
"""

from __future__ import annotations

import inspect

import pytest
import torch
from avalanche.training.plugins import EvaluationPlugin

from avalanche_sets.baselines.lst import LST, LSTModel
from avalanche_sets.baselines.meta import ANIL, ANILModel, weighted_cross_entropy
from avalanche_sets.models.backbone import ConvBackbone

N_WAY, SHOT, DIM = 5, 5, 128


def _embeddings(norm: float, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(N_WAY).repeat_interleave(SHOT)
    base = torch.rand(DIM, generator=g)
    offsets = 0.6 * torch.rand(N_WAY, DIM, generator=g)
    e = (base + offsets[y] + 0.3 * torch.rand(len(y), DIM, generator=g)).clamp_min(0)
    return e / e.norm(dim=1, keepdim=True) * norm, y


def _model(cls):
    torch.manual_seed(0)
    return cls(ConvBackbone(n_blocks=4, width=32, image_size=32), n_way=N_WAY)


def _inner_loop(model, e, y, steps: int = 10):
    """Support losses along ``steps`` second-order steps, and the gradient of the final loss
    with respect to the embeddings (what the meta-gradient flows through)."""
    e = e.clone().requires_grad_(True)
    learner = model.clone_head()
    losses = []
    for _ in range(steps):
        loss = weighted_cross_entropy(learner(e), y)
        losses.append(loss.item())
        learner.adapt(loss, first_order=False)
    final = weighted_cross_entropy(learner(e), y)
    losses.append(final.item())
    return losses, torch.autograd.grad(final, e)[0].norm().item()


@pytest.mark.parametrize("cls", [ANILModel, LSTModel])
@pytest.mark.parametrize("norm", [8.0, 12.0, 16.0, 20.0])
def test_default_inner_loop_descends_at_the_measured_embedding_norms(cls, norm):
    e, y = _embeddings(norm)
    losses, grad = _inner_loop(_model(cls), e, y)
    # gradient descent that converges: every step lowers the support loss ...
    assert all(b < a for a, b in zip(losses, losses[1:])), losses
    # ... and the meta-gradient through the 10 steps stays of the order of a single loss's
    _, grad_one = _inner_loop(_model(cls), e, y, steps=0)
    assert grad < 3 * grad_one, (grad, grad_one)


def test_the_former_step_diverges_there():
    """The same check with ``inner_lr = 0.1`` fails at the norms training reached: the support
    loss grows and the meta-gradient explodes (what the probe saw before the collapse)."""
    model = _model(ANILModel)
    model.inner_lr = 0.1
    losses, grad = _inner_loop(model, *_embeddings(20.0))
    assert losses[-1] > 2 * losses[0]
    _, grad_one = _inner_loop(model, *_embeddings(20.0), steps=0)
    assert grad > 20 * grad_one


def test_strategies_build_their_model_with_its_default():
    """The default lives on the model alone; the strategy's model takes it. First-order is the
    variant the converged stream's validation classes chose (docs/verification/baselines.md,
    check 5): second-order, the meta-gradient exploded once the embeddings had grown."""
    for model_cls, cls in ((ANILModel, ANIL), (LSTModel, LST)):
        params = inspect.signature(model_cls).parameters
        assert params["inner_lr"].default == 0.01, model_cls
        assert params["first_order"].default is True, model_cls
        assert cls.model_class is model_cls and "inner_lr" in cls.model_option_names()
        assert cls(evaluator=EvaluationPlugin()).model.inner_lr == 0.01, cls
