import math

import pytest
import torch

from avalanche_sets.functional.distance import squared_euclidean
from avalanche_sets.models import (
    MaskedSoftKMeans,
    episode_logits,
    proto_logits,
    prototypes,
    soft_kmeans_refine,
    support_n_way,
)


def _episode(n_way=3, n_shot=2, n_query=4, n_unlabeled=5, d=4, batch=(), seed=0):
    g = torch.Generator().manual_seed(seed)
    s = torch.randn(*batch, n_way * n_shot, d, generator=g)
    y = torch.arange(n_way).repeat_interleave(n_shot).expand(*batch, n_way * n_shot).clone()
    q = torch.randn(*batch, n_way * n_query, d, generator=g)
    u = torch.randn(*batch, n_unlabeled, d, generator=g)
    return s, y, q, u


# ---------------------------------------------------------------- naive references


def close64(actual, expected):
    """float32 result vs float64 naive reference."""
    torch.testing.assert_close(actual.double(), expected, rtol=1e-5, atol=1e-5)


def naive_prototypes(s, y, n_way):
    out = torch.zeros(n_way, s.shape[1], dtype=torch.float64)
    for c in range(n_way):
        members = [s[i].double() for i in range(len(y)) if int(y[i]) == c]
        out[c] = sum(members) / len(members)
    return out


def naive_sqdist(x, p):
    out = torch.zeros(x.shape[0], p.shape[0], dtype=torch.float64)
    for m in range(x.shape[0]):
        for c in range(p.shape[0]):
            out[m, c] = sum((float(x[m, k]) - float(p[c, k])) ** 2 for k in range(x.shape[1]))
    return out


def naive_soft_kmeans(protos, s, y, u, weights=None):
    n_way, d = protos.shape
    dist = naive_sqdist(u, protos)
    out = torch.zeros(n_way, d, dtype=torch.float64)
    for c in range(n_way):
        num = torch.zeros(d, dtype=torch.float64)
        den = 0.0
        for i in range(len(y)):
            if int(y[i]) == c:
                num += s[i].double()
                den += 1.0
        for j in range(u.shape[0]):
            mu = math.exp(-dist[j, c]) / sum(math.exp(-dist[j, k]) for k in range(n_way))
            if weights is not None:
                mu *= float(weights[j])
            num += mu * u[j].double()
            den += mu
        out[c] = num / den
    return out


def naive_mskm(module, protos, s, y, u):
    n_way, d = protos.shape
    m = u.shape[0]
    dist = naive_sqdist(u, protos)
    norm = torch.zeros_like(dist)
    stats = []
    for c in range(n_way):
        mean_c = sum(float(dist[j, c]) for j in range(m)) / m
        col = [float(dist[j, c]) / mean_c for j in range(m)]
        for j in range(m):
            norm[j, c] = col[j]
        mu = sum(col) / m
        var = sum((v - mu) ** 2 for v in col) / m
        skew = sum((v - mu) ** 3 for v in col) / m / var**1.5
        kurt = sum((v - mu) ** 4 for v in col) / m / var**2 - 3.0
        stats.append([min(col), max(col), var, skew, kurt])
    with torch.no_grad():
        out = module.mlp(torch.tensor(stats, dtype=torch.float32)).double()
    beta, gamma = out[:, 0].exp(), out[:, 1].exp()
    refined = torch.zeros(n_way, d, dtype=torch.float64)
    for c in range(n_way):
        num = torch.zeros(d, dtype=torch.float64)
        den = 0.0
        for i in range(len(y)):
            if int(y[i]) == c:
                num += s[i].double()
                den += 1.0
        for j in range(m):
            z = math.exp(-dist[j, c]) / sum(math.exp(-dist[j, k]) for k in range(n_way))
            mask = 1.0 / (1.0 + math.exp(gamma[c] * (norm[j, c] - beta[c])))
            num += z * mask * u[j].double()
            den += z * mask
        refined[c] = num / den
    return refined


# ---------------------------------------------------------------- prototypes / logits


def test_prototypes_equal_naive_loop():
    s, y, _, _ = _episode(n_shot=3)
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(1))
    s, y = s[perm], y[perm]  # order of the support does not matter
    p = prototypes(s, y, 3)
    assert p.shape == (3, 4) and p.dtype == torch.float32
    close64(p, naive_prototypes(s, y, 3))


def test_prototypes_batch_dim():
    s, y, _, _ = _episode(batch=(2,))
    p = prototypes(s, y, 3)
    assert p.shape == (2, 3, 4)
    for b in range(2):
        torch.testing.assert_close(p[b], prototypes(s[b], y[b], 3))


def test_prototypes_errors():
    s, y, _, _ = _episode()
    with pytest.raises(ValueError, match="at least one"):
        prototypes(s, y, 4)  # class 3 has no support example
    with pytest.raises(ValueError):
        prototypes(s, y + 5, 3)
    with pytest.raises(ValueError):
        prototypes(s[:-1], y, 3)
    with pytest.raises(ValueError):
        prototypes(s, y.float(), 3)


@pytest.mark.parametrize("shape", [(6,), (3, 6), (2, 2, 6)])
def test_support_n_way_counts_the_classes_of_a_batch_with_one_read(shape, monkeypatch):
    y = torch.arange(3).repeat_interleave(2).expand(shape).clone()
    y = y[..., torch.randperm(6, generator=torch.Generator().manual_seed(1))]  # any order
    reads = []
    tolist = torch.Tensor.tolist
    monkeypatch.setattr(torch.Tensor, "tolist", lambda t: reads.append(t) or tolist(t))
    assert support_n_way(y) == 3
    assert len(reads) == 1


@pytest.mark.parametrize(
    "labels, message",
    [
        ([[0, 1, 2], [0, 1, 1]], "at least one support example"),  # episode 1 lacks class 2
        ([[0, 2, 2], [0, 1, 2]], "at least one support example"),  # a gap inside an episode
        ([[1, 1, 2], [0, 1, 2]], "at least one support example"),  # episode 0 lacks class 0
        ([[0, 1, -1], [0, 1, 2]], r"must lie in 0\.\.2"),
        ([[]], "no labels"),
    ],
)
def test_support_n_way_refuses_what_prototypes_refuses(labels, message):
    y = torch.tensor(labels, dtype=torch.long)
    with pytest.raises(ValueError, match=message):
        support_n_way(y)
    if y.numel():
        s = torch.zeros(*y.shape, 4)
        with pytest.raises(ValueError, match=message):
            prototypes(s, y, int(y.max()) + 1)


def test_unchecked_labels_give_the_same_numbers():
    s, y, _, u = _episode(batch=(2,))
    p = prototypes(s, y, 3)
    assert torch.equal(p, prototypes(s, y, 3, check_labels=False))
    assert torch.equal(
        soft_kmeans_refine(p, s, y, u), soft_kmeans_refine(p, s, y, u, check_labels=False)
    )
    m = MaskedSoftKMeans()
    assert torch.equal(m(p, s, y, u), m(p, s, y, u, check_labels=False))


def test_logits_equal_naive_loop():
    s, y, q, _ = _episode()
    p = prototypes(s, y, 3)
    close64(squared_euclidean(q, p), naive_sqdist(q, p))
    close64(proto_logits(q, p), -naive_sqdist(q, p))
    assert proto_logits(q, p).shape == (12, 3)


def test_heads_stay_fp32_under_autocast():
    s, y, q, u = _episode()
    ref = episode_logits(s, y, q, u, n_way=3, refine="soft_kmeans")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = episode_logits(s, y, q, u, n_way=3, refine="soft_kmeans")
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, ref)


# ---------------------------------------------------------------- soft k-means


@pytest.mark.parametrize("weighted", [False, True])
def test_soft_kmeans_equals_naive_loop(weighted):
    s, y, _, u = _episode(n_unlabeled=7)
    p = prototypes(s, y, 3)
    w = torch.tensor([1.0, 0.0, 0.5, 1.0, 0.0, 1.0, 2.0]) if weighted else None
    out = soft_kmeans_refine(p, s, y, u, weights=w)
    assert out.shape == (3, 4)
    close64(out, naive_soft_kmeans(p, s, y, u, w))


def test_soft_kmeans_batch_dim():
    s, y, _, u = _episode(batch=(2,))
    p = prototypes(s, y, 3)
    w = torch.rand(2, u.shape[1])
    out = soft_kmeans_refine(p, s, y, u, weights=w)
    assert out.shape == (2, 3, 4)
    for b in range(2):
        torch.testing.assert_close(out[b], soft_kmeans_refine(p[b], s[b], y[b], u[b], weights=w[b]))


def test_soft_kmeans_no_unlabeled_returns_support_prototypes():
    s, y, _, u = _episode()
    p = prototypes(s, y, 3)
    torch.testing.assert_close(soft_kmeans_refine(p, s, y, u[:0]), p)
    torch.testing.assert_close(soft_kmeans_refine(p, s, y, u, weights=torch.zeros(5)), p)
    with pytest.raises(ValueError):
        soft_kmeans_refine(p, s, y, u, weights=torch.zeros(4))


def test_soft_kmeans_points_at_a_prototype():
    # one-shot, well separated prototypes: the soft assignments are one-hot
    s = torch.tensor([[0.0, 0.0], [20.0, 0.0], [0.0, 20.0]])
    y = torch.arange(3)
    p = prototypes(s, y, 3)
    # two points exactly at p_0: p_0 keeps its place (with weight 1 + 2), others untouched
    at_p0 = p[0].expand(2, 2).clone()
    out = soft_kmeans_refine(p, s, y, at_p0)
    torch.testing.assert_close(out, p)
    # a point at a, near p_1: p'_1 = (p_1 + a) / 2, the others unchanged
    a = torch.tensor([[22.0, 1.0]])
    out = soft_kmeans_refine(p, s, y, a)
    torch.testing.assert_close(out[1], (p[1] + a[0]) / 2)
    torch.testing.assert_close(out[[0, 2]], p[[0, 2]])
    # two points at a and one at p_1: p'_1 = (p_1 + p_1 + 2a) / 4
    out = soft_kmeans_refine(p, s, y, torch.cat([a, a, p[1:2]]))
    torch.testing.assert_close(out[1], (2 * p[1] + 2 * a[0]) / 4)


def test_soft_kmeans_gradients():
    s, y, _, u = _episode()
    s.requires_grad_(True)
    u.requires_grad_(True)
    out = soft_kmeans_refine(prototypes(s, y, 3), s, y, u)
    out.square().sum().backward()
    assert s.grad.abs().sum() > 0 and u.grad.abs().sum() > 0


# ---------------------------------------------------------------- masked soft k-means


def test_mskm_equals_naive_loop():
    torch.manual_seed(0)
    m = MaskedSoftKMeans(init_std=0.3)  # non-trivial MLP
    s, y, _, u = _episode(n_unlabeled=9)
    p = prototypes(s, y, 3)
    out, mask = m(p, s, y, u, return_mask=True)
    assert out.shape == (3, 4) and mask.shape == (9, 3)
    torch.testing.assert_close(out.double(), naive_mskm(m, p, s, y, u), rtol=1e-4, atol=1e-5)


def test_mskm_mask_in_open_unit_interval_and_initial_threshold():
    torch.manual_seed(0)
    m = MaskedSoftKMeans(init_threshold=1.0, init_slope=1.0, init_std=0.0)
    s, y, _, u = _episode(n_unlabeled=20)
    p = prototypes(s, y, 3)
    _, mask = m(p, s, y, u, return_mask=True)
    assert torch.all(mask > 0) and torch.all(mask < 1)
    beta, gamma = m.threshold_slope(squared_euclidean(u, p))
    torch.testing.assert_close(beta, torch.ones(3))
    torch.testing.assert_close(gamma, torch.ones(3))


def test_mskm_gradients_reach_mlp_and_embeddings():
    torch.manual_seed(0)
    m = MaskedSoftKMeans()
    s, y, q, u = _episode()
    s.requires_grad_(True)
    u.requires_grad_(True)
    logits = episode_logits(s, y, q, u, n_way=3, refine="mskm", mskm=m)
    torch.nn.functional.cross_entropy(logits, torch.arange(3).repeat_interleave(4)).backward()
    for name, param in m.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, name
    assert s.grad.abs().sum() > 0 and u.grad.abs().sum() > 0


def test_mskm_suppresses_far_distractors():
    g = torch.Generator().manual_seed(0)
    d = 8
    centres = 3.0 * torch.eye(d)[:3]
    s = centres + 0.1 * torch.randn(3, d, generator=g)
    y = torch.arange(3)
    p = prototypes(s, y, 3)
    u_id = centres.repeat(4, 1) + 0.3 * torch.randn(12, d, generator=g)
    u_ood = 100.0 * torch.nn.functional.normalize(torch.randn(6, d, generator=g), dim=-1)
    u = torch.cat([u_id, u_ood])[torch.randperm(18, generator=g)]
    # by construction: constant threshold 1 (the mean distance) and slope 50
    m = MaskedSoftKMeans(init_threshold=1.0, init_slope=50.0, init_std=0.0)
    out, mask = m(p, s, y, u, return_mask=True)
    is_ood = (u.norm(dim=-1) > 50).unsqueeze(-1).expand_as(mask)
    assert mask[is_ood].max() < 1e-6
    id_only = soft_kmeans_refine(p, s, y, u_id)
    torch.testing.assert_close(out, id_only, rtol=0, atol=1e-3)
    # plain soft k-means on everything is dragged far away by the distractors
    assert (soft_kmeans_refine(p, s, y, u) - id_only).norm() > 10


def test_mskm_batch_dim_and_edge_cases():
    torch.manual_seed(0)
    m = MaskedSoftKMeans(init_std=0.3)
    s, y, _, u = _episode(batch=(2,))
    p = prototypes(s, y, 3)
    out = m(p, s, y, u)
    assert out.shape == (2, 3, 4)
    for b in range(2):
        torch.testing.assert_close(out[b], m(p[b], s[b], y[b], u[b]))
    # no unlabeled data: support prototypes
    empty, mask = m(p, s, y, u[:, :0], return_mask=True)
    torch.testing.assert_close(empty, p)
    assert mask.shape == (2, 0, 3)
    # one unlabeled example (zero variance) and points exactly at the prototypes stay finite
    assert torch.isfinite(m(p, s, y, u[:, :1])).all()
    assert torch.isfinite(m(p[0], s[0], y[0], p[0])).all()


def test_mskm_distractor_cluster_option():
    torch.manual_seed(0)
    s, y, _, u = _episode()
    p = prototypes(s, y, 3)
    m = MaskedSoftKMeans(distractor_cluster=True, init_distractor_radius=2.0)
    out = m(p, s, y, u)
    assert out.shape == (3, 4)
    out.square().sum().backward()
    assert m.log_distractor_radius.grad is not None
    # a tiny distractor radius makes the distractor cluster irrelevant to far-from-origin data
    far = MaskedSoftKMeans(distractor_cluster=True, init_distractor_radius=1e-3)
    plain = MaskedSoftKMeans(distractor_cluster=False)
    plain.load_state_dict(
        {k: v for k, v in far.state_dict().items() if k != "log_distractor_radius"}
    )
    torch.testing.assert_close(far(p, s, y, u + 5), plain(p, s, y, u + 5))


def test_mskm_bad_arguments():
    with pytest.raises(ValueError):
        MaskedSoftKMeans(init_threshold=0.0)
    with pytest.raises(ValueError):
        MaskedSoftKMeans(hidden=0)


# ---------------------------------------------------------------- episode_logits


def test_episode_logits_modes():
    torch.manual_seed(0)
    s, y, q, u = _episode()
    p = prototypes(s, y, 3)
    none = episode_logits(s, y, q, u, n_way=3)
    torch.testing.assert_close(none, proto_logits(q, p))
    skm = episode_logits(s, y, q, u, n_way=3, refine="soft_kmeans")
    torch.testing.assert_close(skm, proto_logits(q, soft_kmeans_refine(p, s, y, u)))
    m = MaskedSoftKMeans()
    mk = episode_logits(s, y, q, u, n_way=3, refine="mskm", mskm=m)
    torch.testing.assert_close(mk, proto_logits(q, m(p, s, y, u)))
    assert none.shape == skm.shape == mk.shape == (12, 3)
    # no unlabeled set: plain ProtoNet whatever the mode
    torch.testing.assert_close(episode_logits(s, y, q, None, n_way=3, refine="mskm", mskm=m), none)
    # batched
    sb, yb, qb, ub = _episode(batch=(2,))
    assert episode_logits(sb, yb, qb, ub, n_way=3, refine="mskm", mskm=m).shape == (2, 12, 3)
    with pytest.raises(ValueError):
        episode_logits(s, y, q, u, n_way=3, refine="tpn")
    with pytest.raises(ValueError):
        episode_logits(s, y, q, u, n_way=3, refine="mskm")
    with pytest.raises(ValueError):
        episode_logits(s, y, q, u, n_way=3, refine="none", weights=torch.ones(5))
