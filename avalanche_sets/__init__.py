"""avalanche-sets: semi-supervised meta-learning on evolving task distributions for Avalanche.

Quick start::

    from avalanche_sets import OrderStrategy, sets_benchmark, run_sets
    bench = sets_benchmark("synthetic", n_shot=1, tasks_per_domain=200, n_test_episodes=50)
    result = run_sets(OrderStrategy(), bench)
    print(result.table())
"""

from .data import Domain, EpisodeConfig, EpisodeSampler, sets_benchmark
from .order import (
    FeatureReservoirReplayPlugin,
    MIRegularizationPlugin,
    OODSplitPlugin,
    OrderStrategy,
    OTFeatureLossPlugin,
)
from .training import EpisodicTemplate, RunResult, load_checkpoint, run_sets, save_checkpoint

__version__ = "0.1.0"

__all__ = [
    "Domain",
    "EpisodeConfig",
    "EpisodeSampler",
    "sets_benchmark",
    "EpisodicTemplate",
    "OrderStrategy",
    "OODSplitPlugin",
    "MIRegularizationPlugin",
    "FeatureReservoirReplayPlugin",
    "OTFeatureLossPlugin",
    "run_sets",
    "RunResult",
    "save_checkpoint",
    "load_checkpoint",
    "__version__",
]
