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

from ..defaults import MEM_SIZE, REPLAY_BATCH
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
from .tuned import default_options

# The defaults tuned on the validation stream, read from their one home (.tuned).
_AGEM = default_options("semi-agem")
_MER = default_options("semi-mer")
_GPM = default_options("semi-gpm")
_DER = default_options("semi-der")

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


class SemiSeq(EpisodicBaseline):
    """Semi-Seq: the MSKM learner (Ren et al., ICLR 2018) trained sequentially on the domains,
    without any mechanism against forgetting (the paper's "Seq" lower bound). Every other
    continual baseline is Semi-Seq with its mechanism's plugin (``cl_plugin``).

    It takes a whole model, no model options: its learner is the paper's MSKM learner, which
    :func:`~avalanche_sets.methods.build_strategy` builds on the preset's backbone.

    Args:
        model: an episodic model; default :func:`mskm_model` (4 blocks, 32 px).
        optimizer: default Adam(lr) (paper: Adam, 1e-3).
        lr: learning rate of the default optimiser.
        plugins: extra Avalanche plugins, after the mechanism's. Other keyword arguments go to
            :class:`~avalanche_sets.baselines.meta.EpisodicBaseline` (``train_mb_size`` —
            paper 2 —, ``evaluator``, ``device`` …).
    """

    def default_model(self) -> PrototypicalModel:
        """:func:`mskm_model`: the paper's MSKM learner."""
        return mskm_model()


class SemiER(SemiSeq):
    """Semi-ER: MSKM + experience replay (Chaudhry et al. 2019, "On Tiny Episodic Memories in
    Continual Learning") with Avalanche's ``ReplayPlugin`` and storage policies, through
    :class:`~avalanche_sets.baselines.plugins.EpisodicReplayPlugin`.

    Every meta-batch is ``train_mb_size`` current episodes plus ``replay_batch`` memory
    episodes (one :class:`EpisodeBatch`, one forward pass, the MSKM meta-loss on all). The
    memory (``mem_size`` tasks, default a reservoir — uniform over all tasks seen) is updated by
    Avalanche at each domain end, where the paper's ER updates its reservoir online; see the
    plugin for the consequences.

    Args:
        mem_size: memory in tasks (paper: 200). replay_batch: memory episodes per meta-batch.
        storage_policy: an Avalanche storage policy (default ``ReservoirSamplingBuffer``).
        seed: seed of the replay order. Others: as :class:`SemiSeq`.
    """

    def __init__(
        self,
        *,
        mem_size: int = MEM_SIZE,
        replay_batch: int = REPLAY_BATCH,
        storage_policy=None,
        seed: int = 0,
        **kwargs,
    ) -> None:
        plugin = EpisodicReplayPlugin(
            mem_size=mem_size, batch_size_mem=replay_batch, storage_policy=storage_policy, seed=seed
        )
        super().__init__(cl_plugin=plugin, **kwargs)


class SemiAGEM(SemiSeq):
    """Semi-A-GEM: MSKM + averaged gradient episodic memory (Chaudhry et al., ICLR 2019) with
    Avalanche's ``AGEMPlugin`` through
    :class:`~avalanche_sets.baselines.plugins.EpisodicAGEMPlugin`.

    The gradient of the current meta-batch is projected whenever it conflicts with the gradient
    of ``sample_size`` memory episodes (memory: ``mem_size`` tasks, balanced over the domains
    seen, updated at domain ends).

    Args:
        mem_size: memory in tasks (paper: 200). sample_size: episodes in the reference batch
            (default: :mod:`~avalanche_sets.baselines.tuned`).
        seed: seed of memory sampling. Others: as :class:`SemiSeq`.
    """

    def __init__(
        self,
        *,
        mem_size: int = MEM_SIZE,
        sample_size: int = _AGEM["sample_size"],
        seed: int = 0,
        **kwargs,
    ) -> None:
        plugin = EpisodicAGEMPlugin(mem_size=mem_size, sample_size=sample_size, seed=seed)
        super().__init__(cl_plugin=plugin, **kwargs)


class SemiGEM(SemiSeq):
    """Semi-GEM: MSKM + gradient episodic memory (Lopez-Paz & Ranzato, NeurIPS 2017) with
    Avalanche's ``GEMPlugin`` QP (``quadprog``) through
    :class:`~avalanche_sets.baselines.plugins.EpisodicGEMPlugin`.

    One constraint per past domain, its gradient estimated on ``constraint_batch`` memory
    episodes of that domain every iteration (``None``: the domain's whole memory, as GEM).

    Args:
        mem_size: memory in tasks (paper: 200). memory_strength: GEM's margin γ.
        constraint_batch: episodes per past domain per iteration. seed: sampling seed.
        Others: as :class:`SemiSeq`.
    """

    def __init__(
        self,
        *,
        mem_size: int = MEM_SIZE,
        memory_strength: float = 0.5,
        constraint_batch: int | None = 2,
        seed: int = 0,
        **kwargs,
    ) -> None:
        plugin = EpisodicGEMPlugin(
            mem_size=mem_size,
            memory_strength=memory_strength,
            constraint_batch=constraint_batch,
            seed=seed,
        )
        super().__init__(cl_plugin=plugin, **kwargs)


class SemiMER(SemiSeq):
    """Semi-MER: MSKM + meta-experience replay (Riemer et al., ICLR 2019) through
    :class:`~avalanche_sets.baselines.plugins.MERPlugin`.

    Overrides only ``training_epoch``: for each meta-batch, the iteration-level callbacks fire
    as usual, and the update in between is MER's — sequential one-episode steps over memory +
    current episodes, with within-batch (``beta``) and across-batch (``gamma``) Reptile
    interpolation; the memory is an online reservoir of ``mem_size`` tasks.

    Args:
        mem_size: memory in tasks (paper: 200). replay_batch: memory episodes per inner batch.
        n_batches: inner batches per iteration (MER's k). beta, gamma: Reptile rates (defaults
            tuned on the validation stream, MER's β = 0.3 one option away:
            :mod:`~avalanche_sets.baselines.tuned`).
        seed: seed of the reservoir. Others: as :class:`SemiSeq`.
    """

    def __init__(
        self,
        *,
        mem_size: int = MEM_SIZE,
        replay_batch: int = REPLAY_BATCH,
        n_batches: int = 1,
        beta: float = _MER["beta"],
        gamma: float = _MER["gamma"],
        seed: int = 0,
        **kwargs,
    ) -> None:
        plugin = MERPlugin(
            mem_size=mem_size,
            replay_batch=replay_batch,
            n_batches=n_batches,
            beta=beta,
            gamma=gamma,
            seed=seed,
        )
        super().__init__(cl_plugin=plugin, **kwargs)

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
    :class:`~avalanche_sets.baselines.plugins.GPMPlugin`.

    At each domain end the representation bases of every conv/linear layer are extended
    (energy threshold ``threshold + threshold_increment·t``); gradients are projected off
    them. The default optimiser is plain SGD (the update is then orthogonal to the bases,
    as in GPM); pass ``optimizer`` for another.

    Args:
        lr: SGD learning rate of the default optimiser.
        threshold, threshold_increment: GPM's energy threshold schedule (``threshold`` tuned on
            the validation stream, GPM's ε = 0.97 one option away:
            :mod:`~avalanche_sets.baselines.tuned`; +0.003 per domain).
        n_episodes: episodes of a finished domain forming its representation matrices.
        other_params: ``"freeze"`` (GPM's code: BatchNorm affine frozen after the first
            domain) or ``"train"``. seed: seed of the episode choice. Others: as
            :class:`SemiSeq`.
    """

    def __init__(
        self,
        *,
        lr: float = _GPM["lr"],
        threshold: float = _GPM["threshold"],
        threshold_increment: float = 0.003,
        n_episodes: int = 10,
        other_params: str = "freeze",
        seed: int = 0,
        **kwargs,
    ) -> None:
        plugin = GPMPlugin(
            threshold=threshold,
            threshold_increment=threshold_increment,
            n_episodes=n_episodes,
            other_params=other_params,
            seed=seed,
        )
        super().__init__(lr=lr, sgd=True, cl_plugin=plugin, **kwargs)


class SemiDER(SemiSeq):
    """Semi-DER: MSKM + dark experience replay++ (Buzzega et al., NeurIPS 2020; the paper's
    "DEGCL") through :class:`~avalanche_sets.baselines.plugins.DERPlugin`.

    Online reservoir memory of ``mem_size`` tasks with their query logits; loss
    ``L_meta + alpha·MSE(logits, stored logits) + beta·CE(memory queries)``.

    Args:
        mem_size: memory in tasks (paper: 200). replay_batch: memory episodes per term.
        alpha: logit-matching weight, tuned on the validation stream
            (:mod:`~avalanche_sets.baselines.tuned`: DER++'s 0.1 suits softmax logits; MSKM's
            are negative squared distances, and with 0.1 the logit term outweighed the task's
            own loss). beta: memory label weight (0: plain DER).
        seed: seed of the reservoir. Others: as :class:`SemiSeq`.
    """

    def __init__(
        self,
        *,
        mem_size: int = MEM_SIZE,
        replay_batch: int = REPLAY_BATCH,
        alpha: float = _DER["alpha"],
        beta: float = _DER["beta"],
        seed: int = 0,
        **kwargs,
    ) -> None:
        plugin = DERPlugin(
            mem_size=mem_size, replay_batch=replay_batch, alpha=alpha, beta=beta, seed=seed
        )
        super().__init__(cl_plugin=plugin, **kwargs)


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
