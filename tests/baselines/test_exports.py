"""The package exports every baseline's strategy class (each built-in method's), each name
resolving to a real object."""

import avalanche_sets.baselines as baselines
from avalanche_sets.methods import builtin_methods, method_class


def test_every_built_in_baseline_is_exported():
    classes = [method_class(m) for m in builtin_methods()]
    strategies = [c.__name__ for c in classes if c.__module__.startswith(baselines.__name__)]
    assert len(strategies) == len(set(strategies)) >= 14
    missing = [name for name in strategies if name not in baselines.__all__]
    assert not missing, f"not in avalanche_sets.baselines.__all__: {missing}"
    assert {"joint_benchmark", "mskm_model"} <= set(baselines.__all__)


def test_every_exported_name_resolves():
    assert len(set(baselines.__all__)) == len(baselines.__all__)
    for name in baselines.__all__:
        assert getattr(baselines, name) is not None
