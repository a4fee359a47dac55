"""The package exports every baseline's strategy class (each declared method's), each name
resolving to a real object."""

import avalanche_sets.baselines as baselines
from avalanche_sets.methods import builtin_methods, method_spec


def test_every_declared_baseline_is_exported():
    declared = [method_spec(m) for m in builtin_methods()]
    strategies = [s.strategy for s in declared if s.module.startswith(baselines.__name__)]
    assert len(strategies) == len(set(strategies)) >= 14
    missing = [name for name in strategies if name not in baselines.__all__]
    assert not missing, f"not in avalanche_sets.baselines.__all__: {missing}"
    assert {"joint_benchmark", "mskm_model"} <= set(baselines.__all__)


def test_every_exported_name_resolves():
    assert len(set(baselines.__all__)) == len(baselines.__all__)
    for name in baselines.__all__:
        assert getattr(baselines, name) is not None
