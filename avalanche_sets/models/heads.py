"""Prototype heads shared by ORDER and the baselines (paper §3.1, design §3.1–3.3).

Notation (shapes): ``S`` support, ``Q`` query, ``U`` unlabeled examples, ``N`` classes (ways),
``d`` embedding size. Every function also accepts any number of leading batch dimensions
``[...]`` (e.g. a meta-batch ``B``), applied identically to all its tensor arguments.

All computations here run in float32 with autocast disabled, whatever the caller's autocast
state: embeddings from a bf16-autocast backbone are float32 already (design §8: prototype
distances stay in fp32).

* :func:`support_n_way` — ``N`` of a meta-batch's support labels, checked with one host read.
* :func:`label_errors` — the same checks against a known ``N``, as a flag on the device.
* :func:`prototypes` — class means of the support embeddings (Snell et al. 2017).
* :func:`proto_logits` — ``-‖h(q) - p_c‖²``, the distances from
  :func:`~avalanche_sets.functional.distance.squared_euclidean` (as every distance here).
* :func:`soft_kmeans_refine` — one soft k-means step with unlabeled data (Ren et al. 2018;
  ORDER, design §3.3), optionally weighted per unlabeled example.
* :class:`MaskedSoftKMeans` — Ren et al. 2018's masked soft k-means (the MSKM baseline).
* :func:`episode_logits` — query logits of an episode with a chosen refinement.
"""

from __future__ import annotations

import contextlib
import math

import torch
from torch import Tensor, nn

from ..functional.distance import squared_euclidean

__all__ = [
    "class_sums",
    "label_errors",
    "support_n_way",
    "prototypes",
    "proto_logits",
    "soft_kmeans_refine",
    "MaskedSoftKMeans",
    "episode_logits",
    "REFINE_MODES",
]

REFINE_MODES = ("none", "soft_kmeans", "mskm")


def _fp32(*tensors: Tensor) -> contextlib.AbstractContextManager:
    """Context disabling autocast on the tensors' device type (float32 math inside)."""
    device_type = tensors[0].device.type
    return torch.autocast(device_type, enabled=False)


def _one_hot(y: Tensor, n_way: int) -> Tensor:
    """Labels ``[..., S]`` → float32 one-hot ``[..., S, N]``; a label outside ``0..N-1`` gives
    a row of zeros (no range check here, so no host read: see :func:`label_errors`)."""
    if y.dtype.is_floating_point or y.dtype == torch.bool:
        raise ValueError(f"labels must be an integer tensor, got {y.dtype}")
    classes = torch.arange(n_way, device=y.device, dtype=y.dtype)
    return (y.unsqueeze(-1) == classes).to(torch.float32)


def _in_range(y: Tensor, n_way: int) -> bool:
    """Whether every label lies in ``0..n_way-1`` (one host read: min and max together)."""
    low, high = torch.aminmax(y)
    return bool(torch.stack([low >= 0, high < n_way]).all())


def label_errors(support_y: Tensor, n_way: int, *, counts: Tensor | None = None) -> Tensor:
    """Whether support labels ``[..., S]`` break the ``N``-way contract, as a 0-d bool tensor
    on their device (no host read): a label outside ``0..N-1``, or an episode without a
    support example of some class. ``counts``: their per-class counts ``[..., N]`` when the
    caller has them (:func:`class_sums`). Read it where reading is due (the episodic template
    reads it with its finite check); :func:`support_n_way` explains a failure."""
    if counts is None:
        counts = _one_hot(support_y, n_way).sum(-2)  # out-of-range labels count nowhere
    missing = (counts == 0).any()
    return missing | (counts.sum(-1) != support_y.shape[-1]).any()


def support_n_way(support_y: Tensor) -> int:
    """The number of classes ``N`` of support labels ``[..., S]``, checked with one host read.

    ``N`` is one more than the largest label; the labels must lie in ``0..N-1`` and every
    episode must hold a support example of every class. One read of two numbers (the largest
    label, and whether each episode's sorted labels run from 0 to it without a gap) answers
    both, so a model that calls this once per meta-batch can pass ``check_labels=False`` to
    :func:`prototypes` and the refinements, which would otherwise read the host per call.

    Raises:
        ValueError: on no labels, labels below 0, or an episode lacking a class.
    """
    if support_y.numel() == 0:
        raise ValueError("support_y holds no labels: an episode needs a labeled support set")
    if support_y.dtype.is_floating_point or support_y.dtype == torch.bool:
        raise ValueError(f"labels must be an integer tensor, got {support_y.dtype}")
    rows = support_y.reshape(-1, support_y.shape[-1]).sort(-1).values
    high = rows[:, -1].amax()
    gapless = (rows[:, 0] == 0).all() & (rows[:, -1] == high).all()
    if rows.shape[-1] > 1:
        gapless = gapless & (rows.diff(dim=-1) <= 1).all()
    high, gapless = torch.stack([high, gapless.to(high.dtype)]).tolist()
    n_way = int(high) + 1
    if not gapless:
        if not _in_range(support_y, n_way):
            raise ValueError(f"support labels must lie in 0..{n_way - 1}")
        raise ValueError("every class needs at least one support example")
    return n_way


def class_sums(support_emb: Tensor, support_y: Tensor, n_way: int) -> tuple[Tensor, Tensor]:
    """Per-class sums ``[..., N, d]`` (float32) and counts ``[..., N]`` of the support
    embeddings, unchecked: what :func:`prototypes` divides and the refinements start from, for
    a caller who computes them once per meta-batch (``class_sums=`` of the refinements)."""
    with _fp32(support_emb):
        return _class_sums(support_emb, support_y, n_way, check_labels=False)


def _class_sums(
    support_emb: Tensor, support_y: Tensor, n_way: int, *, check_labels: bool = True
) -> tuple[Tensor, Tensor]:
    """Per-class sums ``[..., N, d]`` and counts ``[..., N]`` of the support embeddings
    (``check_labels=False``: the caller checked the labels' range, e.g. with
    :func:`support_n_way`)."""
    if support_emb.shape[:-1] != support_y.shape:
        raise ValueError(
            f"support_emb {tuple(support_emb.shape)} and support_y {tuple(support_y.shape)} "
            "must agree as [..., S, d] and [..., S]"
        )
    if check_labels and support_y.numel() and not _in_range(support_y, n_way):
        raise ValueError(f"support labels must lie in 0..{n_way - 1}")
    onehot = _one_hot(support_y, n_way)  # [..., S, N]
    sums = onehot.transpose(-1, -2) @ support_emb.float()  # [..., N, d]
    counts = onehot.sum(-2)  # [..., N]
    return sums, counts


def prototypes(
    support_emb: Tensor, support_y: Tensor, n_way: int, *, check_labels: bool = True
) -> Tensor:
    """Class prototypes ``p_c`` = mean support embedding of class ``c``.

    Args:
        support_emb: ``[..., S, d]`` support embeddings.
        support_y: ``[..., S]`` integer labels in ``0..n_way-1``.
        n_way: number of classes ``N``.
        check_labels: check the labels' range and that every class has a support example
            (two host reads). ``False`` where the caller checked them once per meta-batch with
            :func:`support_n_way` (the same checks, one read).

    Returns:
        ``[..., N, d]`` float32 prototypes.

    Raises:
        ValueError: on mismatched shapes, labels out of range, or a class without support
            examples (its mean is undefined).
    """
    with _fp32(support_emb):
        sums, counts = _class_sums(support_emb, support_y, n_way, check_labels=check_labels)
        if check_labels and bool((counts == 0).any()):
            raise ValueError("every class needs at least one support example")
        return sums / counts.unsqueeze(-1)


def proto_logits(query_emb: Tensor, protos: Tensor) -> Tensor:
    """Prototypical-network logits ``-‖h(q) - p_c‖²``: ``[..., Q, d]``, ``[..., N, d]`` →
    ``[..., Q, N]`` (float32)."""
    return -squared_euclidean(query_emb.float(), protos)


def soft_kmeans_refine(
    protos: Tensor,
    support_emb: Tensor,
    support_y: Tensor,
    unlabeled_emb: Tensor,
    *,
    weights: Tensor | None = None,
    check_labels: bool = True,
    sums: tuple[Tensor, Tensor] | None = None,
) -> Tensor:
    """One soft k-means refinement step (Ren et al. 2018 §3.2.1; paper §3.1; design §3.3).

    ``μ_c(x) = softmax_c(−‖h(x) − p_c‖²)`` and
    ``p'_c = (Σ_{S_c} h + Σ_U w(x) μ_c(x) h(x)) / (|S_c| + Σ_U w(x) μ_c(x))``.

    Args:
        protos: ``[..., N, d]`` current prototypes (used for the soft assignments μ).
        support_emb: ``[..., S, d]``; support_y: ``[..., S]`` labels in ``0..N-1``.
        unlabeled_emb: ``[..., U, d]``; ``U = 0`` is allowed.
        weights: optional ``[..., U]`` non-negative per-example weights multiplying μ (ORDER
            passes the indicator of ``U_id``, so OOD examples drop out); default all ones.
        check_labels: as in :func:`prototypes` (the range check, one host read per call).
        sums: the support's :func:`class_sums` when the caller has them (not recomputed).

    Returns:
        ``[..., N, d]`` refined prototypes. With ``U = 0`` or all weights zero these are the
        support class means, i.e. ``protos`` when they are the support prototypes (as usual).
    """
    n_way = protos.shape[-2]
    with _fp32(protos):
        if sums is None:
            sums = _class_sums(support_emb, support_y, n_way, check_labels=check_labels)
        sums, counts = sums
        if unlabeled_emb.shape[-2] == 0:
            return sums / counts.unsqueeze(-1)
        unlabeled_emb = unlabeled_emb.float()
        mu = torch.softmax(-squared_euclidean(unlabeled_emb, protos), dim=-1)  # [..., U, N]
        if weights is not None:
            if weights.shape != unlabeled_emb.shape[:-1]:
                raise ValueError(
                    f"weights {tuple(weights.shape)} must have shape [..., U] = "
                    f"{tuple(unlabeled_emb.shape[:-1])}"
                )
            mu = mu * weights.to(mu.dtype).unsqueeze(-1)
        num = sums + mu.transpose(-1, -2) @ unlabeled_emb  # [..., N, d]
        den = counts + mu.sum(-2)  # [..., N]
        return num / den.unsqueeze(-1)


class MaskedSoftKMeans(nn.Module):
    """Masked soft k-means refinement of Ren et al. 2018 (ICLR), §3.2.3 — the MSKM baseline.

    "Meta-Learning for Semi-Supervised Few-Shot Classification" (Ren, Triantafillou, Ravi,
    Snell, Swersky, Tenenbaum, Larochelle, Zemel). For unlabeled ``x̃_j`` (``j = 1..M``) and
    class prototypes ``p_c``:

    * ``d_{j,c} = ‖h(x̃_j) − p_c‖²`` and the normalised ``d̃_{j,c} = d_{j,c} / (1/M Σ_j d_{j,c})``;
    * per class, statistics of ``d̃_{·,c}`` over the unlabeled examples — min, max, variance,
      skewness, kurtosis — go through a small MLP giving a soft threshold ``β_c`` and slope
      ``γ_c``;
    * mask ``m_{j,c} = σ(−γ_c (d̃_{j,c} − β_c))``;
    * soft assignments ``z̃_{j,c} = softmax_c(−d_{j,c})`` and
      ``p'_c = (Σ_{S_c} h + Σ_j h(x̃_j) z̃_{j,c} m_{j,c}) / (|S_c| + Σ_j z̃_{j,c} m_{j,c})``.

    Choices where the paper leaves details open (documented; the first four follow the authors'
    released code, ``renmengye/few-shot-ssl-public``, ``kmeans_refine_mask_model.py``):

    * MLP: 5 → ``hidden`` (20) → 2 with tanh, small-normal init (std ``init_std`` = 0.01).
    * ``β_c = exp(o_1)`` and ``γ_c = exp(o_2)`` (both positive, so the mask decreases with the
      distance); the output bias starts at ``(log init_threshold, log init_slope)``, so an
      untrained module thresholds near ``d̃ = init_threshold`` (1.0 = the mean distance).
    * The statistics are population moments (skewness ``E[z³]``, excess kurtosis ``E[z⁴] − 3``);
      a zero mean distance or variance is replaced by 1 (``M = 1``, or all points identical).
      They are detached from the encoder (``detach_stats=True``); the mask itself is not, and
      the MLP is learned through the outer meta-loss.
    * One refinement step (as ORDER); multi-step schedules are not offered.
    * ``distractor_cluster=False`` (default): the masked variant *replaces* §3.2.2's distractor
      cluster (the paper: "rather than using a high-variance catch-all cluster, we model
      distractors as examples that are not within some area of any of the legitimate class
      prototypes"; the authors' masked model has none). With ``True`` the soft assignments
      ``z̃`` also compete with §3.2.2's zero-mean distractor cluster of learned radius ``r``
      (``logit = −‖h‖²/r² − log r`` against ``−d_{j,c}`` for the classes, the common
      ``½ log 2π`` dropped), and only the ``N`` class columns enter the update.

    ``forward(protos [..., N, d], support_emb [..., S, d], support_y [..., S],
    unlabeled_emb [..., U, d], return_mask=False, *, check_labels=True)`` returns refined
    prototypes ``[..., N, d]`` (and the mask ``[..., U, N]`` when ``return_mask``). ``U = 0``
    returns the support means. ``check_labels`` as in :func:`prototypes`; ``sums``: the
    support's :func:`class_sums` when the caller has them.
    """

    n_stats = 5

    def __init__(
        self,
        *,
        hidden: int = 20,
        init_threshold: float = 1.0,
        init_slope: float = 1.0,
        init_std: float = 0.01,
        detach_stats: bool = True,
        distractor_cluster: bool = False,
        init_distractor_radius: float = 1.0,
    ) -> None:
        super().__init__()
        if hidden < 1:
            raise ValueError(f"hidden must be a positive integer, got {hidden!r}")
        for name, value in (
            ("init_threshold", init_threshold),
            ("init_slope", init_slope),
            ("init_distractor_radius", init_distractor_radius),
        ):
            if not value > 0:
                raise ValueError(f"{name} must be positive, got {value!r}")
        if init_std < 0:
            raise ValueError(f"init_std must be non-negative, got {init_std!r}")
        self.detach_stats = bool(detach_stats)
        self.distractor_cluster = bool(distractor_cluster)
        self.mlp = nn.Sequential(nn.Linear(self.n_stats, hidden), nn.Tanh(), nn.Linear(hidden, 2))
        with torch.no_grad():
            for layer in (self.mlp[0], self.mlp[2]):
                layer.weight.normal_(0.0, init_std)
                layer.bias.zero_()
            self.mlp[2].bias.copy_(torch.tensor([math.log(init_threshold), math.log(init_slope)]))
        if self.distractor_cluster:
            self.log_distractor_radius = nn.Parameter(
                torch.tensor(math.log(init_distractor_radius))
            )

    @staticmethod
    def distance_stats(norm_dist: Tensor) -> Tensor:
        """Per-class statistics of normalised distances ``[..., U, N]`` → ``[..., N, 5]``:
        (min, max, variance, skewness, excess kurtosis) over the ``U`` unlabeled examples."""
        mean = norm_dist.mean(-2, keepdim=True)
        centred = norm_dist - mean
        var = centred.pow(2).mean(-2, keepdim=True)
        var = torch.where(var > 0, var, torch.ones_like(var))
        skew = (centred.pow(3) / var.pow(1.5)).mean(-2, keepdim=True)
        kurt = (centred.pow(4) / var.pow(2)).mean(-2, keepdim=True) - 3.0
        stats = [
            norm_dist.amin(-2, keepdim=True),
            norm_dist.amax(-2, keepdim=True),
            var,
            skew,
            kurt,
        ]
        return torch.cat(stats, dim=-2).transpose(-1, -2)

    def threshold_slope(self, norm_dist: Tensor) -> tuple[Tensor, Tensor]:
        """``β [..., N]`` and ``γ [..., N]`` from normalised distances ``[..., U, N]``."""
        stats = self.distance_stats(norm_dist.detach() if self.detach_stats else norm_dist)
        out = self.mlp(stats)  # [..., N, 2]
        return out[..., 0].exp(), out[..., 1].exp()

    def forward(
        self,
        protos: Tensor,
        support_emb: Tensor,
        support_y: Tensor,
        unlabeled_emb: Tensor,
        return_mask: bool = False,
        *,
        check_labels: bool = True,
        sums: tuple[Tensor, Tensor] | None = None,
    ) -> Tensor | tuple[Tensor, Tensor]:
        n_way = protos.shape[-2]
        with _fp32(protos):
            if sums is None:
                sums = _class_sums(support_emb, support_y, n_way, check_labels=check_labels)
            sums, counts = sums
            if unlabeled_emb.shape[-2] == 0:
                refined = sums / counts.unsqueeze(-1)
                mask = unlabeled_emb.new_zeros((*unlabeled_emb.shape[:-1], n_way))
                return (refined, mask) if return_mask else refined
            unlabeled_emb = unlabeled_emb.float()
            dist = squared_euclidean(unlabeled_emb, protos)  # [..., U, N]
            mean_dist = dist.mean(-2, keepdim=True)
            mean_dist = torch.where(mean_dist > 0, mean_dist, torch.ones_like(mean_dist))
            norm_dist = dist / mean_dist
            beta, gamma = self.threshold_slope(norm_dist)
            mask = torch.sigmoid(-gamma.unsqueeze(-2) * (norm_dist - beta.unsqueeze(-2)))
            logits = -dist
            if self.distractor_cluster:
                log_r = self.log_distractor_radius
                d0 = unlabeled_emb.pow(2).sum(-1, keepdim=True)  # distance to the zero mean
                logits = torch.cat([logits, -d0 * torch.exp(-2.0 * log_r) - log_r], dim=-1)
            z = torch.softmax(logits, dim=-1)[..., :n_way]  # [..., U, N]
            zm = z * mask
            refined = (sums + zm.transpose(-1, -2) @ unlabeled_emb) / (
                counts + zm.sum(-2)
            ).unsqueeze(-1)
        return (refined, mask) if return_mask else refined


def episode_logits(
    support_emb: Tensor,
    support_y: Tensor,
    query_emb: Tensor,
    unlabeled_emb: Tensor | None = None,
    *,
    n_way: int,
    refine: str = "none",
    mskm: MaskedSoftKMeans | None = None,
    weights: Tensor | None = None,
) -> Tensor:
    """Query logits ``[..., Q, N]`` of an episode from its embeddings.

    Args:
        support_emb: ``[..., S, d]``; support_y: ``[..., S]``; query_emb: ``[..., Q, d]``;
        unlabeled_emb: ``[..., U, d]`` or None (no unlabeled data: no refinement).
        n_way: number of classes ``N``.
        refine: ``"none"`` (ProtoNet), ``"soft_kmeans"`` (:func:`soft_kmeans_refine`, with
            optional ``weights [..., U]``) or ``"mskm"`` (needs ``mskm``, a
            :class:`MaskedSoftKMeans`).

    Returns:
        ``-‖h(q) − p'_c‖²`` for the (refined) prototypes ``p'``.
    """
    if refine not in REFINE_MODES:
        raise ValueError(f"refine must be one of {REFINE_MODES}, got {refine!r}")
    if refine == "mskm" and mskm is None:
        raise ValueError("refine='mskm' needs a MaskedSoftKMeans module (mskm=...)")
    if weights is not None and refine != "soft_kmeans":
        raise ValueError("weights apply to refine='soft_kmeans' only")
    protos = prototypes(support_emb, support_y, n_way)
    if refine != "none" and unlabeled_emb is not None:
        if refine == "soft_kmeans":
            protos = soft_kmeans_refine(
                protos, support_emb, support_y, unlabeled_emb, weights=weights
            )
        else:
            protos = mskm(protos, support_emb, support_y, unlabeled_emb)
    return proto_logits(query_emb, protos)
