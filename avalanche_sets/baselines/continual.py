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
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, ClassVar

from ..defaults import REPLAY_BATCH
from ..method_spec import MethodSpec, PaperRow, Tuned
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
    (defaults: the class's :attr:`~SemiSeq.tuned_defaults`, then the plugin's) and hands the
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
        kwargs = {**cls.tuned_defaults, **kwargs}
        options = {k: kwargs.pop(k) for k in names if k in kwargs}
        init(self, cl_plugin=cls.plugin_class(**options), **kwargs)

    params = [
        p.replace(kind=p.KEYWORD_ONLY, default=cls.tuned_defaults.get(p.name, p.default))
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


SEMI_SEQ = MethodSpec(
    name="semi-seq",
    summary="MSKM trained sequentially on the domains, with no mechanism against forgetting",
    family="continual",
    strategy="SemiSeq",
    rows=(
        PaperRow("table3", 1, ((33.79, 1.05), (45.41, 0.58)), reference=True),
        PaperRow("order2", 7),
        PaperRow("order3", 7),
    ),
)


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
        **kwargs: the options of :attr:`plugin_class` (default: :attr:`tuned_defaults`, then
            the plugin's own), and those of
            :class:`~avalanche_sets.baselines.meta.EpisodicBaseline` (``train_mb_size`` — paper
            2 —, ``evaluator``, ``device`` …).

    Raises:
        TypeError: ``cl_plugin`` given to a subclass with a :attr:`plugin_class`: it builds its
            own.
    """

    #: The continual mechanism's plugin class (``None``: no mechanism); the strategy builds it
    #: from the plugin's keyword options it is given.
    plugin_class: ClassVar[type | None] = None
    #: The options the method's declaration tuned (:attr:`MethodSpec.tuned`): defaults of the
    #: strategy and its plugin that a keyword argument overrides.
    tuned_defaults: ClassVar[Mapping[str, Any]] = MappingProxyType({})

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "plugin_class" in cls.__dict__ and cls.plugin_class is not None:
            cls.__init__ = _taking_plugin_options(cls)

    @classmethod
    def plugin_option_names(cls) -> tuple[str, ...]:
        """The keyword options of :attr:`plugin_class` (none without one)."""
        if cls.plugin_class is None:
            return ()
        return tuple(p.name for p in _plugin_parameters(cls.plugin_class))

    def default_model(self) -> PrototypicalModel:
        """:func:`mskm_model`: the paper's MSKM learner."""
        return mskm_model()


SEMI_ER = MethodSpec(
    name="semi-er",
    summary="experience replay of whole episodes (Chaudhry et al. 2019) with Avalanche's "
    "ReplayPlugin and storage policies; memory of 200 tasks",
    family="continual",
    strategy="SemiER",
    rows=(
        PaperRow("table3", 2, ((37.62, 0.97), (50.35, 0.76))),
        PaperRow("order2", 8, ((39.05, 0.91), (51.28, 0.78))),
        PaperRow("order3", 8, ((38.87, 0.76), (52.75, 0.82))),
        PaperRow("ablation_components", 1, ((50.35, 0.76), (46.25, 0.91)), reference=True),
        PaperRow("ablation_mi", 1, ((50.35, 0.76), (46.25, 0.91)), reference=True),
        PaperRow("memory_size", 1),
    ),
)


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

    plugin_class = EpisodicReplayPlugin


SEMI_AGEM = MethodSpec(
    name="semi-agem",
    summary="A-GEM (Chaudhry et al. 2019) with Avalanche's AGEMPlugin; memory of 200 tasks",
    family="continual",
    strategy="SemiAGEM",
    tuned=Tuned(
        options={"sample_size": 2},
        grid=({"sample_size": 2}, {"sample_size": 4}, {"sample_size": 8}),
        preset="cpu",
        record="benchmarks/results/baseline_checks/tuning/chosen.json",
        why="memory batch 2, 4, 8: indistinguishable (|Δ| ≤ 0.03 ± 0.33), the default stays",
    ),
    rows=(
        PaperRow("table3", 3, ((36.97, 1.16), (50.29, 0.69))),
        PaperRow("order2", 9, ((39.48, 0.97), (51.51, 0.83))),
        PaperRow("order3", 9, ((39.29, 0.73), (52.97, 0.94))),
    ),
)


class SemiAGEM(SemiSeq):
    """Semi-A-GEM: MSKM + averaged gradient episodic memory (Chaudhry et al., ICLR 2019) with
    Avalanche's ``AGEMPlugin`` through
    :class:`~avalanche_sets.baselines.plugins.EpisodicAGEMPlugin` (its options: ``mem_size``,
    ``sample_size``, ``seed``).

    The gradient of the current meta-batch is projected whenever it conflicts with the gradient
    of ``sample_size`` memory episodes (memory: ``mem_size`` tasks, balanced over the domains
    seen, updated at domain ends).
    """

    plugin_class = EpisodicAGEMPlugin
    tuned_defaults = MappingProxyType(dict(SEMI_AGEM.tuned_options))


SEMI_GEM = MethodSpec(
    name="semi-gem",
    summary="GEM (Lopez-Paz & Ranzato 2017), its QP by quadprog; memory of 200 tasks",
    family="continual",
    strategy="SemiGEM",
    rows=(
        PaperRow("table3", 4),
        PaperRow("order2", 10),
        PaperRow("order3", 10),
    ),
)


class SemiGEM(SemiSeq):
    """Semi-GEM: MSKM + gradient episodic memory (Lopez-Paz & Ranzato, NeurIPS 2017) with
    Avalanche's ``GEMPlugin`` QP (``quadprog``) through
    :class:`~avalanche_sets.baselines.plugins.EpisodicGEMPlugin` (its options: ``mem_size``,
    ``memory_strength``, ``constraint_batch``, ``seed``).

    One constraint per past domain, its gradient estimated on ``constraint_batch`` memory
    episodes of that domain every iteration (``None``: the domain's whole memory, as GEM).
    """

    plugin_class = EpisodicGEMPlugin


SEMI_MER = MethodSpec(
    name="semi-mer",
    summary="meta-experience replay (Riemer et al. 2019): Reptile within and across batches; "
    "reservoir of 200 tasks",
    family="continual",
    strategy="SemiMER",
    tuned=Tuned(
        options={"within_batch_rate": 1.0, "across_batch_rate": 1.0},
        grid=(
            {"within_batch_rate": 0.3, "across_batch_rate": 1.0},
            {"within_batch_rate": 0.1, "across_batch_rate": 1.0},
            {"within_batch_rate": 1.0, "across_batch_rate": 1.0},
        ),
        preset="cpu",
        record="benchmarks/results/baseline_checks/tuning/chosen.json",
        why="β 1 (within-batch Reptile interpolation to the end point) instead of 0.3: +3.5 points",
    ),
    rows=(
        PaperRow("table3", 5, ((37.90, 0.83), (50.46, 0.74))),
        PaperRow("order2", 11, ((39.65, 0.82), (51.42, 0.68))),
        PaperRow("order3", 11, ((39.41, 0.68), (53.08, 0.87))),
    ),
)


class SemiMER(SemiSeq):
    """Semi-MER: MSKM + meta-experience replay (Riemer et al., ICLR 2019) through
    :class:`~avalanche_sets.baselines.plugins.MERPlugin` (its options: ``mem_size``,
    ``replay_batch``, ``n_batches``, the Reptile rates ``within_batch_rate`` (β) and
    ``across_batch_rate`` (γ), ``seed``).

    Overrides only ``training_epoch``: for each meta-batch, the iteration-level callbacks fire
    as usual, and the update in between is MER's — sequential one-episode steps over memory +
    current episodes, with within-batch (β) and across-batch (γ) Reptile interpolation; the memory is an online reservoir of ``mem_size`` tasks.
    """

    plugin_class = MERPlugin
    tuned_defaults = MappingProxyType(dict(SEMI_MER.tuned_options))

    def training_epoch(self, **kwargs):
        for mbatch in self.dataloader:
            self.mbatch = mbatch
            if self._stop_training:
                break
            self._unpack_minibatch()
            self._before_training_iteration(**kwargs)
            self.cl_plugin.train_iteration(self, **kwargs)
            self._after_training_iteration(**kwargs)


SEMI_GPM = MethodSpec(
    name="semi-gpm",
    summary="gradient projection memory (Saha et al. 2021): gradients projected off each "
    "layer's bases of past domains, plain SGD",
    family="continual",
    strategy="SemiGPM",
    tuned=Tuned(
        options={"threshold": 0.9, "lr": 0.01},
        grid=(
            {"threshold": 0.97, "lr": 0.01},
            {"threshold": 0.97, "lr": 0.1},
            {"threshold": 0.9, "lr": 0.1},
            {"threshold": 0.9, "lr": 0.01},
        ),
        preset="cpu",
        record="benchmarks/results/baseline_checks/tuning/chosen.json",
        why="ε 0.9 instead of GPM's 0.97: +5.7 points on the validation stream (SGD lr 0.1: worse)",
    ),
    rows=(
        PaperRow("table3", 6, ((36.53, 0.81), (49.78, 0.65))),
        PaperRow("order2", 12, ((38.89, 0.85), (51.03, 0.71))),
        PaperRow("order3", 12, ((39.09, 0.81), (52.83, 0.76))),
    ),
    own_lr="it trains with its own SGD learning rate (GPM's update is orthogonal only with "
    "it); set it with --strategy-set lr=...",
)


class SemiGPM(SemiSeq):
    """Semi-GPM: MSKM + gradient projection memory (Saha et al., ICLR 2021) through
    :class:`~avalanche_sets.baselines.plugins.GPMPlugin` (its options: ``threshold``,
    ``threshold_increment``, ``n_episodes``, ``other_params``, ``image_chunk``, ``seed``).

    At each domain end the representation bases of every conv/linear layer are extended
    (energy threshold ``threshold + threshold_increment·t``); gradients are projected off
    them. The optimiser is plain SGD (the update is then orthogonal to the bases, as in GPM),
    its learning rate ``lr`` tuned (:attr:`tuned_defaults`); pass ``optimizer`` for another.
    """

    plugin_class = GPMPlugin
    tuned_defaults = MappingProxyType(dict(SEMI_GPM.tuned_options))

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(sgd=True, **kwargs)


SEMI_DER = MethodSpec(
    name="semi-der",
    summary="dark experience replay++ (Buzzega et al. 2020), the paper's DEGCL: logits and "
    "labels of a 200-task reservoir replayed",
    family="continual",
    strategy="SemiDER",
    tuned=Tuned(
        options={"logit_weight": 0.001, "label_weight": 0.5},
        grid=(
            {"logit_weight": 0.1, "label_weight": 0.5},
            {"logit_weight": 0.01, "label_weight": 0.5},
            {"logit_weight": 0.001, "label_weight": 0.5},
        ),
        preset="cpu",
        record="benchmarks/results/baseline_checks/tuning/chosen.json",
        why="α 0.001 instead of 0.1: +12.8 points; DER++'s α suits softmax logits, MSKM's "
        "logits are negative squared distances and α·MSE outweighed the task's own loss",
    ),
    rows=(
        PaperRow("table3", 7, ((36.78, 0.89), (50.07, 0.61))),
        PaperRow("order2", 13, ((39.81, 0.73), (51.68, 0.62))),
        PaperRow("order3", 13, ((39.46, 0.77), (53.37, 0.73))),
        PaperRow("memory_size", 2),
    ),
)


class SemiDER(SemiSeq):
    """Semi-DER: MSKM + dark experience replay++ (Buzzega et al., NeurIPS 2020; the paper's
    "DEGCL") through :class:`~avalanche_sets.baselines.plugins.DERPlugin` (its options:
    ``mem_size``, ``replay_batch``, the logit weight ``logit_weight`` (α), the label weight
    ``label_weight`` (β), ``seed``).

    Online reservoir memory of ``mem_size`` tasks with their query logits; loss
    ``L_meta + α·MSE(logits, stored logits) + β·CE(memory queries)``. ``logit_weight`` is tuned
    (:attr:`tuned_defaults`: DER++'s 0.1 suits softmax logits; MSKM's are negative squared
    distances, and with 0.1 the logit term outweighed the task's own loss).
    """

    plugin_class = DERPlugin
    tuned_defaults = MappingProxyType(dict(SEMI_DER.tuned_options))


JOINT = MethodSpec(
    name="joint",
    summary="MSKM trained on all domains' tasks shuffled into one stationary stream: the "
    "upper bound",
    family="joint",
    strategy="JointTraining",
    rows=(PaperRow("table3", 10, ((49.91, 0.79), (61.78, 0.75))),),
)


class JointTraining(SemiSeq):
    """Joint offline training, the stationary upper bound (paper §5.2): the plain MSKM learner
    trained on the mixture of all domains.

    Train it on :meth:`benchmark` ``(bench)`` — :func:`~avalanche_sets.baselines.joint.joint_benchmark`:
    one training experience with every domain's training episodes in a seeded random order,
    the test stream unchanged — e.g. ``run_sets(JointTraining(), JointTraining.benchmark(bench))``.
    Arguments as :class:`SemiSeq`.
    """

    @staticmethod
    def benchmark(bench, *, seed: int = 0):
        """The joint version of a SETS benchmark (see :func:`joint_benchmark`)."""
        return joint_benchmark(bench, seed=seed)


JOINT_MATCHED = MethodSpec(
    name="joint-matched",
    summary="Joint at ORDER's work per iteration: B + R tasks of the mixture per step, as many "
    "steps, on (B + R) / B times the training tasks (fresh episodes; the test episodes are "
    "everyone's)",
    family="joint",
    strategy="ComputeMatchedJoint",
    compute_matched=True,
    rows=(PaperRow("table3", 11),),
)


class ComputeMatchedJoint(JointTraining):
    """Joint training that does ORDER's work per iteration: the upper bound at equal compute.

    ORDER trains every iteration on its meta-batch of ``B`` current tasks plus ``R``
    (``replay_batch``) tasks replayed from memory; plain :class:`JointTraining` trains on
    ``B``. This one trains on ``B + R`` tasks of the stationary mixture per iteration, for as
    many iterations as the sequential stream — so its benchmark needs ``(B + R) / B`` times the
    training tasks per domain, fresh episodes of the same domains (:meth:`tasks_per_domain`
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
