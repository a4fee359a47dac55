"""The built-in methods: a table of their names and classes, in the order they are listed.

Each entry names a strategy class as ``"module:Class"``, imported only when the method is
built or checked: the command line lists and checks the names without loading torch. A test
imports every entry and checks that its class's :attr:`~avalanche_sets.method.Method.name` is
its key, and that every method class of the package is here.
"""

from __future__ import annotations

__all__ = ["BUILTIN_METHODS", "builtin_methods"]

#: name -> ``"module:Class"``: ORDER and its ablations, the meta-learners, the continual
#: baselines, joint training.
BUILTIN_METHODS: dict[str, str] = {
    "order": "avalanche_sets.order.strategy:OrderStrategy",
    "order-mi-only": "avalanche_sets.order.variants:OrderMIOnly",
    "order-ot-only": "avalanche_sets.order.variants:OrderOTOnly",
    "order-mi-id-only": "avalanche_sets.order.variants:OrderMIIdOnly",
    "order-mi-ood-only": "avalanche_sets.order.variants:OrderMIOodOnly",
    "order-no-ot": "avalanche_sets.order.variants:OrderNoOT",
    "order-ood-filter-only": "avalanche_sets.order.variants:OrderOODFilterOnly",
    "order-ot-support-only": "avalanche_sets.order.variants:OrderOTSupportOnly",
    "protonet": "avalanche_sets.baselines.meta:ProtoNet",
    "anil": "avalanche_sets.baselines.meta:ANIL",
    "mskm": "avalanche_sets.baselines.meta:MSKM",
    "lst": "avalanche_sets.baselines.lst:LST",
    "tpn": "avalanche_sets.baselines.tpn:TPN",
    "semi-seq": "avalanche_sets.baselines.continual:SemiSeq",
    "semi-er": "avalanche_sets.baselines.continual:SemiER",
    "semi-agem": "avalanche_sets.baselines.continual:SemiAGEM",
    "semi-gem": "avalanche_sets.baselines.continual:SemiGEM",
    "semi-mer": "avalanche_sets.baselines.continual:SemiMER",
    "semi-gpm": "avalanche_sets.baselines.continual:SemiGPM",
    "semi-der": "avalanche_sets.baselines.continual:SemiDER",
    "joint": "avalanche_sets.baselines.continual:JointTraining",
    "joint-matched": "avalanche_sets.baselines.continual:ComputeMatchedJoint",
}


def builtin_methods() -> tuple[str, ...]:
    """The built-in methods' names (ORDER's, the meta-learners, the continual baselines, joint
    training)."""
    return tuple(BUILTIN_METHODS)
