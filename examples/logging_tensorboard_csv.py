"""Log ORDER to TensorBoard, CSV and a text file with Avalanche's loggers and metrics.

python examples/logging_tensorboard_csv.py && tensorboard --logdir logs/tb
"""

from pathlib import Path

from avalanche.evaluation.metrics import accuracy_metrics, forgetting_metrics, loss_metrics
from avalanche.logging import CSVLogger, InteractiveLogger, TensorboardLogger, TextLogger
from avalanche.training.plugins import EvaluationPlugin

from avalanche_sets import OrderStrategy, run_sets, sets_benchmark
from avalanche_sets.metrics import episode_metrics
from avalanche_sets.models import cpu_backbone
from avalanche_sets.models.episodic import PrototypicalModel

logs = Path("logs")
logs.mkdir(exist_ok=True)
evaluator = EvaluationPlugin(
    # epoch=True: the training accuracy and loss (CSV's training_* columns are 0 without them)
    accuracy_metrics(epoch=True, experience=True, stream=True),
    loss_metrics(epoch=True, experience=True),
    forgetting_metrics(experience=True, stream=True),
    *episode_metrics(),  # episode accuracy ± 95% CI, accuracy matrix, OOD precision/recall/AUROC
    loggers=[
        InteractiveLogger(),
        TextLogger(open(logs / "log.txt", "w")),
        CSVLogger(log_folder=str(logs / "csv")),
        TensorboardLogger(tb_log_dir=str(logs / "tb")),
    ],
)
bench = sets_benchmark(
    "synthetic", domains=["shapes", "strokes", "gratings"], n_query=5, n_unlabeled=5, n_ood=20,
    tasks_per_domain=60, n_test_episodes=20,
)  # fmt: skip
model = PrototypicalModel(cpu_backbone(width=32), refine="soft_kmeans")
print(run_sets(OrderStrategy(model=model, evaluator=evaluator), bench).table())
