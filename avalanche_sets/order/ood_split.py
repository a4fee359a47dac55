"""``OODSplitPlugin``: ORDER's metric-based OOD detection of the unlabeled set (Algorithm 1)."""

from __future__ import annotations

import torch

from ..functional.ood import OOD_RULES, OODSplit, split_ood
from ..training.template import EpisodicPlugin

__all__ = ["OODSplitPlugin"]


class OODSplitPlugin(EpisodicPlugin):
    """Split every episode's unlabeled set into ``U_id`` and ``U_ood`` (paper Algorithm 1).

    After the meta-batch is embedded (``after_encode``), every embedding is L2-normalised
    (Algorithm 1, lines 3 and 8); the distance of an image to the prototypes is
    ``d(w, {p_c}) = min_c ‖w − p_c‖``; the query set — unlabeled by definition and drawn from the
    episode's classes — is the ID calibration set: ``thresh = μ({d_i}) + k·σ({d_i})`` over the
    query (line 6, k = 1, the "sigma rule"); unlabeled images farther than ``thresh`` form
    ``U_ood``, the rest ``U_id`` (lines 7–14). The decision is a discrete choice and carries
    no gradient. The plugin then sets ``state.unlabeled_weight`` to the ``U_id`` mask so that the
    prototype refinement (design §3.3) uses ``U_id`` only, and hands the
    :class:`~avalanche_sets.functional.ood.OODSplit` to the other plugins and metrics as
    ``strategy.iteration.ood_split``.

    It never reads the ground truth that travels with an episode.

    Args:
        k: number of standard deviations above the mean query distance (paper: 1).
        rule: ``"threshold"`` (the paper) or ``"topk"`` (the authors' code: keep the
            ``n_id`` closest images as ID — it needs the number of ID images, which the paper's
            method does not assume).
        n_id: images kept as ID by the ``"topk"`` rule (e.g. ``n_way * n_unlabeled``).
    """

    def __init__(self, *, k: float = 1.0, rule: str = "threshold", n_id: int | None = None):
        super().__init__()
        if rule not in OOD_RULES:
            raise ValueError(f"rule must be one of {OOD_RULES}, got {rule!r}")
        if not k >= 0:
            raise ValueError(f"k must be a non-negative number of standard deviations, got {k}")
        if rule == "topk" and (n_id is None or n_id < 0):
            raise ValueError("rule='topk' needs n_id >= 0 (the number of ID images to keep)")
        self.k = float(k)
        self.rule = rule
        self.n_id = n_id

    @torch.no_grad()
    def split(self, state) -> OODSplit:
        """Algorithm 1 on every episode of an :class:`~avalanche_sets.models.EpisodeState`."""
        return split_ood(
            state.query_emb.detach(),
            state.unlabeled_emb.detach(),
            state.prototypes.detach(),
            k=self.k,
            rule=self.rule,
            n_id=self.n_id,
        )

    def after_encode(self, strategy, **kwargs) -> None:
        state = strategy.iteration.state
        split = strategy.iteration.ood_split = self.split(state)
        state.unlabeled_weight = split.is_id.to(state.unlabeled_weight.dtype)
