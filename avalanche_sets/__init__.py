"""avalanche-sets: semi-supervised meta-learning on evolving task distributions for Avalanche.

Quick start (the run ``avalanche-sets run --method order --preset quick --seeds 0`` makes)::

    from avalanche_sets import build_benchmark, build_strategy, run_sets
    bench = build_benchmark("quick", seed=0)
    strategy = build_strategy("order", "quick", seed=0)
    result = run_sets(strategy, bench)
    print(result.table())
"""

# private names: the package's namespace shows only its API (and ``dir()`` lists it)
import collections.abc as _abc
import importlib as _importlib
import typing as _typing


def _lazy_names(
    package: str, names: dict[str, str]
) -> tuple[_abc.Callable[[str], _typing.Any], _abc.Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` for ``names`` (name → submodule).

    A name is imported from its submodule (relative to ``package``) when first read, then
    cached in the package's namespace (PEP 562). This package, :mod:`.data`, :mod:`.runs`
    and :mod:`.training` load their names so, to keep importing them cheap.
    """
    namespace = vars(_importlib.import_module(package))

    def __getattr__(name: str) -> _typing.Any:
        if name in names:
            value = getattr(_importlib.import_module(names[name], package), name)
            namespace[name] = value
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*namespace, *names})

    return __getattr__, __dir__


# The public names load on first use: ``import avalanche_sets.cli`` — the command line's
# start — must not pay for torch and Avalanche before it has parsed its arguments.
_LAZY = {
    "Domain": ".data",
    "EpisodeConfig": ".data",
    "EpisodeSampler": ".data",
    "sets_benchmark": ".data",
    "build_strategy": ".methods",
    "build_benchmark": ".runs",
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
    "build_strategy",
    "build_benchmark",
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
