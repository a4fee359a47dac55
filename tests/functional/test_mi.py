"""Tests of the MI bounds (paper Theorems 1 and 3)."""

from __future__ import annotations

import math

import pytest
import torch

from avalanche_sets.functional import (
    Critic,
    GaussianConditional,
    MIEstimator,
    club_upper_bound,
    nearest_prototype,
    pair_with_prototypes,
    tuba_lower_bound,
)


@pytest.fixture(autouse=True, scope="module")
def _single_thread():
    # The networks are tiny: on a loaded 2-core machine intra-op threads spin and make
    # each step ~40x slower, so run this module single-threaded.
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _gaussian_pairs(n: int, d: int, rho: float, g: torch.Generator):
    e = torch.randn(n, d, generator=g)
    p = rho * e + math.sqrt(1 - rho**2) * torch.randn(n, d, generator=g)
    return e, p


def _true_mi(d: int, rho: float) -> float:
    return -0.5 * d * math.log(1 - rho**2)


def _reg(est, e_id, p_id, e_ood, p_ood, **kwargs):
    """``I_ood − I_id`` from the estimator's bounds, as ORDER's MI plugin forms it."""
    i_ood, i_id = est.bounds(e_id, p_id, e_ood, p_ood, **kwargs)
    return i_ood - i_id


def test_log_prob_matrix_matches_pairwise_log_prob():
    torch.manual_seed(0)
    q = GaussianConditional(3, 2, hidden=8).double()
    e, p = torch.randn(5, 3, dtype=torch.float64), torch.randn(4, 2, dtype=torch.float64)
    m = q.log_prob_matrix(p, e)
    assert m.shape == (4, 5)
    ref = torch.stack([q.log_prob(p[i].expand(5, 2), e) for i in range(4)])
    torch.testing.assert_close(m, ref)
    normal = torch.distributions.Normal(*[t for t in (q(e)[0], (0.5 * q(e)[1]).exp())])
    torch.testing.assert_close(q.log_prob(p[:1].expand(5, 2), e), normal.log_prob(p[:1]).sum(-1))
    assert q.nll(p[:4], e[:4]).shape == ()


def test_score_matrix_matches_pairwise_forward():
    torch.manual_seed(0)
    f = Critic(3, 2).double()
    assert f.hidden.out_features == 10
    e, p = torch.randn(6, 3, dtype=torch.float64), torch.randn(4, 2, dtype=torch.float64)
    s = f.score_matrix(e, p)
    assert s.shape == (6, 4)
    ref = torch.stack([f(e, p[j].expand(6, 2)) for j in range(4)], dim=1)
    torch.testing.assert_close(s, ref)


def test_bounds_by_hand():
    torch.manual_seed(0)
    q, f = GaussianConditional(2), Critic(2)
    e, p = torch.randn(7, 2), torch.randn(7, 2)
    lp = torch.stack([q.log_prob(p[i].expand(7, 2), e) for i in range(7)])  # (i, j)
    club = torch.diagonal(lp).mean() - lp.mean()
    torch.testing.assert_close(club_upper_bound(q, e, p), club)
    s = torch.stack([f(e, p[j].expand(7, 2)) for j in range(7)], dim=1)
    tuba = torch.diagonal(s).mean() - s.exp().mean() + 1
    torch.testing.assert_close(tuba_lower_bound(f, e, p, clamp=None), tuba)


def test_clamp_keeps_the_bound_finite():
    f = Critic(2)
    with torch.no_grad():
        f.out.bias.fill_(500.0)
    e, p = torch.randn(4, 2), torch.randn(4, 2)
    assert torch.isinf(tuba_lower_bound(f, e, p, clamp=None))
    value = tuba_lower_bound(f, e, p, clamp=10.0)
    assert torch.isfinite(value)
    assert value.item() == pytest.approx(10.0 - math.exp(10.0) + 1.0)


@pytest.fixture(scope="module")
def fitted_bounds():
    d, n_steps = 2, 200
    results = {}
    for rho in (0.3, 0.8):
        torch.manual_seed(0)
        g = torch.Generator().manual_seed(1)
        est = MIEstimator(d, q_hidden=32, lr_q=1e-2, lr_critic=1e-2)
        for _ in range(n_steps):
            e_id, p_id = _gaussian_pairs(128, d, rho, g)
            e_ood, p_ood = _gaussian_pairs(128, d, rho, g)
            est.fit_step(e_id, p_id, e_ood, p_ood)
        e, p = _gaussian_pairs(1000, d, rho, g)  # fresh samples
        with torch.no_grad():
            i_ood, i_id = est.bounds(e, p, e, p)
        results[rho] = (i_ood.item(), i_id.item(), _true_mi(d, rho))
    return results


def test_tuba_is_below_true_mi_and_club_above(fitted_bounds):
    for _rho, (club, tuba, true) in fitted_bounds.items():
        assert tuba <= true + 0.05, (tuba, true)
        assert club >= true - 0.05, (club, true)
    # the fit is meaningful: the lower bound recovers most of the MI at rho = 0.8 (1.02 nats)
    club, tuba, true = fitted_bounds[0.8]
    assert tuba > 0.6 * true


def test_bounds_increase_with_correlation(fitted_bounds):
    club_lo, tuba_lo, _ = fitted_bounds[0.3]
    club_hi, tuba_hi, _ = fitted_bounds[0.8]
    assert tuba_hi > tuba_lo + 0.3
    assert club_hi > club_lo + 0.3


def test_empty_and_singleton_sets_give_finite_zeros():
    est = MIEstimator(3)
    empty = torch.zeros(0, 3, requires_grad=True)
    one = torch.randn(1, 3, requires_grad=True)
    for e in (empty, one):  # grad-requiring inputs
        assert club_upper_bound(est.q, e, e).item() == 0.0
        assert tuba_lower_bound(est.critic, e, e).item() == 0.0
        reg = _reg(est, e, e, e, e)
        assert torch.isfinite(reg) and reg.item() == 0.0
        reg.backward()  # connected or constant, never an error
        out = est.fit_step(e, e, e, e)
        assert math.isnan(out["nll"]) and math.isnan(out["i_id"])
    assert _reg(est, None, None, None, None).item() == 0.0
    e = torch.randn(5, 3)
    torch.testing.assert_close(_reg(est, e, e, empty, empty), -tuba_lower_bound(est.critic, e, e))
    torch.testing.assert_close(_reg(est, empty, empty, e, e), club_upper_bound(est.q, e, e))
    assert _reg(est, e, e, e, e, use_id=False, use_ood=False).item() == 0.0


def test_fit_step_only_changes_the_estimators():
    torch.manual_seed(0)
    est = MIEstimator(3)
    e_id, p_id = torch.randn(6, 3, requires_grad=True), torch.randn(6, 3, requires_grad=True)
    e_ood, p_ood = torch.randn(5, 3, requires_grad=True), torch.randn(5, 3, requires_grad=True)
    before = {k: v.clone() for k, v in est.state_dict().items() if isinstance(v, torch.Tensor)}
    out = est.fit_step(e_id, p_id, e_ood, p_ood)
    assert math.isfinite(out["nll"]) and math.isfinite(out["i_id"])
    after = est.state_dict()
    for name in ("q.mu_net.0.weight", "critic.hidden.weight"):
        assert not torch.equal(before[name], after[name])
    for t in (e_id, p_id, e_ood, p_ood):
        assert t.grad is None


def test_regularizer_sends_gradient_to_embeddings_only():
    torch.manual_seed(0)
    est = MIEstimator(3)
    e_id, p_id = torch.randn(6, 3, requires_grad=True), torch.randn(6, 3, requires_grad=True)
    e_ood, p_ood = torch.randn(5, 3, requires_grad=True), torch.randn(5, 3, requires_grad=True)
    reg = _reg(est, e_id, p_id, e_ood, p_ood)
    reg.backward()
    for t in (e_id, p_id, e_ood, p_ood):
        assert t.grad is not None and torch.isfinite(t.grad).all()
    assert all(prm.grad is None for prm in est.parameters())
    assert all(prm.requires_grad for prm in est.parameters())  # restored


def test_state_dict_round_trip_includes_optimisers():
    g = torch.Generator().manual_seed(0)
    data = [_gaussian_pairs(16, 2, 0.5, g) for _ in range(4)]
    torch.manual_seed(0)
    a = MIEstimator(2)
    for e, p in data[:2]:
        a.fit_step(e, p, e, p)
    b = MIEstimator(2)
    b.load_state_dict(a.state_dict())
    for e, p in data[2:]:
        fit_a, fit_b = a.fit_step(e, p, e, p), b.fit_step(e, p, e, p)
        assert {k: float(v) for k, v in fit_a.items()} == {k: float(v) for k, v in fit_b.items()}


def test_pair_with_prototypes():
    torch.manual_seed(0)
    protos = torch.randn(4, 3, requires_grad=True)
    emb = torch.randn(10, 3)
    paired = pair_with_prototypes(emb, protos)
    brute = torch.stack([protos[((x - protos) ** 2).sum(-1).argmin()] for x in emb])
    torch.testing.assert_close(paired, brute)
    paired.sum().backward()
    assert protos.grad is not None
    batched = pair_with_prototypes(emb.expand(2, 10, 3), protos.detach().expand(2, 4, 3))
    torch.testing.assert_close(batched[1], brute.detach())
    assert nearest_prototype(emb, protos).shape == (10,)
