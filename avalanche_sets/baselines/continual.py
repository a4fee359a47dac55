"""The continual-learning baselines of the paper's Table 3: MSKM + a continual mechanism.

Every baseline is the :class:`~avalanche_sets.training.EpisodicTemplate` with the MSKM learner
(:class:`~avalanche_sets.models.PrototypicalModel` with ``refine="mskm"``, Ren et al. 2018:
masked soft k-means over the unlabeled set, ID and OOD images alike) and one mechanism, as the
paper does ("we combine CL methods with MSKM", §5.2). Memory-based baselines keep at most
``mem_size = 200`` tasks (whole episodes, their R = 50 OOD images included); memory episodes
reach the learner without their ground truth, like current ones. All of them checkpoint and
resume with :func:`~avalanche_sets.training.save_checkpoint` /
:func:`~avalanche_sets.training.load_checkpoint`.

=================  ===================================================  ==================
strategy           mechanism                                            needs boundaries
=================  ===================================================  ==================
``SemiSeq``        none (sequential fine-tuning)                        no
``SemiER``         Avalanche ``ReplayPlugin`` + storage policy          yes (memory update)
``SemiAGEM``       Avalanche ``AGEMPlugin`` (episodic subclass)         yes (memory update)
``SemiGEM``        Avalanche ``GEMPlugin`` (episodic subclass)          yes (memory update)
``SemiMER``        :class:`MERPlugin` (Reptile within/across batches)   no
``SemiGPM``        :class:`GPMPlugin` (gradient projection)             yes (bases update)
``SemiDER``        :class:`DERPlugin` (DER++ logit + label replay)      no
``JointTraining``  none, on :func:`joint_benchmark` (upper bound)       —
``ComputeMatched   as ``JointTraining``, ``B + R`` tasks per iteration  —
Joint``            (ORDER's work per step)
=================  ===================================================  ==================
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from types import MappingProxyType
from typing import Any, ClassVar

from ..defaults import REPLAY_BATCH
from ..models.backbone import cpu_backbone
from ..models.episodic import PrototypicalModel
from .joint import joint_benchmark
from .meta import EpisodicBaseline
from .plugins import (
    DERPlugin,
    EpisodicAGEMPlugin,
    EpisodicGEMPlugin,
    EpisodicReplayPlugin,
    GPMPlugin,
    MERPlugin,
)

__all__ = [
    "SemiSeq",
    "SemiER",
    "SemiAGEM",
    "SemiGEM",
    "SemiMER",
    "SemiGPM",
    "SemiDER",
    "JointTraining",
    "ComputeMatchedJoint",
    "mskm_model",
]


def mskm_model(image_size: int = 32, width: int = 64) -> PrototypicalModel:
    """The MSKM learner every continual baseline builds when given no model (4-block CPU
    backbone): MSKM's default model."""
    return PrototypicalModel(cpu_backbone(image_size, width), refine="mskm")


def _plugin_parameters(plugin_class: type) -> list[inspect.Parameter]:
    params = inspect.signature(plugin_class).parameters.values()
    return [p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def _taking_plugin_options(cls: type) -> Callable[..., None]:
    """``cls.__init__`` that builds the class's plugin from the plugin's options it is given
    (the class's :attr:`~avalanche_sets.method.Method.tuned` ones among them: the class hands
    them over itself, :meth:`~avalanche_sets.method.Method.own_arguments`) and hands the
    rest to the constructor it wraps. Its signature names those options, read from the
    plugin's: they have one declaration, the plugin's, and Avalanche's check of a strategy's
    keyword arguments, ``help()`` and :func:`~avalanche_sets.methods.method_options` all see
    them."""
    init = cls.__init__
    names = [p.name for p in _plugin_parameters(cls.plugin_class)]

    def __init__(self, **kwargs: Any) -> None:
        if "cl_plugin" in kwargs:
            raise TypeError(
                f"{type(self).__name__} builds its own {cls.plugin_class.__name__}; fix: give "
                "its options instead of cl_plugin, or use SemiSeq(cl_plugin=...)"
            )
        options = {k: kwargs.pop(k) for k in names if k in kwargs}
        init(self, cl_plugin=cls.plugin_class(**options), **kwargs)

    params = [
        p.replace(kind=p.KEYWORD_ONLY, default=cls.tuned.get(p.name, p.default))
        for p in _plugin_parameters(cls.plugin_class)
    ]
    this = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    rest = inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD)
    __init__.__signature__ = inspect.Signature([this, *params, rest])
    try:  # the annotations as types (the plugin's module resolves their names)
        hints = typing.get_type_hints(cls.plugin_class.__init__)
    except Exception:  # a name only a type checker imports: left as the plugin wrote it
        hints = dict(cls.plugin_class.__init__.__annotations__)
    __init__.__annotations__ = {p.name: hints[p.name] for p in params if p.name in hints}
    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    __init__.__doc__ = init.__doc__
    return __init__


class SemiSeq(EpisodicBaseline):
    """Semi-Seq: the MSKM learner (Ren et al., ICLR 2018) trained sequentially on the domains,
    without any mechanism against forgetting (the paper's "Seq" lower bound). Every other
    continual baseline is Semi-Seq with its mechanism's plugin: a subclass names the plugin's
    class (:attr:`plugin_class`), whose keyword options are the strategy's own, declared once,
    by the plugin.

    It takes a whole model, no model options: its learner is the paper's MSKM learner, which
    :func:`~avalanche_sets.methods.build_strategy` builds on the preset's backbone.

    Args:
        model: an episodic model; default :func:`mskm_model` (4 blocks, 32 px).
        optimizer: default Adam(lr) (paper: Adam, 1e-3).
        lr: learning rate of the default optimiser.
        plugins: extra Avalanche plugins, after the mechanism's.
        **kwargs: the options of :attr:`plugin_class` (default: its tuned values,
            :attr:`~avalanche_sets.method.Method.tuned`, then the plugin's own), and those of
            :class:`~avalanche_sets.baselines.meta.EpisodicBaseline` (``train_mb_size`` — paper
            2 —, ``evaluator``, ``device`` …).

    Raises:
        TypeError: ``cl_plugin`` given to a subclass with a :attr:`plugin_class`: it builds its
            own.
    """

    name = "semi-seq"
    summary = "MSKM trained sequentially on the domains, with no mechanism against forgetting"

    #: The continual mechanism's plugin class (``None``: no mechanism); the strategy builds it
    #: from the plugin's keyword options it is given.
    plugin_class: ClassVar[type | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "plugin_class" in cls.__dict__ and cls.plugin_class is not None:
            cls.__init__ = _taking_plugin_options(cls)

    @classmethod
    def make_model(cls, config, backbone) -> PrototypicalModel:
        """The paper's MSKM learner on the preset's backbone (every continual baseline's)."""
        return PrototypicalModel(backbone, refine="mskm")

    def default_model(self) -> PrototypicalModel:
        """:func:`mskm_model`: the paper's MSKM learner."""
        return mskm_model()


class SemiER(SemiSeq):
    """Semi-ER: MSKM + experience replay (Chaudhry et al. 2019, "On Tiny Episodic Memories in
    Continual Learning") with Avalanche's ``ReplayPlugin`` and storage policies, through
    :class:`~avalanche_sets.baselines.plugins.EpisodicReplayPlugin` (its options: ``mem_size``,
    ``replay_batch``, ``storage_policy``, ``seed``).

    Every meta-batch is ``train_mb_size`` current episodes plus ``replay_batch`` memory
    episodes (one :class:`EpisodeBatch`, one forward pass, the MSKM meta-loss on all). The
    memory (``mem_size`` tasks, default a reservoir — uniform over all tasks seen) is updated by
    Avalanche at each domain end, where the paper's ER updates its reservoir online; see the
    plugin for the consequences.
    """

    name = "semi-er"
    summary = (
        "experience replay of whole episodes (Chaudhry et al. 2019) with Avalanche's "
        "ReplayPlugin and storage policies; memory of 200 tasks"
    )

    plugin_class = EpisodicReplayPlugin


class SemiAGEM(SemiSeq):
    """Semi-A-GEM: MSKM + averaged gradient episodic memory (Chaudhry et al., ICLR 2019) with
    Avalanche's ``AGEMPlugin`` through
    :class:`~avalanche_sets.baselines.plugins.EpisodicAGEMPlugin` (its options: ``mem_size``,
    ``sample_size``, ``seed``).

    The gradient of the current meta-batch is projected whenever it conflicts with the gradient
    of ``sample_size`` memory episodes (memory: ``mem_size`` tasks, balanced over the domains
    seen, updated at domain ends).
    """

    name = "semi-agem"
    summary = "A-GEM (Chaudhry et al. 2019) with Avalanche's AGEMPlugin; memory of 200 tasks"
    tuned = MappingProxyType({"sample_size": 2})

    plugin_class = EpisodicAGEMPlugin


class SemiGEM(SemiSeq):
    """Semi-GEM: MSKM + gradient episodic memory (Lopez-Paz & Ranzato, NeurIPS 2017) with
    Avalanche's ``GEMPlugin`` QP (``quadprog``) through
    :class:`~avalanche_sets.baselines.plugins.EpisodicGEMPlugin` (its options: ``mem_size``,
    ``memory_strength``, ``constraint_batch``, ``seed``).

    One constraint per past domain, its gradient estimated on ``constraint_batch`` memory
    episodes of that domain every iteration (``None``: the domain's whole memory, as GEM).
    """

    name = "semi-gem"
    summary = "GEM (Lopez-Paz & Ranzato 2017), its QP by quadprog; memory of 200 tasks"

    plugin_class = EpisodicGEMPlugin


class SemiMER(SemiSeq):
    """Semi-MER: MSKM + meta-experience replay (Riemer et al., ICLR 2019) through
    :class:`~avalanche_sets.baselines.plugins.MERPlugin` (its options: ``mem_size``,
    ``replay_batch``, ``n_batches``, the Reptile rates ``within_batch_rate`` (β) and
    ``across_batch_rate`` (γ), ``seed``).

    Overrides only ``training_epoch``: for each meta-batch, the iteration-level callbacks fire
    as usual, and the update in between is MER's — sequential one-episode steps over memory +
    current episodes, with within-batch (β) and across-batch (γ) Reptile interpolation; the memory is an online reservoir of ``mem_size`` tasks.
    """

    name = "semi-mer"
    summary = (
        "meta-experience replay (Riemer et al. 2019): Reptile within and across batches; "
        "reservoir of 200 tasks"
    )
    tuned = MappingProxyType({"within_batch_rate": 1.0, "across_batch_rate": 1.0})

    plugin_class = MERPlugin

    def training_epoch(self, **kwargs):
        for mbatch in self.dataloader:
            self.mbatch = mbatch
            if self._stop_training:
                break
            self._unpack_minibatch()
            self._before_training_iteration(**kwargs)
            self.cl_plugin.train_iteration(self, **kwargs)
            self._after_training_iteration(**kwargs)


class SemiGPM(SemiSeq):
    """Semi-GPM: MSKM + gradient projection memory (Saha et al., ICLR 2021) through
    :class:`~avalanche_sets.baselines.plugins.GPMPlugin` (its options: ``threshold``,
    ``threshold_increment``, ``n_episodes``, ``other_params``, ``image_chunk``, ``seed``).

    At each domain end the representation bases of every conv/linear layer are extended
    (energy threshold ``threshold + threshold_increment·t``); gradients are projected off
    them. The optimiser is plain SGD (the update is then orthogonal to the bases, as in GPM),
    its learning rate ``lr`` tuned (:attr:`~avalanche_sets.method.Method.tuned`); pass ``optimizer`` for another.
    """

    name = "semi-gpm"
    summary = (
        "gradient projection memory (Saha et al. 2021): gradients projected off each "
        "layer's bases of past domains, plain SGD"
    )
    tuned = MappingProxyType({"threshold": 0.9, "lr": 0.01})
    own_lr = (
        "it trains with its own SGD learning rate (GPM's update is orthogonal only with "
        "it); set it with --strategy-set lr=..."
    )

    plugin_class = GPMPlugin

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(sgd=True, **kwargs)


class SemiDER(SemiSeq):
    """Semi-DER: MSKM + dark experience replay++ (Buzzega et al., NeurIPS 2020; the paper's
    "DEGCL") through :class:`~avalanche_sets.baselines.plugins.DERPlugin` (its options:
    ``mem_size``, ``replay_batch``, the logit weight ``logit_weight`` (α), the label weight
    ``label_weight`` (β), ``seed``).

    Online reservoir memory of ``mem_size`` tasks with their query logits; loss
    ``L_meta + α·MSE(logits, stored logits) + β·CE(memory queries)``. ``logit_weight`` is tuned
    (:attr:`~avalanche_sets.method.Method.tuned`: DER++'s 0.1 suits softmax logits; MSKM's are negative squared
    distances, and with 0.1 the logit term outweighed the task's own loss).
    """

    name = "semi-der"
    summary = (
        "dark experience replay++ (Buzzega et al. 2020), the paper's DEGCL: logits and "
        "labels of a 200-task reservoir replayed"
    )
    tuned = MappingProxyType({"logit_weight": 0.001, "label_weight": 0.5})

    plugin_class = DERPlugin


class JointTraining(SemiSeq):
    """Joint offline training, the stationary upper bound (paper §5.2): the plain MSKM learner
    trained on the mixture of all domains.

    Train it on :meth:`training_benchmark` ``(bench)`` — :func:`~avalanche_sets.baselines.joint.joint_benchmark`:
    one training experience with every domain's training episodes in a seeded random order,
    the test stream unchanged — e.g. ``run_sets(JointTraining(), JointTraining.training_benchmark(bench, seed=0))``.
    Arguments as :class:`SemiSeq`.
    """

    name = "joint"
    summary = (
        "MSKM trained on all domains' tasks shuffled into one stationary stream: the upper bound"
    )

    @classmethod
    def training_benchmark(cls, benchmark, *, seed: int):
        """The joint version of a SETS benchmark (see :func:`joint_benchmark`), shuffled by
        ``seed``."""
        return joint_benchmark(benchmark, seed=seed)


class ComputeMatchedJoint(JointTraining):
    """Joint training that does ORDER's work per iteration: the upper bound at equal compute.

    ORDER trains every iteration on its meta-batch of ``B`` current tasks plus ``R``
    (``replay_batch``) tasks replayed from memory; plain :class:`JointTraining` trains on
    ``B``. This one trains on ``B + R`` tasks of the stationary mixture per iteration, for as
    many iterations as the sequential stream — so its benchmark needs ``(B + R) / B`` times the
    training tasks per domain, fresh episodes of the same domains (:meth:`training_config`
    gives the count; :func:`~avalanche_sets.runs.run_experiment` builds it so). Test episodes
    are the same as every other method's: an episode is drawn from ``(seed, domain, split,
    index)``, whatever the number of training tasks.

    Args:
        train_mb_size: ``B``, the meta-batch of the method it is matched to (paper: 2).
        replay_batch: ``R``, the tasks that method replays per iteration (default 2).
        Others as :class:`SemiSeq`.

    Raises:
        ValueError: ``train_mb_size`` < 1 or ``replay_batch`` < 0.
    """

    name = "joint-matched"
    summary = (
        "Joint at ORDER's work per iteration: B + R tasks of the mixture per step, as many "
        "steps, on (B + R) / B times the training tasks (fresh episodes; the test episodes are "
        "everyone's)"
    )

    def __init__(self, *, train_mb_size: int = 2, replay_batch: int = REPLAY_BATCH, **kwargs):
        if not isinstance(train_mb_size, int) or train_mb_size < 1:
            raise ValueError(f"train_mb_size must be a positive integer, got {train_mb_size!r}")
        if not isinstance(replay_batch, int) or replay_batch < 0:
            raise ValueError(
                f"replay_batch must be a non-negative number of tasks, got {replay_batch!r}"
            )
        self.replay_batch = replay_batch
        super().__init__(train_mb_size=train_mb_size + replay_batch, **kwargs)

    @staticmethod
    def tasks_per_domain(*, tasks_per_domain: int, meta_batch: int, replay_batch: int) -> int:
        """Training tasks per domain that give ``B + R`` tasks per iteration for as many
        iterations as ``tasks_per_domain / B``.

        Raises:
            ValueError: ``tasks_per_domain`` is not a multiple of ``meta_batch`` (the stream's
                own iteration count would not be whole).
        """
        if tasks_per_domain % meta_batch:
            raise ValueError(
                f"tasks_per_domain={tasks_per_domain} is not a multiple of meta_batch="
                f"{meta_batch}: the compute-matched joint run needs a whole number of "
                "iterations per domain; fix: make tasks_per_domain a multiple of meta_batch"
            )
        return tasks_per_domain // meta_batch * (meta_batch + replay_batch)

    @classmethod
    def training_config(cls, config):
        """``config`` with :meth:`tasks_per_domain` training tasks per domain: ``B + R`` tasks
        per iteration for as many iterations as ``config``'s stream.

        Raises:
            ValueError: as :meth:`tasks_per_domain`.
        """
        tasks = cls.tasks_per_domain(
            tasks_per_domain=config.tasks_per_domain,
            meta_batch=config.meta_batch,
            replay_batch=config.replay_batch,
        )
        return config.replace(tasks_per_domain=tasks)
