"""ORDER (ECCV 2022): its objective (:mod:`.strategy`) and its four plugins."""

from .mi_regularization import MIRegularizationPlugin
from .ood_split import OODSplitPlugin
from .ot_loss import OTFeatureLossPlugin
from .replay import MEMORY_STORE_EVENT, FeatureReservoirReplayPlugin, MemoryTask, StoredTask
from .strategy import OrderStrategy

__all__ = [
    "OODSplitPlugin",
    "MIRegularizationPlugin",
    "FeatureReservoirReplayPlugin",
    "MemoryTask",
    "StoredTask",
    "MEMORY_STORE_EVENT",
    "OTFeatureLossPlugin",
    "OrderStrategy",
]
