"""ORDER (ECCV 2022): its objective (:mod:`.strategy`), its four plugins, and the interfaces of
its four replaceable parts (:mod:`.components`)."""

from ..functional.ood import OODSplit
from ..functional.reservoir import Reservoir
from .components import (
    MIBounds,
    OODDetector,
    OptimalTransport,
    PrototypeDistanceDetector,
    TransportLoss,
)
from .mi_regularization import MIRegularizationPlugin
from .ood_split import OODSplitPlugin
from .ot_loss import OTFeatureLossPlugin
from .replay import MEMORY_STORE_EVENT, FeatureReservoirReplayPlugin, MemoryTask, StoredTask
from .strategy import OrderStrategy

__all__ = [
    "MIBounds",
    "OODDetector",
    "OODSplit",
    "OptimalTransport",
    "PrototypeDistanceDetector",
    "Reservoir",
    "TransportLoss",
    "OODSplitPlugin",
    "MIRegularizationPlugin",
    "FeatureReservoirReplayPlugin",
    "MemoryTask",
    "StoredTask",
    "MEMORY_STORE_EVENT",
    "OTFeatureLossPlugin",
    "OrderStrategy",
]
