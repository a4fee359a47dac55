"""Pure building blocks of ORDER: squared distances, OT feature loss, MI bounds, OOD split, task
reservoir, and the Adam update a compiled training step traces.

These functions and small modules hold no training state of their own (except the variational
networks of :class:`MIEstimator` and the reservoir's RNG); the Avalanche plugins wrap them.
"""

from . import distance, fused_adam, mi, ood, ot, reservoir
from .distance import *  # noqa: F403
from .fused_adam import *  # noqa: F403
from .mi import *  # noqa: F403
from .ood import *  # noqa: F403
from .ot import *  # noqa: F403
from .reservoir import *  # noqa: F403

# every public name of the submodules (each module's __all__ is the one list of its names)
__all__ = [
    *distance.__all__,
    *fused_adam.__all__,
    *mi.__all__,
    *ood.__all__,
    *ot.__all__,
    *reservoir.__all__,
]
