"""The per-iteration object plugins hand values through (``avalanche_sets.training.iteration``).

* A plugin that reads what another writes fails when the strategy is built without that
  partner — matched by class, so DER's and MER's plugins, which also keep a ``reservoir``, do
  not stand in for ORDER's memory.
* Tasks handed to ``Iteration.replay`` reach the forward pass after the current ones, and only
  in that iteration.
* A loss term reaches the loss one way, the criterion: the template's adds every plugin's term in
  plugin order, one of one's own names some and adds the rest, and a term no criterion added
  stops the step.
"""

from __future__ import annotations

import pytest
import torch

from avalanche_sets.baselines.plugins.der import DERPlugin
from avalanche_sets.models.backbone import ConvBackbone
from avalanche_sets.models.episodic import PrototypicalModel
from avalanche_sets.order import (
    FeatureReservoirReplayPlugin,
    MIRegularizationPlugin,
    OODSplitPlugin,
    OrderStrategy,
    OTFeatureLossPlugin,
)
from avalanche_sets.training import EpisodicTemplate, silent_evaluator
from avalanche_sets.training.iteration import Iteration


def template(*plugins) -> EpisodicTemplate:
    model = PrototypicalModel(ConvBackbone(n_blocks=2, width=4, image_size=16))
    return EpisodicTemplate(
        model=model, optimizer=torch.optim.Adam(model.parameters()), plugins=list(plugins),
        evaluator=silent_evaluator(),
    )  # fmt: skip


def test_mi_without_the_ood_split_fails_at_construction():
    with pytest.raises(ValueError, match=r"MIRegularizationPlugin needs OODSplitPlugin in the same "
                       r"strategy \(it separates U_id from U_ood.*fix: add OODSplitPlugin"):  # fmt: skip
        template(MIRegularizationPlugin())
    template(OODSplitPlugin(), MIRegularizationPlugin())  # with its partner: fine


def test_ot_without_orders_memory_fails_at_construction_even_next_to_another_reservoir():
    with pytest.raises(ValueError, match="OTFeatureLossPlugin needs FeatureReservoirReplayPlugin"):
        template(OTFeatureLossPlugin())
    der = DERPlugin(mem_size=4)
    assert hasattr(der, "reservoir")  # looks alike, holds no stored features for OT
    with pytest.raises(ValueError, match=r"the plugins are \['DERPlugin', 'OTFeatureLossPlugin'\]"):
        template(der, OTFeatureLossPlugin())
    template(FeatureReservoirReplayPlugin(mem_size=4), OTFeatureLossPlugin())


def test_order_strategy_and_its_ablations_bring_their_partners():
    for options in (
        {},
        {"use_ot": False},
        {"use_mi": False},
        {"use_replay": False, "use_ot": False},
    ):
        OrderStrategy(evaluator=silent_evaluator(), mem_size=4, **options)


def _batch(n: int, seed: int):
    from avalanche_sets.data.episodes import EpisodeBatch

    g = torch.Generator().manual_seed(seed)
    img = lambda k: torch.randint(0, 255, (n, k, 16, 16, 3), dtype=torch.uint8, generator=g)  # noqa: E731
    labels = torch.arange(2).repeat_interleave(2).repeat(n, 1)
    return EpisodeBatch(
        support_x=img(4), support_y=labels, query_x=img(4), query_y=labels, unlabeled_x=img(3)
    )


class _Loader(torch.utils.data.Dataset):
    def __init__(self, batches):
        self.batches = batches

    def __len__(self):
        return len(self.batches)

    def __getitem__(self, i):
        return self.batches[i]


def _train(strategy, batches) -> None:
    """Run ``strategy``'s training loop over pre-made meta-batches (one iteration each)."""
    strategy.is_training = True
    strategy.model.train()
    strategy.make_optimizer()
    for batch in batches:
        strategy.mbatch = [batch, batch.query_y.reshape(-1), torch.zeros(1)]
        strategy._unpack_minibatch()
        strategy._before_training_iteration()
        strategy.optimizer.zero_grad()
        strategy.loss = strategy._make_empty_loss()
        strategy._before_forward()
        strategy.mb_output = strategy.forward()
        strategy._after_forward()
        strategy.loss += strategy.criterion()
        strategy._before_backward()
        strategy.backward()
        strategy.optimizer_step()
        strategy._after_training_iteration()


class _Replays(EpisodicTemplate.PLUGIN_CLASS):
    """Replays ``extra`` (a 1-episode batch) in every iteration, and records what it saw."""

    def __init__(self, extra) -> None:
        super().__init__()
        self.extra, self.seen = extra, []

    def before_training_iteration(self, strategy, **kwargs):
        strategy.iteration.replay(self.extra, tasks=["m"], slots=[7])

    def after_forward(self, strategy, **kwargs):
        it = strategy.iteration
        self.seen.append((len(strategy.mb_x), it.n_current, it.replayed, strategy.mb_y.shape))


def test_replayed_tasks_follow_the_current_ones_in_the_forward_pass_of_their_iteration():
    extra = _batch(1, seed=9)
    replays = _Replays(extra)
    strategy = template(replays)
    current = [_batch(2, seed=1), _batch(2, seed=2)]
    _train(strategy, current)
    assert len(replays.seen) == len(current)
    for n_rows, n_current, replayed, y_shape in replays.seen:
        assert (n_rows, n_current) == (3, 2) and y_shape == (3 * 4,)
        assert replayed.rows == range(2, 3) and replayed.tasks == ["m"] and replayed.slots == [7]
    assert torch.equal(strategy.mb_x.query_x[:2], current[1].query_x)  # the current tasks first
    assert torch.equal(strategy.mb_x.query_x[2:], extra.query_x)  # then the replayed one
    assert strategy.mb_x.oracle is None  # the merged batch is the learner's view


def test_replay_is_refused_outside_training_twice_or_with_mismatched_lengths():
    extra = _batch(1, seed=0)
    with pytest.raises(RuntimeError, match="training iterations only"):
        Iteration(training=False, n_current=2).replay(extra, tasks=["a"], slots=[0])
    it = Iteration(training=True, n_current=2)
    with pytest.raises(ValueError, match="1 episodes, 2 tasks and 1 slots"):
        it.replay(extra, tasks=["a", "b"], slots=[0])
    it.replay(extra, tasks=["a"], slots=[0])
    with pytest.raises(RuntimeError, match="already replays"):
        it.replay(extra, tasks=["a"], slots=[0])
    assert it.current_rows == range(2) and it.replayed.rows == range(2, 3)


class _Term(EpisodicTemplate.PLUGIN_CLASS):
    """A loss term of ``scale`` × the mean query logit (``None``: no term), counting its calls."""

    TERM = "probe"

    def __init__(self, scale: float | None = 2.0) -> None:
        super().__init__()
        self.scale, self.calls = scale, 0

    def loss_term(self, strategy):
        self.calls += 1
        return None if self.scale is None else self.scale * strategy.mb_output.mean()


class _Terms(EpisodicTemplate.PLUGIN_CLASS):
    """Two named terms from one plugin (as DER's logit and label terms)."""

    def loss_term(self, strategy):
        return {"sq": strategy.mb_output.pow(2).mean(), "abs": strategy.mb_output.abs().mean()}


class _Cancels(EpisodicTemplate.PLUGIN_CLASS):
    """Two terms that cancel exactly, ``+2**24`` then ``-2**24``: added one at a time, they round
    what came before to a multiple of 2 (float32), so the result shows the order of the sum."""

    def loss_term(self, strategy):
        zero = 0.0 * strategy.mb_output.mean()
        return {"up": zero + 2.0**24, "down": zero - 2.0**24}


class _NoTerm(EpisodicTemplate.PLUGIN_CLASS):
    """A plugin without a loss term."""


def _strategy(cls, plugins):
    model = PrototypicalModel(ConvBackbone(n_blocks=2, width=4, image_size=16))
    return cls(
        model=model, optimizer=torch.optim.Adam(model.parameters()), plugins=plugins,
        evaluator=silent_evaluator(),
    )  # fmt: skip


def test_the_criterion_adds_every_plugins_terms_once_in_plugin_order():
    probe, cancels, none = _Term(), _Cancels(), _Term(scale=None)
    strategy = _strategy(EpisodicTemplate, [probe, _NoTerm(), cancels, none])
    _train(strategy, [_batch(2, seed=3)])
    assert probe.calls == none.calls == 1
    t = strategy.loss_terms
    assert list(t) == ["meta", "probe", "up", "down"]
    assert torch.equal(t["probe"], 2.0 * strategy.mb_output.detach().mean())
    # one sum, left to right in plugin order (the order is part of the numbers): the cancelling
    # terms, added one at a time, round meta + probe to a multiple of 2
    loss = strategy.loss.detach().reshape(())
    assert torch.equal(loss, t["meta"] + t["probe"] + t["up"] + t["down"])
    assert not torch.equal(loss, t["meta"] + t["probe"] + (t["up"] + t["down"]))


class _NamesTheFirst(EpisodicTemplate):
    """An objective of one's own: names the first plugin's term, then adds the others'."""

    def criterion(self):
        h = self.meta_term(self._criterion(self.mb_output, self.mb_y))
        h = self.plus_terms_of(h, self.plugins[1])
        return self.plus_terms_of(h, self.plugins[0], *self.plugins[2:])


class _LeavesOut(EpisodicTemplate):
    """An objective of one's own that forgets the plugins' terms."""

    def criterion(self):
        return self.meta_term(self._criterion(self.mb_output, self.mb_y))


def test_a_criterion_of_ones_own_names_terms_and_one_that_leaves_a_term_out_stops_the_step():
    first, second = _Term(), _Terms()
    strategy = _strategy(_NamesTheFirst, [first, second])
    _train(strategy, [_batch(2, seed=3)])
    assert first.calls == 1 and list(strategy.loss_terms) == ["meta", "sq", "abs", "probe"]
    strategy = _strategy(_LeavesOut, [_NoTerm(), _Term()])
    before = [p.detach().clone() for p in strategy.model.parameters()]
    with pytest.raises(RuntimeError, match=r"_LeavesOut.criterion did not add the loss terms of "
                       r"\['_Term'\].*plus_terms_of"):  # fmt: skip
        _train(strategy, [_batch(2, seed=3)])
    assert all(torch.equal(p, b) for p, b in zip(strategy.model.parameters(), before))


def test_a_term_without_a_name_is_refused_with_the_fix():
    class Unnamed(EpisodicTemplate.PLUGIN_CLASS):
        def loss_term(self, strategy):
            return strategy.mb_output.mean()

    with pytest.raises(TypeError, match=r"Unnamed.loss_term returned a tensor.*no TERM.*fix"):
        _train(_strategy(EpisodicTemplate, [Unnamed()]), [_batch(2, seed=3)])


def test_order_names_its_terms_as_eq_10_then_adds_the_other_plugins():
    probe = _Term()
    strategy = OrderStrategy(
        model=PrototypicalModel(ConvBackbone(n_blocks=2, width=4, image_size=16),
                                refine="soft_kmeans"),
        use_replay=False, use_ot=False, plugins=[probe], evaluator=silent_evaluator(),
    )  # fmt: skip
    assert strategy.added_plugins == [probe]
    _train(strategy, [_batch(2, seed=3)])
    t = strategy.loss_terms
    assert probe.calls == 1 and list(t) == ["meta", "mi", "probe"]
    assert torch.equal(strategy.loss.detach().reshape(()), t["meta"] + t["mi"] + t["probe"])
