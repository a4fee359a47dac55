"""ORDER (ECCV 2022) as Avalanche plugins and a strategy."""

from .mi_regularization import MIRegularizationPlugin
from .ood_split import OODSplitPlugin, OODSplitResult
from .ot_loss import OTFeatureLossPlugin
from .replay import FeatureReservoirReplayPlugin, MemoryTask
from .strategy import OrderStrategy

__all__ = [
    "OODSplitPlugin",
    "OODSplitResult",
    "MIRegularizationPlugin",
    "FeatureReservoirReplayPlugin",
    "MemoryTask",
    "OTFeatureLossPlugin",
    "OrderStrategy",
]
