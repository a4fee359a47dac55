"""Quick start: ORDER on the offline synthetic benchmark, evaluated after every domain.

python examples/quick_start.py
"""

import torch

from avalanche_sets import OrderStrategy, run_sets, sets_benchmark
from avalanche_sets.metrics import plot_accuracy_matrix
from avalanche_sets.models import cpu_backbone
from avalanche_sets.models.episodic import PrototypicalModel

torch.manual_seed(0)
bench = sets_benchmark(
    "synthetic", n_way=5, n_shot=1, n_query=5, n_unlabeled=5, n_ood=20,
    tasks_per_domain=100, n_test_episodes=30,
)  # fmt: skip
print(bench.describe())
# channels-last and precision="auto" (bf16 where the CPU runs it natively): the fast CPU set-up
backbone = cpu_backbone(image_size=32, width=32, channels_last=True, precision="auto")
model = PrototypicalModel(backbone, refine="soft_kmeans")
strategy = OrderStrategy(model=model, lam=1e-5, beta=0.003, mem_size=200)
result = run_sets(strategy, bench)
print(result.table())
plot_accuracy_matrix(result.matrix, result.domains, "quick_start_matrix.png")
