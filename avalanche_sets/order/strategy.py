"""``OrderStrategy``: ORDER's objective (paper Eq. 10), assembled from its four plugins."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Literal

import torch
import torch.nn.functional as F

from ..defaults import MEM_SIZE, REPLAY_BATCH, check_mem_size
from ..functional.ot import check_solver
from ..functional.reservoir import Reservoir
from ..method import Method
from ..models.backbone import cpu_backbone
from ..models.episodic import PrototypicalModel
from ..training.cuda_settings import default_adam
from ..training.template import EpisodicTemplate
from .components import MIBounds, OODDetector, TransportLoss, refuse_replaced
from .mi_regularization import MIRegularizationPlugin
from .ood_split import OODSplitPlugin
from .ot_loss import OTFeatureLossPlugin
from .replay import FeatureReservoirReplayPlugin

__all__ = ["OrderStrategy"]


def _is_plain_cross_entropy(criterion) -> bool:
    """Whether ``criterion`` is the default mean cross-entropy (no weights, no smoothing)."""
    return (
        type(criterion) is torch.nn.CrossEntropyLoss
        and criterion.weight is None
        and criterion.reduction == "mean"
        and criterion.label_smoothing == 0.0
        and criterion.ignore_index == -100
    )


#: Each part of ORDER's that a constructor argument replaces: the switch of its component, what
#: it is, and the options only its default reads.
_PARTS = {
    "ood_detector": ("use_ood_split", "OOD detector", ("ood_k", "ood_rule", "ood_n_id")),
    "mi_estimator": ("use_mi", "MI estimator", ()),
    "memory": ("use_replay", "memory", ()),
    "transport": ("use_ot", "transport loss", ("ot_solver", "ot_max_points")),
}


def _check_arguments(owner: str, arguments: Mapping[str, Any]) -> None:
    """Refuse bad settings before anything is built (``arguments``: the constructor's, by name):
    λ, the solver, the MI terms, switches that need another, the memory's size, a part given
    for a component switched off, an option only the default of a replaced part reads."""
    a = arguments
    if not a["lam"] >= 0:
        raise ValueError(f"lam (λ) must be >= 0, got {a['lam']}")
    check_solver(a["ot_solver"])
    if set(a["mi_terms"]) - {"id", "ood"} or not a["mi_terms"]:
        raise ValueError(
            f"mi_terms must be a non-empty subset of ('id', 'ood'), got {a['mi_terms']}"
        )
    if a["use_mi"] and not a["use_ood_split"]:
        raise ValueError("use_mi=True needs use_ood_split=True (MI separates U_id from U_ood)")
    if a["use_ot"] and not a["use_replay"]:
        raise ValueError("use_ot=True needs use_replay=True (OT regularises replayed tasks)")
    if a["use_replay"]:
        check_mem_size(a["mem_size"], when=" when replay is on")
    for part, (switch, what, read) in _PARTS.items():
        if a[part] is None:
            continue
        if not a[switch]:
            raise ValueError(
                f"{part} was given but {owner} runs with {switch}=False, so it would never "
                f"run; fix: drop {part}, or use a method with {switch}=True"
            )
        refuse_replaced(what, a[part], {k: a[k] for k in read}, OrderStrategy.__init__)


class OrderStrategy(Method, EpisodicTemplate):
    """ORDER (Wang et al., ECCV 2022): OOD-robust, knowledge-preserving semi-supervised meta-learning.

    It minimises the objective of paper Eq. 10 on every meta-batch,

        ``H(θ) = Σ_{T ∈ meta-batch ∪ B} [ L_meta(T) + λ (I_ood(T) − I_id(T)) ] + β L_OT``

    read literally: every task of the meta-batch — the ``train_mb_size`` current tasks ``T_t``
    (the paper's meta-batch of 2) and the replayed memory tasks ``T_i ∈ B`` — adds its own
    ``L_total(T) = L_meta(T) + λ(I_ood(T) − I_id(T))`` (Eq. 8; ``L_meta`` is the mean
    cross-entropy over that task's queries), and ``β L_OT`` (Eq. 9) is added once. So β weighs
    the OT term against *one* task's loss, as λ weighs the MI term, whatever the number of tasks.
    :meth:`criterion` assembles ``H`` term by term. Four plugins, each usable on its own, do the
    work; they hand each other typed values through ``strategy.iteration``
    (:class:`~avalanche_sets.training.iteration.Iteration`):

    ========================================  =====================================================
    plugin                                     role in one training iteration
    ========================================  =====================================================
    :class:`FeatureReservoirReplayPlugin`      draws ``B`` from the memory
                                               (``iteration.replay``: appended after ``T_t``);
                                               stores the current tasks with their ``S ∪ U_id``
                                               features afterwards
    :class:`OODSplitPlugin` (Algorithm 1)      splits each unlabeled set into ``U_id`` / ``U_ood``
                                               (``iteration.ood_split``); the prototypes' soft
                                               k-means refinement then uses ``U_id`` only
    :class:`MIRegularizationPlugin`            ``λ Σ_T (I_ood(T) − I_id(T))`` (Theorems 1, 3)
    :class:`OTFeatureLossPlugin`               ``β L_OT`` between current and stored features
                                               of the replayed tasks (``iteration.replayed``)
    ========================================  =====================================================

    It needs no domain boundaries: nothing happens at experience ends.

    Every component can be switched off, which gives the paper's ablations:
    ``use_mi=False`` ("OT only"), ``use_replay=False`` ("MI only", no memory, no OT),
    ``use_ot=False`` (replay without OT), ``ot_unlabeled=False`` (OT on support features only),
    ``mi_terms=("id",)`` / ``("ood",)`` (one MI term), ``use_mi=False, use_replay=False``
    ("OOD filtering only"), and ``use_ood_split=False`` (plain soft k-means on all unlabeled
    data; MI then has no split and must be off).

    Every component can be replaced, to test an idea on one part and keep the rest of ORDER:
    ``ood_detector``, ``mi_estimator``, ``memory`` and ``transport`` take your own
    (:mod:`avalanche_sets.order.components` says what each takes and gives). The options only
    the replaced default reads (``ood_k``, ``ood_rule``, ``ood_n_id``; ``ot_solver``,
    ``ot_max_points``) are then refused when set, and a part given for a component switched
    off is refused.

    Args:
        model: an episodic model with ``encode``/``classify``; default: a
            :class:`PrototypicalModel` with soft k-means refinement on the 4-block CPU backbone.
            With the OOD split on, its refinement must honour ``unlabeled_weight``
            (``refine="soft_kmeans"``); a model declaring ``uses_unlabeled_weight = False``
            (``refine="none"`` or ``"mskm"``) is refused, since ``U_ood`` would still reach it.
        optimizer: default Adam(lr) over the model's parameters.
        lr: learning rate of the default optimiser (paper: 1e-3).
        lam: λ of the MI term (paper: 1e-5). beta: β of the OT term (paper: 0.003).
        mem_size: memory capacity in tasks (paper: 200). replay_batch: tasks replayed per step.
        ot_solver: ``"exact"`` (default), ``"sinkhorn"`` or ``"cvxpylayers"`` (paper).
        ot_max_points: G, at most this many feature pairs per step.
        ood_k: threshold in standard deviations (paper: 1). ood_rule: ``"threshold"`` or
            ``"topk"`` (the authors' code, needs ``ood_n_id``).
        seed: seed of the plugins' own randomness (reservoir, replay, OT sub-sampling, MI nets).
        ood_detector: the OOD split (an
            :class:`~avalanche_sets.order.components.OODDetector`); default the paper's
            ``PrototypeDistanceDetector(k=ood_k, rule=ood_rule, n_id=ood_n_id)``.
        mi_estimator: ``(dim, device) -> MIBounds``, the MI terms' estimator; default the
            paper's :class:`~avalanche_sets.functional.mi.MIEstimator`.
        memory: ``(capacity, seed=...) -> Reservoir``, the memory and its policy; default
            :class:`~avalanche_sets.functional.reservoir.Reservoir` (Algorithm R).
        transport: the transport loss (a
            :class:`~avalanche_sets.order.components.TransportLoss`); default the paper's
            ``OptimalTransport(solver=ot_solver, max_points=ot_max_points)``.
        train_mb_size: episodes per meta-batch (paper: 2). Other keyword arguments go to
            :class:`EpisodicTemplate` (``evaluator``, ``plugins``, ``device``, ...).
    """

    name = "order"
    summary = "ORDER: OOD split + MI regularisation + reservoir replay + OT on replayed tasks"

    #: The options that act only while one of its components is on (``use_*``): an option of a
    #: component switched off is refused, not ignored
    #: (:func:`~avalanche_sets.methods.check_method`).
    component_options: ClassVar[dict[str, tuple[str, ...]]] = {
        "use_mi": ("lam", "mi_terms"),
        "use_ood_split": ("ood_k", "ood_rule", "ood_n_id"),
        "use_replay": ("mem_size", "replay_batch"),
        "use_ot": ("beta", "ot_solver", "ot_max_points", "ot_unlabeled"),
    }

    def __init__(
        self,
        *,
        model: torch.nn.Module | None = None,
        optimizer: torch.optim.Optimizer | None = None,
        lr: float = 1e-3,
        lam: float = 1e-5,
        beta: float = 0.003,
        mem_size: int = MEM_SIZE,
        replay_batch: int = REPLAY_BATCH,
        ot_solver: Literal["exact", "sinkhorn", "cvxpylayers"] = "exact",
        ot_max_points: int | None = 250,
        ood_k: float = 1.0,
        ood_rule: Literal["threshold", "topk"] = "threshold",
        ood_n_id: int | None = None,
        use_ood_split: bool = True,
        use_mi: bool = True,
        mi_terms: Sequence[Literal["id", "ood"]] = ("id", "ood"),
        use_replay: bool = True,
        use_ot: bool = True,
        ot_unlabeled: bool = True,
        seed: int = 0,
        ood_detector: OODDetector | None = None,
        mi_estimator: Callable[[int, torch.device], MIBounds] | None = None,
        memory: Callable[..., Reservoir] | None = None,
        transport: TransportLoss | None = None,
        train_mb_size: int = 2,
        plugins: Sequence | None = None,
        **kwargs,
    ) -> None:
        # Validate everything before building anything (bad settings fail at construction).
        _check_arguments(type(self).__name__, locals())
        if model is None:
            model = PrototypicalModel(cpu_backbone(), refine="soft_kmeans")
        if not (hasattr(model, "encode") and hasattr(model, "classify")):
            raise ValueError("OrderStrategy needs a model with encode() and classify()")
        if use_ood_split and getattr(model, "uses_unlabeled_weight", True) is False:
            refine = getattr(model, "refine", None)
            raise ValueError(
                "the OOD split needs a head that weights the unlabeled images by it, but the "
                f"model's refinement{f' (refine={refine!r})' if refine else ''} ignores "
                "unlabeled_weight, so U_ood would not be filtered out of the prototypes; fix: "
                "use PrototypicalModel(..., refine='soft_kmeans'), or turn the split off with "
                "use_ood_split=False, use_mi=False"
            )
        if optimizer is None:
            optimizer = default_adam(model.parameters(), lr=lr, device=kwargs.get("device"))

        # ORDER's components, None when switched off; their order is the plugins' order.
        self.replay = (
            FeatureReservoirReplayPlugin(
                mem_size=mem_size,
                replay_batch=replay_batch,
                store_unlabeled_features=ot_unlabeled,
                seed=seed,
                memory=memory,
            )
            if use_replay
            else None
        )
        self.ood_split = (
            OODSplitPlugin(detector=ood_detector, k=ood_k, rule=ood_rule, n_id=ood_n_id)
            if use_ood_split
            else None
        )
        self.mi = (
            MIRegularizationPlugin(
                lam=lam,
                use_id="id" in mi_terms,
                use_ood="ood" in mi_terms,
                seed=seed,
                reduction="sum",  # one λ(I_ood − I_id) per task, as the meta loss below
                estimator=mi_estimator,
            )
            if use_mi
            else None
        )
        self.ot = (
            OTFeatureLossPlugin(
                beta=beta,
                solver=ot_solver,
                max_points=ot_max_points,
                seed=seed,
                transport=transport,
            )  # fmt: skip
            if use_ot
            else None
        )
        self.order_plugins = [
            p for p in (self.replay, self.ood_split, self.mi, self.ot) if p is not None
        ]
        self.added_plugins = list(plugins or [])
        """The plugins given besides ORDER's own (their loss terms follow Eq. 10's)."""
        super().__init__(
            model=model,
            optimizer=optimizer,
            train_mb_size=train_mb_size,
            plugins=[*self.order_plugins, *self.added_plugins],
            **kwargs,
        )

    @classmethod
    def make_model(cls, config, backbone) -> PrototypicalModel:
        """ORDER's learner: prototypes refined by soft k-means, which honours the OOD split's
        weights."""
        return PrototypicalModel(backbone, refine="soft_kmeans")

    def criterion(self):
        """``H(θ)`` of Eq. 10 in training, plus the terms of the plugins given besides ORDER's
        (none by default); in evaluation, the mean loss over all queries (a per-query loss,
        comparable between methods)."""
        if not self.is_training:
            return super().criterion()
        # L_meta(T) for every task T of the meta-batch: the current tasks T_t, then the
        # replayed T_i ∈ B (rows iteration.replayed.rows); each the mean over its queries.
        n_tasks = len(self.mb_x)
        if _is_plain_cross_entropy(self._criterion):  # every task at once
            per_query = F.cross_entropy(self.mb_output, self.mb_y, reduction="none")
            loss = per_query.reshape(n_tasks, -1).mean(-1).sum()
        else:  # a criterion of one's own, task by task
            logits = self.mb_output.reshape(n_tasks, -1, self.mb_output.shape[-1])
            labels = self.mb_y.reshape(n_tasks, -1)
            loss = sum(self._criterion(logits[b], labels[b]) for b in range(n_tasks))
        h = self.meta_term(loss)
        # + λ Σ_T (I_ood(T) − I_id(T)) over the same tasks (use_mi; mi_terms picks the bounds).
        if self.mi is not None:
            h = self.plus_terms_of(h, self.mi)
        # + β L_OT between current and stored features of the replayed tasks (use_ot;
        # ot_unlabeled: S ∪ U_id, else S only), once; no term while the memory is empty.
        if self.ot is not None:
            h = self.plus_terms_of(h, self.ot)
        # Eq. 10 ends here; the terms of the plugins given besides ORDER's follow.
        return self.plus_terms_of(h, *self.added_plugins)
