"""Pure building blocks of ORDER: OT feature loss, MI bounds, OOD split, task reservoir.

These functions and small modules hold no training state of their own (except the variational
networks of :class:`MIEstimator` and the reservoir's RNG); the Avalanche plugins wrap them.
"""

from .mi import (
    Critic,
    GaussianConditional,
    MIEstimator,
    club_upper_bound,
    nearest_prototype,
    pair_with_prototypes,
    tuba_lower_bound,
)
from .ood import OOD_RULES, OODSplit, prototypes_from_support, split_ood, split_ood_batched
from .ot import (
    CVXPYLAYERS_MAX_ENTRIES,
    OT_SOLVERS,
    check_solver,
    cost_matrix,
    cvxpylayers_plan,
    ot_loss,
    ot_plan,
    sinkhorn_log,
    subsample_pairs,
)
from .reservoir import Reservoir

__all__ = [
    # ot
    "OT_SOLVERS",
    "CVXPYLAYERS_MAX_ENTRIES",
    "check_solver",
    "cost_matrix",
    "ot_plan",
    "sinkhorn_log",
    "cvxpylayers_plan",
    "subsample_pairs",
    "ot_loss",
    # mi
    "GaussianConditional",
    "Critic",
    "club_upper_bound",
    "tuba_lower_bound",
    "nearest_prototype",
    "pair_with_prototypes",
    "MIEstimator",
    # ood
    "OOD_RULES",
    "OODSplit",
    "prototypes_from_support",
    "split_ood",
    "split_ood_batched",
    # reservoir
    "Reservoir",
]
