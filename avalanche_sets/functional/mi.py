"""Mutual-information bounds of ORDER (paper §4.2, Theorems 1 and 3; design note §3.4).

ORDER pairs every unlabeled embedding ``e`` with its nearest prototype ``p_{c'}``,
``c' = argmin_c ||e - p_c||`` (:func:`pair_with_prototypes`), and adds
``λ (I_ood - I_id)`` to the meta loss (paper Eq. (tractable-meta+mi)):

* ``I_ood`` — an upper bound of ``I(e_ood; p_{c'})`` (Theorem 1, CLUB of Cheng et al. 2020)
  with a variational Gaussian ``q_φ(p | e)`` (:class:`GaussianConditional`), minimised by the
  encoder. Sample form, normalised by ``L`` and ``L²``::

      I_ood = mean_i log q(p_i | e_i) - mean_{i,j} log q(p_i | e_j)

* ``I_id`` — a lower bound of ``I(e_id; p_{c'})`` (Theorem 3, the TUBA bound of Poole et al.
  2019 with ``a(p) = 1``) with a critic ``f_ψ(e, p)`` (:class:`Critic`), maximised by the
  encoder::

      I_id = mean_i f(e_i, p_i) - mean_j mean_i exp(f(e_i, p_j)) + 1

``φ`` is fitted by maximum likelihood on the OOD pairs and ``ψ`` by maximising ``I_id`` on the
ID pairs, each with its own optimiser, on detached pairs (:class:`MIEstimator`).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .distance import squared_euclidean
from .fused_adam import adam_step

__all__ = [
    "GaussianConditional",
    "Critic",
    "club_upper_bound",
    "tuba_lower_bound",
    "nearest_prototype",
    "pair_with_prototypes",
    "PairMask",
    "pair_mask",
    "MIEstimator",
]

_LOG_2PI = math.log(2.0 * math.pi)


class GaussianConditional(nn.Module):
    """Variational conditional ``q_φ(p | e) = N(μ(e), diag σ²(e))`` (Theorem 1's ``Z_φ``).

    Two MLPs ``e -> hidden -> p_dim`` give the mean and the log-variance; the log-variance is
    squashed into ``[min_logvar, max_logvar]`` with a sigmoid so that a near-deterministic
    relation ``e -> p`` (the nearest prototype is a function of ``e``) cannot drive
    ``log q`` to infinity.

    Args:
        e_dim: size of ``e``.
        p_dim: size of ``p`` (default ``e_dim``).
        hidden: hidden units of each MLP.
        min_logvar, max_logvar: bounds of ``log σ²``.
    """

    def __init__(
        self,
        e_dim: int,
        p_dim: int | None = None,
        *,
        hidden: int = 64,
        min_logvar: float = -6.0,
        max_logvar: float = 4.0,
    ) -> None:
        super().__init__()
        p_dim = e_dim if p_dim is None else p_dim
        if e_dim < 1 or p_dim < 1 or hidden < 1:
            raise ValueError("e_dim, p_dim and hidden must be positive")
        if not min_logvar < max_logvar:
            raise ValueError("min_logvar must be smaller than max_logvar")
        self.e_dim, self.p_dim = int(e_dim), int(p_dim)
        self.min_logvar, self.max_logvar = float(min_logvar), float(max_logvar)
        self.mu_net = nn.Sequential(nn.Linear(e_dim, hidden), nn.ReLU(), nn.Linear(hidden, p_dim))
        self.logvar_net = nn.Sequential(
            nn.Linear(e_dim, hidden), nn.ReLU(), nn.Linear(hidden, p_dim)
        )

    def forward(self, e: Tensor, *, frozen: bool = False) -> tuple[Tensor, Tensor]:
        """Mean and log-variance of ``q(· | e)``: ``e [..., L, e_dim]`` -> two
        ``[..., L, p_dim]``. ``frozen``: the networks' parameters enter as constants (no
        gradient flows into them)."""
        mu = _mlp(self.mu_net, e, frozen)
        span = self.max_logvar - self.min_logvar
        logvar = self.min_logvar + span * torch.sigmoid(_mlp(self.logvar_net, e, frozen))
        return mu, logvar

    def log_prob(self, p: Tensor, e: Tensor, *, frozen: bool = False) -> Tensor:
        """``log q(p_i | e_i)`` for paired rows: ``p [..., L, p_dim]``, ``e [..., L, e_dim]``
        -> ``[..., L]``."""
        mu, logvar = self(e, frozen=frozen)
        return -0.5 * (((p - mu) ** 2) * torch.exp(-logvar) + logvar + _LOG_2PI).sum(-1)

    def log_prob_matrix(self, p: Tensor, e: Tensor, *, frozen: bool = False) -> Tensor:
        """All cross terms: entry ``(i, j)`` is ``log q(p_i | e_j)``, shape ``[..., L_p, L_e]``.

        Vectorised with matrix products (memory ``O(L² + L d)``): with ``s_j = σ_j^{-2}``,
        ``Σ_k (p_ik - μ_jk)² s_jk = (p²) sᵀ - 2 p (μ s)ᵀ + Σ_k μ_jk² s_jk``.
        """
        mu, logvar = self(e, frozen=frozen)
        prec = torch.exp(-logvar)  # [..., L_e, d]
        quad = (
            (p * p) @ prec.transpose(-1, -2)
            - 2.0 * p @ (mu * prec).transpose(-1, -2)
            + (mu * mu * prec).sum(-1).unsqueeze(-2)
        )
        quad = quad.clamp_min(0.0)
        norm = (logvar.sum(-1) + self.p_dim * _LOG_2PI).unsqueeze(-2)
        return -0.5 * (quad + norm)

    def nll(self, p: Tensor, e: Tensor) -> Tensor:
        """Mean negative log-likelihood ``-mean_i log q(p_i | e_i)`` (maximum-likelihood loss)."""
        return -self.log_prob(p, e).mean()


class Critic(nn.Module):
    """Critic ``f_ψ(e, p)`` of Theorem 3: an MLP on ``concat(e, p)`` with one hidden layer.

    The paper uses 10 hidden units. ``f(e, p) = w₂ᵀ act(W_e e + W_p p + b₁) + b₂``; the first
    layer is split into its ``e`` and ``p`` blocks so that :meth:`score_matrix` evaluates all
    ``L²`` pairs by broadcasting instead of a Python loop.

    Args:
        e_dim: size of ``e``.
        p_dim: size of ``p`` (default ``e_dim``).
        hidden: hidden units (paper: 10).
        activation: hidden non-linearity factory (default :class:`torch.nn.ReLU`).
    """

    def __init__(
        self,
        e_dim: int,
        p_dim: int | None = None,
        *,
        hidden: int = 10,
        activation: Callable[[], nn.Module] = nn.ReLU,
    ) -> None:
        super().__init__()
        p_dim = e_dim if p_dim is None else p_dim
        if e_dim < 1 or p_dim < 1 or hidden < 1:
            raise ValueError("e_dim, p_dim and hidden must be positive")
        self.e_dim, self.p_dim = int(e_dim), int(p_dim)
        self.hidden = nn.Linear(e_dim + p_dim, hidden)
        self.act = activation()
        self.out = nn.Linear(hidden, 1)

    def forward(self, e: Tensor, p: Tensor) -> Tensor:
        """Paired scores ``f(e_i, p_i)``: ``e [L, e_dim]``, ``p [L, p_dim]`` -> ``[L]``."""
        return self.out(self.act(self.hidden(torch.cat([e, p], dim=-1)))).squeeze(-1)

    def score_matrix(self, e: Tensor, p: Tensor, *, frozen: bool = False) -> Tensor:
        """All pairs: entry ``(i, j)`` is ``f(e_i, p_j)``, shape ``[..., L_e, L_p]`` for
        ``e [..., L_e, e_dim]``, ``p [..., L_p, p_dim]``. ``frozen``: the critic's parameters
        enter as constants."""
        w, b = _param(self.hidden.weight, frozen), _param(self.hidden.bias, frozen)
        w_out, b_out = _param(self.out.weight, frozen), _param(self.out.bias, frozen)
        he = e @ w[:, : self.e_dim].T  # [..., L_e, H]
        hp = p @ w[:, self.e_dim :].T + b  # [..., L_p, H]
        h = self.act(he.unsqueeze(-2) + hp.unsqueeze(-3))  # [..., L_e, L_p, H]
        return (h @ w_out.squeeze(0)) + b_out


def _param(t: Tensor, frozen: bool) -> Tensor:
    return t.detach() if frozen else t


def _mlp(net: nn.Sequential, x: Tensor, frozen: bool) -> Tensor:
    """``Linear → activation → Linear`` of ``net`` on ``x``, its parameters as constants when
    ``frozen`` (the same arithmetic as calling ``net``)."""
    first, act, last = net
    x = F.linear(x, _param(first.weight, frozen), _param(first.bias, frozen))
    return F.linear(act(x), _param(last.weight, frozen), _param(last.bias, frozen))


def _check_pairs(e: Tensor, p: Tensor, mask: Tensor | None = None) -> None:
    if e.dim() < 2 or e.shape[:-1] != p.shape[:-1]:
        raise ValueError(
            f"e and p must be paired [..., L, d] tensors, got {tuple(e.shape)} and {tuple(p.shape)}"
        )
    if mask is not None and (mask.dtype != torch.bool or mask.shape != e.shape[:-1]):
        raise ValueError(
            f"mask must be a bool [..., L] tensor of shape {tuple(e.shape[:-1])}, got "
            f"{mask.dtype} {tuple(mask.shape)}"
        )


class PairMask(NamedTuple):
    """Which rows of fixed-shape sets ``[..., L]`` are pairs, as the weights of the bounds'
    two means (:func:`pair_mask`): build it once per mask and hand it to every bound over it.

    Attributes:
        diagonal: ``[..., L]``, ``1/k`` on the ``k`` kept rows (``mean_i``).
        pairs: ``[..., L, L]``, ``1/k²`` on the kept ``(i, j)`` (``mean_{i,j}``).
        count: ``[...]``, ``k``.
    """

    diagonal: Tensor
    pairs: Tensor
    count: Tensor


def pair_mask(mask: Tensor, dtype: torch.dtype = torch.float32) -> PairMask:
    """The :class:`PairMask` of a bool ``mask [..., L]``."""
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must be a bool tensor, got {mask.dtype}")
    m = mask.to(dtype)
    count = m.sum(-1)
    w = m / count.clamp_min(1.0).unsqueeze(-1)
    return PairMask(diagonal=w, pairs=w.unsqueeze(-1) * w.unsqueeze(-2), count=count)


def _pair_means(
    matrix: Tensor, mask: PairMask | None, *, diagonal: bool = True
) -> tuple[Tensor | None, Tensor, Tensor]:
    """Means over the pairs ``mask`` keeps of ``matrix [..., L, L]``: the diagonal's
    (``mean_i m_ii``; ``None`` unless ``diagonal``), all pairs' (``mean_{i,j} m_ij``) and the
    number of kept rows."""
    diag = torch.diagonal(matrix, dim1=-2, dim2=-1)
    if mask is None:
        n = matrix.shape[-1]
        count = matrix.new_full(matrix.shape[:-2], float(n))
        diag_mean = diag.sum(-1) / max(n, 1) if diagonal else None
        return diag_mean, matrix.sum((-2, -1)) / max(n * n, 1), count
    diag_mean = (diag * mask.diagonal).sum(-1) if diagonal else None
    return diag_mean, (matrix * mask.pairs).sum((-2, -1)), mask.count


def _as_pair_mask(mask: Tensor | PairMask | None, e: Tensor) -> PairMask | None:
    if mask is None or isinstance(mask, PairMask):
        return mask
    _check_pairs(e, e, mask)
    return pair_mask(mask, e.dtype)


def club_upper_bound(
    q: GaussianConditional,
    e: Tensor,
    p: Tensor,
    mask: Tensor | PairMask | None = None,
    *,
    frozen: bool = False,
    min_pairs: int = 2,
) -> Tensor:
    """``I_ood`` of Theorem 1 (CLUB): ``mean_i log q(p_i|e_i) - mean_{i,j} log q(p_i|e_j)``.

    With the true conditional in place of ``q`` it upper-bounds ``I(e; p)`` (Jensen, proof of
    Theorem 1); with a fitted ``q`` it is the variational estimate of the paper.

    Args:
        q: the variational conditional.
        e: ``[..., L, e_dim]`` embeddings, p: ``[..., L, p_dim]`` their paired prototypes;
            leading dimensions are independent sets (e.g. the episodes of a meta-batch).
        mask: bool ``[..., L]``, the rows of each set that are its pairs (a fixed-shape set of
            any size), or its :func:`pair_mask`; ``None``: every row.
        frozen: ``q``'s parameters as constants (the encoder's term).
        min_pairs: sets of fewer pairs give 0 (at least 2).

    Returns:
        ``[...]``; 0 for a set of fewer than ``min_pairs`` pairs (one sample cannot tell the joint from
        the product of marginals: the two terms coincide).
    """
    _check_pairs(e, p)
    lp = q.log_prob_matrix(p, e, frozen=frozen)  # [..., L, L], (i, j) = log q(p_i | e_j)
    diag, full, count = _pair_means(lp, _as_pair_mask(mask, e))
    return (diag - full) * (count >= min_pairs).to(full.dtype)


def tuba_lower_bound(
    critic: Critic,
    e: Tensor,
    p: Tensor,
    mask: Tensor | PairMask | None = None,
    *,
    clamp: float | None = 10.0,
    frozen: bool = False,
    min_pairs: int = 2,
) -> Tensor:
    """``I_id`` of Theorem 3 with ``a(p) = 1`` (TUBA / NWJ-type bound).

    ``I_id = mean_i f(e_i, p_i) - mean_j mean_i exp(f(e_i, p_j)) + 1``; the double mean runs
    over all ``L²`` pairs ``(e_i, p_j)`` as samples of ``p(e) p(p)``.

    ``clamp``: the critic is clamped from above, ``f <- min(f, clamp)``, **in both terms**
    before ``exp``. ``min(f, clamp)`` is itself a critic, so the result is still a valid lower
    bound (Theorem 3 holds for any ``f``); clamping only inside ``exp`` would not be (the first
    term could then grow without bound). It keeps ``exp`` from overflowing and bounds the
    variance of the ``exp(f)`` term, which otherwise grows like ``e^{I}`` and makes the
    gradient explode early in training. ``None`` disables it.

    Args:
        critic: ``f_ψ``.
        e: ``[..., L, e_dim]`` ID embeddings, p: ``[..., L, p_dim]`` their paired prototypes.
        mask: bool ``[..., L]``, the rows that are pairs, or its :func:`pair_mask`
            (``None``: every row).
        frozen: the critic's parameters as constants (the encoder's term).
        min_pairs: sets of fewer pairs give 0 (at least 2).

    Returns:
        ``[...]``; 0 for a set of fewer than ``min_pairs`` pairs (no product-of-marginals
        samples distinct from the joint).
    """
    _check_pairs(e, p)
    mask = _as_pair_mask(mask, e)
    scores = critic.score_matrix(e, p, frozen=frozen)  # [..., L, L], (i, j) = f(e_i, p_j)
    if clamp is not None:
        scores = scores.clamp(max=float(clamp))
    diag, _, count = _pair_means(scores, mask)
    _, exp_mean, _ = _pair_means(torch.exp(scores), mask, diagonal=False)
    return (diag - exp_mean + 1.0) * (count >= min_pairs).to(exp_mean.dtype)


def nearest_prototype(embeddings: Tensor, prototypes: Tensor) -> Tensor:
    """``c' = argmin_c ||e - p_c||`` for each row: ``[..., L, d]``, ``[..., N, d]`` -> ``[..., L]``.

    A tie (a row within rounding error of several prototypes: distance 0 to each) goes to the
    lowest index ``c``."""
    if embeddings.shape[-1] != prototypes.shape[-1]:
        raise ValueError("embeddings and prototypes must have the same feature size")
    if prototypes.shape[-2] == 0:
        raise ValueError("need at least one prototype")
    with torch.no_grad():
        d2 = squared_euclidean(embeddings.detach(), prototypes.detach(), expand=True)
        return d2.argmin(-1)


def pair_with_prototypes(embeddings: Tensor, prototypes: Tensor) -> Tensor:
    """The nearest prototype of each embedding, ``p_{c'}`` (paper Eq. (meta+mi)).

    Args:
        embeddings: ``[L, d]`` (or ``[B, L, d]``).
        prototypes: ``[N, d]`` (or ``[B, N, d]``).

    Returns:
        ``[L, d]`` (or ``[B, L, d]``): row ``i`` is ``prototypes[argmin_c ||e_i - p_c||]``;
        differentiable w.r.t. ``prototypes`` (the selection itself is not).
    """
    idx = nearest_prototype(embeddings, prototypes)
    if prototypes.dim() == 2:
        return prototypes[idx]
    return torch.gather(prototypes, -2, idx.unsqueeze(-1).expand(*idx.shape, prototypes.shape[-1]))


class MIEstimator(nn.Module):
    """The two variational networks of ORDER with their own optimisers.

    * :meth:`fit_step` — one optimisation step on **detached** pairs: ``q_φ`` by maximum
      likelihood on the OOD pairs, the critic ``f_ψ`` by maximising ``I_id`` on the ID pairs.
    * :meth:`bounds` — ``(I_ood, I_id)`` for the encoder, whose regulariser is ``λ (I_ood −
      I_id)``; the networks' parameters are constants in that graph, the gradient flows only
      into the embeddings and prototypes.

    Sets with fewer than ``min_pairs`` pairs contribute 0 (and are skipped by ``fit_step``).
    Optimiser states travel with ``state_dict()`` (as the module's extra state).

    Args:
        e_dim: embedding size (``p_dim`` defaults to it).
        q_hidden: hidden units of ``q_φ``. critic_hidden: hidden units of ``f_ψ`` (paper: 10).
        lr_q, lr_critic: Adam learning rates.
        clamp: critic clamp of :func:`tuba_lower_bound`.
        min_pairs: minimum set size for a bound to be computed (≥ 2).
        device: where the networks and their optimiser states live. The networks are
            initialised on the CPU (the same numbers on every device, from the caller's CPU
            RNG), moved there, and only then given their optimisers, which therefore track
            the parameters on that device (``module.to`` may replace parameter objects).
    """

    def __init__(
        self,
        e_dim: int,
        p_dim: int | None = None,
        *,
        q_hidden: int = 64,
        critic_hidden: int = 10,
        lr_q: float = 1e-3,
        lr_critic: float = 1e-3,
        clamp: float | None = 10.0,
        min_pairs: int = 2,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        if min_pairs < 2:
            raise ValueError(f"min_pairs must be at least 2, got {min_pairs}")
        self.q = GaussianConditional(e_dim, p_dim, hidden=q_hidden)
        self.critic = Critic(e_dim, p_dim, hidden=critic_hidden)
        self.clamp = clamp
        self.min_pairs = int(min_pairs)
        if device is not None:
            self.q.to(device)
            self.critic.to(device)
        self.opt_q = torch.optim.Adam(self.q.parameters(), lr=lr_q, fused=True)
        self.opt_critic = torch.optim.Adam(self.critic.parameters(), lr=lr_critic, fused=True)

    def fit_step(
        self,
        e_id: Tensor | None,
        p_id: Tensor | None,
        e_ood: Tensor | None,
        p_ood: Tensor | None,
        *,
        id_mask: Tensor | None = None,
        ood_mask: Tensor | None = None,
    ) -> dict[str, Tensor]:
        """One step of each optimiser on detached pairs: ``q_φ`` by maximum likelihood on the
        OOD pairs, the critic by maximising ``I_id`` on the ID pairs.

        Args:
            e_id, p_id / e_ood, p_ood: ``[L, d]`` pairs (``None``: no such pairs).
            id_mask / ood_mask: bool ``[L]``, the rows that are pairs (``None``: every row), so
                a fixed-shape set can hold any number of them.

        Both losses go through one backward pass and each network takes one fused Adam step
        (:func:`~avalanche_sets.functional.fused_adam.adam_step`); a network whose set
        has fewer than ``min_pairs`` pairs skips its step on the device. Nothing is read on the
        host.

        Returns:
            ``{"nll": ..., "i_id": ...}`` — the values before the step as detached 0-d tensors
            (NaN where skipped).
        """
        e_ood, p_ood, ood_mask = self._set(e_ood, p_ood, ood_mask)
        e_id, p_id, id_mask = self._set(e_id, p_id, id_mask)
        with torch.enable_grad():
            m = ood_mask.to(e_ood.dtype)
            n_ood = m.sum()
            nll = -(self.q.log_prob(p_ood, e_ood) * m).sum() / n_ood.clamp_min(1.0)
            id_pairs = pair_mask(id_mask, e_id.dtype)
            bound = tuba_lower_bound(
                self.critic, e_id, p_id, id_pairs, clamp=self.clamp, min_pairs=self.min_pairs
            )
            q_params, c_params = list(self.q.parameters()), list(self.critic.parameters())
            # retain_graph: the fit's graph is its own (detached inputs) and dies with this
            # call; retaining it lets a compiled step trace the call beside the encoder's graph
            grads = torch.autograd.grad(nll - bound, q_params + c_params, retain_graph=True)
        skip_q = n_ood < self.min_pairs
        skip_c = id_pairs.count < self.min_pairs
        adam_step(self.opt_q, grads[: len(q_params)], found_inf=skip_q.float())
        adam_step(self.opt_critic, grads[len(q_params) :], found_inf=skip_c.float())
        nan = torch.full_like(nll, float("nan"))
        return {
            "nll": torch.where(skip_q, nan, nll).detach(),
            "i_id": torch.where(skip_c, nan, bound).detach(),
        }

    def _set(
        self, e: Tensor | None, p: Tensor | None, mask: Tensor | None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Detached ``[L, d]`` pairs and their mask; an absent set is one masked-out row."""
        if e is None or p is None:
            ref = self.critic.out.bias
            dim = self.q.e_dim
            zero = ref.new_zeros((1, dim))
            return zero, zero, torch.zeros(1, dtype=torch.bool, device=ref.device)
        _check_pairs(e, p, mask)
        if e.dim() != 2:
            raise ValueError(f"fit_step takes [L, d] pairs, got {tuple(e.shape)}")
        if mask is None:
            mask = torch.ones(e.shape[0], dtype=torch.bool, device=e.device)
        return e.detach(), p.detach(), mask

    def bounds(
        self,
        e_id: Tensor | None,
        p_id: Tensor | None,
        e_ood: Tensor | None,
        p_ood: Tensor | None,
        *,
        use_id: bool = True,
        use_ood: bool = True,
        id_mask: Tensor | PairMask | None = None,
        ood_mask: Tensor | PairMask | None = None,
    ) -> tuple[Tensor, Tensor]:
        """``(I_ood, I_id)`` carrying the encoder's graph, the networks' parameters constants
        (0 where disabled or below ``min_pairs``). Sets are ``[..., L, d]`` with optional
        bool ``[..., L]`` masks (or their :func:`pair_mask`); the bounds are ``[...]``, one per
        set."""
        i_ood = i_id = None
        if use_ood and e_ood is not None and p_ood is not None:
            i_ood = club_upper_bound(
                self.q, e_ood, p_ood, ood_mask, frozen=True, min_pairs=self.min_pairs
            )
        if use_id and e_id is not None and p_id is not None:
            i_id = tuba_lower_bound(
                self.critic,
                e_id,
                p_id,
                id_mask,
                clamp=self.clamp,
                frozen=True,
                min_pairs=self.min_pairs,
            )
        if i_ood is None and i_id is None:
            # zeros that stay attached to the inputs' graph (so ``.backward()`` never fails)
            given = [t for t in (e_id, p_id, e_ood, p_ood) if t is not None]
            zero = sum(t.sum() * 0.0 for t in given) if given else None
            zero = zero if isinstance(zero, Tensor) else self.critic.out.bias.new_zeros(())
            return zero, zero
        if i_ood is None:
            return torch.zeros_like(i_id), i_id
        return i_ood, (torch.zeros_like(i_ood) if i_id is None else i_id)

    def fit(self, e: Tensor, p: Tensor, is_id: Tensor) -> dict[str, Tensor]:
        """:meth:`fit_step` on one set of ``[n, d]`` pairs split by ``is_id`` (bool ``[n]``):
        ``q_φ`` on the rows outside it, the critic on those in it (the
        :class:`~avalanche_sets.order.components.MIBounds` interface). Returns ``{"q_nll":
        ...}``, the Gaussian's negative log-likelihood before the step (detached)."""
        fit = self.fit_step(e, p, e, p, id_mask=is_id, ood_mask=~is_id)
        return {"q_nll": fit["nll"]}

    def episode_bounds(
        self, e: Tensor, p: Tensor, is_id: Tensor, *, use_id: bool = True, use_ood: bool = True
    ) -> tuple[Tensor, Tensor]:
        """``(I_ood, I_id)``, each ``[B]``, of every episode's ``[U, d]`` pairs at once (``e``,
        ``p`` ``[B, U, d]``), ``I_ood`` over the rows outside ``is_id`` (bool ``[B, U]``) and
        ``I_id`` over those in it (the :class:`~avalanche_sets.order.components.MIBounds`
        interface)."""
        both = pair_mask(torch.stack([is_id, ~is_id]), e.dtype)  # both masks in one pass
        return self.bounds(
            e, p, e, p, use_id=use_id, use_ood=use_ood,
            id_mask=PairMask(*(t[0] for t in both)),
            ood_mask=PairMask(*(t[1] for t in both)),
        )  # fmt: skip

    def get_extra_state(self) -> dict[str, Any]:
        return {"opt_q": self.opt_q.state_dict(), "opt_critic": self.opt_critic.state_dict()}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        # deep copies: Optimizer.load_state_dict keeps the source's tensors (aliasing them)
        self.opt_q.load_state_dict(copy.deepcopy(state["opt_q"]))
        self.opt_critic.load_state_dict(copy.deepcopy(state["opt_critic"]))
