"""Squared Euclidean distances between two point sets: the one implementation behind the
prototype heads' logits and refinements, the OT feature loss's cost, the OOD split's distances
and the MI term's prototype pairing."""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["squared_euclidean"]

# Above this many elements of the [..., n, m, d] difference tensor, ``expand=None`` switches from
# the broadcast form to the (matrix-product) expansion, to bound memory.
_BROADCAST_LIMIT = 1 << 22


def squared_euclidean(x: Tensor, y: Tensor, *, expand: bool | None = None) -> Tensor:
    """Squared Euclidean distances ``D[..., i, j] = ‖x_i − y_j‖²``.

    Args:
        x: ``[..., n, d]`` points.
        y: ``[..., m, d]`` points, cast to ``x``'s dtype; the leading dimensions ``[...]``
            broadcast against ``x``'s.
        expand: which of the two forms computes ``D`` (they round differently, so each
            caller keeps one):

            * ``False``: the broadcast difference ``Σ_k (x_ik − y_jk)²``; exact zero for
              identical points, memory ``O(n·m·d)``;
            * ``True``: the expansion ``‖x_i‖² + ‖y_j‖² − 2 x_i·y_j`` (one matrix product,
              memory ``O(n·m)``), clamped at 0 so rounding never gives a negative distance;
            * ``None`` (default): the broadcast form while the difference tensor
              ``[..., n, m, d]`` has at most 2²² elements, the expansion above.

    Returns:
        ``[..., n, m]`` in ``x``'s dtype, differentiable in ``x`` and ``y``. Computed with
        autocast off, so a caller inside a bfloat16 autocast region still gets distances in
        ``x``'s precision.

    Raises:
        ValueError: ``x`` and ``y`` have different feature sizes ``d``.
    """
    if x.shape[-1] != y.shape[-1]:
        raise ValueError(
            f"feature sizes differ: x {tuple(x.shape)} vs y {tuple(y.shape)} (expected "
            "[..., n, d] and [..., m, d])"
        )
    with torch.autocast(x.device.type, enabled=False):
        y = y.to(x.dtype)
        if expand is None:
            n, m, d = x.shape[-2], y.shape[-2], x.shape[-1]
            lead = torch.broadcast_shapes(x.shape[:-2], y.shape[:-2])
            expand = math.prod(lead) * n * m * d > _BROADCAST_LIMIT
        if not expand:
            return (x.unsqueeze(-2) - y.unsqueeze(-3)).pow(2).sum(-1)
        x2 = x.pow(2).sum(-1, keepdim=True)  # [..., n, 1]
        y2 = y.pow(2).sum(-1).unsqueeze(-2)  # [..., 1, m]
        return (x2 + y2 - 2.0 * x @ y.transpose(-1, -2)).clamp_min(0.0)
