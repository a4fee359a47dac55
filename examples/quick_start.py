"""Quick start: ORDER on the offline synthetic benchmark, evaluated after every domain.

python examples/quick_start.py [--out runs/quick_start]

Prints the stream, the per-domain accuracy table and the path of the accuracy-matrix heatmap it
writes (under ``--out``; ``runs/`` is git-ignored).
"""

import argparse
from pathlib import Path

import torch
from avalanche.training.plugins import EvaluationPlugin

from avalanche_sets import OrderStrategy, run_sets, sets_benchmark
from avalanche_sets.metrics import episode_metrics, plot_accuracy_matrix
from avalanche_sets.models import cpu_backbone
from avalanche_sets.models.episodic import PrototypicalModel
from avalanche_sets.training import DomainProgressLogger

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--out", type=Path, default=Path("runs/quick_start"), help="output folder")
parser.add_argument("--tasks-per-domain", type=int, default=100, help="training episodes")
parser.add_argument("--test-episodes", type=int, default=30, help="test episodes per domain")
args = parser.parse_args()

torch.manual_seed(0)
bench = sets_benchmark(
    "synthetic", n_way=5, n_shot=1, n_query=5, n_unlabeled=5, n_ood=20,
    tasks_per_domain=args.tasks_per_domain, n_test_episodes=args.test_episodes,
)  # fmt: skip
print(bench.describe())
# channels-last and precision="auto" (bf16 where the CPU runs it natively): the fast CPU set-up
backbone = cpu_backbone(image_size=32, width=32, channels_last=True, precision="auto")
model = PrototypicalModel(backbone, refine="soft_kmeans")
# one progress bar per domain instead of Avalanche's default metric printout
evaluator = EvaluationPlugin(*episode_metrics(), loggers=[DomainProgressLogger()])
strategy = OrderStrategy(model=model, lam=1e-5, beta=0.003, mem_size=200, evaluator=evaluator)
result = run_sets(strategy, bench)
print(result.table())
heatmap = plot_accuracy_matrix(
    result.matrix, result.domains, args.out / "accuracy_matrix.png",
    title="quick start (ORDER, seed 0): test accuracy (%) after each training domain",
)  # fmt: skip
print(f"accuracy matrix heatmap: {heatmap}")
