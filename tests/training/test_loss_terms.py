"""``LossTerms``: the loss terms' means over intervals, recorded without a host sync."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from avalanche_sets.training.loss_terms import LOSS_TERM_PREFIX, LossTerms


def _strategy():
    return SimpleNamespace(clock=SimpleNamespace(train_iterations=0), loss_terms={})


def _iterate(metric: LossTerms, strategy, **terms: float):
    """One training iteration with ``terms``; the metric's values (the clock counts the
    iteration after the evaluator, as Avalanche's does)."""
    strategy.loss_terms = {k: torch.tensor(v) for k, v in terms.items()}
    out = metric.after_training_iteration(strategy)
    strategy.clock.train_iterations += 1
    return _values(out)


def _values(out) -> dict | None:
    if out is None:
        return None
    assert len({m.x_plot for m in out}) == 1
    return {"step": out[0].x_plot} | {m.name[len(LOSS_TERM_PREFIX) :]: m.value for m in out}


def test_each_term_is_averaged_over_the_iterations_that_had_it():
    metric, s = LossTerms(every=2), _strategy()
    assert _iterate(metric, s, meta=1.0) is None
    assert _iterate(metric, s, meta=2.0, ot=10.0) == {"step": 2, "meta": 1.5, "ot": 10.0}
    assert _iterate(metric, s, meta=4.0) is None
    # the domain ends after 3 iterations: its last interval is one iteration long
    assert _values(metric.after_training_epoch(s)) == {"step": 3, "meta": 4.0}
    assert metric.after_training_epoch(s) is None  # nothing left to log
    assert _iterate(metric, s, meta=6.0, spread=0.5) == {"step": 4, "meta": 6.0, "spread": 0.5}


def test_recording_reads_nothing_back_from_the_device_between_intervals(monkeypatch):
    """Between two logged means no term is converted to a Python number (on a GPU each would
    wait for the device); the interval's end reads all terms back at once."""
    metric, s = LossTerms(every=3), _strategy()
    reads = []

    def counted(name):
        real = getattr(torch.Tensor, name)

        def read(self, *args, **kwargs):
            reads.append(name)
            return real(self, *args, **kwargs)

        return read

    for name in ("item", "tolist", "__float__", "__bool__", "__int__"):
        monkeypatch.setattr(torch.Tensor, name, counted(name))
    terms = {k: torch.tensor(v) for k, v in {"meta": 1.0, "mi": -2.0, "ot": 3.0}.items()}
    for _ in range(2):
        s.loss_terms = terms
        assert metric.after_training_iteration(s) is None
        s.clock.train_iterations += 1
    assert reads == []
    s.loss_terms = terms
    out = metric.after_training_iteration(s)
    assert {m.name: m.value for m in out} == {
        LOSS_TERM_PREFIX + "meta": 1.0,
        LOSS_TERM_PREFIX + "mi": -2.0,
        LOSS_TERM_PREFIX + "ot": 3.0,
    }
    assert reads == ["tolist"]  # one transfer for the three terms


def test_a_checkpoint_continues_the_interval_it_was_written_in():
    metric, s = LossTerms(every=4), _strategy()
    _iterate(metric, s, meta=1.0)
    _iterate(metric, s, meta=2.0)
    resumed = LossTerms(every=4)
    resumed.load_state_dict(metric.state_dict())
    for m in (metric, resumed):
        clock = s.clock.train_iterations
        assert _iterate(m, s, meta=3.0) is None
        assert _iterate(m, s, meta=6.0) == {"step": 4, "meta": 3.0}
        s.clock.train_iterations = clock


@pytest.mark.parametrize("every", [0, -1, 2.5, True, "10"])
def test_an_interval_that_is_not_a_positive_count_is_refused(every):
    with pytest.raises(ValueError, match="log_every .* positive integer.*fix: e.g. --log-every"):
        LossTerms(every=every)
