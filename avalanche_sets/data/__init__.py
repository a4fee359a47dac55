"""Domains, episodes and SETS benchmarks (Avalanche scenarios).

Besides them: images and the ``.npz`` domain packs (:mod:`.images`, :mod:`.packs`), class
splits and stream folders of one's own data (:mod:`.splits`, :mod:`.stream_folder`), the
synthetic and the paper's datasets (:mod:`.synthetic`, :mod:`.paper`), public torchvision
datasets as packs (:mod:`.prepare`) and pictures of episodes (:mod:`.visualize`). Packs and
caches are written through the package's atomic file writer, :mod:`avalanche_sets.files`.

The names below load on first use (PEP 562), as the package's own: importing this package
loads no torch until a name is used.
"""

from typing import TYPE_CHECKING

from .. import _lazy_names

# The documentation (mkdocstrings reads the source, it does not import it) and type checkers
# see the names through these imports and the literal ``__all__``; ``_LAZY`` loads them.
if TYPE_CHECKING:
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

_LAZY = {
    "Domain": ".domain",
    "Episode": ".episodes",
    "EpisodeBatch": ".episodes",
    "EpisodeConfig": ".episodes",
    "EpisodeOracle": ".episodes",
    "EpisodeSampler": ".episodes",
    "EpisodeDraw": ".episodes",
    "DeviceEpisodeSampler": ".device_episodes",
    "DeviceImagePools": ".device_episodes",
    "collate_episodes": ".episodes",
    "EpisodeDataset": ".benchmark",
    "SETSBenchmark": ".benchmark",
    "SETSExperience": ".benchmark",
    "sets_benchmark": ".benchmark",
    "load_source": ".benchmark",
    "ORDER_PERMUTATIONS": ".benchmark",
}

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


__getattr__, __dir__ = _lazy_names(__name__, _LAZY)
