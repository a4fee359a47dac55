"""Run ORDER's component ablation (paper appendix) on a small synthetic benchmark.

Ablations are constructor switches of OrderStrategy — or method names of the command line:
    avalanche-sets sweep --methods order order-mi-only order-ot-only order-ood-filter-only
"""

from avalanche_sets import OrderStrategy, run_sets, sets_benchmark
from avalanche_sets.methods import build_strategy
from avalanche_sets.presets import resolve_preset

preset = resolve_preset("quick", tasks_per_domain=60, n_test_episodes=20)
bench = sets_benchmark(
    "synthetic", domains=["shapes", "strokes", "gratings"], n_query=5, n_unlabeled=5, n_ood=20,
    tasks_per_domain=60, n_test_episodes=20,
)  # fmt: skip
for name in ("order", "order-mi-only", "order-ot-only", "order-ood-filter-only"):
    strategy = build_strategy(name, preset, seed=0)
    assert isinstance(strategy, OrderStrategy)
    res = run_sets(strategy, bench)
    print(f"{name:<24} {100 * res.mean_accuracy:.2f} ± {100 * res.mean_ci95:.2f}")
