"""Metric-based OOD split of the unlabeled set (paper Algorithm 1; design note §3.2).

For each unlabeled embedding ``w`` (L2-normalised) the distance to the prototype set is
``d(w) = min_c ||w - p_c||``; the query set (unlabeled for this purpose) is the ID calibration
set, and an unlabeled point is OOD when ``d(w) > mean(d_Q) + k·std(d_Q)`` (the "Gaussian
assumption" / sigma rule of §4.2, ``k = 1`` in Algorithm 1 line 6).

**Prototype normalisation (a documented deviation).** Algorithm 1 line 2 computes ``p_c`` from
the raw support embeddings while lines 3 and 8 normalise ``w``. Comparing a unit vector with an
un-normalised prototype makes ``||w - p_c||² = 1 + ||p_c||² - 2||p_c|| cos(w, p_c)``: the
minimum over ``c`` is then biased towards small-norm prototypes and the distances' scale depends
on the encoder's output norm, which drifts during training. We therefore L2-normalise the
prototypes too (``normalize_prototypes=True``, the default), so that
``||w - p̂_c||² = 2 - 2 cos(w, p_c)``: the split depends on directions only and every distance
lies in ``[0, 2]``. The recommended prototypes are the class means of the *normalised* support
embeddings (:func:`~avalanche_sets.models.heads.prototypes` of
``F.normalize(support_emb, dim=-1)``); after the final normalisation only their direction
matters. ``normalize_prototypes=False`` reproduces the paper's literal mix.

**Standard deviation.** The population standard deviation (``ddof = 0``) of the query
distances; it is defined for a single query point (the threshold is then that distance).
``unbiased=True`` selects the sample standard deviation (needs ≥ 2 query points).

``rule="topk"`` is the reference code's choice: keep the ``n_id`` closest unlabeled points as ID
(it needs the number of ID points, which is oracle information in SETS; offered for ablations).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from .distance import squared_euclidean

__all__ = ["OOD_RULES", "OODSplit", "split_ood", "split_ood_batched", "id_first"]

#: Names accepted by ``rule=``.
OOD_RULES: tuple[str, ...] = ("threshold", "topk")


class OODSplit(NamedTuple):
    """Result of :func:`split_ood` (shapes without / with the batch dimension ``B``).

    Attributes:
        is_id: bool ``[U]`` / ``[B, U]``; True for ``U_id``, False for ``U_ood``.
        distances: ``[U]`` / ``[B, U]``, ``min_c ||w - p_c||`` of the unlabeled points.
        threshold: scalar / ``[B]``; ``mean + k·std`` of the query distances (``rule="topk"``:
            the largest distance kept as ID, ``-inf`` when none is kept).
        nearest: long ``[U]`` / ``[B, U]``, the arg-min class ``c`` of each unlabeled point.

    A split of one's own (:class:`~avalanche_sets.order.components.OODDetector`) needs only
    ``is_id`` and ``distances`` (its OOD score: larger is more OOD).
    """

    is_id: Tensor
    distances: Tensor
    threshold: Tensor | None = None
    nearest: Tensor | None = None


def id_first(is_id: Tensor) -> Tensor:
    """Indices ``[..., U]`` that put the ID points of ``is_id [..., U]`` first, OOD after.

    A stable sort keeps each group in its original order, so the first ``|U_id|`` indices are
    those ``is_id.nonzero()`` gives, in the same order: ``x.index_select(0, id_first(m)[:k])``
    equals ``x[m]`` for ``k = m.sum()``. Unlike a boolean-mask index, it has a fixed shape and
    does not read the device: a caller who knows ``k`` (from a shape, or one read for a whole
    meta-batch) selects ``U_id`` without a host synchronisation.
    """
    return torch.argsort((~is_id).to(torch.uint8), dim=-1, stable=True)


def _min_distance(w: Tensor, protos: Tensor) -> tuple[Tensor, Tensor]:
    """``min_c ||w - p_c||`` and the arg-min: ``[B, n, d]``, ``[B, N, d]`` -> ``[B, n]`` x2."""
    d2min, idx = squared_euclidean(w, protos, expand=True).min(-1)
    return d2min.sqrt(), idx


def split_ood(
    query_emb: Tensor,
    unlabeled_emb: Tensor,
    prototypes: Tensor,
    *,
    k: float = 1.0,
    rule: str = "threshold",
    n_id: int | None = None,
    normalize_prototypes: bool = True,
    unbiased: bool = False,
) -> OODSplit:
    """Split the unlabeled set into ID and OOD (paper Algorithm 1).

    Runs without gradient (a split is a discrete decision). Accepts one episode or a batch.

    Args:
        query_emb: ``[Q, d]`` or ``[B, Q, d]`` query embeddings (the ID calibration set; labels
            are not used). Ignored by ``rule="topk"``.
        unlabeled_emb: ``[U, d]`` or ``[B, U, d]``; ``U = 0`` is allowed.
        prototypes: ``[N, d]`` or ``[B, N, d]``.
        k: number of standard deviations above the mean (Algorithm 1: 1).
        rule: ``"threshold"`` (the paper) or ``"topk"`` (the reference code; needs ``n_id``).
        n_id: number of points kept as ID by ``rule="topk"`` (clipped to ``U``).
        normalize_prototypes: L2-normalise the prototypes as well as the embeddings (see the
            module docstring; default True).
        unbiased: sample (True) instead of population (False, default) standard deviation.

    Returns:
        :class:`OODSplit`. ``d <= threshold`` is ID (Algorithm 1 line 10: ``d > thresh`` is OOD).

    Raises:
        ValueError: bad shapes, unknown rule, missing ``n_id`` for ``topk``, an empty query set
            for ``threshold`` (no calibration data), no prototypes.
    """
    if rule not in OOD_RULES:
        raise ValueError(f"unknown OOD rule {rule!r}; valid rules are {list(OOD_RULES)}")
    batched = unlabeled_emb.dim() == 3
    _check_dims(batched, query_emb=query_emb, unlabeled_emb=unlabeled_emb, prototypes=prototypes)
    if not batched:
        out = split_ood(
            query_emb.unsqueeze(0),
            unlabeled_emb.unsqueeze(0),
            prototypes.unsqueeze(0),
            k=k,
            rule=rule,
            n_id=n_id,
            normalize_prototypes=normalize_prototypes,
            unbiased=unbiased,
        )
        return OODSplit(*(t[0] for t in out))
    _check_batch_shapes(query_emb, unlabeled_emb, prototypes)
    with torch.no_grad():
        dtype = torch.promote_types(unlabeled_emb.dtype, torch.float32)
        protos = prototypes.detach().to(dtype)
        if normalize_prototypes:
            protos = F.normalize(protos, dim=-1)
        if rule == "threshold":
            return _threshold_split(query_emb, unlabeled_emb, protos, dtype, k=k, unbiased=unbiased)
        return _topk_split(unlabeled_emb, protos, dtype, n_id=n_id)


def _check_dims(batched: bool, **tensors: Tensor) -> None:
    """Refuse a tensor without the batch dimension when the unlabeled one has it, or the reverse."""
    expected = 3 if batched else 2
    for name, t in tensors.items():
        if t.dim() != expected:
            raise ValueError(
                f"{name} must have {expected} dims ({'[B, n, d]' if batched else '[n, d]'}), "
                f"got {tuple(t.shape)}"
            )


def _check_batch_shapes(query_emb: Tensor, unlabeled_emb: Tensor, prototypes: Tensor) -> None:
    """Refuse batched inputs of different batch or feature sizes, or without prototypes."""
    b, _, d = unlabeled_emb.shape
    if prototypes.shape[0] != b or query_emb.shape[0] != b:
        raise ValueError("query_emb, unlabeled_emb and prototypes must share the batch size")
    if prototypes.shape[-1] != d or query_emb.shape[-1] != d:
        raise ValueError("query_emb, unlabeled_emb and prototypes must share the feature size")
    if prototypes.shape[1] == 0:
        raise ValueError("need at least one prototype")


def _threshold_split(
    query_emb: Tensor, unlabeled_emb: Tensor, protos: Tensor, dtype, *, k: float, unbiased: bool
) -> OODSplit:
    """``rule="threshold"``: ID when within ``mean + k·std`` of the query distances."""
    q = query_emb.shape[1]
    if q == 0 or (unbiased and q < 2):
        raise ValueError(
            f"rule='threshold' needs {'2' if unbiased else '1'}+ query points to calibrate, got {q}"
        )
    # the query (calibration) and unlabeled images in one pass: [B, Q + U]
    both = torch.cat([query_emb.detach(), unlabeled_emb.detach()], dim=1).to(dtype)
    dist, nearest = _min_distance(F.normalize(both, dim=-1), protos)
    dist_q, dist_u, nearest = dist[:, :q], dist[:, q:], nearest[:, q:]
    std = dist_q.std(dim=1, correction=1 if unbiased else 0)
    threshold = dist_q.mean(dim=1) + float(k) * std  # [B]
    is_id = dist_u <= threshold.unsqueeze(1)
    return OODSplit(is_id, dist_u, threshold, nearest)


def _topk_split(unlabeled_emb: Tensor, protos: Tensor, dtype, *, n_id: int | None) -> OODSplit:
    """``rule="topk"``: the ``n_id`` unlabeled points closest to a prototype are ID."""
    b, u, _ = unlabeled_emb.shape
    w_u = F.normalize(unlabeled_emb.detach().to(dtype), dim=-1)
    dist_u, nearest = _min_distance(w_u, protos)  # [B, U]
    if n_id is None or isinstance(n_id, bool) or int(n_id) != n_id or n_id < 0:
        raise ValueError(f"rule='topk' needs a non-negative integer n_id, got {n_id!r}")
    keep = min(int(n_id), u)
    is_id = torch.zeros_like(dist_u, dtype=torch.bool)
    if keep > 0:
        top = dist_u.topk(keep, dim=1, largest=False)
        is_id.scatter_(1, top.indices, True)
        threshold = top.values.max(dim=1).values
    else:
        threshold = dist_u.new_full((b,), float("-inf"))
    return OODSplit(is_id, dist_u, threshold, nearest)


def split_ood_batched(
    query_emb: Tensor,
    unlabeled_emb: Tensor,
    prototypes: Tensor,
    **kwargs,
) -> OODSplit:
    """:func:`split_ood` on a meta-batch: ``[B, Q, d]``, ``[B, U, d]``, ``[B, N, d]`` (alias
    that insists on the batch dimension)."""
    if unlabeled_emb.dim() != 3:
        raise ValueError(f"unlabeled_emb must be [B, U, d], got {tuple(unlabeled_emb.shape)}")
    return split_ood(query_emb, unlabeled_emb, prototypes, **kwargs)
