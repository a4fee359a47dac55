"""Domains, episodes and SETS benchmarks (Avalanche scenarios)."""

from .benchmark import (
    ORDER_PERMUTATIONS,
    EpisodeDataset,
    SETSBenchmark,
    SETSExperience,
    load_source,
    sets_benchmark,
)
from .device_episodes import DeviceEpisodeSampler, DeviceImagePools
from .domain import Domain
from .episodes import (
    Episode,
    EpisodeBatch,
    EpisodeConfig,
    EpisodeDraw,
    EpisodeOracle,
    EpisodeSampler,
    collate_episodes,
)

__all__ = [
    "Domain",
    "Episode",
    "EpisodeBatch",
    "EpisodeConfig",
    "EpisodeOracle",
    "EpisodeSampler",
    "EpisodeDraw",
    "DeviceEpisodeSampler",
    "DeviceImagePools",
    "collate_episodes",
    "EpisodeDataset",
    "SETSBenchmark",
    "SETSExperience",
    "sets_benchmark",
    "load_source",
    "ORDER_PERMUTATIONS",
]
