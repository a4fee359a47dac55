"""Meta-learning baselines of the paper's Table 2: ProtoNet, MSKM and ANIL (TPN and LST live in
:mod:`.tpn` and :mod:`.lst` and reuse the pieces defined here).

Every baseline is a strategy class — the :class:`~avalanche_sets.training.EpisodicTemplate` with a
default model and the paper's optimiser (Adam, lr 1e-3) — plus, where the shared
:class:`~avalanche_sets.models.PrototypicalModel` does not fit, an episodic model: an
``nn.Module`` mapping an :class:`~avalanche_sets.data.episodes.EpisodeBatch` to query logits
``[B*N*Q, N]``. Like every learner of the package they only see ``strategy.learner_batch`` (the
OOD ground truth stripped). "Adapted to SETS" means (paper §5.1): the methods run unchanged on
the SETS stream, trained sequentially on the domains with no mechanism against forgetting, and
the semi-supervised ones use the whole unlabeled set of an episode, OOD images included, as
their original papers would.

Shared pieces:

* :class:`EpisodicBaseline` — the strategy every baseline is, the continual ones of
  :mod:`.continual` included: a default model built from ``model_options`` (the model's own
  keyword options), the default optimiser, the continual mechanism's plugin first;
  keyword-only arguments.
* :class:`ANILModel` — backbone + linear head whose MAML clone
  (:class:`~avalanche_sets.models.MAMLLearner`) is adapted per episode;
  :class:`~avalanche_sets.baselines.lst.LSTModel` extends it.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from avalanche.core import SupervisedPlugin
from torch import Tensor, nn

from ..data.episodes import EpisodeBatch
from ..method import Method
from ..models.backbone import autocast_bf16, cpu_backbone, embed_episodes
from ..models.episodic import EpisodeState, PrototypicalModel
from ..models.maml import MAMLLearner
from ..suggest import did_you_mean
from ..training.cuda_settings import default_adam
from ..training.template import EpisodicTemplate

__all__ = [
    "EpisodicBaseline",
    "ProtoNetModel",
    "ProtoNet",
    "MSKM",
    "ANILModel",
    "ANIL",
    "embedding_dim",
    "weighted_cross_entropy",
]


def embedding_dim(backbone: nn.Module, emb_dim: int | None = None) -> int:
    """Embedding size of ``backbone``: ``emb_dim`` if given, else ``backbone.out_dim``."""
    if emb_dim is not None:
        return int(emb_dim)
    if not hasattr(backbone, "out_dim"):
        raise ValueError(
            "cannot tell the backbone's embedding size: give it an `out_dim` attribute "
            "(as ConvBackbone has) or pass emb_dim=..."
        )
    return int(backbone.out_dim)


class EpisodicBaseline(Method, EpisodicTemplate):
    """The strategy every baseline is: an episodic model, the paper's optimiser and, for the
    continual baselines, their mechanism's plugin ahead of any other.

    A method sets what makes it different — the class of its default model, the model options
    it fixes — and at most adds a constructor that builds its plugin, and a criterion.

    The model's options are declared once, by the model: a strategy takes them as one mapping,
    ``model_options``, checked against the model's signature (:meth:`model_option_names`) and
    handed to it, ``model_class(backbone, **fixed_model_options, **model_options)``; so
    ``LST(model_options={"n_stages": 1})`` builds ``LSTModel(cpu_backbone(), n_stages=1)``, and
    the model refuses a bad value, naming it, when the strategy is built.

    Args:
        model: the episodic model; default :attr:`model_class` built from ``model_options``
            (which must then be empty: they shape only the model built here).
        model_options: keyword arguments of :attr:`model_class`, ``backbone`` (default
            :func:`~avalanche_sets.models.cpu_backbone`) included.
        optimizer: default ``Adam(model.parameters(), lr)`` (``SGD`` with ``sgd=True``).
        lr: learning rate of the default optimiser (paper: Adam, 1e-3).
        sgd: make the default optimiser plain SGD.
        cl_plugin: the continual-learning mechanism, kept as :attr:`cl_plugin` and run first.
        plugins: further Avalanche plugins, after it.
        **kwargs: :class:`EpisodicTemplate` arguments (``train_mb_size`` — paper 2 —,
            ``train_epochs``, ``evaluator``, ``device``...).

    Raises:
        TypeError: a name in ``model_options`` that :attr:`model_class` does not take (with
            the closest one), or any other unknown argument.
        ValueError: ``lr`` is not positive; the model refuses one of its options; both a
            ``model`` and ``model_options`` are given.
    """

    #: The default model's class; ``None``: the method builds its model in
    #: :meth:`default_model` and takes no model options.
    model_class: ClassVar[type[nn.Module] | None] = None
    #: Options of :attr:`model_class` the method fixes (MSKM's ``refine="mskm"``).
    fixed_model_options: ClassVar[Mapping[str, Any]] = MappingProxyType({})

    def __init__(
        self,
        *,
        model: nn.Module | None = None,
        model_options: Mapping[str, Any] | None = None,
        optimizer: torch.optim.Optimizer | None = None,
        lr: float = 1e-3,
        sgd: bool = False,
        cl_plugin: SupervisedPlugin | None = None,
        plugins: Sequence[SupervisedPlugin] | None = None,
        **kwargs,
    ) -> None:
        options = dict(model_options or {})
        self._check_model_options(options)
        if not lr > 0:
            raise ValueError(f"lr must be positive, got {lr!r}")
        if model is None:
            model = self.default_model(**options)
        elif options:
            raise ValueError(
                f"{type(self).__name__} got both a model and model_options "
                f"{sorted(options)}, which only shape the model it builds itself; fix: build "
                "the model with those options, or leave model out"
            )
        if optimizer is None:
            optimizer = (
                torch.optim.SGD(model.parameters(), lr=lr)
                if sgd
                else default_adam(model.parameters(), lr=lr, device=kwargs.get("device"))
            )
        self.cl_plugin = cl_plugin
        """The continual-learning mechanism (``None`` for a method without one)."""
        own = [cl_plugin] if cl_plugin is not None else []
        super().__init__(
            model=model, optimizer=optimizer, plugins=[*own, *(plugins or [])], **kwargs
        )

    @classmethod
    def own_arguments(cls, given: Mapping[str, Any]) -> dict[str, Any]:
        """:meth:`Method.own_arguments`, with the class's fixed and tuned options that are
        its model's going into ``model_options`` (under those given there; none when a
        ``model`` is given: it is used as it is)."""
        given_model = dict(given.get("model_options") or {})
        cls.check_fixed(given_model)
        args = super().own_arguments(given)
        names = set(cls.model_option_names())
        own = {k: args.pop(k) for k in list(args) if k in names and k not in given}
        if own and args.get("model") is None:
            args["model_options"] = {**own, **given_model}
        return args

    @classmethod
    def model_arguments(
        cls, config: Any, backbone: nn.Module, options: Mapping[str, Any]
    ) -> dict[str, Any]:
        """A baseline with a :attr:`model_class` builds its own head on the preset's
        ``backbone`` (``model_options``; none when a ``model`` is given in ``options``, used as
        it is); one without takes :meth:`make_model`'s model."""
        if cls.model_class is None:
            return super().model_arguments(config, backbone, options)
        return {} if "model" in options else {"model_options": {"backbone": backbone}}

    @classmethod
    def model_option_names(cls) -> tuple[str, ...]:
        """The names ``model_options`` may hold: the keyword parameters of :attr:`model_class`
        (``backbone`` first) less :attr:`fixed_model_options`; none without a model class."""
        if cls.model_class is None:
            return ()
        params = inspect.signature(cls.model_class).parameters.values()
        return tuple(
            p.name
            for p in params
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
            and p.name not in cls.fixed_model_options
        )

    @classmethod
    def _check_model_options(cls, options: Mapping[str, Any]) -> None:
        valid = cls.model_option_names()
        unknown = sorted(set(options) - set(valid))
        if not unknown:
            return
        if not valid:
            raise TypeError(
                f"{cls.__name__} takes no model options (got {unknown}); fix: pass model=..."
            )
        hints = did_you_mean(unknown, valid)
        raise TypeError(
            f"{cls.__name__}'s model {cls.model_class.__name__} does not take option(s) "
            f"{unknown}{hints}; fix: use its options {list(valid)}"
        )

    def default_model(self, *, backbone: nn.Module | None = None, **options: Any) -> nn.Module:
        """``model_class(backbone, **fixed_model_options, **options)``; ``backbone`` default
        :func:`~avalanche_sets.models.cpu_backbone`.

        Raises:
            TypeError: the class names no :attr:`model_class` (pass ``model``).
        """
        if self.model_class is None:
            raise TypeError(f"{type(self).__name__} has no default model; fix: pass model=...")
        backbone = cpu_backbone() if backbone is None else backbone
        return self.model_class(backbone, **self.fixed_model_options, **options)


# --------------------------------------------------------------------------- ProtoNet, MSKM
class ProtoNetModel(PrototypicalModel):
    """:class:`PrototypicalModel` with ``refine="none"`` that never embeds the unlabeled images.

    Plain ``PrototypicalModel(refine="none")`` ignores unlabeled data in its logits but still
    forwards the unlabeled images through the backbone with the rest of the meta-batch, so in
    training mode they would enter BatchNorm's batch statistics. This subclass drops them
    before the backbone: ProtoNet sees labeled data only. ``EpisodeState.unlabeled_emb`` is
    then empty (``U = 0``).
    """

    def __init__(self, backbone: nn.Module, *, bf16: bool = False) -> None:
        super().__init__(backbone, refine="none", bf16=bf16)

    def encode(self, batch: EpisodeBatch) -> EpisodeState:
        labeled_only = EpisodeBatch(
            support_x=batch.support_x,
            support_y=batch.support_y,
            query_x=batch.query_x,
            query_y=batch.query_y,
            unlabeled_x=batch.unlabeled_x[:, :0],
        )
        return super().encode(labeled_only)


class ProtoNet(EpisodicBaseline):
    """Prototypical Networks (Snell, Swersky & Zemel, NeurIPS 2017), supervised only.

    Query logits ``-‖h(q) − p_c‖²`` to the support-mean prototypes; the meta-loss is the query
    cross-entropy. Adapted to SETS unchanged: it ignores the unlabeled set of every episode (ID
    and OOD alike) — the unlabeled images are not even embedded (:class:`ProtoNetModel`).

    Args:
        model: default :class:`ProtoNetModel` built from ``model_options``, its keyword
            options ``backbone`` (default :func:`~avalanche_sets.models.cpu_backbone`, 4
            blocks, 32 px) and ``bf16``.
        optimizer / lr: default Adam(lr = 1e-3, the paper's).
        **kwargs: :class:`EpisodicBaseline` arguments.
    """

    name = "protonet"
    summary = "prototypical networks (Snell et al. 2017): the unlabeled images ignored"

    model_class = ProtoNetModel


class MSKM(EpisodicBaseline):
    """Masked soft k-means (Ren et al., ICLR 2018, "Meta-Learning for Semi-Supervised Few-Shot
    Classification", §3.2.3).

    ProtoNet whose prototypes are refined by one soft k-means step over the episode's unlabeled
    images, each weighted by a learned soft mask (a small MLP on per-class distance statistics
    gives a threshold and slope; see :class:`~avalanche_sets.models.MaskedSoftKMeans`).
    Adapted to SETS unchanged: *all* unlabeled images enter the refinement, OOD included — no
    filtering; the learned mask is the method's own (only) defence against distractors. This is
    also the meta-learner the paper's continual baselines (Semi-*) build on.

    Args:
        model: default ``PrototypicalModel(backbone, refine="mskm", bf16=bf16)``, the
            ``model_options`` ``backbone`` and ``bf16`` as :class:`ProtoNet`'s.
        optimizer, lr, **kwargs: as :class:`ProtoNet`.
    """

    name = "mskm"
    summary = (
        "masked soft k-means (Ren et al. 2018): every unlabeled image refines the "
        "prototypes, OOD ones through learned soft masks"
    )

    model_class = PrototypicalModel
    fixed_model_options = MappingProxyType({"refine": "mskm"})


# --------------------------------------------------------------------------- ANIL
def weighted_cross_entropy(logits: Tensor, y: Tensor, weights: Tensor | None = None) -> Tensor:
    """Cross-entropy averaged with per-example ``weights`` (``None``: plain mean):
    ``Σ_i w_i CE_i / Σ_i w_i``."""
    if weights is None:
        return F.cross_entropy(logits, y)
    losses = F.cross_entropy(logits, y, reduction="none")
    return (weights * losses).sum() / weights.sum().clamp_min(1e-12)


class ANILModel(nn.Module):
    """ANIL's episodic model: backbone ``h_θ`` + linear head ``W`` (``N`` outputs).

    Per episode, a MAML clone (:class:`~avalanche_sets.models.MAMLLearner`) of the head is
    adapted on the support embeddings for ``inner_steps`` steps of gradient descent with step
    size ``inner_lr``; the adapted head classifies the query. The backbone is not adapted in
    the inner loop (only the head is); the outer loss (the query cross-entropy computed by the
    strategy) updates the backbone and the head's initialisation. Support and query are
    embedded in one backbone call; the unlabeled images are not embedded.

    Args:
        backbone: maps images to ``[n, d]`` embeddings.
        n_way: classes per episode ``N`` (the head's outputs; episodes must match).
        inner_steps: inner-loop steps in training: 20, not MAML's 5. At the stable step
            0.01, five steps adapt the head too little and ANIL falls behind ProtoNet; 20 keep
            pace for about 25% more CPU time.
        inner_lr: inner-loop step size (0.01, MAML's on miniImageNet and LST's reference
            code). The inner loop is plain gradient descent on a linear head, stable only
            while ``inner_lr`` times the curvature — about a fifth of the embeddings' squared
            norm — stays below 2; the CPU backbones' embeddings reach norms of 12–20, at which
            0.1 diverges.
        first_order: first-order MAML (default): no second derivatives through the inner
            loop. The second-order meta-gradient runs through the product of the inner steps'
            Jacobians ``I − inner_lr·H``, which grows geometrically once ``inner_lr`` times the
            curvature passes about 2–4; the embeddings keep growing over a long stream, so a
            second-order ANIL collapses on the converged stream while a first-order one does
            not. First-order learns more slowly in a short stream (about 2 points on ``cpu``).
            The measurements behind these three defaults are on the documentation's
            Verification page (baselines).
        eval_inner_steps: inner-loop steps in evaluation (default ``inner_steps``).
        emb_dim: embedding size (default ``backbone.out_dim``).
        bf16: bfloat16 autocast for the backbone (where supported).

    Works under ``torch.no_grad()`` (Avalanche evaluates that way): the inner loop re-enables
    autograd for the head only and the returned logits are detached.
    """

    embed_unlabeled = False

    def __init__(
        self,
        backbone: nn.Module,
        *,
        n_way: int = 5,
        inner_steps: int = 20,
        inner_lr: float = 0.01,
        first_order: bool = True,
        eval_inner_steps: int | None = None,
        emb_dim: int | None = None,
        bf16: bool = False,
    ) -> None:
        super().__init__()
        if not isinstance(n_way, int) or n_way < 2:
            raise ValueError(f"n_way must be an integer >= 2, got {n_way!r}")
        for name, value in (("inner_steps", inner_steps), ("eval_inner_steps", eval_inner_steps)):
            if value is not None and (not isinstance(value, int) or value < 0):
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
        if not inner_lr > 0:
            raise ValueError(f"inner_lr must be positive, got {inner_lr!r}")
        self.backbone = backbone
        self.n_way = n_way
        self.inner_steps = inner_steps
        self.eval_inner_steps = inner_steps if eval_inner_steps is None else eval_inner_steps
        self.first_order = bool(first_order)
        self.bf16 = bool(bf16)
        self.head = MAMLLearner(
            nn.Linear(embedding_dim(backbone, emb_dim), n_way),
            lr=float(inner_lr),
            first_order=first_order,
        )
        self._grad_outside = True
        self._second_order = not first_order

    # ------------------------------------------------------------------ pieces
    def embed(self, batch: EpisodeBatch) -> tuple[Tensor, Tensor, Tensor | None]:
        """Support, query (and, if ``embed_unlabeled``, unlabeled) embeddings ``[B, n, d]``."""
        parts = [batch.support_x, batch.query_x]
        if self.embed_unlabeled:
            parts.append(batch.unlabeled_x)
        with autocast_bf16(self.bf16):
            emb = embed_episodes(self.backbone, parts)
        return emb[0], emb[1], (emb[2] if self.embed_unlabeled else None)

    @property
    def inner_lr(self) -> float:
        """Inner-loop step size (the ``lr`` of the head's
        :class:`~avalanche_sets.models.MAMLLearner`)."""
        return self.head.lr

    @inner_lr.setter
    def inner_lr(self, value: float) -> None:
        if not value > 0:
            raise ValueError(f"inner_lr must be positive, got {value!r}")
        self.head.lr = float(value)

    @property
    def current_inner_steps(self) -> int:
        return self.inner_steps if self.training else self.eval_inner_steps

    def clone_head(self) -> nn.Module:
        """A fresh differentiable copy of the head's initialisation (a MAML clone)."""
        return self.head.clone(first_order=not self._second_order)

    def detached_head(self) -> nn.Module:
        """A clone of the head's initialisation cut off from it: gradients through it reach
        neither the head nor anything upstream (its parameters still require grad)."""
        return self.head.detached(first_order=not self._second_order)

    def adapt(
        self,
        emb: Tensor,
        y: Tensor,
        *,
        steps: int | None = None,
        weights: Tensor | None = None,
        learner: nn.Module | None = None,
        second_order: bool | None = None,
    ) -> nn.Module:
        """Inner loop: ``steps`` gradient steps of the (weighted) cross-entropy on ``(emb, y)``.

        Args:
            emb: ``[n, d]`` embeddings; y: ``[n]`` labels; weights: optional ``[n]`` weights.
            steps: default :attr:`current_inner_steps`.
            learner: the head to adapt further (default: a new clone of the initialisation).
            second_order: differentiate through the steps (default: not ``first_order``, and
                never when autograd was off outside the model).

        Returns:
            the adapted MAML clone of the head (the model's own head is never modified).
        """
        steps = self.current_inner_steps if steps is None else steps
        learner = self.clone_head() if learner is None else learner
        first_order = not (self._second_order if second_order is None else second_order)
        for _ in range(steps):
            learner.adapt(weighted_cross_entropy(learner(emb), y, weights), first_order=first_order)
        return learner

    def episode_logits(self, s: Tensor, sy: Tensor, q: Tensor, u: Tensor | None) -> Tensor:
        """Query logits ``[Q, N]`` of one episode from its embeddings."""
        return self.adapt(s, sy)(q)

    # ------------------------------------------------------------------ forward
    def forward(self, batch: EpisodeBatch) -> Tensor:
        n_way = batch.n_way
        if n_way != self.n_way:
            raise ValueError(f"this model was built for {self.n_way}-way episodes, got {n_way}-way")
        grad_outside = torch.is_grad_enabled()
        s, q, u = self.embed(batch)
        self._grad_outside = grad_outside
        self._second_order = grad_outside and not self.first_order
        with torch.enable_grad():
            logits = [
                self.episode_logits(s[b], batch.support_y[b], q[b], None if u is None else u[b])
                for b in range(len(batch))
            ]
        logits = torch.cat(logits)
        return logits if grad_outside else logits.detach()


class ANIL(EpisodicBaseline):
    """ANIL — "Almost No Inner Loop" (Raghu, Raghu, Bengio & Vinyals, ICLR 2020, "Rapid Learning
    or Feature Reuse? Towards Understanding the Effectiveness of MAML").

    MAML (Finn et al. 2017) with the inner loop restricted to the final linear layer: per
    episode, a MAML clone of the head takes ``inner_steps`` gradient steps on the support set;
    the query loss of the adapted head updates the backbone and the head's initialisation
    (:class:`ANILModel`). First-order by default: the second-order meta-gradient explodes over a
    long stream as the embeddings grow (``ANILModel``'s ``first_order``); ``first_order=False``
    gives the paper's second-order ANIL. Adapted to SETS unchanged: supervised only, the
    unlabeled set (ID and OOD) is ignored.

    Args:
        model: default :class:`ANILModel` built from ``model_options``, its keyword options
            (``ANIL(model_options={"inner_steps": 5})``; ``backbone`` default
            :func:`~avalanche_sets.models.cpu_backbone`).
        optimizer / lr: default Adam(lr = 1e-3). **kwargs: :class:`EpisodicBaseline`.
    """

    name = "anil"
    summary = "ANIL (Raghu et al. 2020): MAML (MAMLLearner) adapting only the head on the support"

    model_class = ANILModel
