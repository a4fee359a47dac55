"""The MI plugin's batched step against a per-episode loop with boolean masks.

``after_forward`` fits the networks once on every episode's pairs (flattened, masked) and
``loss_term`` gives ``λ Σ_b (I_ood,b − I_id,b)`` (or the mean) for all episodes at once. The
reference cuts each episode's pairs with ``is_id`` / ``~is_id`` and calls the unmasked bounds
(0 for a set of fewer than 2 pairs), the fit on the concatenated cut sets.

Tolerance: float32 (the training dtype); the batched form sums in another order than the
per-episode means, a few float32 ulps of the terms, so ``rtol=1e-5, atol=1e-6`` (any mask or
sign error changes the terms in their first digits: every episode's term here is > 1e-3).
"""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch

from avalanche_sets.functional.mi import club_upper_bound, pair_with_prototypes, tuba_lower_bound
from avalanche_sets.order.mi_regularization import MIRegularizationPlugin

torch.set_num_threads(1)

B, U, N, D = 6, 6, 3, 4
LAM = 0.7


def _meta_batch(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    protos = (2.0 * torch.randn(B, N, D, generator=g)).requires_grad_(True)
    # row i near prototype i mod N: every set of >= 2 rows pairs with >= 2 prototypes (a set
    # paired with one prototype has I_ood = 0 exactly, whatever q)
    near = protos.detach()[:, torch.arange(U) % N]
    emb = (near + 0.8 * torch.randn(B, U, D, generator=g)).requires_grad_(True)
    is_id = torch.zeros(B, U, dtype=torch.bool)
    # all OOD, all ID, one ID pair, one OOD pair, half and half, scattered
    is_id[1] = True
    is_id[2, 3] = True
    is_id[3] = True
    is_id[3, 0] = False
    is_id[4, :3] = True
    is_id[5, [0, 2, 5]] = True
    return protos, emb, is_id


def _strategy(protos, emb, is_id):
    state = SimpleNamespace(unlabeled_emb=emb, prototypes=protos)
    it = SimpleNamespace(state=state, training=True, ood_split=SimpleNamespace(is_id=is_id))
    return SimpleNamespace(iteration=it)


def _per_episode(est, protos, emb, is_id, *, use_id=True, use_ood=True):
    """``[(I_ood,b, I_id,b)]`` by hand: the boolean-mask cut of each episode."""
    out = []
    for b in range(B):
        e = emb[b]
        p = pair_with_prototypes(e, protos[b])
        zero = (e.sum() + p.sum()) * 0.0
        m = is_id[b]
        i_ood = i_id = zero
        if use_ood and int((~m).sum()) >= 2:
            i_ood = club_upper_bound(est.q, e[~m], p[~m])
        if use_id and int(m.sum()) >= 2:
            i_id = tuba_lower_bound(est.critic, e[m], p[m], clamp=est.clamp)
        out.append((i_ood, i_id))
    return out


@pytest.mark.parametrize(
    "options",
    [
        {"reduction": "sum"},
        {"reduction": "mean"},
        {"reduction": "sum", "use_id": False},
        {"reduction": "mean", "use_ood": False},
    ],
)
def test_loss_term_equals_the_per_episode_loop(options):
    protos, emb, is_id = _meta_batch()
    plugin = MIRegularizationPlugin(lam=LAM, lr=1e-2, **options)
    strategy = _strategy(protos, emb, is_id)
    plugin.after_forward(strategy)
    est = plugin.estimator
    with torch.no_grad():  # a critic whose scores spread (its initial ones are nearly flat)
        est.critic.hidden.weight.mul_(4.0)
        est.critic.out.weight.mul_(4.0)
    fitted = copy.deepcopy(est.state_dict())
    term = plugin.loss_term(strategy)
    assert all(torch.equal(v, fitted[k]) for k, v in est.state_dict().items() if torch.is_tensor(v))
    use_id, use_ood = options.get("use_id", True), options.get("use_ood", True)
    hand = _per_episode(est, protos, emb, is_id, use_id=use_id, use_ood=use_ood)
    regs = torch.stack([i_ood - i_id for i_ood, i_id in hand])
    want = LAM * (regs.sum() if options["reduction"] == "sum" else regs.mean())
    # each episode's term is clearly non-zero where it has a set of >= 2 pairs
    for b, (i_ood, i_id) in enumerate(hand):
        if use_ood and int((~is_id[b]).sum()) >= 2:
            assert abs(float(i_ood.detach())) > 1e-3, b
        if use_id and int(is_id[b].sum()) >= 2:
            assert abs(float(i_id.detach())) > 1e-3, b
    torch.testing.assert_close(term.detach(), want.detach(), rtol=1e-5, atol=1e-6)
    got_g = torch.autograd.grad(term, (emb, protos))
    want_g = torch.autograd.grad(want, (emb, protos))
    for name, a, b in zip(("embeddings", "prototypes"), got_g, want_g):
        assert b.abs().sum() > 0
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=name)
    # the networks' parameters are constants in the encoder's term
    assert all(prm.grad is None for prm in est.parameters())
    # the logged values: the episodes' mean I_ood and I_id
    i_ood = torch.stack([h[0] for h in hand]).detach().mean()
    i_id = torch.stack([h[1] for h in hand]).detach().mean()
    torch.testing.assert_close(plugin.last_values["I_ood"], i_ood, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(plugin.last_values["I_id"], i_id, rtol=1e-5, atol=1e-6)
    assert torch.isfinite(plugin.last_values["q_nll"])


def test_the_fit_is_one_step_on_the_concatenated_cut_sets():
    """``after_forward`` steps the networks as ``fit_step`` on every episode's ID pairs and OOD
    pairs cut and concatenated (the old per-episode path): the same parameters afterwards."""
    protos, emb, is_id = _meta_batch(1)
    plugin = MIRegularizationPlugin(lam=LAM, lr=1e-2)
    strategy = _strategy(protos, emb, is_id)
    est = plugin.estimator_on(D, "cpu")
    ref = copy.deepcopy(est)
    plugin.after_forward(strategy)
    e = emb.detach()
    p = torch.stack([pair_with_prototypes(e[b], protos[b].detach()) for b in range(B)])
    out = ref.fit_step(e[is_id], p[is_id], e[~is_id], p[~is_id])
    torch.testing.assert_close(plugin.last_values["q_nll"], out["nll"], rtol=1e-5, atol=1e-6)
    for (name, a), b in zip(est.named_parameters(), ref.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=name)
    # and both networks took their step (against freshly built ones, the state before it)
    before = plugin._build(D, "cpu")
    for name, a in est.named_parameters():
        assert not torch.equal(a, dict(before.named_parameters())[name]), name
