"""MAML's inner loop (avalanche_sets.models.maml): clones stay in the graph, a step is
``θ + (−lr·∇θ)``, second order differentiates through the steps and first order does not, a
detached clone is cut off, and the numbers are learn2learn 0.2.0's (where it is installed)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from avalanche_sets.models import MAMLLearner, clone_module

LR = 0.1


def _data(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(12, 6, generator=g), torch.randint(0, 3, (12,), generator=g)


def _learner(first_order: bool = False, seed: int = 0) -> MAMLLearner:
    torch.manual_seed(seed)
    return MAMLLearner(nn.Linear(6, 3), lr=LR, first_order=first_order)


def _unrolled(params: dict, x, y, steps: int, *, create_graph: bool) -> dict:
    """``steps`` plain gradient steps on ``functional_call(nn.Linear)``: the reference."""
    net = nn.Linear(6, 3)
    for _ in range(steps):
        loss = F.cross_entropy(functional_call(net, params, (x,)), y)
        grads = torch.autograd.grad(loss, list(params.values()), create_graph=create_graph)
        params = {k: p + -LR * g for (k, p), g in zip(params.items(), grads)}
    return params


def test_state_dict_keys_and_forward_are_the_wrapped_modules():
    learner = _learner()
    assert list(learner.state_dict()) == ["module.weight", "module.bias"]
    x, _ = _data()
    assert torch.equal(learner(x), learner.module(x))


def test_a_step_replaces_the_clones_parameters_and_leaves_the_original_alone():
    learner = _learner()
    w0, b0 = learner.module.weight.detach().clone(), learner.module.bias.detach().clone()
    x, y = _data()
    clone = learner.clone()
    before = list(clone.parameters())
    loss = F.cross_entropy(clone(x), y)
    grads = torch.autograd.grad(loss, before, retain_graph=True)
    clone.adapt(loss)
    after = list(clone.parameters())
    assert all(a is not b for a, b in zip(after, before))  # new tensors, never in place
    for a, b, g in zip(after, before, grads):
        assert torch.equal(a, b + -LR * g)
    assert torch.equal(learner.module.weight, w0) and torch.equal(learner.module.bias, b0)
    assert learner.module.weight.grad is None


def _reference_meta_gradients(learner: MAMLLearner, x, y, xq, yq, steps: int) -> dict:
    """The init's meta-gradient after ``steps`` steps, by :func:`_unrolled`: second order
    (through the steps' Jacobians) and first order (the query gradient at the adapted head)."""
    out = {}
    for first_order in (True, False):
        init = {
            k: p.detach().clone().requires_grad_() for k, p in learner.module.named_parameters()
        }
        adapted = _unrolled(init, x, y, steps, create_graph=not first_order)
        query = F.cross_entropy(functional_call(nn.Linear(6, 3), adapted, (xq,)), yq)
        out[first_order] = torch.autograd.grad(
            query, list((adapted if first_order else init).values())
        )
    return out


@pytest.mark.parametrize("first_order", [False, True])
def test_meta_gradient_is_second_order_or_first_order(first_order):
    learner = _learner(first_order=first_order)
    x, y = _data()
    xq, yq = _data(seed=1)
    want = _reference_meta_gradients(learner, x, y, xq, yq, steps=3)
    clone = learner.clone()
    for _ in range(3):
        clone.adapt(F.cross_entropy(clone(x), y))
    F.cross_entropy(clone(xq), yq).backward()
    got = [learner.module.weight.grad, learner.module.bias.grad]
    for g, w in zip(got, want[first_order]):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-7)
    # the two orders differ here, so the comparison above tells them apart
    assert not torch.allclose(got[0], want[not first_order][0], rtol=1e-3, atol=1e-5)


def test_the_step_follows_the_call_not_the_learner_when_told():
    x, y = _data()
    xq, yq = _data(seed=1)
    grads = {}
    for first_order in (True, False):
        learner = _learner(first_order=True)
        clone = learner.clone()
        clone.adapt(F.cross_entropy(clone(x), y), first_order=first_order)
        F.cross_entropy(clone(xq), yq).backward()
        grads[first_order] = learner.module.weight.grad
    assert not torch.allclose(grads[True], grads[False])


def test_clone_keeps_a_shared_parameter_shared():
    shared = nn.Linear(4, 4)
    net = nn.Sequential(shared, nn.Tanh(), shared)
    copy = clone_module(net)
    assert copy[0].weight is copy[2].weight
    assert copy[0].weight is not net[0].weight and torch.equal(copy[0].weight, net[0].weight)
    copy(torch.randn(2, 4)).sum().backward()
    assert net[0].weight.grad is not None  # the copy's graph reaches the original


def test_detached_clone_reaches_nothing_upstream():
    torch.manual_seed(0)
    upstream = nn.Linear(6, 6)
    learner = _learner()
    x, y = _data()
    detached = learner.detached()
    assert all(p.requires_grad and p.is_leaf for p in detached.parameters())
    for a, b in zip(detached.parameters(), learner.parameters()):
        assert torch.equal(a, b)
    detached.adapt(F.cross_entropy(detached(upstream(x)), y), first_order=False)
    F.cross_entropy(detached(upstream(x)), y).backward()
    assert learner.module.weight.grad is None and learner.module.bias.grad is None
    assert upstream.weight.grad is not None  # the input path still back-propagates


def test_a_parameter_the_loss_does_not_use_is_refused():
    learner = MAMLLearner(nn.ModuleDict({"a": nn.Linear(2, 2), "b": nn.Linear(2, 2)}), lr=LR)
    clone = learner.clone()
    with pytest.raises(RuntimeError, match="not have been used"):
        clone.adapt(clone.module["a"](torch.randn(3, 2)).sum())


@pytest.mark.parametrize("first_order", [True, False])
def test_same_numbers_as_learn2learn(first_order):
    """The inner loop learn2learn 0.2.0 ran for ANIL and LST: bit-identical results."""
    l2l = pytest.importorskip(
        "learn2learn", reason="learn2learn is not installed: nothing to compare with"
    )
    x, y = _data()
    xq, yq = _data(seed=1)

    def run(wrap):
        torch.manual_seed(0)
        upstream = nn.Linear(6, 6)
        head = wrap(nn.Linear(6, 3))
        clone = head.clone(first_order=first_order)
        for _ in range(4):
            clone.adapt(F.cross_entropy(clone(upstream(x)), y), first_order=first_order)
        out = clone(upstream(xq))
        F.cross_entropy(out, yq).backward()
        return [out, *(p.grad for p in [*upstream.parameters(), *head.parameters()])]

    ours = run(lambda m: MAMLLearner(m, lr=0.01, first_order=first_order))
    theirs = run(lambda m: l2l.algorithms.MAML(m, lr=0.01, first_order=first_order))
    for a, b in zip(ours, theirs):
        assert torch.equal(a, b)
