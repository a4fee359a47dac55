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
    proto_logits,
    prototypes,
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
    """

    support_emb: Tensor
    query_emb: Tensor
    unlabeled_emb: Tensor
    support_y: Tensor
    n_way: int
    prototypes: Tensor
    unlabeled_weight: Tensor
    refined_prototypes: Tensor | None = None

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

    ``forward(batch)`` returns query logits ``[B * N * Q, N]`` so that Avalanche's criterion
    and metrics work unchanged. The model keeps no :class:`EpisodeState`: the episodic template
    calls ``encode`` and ``classify`` itself and holds the state in ``strategy.iteration.state``.
    """

    def __init__(self, backbone: nn.Module, *, refine: str = "none", bf16: bool = False) -> None:
        super().__init__()
        if refine not in REFINE_MODES:
            raise ValueError(f"refine must be one of {REFINE_MODES}, got {refine!r}")
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

        The support labels are checked here, once per meta-batch and with one host read
        (:func:`~avalanche_sets.models.heads.support_n_way`), which also gives ``N``; the
        prototype functions after it skip their own per-call checks (``check_labels=False``).
        """
        with autocast_bf16(self.bf16):
            s, q, u = embed_episodes(
                self.backbone, [batch.support_x, batch.query_x, batch.unlabeled_x]
            )
        n_way = support_n_way(batch.support_y)
        protos = prototypes(s, batch.support_y, n_way, check_labels=False)
        weight = torch.ones(u.shape[:2], dtype=s.dtype, device=s.device)
        return EpisodeState(
            support_emb=s,
            query_emb=q,
            unlabeled_emb=u,
            support_y=batch.support_y,
            n_way=n_way,
            prototypes=protos,
            unlabeled_weight=weight,
        )

    def refine_prototypes(self, state: EpisodeState) -> Tensor:
        """Prototypes used for classification, ``[B, N, d]``.

        One episode at a time: the refinements take a batch, but a batched matrix product
        sums in another order than one episode's (results differ in the last bits), and the
        episode-by-episode numbers are the ones every recorded run holds. The labels were
        checked in :meth:`encode`.
        """
        if self.refine == "none" or state.unlabeled_emb.shape[1] == 0:
            return state.prototypes
        out = []
        for b in range(len(state)):
            if self.refine == "soft_kmeans":
                out.append(
                    soft_kmeans_refine(
                        state.prototypes[b],
                        state.support_emb[b],
                        state.support_y[b],
                        state.unlabeled_emb[b],
                        weights=state.unlabeled_weight[b],
                        check_labels=False,
                    )
                )
            else:
                out.append(
                    self.mskm(
                        state.prototypes[b],
                        state.support_emb[b],
                        state.support_y[b],
                        state.unlabeled_emb[b],
                        check_labels=False,
                    )
                )
        return torch.stack(out)

    def classify(self, state: EpisodeState) -> Tensor:
        """Query logits ``[B * N * Q, N]`` from (refined) prototypes."""
        state.refined_prototypes = self.refine_prototypes(state)
        logits = proto_logits(state.query_emb, state.refined_prototypes)
        return logits.reshape(-1, state.n_way)

    def forward(self, batch: EpisodeBatch) -> Tensor:
        return self.classify(self.encode(batch))
