"""The MI plugin's pairs and its networks' seeding: every unlabeled row paired with the nearest
prototype of its own episode, and the same numbers as ``torch.manual_seed`` without reseeding any
CUDA generator."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from avalanche_sets.functional.mi import MIEstimator, pair_with_prototypes
from avalanche_sets.order import MIRegularizationPlugin


class _State(SimpleNamespace):
    def __len__(self) -> int:
        return int(self.unlabeled_emb.shape[0])


def test_pairs_are_every_unlabeled_row_with_its_nearest_prototype_and_the_split_masks():
    g = torch.Generator().manual_seed(0)
    plugin = MIRegularizationPlugin()
    for u in (0, 1, 7, 30):
        for share in (0.0, 0.4, 1.0):
            state = _State(
                unlabeled_emb=torch.randn(4, u, 8, generator=g),
                prototypes=torch.randn(4, 5, 8, generator=g),
            )
            is_id = torch.rand(4, u, generator=g) < share
            got = plugin.pairs(state, SimpleNamespace(is_id=is_id))
            assert got.e is state.unlabeled_emb and got.is_id is is_id
            for b in range(4):
                want = pair_with_prototypes(state.unlabeled_emb[b], state.prototypes[b])
                assert torch.equal(got.p[b], want), (u, share, b)


def test_networks_are_seeded_like_manual_seed_without_touching_cuda(monkeypatch):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        expected = MIEstimator(6, q_hidden=64, critic_hidden=10, lr_q=1e-3, lr_critic=1e-3)
    calls = []
    monkeypatch.setattr(torch.cuda, "manual_seed_all", lambda seed: calls.append(seed))
    monkeypatch.setattr(torch.cuda, "manual_seed", lambda seed: calls.append(seed))
    state = torch.get_rng_state()
    built = MIRegularizationPlugin(seed=3)._build(6, "cpu")
    assert calls == [], "building the MI networks reseeded a CUDA generator"
    assert torch.equal(torch.get_rng_state(), state), "the CPU generator was not restored"
    pairs = list(zip(built.named_parameters(), expected.named_parameters(), strict=True))
    for (name, a), (_, b) in pairs:
        assert torch.equal(a, b), name
