"""The meta-learning baselines of Table 2: ProtoNet, MSKM, ANIL, TPN and LST.

A tiny synthetic SETS benchmark (one 16 px domain, 3-way 2-shot episodes, 2-block 8-filter
backbones) keeps every test to a fraction of a second: each baseline trains through ``run_sets``
and its loss goes down, then behavioural tests check what would break if a method were wrong
(ANIL's inner loop touches only the head, TPN's propagation and kNN graph, LST's use of its
pseudo-labels and SWN, who reads the unlabeled set, nobody reads the oracle) and checkpoints
restore every baseline exactly.
"""

from __future__ import annotations

import copy
import inspect
import sys
from dataclasses import replace

import pytest
import torch
from avalanche.core import SupervisedPlugin
from avalanche.training.plugins import EvaluationPlugin

from avalanche_sets.baselines.lst import LST, LSTModel
from avalanche_sets.baselines.meta import (
    ANIL,
    MSKM,
    ANILModel,
    EpisodicBaseline,
    ProtoNet,
    ProtoNetModel,
)
from avalanche_sets.baselines.tpn import (
    TPN,
    TPNModel,
    gaussian_affinity,
    knn_sparsify,
    label_propagation,
    normalize_graph,
)
from avalanche_sets.data.benchmark import sets_benchmark
from avalanche_sets.data.episodes import collate_episodes
from avalanche_sets.data.synthetic import make_synthetic_domain
from avalanche_sets.models.backbone import ConvBackbone
from avalanche_sets.models.episodic import PrototypicalModel
from avalanche_sets.training import load_checkpoint, run_sets, save_checkpoint

N_WAY = 3
NAMES = ("ProtoNet", "MSKM", "ANIL", "TPN", "LST")
USES_UNLABELED = {"ProtoNet": False, "MSKM": True, "ANIL": False, "TPN": True, "LST": True}

pytestmark = pytest.mark.filterwarnings("ignore:No loggers specified")


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    # Tiny tensors: one thread is much faster than two on a shared machine.
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def bench():
    dom = make_synthetic_domain(
        "shapes", n_classes=15, images_per_class=20, image_size=16, cache=False
    )
    ood = make_synthetic_domain(
        "rings", n_classes=6, images_per_class=20, image_size=16, cache=False
    )
    return sets_benchmark(
        loaded=([dom], [ood]),
        n_way=N_WAY,
        n_shot=2,
        n_query=3,
        n_unlabeled=2,
        n_ood=4,
        tasks_per_domain=4,
        n_val_episodes=2,
        n_test_episodes=4,
        seed=0,
    )


@pytest.fixture(scope="module")
def batch(bench):
    """A fixed meta-batch of two test episodes, as the template's learners see it."""
    data = bench.test_stream[0].dataset
    x, y, _ = collate_episodes([data[0], data[1]])
    return x, y


def _backbone() -> ConvBackbone:
    return ConvBackbone(n_blocks=2, width=8, image_size=16)


def _strategy(name: str, seed: int = 0, **kwargs):
    torch.manual_seed(seed)
    kwargs.setdefault("evaluator", EvaluationPlugin())
    options = {
        "ProtoNet": (ProtoNet, {}),
        "MSKM": (MSKM, {}),
        "ANIL": (ANIL, dict(n_way=N_WAY, inner_steps=3)),
        "TPN": (TPN, dict(k=5)),
        "LST": (
            LST,
            dict(n_way=N_WAY, inner_steps=2, retrain_steps=2, finetune_steps=1, n_select=2),
        ),
    }
    cls, opts = options[name]
    return cls(model_options={"backbone": _backbone(), **opts}, **kwargs)


def _eval_logits(model, x):
    model.eval()
    with torch.no_grad():
        return model(x.without_oracle())


class _LossRecorder(SupervisedPlugin):
    def __init__(self) -> None:
        super().__init__()
        self.losses: list[float] = []

    def after_training_iteration(self, strategy, **kwargs):
        self.losses.append(strategy.loss.item())


# --------------------------------------------------------------------------- training
@pytest.mark.parametrize("name", NAMES)
def test_training_loss_decreases_through_run_sets(name, bench):
    # 4 episodes, meta-batch 2, 8 epochs: 16 iterations over the same episodes, so the first
    # and last epochs see the same meta-batches.
    rec = _LossRecorder()
    strategy = _strategy(name, lr=3e-3, train_epochs=8, plugins=[rec])
    result = run_sets(strategy, bench)
    assert len(rec.losses) == 16 and all(torch.isfinite(torch.tensor(rec.losses)))
    first, last = sum(rec.losses[:4]) / 4, sum(rec.losses[-4:]) / 4
    assert last < 0.85 * first, (first, last)
    assert 0.0 <= result.mean_accuracy <= 1.0 and len(result.episode_acc) == 4


def test_default_strategies_follow_the_paper():
    for cls in (ProtoNet, MSKM, ANIL, TPN, LST):
        strategy = cls(evaluator=EvaluationPlugin())
        backbone = strategy.model.backbone
        assert isinstance(backbone, ConvBackbone) and backbone.image_size == 32
        assert isinstance(strategy.optimizer, torch.optim.Adam)
        assert strategy.optimizer.param_groups[0]["lr"] == 1e-3
        assert strategy.train_mb_size == 2
    assert isinstance(ProtoNet(evaluator=EvaluationPlugin()).model, ProtoNetModel)
    mskm = MSKM(evaluator=EvaluationPlugin()).model
    assert isinstance(mskm, PrototypicalModel) and mskm.refine == "mskm"
    assert TPN(evaluator=EvaluationPlugin()).model.alpha == 0.9
    anil = ANIL(model_options={"n_way": N_WAY}, evaluator=EvaluationPlugin())
    assert anil.model.inner_steps == 20


def test_invalid_options_raise():
    with pytest.raises(ValueError, match="inner_lr"):
        ANILModel(_backbone(), inner_lr=0.0)
    with pytest.raises(ValueError, match="alpha"):
        TPNModel(_backbone(), alpha=1.0)
    with pytest.raises(ValueError, match="n_select"):
        LSTModel(_backbone(), n_select=0)
    with pytest.raises(ValueError, match="lr"):
        ProtoNet(model_options={"backbone": _backbone()}, lr=-1.0, evaluator=EvaluationPlugin())


STRATEGY_MODELS = {
    ProtoNet: ProtoNetModel,
    MSKM: PrototypicalModel,
    ANIL: ANILModel,
    TPN: TPNModel,
    LST: LSTModel,
}


@pytest.mark.parametrize("cls", list(STRATEGY_MODELS), ids=lambda c: c.__name__)
def test_a_strategy_takes_its_models_options_once(cls):
    """The options are the model's keyword parameters (backbone included; MSKM's refine is
    fixed), declared on the model only: the strategy's own signature repeats none of them."""
    params = inspect.signature(STRATEGY_MODELS[cls]).parameters
    expected = tuple(p for p in params if p != "refine")
    assert cls.model_option_names() == expected
    assert expected[0] == "backbone" and "bf16" in expected
    declared = {
        name
        for klass in cls.__mro__
        if "__init__" in vars(klass)
        for name in inspect.signature(vars(klass)["__init__"]).parameters
    }
    assert not declared & set(expected)


def test_model_options_reach_the_model_and_bad_ones_fail_at_construction():
    ev = EvaluationPlugin()
    backbone = _backbone()
    options = {"backbone": backbone, "n_way": N_WAY, "n_stages": 1, "swn_hidden": (4,)}
    lst = LST(model_options=options, evaluator=ev).model
    assert isinstance(lst, LSTModel) and lst.backbone is backbone
    assert (lst.n_way, lst.n_stages, lst.inner_steps) == (N_WAY, 1, 5)  # the rest: defaults
    assert TPN(model_options={"alpha": 0.5}, evaluator=ev).model.alpha == 0.5
    assert MSKM(model_options={"bf16": True}, evaluator=ev).model.bf16
    anil = ANIL(model_options={"n_way": N_WAY, "emb_dim": 32}, evaluator=ev).model
    assert anil.head.module.in_features == 32
    with pytest.raises(ValueError, match="n_select must be an integer >= 1, got 0"):
        LST(model_options={"n_select": 0}, evaluator=ev)
    with pytest.raises(ValueError, match=r"alpha must lie in \(0, 1\), got 1.0"):
        TPN(model_options={"alpha": 1.0}, evaluator=ev)
    with pytest.raises(
        TypeError,
        match=r"LST's model LSTModel does not take option\(s\) \['n_selct'\] \(did you mean "
        r"'n_select'\?\); fix: use its options \['backbone', 'n_way', ",
    ):
        LST(model_options={"n_selct": 2}, evaluator=ev)
    with pytest.raises(TypeError, match=r"\['refine'\]"):  # fixed by MSKM, not an option
        MSKM(model_options={"refine": "none"}, evaluator=ev)
    with pytest.raises(TypeError, match="inner_steps"):  # model options go in model_options
        ANIL(inner_steps=5, evaluator=ev)
    given = LST(model_options=options, evaluator=ev).model
    assert LST(model=given, evaluator=ev).model is given
    with pytest.raises(ValueError, match=r"LST got both a model and model_options \['n_stages'\]"):
        LST(model=given, model_options={"n_stages": 2}, evaluator=ev)  # not silently dropped


def test_the_base_class_builds_no_model_of_its_own():
    assert EpisodicBaseline.model_option_names() == ()
    with pytest.raises(TypeError, match="EpisodicBaseline has no default model; fix: pass model"):
        EpisodicBaseline(evaluator=EvaluationPlugin())
    with pytest.raises(
        TypeError, match=r"EpisodicBaseline takes no model options \(got \['bf16'\]\)"
    ):
        EpisodicBaseline(model_options={"bf16": True}, evaluator=EvaluationPlugin())
    strategy = EpisodicBaseline(model=ProtoNetModel(_backbone()), evaluator=EvaluationPlugin())
    assert isinstance(strategy.optimizer, torch.optim.Adam) and strategy.cl_plugin is None


def test_anil_rejects_episodes_of_another_width(batch):
    x, _ = batch
    with pytest.raises(ValueError, match="5-way"):
        ANILModel(_backbone(), n_way=5)(x)


# --------------------------------------------------------------------------- oracle, unlabeled
class _Poison:
    """An oracle that fails on any use."""

    def __getattr__(self, name):
        raise AssertionError(f"a learner read the oracle ({name})")


@pytest.mark.parametrize("name", NAMES)
def test_no_baseline_reads_the_oracle(name, batch):
    x, _ = batch
    model = _strategy(name).model
    assert x.oracle is not None
    poisoned = replace(x, oracle=_Poison())
    model.train()
    torch.manual_seed(0)
    train_ref = model(x.without_oracle())
    assert torch.equal(model(x), train_ref) and torch.equal(model(poisoned), train_ref)
    model.eval()
    with torch.no_grad():
        ref = model(x.without_oracle())
        assert ref.shape == (2 * N_WAY * 3, N_WAY)
        assert torch.equal(model(x), ref) and torch.equal(model(poisoned), ref)


@pytest.mark.parametrize("name", NAMES)
def test_who_uses_the_unlabeled_set(name, batch):
    x, _ = batch
    model = _strategy(name).model
    other = replace(x, unlabeled_x=torch.flip(x.unlabeled_x, dims=[2]))  # mirrored images
    for mode in ("train", "eval"):
        getattr(model, mode)()
        with torch.no_grad():
            changed = not torch.allclose(model(x), model(other))
        assert changed == USES_UNLABELED[name], mode


# --------------------------------------------------------------------------- ANIL
def test_anil_inner_loop_adapts_only_the_head(batch, bench):
    x, _ = batch
    strategy = _strategy("ANIL", lr=1e-2)
    model = strategy.model
    model.eval()
    backbone0 = copy.deepcopy(model.backbone.state_dict())
    head0 = copy.deepcopy(model.head.state_dict())
    with torch.no_grad():
        s, q, _ = model.embed(x)
    with torch.enable_grad():
        learner = model.adapt(s[0], x.support_y[0])
    for k, v in model.backbone.state_dict().items():
        assert torch.equal(v, backbone0[k]), k
    for k, v in model.head.state_dict().items():
        assert torch.equal(v, head0[k]), k
    assert not torch.allclose(learner.module.weight, model.head.module.weight)
    # The adapted head fits the support better than the initialisation.
    loss = torch.nn.functional.cross_entropy
    assert loss(learner(s[0]), x.support_y[0]) < loss(model.head(s[0]), x.support_y[0])

    # One outer step (through the strategy) updates both the backbone and the head's init.
    strategy.train_epochs = 1
    strategy.train(bench.train_stream[0])
    assert any(not torch.equal(v, backbone0[k]) for k, v in model.backbone.state_dict().items())
    assert all(not torch.equal(v, head0[k]) for k, v in model.head.state_dict().items())


@pytest.mark.parametrize("name", ["ANIL", "LST"])
def test_anil_and_lst_train_and_evaluate_without_learn2learn(name, bench, monkeypatch):
    # their MAML inner loop is the package's own (avalanche_sets.models.maml): a plain
    # `pip install avalanche-sets` runs them
    monkeypatch.setitem(sys.modules, "learn2learn", None)  # `import learn2learn` fails
    strategy = _strategy(name)
    strategy.train_epochs = 1
    strategy.train(bench.train_stream[0])  # LST's SWN path (a detached head) included
    strategy.eval(bench.test_stream[:1])


def test_anil_second_order_differs_from_first_order(batch):
    # Second-order MAML back-propagates through the inner steps into the support embeddings.
    x, y = batch
    grads = []
    for first_order in (True, False):
        torch.manual_seed(0)
        model = ANILModel(
            _backbone(), n_way=N_WAY, inner_steps=2, inner_lr=0.5, first_order=first_order
        )
        torch.nn.functional.cross_entropy(model(x), y).backward()
        grads.append(model.backbone.features[0].weight.grad.clone())
    assert not torch.allclose(grads[0], grads[1])


# --------------------------------------------------------------------------- TPN
def _random_graph(n=12, d=6, k=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    emb = torch.randn(n, d, generator=g)
    sigma = torch.rand(n, generator=g) + 0.5
    return normalize_graph(knn_sparsify(gaussian_affinity(emb, sigma), k).double())


@pytest.mark.parametrize("alpha", [0.5, 0.9])
def test_tpn_closed_form_is_the_iteration_fixed_point_over_one_minus_alpha(alpha):
    s = _random_graph()
    y = torch.zeros(12, 3, dtype=torch.float64)
    y[torch.arange(3), torch.arange(3)] = 1.0
    f = y.clone()
    for _ in range(800):
        f = alpha * s @ f + (1 - alpha) * y
    closed = label_propagation(s, y, alpha)
    torch.testing.assert_close(closed, f / (1 - alpha), rtol=1e-9, atol=1e-9)
    # Eigenvalues of the normalised graph lie in [-1, 1]: the iteration converges.
    assert torch.linalg.eigvalsh(s).abs().max() <= 1 + 1e-9


def test_knn_graph_keeps_k_neighbours():
    g = torch.Generator().manual_seed(1)
    emb = torch.randn(10, 5, generator=g)
    w = gaussian_affinity(emb, torch.ones(10))
    assert torch.all(w.diagonal() == 0) and torch.allclose(w, w.T)
    k = 3
    sparse = knn_sparsify(w, k)
    nearest = (w + torch.diag(torch.full((10,), -1.0))).topk(k, dim=1).indices
    knn = torch.zeros(10, 10, dtype=torch.bool)
    knn[torch.arange(10).unsqueeze(1), nearest] = True
    kept = knn | knn.T  # symmetrised kNN relation
    assert torch.equal(sparse != 0, kept)
    assert torch.equal(sparse[kept], w[kept])
    assert torch.all((sparse != 0).sum(1) >= k) and torch.allclose(sparse, sparse.T)
    assert torch.equal(knn_sparsify(w, None), w) and torch.equal(knn_sparsify(w, 9), w)


def test_tpn_model_propagates_on_a_knn_graph_of_all_images(batch):
    x, _ = batch
    model = _strategy("TPN").model
    model.eval()
    with torch.no_grad():
        logits = model(x)
    graph = model.last_graph
    n = x.support_x.shape[1] + x.query_x.shape[1] + x.unlabeled_x.shape[1]
    assert graph.shape == (2, n, n)
    assert torch.all((graph != 0).sum(-1) >= model.k)
    assert torch.allclose(graph, graph.transpose(1, 2))
    assert torch.all(graph.diagonal(dim1=1, dim2=2) == 0)
    assert torch.all(logits >= 0)  # F* = Σ_t (αS)^t Y has non-negative entries


# The authors' variants (TPN-pytorch), each an option so that its effect can be measured.
def test_tpn_self_loops_keep_the_diagonal_and_let_it_take_one_of_the_k_places():
    g = torch.Generator().manual_seed(2)
    emb = torch.randn(9, 4, generator=g)
    w = gaussian_affinity(emb, torch.ones(9), self_loops=True)
    assert torch.all(w.diagonal() == 1.0)
    off = ~torch.eye(9, dtype=torch.bool)
    assert torch.equal(w[off], gaussian_affinity(emb, torch.ones(9))[off])
    k = 3
    sparse = knn_sparsify(w, k, self_loops=True)
    # brute force: each row's k largest entries, the diagonal included (it is the largest)
    knn = torch.zeros(9, 9, dtype=torch.bool)
    for i in range(9):
        for j in sorted(range(9), key=lambda j: -float(w[i, j]))[:k]:
            knn[i, j] = True
    assert knn.diagonal().all()  # so only k - 1 others per row
    kept = knn | knn.T
    assert torch.equal(sparse != 0, kept) and torch.equal(sparse[kept], w[kept])


def test_tpn_model_options_build_the_authors_graph(batch):
    x, _ = batch
    torch.manual_seed(0)
    model = TPNModel(_backbone(), k=5, self_loops=True, sigma_mode="raw")
    model.eval()
    with torch.no_grad():
        model(x)
        emb = torch.randn(2, 7, model.sigma_net[0].in_features)
        raw = model.sigma_net(emb).squeeze(-1)
        sigma = model.sigma(emb)
    assert torch.all(model.last_graph.diagonal(dim1=1, dim2=2) > 0)
    torch.testing.assert_close(sigma, raw + torch.finfo(torch.float64).eps)
    assert raw.abs().max() > 0 and not torch.allclose(sigma, torch.ones_like(sigma))
    with pytest.raises(ValueError, match="sigma_mode"):
        TPNModel(_backbone(), sigma_mode="softplus")


class _TPNLossProbe(SupervisedPlugin):
    def after_training_iteration(self, strategy, **kwargs):
        self.loss = strategy.loss.detach().reshape(())
        self.query = strategy.mb_output.detach()
        self.support = strategy.model.last_support_logits.detach()
        self.support_y = strategy.mb_x.support_y.reshape(-1).long()
        self.query_y = strategy.mb_y.long()


@pytest.mark.parametrize("support_loss", [False, True])
def test_tpn_support_loss_is_one_mean_over_support_and_query_rows(bench, support_loss):
    probe = _TPNLossProbe()
    strategy = _strategy("TPN", support_loss=support_loss, plugins=[probe])
    strategy.train(bench.train_stream[0])
    ce = torch.nn.functional.cross_entropy
    query_only = ce(probe.query, probe.query_y)
    both = ce(torch.cat([probe.support, probe.query]), torch.cat([probe.support_y, probe.query_y]))
    assert not torch.allclose(query_only, both)  # the two losses can be told apart
    torch.testing.assert_close(probe.loss, both if support_loss else query_only)


def test_tpn_support_loss_needs_a_model_with_the_support_rows():
    model = PrototypicalModel(_backbone(), refine="none")
    with pytest.raises(ValueError, match="support_loss"):
        TPN(model=model, support_loss=True, evaluator=EvaluationPlugin())


# --------------------------------------------------------------------------- LST
def test_lst_cherry_picks_the_most_confident_per_class():
    model = LSTModel(_backbone(), n_way=N_WAY, n_select=2)
    logits = torch.tensor(
        [[5.0, 0, 0], [4.0, 0, 0], [3.0, 0, 0], [0, 2.0, 0], [0, 0, 1.0], [0, 0, 6.0]]
    )
    idx, pseudo = model.cherry_pick(lambda u: u, logits)
    assert sorted(zip(pseudo.tolist(), idx.tolist())) == [(0, 0), (0, 1), (1, 3), (2, 4), (2, 5)]


def test_lst_with_zero_swn_weights_is_anil_on_the_support(batch):
    x, _ = batch
    torch.manual_seed(0)
    lst = LSTModel(_backbone(), n_way=N_WAY, inner_steps=2, retrain_steps=2, finetune_steps=3)
    anil = ANILModel(copy.deepcopy(lst.backbone), n_way=N_WAY, inner_steps=5)
    anil.head.load_state_dict(lst.head.state_dict())
    ref = _eval_logits(anil, x)
    assert not torch.allclose(_eval_logits(lst, x), ref, atol=1e-6)  # pseudo-labels matter
    lst.soft_weights = lambda emb, pseudo, protos: torch.zeros(len(emb))
    torch.testing.assert_close(_eval_logits(lst, x), ref, rtol=1e-5, atol=1e-5)


def test_lst_swn_is_meta_learned_by_its_own_loss_only(batch):
    x, y = batch
    torch.manual_seed(0)
    model = LSTModel(_backbone(), n_way=N_WAY, inner_steps=2, retrain_steps=2, finetune_steps=1)
    model.train()
    ce = torch.nn.functional.cross_entropy

    def grads_of(loss_fn):
        model.zero_grad(set_to_none=True)
        loss_fn(model(x)).backward()
        return {n: p.grad for n, p in model.named_parameters()}

    main = grads_of(lambda out: ce(out, y))
    assert len(model.swn_query_logits) == model.n_stages
    assert all(g is None for n, g in main.items() if n.startswith("swn."))
    assert main["backbone.features.0.weight"].abs().sum() > 0
    assert main["head.module.weight"].abs().sum() > 0
    swn = grads_of(lambda out: sum(ce(z, y) for z in model.swn_query_logits))
    assert all(g is None for n, g in swn.items() if not n.startswith("swn."))
    assert any(g is not None and g.abs().sum() > 0 for n, g in swn.items() if n.startswith("swn."))
    # Evaluation has no SWN path.
    _eval_logits(model, x)
    assert model.swn_query_logits == []


# --------------------------------------------------------------------------- checkpoints
@pytest.mark.parametrize("name", NAMES)
def test_checkpoint_restores_every_baseline(name, bench, batch, tmp_path):
    x, _ = batch
    trained = _strategy(name, seed=0, lr=3e-3)
    trained.train(bench.train_stream[0])
    path = save_checkpoint(
        tmp_path / "ckpt.pt", trained, position={"experience": 1, "iteration": 0}
    )
    fresh = _strategy(name, seed=1, lr=3e-3)
    assert not torch.allclose(_eval_logits(fresh.model, x), _eval_logits(trained.model, x))
    restored = load_checkpoint(path, fresh)
    assert restored["position"] == {"experience": 1, "iteration": 0}
    assert torch.equal(_eval_logits(fresh.model, x), _eval_logits(trained.model, x))
    assert (
        fresh.optimizer.state_dict()["state"].keys()
        == trained.optimizer.state_dict()["state"].keys()
    )
