"""The device-side finite check of a fused optimiser: a bad step and every later one are skipped
on the device, and the error names the first bad iteration at the next check point.

With ``Adam(fused=True)`` (the CUDA default) the template flags non-finite loss terms,
gradients and support labels that break the ``N``-way contract on the device, makes the
optimiser skip the step (``optimizer.found_inf``, sticky), and ``check_deferred`` raises at the
next check point: every ``deferred_check_every`` iterations, at the domain's end, and before any
checkpoint is written. Here on the CPU, where fused Adam honours ``found_inf`` the same way.
"""

from __future__ import annotations

import collections
import contextlib
import sys
from pathlib import Path

import pytest
import torch
from avalanche.core import SupervisedPlugin
from avalanche.training.plugins import EvaluationPlugin

from avalanche_sets import run_sets
from avalanche_sets.methods import build_strategy
from avalanche_sets.runs.experiment import build_benchmark
from avalanche_sets.training import NonFiniteLossError, read_checkpoint

sys.path.insert(0, str(Path(__file__).parent))
from test_host_reads import MEASURED, PRESET  # noqa: E402

from benchmarks._sync_count import counting_host_syncs  # noqa: E402

torch.set_num_threads(1)

K = 3  #: the bad iteration (6 iterations in the domain)
N_ITER = 6


class _Watch(SupervisedPlugin):
    """The iterations that started, and the model's parameters at the start of each."""

    def __init__(self):
        super().__init__()
        self.started: list[int] = []
        self.params: dict[int, dict[str, torch.Tensor]] = {}

    def before_training_iteration(self, strategy, **kw):
        self.started.append(strategy.exp_iteration)
        self.params[strategy.exp_iteration] = _params(strategy)


class _NaNTerm(SupervisedPlugin):
    """A constant NaN loss term at iteration ``at`` (every gradient stays finite)."""

    TERM = "poison"

    def __init__(self, at: int):
        super().__init__()
        self.at = at

    def loss_term(self, strategy):
        return torch.tensor(float("nan")) if strategy.exp_iteration == self.at else None


class _InfGradient(SupervisedPlugin):
    """An infinite gradient of one backbone parameter at iteration ``at``."""

    def __init__(self, at: int):
        super().__init__()
        self.at = at

    def after_backward(self, strategy, **kw):
        if strategy.exp_iteration == self.at:
            next(strategy.model.parameters()).grad.fill_(float("inf"))


class _BadLabels(SupervisedPlugin):
    """Episode 0's support labels all 0 at iteration ``at``: class 1 has no support example."""

    def __init__(self, at: int):
        super().__init__()
        self.at = at

    def before_forward(self, strategy, **kw):
        if strategy.exp_iteration == self.at:
            strategy.mb_x.support_y[0] = 0


def _params(strategy) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in strategy.model.named_parameters()}


def _strategy(*plugins, fused: bool = True):
    watch = _Watch()
    s = build_strategy(
        "order", PRESET, seed=0, evaluator=EvaluationPlugin(), plugins=[watch, *plugins]
    )
    assert s.model.n_way == 2  # from the preset: labels checked on the device
    if fused:
        s.optimizer = torch.optim.Adam(s.model.parameters(), lr=1e-2, fused=True)
        assert s._skips_on_device()
    else:
        assert not s._skips_on_device()  # the CPU default
    return s, watch


def _assert_weights_of_iteration(strategy, watch, k: int) -> None:
    """The parameters are those after iteration ``k − 1`` (at the start of ``k``), and that
    step did move them (the steps before ``k`` were taken)."""
    now = _params(strategy)
    assert all(torch.equal(now[n], watch.params[k][n]) for n in now)
    assert any(not torch.equal(watch.params[k][n], watch.params[k - 1][n]) for n in now)
    steps = {float(st["step"]) for st in strategy.optimizer.state.values()}
    assert steps == {float(k)}, steps  # k steps taken (0..k-1), none after


@pytest.mark.parametrize(
    "poison, term", [(_NaNTerm, "poison"), (_InfGradient, "gradient")], ids=["term", "gradient"]
)
def test_a_bad_step_and_every_later_one_are_skipped_and_named_at_the_domain_end(poison, term):
    s, watch = _strategy(poison(K))
    bench = build_benchmark(PRESET, seed=0)
    with pytest.raises(
        NonFiniteLossError,
        match=rf"non-finite {term} at training domain 1, iteration {K} "
        r"\(skipped on the device\)",
    ) as info:
        s.train(bench.train_stream[0])
    assert info.value.term == term and info.value.iteration == K and info.value.experience == 0
    assert watch.started == list(range(N_ITER))  # nothing was read before the domain's end
    _assert_weights_of_iteration(s, watch, K)


def test_the_periodic_check_point_names_the_first_bad_iteration():
    s, watch = _strategy(_NaNTerm(2))
    s.deferred_check_every = 2  # reads after iterations 1, 3, 5
    bench = build_benchmark(PRESET, seed=0)
    with pytest.raises(NonFiniteLossError, match="non-finite poison at training domain 1, "
                       "iteration 2 ") as info:  # fmt: skip
        s.train(bench.train_stream[0])
    assert info.value.iteration == 2
    assert watch.started == [0, 1, 2, 3]  # raised at the check point after iteration 3
    _assert_weights_of_iteration(s, watch, 2)


def test_good_steps_pass_every_check_point():
    s, watch = _strategy()
    s.deferred_check_every = 2
    s.train(build_benchmark(PRESET, seed=0).train_stream[0])
    assert watch.started == list(range(N_ITER))
    steps = {float(st["step"]) for st in s.optimizer.state.values()}
    assert steps == {float(N_ITER)}


def test_no_checkpoint_is_written_after_the_bad_step(tmp_path):
    """A checkpoint due after the bad step reads the device-side check first and raises: the
    file on disk is the one written before it."""
    s, watch = _strategy(_NaNTerm(K))
    ckpt = tmp_path / "ckpt.pt"
    with pytest.raises(NonFiniteLossError, match=f"iteration {K} ") as info:
        run_sets(s, build_benchmark(PRESET, seed=0), checkpoint_path=ckpt, checkpoint_every=2)
    assert info.value.iteration == K
    assert watch.started == [0, 1, 2, 3]  # the checkpoint due after iteration 3 raised
    assert read_checkpoint(ckpt)["position"] == {"experience": 0, "iteration": 2}


def test_labels_that_break_the_n_way_contract_are_refused_at_the_check_point():
    s, watch = _strategy(_BadLabels(K))
    with pytest.raises(ValueError, match=rf"support labels at training domain 1, iteration "
                       rf"{K} break the model's 2-way contract"):  # fmt: skip
        s.train(build_benchmark(PRESET, seed=0).train_stream[0])
    assert watch.started == list(range(N_ITER))
    _assert_weights_of_iteration(s, watch, K)


def test_labels_that_break_the_n_way_contract_are_refused_at_once_on_the_host_path():
    s, watch = _strategy(_BadLabels(K), fused=False)
    with pytest.raises(ValueError, match="support"):
        s.train(build_benchmark(PRESET, seed=0).train_stream[0])
    assert watch.started == list(range(K + 1))  # raised in iteration K itself
    now = _params(s)
    assert all(torch.equal(now[n], watch.params[K][n]) for n in now)


def test_one_order_iteration_with_a_fused_optimiser_reads_nothing_in_the_template():
    """As tests/training/test_host_reads.py counts them (the whole iteration, from the
    template's ``_before_training_iteration`` to its ``_after_training_iteration``), with the
    fused optimiser: the finite check and the label check stay on the device."""
    s, _ = _strategy()
    stack = contextlib.ExitStack()
    counts: list[collections.Counter[str]] = []
    before, after = s._before_training_iteration, s._after_training_iteration

    def start(**kwargs):
        if s.exp_iteration == MEASURED:
            counts.append(stack.enter_context(counting_host_syncs()))
        return before(**kwargs)

    def stop(**kwargs):
        out = after(**kwargs)
        if s.exp_iteration == MEASURED + 1:
            assert s.iteration.replayed is not None, "the measured iteration replays"
            stack.close()
        return out

    s._before_training_iteration, s._after_training_iteration = start, stop
    s.train(build_benchmark(PRESET, seed=0).train_stream[0])
    assert len(counts) == 1 and sum(counts[0].values()) > 0  # the counter did count
    template = {k: v for k, v in counts[0].items() if "template.py" in k}
    assert not template, f"host reads in the template with a fused optimiser: {template}"
