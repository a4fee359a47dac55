"""LST: Learning to Self-Train (Li, Sun, Liu, Zheng, Zhou, Chua & Schiele, NeurIPS 2019,
"Learning to Self-Train for Semi-Supervised Few-Shot Classification"), the self-training
baseline of the paper's Table 2, built on the ANIL machinery of :mod:`.meta`.

Per episode (:class:`LSTModel`), with the head's meta-learned initialisation ``θ_0``:

1. **Pseudo-labelling.** A clone of ``θ_0`` is fine-tuned on the support set for
   ``inner_steps`` steps (ANIL's inner loop) and labels the unlabeled images.
2. **Cherry-picking.** *Hard selection*: per class, the ``n_select`` unlabeled images predicted
   as that class with the highest confidence. *Soft weighting*: the soft weighting network
   (SWN, :class:`SoftWeightingNetwork`), a relation-network-style MLP on the pair (unlabeled
   embedding, class prototype), scores every selected image against every class; the softmax
   of the scores over the classes, read at the image's pseudo-label, is its weight ``w_i``.
3. **Self-training.** A fresh clone of ``θ_0`` is *re-trained* for ``retrain_steps`` (``m``)
   steps on the support plus the weighted pseudo-labelled images (loss
   ``(Σ_S CE + Σ_R w_i CE_i) / (|S| + Σ_R w_i)``), then *fine-tuned* on the support alone for
   ``finetune_steps`` steps.
4. **Recursion.** Steps 2–3 repeat ``n_stages`` times, each stage pseudo-labelling with the
   previous stage's head.

The query logits of the final head give the meta-loss, which trains the backbone and ``θ_0``.
As in LST, the SWN is meta-learned with a *separate* loss: the query loss of the head right
after the re-training steps (before fine-tuning), whose gradient reaches only the SWN (the
model computes that path a second time on detached embeddings and a detached ``θ_0``, always
with second-order gradients through the re-training steps, which are cheap on a linear head);
:class:`LST` adds it to the training loss.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..models.heads import prototypes
from .meta import ANILModel, EpisodicBaseline, embedding_dim

__all__ = ["SoftWeightingNetwork", "LSTModel", "LST"]


class SoftWeightingNetwork(nn.Module):
    """LST's SWN: relation scores ``r_{i,c} = g([e_i ; p_c])`` of unlabeled embeddings ``e_i``
    against class prototypes ``p_c``.

    ``g`` is an MLP ``2d → hidden… → 1`` with leaky ReLUs (the authors' SWN is a relation module
    — two conv blocks on the concatenated feature maps, then FC layers of 8 and 1 units — on
    the backbone's feature maps; here it acts on the flattened embeddings).

    ``forward(emb [R, d], protos [N, d])`` returns scores ``[R, N]``.
    """

    def __init__(self, emb_dim: int, hidden: tuple[int, ...] = (64, 8)) -> None:
        super().__init__()
        sizes = [2 * emb_dim, *hidden]
        layers: list[nn.Module] = []
        for a, b in zip(sizes[:-1], sizes[1:]):
            layers += [nn.Linear(a, b), nn.LeakyReLU(0.2)]
        self.net = nn.Sequential(*layers, nn.Linear(sizes[-1], 1))

    def forward(self, emb: Tensor, protos: Tensor) -> Tensor:
        r, n = emb.shape[0], protos.shape[0]
        pairs = torch.cat(
            [emb.unsqueeze(1).expand(r, n, -1), protos.unsqueeze(0).expand(r, n, -1)], dim=-1
        )
        return self.net(pairs).squeeze(-1)


class LSTModel(ANILModel):
    """LST's episodic model: :class:`ANILModel` + cherry-picking + recursive self-training.

    Args:
        backbone, n_way, inner_lr, emb_dim, bf16: as :class:`ANILModel`.
        first_order: first-order MAML through the inner loops of the main path (default, as
            ANIL's; the SWN path stays second-order: it is how the SWN is meta-learned). On the
            converged stream a second-order LST's meta-gradient spikes and it forgets about
            twice as much; first-order learns more slowly in a short stream (7–10 points on
            ``cpu``). The measurements are on the documentation's Verification page.
        inner_steps: support fine-tuning steps of the pseudo-labeller (step 1).
        retrain_steps: ``m``, re-training steps on support + weighted pseudo-labelled data.
        finetune_steps: fine-tuning steps on the support after re-training.
        n_select: hard selection, pseudo-labelled images kept per class.
        n_stages: recursive self-training stages.
        swn_hidden: hidden sizes of the :class:`SoftWeightingNetwork`.

    After a training forward pass with autograd on, ``swn_query_logits`` holds, per stage, the
    query logits ``[B*N*Q, N]`` of the SWN path (the head after re-training); the strategy adds
    their cross-entropy to the loss (:meth:`LST.criterion`). Used with another strategy, add it
    likewise or the SWN stays untrained.
    """

    embed_unlabeled = True

    def __init__(
        self,
        backbone: nn.Module,
        *,
        n_way: int = 5,
        inner_steps: int = 5,
        inner_lr: float = 0.01,
        retrain_steps: int = 5,
        finetune_steps: int = 5,
        n_select: int = 5,
        n_stages: int = 2,
        swn_hidden: tuple[int, ...] = (64, 8),
        first_order: bool = True,
        emb_dim: int | None = None,
        bf16: bool = False,
    ) -> None:
        super().__init__(
            backbone,
            n_way=n_way,
            inner_steps=inner_steps,
            inner_lr=inner_lr,
            first_order=first_order,
            emb_dim=emb_dim,
            bf16=bf16,
        )
        for name, value, low in (
            ("retrain_steps", retrain_steps, 0),
            ("finetune_steps", finetune_steps, 0),
            ("n_select", n_select, 1),
            ("n_stages", n_stages, 1),
        ):
            if not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        self.retrain_steps = retrain_steps
        self.finetune_steps = finetune_steps
        self.n_select = n_select
        self.n_stages = n_stages
        self.swn = SoftWeightingNetwork(embedding_dim(backbone, emb_dim), swn_hidden)
        self.swn_query_logits: list[Tensor] = []

    # ------------------------------------------------------------------ cherry-picking
    def cherry_pick(self, learner: nn.Module, u: Tensor) -> tuple[Tensor, Tensor]:
        """Hard selection: indices ``[R]`` of the ``n_select`` most confident unlabeled images
        per predicted class, and their pseudo-labels ``[R]``."""
        with torch.no_grad():
            conf, pseudo = learner(u).softmax(-1).max(-1)
        keep = []
        for c in range(self.n_way):
            members = (pseudo == c).nonzero().squeeze(1)
            top = conf[members].topk(min(self.n_select, members.numel())).indices
            keep.append(members[top])
        idx = torch.cat(keep)
        return idx, pseudo[idx]

    def soft_weights(self, emb: Tensor, pseudo: Tensor, protos: Tensor) -> Tensor:
        """SWN weights ``[R]``: ``softmax_c(r_{i,c})`` at ``c = ŷ_i``. Inputs are detached from
        the backbone (as the authors' stop-gradient on the SWN's features)."""
        scores = self.swn(emb.detach(), protos.detach())
        return scores.softmax(-1).gather(1, pseudo.unsqueeze(1)).squeeze(1)

    def self_train(
        self,
        s: Tensor,
        sy: Tensor,
        ru: Tensor,
        ry: Tensor,
        w: Tensor,
        *,
        learner: nn.Module | None = None,
        finetune: bool = True,
        second_order: bool | None = None,
    ) -> nn.Module:
        """Re-train a clone of ``θ_0`` (or ``learner``) on support + weighted pseudo-labelled
        data for ``retrain_steps`` steps, then (``finetune``) on the support alone."""
        weights = torch.cat([torch.ones_like(sy, dtype=w.dtype), w])
        learner = self.adapt(
            torch.cat([s, ru]),
            torch.cat([sy, ry]),
            steps=self.retrain_steps,
            weights=weights,
            learner=learner,
            second_order=second_order,
        )
        if finetune:
            learner = self.adapt(
                s, sy, steps=self.finetune_steps, learner=learner, second_order=second_order
            )
        return learner

    # ------------------------------------------------------------------ episode
    def episode_logits(self, s: Tensor, sy: Tensor, q: Tensor, u: Tensor | None) -> Tensor:
        swn_path = self.training and self._grad_outside
        protos = prototypes(s, sy, self.n_way)
        learner = self.adapt(s, sy)
        for stage in range(self.n_stages):
            idx, ry = self.cherry_pick(learner, u)
            ru = u[idx]
            w = self.soft_weights(ru, ry, protos)
            learner = self.self_train(s, sy, ru, ry, w.detach())
            if swn_path:
                after_retrain = self.self_train(
                    s.detach(), sy, ru.detach(), ry, w,
                    learner=self.detached_head(), finetune=False, second_order=True,
                )  # fmt: skip
                self._swn_logits[stage].append(after_retrain(q.detach()))
        return learner(q)

    def forward(self, batch):
        self._swn_logits: list[list[Tensor]] = [[] for _ in range(self.n_stages)]
        logits = super().forward(batch)
        self.swn_query_logits = [torch.cat(x) for x in self._swn_logits if x]
        return logits


class LST(EpisodicBaseline):
    """Learning to Self-Train (Li et al., NeurIPS 2019) adapted to SETS.

    Meta-learns a head initialisation (ANIL-style MAML on the head) together with how to
    cherry-pick and weight pseudo-labelled unlabeled images for inner-loop self-training (see
    the module docstring and :class:`LSTModel`). Adapted to SETS unchanged: the whole unlabeled
    set of an episode, OOD included, is pseudo-labelled; the hard selection and the SWN weights
    are LST's only protection against distractors. The training loss is the query
    cross-entropy of the final head plus, for the SWN only, the query cross-entropy after the
    re-training steps (averaged over stages).

    Differences from the original:

    * **No pre-training and no meta-transfer (scaling/shifting) parameters.** LST starts from a
      ResNet-12 pre-trained on the meta-training classes and meta-learns only MTL's
      scaling/shifting weights and the classifier. SETS forbids pre-training on future domains
      (paper §5: no pre-trained feature extractors), so here the whole conv backbone is learned
      by the outer loss, as in the paper's ANIL baseline.
    * **The SWN acts on flattened embeddings** (an MLP on ``[e_i ; p_c]``) instead of conv blocks
      on the concatenated feature maps (the CPU backbones' last maps are 2×2).
    * **How the weights enter the loss.** The paper weights pseudo-labelled samples in the
      inner loss; the authors' code multiplies each pseudo-labelled image's logits by the
      softmax of its SWN scores over the classes. We use the softmax read at the pseudo-label
      as a per-example weight of a weighted-mean cross-entropy (so zero weights reduce LST
      exactly to ANIL on the support).
    * **Same procedure in training and evaluation.** The authors meta-train with one stage and
      no hard selection (all unlabeled images pseudo-labelled), and use hard selection and
      recursive stages at meta-test on fresh splits of a larger unlabeled set; here every stage
      re-uses the episode's whole unlabeled set (SETS episodes have Z + R/N unlabeled images
      per class, too few to split), and training runs the test-time procedure.
    * **First-order inner loops** (``first_order=True``, the default): LST differentiates
      through them; over a long stream that second-order meta-gradient spikes as the
      embeddings grow (:class:`LSTModel`'s ``first_order``). ``first_order=False`` restores it.
    * **One optimiser.** The SWN's loss only reaches the SWN's parameters and the main loss
      never reaches them, so one Adam over all parameters (same learning rate) is equivalent to
      LST's two optimisers with equal learning rates.

    Args:
        model: default :class:`LSTModel` built from ``model_options``, its keyword options
            (``LST(model_options={"n_stages": 1})``; ``backbone`` default
            :func:`~avalanche_sets.models.cpu_backbone`).
        optimizer / lr: default Adam(lr = 1e-3). **kwargs: :class:`EpisodicBaseline`.
    """

    name = "lst"
    summary = (
        "learning to self-train (Li et al. 2019): MAML inner loop, pseudo-labels, "
        "cherry-picking, meta-learned soft weights"
    )

    model_class = LSTModel

    def criterion(self):
        """Query cross-entropy of the final head, plus (training) the SWN's query loss and the
        plugins' loss terms."""
        if not self.is_training:
            return super().criterion()
        loss = self.meta_term(self._criterion(self.mb_output, self.mb_y))
        swn_logits = getattr(self.model, "swn_query_logits", None)
        if swn_logits:
            loss = loss + sum(self._criterion(z, self.mb_y) for z in swn_logits) / len(swn_logits)
        return self.plus_terms_of(loss, *self.plugins)
