"""Episodic models: a backbone plus a prototype head, split into ``encode`` and ``classify``.

The split lets plugins act between the two (design §3): :class:`~avalanche_sets.order.OODSplitPlugin`
reads the embeddings after :meth:`PrototypicalModel.encode` and decides which unlabeled
images refine the prototypes in :meth:`PrototypicalModel.classify`; the MI and OT plugins reuse
the same embeddings for their losses, so every image of a meta-batch goes through the backbone
exactly once per iteration (design §8).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ..data.episodes import EpisodeBatch
from .backbone import autocast_bf16, embed_episodes
from .heads import (
    REFINE_MODES,
    MaskedSoftKMeans,
    class_sums,
    label_errors,
    proto_logits,
    soft_kmeans_refine,
    support_n_way,
)

__all__ = ["EpisodeState", "PrototypicalModel"]


@dataclass
class EpisodeState:
    """Everything a forward pass computed on a meta-batch of ``B`` episodes.

    Attributes:
        support_emb / query_emb / unlabeled_emb: float32 ``[B, n, d]`` embeddings.
        support_y: ``[B, N*K]`` support labels; ``n_way``: N.
        prototypes: ``[B, N, d]`` support-mean prototypes ``p_c``.
        unlabeled_weight: ``[B, U]`` weight of every unlabeled image in the refinement
            (1 = use, 0 = ignore). Plugins may set it (ORDER's OOD split sets the U_id mask).
        refined_prototypes: ``[B, N, d]`` prototypes used for the logits (after ``classify``).
        label_error: 0-d bool on the device when the model knows ``N`` in advance: whether a
            support label broke the ``N``-way contract (:func:`~avalanche_sets.models.heads.label_errors`),
            to be read where reading is due; ``None`` when the labels were checked on the host.
        class_sums: the support's per-class sums ``[B, N, d]`` and counts ``[B, N]``
            (:func:`~avalanche_sets.models.heads.class_sums`), which ``prototypes`` divides and
            the refinement starts from.
    """

    support_emb: Tensor
    query_emb: Tensor
    unlabeled_emb: Tensor
    support_y: Tensor
    n_way: int
    prototypes: Tensor
    unlabeled_weight: Tensor
    refined_prototypes: Tensor | None = None
    label_error: Tensor | None = None
    class_sums: tuple[Tensor, Tensor] | None = None

    def __len__(self) -> int:
        return int(self.support_emb.shape[0])


class PrototypicalModel(nn.Module):
    """ProtoNet-style episodic model: ``h_θ`` + (optionally refined) prototypes + −‖·‖² logits.

    Args:
        backbone: maps images ``[n, 3, H, W]`` to embeddings ``[n, d]``.
        refine: ``"none"`` (ProtoNet; unlabeled data ignored), ``"soft_kmeans"`` (one soft
            k-means step with the unlabeled images weighted by ``unlabeled_weight``, design §3.3)
            or ``"mskm"`` (Ren et al. 2018 masked soft k-means with learned masks).
        bf16: run the backbone under bfloat16 autocast where the CPU supports it (prototype
            distances, MI and OT stay in float32).

    Attributes:
        n_way: ``N``, the classes of every episode, when known in advance (a run built by
            :func:`~avalanche_sets.methods.build_strategy` sets it from its preset): the support
            labels are then checked on the device (``EpisodeState.label_error``, read by the
            episodic template with its finite check) and encoding a meta-batch reads nothing on
            the host. ``None`` (the default): ``N`` is read from each meta-batch's labels (one
            host read, which also checks them).

    ``forward(batch)`` returns query logits ``[B * N * Q, N]`` so that Avalanche's criterion
    and metrics work unchanged. The model keeps no :class:`EpisodeState`: the episodic template
    calls ``encode`` and ``classify`` itself and holds the state in ``strategy.iteration.state``.
    """

    def __init__(self, backbone: nn.Module, *, refine: str = "none", bf16: bool = False) -> None:
        super().__init__()
        if refine not in REFINE_MODES:
            raise ValueError(f"refine must be one of {REFINE_MODES}, got {refine!r}")
        self.n_way: int | None = None
        self.backbone = backbone
        self.refine = refine
        self.bf16 = bool(bf16)
        self.mskm = MaskedSoftKMeans() if refine == "mskm" else None

    @property
    def uses_unlabeled_weight(self) -> bool:
        """Whether the refinement honours ``EpisodeState.unlabeled_weight`` (only soft k-means
        does: ``"none"`` ignores the unlabeled set, ``"mskm"`` learns its own masks). A
        plugin that filters the unlabeled set through the weights, such as ORDER's OOD split,
        needs it."""
        return self.refine == "soft_kmeans"

    def encode(self, batch: EpisodeBatch) -> EpisodeState:
        """Embed every image of the meta-batch in one backbone call; compute ``p_c``.

        With ``n_way`` given, the support labels are checked on the device
        (``state.label_error``); otherwise once per meta-batch with one host read
        (:func:`~avalanche_sets.models.heads.support_n_way`), which also gives ``N``. The
        prototype functions after it skip their own per-call checks (``check_labels=False``).
        """
        with autocast_bf16(self.bf16):
            s, q, u = embed_episodes(
                self.backbone, [batch.support_x, batch.query_x, batch.unlabeled_x]
            )
        n_way = support_n_way(batch.support_y) if self.n_way is None else self.n_way
        sums = class_sums(s, batch.support_y, n_way)
        protos = sums[0] / sums[1].unsqueeze(-1)  # prototypes(), from the sums kept for later
        label_error = None
        if self.n_way is not None:
            label_error = label_errors(batch.support_y, n_way, counts=sums[1])
        weight = torch.ones(u.shape[:2], dtype=s.dtype, device=s.device)
        return EpisodeState(
            support_emb=s,
            query_emb=q,
            unlabeled_emb=u,
            support_y=batch.support_y,
            n_way=n_way,
            prototypes=protos,
            unlabeled_weight=weight,
            label_error=label_error,
            class_sums=sums,
        )

    def refine_prototypes(self, state: EpisodeState) -> Tensor:
        """Prototypes used for classification, ``[B, N, d]``: every episode of the meta-batch
        refined at once (the labels were checked in :meth:`encode`)."""
        if self.refine == "none" or state.unlabeled_emb.shape[1] == 0:
            return state.prototypes
        if self.refine == "soft_kmeans":
            return soft_kmeans_refine(
                state.prototypes,
                state.support_emb,
                state.support_y,
                state.unlabeled_emb,
                weights=state.unlabeled_weight,
                check_labels=False,
                sums=state.class_sums,
            )
        return self.mskm(
            state.prototypes,
            state.support_emb,
            state.support_y,
            state.unlabeled_emb,
            check_labels=False,
            sums=state.class_sums,
        )

    def classify(self, state: EpisodeState) -> Tensor:
        """Query logits ``[B * N * Q, N]`` from (refined) prototypes."""
        state.refined_prototypes = self.refine_prototypes(state)
        logits = proto_logits(state.query_emb, state.refined_prototypes)
        return logits.reshape(-1, state.n_way)

    def forward(self, batch: EpisodeBatch) -> Tensor:
        """Query logits of ``batch``; labels that break the ``N``-way contract raise here (the
        one host read of a call outside the episodic template)."""
        state = self.encode(batch)
        if state.label_error is not None and bool(state.label_error):
            support_n_way(batch.support_y)  # explains what is wrong
            raise ValueError(
                f"this model was built for {self.n_way}-way episodes, but the support labels "
                f"of the batch span {batch.n_way} classes"
            )
        return self.classify(state)
