"""Baselines of the paper's Tables 2 and 3 on the shared episodic machinery.

Meta-learning (Table 2): :class:`ProtoNet`, :class:`ANIL`, :class:`MSKM`, :class:`TPN`,
:class:`LST`. Continual (Table 3, each the MSKM learner plus a mechanism): :class:`SemiSeq`,
:class:`SemiER`, :class:`SemiAGEM`, :class:`SemiGEM`, :class:`SemiMER`, :class:`SemiGPM`,
:class:`SemiDER`, and the stationary upper bound :class:`JointTraining` /
:func:`joint_benchmark`.
"""

# The continual baselines are exported as listed in ``continual.__all__`` (one list, not two).
from .continual import *  # noqa: F403
from .continual import __all__ as _continual_all
from .joint import joint_benchmark
from .lst import LST, LSTModel
from .meta import ANIL, MSKM, ANILModel, EpisodicBaseline, ProtoNet, ProtoNetModel
from .tpn import TPN, TPNModel

__all__ = [
    "EpisodicBaseline",
    "ProtoNet",
    "ProtoNetModel",
    "ANIL",
    "ANILModel",
    "MSKM",
    "TPN",
    "TPNModel",
    "LST",
    "LSTModel",
    *_continual_all,
    "joint_benchmark",
]
