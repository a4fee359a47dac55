"""``fused_adam_step``: the arithmetic of ``Adam(fused=True).step()``, bit for bit, and a step
skipped on the device (``found_inf``) leaves everything as it was."""

from __future__ import annotations

import copy

import pytest
import torch

from avalanche_sets.functional.fused_adam import fused_adam_step


def _params(seed: int = 0, dtype=torch.float32) -> list[torch.nn.Parameter]:
    g = torch.Generator().manual_seed(seed)
    shapes = [(4, 3), (3,), (2, 2, 2), ()]
    return [torch.nn.Parameter(torch.randn(s, generator=g, dtype=dtype)) for s in shapes]


def _grads(params, step: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(100 + step)
    return [torch.randn(p.shape, generator=g, dtype=p.dtype) * (step + 1) for p in params]


def _state(opt: torch.optim.Adam) -> list[dict[str, torch.Tensor]]:
    return [{k: v.clone() for k, v in opt.state[p].items()} for p in opt.param_groups[0]["params"]]


def _equal_states(a, b) -> bool:
    return all(
        x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x) for x, y in zip(a, b)
    )


@pytest.mark.parametrize(
    "options",
    [
        {"lr": 1e-2},
        {"lr": 3e-3, "betas": (0.8, 0.95), "eps": 1e-6, "weight_decay": 0.1},
        {"lr": 1e-2, "maximize": True},
    ],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_equals_fused_adam_step_bit_for_bit(options, dtype):
    mine, theirs = _params(dtype=dtype), _params(dtype=dtype)
    opt_mine = torch.optim.Adam(mine, fused=True, **options)
    opt_theirs = torch.optim.Adam(theirs, fused=True, **options)
    for step in range(5):
        grads = _grads(mine, step)
        fused_adam_step(opt_mine, grads)
        for p, gr in zip(theirs, grads):
            p.grad = gr.clone()
        opt_theirs.step()
        for a, b in zip(mine, theirs):
            assert torch.equal(a, b), (step, options)
        assert _equal_states(_state(opt_mine), _state(opt_theirs)), step
    assert float(opt_mine.state[mine[0]]["step"]) == 5
    assert opt_mine.state[mine[0]]["step"].dtype == opt_theirs.state[theirs[0]]["step"].dtype


def test_found_inf_skips_the_step_and_zero_takes_it():
    params = _params()
    opt = torch.optim.Adam(params, lr=1e-2, fused=True)
    ref_params = _params()
    ref = torch.optim.Adam(ref_params, lr=1e-2, fused=True)
    for step in range(6):
        grads = _grads(params, step)
        skip = step in (0, 3, 4)  # the very first step too (state created, nothing moved)
        before_p = [p.detach().clone() for p in params]
        before_s = _state(opt)
        fused_adam_step(opt, grads, found_inf=torch.tensor([1.0 if skip else 0.0]))
        if skip:
            assert all(torch.equal(a, b) for a, b in zip(params, before_p)), step
            if before_s[0]:
                assert _equal_states(_state(opt), before_s), step
            else:  # first call: a fresh state, as if no step had been taken
                for s in _state(opt):
                    assert float(s["step"]) == 0
                    assert not s["exp_avg"].any() and not s["exp_avg_sq"].any()
        else:  # found_inf = 0: the plain step
            for p, gr in zip(ref_params, grads):
                p.grad = gr.clone()
            ref.step()
            assert not all(torch.equal(a, b) for a, b in zip(params, before_p)), step
        for a, b in zip(params, ref_params):
            assert torch.equal(a, b), step
        assert _equal_states(_state(opt), _state(ref)) or step == 0
    assert float(opt.state[params[0]]["step"]) == 3


def test_state_dict_round_trips_and_step_continues():
    params = _params()
    opt = torch.optim.Adam(params, lr=1e-2, fused=True)
    for step in range(3):
        fused_adam_step(opt, _grads(params, step))
    saved = copy.deepcopy(opt.state_dict())
    clone = _params()
    with torch.no_grad():
        for a, b in zip(clone, params):
            a.copy_(b)
    opt2 = torch.optim.Adam(clone, lr=1e-2, fused=True)
    opt2.load_state_dict(saved)
    assert _equal_states(_state(opt2), _state(opt))
    # the loaded one with fused_adam_step, the original with step(): the same numbers
    for step in range(3, 6):
        grads = _grads(params, step)
        fused_adam_step(opt2, grads)
        for p, gr in zip(params, grads):
            p.grad = gr.clone()
        opt.step()
    for a, b in zip(clone, params):
        assert torch.equal(a, b)
    assert _equal_states(_state(opt2), _state(opt))
    assert float(opt2.state_dict()["state"][0]["step"]) == 6


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda ps: torch.optim.Adam(ps, lr=1e-3), "fused=True"),
        (lambda ps: torch.optim.Adam(ps, lr=1e-3, foreach=True), "fused=True"),
        (lambda ps: torch.optim.SGD(ps, lr=1e-3), "fused=True"),
        (lambda ps: torch.optim.Adam(ps, lr=1e-3, fused=True, amsgrad=True), "amsgrad"),
        (
            lambda ps: torch.optim.Adam(
                [{"params": ps[:2]}, {"params": ps[2:]}], lr=1e-3, fused=True
            ),
            "one parameter group",
        ),
    ],
)
def test_refuses_what_it_cannot_do(make, message):
    params = _params()
    opt = make(params)
    before = [p.detach().clone() for p in params]
    with pytest.raises(ValueError, match=message):
        fused_adam_step(opt, _grads(params, 0))
    assert all(torch.equal(a, b) for a, b in zip(params, before))


def test_refuses_a_wrong_number_of_gradients():
    params = _params()
    opt = torch.optim.Adam(params, lr=1e-3, fused=True)
    with pytest.raises(ValueError, match="3 gradients for 4 parameters"):
        fused_adam_step(opt, _grads(params, 0)[:3])
