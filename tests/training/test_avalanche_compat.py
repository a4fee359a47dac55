"""The episodic template inside Avalanche's machinery: metrics, loggers and plugin callbacks.

A tiny SETS benchmark (random-array domains, 16 px, 2 domains, 6 training episodes each) is
trained and evaluated with Avalanche's standard metrics, the package's episode metrics and all
four stock loggers, while a recording plugin checks that every callback fires.
"""

from __future__ import annotations

import csv
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from avalanche.core import SupervisedPlugin
from avalanche.evaluation.metrics import (
    accuracy_metrics,
    bwt_metrics,
    cpu_usage_metrics,
    forgetting_metrics,
    loss_metrics,
    ram_usage_metrics,
    timing_metrics,
)
from avalanche.logging import CSVLogger, InteractiveLogger, TensorboardLogger, TextLogger
from avalanche.training.plugins import EvaluationPlugin

from avalanche_sets.data.benchmark import sets_benchmark
from avalanche_sets.data.domain import Domain
from avalanche_sets.metrics import AccuracyMatrix, EpisodeAccuracy, OODDetection, episode_metrics
from avalanche_sets.models.backbone import ConvBackbone
from avalanche_sets.models.episodic import PrototypicalModel
from avalanche_sets.training.template import EpisodicTemplate

N_WAY, N_SHOT, N_QUERY, N_UNLABELED, N_OOD = 5, 1, 2, 2, 4
TRAIN_MB = 2

# Every callback of the training and evaluation loops of an SGD template.
TRAIN_CALLBACKS = (
    "before_training",
    "before_training_exp",
    "before_train_dataset_adaptation",
    "after_train_dataset_adaptation",
    "before_training_epoch",
    "before_training_iteration",
    "before_forward",
    "after_forward",
    "before_backward",
    "after_backward",
    "after_training_iteration",
    "before_update",
    "after_update",
    "after_training_epoch",
    "after_training_exp",
    "after_training",
)
EVAL_CALLBACKS = (
    "before_eval",
    "before_eval_dataset_adaptation",
    "after_eval_dataset_adaptation",
    "before_eval_exp",
    "before_eval_iteration",
    "before_eval_forward",
    "after_eval_forward",
    "after_eval_iteration",
    "after_eval_exp",
    "after_eval",
)


def _domain(name: str, n_classes: int, per_class: int, seed: int, size: int = 16) -> Domain:
    rng = np.random.default_rng(seed)
    split = np.array(["train", "val", "test"] * (n_classes // 3))
    return Domain(
        name=name,
        images=rng.integers(0, 256, (n_classes * per_class, size, size, 3), dtype=np.uint8),
        labels=np.repeat(np.arange(n_classes), per_class),
        class_names=[f"{name}_{c}" for c in range(n_classes)],
        class_split=split,
    )


def _tiny_benchmark(n_domains: int = 2):
    ids = [_domain(f"dom{i}", 15, 10, seed=i) for i in range(n_domains)]
    oods = [_domain("ood", 6, 6, seed=99)]
    return sets_benchmark(
        loaded=(ids, oods),
        n_way=N_WAY,
        n_shot=N_SHOT,
        n_query=N_QUERY,
        n_unlabeled=N_UNLABELED,
        n_ood=N_OOD,
        tasks_per_domain=6,
        n_val_episodes=2,
        n_test_episodes=4,
        seed=0,
    )


def _model() -> PrototypicalModel:
    torch.manual_seed(0)
    return PrototypicalModel(ConvBackbone(n_blocks=2, width=8, image_size=16), refine="soft_kmeans")


class RecordingPlugin(SupervisedPlugin):
    """Records every callback; checks gradients after backward and meta-batch shapes."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []
        self.grad_checks = 0
        self.missing_grads: list[str] = []
        self.batch_shapes: list[tuple[int, int, int]] = []

    def after_backward(self, strategy, *args, **kwargs):
        self.calls.append("after_backward")
        self.grad_checks += 1
        for name, p in strategy.model.backbone.named_parameters():
            if p.requires_grad and p.grad is None:
                self.missing_grads.append(name)

    def after_forward(self, strategy, *args, **kwargs):
        self.calls.append("after_forward")
        self.batch_shapes.append(
            (len(strategy.mb_x), strategy.mb_output.shape[0], strategy.mb_output.shape[1])
        )


def _recorder(name):
    def callback(self, strategy, *args, **kwargs):
        self.calls.append(name)

    callback.__name__ = name
    return callback


# Override every callback, as Avalanche's own plugin tests do.
for _name in TRAIN_CALLBACKS + EVAL_CALLBACKS:
    if _name not in RecordingPlugin.__dict__:
        setattr(RecordingPlugin, _name, _recorder(_name))


class FakeOODSplit(SupervisedPlugin):
    """Stands in for ORDER's OOD split: nearest-prototype distance, median threshold."""

    def after_encode(self, strategy, *args, **kwargs):
        state = strategy.iteration.state
        d = torch.cdist(state.unlabeled_emb, state.prototypes).min(dim=-1).values.detach()
        thr = d.median(dim=1).values
        strategy.iteration.ood_split = SimpleNamespace(
            is_id=d <= thr[:, None], distances=d, threshold=thr
        )


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("compat")
    bench = _tiny_benchmark()
    model = _model()
    recorder = RecordingPlugin()
    text_file = open(tmp_path / "log.txt", "w")
    ep_metrics = episode_metrics()
    loggers = [
        InteractiveLogger(),
        TextLogger(text_file),
        CSVLogger(log_folder=tmp_path / "csv"),
        TensorboardLogger(tb_log_dir=tmp_path / "tb"),
    ]
    evaluator = EvaluationPlugin(
        accuracy_metrics(minibatch=True, epoch=True, experience=True, stream=True),
        loss_metrics(minibatch=True, epoch=True, experience=True, stream=True),
        forgetting_metrics(experience=True, stream=True),
        bwt_metrics(experience=True, stream=True),
        timing_metrics(epoch=True),
        cpu_usage_metrics(experience=True),
        ram_usage_metrics(every=0.5, experience=True),
        *ep_metrics,
        loggers=loggers,
    )
    strategy = EpisodicTemplate(
        model=model,
        optimizer=torch.optim.Adam(model.parameters(), lr=1e-3),
        train_mb_size=TRAIN_MB,
        eval_mb_size=2,
        evaluator=evaluator,
        plugins=[recorder, FakeOODSplit()],
    )
    eval_results = []
    for exp in bench.train_stream:
        strategy.train(exp)
        eval_results.append(strategy.eval(bench.test_stream))
    text_file.close()
    for logger in loggers:
        if hasattr(logger, "close"):
            logger.close()
    return SimpleNamespace(
        tmp_path=tmp_path,
        bench=bench,
        strategy=strategy,
        recorder=recorder,
        evaluator=evaluator,
        eval_results=eval_results,
        metrics=ep_metrics,
    )


def _read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def test_csv_logger_columns_are_filled(run):
    train_rows = _read_csv(run.tmp_path / "csv" / "training_results.csv")
    eval_rows = _read_csv(run.tmp_path / "csv" / "eval_results.csv")
    assert len(train_rows) == 2  # one epoch per experience
    assert len(eval_rows) == 2 * 2  # every test domain after each of the two experiences
    for row in train_rows:
        for col in ("training_accuracy", "training_loss"):
            # a float was logged (CSVLogger writes an int 0 when the metric is missing)
            assert _is_number(row[col]) and "." in row[col], (col, row)
    for row in eval_rows:
        for col in ("eval_accuracy", "eval_loss"):
            assert _is_number(row[col]) and "." in row[col], (col, row)
        assert _is_number(row["forgetting"])
    # forgetting of domain 0 after training on domain 1 is a real value
    assert any(r["eval_exp"] == "0" and r["training_exp"] == "1" and "." in r["forgetting"]
               for r in eval_rows)  # fmt: skip


def test_text_log_and_tensorboard(run):
    text = (run.tmp_path / "log.txt").read_text()
    assert "EpisodeAcc/eval_phase/test_stream/Exp000" in text
    assert "EpisodeAcc_CI95/eval_phase/test_stream" in text
    assert "AccMatrix" in text and "OOD_AUROC" in text
    events = list((run.tmp_path / "tb").rglob("events.out.tfevents.*"))
    assert events and all(e.stat().st_size > 0 for e in events)


def test_forgetting_and_bwt_emitted_for_second_experience(run):
    second = run.eval_results[1]
    assert any(k.startswith("ExperienceForgetting/eval_phase/test_stream") for k in second)
    assert any(k.startswith("ExperienceBWT/eval_phase/test_stream") for k in second)
    assert any(k.startswith("StreamForgetting/eval_phase/test_stream") for k in second)
    assert any(k.startswith("StreamBWT/eval_phase/test_stream") for k in second)
    assert "AccMatrix_BWT/eval_phase/test_stream" in second
    assert "AccMatrix_BWT/eval_phase/test_stream" not in run.eval_results[0]


def test_eval_results_hold_episode_metrics(run):
    res = run.eval_results[-1]
    for j in range(2):
        for name in ("EpisodeAcc", "EpisodeAcc_CI95", "AccMatrix", "OOD_Precision", "OOD_AUROC"):
            key = f"{name}/eval_phase/test_stream/Exp{j:03d}"
            assert key in res and math.isfinite(res[key]), key
    for name in ("EpisodeAcc", "EpisodeAcc_CI95", "OOD_Recall", "OOD_AUROC"):
        assert f"{name}/eval_phase/test_stream" in res
    # EpisodeAcc equals Avalanche's pooled accuracy (all episodes have N*Q queries)
    for j in range(2):
        top1 = res[f"Top1_Acc_Exp/eval_phase/test_stream/Exp{j:03d}"]
        assert res[f"EpisodeAcc/eval_phase/test_stream/Exp{j:03d}"] == pytest.approx(top1)


def test_programmatic_records(run):
    acc = next(m for m in run.metrics if isinstance(m, EpisodeAccuracy))
    mat = next(m for m in run.metrics if isinstance(m, AccuracyMatrix))
    ood = next(m for m in run.metrics if isinstance(m, OODDetection))
    assert set(acc.last_results) == {0, 1}
    mean, ci, n = acc.last_results[1][:3]
    assert n == 4 and acc.last_results[1].domain_name == "dom1"
    assert acc.last_episode_accuracies[1].shape == (4,)
    assert len(acc.history) == 2
    assert mat.matrix.shape == (2, 2) and np.isfinite(mat.matrix).all()
    assert mat.domain_names == ["dom0", "dom1"]
    assert mat.matrix[1, 1] == pytest.approx(acc.last_results[1].mean)
    assert set(ood.last_results) == {0, 1}
    assert ood.last_results[0].n_episodes == 4
    assert ood.last_results[0].n_unlabeled == 4 * (N_WAY * N_UNLABELED + N_OOD)


def test_every_callback_fires_and_backward_hooks_see_gradients(run):
    fired = set(run.recorder.calls)
    missing = [c for c in TRAIN_CALLBACKS + EVAL_CALLBACKS if c not in fired]
    assert not missing, missing
    n_iterations = 2 * (6 // TRAIN_MB)
    assert run.recorder.grad_checks == n_iterations
    assert not run.recorder.missing_grads, run.recorder.missing_grads
    params = [p for p in run.strategy.model.backbone.parameters() if p.requires_grad]
    assert params


def test_train_mb_size_counts_episodes(run):
    train_shapes = run.recorder.batch_shapes[:3]  # the first experience's iterations
    for b, rows, cols in train_shapes:
        assert b == TRAIN_MB
        assert rows == TRAIN_MB * N_WAY * N_QUERY and cols == N_WAY
