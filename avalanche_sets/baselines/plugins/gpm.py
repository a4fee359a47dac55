"""``GPMPlugin``: Gradient Projection Memory over the conv/linear layers of an episodic model."""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F
from avalanche.core import SupervisedPlugin
from torch import Tensor, nn

from ._memory import learner_batch, sample_episodes

__all__ = ["GPMPlugin", "OTHER_PARAMS"]

OTHER_PARAMS = ("freeze", "train")


def _layer_rows(module: nn.Module, x: Tensor) -> Tensor:
    """Rows of the layer's representation matrix (one row per input vector / conv patch),
    augmented with a constant 1 when the layer has a bias."""
    if isinstance(module, nn.Conv2d):
        rows = F.unfold(
            x, module.kernel_size, dilation=module.dilation, padding=module.padding,
            stride=module.stride,
        )  # fmt: skip
        rows = rows.transpose(1, 2).reshape(-1, rows.shape[1])  # [n * L, C * kh * kw]
    else:
        rows = x.reshape(-1, x.shape[-1])
    rows = rows.float()
    if module.bias is not None:
        rows = torch.cat([rows, rows.new_ones(rows.shape[0], 1)], dim=1)
    return rows


def _grad_matrix(module: nn.Module) -> Tensor | None:
    """``[out, D]`` gradient of ``[W | b]`` (W flattened like the unfolded patches)."""
    w = module.weight
    if w.grad is None:
        return None
    g = w.grad.reshape(w.shape[0], -1)
    if module.bias is not None:
        gb = module.bias.grad if module.bias.grad is not None else torch.zeros_like(module.bias)
        g = torch.cat([g, gb.reshape(-1, 1)], dim=1)
    return g


def _set_grad_matrix(module: nn.Module, g: Tensor) -> None:
    w = module.weight
    n_w = w[0].numel()
    w.grad.copy_(g[:, :n_w].reshape_as(w))
    if module.bias is not None and module.bias.grad is not None:
        module.bias.grad.copy_(g[:, n_w])


class GPMPlugin(SupervisedPlugin):
    """Gradient Projection Memory (Saha, Garg, Roy, ICLR 2021, "Gradient Projection Memory for
    Continual Learning") for episodic meta-learners.

    * **Memory** (``after_training_exp``, at each domain end): ``n_episodes`` episodes of the
      finished domain (uniformly drawn from its training episodes) are forwarded in
      meta-batches of ``train_mb_size`` in training mode (BatchNorm batch statistics, as during
      training; the running statistics are restored afterwards). For every ``nn.Conv2d`` and
      ``nn.Linear`` layer (the backbone and MSKM's mask MLP) a forward pre-hook collects the
      layer's inputs — the unfolded 3×3 patches (im2col) for convolutions, as in GPM — and
      accumulates the Gram matrix ``R Rᵀ`` of the representation matrix ``R`` (all images of
      the episodes: support, query and unlabeled incl. OOD, the data the layer saw). Bases
      follow GPM: for the first domain the top eigenvectors of ``R Rᵀ`` (= left singular
      vectors of ``R``) holding a fraction ``ε`` of the energy ``‖R‖_F²``; afterwards the
      residual ``R̂ = (I − MMᵀ)R`` is decomposed and the fewest new directions are added so that
      ``‖MMᵀR‖² + Σ σ̂_i² ≥ ε‖R‖²``. ``ε`` grows with the domain index, ``threshold +
      threshold_increment·t`` (GPM's schedule on CIFAR-100 and miniImageNet), capped below 1.
    * **Projection** (``after_backward``): each layer's gradient, as a matrix ``G = [∇W | ∇b]``
      in the layer-input space, becomes ``G − (G M) Mᵀ``: orthogonal to the span of the stored
      bases, so — with a plain SGD optimiser — the layer's response to past domains' inputs
      is (to first order) unchanged.

    Choices and simplifications (documented deviations):

    * Biases are projected too, through the input augmented with a constant 1 (GPM's networks
      have no biases; their code freezes 1-D parameters after the first task).
    * Parameters outside conv/linear layers (BatchNorm affine) are frozen after the first
      domain with ``other_params="freeze"`` (GPM's code), or trained freely with ``"train"``.
      BatchNorm *running statistics* keep updating (GPM's nets used batch statistics at test
      time); this drift is outside GPM's guarantee.
    * The Gram matrix ``R Rᵀ`` is accumulated exactly over all patches (memory-bounded by image
      chunks) instead of storing ``R`` and sub-sampling the examples, and eigendecomposed in
      float64: the same bases, cheaper in memory.
    * Orthogonality of the *update* needs an optimiser whose step is a multiple of the
      gradient (SGD without momentum); :class:`~avalanche_sets.baselines.continual.SemiGPM`
      defaults to SGD for that reason. With Adam only the gradient is projected.

    ``bases`` maps a module name to its ``[D, k]`` orthonormal basis; ``last_grams`` keeps the
    representation Gram matrices of the latest memory update.

    Args:
        threshold: energy threshold ε for the first domain (GPM: 0.97).
        threshold_increment: added per domain (GPM: 0.003).
        n_episodes: episodes of a finished domain used for its representation matrices.
        other_params: ``"freeze"`` or ``"train"`` (see above).
        image_chunk: images unfolded at once when accumulating a convolution's Gram matrix.
        seed: seed of the episode choice.
    """

    def __init__(
        self,
        *,
        threshold: float = 0.97,
        threshold_increment: float = 0.003,
        n_episodes: int = 10,
        other_params: Literal["freeze", "train"] = "freeze",
        image_chunk: int = 64,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if not 0 < threshold < 1:
            raise ValueError(f"threshold must be in (0, 1), got {threshold!r}")
        if not threshold_increment >= 0:
            raise ValueError(f"threshold_increment must be >= 0, got {threshold_increment!r}")
        if not isinstance(n_episodes, int) or n_episodes < 1:
            raise ValueError(f"n_episodes must be a positive integer, got {n_episodes!r}")
        if other_params not in OTHER_PARAMS:
            raise ValueError(f"other_params must be one of {OTHER_PARAMS}, got {other_params!r}")
        self.threshold = float(threshold)
        self.threshold_increment = float(threshold_increment)
        self.n_episodes = n_episodes
        self.other_params = other_params
        self.image_chunk = int(image_chunk)
        self.bases: dict[str, Tensor] = {}
        self.n_experiences = 0
        self.last_grams: dict[str, Tensor] = {}
        self._rng = np.random.default_rng(seed)

    # ------------------------------------------------------------------ layers
    @staticmethod
    def layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
        """The projected layers: every ``nn.Conv2d`` (ungrouped) and ``nn.Linear``."""
        out = []
        for name, m in model.named_modules():
            if isinstance(m, nn.Conv2d):
                if m.groups != 1 or m.padding_mode != "zeros":
                    raise ValueError(f"GPM supports plain convolutions only; {name} is not")
                out.append((name, m))
            elif isinstance(m, nn.Linear):
                out.append((name, m))
        return out

    def energy_threshold(self, t: int) -> float:
        """ε for domain ``t`` (0-based)."""
        return min(self.threshold + self.threshold_increment * t, 1.0 - 1e-6)

    @torch.no_grad()
    def representation_grams(self, model: nn.Module, batches) -> dict[str, Tensor]:
        """Σ R Rᵀ (float64, ``[D, D]``) per layer over the given learner batches."""
        grams: dict[str, Tensor] = {}
        chunk = self.image_chunk

        def hook_for(name):
            def hook(module, inputs):
                x = inputs[0].detach()
                parts = x.split(chunk) if isinstance(module, nn.Conv2d) else [x]
                for part in parts:
                    rows = _layer_rows(module, part)
                    g = (rows.T @ rows).double()
                    grams[name] = grams[name] + g if name in grams else g

            return hook

        buffers = {k: v.clone() for k, v in model.named_buffers()}
        was_training = model.training
        handles = [m.register_forward_pre_hook(hook_for(n)) for n, m in self.layers(model)]
        try:
            model.train()
            for x in batches:
                model(x)
        finally:
            for h in handles:
                h.remove()
            model.train(was_training)
            for k, v in model.named_buffers():
                v.copy_(buffers[k])
        return grams

    @staticmethod
    def update_basis(basis: Tensor | None, gram: Tensor, eps: float) -> Tensor | None:
        """GPM's basis update from a representation Gram matrix ``R Rᵀ`` and threshold ε."""
        gram = gram.double()
        total = torch.trace(gram).item()
        if total <= 0:
            return basis
        if basis is None:
            lam, vec = torch.linalg.eigh(gram)
            lam, vec = lam.flip(0).clamp_min(0), vec.flip(1)
            k = int(torch.searchsorted(torch.cumsum(lam, 0), eps * total).item()) + 1
            return vec[:, : min(k, vec.shape[1])].float()
        m = basis.double()
        proj = torch.eye(gram.shape[0], dtype=gram.dtype, device=gram.device) - m @ m.T
        resid = proj @ gram @ proj
        kept = total - torch.trace(resid).item()  # ‖M Mᵀ R‖²
        if kept >= eps * total or m.shape[1] >= gram.shape[0]:
            return basis
        lam, vec = torch.linalg.eigh((resid + resid.T) / 2)
        lam, vec = lam.flip(0).clamp_min(0), vec.flip(1)
        need = eps * total - kept
        k = int(torch.searchsorted(torch.cumsum(lam, 0), need).item()) + 1
        k = min(k, gram.shape[0] - m.shape[1])
        q, _ = torch.linalg.qr(torch.cat([m, vec[:, :k]], dim=1))
        return q.float()

    # ------------------------------------------------------------------ callbacks
    def after_training_exp(self, strategy, **kwargs) -> None:
        data = strategy.experience.dataset
        episodes = sample_episodes(data, self.n_episodes, self._rng)
        mb = strategy.train_mb_size
        batches = [
            learner_batch(episodes[i : i + mb], strategy.device)[0]
            for i in range(0, len(episodes), mb)
        ]
        grams = self.representation_grams(strategy.model, batches)
        eps = self.energy_threshold(self.n_experiences)
        for name, gram in grams.items():
            new = self.update_basis(self.bases.get(name), gram, eps)
            if new is not None:
                self.bases[name] = new.to(strategy.device)
        self.last_grams = {k: v.cpu() for k, v in grams.items()}
        self.n_experiences += 1

    @torch.no_grad()
    def after_backward(self, strategy, **kwargs) -> None:
        if not self.bases:
            return
        covered = set()
        for name, module in self.layers(strategy.model):
            covered.update(id(p) for p in module.parameters(recurse=False))
            basis = self.bases.get(name)
            g = _grad_matrix(module) if basis is not None else None
            if g is None:
                continue
            basis = basis.to(g.device, g.dtype)
            _set_grad_matrix(module, g - (g @ basis) @ basis.T)
        if self.other_params == "freeze":
            for p in strategy.model.parameters():
                if id(p) not in covered:
                    p.grad = None

    # ------------------------------------------------------------------ checkpoint
    def state_dict(self) -> dict:
        return {
            "bases": {k: v.cpu() for k, v in self.bases.items()},
            "n_experiences": self.n_experiences,
            "rng": self._rng.bit_generator.state,
        }

    def load_state_dict(self, state: dict) -> None:
        self.bases = {k: v.clone() for k, v in state["bases"].items()}
        self.n_experiences = int(state["n_experiences"])
        self._rng.bit_generator.state = state["rng"]
