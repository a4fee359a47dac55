"""Baselines of the paper's Tables 2 and 3 on the shared episodic machinery.

Meta-learning (Table 2): :class:`ProtoNet`, :class:`ANIL`, :class:`MSKM`, :class:`TPN`,
:class:`LST`. Continual (Table 3, each the MSKM learner plus a mechanism): :class:`SemiSeq`,
:class:`SemiER`, :class:`SemiAGEM`, :class:`SemiGEM`, :class:`SemiMER`, :class:`SemiGPM`,
:class:`SemiDER`, and the stationary upper bound :class:`JointTraining` /
:func:`joint_benchmark`.
"""

from .continual import (
    JointTraining,
    SemiAGEM,
    SemiDER,
    SemiER,
    SemiGEM,
    SemiGPM,
    SemiMER,
    SemiSeq,
    mskm_model,
)
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
    "SemiSeq",
    "SemiER",
    "SemiAGEM",
    "SemiGEM",
    "SemiMER",
    "SemiGPM",
    "SemiDER",
    "JointTraining",
    "joint_benchmark",
    "mskm_model",
]
