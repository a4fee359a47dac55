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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import Tensor, nn

from .distance import squared_euclidean

__all__ = [
    "GaussianConditional",
    "Critic",
    "club_upper_bound",
    "tuba_lower_bound",
    "nearest_prototype",
    "pair_with_prototypes",
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

    def forward(self, e: Tensor) -> tuple[Tensor, Tensor]:
        """Mean and log-variance of ``q(· | e)``: ``e [L, e_dim]`` -> two ``[L, p_dim]``."""
        mu = self.mu_net(e)
        span = self.max_logvar - self.min_logvar
        logvar = self.min_logvar + span * torch.sigmoid(self.logvar_net(e))
        return mu, logvar

    def log_prob(self, p: Tensor, e: Tensor) -> Tensor:
        """``log q(p_i | e_i)`` for paired rows: ``p [L, p_dim]``, ``e [L, e_dim]`` -> ``[L]``."""
        mu, logvar = self(e)
        return -0.5 * (((p - mu) ** 2) * torch.exp(-logvar) + logvar + _LOG_2PI).sum(-1)

    def log_prob_matrix(self, p: Tensor, e: Tensor) -> Tensor:
        """All cross terms: entry ``(i, j)`` is ``log q(p_i | e_j)``, shape ``[L_p, L_e]``.

        Vectorised with matrix products (memory ``O(L² + L d)``): with ``s_j = σ_j^{-2}``,
        ``Σ_k (p_ik - μ_jk)² s_jk = (p²) sᵀ - 2 p (μ s)ᵀ + Σ_k μ_jk² s_jk``.
        """
        mu, logvar = self(e)
        prec = torch.exp(-logvar)  # [L_e, d]
        quad = (p * p) @ prec.T - 2.0 * p @ (mu * prec).T + (mu * mu * prec).sum(-1).unsqueeze(0)
        quad = quad.clamp_min(0.0)
        norm = (logvar.sum(-1) + self.p_dim * _LOG_2PI).unsqueeze(0)
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

    def _blocks(self) -> tuple[Tensor, Tensor]:
        w = self.hidden.weight
        return w[:, : self.e_dim], w[:, self.e_dim :]

    def forward(self, e: Tensor, p: Tensor) -> Tensor:
        """Paired scores ``f(e_i, p_i)``: ``e [L, e_dim]``, ``p [L, p_dim]`` -> ``[L]``."""
        return self.out(self.act(self.hidden(torch.cat([e, p], dim=-1)))).squeeze(-1)

    def score_matrix(self, e: Tensor, p: Tensor) -> Tensor:
        """All pairs: entry ``(i, j)`` is ``f(e_i, p_j)``, shape ``[L_e, L_p]``."""
        w_e, w_p = self._blocks()
        he = e @ w_e.T  # [L_e, H]
        hp = p @ w_p.T + self.hidden.bias  # [L_p, H]
        h = self.act(he.unsqueeze(1) + hp.unsqueeze(0))  # [L_e, L_p, H]
        return (h @ self.out.weight.squeeze(0)) + self.out.bias


def _check_pairs(e: Tensor, p: Tensor) -> None:
    if e.dim() != 2 or p.dim() != 2 or e.shape[0] != p.shape[0]:
        raise ValueError(
            f"e and p must be paired [L, d] tensors, got {tuple(e.shape)} and {tuple(p.shape)}"
        )


def club_upper_bound(q: GaussianConditional, e: Tensor, p: Tensor) -> Tensor:
    """``I_ood`` of Theorem 1 (CLUB): ``mean_i log q(p_i|e_i) - mean_{i,j} log q(p_i|e_j)``.

    With the true conditional in place of ``q`` it upper-bounds ``I(e; p)`` (Jensen, proof of
    Theorem 1); with a fitted ``q`` it is the variational estimate of the paper.

    Args:
        q: the variational conditional.
        e: ``[L, e_dim]`` embeddings, p: ``[L, p_dim]`` their paired prototypes.

    Returns:
        scalar; 0 when ``L < 2`` (one sample cannot tell the joint from the product of
        marginals: the two terms coincide).
    """
    _check_pairs(e, p)
    if e.shape[0] < 2:
        return (e.sum() + p.sum()) * 0.0
    lp = q.log_prob_matrix(p, e)  # [L, L], (i, j) = log q(p_i | e_j)
    return torch.diagonal(lp).mean() - lp.mean()


def tuba_lower_bound(critic: Critic, e: Tensor, p: Tensor, *, clamp: float | None = 10.0) -> Tensor:
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
        e: ``[L, e_dim]`` ID embeddings, p: ``[L, p_dim]`` their paired prototypes.

    Returns:
        scalar; 0 when ``L < 2`` (no product-of-marginals samples distinct from the joint).
    """
    _check_pairs(e, p)
    if e.shape[0] < 2:
        return (e.sum() + p.sum()) * 0.0
    scores = critic.score_matrix(e, p)  # [L, L], (i, j) = f(e_i, p_j)
    if clamp is not None:
        scores = scores.clamp(max=float(clamp))
    return torch.diagonal(scores).mean() - torch.exp(scores).mean() + 1.0


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


@contextmanager
def _frozen(*modules: nn.Module) -> Iterator[None]:
    """Build a graph in which the modules' parameters are constants (no grads flow into them)."""
    params = [prm for mod in modules for prm in mod.parameters()]
    flags = [prm.requires_grad for prm in params]
    try:
        for prm in params:
            prm.requires_grad_(False)
        yield
    finally:
        for prm, flag in zip(params, flags):
            prm.requires_grad_(flag)


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
        self.opt_q = torch.optim.Adam(self.q.parameters(), lr=lr_q)
        self.opt_critic = torch.optim.Adam(self.critic.parameters(), lr=lr_critic)

    def _usable(self, e: Tensor | None, p: Tensor | None) -> bool:
        if e is None or p is None:
            return False
        _check_pairs(e, p)
        return e.shape[0] >= self.min_pairs

    def fit_step(
        self,
        e_id: Tensor | None,
        p_id: Tensor | None,
        e_ood: Tensor | None,
        p_ood: Tensor | None,
    ) -> dict[str, Tensor]:
        """One step of each optimiser on detached pairs.

        Returns:
            ``{"nll": ..., "i_id": ...}`` — the values before the step as detached 0-d tensors
            (NaN where skipped): reading them is left to the caller, so a step on a GPU does
            not wait for the device.
        """
        nan = torch.tensor(float("nan"))
        out = {"nll": nan, "i_id": nan}
        with torch.enable_grad():
            if self._usable(e_ood, p_ood):
                self.opt_q.zero_grad(set_to_none=True)
                loss = self.q.nll(p_ood.detach(), e_ood.detach())
                loss.backward()
                self.opt_q.step()
                out["nll"] = loss.detach()
            if self._usable(e_id, p_id):
                self.opt_critic.zero_grad(set_to_none=True)
                bound = tuba_lower_bound(
                    self.critic, e_id.detach(), p_id.detach(), clamp=self.clamp
                )
                (-bound).backward()
                self.opt_critic.step()
                out["i_id"] = bound.detach()
        return out

    def bounds(
        self,
        e_id: Tensor | None,
        p_id: Tensor | None,
        e_ood: Tensor | None,
        p_ood: Tensor | None,
        *,
        use_id: bool = True,
        use_ood: bool = True,
    ) -> tuple[Tensor, Tensor]:
        """``(I_ood, I_id)`` as scalars carrying the encoder's graph (0 where disabled/too small)."""
        given = [t for t in (e_id, p_id, e_ood, p_ood) if t is not None]
        # a zero that stays attached to the inputs' graph (so ``.backward()`` never fails)
        zero = sum(t.sum() * 0.0 for t in given) if given else self.critic.out.bias.new_zeros(())
        zero = zero if isinstance(zero, Tensor) else torch.zeros(())
        i_ood, i_id = zero, zero
        with _frozen(self.q, self.critic):
            if use_ood and self._usable(e_ood, p_ood):
                i_ood = club_upper_bound(self.q, e_ood, p_ood)
            if use_id and self._usable(e_id, p_id):
                i_id = tuba_lower_bound(self.critic, e_id, p_id, clamp=self.clamp)
        return i_ood, i_id

    def get_extra_state(self) -> dict[str, Any]:
        return {"opt_q": self.opt_q.state_dict(), "opt_critic": self.opt_critic.state_dict()}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        # deep copies: Optimizer.load_state_dict keeps the source's tensors (aliasing them)
        self.opt_q.load_state_dict(copy.deepcopy(state["opt_q"]))
        self.opt_critic.load_state_dict(copy.deepcopy(state["opt_critic"]))
