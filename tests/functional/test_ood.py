"""Tests of the OOD split (paper Algorithm 1)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from avalanche_sets.functional import id_first, split_ood, split_ood_batched
from avalanche_sets.models.heads import prototypes


def _episode(
    seed: int, n_way: int = 5, d: int = 16, n_q: int = 10, n_id: int = 10, n_ood: int = 50
):
    """Raw (un-normalised, norm ~5) embeddings: ID around class directions, OOD elsewhere."""
    g = torch.Generator().manual_seed(seed)
    centers = F.normalize(torch.randn(n_way, d, generator=g), dim=1) * 5

    def around(n_per_class: int, noise: float) -> torch.Tensor:
        c = centers.repeat_interleave(n_per_class, 0)
        return c + noise * torch.randn(c.shape, generator=g)

    support = around(1, 0.5)
    labels = torch.arange(n_way)
    query = around(n_q, 0.5)
    unl_id = around(n_id, 0.5)
    unl_ood = torch.randn(n_ood, d, generator=g) * 5
    unlabeled = torch.cat([unl_id, unl_ood])
    is_id = torch.cat(
        [torch.ones(len(unl_id), dtype=torch.bool), torch.zeros(n_ood, dtype=torch.bool)]
    )
    perm = torch.randperm(len(unlabeled), generator=g)
    protos = prototypes(F.normalize(support, dim=-1), labels, n_way)  # the recommended ones
    return query, unlabeled[perm], protos, is_id[perm]


def _precision_recall(pred: torch.Tensor, truth: torch.Tensor) -> tuple[float, float]:
    tp = (pred & truth).sum().item()
    return tp / max(pred.sum().item(), 1), tp / max(truth.sum().item(), 1)


@pytest.mark.parametrize("seed", range(5))
def test_separated_clusters_are_split_correctly(seed):
    query, unlabeled, protos, truth = _episode(seed)
    # k = 2: precision and recall of U_id both >= 0.9
    res = split_ood(query, unlabeled, protos, k=2.0)
    precision, recall = _precision_recall(res.is_id, truth)
    assert precision >= 0.9 and recall >= 0.9, (precision, recall)
    # k = 1 (Algorithm 1): still pure; a mean + 1 std rule keeps roughly 84% of ID points
    res1 = split_ood(query, unlabeled, protos, k=1.0)
    precision, recall = _precision_recall(res1.is_id, truth)
    assert precision >= 0.95 and recall >= 0.7, (precision, recall)
    assert res1.is_id.dtype == torch.bool and res1.is_id.shape == (len(unlabeled),)
    assert res1.distances.shape == (len(unlabeled),) and res1.threshold.shape == ()
    assert res1.nearest.shape == (len(unlabeled),)
    assert torch.equal(res1.is_id, res1.distances <= res1.threshold)


def test_threshold_is_mean_plus_k_population_std_of_query_distances():
    query, unlabeled, protos, _ = _episode(0)
    w = F.normalize(query, dim=1)
    p = F.normalize(protos, dim=1)
    d = torch.cdist(w, p).min(1).values
    res = split_ood(query, unlabeled, protos, k=1.5)
    torch.testing.assert_close(res.threshold, d.mean() + 1.5 * d.std(correction=0))
    res_u = split_ood(query, unlabeled, protos, k=1.5, unbiased=True)
    torch.testing.assert_close(res_u.threshold, d.mean() + 1.5 * d.std(correction=1))
    ref = torch.cdist(F.normalize(unlabeled, dim=1), p).min(1)
    torch.testing.assert_close(res.distances, ref.values, atol=1e-5, rtol=0)
    assert torch.equal(res.nearest, ref.indices)


def test_all_id_and_all_ood_episodes():
    query, _, protos, _ = _episode(1)
    all_id = _episode(1, n_ood=0)[1]
    res = split_ood(query, all_id, protos)
    assert res.is_id.float().mean() >= 0.7  # only the tail above mean + 1 std is rejected
    all_ood = torch.randn(30, 16, generator=torch.Generator().manual_seed(3)) * 5
    res = split_ood(query, all_ood, protos)
    assert not res.is_id.any()
    empty = split_ood(query, torch.zeros(0, 16), protos)
    assert empty.is_id.shape == (0,) and empty.distances.shape == (0,)
    assert torch.isfinite(empty.threshold)
    one_query = split_ood(query[:1], all_id, protos)
    assert torch.isfinite(one_query.threshold)


def test_split_is_scale_invariant_with_normalised_prototypes():
    query, unlabeled, protos, _ = _episode(2)
    a = split_ood(query, unlabeled, protos)
    b = split_ood(3 * query, 3 * unlabeled, 0.1 * protos)
    assert torch.equal(a.is_id, b.is_id)
    raw = split_ood(query, unlabeled, protos * 5, normalize_prototypes=False)
    assert raw.is_id.shape == a.is_id.shape  # the paper's literal mix still runs


def test_topk_keeps_exactly_n_id():
    query, unlabeled, protos, truth = _episode(3)
    res = split_ood(query, unlabeled, protos, rule="topk", n_id=50)
    assert res.is_id.sum().item() == 50
    kept = res.distances[res.is_id]
    assert kept.max() <= res.distances[~res.is_id].min()
    assert res.threshold == kept.max()
    assert torch.equal(res.is_id, truth)  # separated clusters: the 50 closest are the ID ones
    assert split_ood(query, unlabeled, protos, rule="topk", n_id=1000).is_id.all()
    none = split_ood(query, unlabeled, protos, rule="topk", n_id=0)
    assert not none.is_id.any() and none.threshold == float("-inf")
    # topk ignores the query (may be empty)
    assert split_ood(query[:0], unlabeled, protos, rule="topk", n_id=5).is_id.sum() == 5


def test_batched_equals_per_episode():
    episodes = [_episode(s) for s in range(4)]
    q, u, p = (torch.stack([e[i] for e in episodes]) for i in range(3))
    for kwargs in ({}, {"k": 0.5}, {"rule": "topk", "n_id": 20}):
        batched = split_ood_batched(q, u, p, **kwargs)
        assert batched.is_id.shape == (4, u.shape[1]) and batched.threshold.shape == (4,)
        for b in range(4):
            single = split_ood(q[b], u[b], p[b], **kwargs)
            assert torch.equal(batched.is_id[b], single.is_id)
            torch.testing.assert_close(batched.distances[b], single.distances)
            torch.testing.assert_close(batched.threshold[b], single.threshold)


def test_no_gradient_and_input_dtype():
    query, unlabeled, protos, _ = _episode(0)
    unlabeled = unlabeled.clone().requires_grad_(True)
    res = split_ood(query, unlabeled, protos)
    assert not res.distances.requires_grad
    half = split_ood(query.bfloat16(), unlabeled.detach().bfloat16(), protos.bfloat16())
    assert half.distances.dtype == torch.float32


def test_bad_inputs_raise():
    query, unlabeled, protos, _ = _episode(0)
    with pytest.raises(ValueError, match="threshold"):
        split_ood(query, unlabeled, protos, rule="nope")
    with pytest.raises(ValueError, match="n_id"):
        split_ood(query, unlabeled, protos, rule="topk")
    with pytest.raises(ValueError, match="query"):
        split_ood(query[:0], unlabeled, protos)
    with pytest.raises(ValueError, match="dims"):
        split_ood(query, unlabeled[None], protos)
    with pytest.raises(ValueError, match="feature size"):
        split_ood(query[None], unlabeled[None], protos[None, :, :3])
    with pytest.raises(ValueError, match="prototype"):
        split_ood(query, unlabeled, protos[:0])
    with pytest.raises(ValueError, match=r"\[B, U, d\]"):
        split_ood_batched(query, unlabeled, protos)


@pytest.mark.parametrize("u", [0, 1, 7, 30])
@pytest.mark.parametrize("share", [0.0, 0.4, 1.0])
def test_id_first_selects_what_the_boolean_mask_selects_in_its_order(u, share):
    g = torch.Generator().manual_seed(u)
    x = torch.randn(3, u, 5, generator=g)
    is_id = torch.rand(3, u, generator=g) < share
    order = id_first(is_id)
    assert order.shape == is_id.shape
    for b in range(3):
        k = int(is_id[b].sum())
        assert torch.equal(x[b].index_select(0, order[b][:k]), x[b][is_id[b]])
        assert torch.equal(x[b].index_select(0, order[b][k:]), x[b][~is_id[b]])
