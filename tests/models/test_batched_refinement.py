"""The meta-batch refined at once (soft k-means, masked soft k-means) against one episode at a
time, values and gradients; the support labels checked on the device against a known ``N``.

Tolerance: the heads compute in float32, and a batched matrix product sums in another order
than one episode's, a few float32 ulps: ``rtol=1e-5, atol=1e-6`` (a mixed-up episode or weight
moves a prototype by O(1)).
"""

from __future__ import annotations

import pytest
import torch

from avalanche_sets.data.episodes import EpisodeBatch
from avalanche_sets.models import MaskedSoftKMeans, prototypes, soft_kmeans_refine
from avalanche_sets.models.backbone import ConvBackbone
from avalanche_sets.models.episodic import EpisodeState, PrototypicalModel
from avalanche_sets.models.heads import label_errors

torch.set_num_threads(1)

TOL = {"rtol": 1e-5, "atol": 1e-6}
B, N, K, U, D = 5, 3, 2, 7, 4


def _meta_batch(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    s = torch.randn(B, N * K, D, generator=g).requires_grad_(True)
    # each episode its own label order
    y = torch.stack(
        [torch.arange(N).repeat(K)[torch.randperm(N * K, generator=g)] for _ in range(B)]
    )
    u = (2.0 * torch.randn(B, U, D, generator=g)).requires_grad_(True)
    w = (torch.rand(B, U, generator=g) < 0.6).float()
    w[0] = 0.0  # an episode whose unlabeled images are all ignored
    w[1] = 1.0
    return s, y, u, w


def _grads(out, inputs, g_out):
    return torch.autograd.grad((out * g_out).sum(), inputs, allow_unused=True, retain_graph=True)


def _compare(batched, per_episode, inputs):
    assert batched.shape == per_episode.shape
    torch.testing.assert_close(batched, per_episode, **TOL)
    g_out = torch.randn(batched.shape, generator=torch.Generator().manual_seed(9))
    got = _grads(batched, inputs, g_out)
    want = _grads(per_episode, inputs, g_out)
    for i, (a, b) in enumerate(zip(got, want)):
        if b is None:
            assert a is None or not a.any(), i
            continue
        assert b.abs().sum() > 0, i
        torch.testing.assert_close(a, b, **TOL, msg=f"gradient of input {i}")


@pytest.mark.parametrize("weighted", [False, True])
def test_soft_kmeans_batched_equals_per_episode(weighted):
    s, y, u, w = _meta_batch()
    p = prototypes(s, y, N)
    weights = w if weighted else None
    out = soft_kmeans_refine(p, s, y, u, weights=weights)
    loop = torch.stack(
        [
            soft_kmeans_refine(p[b], s[b], y[b], u[b], weights=None if not weighted else w[b])
            for b in range(B)
        ]
    )
    _compare(out, loop, (s, u))
    if weighted:  # episode 0 ignores its unlabeled images: the support means
        torch.testing.assert_close(out[0], p[0], **TOL)


@pytest.mark.parametrize("distractor", [False, True])
def test_mskm_batched_equals_per_episode(distractor):
    torch.manual_seed(0)
    m = MaskedSoftKMeans(init_std=0.3, distractor_cluster=distractor)
    s, y, u, _ = _meta_batch(1)
    p = prototypes(s, y, N)
    out, mask = m(p, s, y, u, return_mask=True)
    per = [m(p[b], s[b], y[b], u[b], return_mask=True) for b in range(B)]
    torch.testing.assert_close(mask, torch.stack([x[1] for x in per]), **TOL)
    params = tuple(m.parameters())
    _compare(out, torch.stack([x[0] for x in per]), (s, u, *params))


def _state(s, y, u, w) -> EpisodeState:
    return EpisodeState(
        support_emb=s,
        query_emb=torch.zeros(B, N, D),
        unlabeled_emb=u,
        support_y=y,
        n_way=N,
        prototypes=prototypes(s, y, N),
        unlabeled_weight=w,
    )


@pytest.mark.parametrize("refine", ["soft_kmeans", "mskm"])
def test_model_refines_the_meta_batch_as_one_episode_at_a_time(refine):
    torch.manual_seed(0)
    model = PrototypicalModel(torch.nn.Identity(), refine=refine)
    if model.mskm is not None:
        with torch.no_grad():
            for prm in model.mskm.parameters():
                prm.normal_(0.0, 0.3)
    s, y, u, w = _meta_batch(2)
    state = _state(s, y, u, w)
    out = model.refine_prototypes(state)
    loop = []
    for b in range(B):
        p = state.prototypes[b]
        if refine == "soft_kmeans":
            loop.append(soft_kmeans_refine(p, s[b], y[b], u[b], weights=w[b]))
        else:
            loop.append(model.mskm(p, s[b], y[b], u[b]))
    extra = () if model.mskm is None else tuple(model.mskm.parameters())
    _compare(out, torch.stack(loop), (s, u, *extra))


# ------------------------------------------------------------------ labels against a known N


@pytest.mark.parametrize(
    "labels, bad",
    [
        ([[0, 1, 2, 0], [2, 1, 0, 1]], False),
        ([[0, 1, 2, 0], [2, 1, 1, 1]], True),  # class 0 missing in episode 1
        ([[0, 1, 3, 0], [2, 1, 0, 1]], True),  # a label >= N
        ([[0, 1, 2, -1], [2, 1, 0, 1]], True),  # a negative label
        ([[0, 1, 1, 0], [1, 1, 0, 0]], True),  # a 2-way batch for a 3-way model
    ],
)
def test_label_errors_flags_the_n_way_contract_on_the_device(labels, bad):
    y = torch.tensor(labels)
    flag = label_errors(y, 3)
    assert flag.dtype == torch.bool and flag.shape == ()
    assert bool(flag) is bad
    assert bool(label_errors(y.reshape(1, 2, 4), 3)) is bad  # any leading dimensions


def _batch(support_y: torch.Tensor) -> EpisodeBatch:
    g = torch.Generator().manual_seed(0)
    b, s = support_y.shape
    img = lambda n: torch.randint(0, 256, (b, n, 8, 8, 3), generator=g, dtype=torch.uint8)  # noqa: E731
    return EpisodeBatch(
        support_x=img(s),
        support_y=support_y,
        query_x=img(4),
        query_y=torch.zeros(b, 4, dtype=torch.long),
        unlabeled_x=img(3),
    )


def test_forward_outside_the_template_raises_for_labels_that_break_the_contract():
    torch.manual_seed(0)
    model = PrototypicalModel(ConvBackbone(n_blocks=1, width=4, image_size=8), refine="soft_kmeans")
    model.n_way = 2
    good = _batch(torch.tensor([[0, 1, 1], [1, 0, 0]]))
    assert model(good).shape == (2 * 4, 2)
    state = model.encode(good)
    assert state.label_error is not None and not bool(state.label_error)
    for labels in ([[0, 1, 2], [1, 0, 0]], [[0, 0, 0], [1, 0, 0]], [[0, 1, -1], [1, 0, 0]]):
        batch = _batch(torch.tensor(labels))
        assert bool(model.encode(batch).label_error), labels
        with pytest.raises(ValueError):
            model(batch)
    # a 3-way batch whose every episode has every class: support_n_way itself has nothing to
    # say, the model refuses it for its N
    three = _batch(torch.tensor([[0, 1, 2], [2, 1, 0]]))
    with pytest.raises(ValueError, match="built for 2-way episodes.*span 3 classes"):
        model(three)
    # without n_way the model reads N from the labels (and gives no device flag)
    model.n_way = None
    assert model.encode(three).label_error is None
    assert model(three).shape == (2 * 4, 3)
