"""The MI networks take their optimiser step in the plugin's ``after_forward``, before the term;
computing the term (``loss_term``) only reads them."""

from __future__ import annotations

import pytest
import torch
from avalanche.core import SupervisedPlugin
from avalanche.training.plugins import EvaluationPlugin

from avalanche_sets import OrderStrategy, sets_benchmark
from avalanche_sets.models.backbone import ConvBackbone
from avalanche_sets.models.episodic import PrototypicalModel

torch.set_num_threads(1)


def _params(strategy) -> dict[str, torch.Tensor]:
    est = strategy.mi.estimator
    return {} if est is None else {k: v.detach().clone() for k, v in est.named_parameters()}


class _Watch(SupervisedPlugin):
    """Snapshots of the MI networks around the forward pass and after the loss is built."""

    def __init__(self):
        super().__init__()
        self.snaps: list[tuple[dict, dict, dict]] = []

    def before_forward(self, strategy, **kw):
        self._before = _params(strategy)

    def after_forward(self, strategy, **kw):  # after the MI plugin's (plugins run in order)
        self._fitted = _params(strategy)

    def before_backward(self, strategy, **kw):  # the criterion has computed the MI term
        self.snaps.append((self._before, self._fitted, _params(strategy)))


def _strategy(*plugins) -> OrderStrategy:
    torch.manual_seed(0)
    model = PrototypicalModel(
        ConvBackbone(n_blocks=2, width=8, image_size=16), refine="soft_kmeans"
    )
    return OrderStrategy(
        model=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.01),
        evaluator=EvaluationPlugin(), eval_mb_size=4, mem_size=4, replay_batch=2,
        plugins=list(plugins),
    )  # fmt: skip


def _bench():
    return sets_benchmark(
        "synthetic", domains=["shapes"], ood=["rings"], n_way=2, n_shot=1, n_query=2,
        n_unlabeled=3, n_ood=3, tasks_per_domain=8, n_test_episodes=2, n_val_episodes=2,
        image_size=16, seed=0,
    )  # fmt: skip


def test_the_networks_step_after_the_forward_pass_and_not_in_the_term():
    watch = _Watch()
    s = _strategy(watch)
    s.train(_bench().train_stream[0])
    assert len(watch.snaps) == 4
    for i, (before, fitted, after_term) in enumerate(watch.snaps):
        assert fitted.keys() == after_term.keys() and fitted, i
        if before:  # built at the first after_forward
            assert any(not torch.equal(before[k], fitted[k]) for k in fitted), (
                f"iteration {i}: after_forward did not step the MI networks"
            )
        assert all(torch.equal(fitted[k], after_term[k]) for k in fitted), (
            f"iteration {i}: computing the MI term changed the MI networks"
        )


def test_the_term_without_its_forward_pass_is_refused():
    class _Again(SupervisedPlugin):
        def after_training_iteration(self, strategy, **kw):
            strategy.mi.loss_term(strategy)

    s = _strategy(_Again())
    with pytest.raises(RuntimeError, match="after_forward did not see this forward pass"):
        s.train(_bench().train_stream[0])
