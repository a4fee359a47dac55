"""TPN: Transductive Propagation Network (Liu et al., ICLR 2019, "Learning to Propagate Labels:
Transductive Propagation Network for Few-shot Learning"), the label-propagation baseline of the
paper's Table 2.

Per episode, on the embeddings ``f_i`` of all its images (support, query and unlabeled):

1. **Graph construction.** A small network ``g`` gives every example its own length scale
   ``σ_i = g(f_i)``; ``W_ij = exp(−d(f_i/σ_i, f_j/σ_j) / 2)`` (:func:`gaussian_affinity`),
   ``W_ii = 0``.
2. **kNN sparsification.** Keep the ``k`` largest ``W_ij`` of every row and symmetrise
   (union of the kNN relations, :func:`knn_sparsify`).
3. **Normalisation.** ``S = D^{-1/2} W D^{-1/2}`` with ``D = diag(Σ_j W_ij)``
   (:func:`normalize_graph`).
4. **Propagation**, in closed form: ``F* = (I − αS)^{-1} Y`` with ``Y`` the one-hot support
   labels and zero rows for the query and unlabeled examples (:func:`label_propagation`).
   This is the paper's closed form; the iteration ``F ← αSF + (1−α)Y`` of Zhou et al. (2004)
   converges to ``(1−α) F*`` (same argmax).

The query rows of ``F*`` are the logits; the meta-loss is their softmax cross-entropy.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..data.episodes import EpisodeBatch
from ..functional.distance import squared_euclidean
from ..models.backbone import autocast_bf16, embed_episodes
from .meta import EpisodicBaseline, embedding_dim

__all__ = [
    "gaussian_affinity",
    "knn_sparsify",
    "normalize_graph",
    "label_propagation",
    "TPNModel",
    "TPN",
    "SIGMA_MODES",
]


#: How :class:`TPNModel` makes ``σ`` from its network's output.
SIGMA_MODES = ("exp", "raw")
_RAW_EPS = float(torch.finfo(torch.float64).eps)


def _eye_like(w: Tensor) -> Tensor:
    return torch.eye(w.shape[-1], dtype=torch.bool, device=w.device)


def gaussian_affinity(emb: Tensor, sigma: Tensor, *, self_loops: bool = False) -> Tensor:
    """``W_ij = exp(−d(f_i/σ_i, f_j/σ_j) / 2)``, zero on the diagonal unless ``self_loops``.

    Args:
        emb: ``[..., n, d]`` embeddings ``f``; sigma: ``[..., n]`` non-zero length scales.
        self_loops: keep ``W_ii = exp(0) = 1`` (the authors' code) instead of 0 (Zhou et al.).

    ``d`` is the squared Euclidean distance divided by the embedding size ``d`` (the mean
    squared difference per dimension, as the authors' code computes it): the paper's ``d``
    with ``σ`` rescaled by ``√d``, which keeps ``W`` away from underflow for a
    few-hundred-dimensional embedding at initialisation.
    """
    x = emb.float() / sigma.float().unsqueeze(-1)
    w = torch.exp(-0.5 * squared_euclidean(x, x) / emb.shape[-1])
    if self_loops:
        # the distance of a row to itself is 0 up to float error: make it exactly 1
        return w.masked_fill(_eye_like(w), 1.0)
    return w.masked_fill(_eye_like(w), 0.0)


def knn_sparsify(w: Tensor, k: int | None, *, self_loops: bool = False) -> Tensor:
    """Keep, in every row, the ``k`` largest off-diagonal entries of ``w`` (its k nearest
    neighbours), then symmetrise: ``W_ij`` survives if ``j`` is among the kNN of ``i`` or ``i``
    among those of ``j``. ``k = None`` or ``k ≥ n − 1`` keeps the dense graph.

    ``self_loops=True`` (the authors' code): the diagonal competes in the top-k like any other
    entry, so a row with ``W_ii = 1`` keeps itself and ``k − 1`` others."""
    n = w.shape[-1]
    if k is None or k >= n - (0 if self_loops else 1):
        return w
    if k < 1:
        raise ValueError(f"k must be a positive number of neighbours (or None), got {k!r}")
    ranked = w if self_loops else w.masked_fill(_eye_like(w), float("-inf"))
    idx = ranked.topk(k, dim=-1).indices
    mask = torch.zeros_like(w).scatter_(-1, idx, 1.0)
    return w * torch.maximum(mask, mask.transpose(-1, -2))


def normalize_graph(w: Tensor, eps: float = 1e-8) -> Tensor:
    """``S = D^{-1/2} W D^{-1/2}`` with ``D = diag(Σ_j W_ij)``."""
    d = (w.sum(-1) + eps).rsqrt()
    return d.unsqueeze(-1) * w * d.unsqueeze(-2)


def label_propagation(s: Tensor, y: Tensor, alpha: float) -> Tensor:
    """Closed-form label propagation ``F* = (I − αS)^{-1} Y`` (``[..., n, n]``, ``[..., n, N]``).

    Equals ``(1 − α)^{-1}`` times the fixed point of ``F ← αSF + (1 − α)Y``.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    eye = torch.eye(s.shape[-1], dtype=s.dtype, device=s.device)
    return torch.linalg.solve(eye - alpha * s, y.to(s.dtype))


class TPNModel(nn.Module):
    """TPN's episodic model: backbone, graph-construction network, label propagation.

    Args:
        backbone: maps images to ``[n, d]`` embeddings.
        alpha: propagation coefficient α: 0.9 (the paper: 0.99). ``F*`` is dominated by the
            leading eigenvector of ``S`` — the same class ranking for every query — unless the
            graph splits into one component per class, and the weight of that eigenvector grows
            like ``1/(1 − α)``: on gtsrb (5-shot) propagation at 0.99 costs 9 points on TPN's own
            trained backbone, whose prototypes match ProtoNet's, and TPN trained with 0.9 is level
            with ProtoNet instead of 8.5 points below (docs/verification/baselines.md).
        k: neighbours kept per row (paper: 20); ``None`` for the dense graph.
        sigma_hidden: hidden sizes of the graph-construction MLP ``g`` (``d → 64 → 8 → 1``,
            mirroring the two fully connected layers of 8 and 1 units of the paper's ``g``).
        emb_dim: embedding size (default ``backbone.out_dim``). bf16: autocast the backbone.
        sigma_mode: ``"exp"`` (default): ``σ_i = exp(g(f_i))``, positive, ``g``'s last layer
            starts at zero so ``σ = 1`` at initialisation; ``"raw"`` (the authors' code):
            ``σ_i = g(f_i)`` as it comes out of ``g`` (PyTorch's default initialisation, small
            and of either sign), the embeddings divided by ``σ_i + ε``.
        self_loops: ``W_ii = 1`` and the diagonal kept in the top-k (the authors' code)
            instead of ``W_ii = 0`` (Zhou et al. 2004, the default).

    ``forward(batch)`` returns the query rows of ``F*``, ``[B*N*Q, N]``; ``last_support_logits``
    keeps the support rows ``[B*N*K, N]`` of the same call (with their graph: :class:`TPN`'s
    ``support_loss`` trains on them), ``last_graph`` the normalised graph ``S`` ``[B, n, n]``,
    detached (node order: support, query, unlabeled).
    """

    def __init__(
        self,
        backbone: nn.Module,
        *,
        alpha: float = 0.9,
        k: int | None = 20,
        sigma_hidden: tuple[int, ...] = (64, 8),
        emb_dim: int | None = None,
        bf16: bool = False,
        sigma_mode: Literal["exp", "raw"] = "exp",
        self_loops: bool = False,
    ) -> None:
        super().__init__()
        if sigma_mode not in SIGMA_MODES:
            raise ValueError(f"sigma_mode must be one of {SIGMA_MODES}, got {sigma_mode!r}")
        if not 0 < alpha < 1:
            raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
        if k is not None and (not isinstance(k, int) or k < 1):
            raise ValueError(f"k must be a positive integer or None, got {k!r}")
        self.backbone = backbone
        self.alpha = float(alpha)
        self.k = k
        self.bf16 = bool(bf16)
        self.sigma_mode = sigma_mode
        self.self_loops = bool(self_loops)
        sizes = [embedding_dim(backbone, emb_dim), *sigma_hidden]
        layers: list[nn.Module] = []
        for a, b in zip(sizes[:-1], sizes[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        last = nn.Linear(sizes[-1], 1)
        if sigma_mode == "exp":
            nn.init.zeros_(last.weight)
            nn.init.zeros_(last.bias)
        self.sigma_net = nn.Sequential(*layers, last)
        self.last_graph: Tensor | None = None
        self.last_support_logits: Tensor | None = None

    def sigma(self, emb: Tensor) -> Tensor:
        """Per-example length scales ``[..., n]``: ``exp(g(f))`` (log-scale clamped to ±10), or
        with ``sigma_mode="raw"`` ``g(f) + ε`` (the authors' ``ε``, float64's machine epsilon)."""
        out = self.sigma_net(emb).squeeze(-1)
        if self.sigma_mode == "raw":
            return out + _RAW_EPS
        return out.clamp(-10.0, 10.0).exp()

    def graph(self, emb: Tensor) -> Tensor:
        """Normalised kNN graph ``S`` ``[..., n, n]`` of the embeddings ``[..., n, d]``."""
        w = gaussian_affinity(emb, self.sigma(emb), self_loops=self.self_loops)
        return normalize_graph(knn_sparsify(w, self.k, self_loops=self.self_loops))

    def forward(self, batch: EpisodeBatch) -> Tensor:
        with autocast_bf16(self.bf16):
            s, q, u = embed_episodes(
                self.backbone, [batch.support_x, batch.query_x, batch.unlabeled_x]
            )
        n_way = batch.n_way
        n_s, n_q = s.shape[1], q.shape[1]
        with torch.autocast(s.device.type, enabled=False):
            emb = torch.cat([s, q, u], dim=1).float()
            graph = self.graph(emb)
            y = torch.zeros(*emb.shape[:2], n_way, dtype=emb.dtype, device=emb.device)
            y[:, :n_s] = F.one_hot(batch.support_y.long(), n_way).to(emb.dtype)
            f_star = label_propagation(graph, y, self.alpha)
        self.last_graph = graph.detach()
        self.last_support_logits = f_star[:, :n_s].reshape(-1, n_way)
        return f_star[:, n_s : n_s + n_q].reshape(-1, n_way)


class TPN(EpisodicBaseline):
    """Transductive Propagation Network (Liu, Lee, Park, Kim, Yang, Hwang & Yang, ICLR 2019).

    Learns the embedding and a per-example length scale of a Gaussian kNN graph over all the
    images of an episode, and propagates the support labels over it in closed form (see the
    module docstring and :class:`TPNModel`). Semi-supervised as in the paper's §4.4: the
    unlabeled images are extra nodes of the graph. Adapted to SETS unchanged: *all* unlabeled
    images, OOD included, join the graph — no filtering (the kNN sparsification is the only
    thing that may isolate distractors).

    Differences from the authors' code (TPN-pytorch), each but the first available as an
    option so that its effect can be measured (documentation: "Baselines against their own
    papers"; the defaults are ours):

    * ``g`` is an MLP on the flattened embedding instead of two conv blocks on the last feature
      map followed by the FC layers: the CPU backbones' last maps are 2×2, too small for convs.
    * ``α = 0.9`` instead of 0.99 (see :class:`TPNModel`: at 0.99 the propagation, not the
      embedding, held TPN 8.5 points below ProtoNet on a sets-mini domain).
    * ``σ = exp(g(f))``, starting at 1, instead of ``g``'s raw output (``sigma_mode="raw"``).
    * ``W_ii = 0`` as in the label propagation of Zhou et al. (2004) that TPN builds on (an
      example is not its own neighbour); the authors keep ``W_ii = 1`` and let it take one of
      the ``k`` places (``self_loops=True``).
    * The meta-loss is the cross-entropy of the query rows only (the template's criterion); the
      authors' also includes the support rows (``support_loss=True``).

    As in the authors' code, ``d`` is the *mean* squared difference per dimension (the paper
    writes the sum), see :func:`gaussian_affinity`.

    Args:
        model: default :class:`TPNModel` built from ``model_options``, its keyword options
            (``TPN(model_options={"alpha": 0.99})``, the paper's; ``backbone`` default
            :func:`~avalanche_sets.models.cpu_backbone`).
        support_loss: train on the cross-entropy of the support and query rows of ``F*``
            together (one mean over all of them, as the authors' code), not the query rows only.
        optimizer / lr: default Adam(lr = 1e-3). **kwargs: :class:`EpisodicBaseline`.

    Raises:
        ValueError: ``support_loss=True`` with a ``model`` that does not keep
            ``last_support_logits`` (a :class:`TPNModel` does).
    """

    name = "tpn"
    summary = (
        "transductive propagation network (Liu et al. 2019): learned σ, kNN graph over "
        "support, queries and unlabeled images, closed-form label propagation"
    )

    model_class = TPNModel

    def __init__(self, *, support_loss: bool = False, **kwargs) -> None:
        self.support_loss = bool(support_loss)
        super().__init__(**kwargs)
        if self.support_loss and not hasattr(self.model, "last_support_logits"):
            raise ValueError(
                f"support_loss=True needs a model that keeps the support rows of F* as "
                f"last_support_logits (TPNModel does); {type(self.model).__name__} does not. "
                "Fix: pass no model, a TPNModel, or support_loss=False"
            )

    def criterion(self):
        if not (self.support_loss and self.is_training):
            return super().criterion()
        # one mean over the support and query rows, as the authors' loss over F
        logits = torch.cat([self.model.last_support_logits, self.mb_output])
        labels = torch.cat([self.mb_x.support_y.reshape(-1).long(), self.mb_y.long()])
        return self.plus_terms_of(self.meta_term(F.cross_entropy(logits, labels)), *self.plugins)
