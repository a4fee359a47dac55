"""avalanche-sets: semi-supervised meta-learning on evolving task distributions for Avalanche.

Quick start::

    from avalanche_sets import OrderStrategy, sets_benchmark, run_sets
    bench = sets_benchmark("synthetic", n_shot=1, tasks_per_domain=200, n_test_episodes=50)
    result = run_sets(OrderStrategy(), bench)
    print(result.table())
"""

from ._lazy import lazy_names as _lazy_names

# The public names load on first use (PEP 562): ``import avalanche_sets.cli`` — the command
# line's start — must not pay for torch and Avalanche before it has parsed its arguments.
_LAZY = {
    "Domain": ".data",
    "EpisodeConfig": ".data",
    "EpisodeSampler": ".data",
    "sets_benchmark": ".data",
    "FeatureReservoirReplayPlugin": ".order",
    "MIRegularizationPlugin": ".order",
    "OODSplitPlugin": ".order",
    "OrderStrategy": ".order",
    "OTFeatureLossPlugin": ".order",
    "EpisodicTemplate": ".training",
    "RunResult": ".training",
    "load_checkpoint": ".training",
    "run_sets": ".training",
    "save_checkpoint": ".training",
}


__getattr__, __dir__ = _lazy_names(__name__, _LAZY)


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
