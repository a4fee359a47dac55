"""The masked, batched MI bounds and fit equal the per-episode ones on the cut sets.

ORDER's step computes every episode's ``I_ood`` / ``I_id`` at once on fixed-shape ``[B, U, d]``
pairs with bool masks, and fits the MI networks on the flattened masked pairs. The reference
here is the straightforward per-episode computation: cut each set with its mask (``e[mask]``),
call the unmasked bound on it (a set of fewer than 2 pairs gives 0), and, for the fit, build the
two losses from the cut sets and step a copy of the networks with plain
``torch.optim.Adam(fused=True).step()``.

Tolerances: the networks and data are float64, and the masked form only changes the summation
order of the means (``Σ w_i x_i`` with ``w = 1/k`` against ``mean``), so the two agree to a few
ulps of float64; ``rtol=1e-10, atol=1e-12`` is far above that and far below any real
difference (a dropped mask or a wrong weight changes values in the first digits).
"""

from __future__ import annotations

import copy
import math

import pytest
import torch

from avalanche_sets.functional.mi import (
    MIEstimator,
    club_upper_bound,
    pair_mask,
    tuba_lower_bound,
)

TOL = {"rtol": 1e-10, "atol": 1e-12}
D, L = 3, 7


@pytest.fixture(autouse=True, scope="module")
def _single_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _masks(g: torch.Generator) -> torch.Tensor:
    """Sets of every kind: empty, one pair, two pairs, all rows, scattered rows, random."""
    m = torch.zeros(6, L, dtype=torch.bool)
    m[1, 4] = True  # one pair
    m[2, [0, 6]] = True  # two pairs, not adjacent
    m[3] = True  # every row
    m[4, [1, 2, 5]] = True
    m[5] = torch.rand(L, generator=g) < 0.6
    m[5, :2] = True  # at least two
    return m


def _data(g: torch.Generator, dtype=torch.float64):
    e = torch.randn(6, L, D, generator=g, dtype=dtype).requires_grad_(True)
    p = (0.7 * e.detach() + 0.5 * torch.randn(6, L, D, generator=g, dtype=dtype)).requires_grad_()
    return e, p


def _estimator(dtype=torch.float64, **kw) -> MIEstimator:
    torch.manual_seed(0)
    est = MIEstimator(D, q_hidden=16, **kw).to(dtype)
    with torch.no_grad():  # a critic whose scores spread (the default init is nearly flat)
        est.critic.hidden.weight.mul_(3.0)
    return est


def _per_episode(bound, net, e, p, mask, min_pairs=2, **kw):
    """The reference: each episode's set cut by its mask, the unmasked bound on it."""
    out = []
    for b in range(e.shape[0]):
        m = mask[b]
        if int(m.sum()) < min_pairs:
            out.append((e[b].sum() + p[b].sum()) * 0.0)
        else:
            out.append(bound(net, e[b][m], p[b][m], **kw))
    return torch.stack(out)


def _value_and_grads(out: torch.Tensor, e, p, w):
    grads = torch.autograd.grad((out * w).sum(), (e, p))
    return out.detach(), grads


@pytest.mark.parametrize("frozen", [False, True])
@pytest.mark.parametrize("which", ["club", "tuba"])
def test_masked_bounds_equal_per_episode_cut_sets_values_and_gradients(which, frozen):
    g = torch.Generator().manual_seed(0)
    est = _estimator()
    mask = _masks(g)
    e, p = _data(g)
    w = torch.rand(6, generator=g, dtype=torch.float64) + 0.5  # each episode weighs differently
    if which == "club":
        net, bound, kw = est.q, club_upper_bound, {}
    else:
        net, bound, kw = est.critic, tuba_lower_bound, {"clamp": est.clamp}
    got = bound(net, e, p, mask, frozen=frozen, **kw)
    assert got.shape == (6,)
    want = _per_episode(bound, net, e, p, mask, **kw)
    got_v, got_g = _value_and_grads(got, e, p, w)
    want_v, want_g = _value_and_grads(want, e, p, w)
    assert got_v[0] == 0 and got_v[1] == 0  # empty and one-pair sets
    assert want_v[2:].abs().min() > 1e-3  # every other set has a clearly non-zero bound
    torch.testing.assert_close(got_v, want_v, **TOL)
    for name, a, b in zip("ep", got_g, want_g):
        torch.testing.assert_close(a, b, **TOL, msg=f"gradient w.r.t. {name}")
        assert torch.all(a[~mask] == 0), f"a masked-out row of {name} gets a gradient"
    assert got_g[0][mask].abs().sum() > 0 and got_g[1][mask].abs().sum() > 0
    # the precomputed pair_mask gives the same numbers, bit for bit
    again = bound(net, e, p, pair_mask(mask, e.dtype), frozen=frozen, **kw)
    assert torch.equal(again.detach(), got_v)
    # masked-out rows can hold anything (finite): nothing of them reaches the bound
    noisy_e = torch.where(mask.unsqueeze(-1), e, 100.0 * torch.randn_like(e)).detach()
    noisy_p = torch.where(mask.unsqueeze(-1), p, -50.0 * torch.randn_like(p)).detach()
    torch.testing.assert_close(bound(net, noisy_e, noisy_p, mask, **kw).detach(), got_v, **TOL)
    # frozen: the same value, and no gradient into the network
    params = list(net.parameters())
    fresh = bound(net, e, p, mask, frozen=frozen, **kw)
    grads = torch.autograd.grad(fresh.sum(), params, allow_unused=True)
    if frozen:
        assert all(gr is None for gr in grads)
    else:
        assert all(gr is not None for gr in grads)


@pytest.mark.parametrize("which", ["club", "tuba"])
def test_leading_dimensions_and_min_pairs(which):
    g = torch.Generator().manual_seed(1)
    est = _estimator()
    mask = _masks(g)
    e, p = _data(g)
    net, bound = (est.q, club_upper_bound) if which == "club" else (est.critic, tuba_lower_bound)
    flat = bound(net, e, p, mask).detach()
    grid = bound(net, e.reshape(2, 3, L, D), p.reshape(2, 3, L, D), mask.reshape(2, 3, L))
    assert grid.shape == (2, 3)
    torch.testing.assert_close(grid.detach().reshape(-1), flat, **TOL)
    # min_pairs=3: the two-pair set gives 0 now, the others are unchanged
    three = bound(net, e, p, mask, min_pairs=3).detach()
    want = _per_episode(bound, net, e, p, mask, min_pairs=3).detach()
    assert three[2] == 0 and flat[2] != 0
    torch.testing.assert_close(three, want, **TOL)


def test_float32_masked_bounds_agree_with_the_cut_sets():
    """In float32 (the training dtype), the masks are built in float32 too; agreement to a few
    float32 ulps of the terms (rtol 1e-5)."""
    g = torch.Generator().manual_seed(2)
    est = _estimator(torch.float32)
    mask = _masks(g)
    e, p = _data(g, torch.float32)
    for bound, net in ((club_upper_bound, est.q), (tuba_lower_bound, est.critic)):
        got = bound(net, e, p, mask)
        want = _per_episode(bound, net, e, p, mask)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------ the fit


def _opt_state(opt: torch.optim.Optimizer) -> list[dict[str, torch.Tensor]]:
    return [{k: v.clone() for k, v in opt.state[p].items()} for p in opt.param_groups[0]["params"]]


def _reference_step(ref: MIEstimator, e_id, p_id, e_ood, p_ood, id_mask, ood_mask):
    """One step of each network of ``ref`` by hand on the cut sets, with plain fused Adam."""
    out = {"nll": float("nan"), "i_id": float("nan")}
    cut_ood = (e_ood[ood_mask].detach(), p_ood[ood_mask].detach())
    if cut_ood[0].shape[0] >= ref.min_pairs:
        ref.opt_q.zero_grad()
        nll = ref.q.nll(cut_ood[1], cut_ood[0])  # -mean_i log q(p_i | e_i)
        nll.backward()
        ref.opt_q.step()
        out["nll"] = float(nll.detach())
    cut_id = (e_id[id_mask].detach(), p_id[id_mask].detach())
    if cut_id[0].shape[0] >= ref.min_pairs:
        ref.opt_critic.zero_grad()
        bound = tuba_lower_bound(ref.critic, *cut_id, clamp=ref.clamp)
        (-bound).backward()
        ref.opt_critic.step()
        out["i_id"] = float(bound.detach())
    return out


#: (ID pairs, OOD pairs) of the successive steps: both fitted, then each skipped in turn
#: (empty, a single pair), both skipped, and both fitted again.
SCHEDULE = [(9, 10), (0, 12), (12, 1), (1, 0), (5, 2), (2, 7), (12, 12)]


def test_fit_step_with_masks_equals_adam_on_the_concatenated_cut_sets():
    g = torch.Generator().manual_seed(3)
    est = _estimator(lr_q=1e-2, lr_critic=1e-2)
    ref = copy.deepcopy(est)
    assert ref.opt_q.defaults["fused"] and ref.opt_critic.defaults["fused"]
    n = 12
    for step, (k_id, k_ood) in enumerate(SCHEDULE):
        e = torch.randn(n, D, generator=g, dtype=torch.float64, requires_grad=True)
        p = 0.8 * e.detach() + 0.4 * torch.randn(n, D, generator=g, dtype=torch.float64)
        e2 = torch.randn(n, D, generator=g, dtype=torch.float64)
        p2 = 0.5 * e2 + torch.randn(n, D, generator=g, dtype=torch.float64)
        id_mask = torch.zeros(n, dtype=torch.bool)
        id_mask[torch.randperm(n, generator=g)[:k_id]] = True
        ood_mask = torch.zeros(n, dtype=torch.bool)
        ood_mask[torch.randperm(n, generator=g)[:k_ood]] = True
        before_q, before_c = _opt_state(est.opt_q), _opt_state(est.opt_critic)
        before = {k: v.clone() for k, v in est.named_parameters()}
        got = est.fit_step(e, p, e2, p2, id_mask=id_mask, ood_mask=ood_mask)
        want = _reference_step(ref, e, p, e2, p2, id_mask, ood_mask)
        assert e.grad is None  # detached pairs
        for key in ("nll", "i_id"):
            if math.isnan(want[key]):
                assert math.isnan(float(got[key])), (step, key)
            else:
                assert float(got[key]) == pytest.approx(want[key], rel=1e-10), (step, key)
        for (name, a), b in zip(est.named_parameters(), ref.parameters()):
            torch.testing.assert_close(a, b, **TOL, msg=f"step {step}: {name}")
        for skipped, net, opt, held in (
            (k_ood < 2, "q.", est.opt_q, before_q),
            (k_id < 2, "critic.", est.opt_critic, before_c),
        ):
            if not skipped:
                continue
            # a skipped network: parameters, moments and step counts untouched, bit for bit
            for name, v in est.named_parameters():
                if name.startswith(net):
                    assert torch.equal(v, before[name]), (step, name)
            now = _opt_state(opt)
            assert len(now) == len(held)
            for a, b in zip(now, held):
                assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), step
        # the optimiser states match the reference's (step counts and moments)
        for mine, theirs in ((est.opt_q, ref.opt_q), (est.opt_critic, ref.opt_critic)):
            for a, b in zip(_opt_state(mine), _opt_state(theirs)):
                assert float(a["step"]) == float(b["step"]), step
                torch.testing.assert_close(a["exp_avg"], b["exp_avg"], **TOL)
                torch.testing.assert_close(a["exp_avg_sq"], b["exp_avg_sq"], **TOL)
    assert float(est.opt_q.state[est.q.mu_net[0].weight]["step"]) == 5  # 2 of 7 skipped


def test_fit_step_without_a_set_skips_only_that_network():
    g = torch.Generator().manual_seed(4)
    est = _estimator()
    e = torch.randn(8, D, generator=g, dtype=torch.float64)
    est.fit_step(e, e.flip(0), e, e.flip(0))  # both networks have state now
    q0 = {k: v.clone() for k, v in est.q.state_dict().items()}
    c0 = {k: v.clone() for k, v in est.critic.state_dict().items()}
    out = est.fit_step(None, None, e, e.flip(0))
    assert math.isnan(float(out["i_id"])) and math.isfinite(float(out["nll"]))
    assert all(torch.equal(v, c0[k]) for k, v in est.critic.state_dict().items())
    assert any(not torch.equal(v, q0[k]) for k, v in est.q.state_dict().items())
    out = est.fit_step(e, e.flip(0), None, None)
    assert math.isnan(float(out["nll"])) and math.isfinite(float(out["i_id"]))
