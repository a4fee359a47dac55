"""ORDER (ECCV 2022) as Avalanche plugins and a strategy (their contract: :mod:`.contract`)."""

from .contract import check_partners, current_rows, ood_split_of, replay_info_of
from .mi_regularization import MIRegularizationPlugin
from .ood_split import OODSplitPlugin, OODSplitResult
from .ot_loss import OTFeatureLossPlugin
from .replay import (
    MEMORY_STORE_EVENT,
    FeatureReservoirReplayPlugin,
    MemoryTask,
    ReplayInfo,
    StoredTask,
)
from .strategy import OrderStrategy

__all__ = [
    "OODSplitPlugin",
    "OODSplitResult",
    "MIRegularizationPlugin",
    "FeatureReservoirReplayPlugin",
    "MemoryTask",
    "ReplayInfo",
    "StoredTask",
    "MEMORY_STORE_EVENT",
    "ood_split_of",
    "replay_info_of",
    "current_rows",
    "check_partners",
    "OTFeatureLossPlugin",
    "OrderStrategy",
]
