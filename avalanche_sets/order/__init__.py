"""ORDER (ECCV 2022) as Avalanche plugins and a strategy (their contract: :mod:`.contract`)."""

from .contract import check_partners, ood_split_of, replay_info_of
from .mi_regularization import MIRegularizationPlugin
from .ood_split import OODSplitPlugin, OODSplitResult
from .ot_loss import OTFeatureLossPlugin
from .replay import FeatureReservoirReplayPlugin, MemoryTask, ReplayInfo
from .strategy import OrderStrategy

__all__ = [
    "OODSplitPlugin",
    "OODSplitResult",
    "MIRegularizationPlugin",
    "FeatureReservoirReplayPlugin",
    "MemoryTask",
    "ReplayInfo",
    "ood_split_of",
    "replay_info_of",
    "check_partners",
    "OTFeatureLossPlugin",
    "OrderStrategy",
]
