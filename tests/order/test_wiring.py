"""ORDER's wiring: how the four plugins feed the objective, tested through ``OrderStrategy``.

Each test drives the public :class:`~avalanche_sets.order.OrderStrategy` through Avalanche's
real training loop on small deterministic meta-batches built here (3-way 2-shot episodes of
16 px images, a 2-block backbone, fixed seeds) and reads what happened with :class:`Probe`, an
ordinary plugin placed after ORDER's four. The reference values are computed here from first
principles — the threshold of Algorithm 1, soft k-means, CLUB / TUBA with the plugin's own
variational networks, an OT assignment on a cost matrix built here — never by calling the
plugin code under test. Numbers refer to issue 11 §1 (docs/verification/index.md lists them with the
faults each test was shown to catch):

1. the MI term enters the objective as ``+λ(I_ood − I_id)``;
2. the variational networks are trained every iteration by their own optimisers, and the
   encoder receives the MI term's gradient;
3. ``U_ood`` has zero weight in the refined prototypes (the split reaches the head);
4. every episode of the meta-batch, current and replayed, contributes to the MI term;
5. OT pairs the current and stored features of the same images of the replayed tasks;
6. the stored features are those of ``S ∪ U_id`` of the stored task;
7. λ and β scale their terms linearly, and OT's gradient reaches the encoder;

and the objective is paper Eq. 10 term by term (each task's ``L_total`` once, ``β L_OT``
once).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from avalanche.training.plugins import EvaluationPlugin
from scipy.optimize import linear_sum_assignment

from avalanche_sets import OrderStrategy, sets_benchmark
from avalanche_sets.data.episodes import Episode, collate_episodes
from avalanche_sets.functional.mi import club_upper_bound, tuba_lower_bound
from avalanche_sets.models.backbone import ConvBackbone
from avalanche_sets.models.episodic import PrototypicalModel
from avalanche_sets.order import (
    FeatureReservoirReplayPlugin,
    MIRegularizationPlugin,
    OTFeatureLossPlugin,
)
from avalanche_sets.training.template import EpisodicPlugin

torch.set_num_threads(1)

N_WAY, N_SHOT, N_QUERY, N_ID, N_OOD, SIZE = 3, 2, 3, 2, 4, 16
LAM, BETA = 0.5, 0.7


# ============================================================================ inputs
@pytest.fixture(scope="module")
def carrier():
    """Any training experience: Avalanche's ``train`` needs one; :func:`run_steps` feeds the
    meta-batches built here instead of its episodes."""
    return sets_benchmark(
        "synthetic", domains=["shapes"], n_way=N_WAY, n_shot=1, n_query=1, n_unlabeled=1,
        n_ood=1, tasks_per_domain=4, n_test_episodes=1, n_val_episodes=1, seed=0,
    ).train_stream[0]  # fmt: skip


def _pattern(key: int) -> np.ndarray:
    """A fixed smooth colour pattern ``[SIZE, SIZE, 3]`` (0..255) for class ``key``."""
    rng = np.random.default_rng(1000 + key)
    return np.kron(rng.uniform(0, 255, (4, 4, 3)), np.ones((SIZE // 4, SIZE // 4, 1)))


def make_episode(seed: int) -> Episode:
    """3-way 2-shot, 3 queries and 2 unlabeled ID images per class, 4 OOD images.

    Class images are noisy copies of one smooth pattern per class; OOD images are
    checkerboards of random colours, far from every class.
    """
    rng = np.random.default_rng(seed)
    classes = rng.choice(50, N_WAY, replace=False)

    def block(n: int) -> np.ndarray:
        return np.concatenate(
            [_pattern(int(c)) + rng.normal(0, 25, (n, SIZE, SIZE, 3)) for c in classes]
        )

    board = (np.indices((SIZE, SIZE)).sum(0) % 2)[..., None]
    ood = np.stack(
        [
            board * rng.uniform(0, 255, 3) + (1 - board) * rng.uniform(0, 255, 3)
            for _ in range(N_OOD)
        ]
    )
    u8 = lambda a: torch.from_numpy(np.clip(a, 0, 255).astype(np.uint8))  # noqa: E731
    labels = lambda n: torch.arange(N_WAY).repeat_interleave(n)  # noqa: E731
    return Episode(
        support_x=u8(block(N_SHOT)),
        support_y=labels(N_SHOT),
        query_x=u8(block(N_QUERY)),
        query_y=labels(N_QUERY),
        unlabeled_x=u8(np.concatenate([block(N_ID), ood])),
    )


def make_batch(*seeds: int):
    """The Avalanche mini-batch ``(EpisodeBatch, y, t)`` of the episodes of ``seeds``."""
    return collate_episodes([make_episode(s) for s in seeds])


def tiny_model(seed: int = 0, refine: str = "soft_kmeans") -> PrototypicalModel:
    torch.manual_seed(seed)
    backbone = ConvBackbone(n_blocks=2, width=4, image_size=SIZE, channels_last=False)
    return PrototypicalModel(backbone, refine=refine)


def order(probe=None, *, lr: float = 0.0, model=None, **kw) -> OrderStrategy:
    """ORDER on the tiny model; ``lr=0`` freezes the weights (Adam takes zero steps)."""
    model = model or tiny_model()
    kw = {"mem_size": 4, "replay_batch": 2, "lam": LAM, "beta": BETA, "ot_max_points": None, **kw}
    return OrderStrategy(
        model=model,
        optimizer=torch.optim.Adam(model.parameters(), lr=lr),
        evaluator=EvaluationPlugin(),
        plugins=[probe] if probe is not None else None,
        **kw,
    )


def plugin(strategy, kind):
    found = [p for p in strategy.plugins if isinstance(p, kind)]
    assert len(found) == 1, f"expected one {kind.__name__}, found {len(found)}"
    return found[0]


def perturb(model, seed: int, scale: float = 0.1) -> None:
    """Move the backbone's weights (so that stored and current features differ)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for prm in model.backbone.parameters():
            prm.add_(scale * torch.randn(prm.shape, generator=gen))


class Probe(EpisodicPlugin):
    """Records one dict per training iteration: the meta-batch, the forward's state and logits,
    every plugin's loss term *with its graph* (as the template records it), the total
    loss, and copies of the MI networks before the iteration and when the loss is complete.
    ``hook(rec, strategy)`` runs when the loss is complete, while its graph is alive (for
    gradients). ``eval_bn`` puts the model in eval mode before each forward: BatchNorm then
    uses its running statistics, so an image's embedding does not depend on the rest of the
    meta-batch."""

    def __init__(self, *, eval_bn: bool = True, hook=None) -> None:
        super().__init__()
        self.eval_bn, self.hook = eval_bn, hook
        self.records: list[dict] = []
        self._wrapped = None

    def before_training_iteration(self, strategy, **kwargs):
        if self.eval_bn:
            strategy.model.eval()
        self.records.append({"terms": {}})
        mi = [p for p in strategy.plugins if isinstance(p, MIRegularizationPlugin)]
        if mi and mi[0].estimator is not None:
            self.records[-1]["estimator_before"] = copy.deepcopy(mi[0].estimator)
        if self._wrapped is not strategy:
            original = strategy._record_term

            def record_term(name, value):
                self.records[-1]["terms"][name] = value
                original(name, value)

            strategy._record_term = record_term
            self._wrapped = strategy

    def after_forward(self, strategy, **kwargs):
        rec = self.records[-1]
        rec.update(batch=strategy.mb_x, state=strategy.iteration.state, logits=strategy.mb_output)
        rec["rows"] = strategy.iteration.replayed

    def before_backward(self, strategy, **kwargs):
        rec = self.records[-1]
        rec["loss"] = strategy.loss
        rec["loss_terms"] = dict(strategy.loss_terms)
        mi = [p for p in strategy.plugins if isinstance(p, MIRegularizationPlugin)]
        if mi:
            rec["estimator"] = copy.deepcopy(mi[0].estimator)
        if self.hook is not None:
            self.hook(rec, strategy)


class _Batches(torch.utils.data.Dataset):
    def __init__(self, batches):
        self.batches = list(batches)

    def __len__(self):
        return len(self.batches)

    def __getitem__(self, i):
        return self.batches[i]


def run_steps(strategy, carrier, *batches) -> None:
    """Train ``strategy`` on exactly these meta-batches, one iteration each (the real loop)."""
    strategy.make_train_dataloader = lambda **kw: setattr(
        strategy, "dataloader", torch.utils.data.DataLoader(_Batches(batches), batch_size=None)
    )
    strategy.train(carrier)


# ============================================================================ references
def threshold_split(state, k: float = 1.0) -> torch.Tensor:
    """Algorithm 1 by hand, bool ``[B, U]``, True = ``U_id``: L2-normalised embeddings and
    prototypes; an image is ID when its distance to the nearest prototype is at most the mean +
    k·(population) std of the query's distances."""
    unit = lambda t: F.normalize(t.detach().double(), dim=-1)  # noqa: E731
    out = []
    for b in range(len(state)):
        protos = unit(state.prototypes[b])
        dq = torch.cdist(unit(state.query_emb[b]), protos).min(-1).values
        du = torch.cdist(unit(state.unlabeled_emb[b]), protos).min(-1).values
        out.append(du <= dq.mean() + k * dq.std(unbiased=False))
    return torch.stack(out)


def soft_kmeans_by_hand(support, support_y, unlabeled, weights) -> torch.Tensor:
    """``p'_c = (Σ_S h + Σ_U w μ_c h) / (|S_c| + Σ_U w μ_c)``, ``μ = softmax_c(−‖h − p_c‖²)``."""
    support, unlabeled = support.detach().double(), unlabeled.detach().double()
    members = [support_y == c for c in range(N_WAY)]
    protos = torch.stack([support[m].mean(0) for m in members])
    mu = torch.softmax(-(torch.cdist(unlabeled, protos) ** 2), -1) * weights.double()[:, None]
    num = torch.stack([support[m].sum(0) for m in members]) + mu.T @ unlabeled
    den = torch.stack([m.sum() for m in members]).double() + mu.sum(0)
    return num / den[:, None]


def mi_by_hand(estimator, state, is_id) -> list[torch.Tensor]:
    """``I_ood − I_id`` of every episode with the given networks (encoder graph kept); every
    unlabeled embedding paired with its nearest support prototype."""
    out = []
    for b in range(len(state)):
        e, protos, m = state.unlabeled_emb[b], state.prototypes[b], is_id[b]
        p = protos[torch.cdist(e.detach(), protos.detach()).argmin(-1)]
        i_ood = club_upper_bound(estimator.q, e[~m], p[~m])
        i_id = tuba_lower_bound(estimator.critic, e[m], p[m], clamp=estimator.clamp)
        out.append(i_ood - i_id)
    return out


def ot_by_hand(current, stored) -> torch.Tensor:
    """Exact OT between equal-size point sets with uniform weights and squared-Euclidean cost:
    an optimal plan is a permutation (Birkhoff), found by the Hungarian method; the value keeps
    the graph of ``current``."""
    assert current.shape == stored.shape
    cost = ((current[:, None, :] - stored[None, :, :]) ** 2).sum(-1)
    rows, cols = linear_sum_assignment(cost.detach().double().numpy())
    return cost[rows, cols].sum() / len(rows)


def encoder_grad(value, strategy) -> torch.Tensor:
    """Gradient of ``value`` with respect to the backbone, flattened (zeros where unused)."""
    params = list(strategy.model.backbone.parameters())
    grads = torch.autograd.grad(value, params, retain_graph=True, allow_unused=True)
    return torch.cat(
        [(torch.zeros_like(p) if g is None else g).flatten() for p, g in zip(params, grads)]
    )


def embed(model, images) -> torch.Tensor:
    """Embeddings computed independently of the strategy (eval mode: running BN statistics)."""
    model.eval()
    with torch.no_grad():
        return model.backbone(images)


def replayed_pairs(rec) -> tuple[torch.Tensor, torch.Tensor]:
    """Current (from this forward, with graph) and stored features of the replayed tasks, row
    by row: support then the ``U_id`` chosen at storage time."""
    state, info = rec["state"], rec["rows"]
    current = [
        torch.cat([state.support_emb[r], state.unlabeled_emb[r][t.unlabeled_id]])
        for r, t in zip(info.rows, info.tasks)
    ]
    return torch.cat(current), torch.cat([valid_features(t) for t in info.tasks])


def valid_features(task) -> torch.Tensor:
    """A stored task's features of ``S ∪ U_id`` (the rows its mask marks), in order."""
    return task.features[task.feature_mask()]


# ============================================================================ 3. split → head
def test_3_split_reaches_the_head_and_u_ood_has_zero_weight(carrier):
    """The prototypes are refined with ``U_id`` only: they equal soft k-means with the
    threshold split's indicator as weights; replacing every ``U_ood`` image changes nothing,
    replacing ``U_id`` images changes the prototypes."""

    def forward(batch):
        probe = Probe()
        run_steps(order(probe), carrier, batch)
        return probe.records[0]

    batch = make_batch(4, 1)
    rec = forward(batch)
    state, is_id = rec["state"], threshold_split(rec["state"])
    # Preconditions that make the checks meaningful: both parts non-empty in every episode,
    # and a split that is not the oracle's ID count (so a top-K rule would differ).
    assert is_id.any(1).all() and (~is_id).any(1).all(), is_id
    assert (is_id.sum(1) != N_WAY * N_ID).any(), "the threshold must differ from a top-K"
    assert torch.equal(state.unlabeled_weight, is_id.float()), "the split is not the threshold's"
    for b in range(len(state)):
        args = (state.support_emb[b], state.support_y[b], state.unlabeled_emb[b])
        expected = soft_kmeans_by_hand(*args, is_id[b])
        np.testing.assert_allclose(state.refined_prototypes[b].detach(), expected, atol=1e-5)
        with_ood = soft_kmeans_by_hand(*args, torch.ones_like(is_id[b]))
        assert (with_ood - expected).abs().max() > 1e-2, "U_ood would not even matter here"

    # Every U_ood image replaced by a copy of the farthest one: still beyond the threshold
    # (which depends on the query only), a different set of OOD embeddings.
    far = copy.deepcopy(batch)
    dist = [
        torch.cdist(state.unlabeled_emb[b], state.prototypes[b]).min(-1).values for b in range(2)
    ]
    for b in range(2):
        ood = torch.nonzero(~is_id[b]).flatten()
        far[0].unlabeled_x[b, ood] = batch[0].unlabeled_x[b, ood[dist[b][ood].argmax()]]
    moved = forward(far)
    assert torch.equal(threshold_split(moved["state"]), is_id)
    np.testing.assert_allclose(
        moved["state"].refined_prototypes.detach(), state.refined_prototypes.detach(), atol=1e-6
    )
    np.testing.assert_allclose(moved["logits"].detach(), rec["logits"].detach(), atol=1e-5)

    # Every U_id image replaced by a copy of the closest one: still ID, prototypes change.
    near = copy.deepcopy(batch)
    for b in range(2):
        ids = torch.nonzero(is_id[b]).flatten()
        near[0].unlabeled_x[b, ids] = batch[0].unlabeled_x[b, ids[dist[b][ids].argmin()]]
    changed = forward(near)
    assert torch.equal(threshold_split(changed["state"]), is_id)
    diff = changed["state"].refined_prototypes - state.refined_prototypes
    assert diff.abs().max() > 1e-3, "U_id does not reach the prototypes"


# ============================================================================ 1, 4. MI sign
def test_1_4_mi_term_is_plus_lambda_ood_minus_id_on_every_episode(carrier):
    """On a meta-batch of 2 current + 2 replayed episodes, the MI term (value and encoder
    gradient) is ``+λ Σ_b (I_ood,b − I_id,b)`` over all four, computed here with the plugin's
    own networks on the threshold split."""
    checks = {}

    def hook(rec, strategy):
        if rec["rows"] is None:
            return
        hand = mi_by_hand(rec["estimator"], rec["state"], threshold_split(rec["state"]))
        term = rec["terms"]["mi"]
        checks.update(
            per_episode=[float(h.detach()) for h in hand],
            term=float(term),
            expected=float(LAM * sum(hand)),
            grad=encoder_grad(term, strategy),
            grad_expected=encoder_grad(LAM * sum(hand), strategy),
        )

    probe = Probe(hook=hook)
    s = order(probe)
    run_steps(s, carrier, make_batch(1, 2), make_batch(3, 4))
    rec = probe.records[1]
    assert len(rec["state"]) == 4 and list(rec["rows"].rows) == [2, 3], "2 replayed episodes"
    # Each episode's term is clearly non-zero (dropping any one would change the sum), and
    # the total is far from 0 (a flipped sign cannot pass).
    assert min(abs(v) for v in checks["per_episode"]) > 1e-3, checks["per_episode"]
    assert abs(checks["expected"]) > 1e-2
    # The plugin sums every episode's masked pairs at once, the hand computation each cut set:
    # the same maths in another float32 order. CLUB's log-densities are O(100) each, so their
    # means agree to ~1e-5 absolute (in float64 the two agree to 1e-14).
    assert checks["term"] == pytest.approx(checks["expected"], rel=1e-5, abs=2e-5)
    assert checks["grad"].norm() > 0
    torch.testing.assert_close(checks["grad"], checks["grad_expected"], rtol=1e-4, atol=1e-7)
    # Perturbing one replayed episode's unlabeled images changes the MI term.
    other = copy.deepcopy(make_batch(3, 4))
    probe2 = Probe()
    s2 = order(probe2)
    run_steps(s2, carrier, make_batch(1, 2))
    for task in plugin(s2, FeatureReservoirReplayPlugin).tasks[-1:]:
        task.unlabeled_x[:] = task.unlabeled_x.flip(0)  # a replayed task's U, in another order
        task.unlabeled_x[0] = 255 - task.unlabeled_x[0]
    run_steps(s2, carrier, other)
    assert float(probe2.records[1]["terms"]["mi"]) != pytest.approx(checks["term"], abs=1e-6)


# ============================================================================ 2. MI networks
def test_2_variational_networks_are_trained_by_their_own_optimisers(carrier):
    """Every iteration, q_φ and f_ψ change (the model's own lr is 0) by exactly one step of
    their own Adam optimisers: q_φ on the negative log-likelihood of this meta-batch's OOD
    pairs, f_ψ on −I_id of its ID pairs (all episodes, detached) — replayed here from the
    networks' state before the iteration. So q's likelihood of the OOD pairs and the critic's
    I_id rise. Their parameters are not in the model's optimiser."""
    probe = Probe()
    s = order(probe)
    run_steps(s, carrier, make_batch(1, 2), make_batch(3, 4), make_batch(5, 6))
    mi = plugin(s, MIRegularizationPlugin)
    model_params = {id(p) for g in s.optimizer.param_groups for p in g["params"]}
    assert not model_params & {id(p) for p in mi.estimator.parameters()}
    for rec in probe.records[1:]:
        before, after = rec["estimator_before"], rec["estimator"]
        for (name, p0), p1 in zip(before.named_parameters(), after.parameters()):
            assert not torch.equal(p0, p1), f"{name} was not trained this iteration"
        state, is_id = rec["state"], threshold_split(rec["state"])
        e, protos = state.unlabeled_emb.detach(), state.prototypes.detach()
        p = torch.stack([protos[b][torch.cdist(e[b], protos[b]).argmin(-1)] for b in range(len(e))])
        with torch.no_grad():
            nll = [est.q.nll(p[~is_id], e[~is_id]) for est in (before, after)]
            i_id = [
                tuba_lower_bound(est.critic, e[is_id], p[is_id], clamp=est.clamp)
                for est in (before, after)
            ]
        assert nll[1] < nll[0], "q_φ is not fitted by maximum likelihood"
        assert i_id[1] > i_id[0], "f_ψ does not maximise I_id"
        # The same step by hand, from the state before the iteration (optimisers included).
        by_hand = copy.deepcopy(before)
        by_hand.opt_q.zero_grad()
        by_hand.q.nll(p[~is_id], e[~is_id]).backward()
        by_hand.opt_q.step()
        by_hand.opt_critic.zero_grad()
        (-tuba_lower_bound(by_hand.critic, e[is_id], p[is_id], clamp=by_hand.clamp)).backward()
        by_hand.opt_critic.step()
        for (name, p_hand), p_plugin in zip(by_hand.named_parameters(), after.parameters()):
            torch.testing.assert_close(p_plugin, p_hand, rtol=1e-5, atol=1e-7, msg=name)
    for p0, p1 in zip(tiny_model().parameters(), s.model.parameters()):
        assert torch.equal(p0, p1), "the model moved although its lr is 0"


def test_2_encoder_receives_the_mi_gradient(carrier):
    """With λ > 0, the MI term alone gives the backbone a non-zero gradient equal to that of
    the hand-built term (a detached embedding or prototype would change it)."""
    grads = {}

    def hook(rec, strategy):
        hand = LAM * sum(mi_by_hand(rec["estimator"], rec["state"], threshold_split(rec["state"])))
        grads["plugin"] = encoder_grad(rec["terms"]["mi"], strategy)
        grads["hand"] = encoder_grad(hand, strategy)
        # the prototypes' share alone: the hand term with the embeddings detached
        state = copy.copy(rec["state"])
        state.unlabeled_emb = state.unlabeled_emb.detach()
        grads["protos_only"] = encoder_grad(
            LAM * sum(mi_by_hand(rec["estimator"], state, threshold_split(state))), strategy
        )

    s = order(Probe(hook=hook), use_replay=False, use_ot=False)
    run_steps(s, carrier, make_batch(1, 2))
    assert grads["plugin"].norm() > 1e-6
    assert (grads["hand"] - grads["protos_only"]).norm() > 1e-3 * grads["hand"].norm()
    torch.testing.assert_close(grads["plugin"], grads["hand"], rtol=1e-4, atol=1e-8)


# ============================================================================ 6. memory
def test_6_stored_features_are_those_of_s_and_u_id(carrier):
    """Each stored task keeps ``h(S)`` then ``h(U_id)`` — compared with embeddings computed
    here — with ``U_id`` from the threshold split, and none of ``U_ood``."""
    probe = Probe()
    s = order(probe)
    batch = make_batch(4, 1)
    run_steps(s, carrier, batch)
    is_id = threshold_split(probe.records[0]["state"])
    assert (~is_id).any(1).all()
    tasks = plugin(s, FeatureReservoirReplayPlugin).tasks
    assert len(tasks) == 2
    x = batch[0]
    for b, task in enumerate(tasks):
        assert torch.equal(task.support_x, x.support_x[b])
        assert torch.equal(task.unlabeled_id, is_id[b])
        expected = torch.cat(
            [embed(s.model, x.support_x[b]), embed(s.model, x.unlabeled_x[b][is_id[b]])]
        )
        # fixed shape [S + U, d]: S ∪ U_id's rows hold their features, the others zeros
        assert task.features.shape == (len(x.support_x[b]) + len(is_id[b]), expected.shape[1])
        assert torch.equal(task.feature_mask()[len(x.support_x[b]) :], is_id[b])
        assert not task.features[~task.feature_mask()].any()
        torch.testing.assert_close(valid_features(task), expected, rtol=1e-5, atol=1e-5)


# ============================================================================ 5, 7. OT
def test_5_ot_pairs_current_and_stored_features_of_the_same_images(carrier):
    """Frozen weights, BatchNorm in eval mode: the replayed tasks' current features equal
    their stored ones, so L_OT = 0; pairing them with another task's features is far from 0."""
    probe = Probe()
    s = order(probe, use_mi=False)
    run_steps(s, carrier, make_batch(1, 2), make_batch(3, 4))
    rec = probe.records[1]
    current, stored = replayed_pairs(rec)
    scale = float((stored**2).sum(1).mean())
    assert probe.records[1]["rows"] is not None and len(current) >= 12
    assert float(rec["terms"]["ot"]) <= 1e-6 * scale, (float(rec["terms"]["ot"]), scale)
    # The same features paired with other rows: clearly positive.
    info = rec["rows"]
    t0, t1 = info.tasks
    f0, f1 = valid_features(t0), valid_features(t1)
    n = min(len(f0), len(f1))
    wrong = float(ot_by_hand(f1[:n], f0[:n]))
    assert wrong > 1e-2 * scale, (wrong, scale)


def _ot_step(carrier, hook=None, **kw):
    """Store tasks 1, 2 (frozen, eval BN), move the weights, replay them with tasks 3, 4."""
    probe = Probe(hook=hook)
    s = order(probe, **kw)
    run_steps(s, carrier, make_batch(1, 2))
    perturb(s.model, seed=7)
    run_steps(s, carrier, make_batch(3, 4))
    return s, probe.records[1]


def test_5_ot_value_is_the_optimum_on_the_pairs(carrier):
    """After the weights moved, L_OT equals the exact OT between the replayed tasks' features
    recomputed here and their stored features (pairwise cost, uniform weights, optimal plan),
    and the term added is β times it."""
    s, rec = _ot_step(carrier, use_mi=False)
    info = rec["rows"]
    current = torch.cat(
        [
            torch.cat([embed(s.model, t.support_x), embed(s.model, t.unlabeled_x[t.unlabeled_id])])
            for t in info.tasks
        ]
    )
    stored = torch.cat([valid_features(t) for t in info.tasks])
    expected = float(ot_by_hand(current, stored))
    assert expected > 1e-3
    ot = plugin(s, OTFeatureLossPlugin)
    assert float(ot.last_value) == pytest.approx(expected, rel=1e-4)
    assert float(rec["terms"]["ot"]) == pytest.approx(BETA * expected, rel=1e-4)
    # The optimum, not the identity pairing or the transposed plan's value.
    cost = ((current[:, None] - stored[None]) ** 2).sum(-1)
    rows, cols = linear_sum_assignment(cost.double().numpy())
    plan = torch.zeros_like(cost)
    plan[rows, cols] = 1 / len(rows)
    assert float((plan.T * cost).sum()) > expected * (1 + 1e-6), (
        "the transposed plan would give the same value"
    )


def test_7_ot_gradient_reaches_the_encoder(carrier):
    grads = {}

    def hook(rec, strategy):
        if rec["rows"] is None:
            return
        grads["plugin"] = encoder_grad(rec["terms"]["ot"], strategy)
        grads["hand"] = encoder_grad(BETA * ot_by_hand(*replayed_pairs(rec)), strategy)

    _ot_step(carrier, hook=hook, use_mi=False)
    assert grads["plugin"].norm() > 1e-6
    torch.testing.assert_close(grads["plugin"], grads["hand"], rtol=1e-4, atol=1e-8)


@pytest.mark.parametrize("name, key", [("lam", "mi"), ("beta", "ot")])
def test_7_lambda_and_beta_scale_their_terms_linearly(carrier, name, key):
    """Doubling λ (β) doubles the MI (OT) term and adds exactly one more of it to the loss;
    zero removes it."""
    runs = {}
    for factor in (0.0, 1.0, 2.0):
        weight = {"lam": LAM, "beta": BETA}[name] * factor
        _, rec = _ot_step(carrier, **{name: weight})
        runs[factor] = (float(rec["terms"][key]), float(rec["loss"]), rec["loss_terms"])
    one, two, zero = runs[1.0], runs[2.0], runs[0.0]
    assert abs(one[0]) > 1e-3
    assert two[0] == pytest.approx(2 * one[0], rel=1e-5)
    assert zero[0] == 0.0
    assert two[1] - one[1] == pytest.approx(one[0], rel=1e-4)
    assert one[1] - zero[1] == pytest.approx(one[0], rel=1e-4)


# ============================================================================ Eq. 10
def test_objective_is_eq10_each_task_once_and_beta_ot_once(carrier):
    """H = Σ over the 4 tasks (2 current, 2 replayed) of [mean query CE + λ(I_ood − I_id)]
    + β L_OT, assembled here from the forward's logits, the plugin's networks and an OT
    solved here. β weighs L_OT against one task's loss, whatever the number of tasks."""
    parts = {}

    def hook(rec, strategy):
        if rec["rows"] is None:
            return
        state = rec["state"]
        logits = rec["logits"].reshape(len(state), -1, N_WAY)
        labels = rec["batch"].query_y.reshape(len(state), -1)
        parts["meta"] = [float(F.cross_entropy(logits[b], labels[b])) for b in range(len(state))]
        parts["mi"] = [
            float(v.detach()) for v in mi_by_hand(rec["estimator"], state, threshold_split(state))
        ]
        parts["ot"] = float(ot_by_hand(*replayed_pairs(rec)))

    _, rec = _ot_step(carrier, hook=hook)
    # Every part clearly non-zero: none can be dropped or rescaled unnoticed.
    assert len(parts["meta"]) == 4 and min(parts["meta"]) > 1e-2, parts["meta"]
    assert parts["ot"] > 1e-3 and abs(sum(parts["mi"])) > 1e-3, parts
    expected = sum(parts["meta"]) + LAM * sum(parts["mi"]) + BETA * parts["ot"]
    assert float(rec["loss"]) == pytest.approx(expected, rel=1e-5)
    assert float(rec["loss_terms"]["meta"]) == pytest.approx(sum(parts["meta"]), rel=1e-5)


class SmoothedCE(torch.nn.Module):
    """A criterion of one's own (not the plain cross-entropy ORDER batches over every task):
    label-smoothed cross-entropy that records the rows it is handed, one call per task."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[torch.Tensor, torch.Tensor]] = []

    def forward(self, logits, labels):
        self.calls.append((logits.detach().clone(), labels.clone()))
        return F.cross_entropy(logits, labels, label_smoothing=0.1)


def test_a_criterion_of_ones_own_gives_every_task_its_meta_loss_replayed_ones_too(carrier):
    """With ``criterion=`` a loss of one's own, the meta loss is still Σ over the 2 current and
    the 2 replayed tasks of that criterion on each task's queries: the replayed tasks are not
    left out of it."""
    criterion, parts = SmoothedCE(), {}

    def hook(rec, strategy):
        if rec["rows"] is None:
            return
        state = rec["state"]
        logits = rec["logits"].detach().reshape(len(state), -1, N_WAY)
        labels = rec["batch"].query_y.reshape(len(state), -1)
        parts["rows"] = list(rec["rows"].rows)
        parts["logits"] = logits
        parts["meta"] = [
            float(F.cross_entropy(logits[b], labels[b], label_smoothing=0.1))
            for b in range(len(state))
        ]
        parts["calls"] = list(criterion.calls)

    _, rec = _ot_step(carrier, hook=hook, criterion=criterion)
    assert parts["rows"] == [2, 3] and len(parts["meta"]) == 4  # 2 current, 2 replayed tasks
    assert min(parts["meta"]) > 1e-2, parts["meta"]
    assert float(rec["loss_terms"]["meta"]) == pytest.approx(sum(parts["meta"]), rel=1e-5)
    calls = parts["calls"][2:]  # the first step's 2 tasks, then this step's
    assert len(calls) == 4
    for b, (logits, _) in enumerate(calls):
        torch.testing.assert_close(logits, parts["logits"][b])  # the replayed rows among them


# ============================================================================ split → head
@pytest.mark.parametrize("refine", ["none", "mskm"])
def test_ood_split_with_a_head_that_ignores_it_is_refused(refine):
    """A head that ignores ``unlabeled_weight`` would let ``U_ood`` through silently."""
    with pytest.raises(ValueError, match=rf"refine='{refine}'\) ignores unlabeled_weight.*fix"):
        order(model=tiny_model(refine=refine))
    # Without the split there is nothing to ignore.
    order(model=tiny_model(refine=refine), use_ood_split=False, use_mi=False)
