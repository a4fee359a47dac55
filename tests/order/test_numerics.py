"""ORDER's MI and OT terms stay finite on extreme inputs; a non-finite term refuses the step.

The extreme inputs of the issue: very large or collapsed embeddings, duplicate points, a single
unlabeled image, and episodes whose unlabeled set is all OOD or all ID. Each is checked on the
functional terms (value and gradient) and end to end on real ORDER training steps.
"""

from __future__ import annotations

import pytest
import torch
from avalanche.core import SupervisedPlugin
from avalanche.training.plugins import EvaluationPlugin

from avalanche_sets import OrderStrategy, run_sets, sets_benchmark
from avalanche_sets.functional.mi import MIEstimator, pair_with_prototypes
from avalanche_sets.functional.ood import split_ood
from avalanche_sets.functional.ot import ot_loss
from avalanche_sets.models.backbone import ConvBackbone
from avalanche_sets.models.episodic import PrototypicalModel
from avalanche_sets.training import NonFiniteLossError, read_checkpoint

torch.set_num_threads(1)

D = 16


def _points(kind: str, n: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, D, generator=g)
    if kind == "normal":
        return x
    if kind.startswith("large"):  # e.g. large1e8
        return x * float(kind[5:])
    if kind == "tiny":
        return x * 1e-20
    if kind == "collapsed":  # every point the same
        return torch.ones(n, D) * 0.3
    if kind == "zeros":
        return torch.zeros(n, D)
    if kind == "duplicates":  # pairs of identical points
        return x[: (n + 1) // 2].repeat(2, 1)[:n]
    raise AssertionError(kind)


KINDS = ["normal", "large1e4", "large1e8", "large1e15", "tiny", "collapsed", "zeros", "duplicates"]


def _finite(t: torch.Tensor) -> bool:
    return bool(torch.isfinite(t).all())


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n", [0, 1, 2, 7])
def test_mi_bounds_and_fit_stay_finite(kind, n):
    torch.manual_seed(0)
    est = MIEstimator(D)
    protos = _points(kind, 3, seed=1)
    e = _points(kind, n).requires_grad_(True)
    p = pair_with_prototypes(e, protos) if n else torch.zeros(0, D)
    for _ in range(3):  # the variational nets' own steps must stay finite too
        fit = est.fit_step(e, p, e, p)
        for v in fit.values():
            assert v != float("inf") and v != float("-inf")
    i_ood, i_id = est.bounds(e, p, e, p)
    assert _finite(i_ood) and _finite(i_id), (kind, n, i_ood, i_id)
    (i_ood - i_id).backward()
    assert e.grad is None or _finite(e.grad), (kind, n)
    assert all(_finite(prm) for prm in est.parameters())


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n", [1, 2, 9])
@pytest.mark.parametrize("solver", ["exact", "sinkhorn"])
def test_ot_loss_stays_finite(kind, n, solver):
    stored = _points(kind, n, seed=2)
    current = stored + 0.01 * _points("normal", n, seed=3) * stored.abs().max().clamp_min(1)
    current = current.detach().requires_grad_(True)
    loss = ot_loss(current, stored, solver=solver)
    assert _finite(loss) and float(loss.detach()) >= 0, (kind, n, solver, loss)
    loss.backward()
    assert _finite(current.grad), (kind, n, solver)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("u", [0, 1, 6])
def test_ood_split_is_defined_on_extreme_embeddings(kind, u):
    split = split_ood(_points(kind, 5, seed=4), _points(kind, u, seed=5), _points(kind, 3, seed=6))
    assert split.is_id.shape == (u,) and split.is_id.dtype == torch.bool
    assert _finite(split.threshold)


# ------------------------------------------------------------------ end to end


class _Scale(torch.nn.Module):
    """Multiply embeddings by a constant (very large) or replace them by one point (collapsed)."""

    def __init__(self, inner: torch.nn.Module, mode: str) -> None:
        super().__init__()
        self.inner, self.mode = inner, mode
        self.out_dim = inner.out_dim

    def forward(self, x):
        h = self.inner(x)
        if self.mode == "collapsed":
            return h * 0.0 + 1.0  # still attached to the graph (zero gradients)
        return h * float(self.mode)


def _strategy(mode: str | None, **kw) -> OrderStrategy:
    torch.manual_seed(0)
    backbone = ConvBackbone(n_blocks=2, width=8, image_size=16)
    if mode is not None:
        backbone = _Scale(backbone, mode)
    model = PrototypicalModel(backbone, refine="soft_kmeans")
    return OrderStrategy(
        model=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.0),
        evaluator=EvaluationPlugin(), eval_mb_size=4, mem_size=4, replay_batch=2,
        lam=1.0, beta=1.0, ot_max_points=30, **kw,
    )  # fmt: skip


class _RecordTerms(SupervisedPlugin):
    def __init__(self):
        super().__init__()
        self.terms: list[dict[str, float]] = []

    def after_backward(self, strategy, **kw):
        self.terms.append({k: float(v) for k, v in strategy.loss_terms.items()})


def _bench(n_unlabeled: int, n_ood: int):
    return sets_benchmark(
        "synthetic", domains=["shapes"], ood=["rings"], n_way=2, n_shot=1, n_query=2,
        n_unlabeled=n_unlabeled, n_ood=n_ood, tasks_per_domain=12, n_test_episodes=2,
        n_val_episodes=2, image_size=16, seed=0,
    )  # fmt: skip


@pytest.mark.parametrize(
    "mode, n_unlabeled, n_ood",
    [
        ("1e6", 2, 3),  # very large embeddings
        ("collapsed", 2, 3),  # every image embedded at one point
        (None, 0, 4),  # all-OOD unlabeled set
        (None, 4, 0),  # all-ID unlabeled set
        (None, 1, 0),  # a single unlabeled image
        ("1e6", 0, 1),  # a single, OOD, unlabeled image with large embeddings
    ],
)
def test_order_training_terms_stay_finite(mode, n_unlabeled, n_ood):
    rec = _RecordTerms()
    s = _strategy(mode, plugins=[rec])
    bench = _bench(n_unlabeled, n_ood)
    s.train(bench.train_stream[0])
    assert len(rec.terms) == 6
    for i, terms in enumerate(rec.terms):
        # OT starts once the memory holds a task (after the first iteration)
        assert {"meta", "mi"} | ({"ot"} if i else set()) <= set(terms), (i, terms)
        assert all(torch.isfinite(torch.tensor(v)) for v in terms.values()), terms


class _Poison(SupervisedPlugin):
    """Makes the real MI term NaN from one iteration on (what a numerical blow-up looks like)."""

    def __init__(self, at: int):
        super().__init__()
        self.at, self.calls = at, 0

    def before_training_iteration(self, strategy, **kw):
        if self.calls == self.at:
            strategy.order_plugins[2].lam = float("nan")
            self.before = {k: v.detach().clone() for k, v in strategy.model.named_parameters()}
        self.calls += 1


def test_non_finite_term_refuses_the_step_and_keeps_the_checkpoint(tmp_path):
    bench = _bench(2, 3)
    s = _strategy(None)
    s.optimizer = torch.optim.Adam(s.model.parameters(), lr=1e-2)
    s.make_optimizer()
    poison = _Poison(at=4)
    s.plugins.insert(0, poison)
    ckpt = tmp_path / "ckpt.pt"
    with pytest.raises(NonFiniteLossError, match=r"non-finite mi at training domain 1, "
                       r"iteration 4.*step was refused") as info:  # fmt: skip
        run_sets(s, bench, checkpoint_path=ckpt, checkpoint_every=3)
    assert info.value.term == "mi" and info.value.iteration == 4
    # The weights were not touched by the refused step, and the checkpoint (iteration 3) is
    # intact and loads.
    # (batch-norm running statistics did see the refused forward pass; parameters did not move)
    after = dict(s.model.named_parameters())
    assert all(torch.equal(poison.before[k], after[k]) for k in after)
    state = read_checkpoint(ckpt)
    assert state["position"] == {"experience": 0, "iteration": 3}


def test_non_finite_gradient_is_named():
    bench = _bench(2, 3)
    s = _strategy(None)

    class _BadGrad(SupervisedPlugin):
        def after_backward(self, strategy, **kw):
            next(strategy.model.parameters()).grad.fill_(float("inf"))

    s.plugins.append(_BadGrad())
    with pytest.raises(NonFiniteLossError, match="non-finite gradient of backbone"):
        s.train(bench.train_stream[0])


def test_non_finite_embeddings_refuse_the_step_as_the_meta_term():
    """NaN embeddings reach the MI and OT terms before the one finite check of the iteration:
    the OT term turns NaN instead of raising, so the step is refused by name ("meta", the
    first term) with the template's error, not a ValueError from inside a term."""
    bench = _bench(2, 3)
    s = _strategy(None)
    s.optimizer = torch.optim.Adam(s.model.parameters(), lr=1e-2)
    s.make_optimizer()

    class _NaNEmbeddings(SupervisedPlugin):
        calls = 0

        def before_training_iteration(self, strategy, **kw):
            if self.calls == 4:  # the memory replays: OT is active
                assert strategy.iteration.replayed is not None
                strategy.model.backbone.register_forward_hook(lambda m, i, out: out * float("nan"))
                self.before = {k: v.detach().clone() for k, v in strategy.model.named_parameters()}
            self.calls += 1

    poison = _NaNEmbeddings()
    s.plugins.append(poison)
    with pytest.raises(NonFiniteLossError, match="non-finite meta at training domain 1, "
                       "iteration 4") as info:  # fmt: skip
        s.train(bench.train_stream[0])
    assert info.value.term == "meta"
    after = dict(s.model.named_parameters())
    assert all(torch.equal(poison.before[k], after[k]) for k in after)


def test_a_non_finite_term_without_a_gradient_refuses_the_step():
    """A term that carries no gradient (here a constant inf) leaves every gradient finite:
    the loss itself is part of the one check before the step."""
    bench = _bench(2, 3)

    class _InfTerm(SupervisedPlugin):
        TERM = "const"

        def loss_term(self, strategy):
            if strategy.exp_iteration != 2:
                return None
            self.before = {k: v.detach().clone() for k, v in strategy.model.named_parameters()}
            return torch.tensor(float("inf"))

    term = _InfTerm()
    s = _strategy(None, plugins=[term])  # a term reaches the loss through the criterion
    s.optimizer = torch.optim.Adam(s.model.parameters(), lr=1e-2)
    s.make_optimizer()
    with pytest.raises(NonFiniteLossError, match="non-finite const at training domain 1, "
                       "iteration 2") as info:  # fmt: skip
        s.train(bench.train_stream[0])
    assert info.value.term == "const"
    after = dict(s.model.named_parameters())
    assert all(torch.equal(term.before[k], after[k]) for k in after)
