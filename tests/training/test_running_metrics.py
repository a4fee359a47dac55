"""The training metrics' running state (Avalanche's epoch accuracy and loss) is in the
checkpoint: a run resumed in the middle of a domain logs the epoch values of an uninterrupted
run, and what cannot be saved is named."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
import torch
from avalanche.evaluation import PluginMetric
from avalanche.evaluation.metrics import accuracy_metrics, loss_metrics
from avalanche.training.plugins import EvaluationPlugin

from avalanche_sets import run_sets
from avalanche_sets.methods import build_strategy
from avalanche_sets.runs.experiment import evaluator
from avalanche_sets.training import (
    CheckpointError,
    load_checkpoint,
    read_checkpoint,
    save_checkpoint,
)
from avalanche_sets.training.checkpoint import (
    restore_running_metrics,
    resume_note,
    running_metric_state,
)

sys.path.insert(0, str(Path(__file__).parent))
from tiny_order import PRESET, tiny_bench  # noqa: E402

torch.set_num_threads(1)

EPOCH = ("Top1_Acc_Epoch/train_phase/train_stream", "Loss_Epoch/train_phase/train_stream")


def _strategy(tmp_path, name: str):
    """ORDER with the run's own evaluator (every metric ``run`` logs), its log in memory."""
    folder = tmp_path / name
    folder.mkdir()
    ev = evaluator((), folder, log_file=io.StringIO())
    return build_strategy("order", PRESET, seed=0, evaluator=ev)


def _epoch_values(strategy) -> dict[str, dict[int, float]]:
    """``{metric: {step: value}}`` of the epoch metrics the evaluator logged."""
    every = strategy.evaluator.get_all_metrics()
    return {name: dict(zip(*every[name])) for name in EPOCH if name in every}


# 6 iterations a domain, checkpoints every 2: stopped in domain 0 at iteration 5 (checkpoint
# at 4), in domain 1 at its 3rd iteration (checkpoint at 8, its 2nd), or at its 1st (resumed
# at its start from the checkpoint after domain 0's evaluation: domain 0's means must not leak)
@pytest.mark.parametrize("stop_after", [5, 9, 7])
def test_a_resumed_run_logs_the_epoch_metrics_of_an_uninterrupted_run(tmp_path, stop_after):
    torch.manual_seed(0)
    ref = _strategy(tmp_path, "ref")
    run_sets(ref, tiny_bench())
    want = _epoch_values(ref)
    assert sorted(want) == sorted(EPOCH) and all(sorted(v) == [6, 12] for v in want.values())

    ckpt = tmp_path / "run.pt"
    torch.manual_seed(0)
    first = _strategy(tmp_path, "first")
    run_sets(first, tiny_bench(), checkpoint_path=ckpt, checkpoint_every=2, stop_after=stop_after)
    saved = read_checkpoint(ckpt)
    assert (saved["position"]["iteration"] == 0) == (stop_after == 7)
    state = saved["running_metrics"]
    assert state["unsaved"] == []
    # the epoch accuracy and loss (not Time_Epoch: wall time), each with iterations counted
    assert sorted(k.split(":")[1] for k in state["state"]) == ["EpochAccuracy", "EpochLoss"]
    assert all(next(iter(s.values()))["weight"] > 0 for s in state["state"].values()), (
        "the checkpoint's running means are empty"
    )

    resumed = _strategy(tmp_path, "resumed")  # a new process
    run_sets(resumed, tiny_bench(), checkpoint_path=ckpt, checkpoint_every=2)
    got = _epoch_values(resumed)
    resumed_domain = 6 * (saved["position"]["experience"] + 1)
    assert resumed_domain in got[EPOCH[0]]
    for name in EPOCH:
        assert got[name] == {s: v for s, v in want[name].items() if s in got[name]}, name


def test_the_running_state_round_trips_mid_epoch(tmp_path):
    """Saved in the middle of an epoch and put into a fresh evaluator after its reset, the
    epoch accuracy and loss hold what they held (per-task means included)."""
    torch.manual_seed(0)
    s = _strategy(tmp_path, "a")
    run_sets(s, tiny_bench(), stop_after=3)
    saved = running_metric_state(s)
    path = tmp_path / "c.pt"
    save_checkpoint(path, s, position={"experience": 0, "iteration": 3})
    assert read_checkpoint(path)["running_metrics"] == saved

    fresh = _strategy(tmp_path, "b")
    restore_running_metrics(fresh, read_checkpoint(path)["running_metrics"])

    def results(strategy):
        return [
            (type(m).__name__, m._metric.result())
            for m in strategy.evaluator.metrics
            if type(m).__name__ in ("EpochAccuracy", "EpochLoss")
        ]

    assert results(fresh) == results(s) and all(v > 0 for _, v in results(s))


def test_a_checkpoint_without_the_running_state_resumes_with_a_note(tmp_path):
    position = {"experience": 1, "iteration": 2}
    assert "cover only the iterations after the resume" in resume_note(
        {"position": position, "running_metrics": None}
    )
    assert (
        resume_note({"position": position, "running_metrics": {"state": {}, "unsaved": []}}) is None
    )
    # resumed at a domain's start: nothing of the domain's epoch was lost
    assert (
        resume_note({"position": {"experience": 1, "iteration": 0}, "running_metrics": None})
        is None
    )


class _Accumulating(PluginMetric[float]):
    """A metric of one's own that accumulates over training iterations, without a state_dict."""

    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def reset(self) -> None:
        self.n = 0

    def result(self) -> float:
        return float(self.n)

    def after_training_iteration(self, strategy):
        self.n += 1


def test_a_metric_whose_state_cannot_be_saved_is_named(tmp_path):
    s = build_strategy(
        "order", PRESET, seed=0,
        evaluator=EvaluationPlugin(accuracy_metrics(epoch=True), _Accumulating()),
    )  # fmt: skip
    state = running_metric_state(s)
    assert state["unsaved"] == ["metric1:_Accumulating (no state_dict())"]
    note = resume_note({"position": {"experience": 0, "iteration": 2}, "running_metrics": state})
    assert "metric1:_Accumulating" in note

    # an Avalanche metric whose running object holds something other than means is refused
    ev = EvaluationPlugin(loss_metrics(epoch=True))
    ev.metrics[0]._metric.other = object()
    s = build_strategy("order", PRESET, seed=0, evaluator=ev)
    with pytest.raises(CheckpointError, match=r"metric0:EpochLoss.*LossMetric\.other \(object\)"):
        save_checkpoint(tmp_path / "c.pt", s, position={"experience": 0, "iteration": 1})


def test_a_checkpoint_of_other_training_metrics_is_refused_by_name(tmp_path):
    def strategy(*metrics):
        return build_strategy("order", PRESET, seed=0, evaluator=EvaluationPlugin(*metrics))

    path = tmp_path / "c.pt"
    save_checkpoint(
        path, strategy(accuracy_metrics(epoch=True)), position={"experience": 0, "iteration": 1}
    )
    with pytest.raises(CheckpointError, match=r"training metrics \['metric0:EpochLoss'\] differ"):
        load_checkpoint(path, strategy(loss_metrics(epoch=True)))


def test_at_a_domain_start_only_the_metrics_never_reset_get_their_state_back():
    """Resumed at a domain's first iteration, an uninterrupted run has reset its epoch metrics
    (the previous domain's means must not leak in) but not a metric that is never reset."""
    from avalanche.evaluation.metric_definitions import GenericPluginMetric
    from avalanche.evaluation.metrics import Accuracy

    def strategy():
        never = GenericPluginMetric(Accuracy(), reset_at="never", emit_at="epoch", mode="train")
        ev = EvaluationPlugin(accuracy_metrics(epoch=True), never)
        return build_strategy("order", PRESET, seed=0, evaluator=ev)

    before = strategy()
    for m in before.evaluator.metrics:
        m._metric.update(torch.tensor([1, 0, 1]), torch.tensor([1, 1, 1]))
    saved = running_metric_state(before)
    after = strategy()
    restore_running_metrics(after, saved, domain_start=True)
    epoch, never = (m._metric.result() for m in after.evaluator.metrics)
    assert (epoch, never) == (0.0, pytest.approx(2 / 3))
