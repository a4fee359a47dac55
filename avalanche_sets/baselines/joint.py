"""``joint_benchmark``: the stationary counterpart of a SETS benchmark (joint training).

Joint offline training is the paper's upper bound (§5.2): the learner sees all domains'
training tasks at once, as a stationary mixture, instead of one domain after the other.
"""

from __future__ import annotations

import numpy as np
from avalanche.benchmarks.scenarios.dataset_scenario import DatasetExperience
from avalanche.benchmarks.scenarios.generic_scenario import EagerCLStream

from ..data.benchmark import SETSBenchmark

__all__ = ["JointExperience", "joint_benchmark"]


class JointExperience(DatasetExperience):
    """The single training experience of a joint benchmark: every domain's episodes, shuffled.

    Attributes:
        domain_name: ``"joint"``.
        split: ``"train"``.
        domain_names: the domains mixed, in the original stream order.
        episode_domain: int array ``[n]``: the domain (index into ``domain_names``) of each
            episode of the dataset, in dataset order.
        episode_source: int array ``[n]``: its index in that domain's training experience.
    """

    def __init__(self, *, dataset, domain_names, episode_domain, episode_source) -> None:
        super().__init__(dataset=dataset, current_experience=0)
        self.domain_name = "joint"
        self.split = "train"
        self.task_label = 0
        self.domain_names = list(domain_names)
        self.episode_domain = np.asarray(episode_domain)
        self.episode_source = np.asarray(episode_source)

    def __repr__(self) -> str:
        return (
            f"JointExperience({len(self.domain_names)} domains {self.domain_names}, "
            f"{len(self.dataset)} episodes)"
        )


def joint_benchmark(bench: SETSBenchmark, *, seed: int = 0) -> SETSBenchmark:
    """The joint-training version of ``bench``: ONE training experience holding every domain's
    training episodes in a seeded random order; the validation and test streams unchanged.

    The learner therefore sees the stationary mixture of all task distributions (the same
    number of training episodes, hence iterations, as the sequential stream). Episodes are not
    copied: the experience's dataset is a shuffled subset of the concatenation of the domains'
    datasets, drawn on access like theirs.

    Args:
        bench: a SETS benchmark (``sets_benchmark(...)``).
        seed: seed of the shuffling permutation (deterministic).
    """
    train = list(bench.train_stream)
    if not train:
        raise ValueError("the benchmark has no training experiences to mix")
    data = train[0].dataset
    for exp in train[1:]:
        data = data.concat(exp.dataset)
    sizes = [len(exp.dataset) for exp in train]
    domain = np.repeat(np.arange(len(train)), sizes)
    source = np.concatenate([np.arange(n) for n in sizes])
    perm = np.random.default_rng(seed).permutation(len(domain))
    names = [getattr(exp, "domain_name", str(i)) for i, exp in enumerate(train)]
    joint = JointExperience(
        dataset=data.subset(perm.tolist()),
        domain_names=names,
        episode_domain=domain[perm],
        episode_source=source[perm],
    )
    streams = [EagerCLStream("train", [joint])]
    streams += [s for name, s in bench.streams.items() if name != "train"]
    return SETSBenchmark(
        streams,
        domains=bench.domains,
        ood_sources=bench.ood_sources,
        config=bench.config,
        seed=bench.seed,
        settings={**bench.settings, "joint": True, "joint_seed": int(seed)},
    )
