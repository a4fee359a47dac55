"""The package exports every baseline of Tables 2 and 3, each resolving to a real object."""

import avalanche_sets.baselines as baselines

CONTINUAL = (
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
)


def test_every_continual_baseline_is_exported():
    missing = [name for name in CONTINUAL if name not in baselines.__all__]
    assert not missing, f"not in avalanche_sets.baselines.__all__: {missing}"


def test_every_exported_name_resolves():
    assert len(set(baselines.__all__)) == len(baselines.__all__)
    for name in baselines.__all__:
        assert getattr(baselines, name) is not None
