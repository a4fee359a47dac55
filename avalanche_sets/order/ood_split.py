"""``OODSplitPlugin``: ORDER's metric-based OOD detection of the unlabeled set (Algorithm 1)."""

from __future__ import annotations

import torch

from ..functional.ood import OODSplit
from ..training.template import EpisodicPlugin
from .components import OODDetector, PrototypeDistanceDetector, refuse_replaced

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

    The split itself is the plugin's :attr:`detector` (an
    :class:`~avalanche_sets.order.components.OODDetector`): the paper's
    :class:`~avalanche_sets.order.components.PrototypeDistanceDetector` by default, or one of
    your own (``detector=``), whose ``split`` gets the meta-batch's detached embeddings.

    Args:
        detector: the OOD detector; default
            ``PrototypeDistanceDetector(k=k, rule=rule, n_id=n_id)``. Given, ``k``, ``rule``
            and ``n_id`` must be left at their defaults (they are the default's).
        k: number of standard deviations above the mean (paper: 1).
        rule: ``"threshold"`` (the paper) or ``"topk"`` (the authors' code: keep the
            ``n_id`` closest images as ID — it needs the number of ID images, which the paper's
            method does not assume).
        n_id: images kept as ID by the ``"topk"`` rule (e.g. ``n_way * n_unlabeled``).
    """

    def __init__(
        self,
        *,
        detector: OODDetector | None = None,
        k: float = 1.0,
        rule: str = "threshold",
        n_id: int | None = None,
    ):
        super().__init__()
        options = {"k": k, "rule": rule, "n_id": n_id}
        refuse_replaced("OOD detector", detector, options, OODSplitPlugin.__init__)
        self.detector = detector or PrototypeDistanceDetector(k=k, rule=rule, n_id=n_id)
        """Splits the unlabeled sets (:class:`~avalanche_sets.order.components.OODDetector`)."""
        self.k = float(k)
        self.rule = rule
        self.n_id = n_id

    @torch.no_grad()
    def split(self, state) -> OODSplit:
        """:attr:`detector` on every episode of an :class:`~avalanche_sets.models.EpisodeState`
        (detached embeddings); its split's shapes checked (no value is read)."""
        unlabeled = state.unlabeled_emb.detach()
        split = self.detector.split(state.query_emb.detach(), unlabeled, state.prototypes.detach())
        want = tuple(unlabeled.shape[:2])
        is_id, scores = getattr(split, "is_id", None), getattr(split, "distances", None)
        if not (
            isinstance(is_id, torch.Tensor)
            and isinstance(scores, torch.Tensor)
            and is_id.dtype == torch.bool
            and tuple(is_id.shape) == want == tuple(scores.shape)
        ):
            raise ValueError(
                f"{type(self.detector).__name__}.split must return an OODSplit with is_id (bool) "
                f"and distances (the OOD score) of shape [B, U] = {list(want)}; got "
                f"{_describe(is_id)} and {_describe(scores)}"
            )
        return split

    def after_encode(self, strategy, **kwargs) -> None:
        state = strategy.iteration.state
        split = strategy.iteration.ood_split = self.split(state)
        state.unlabeled_weight = split.is_id.to(state.unlabeled_weight.dtype)


def _describe(t: object) -> str:
    if isinstance(t, torch.Tensor):
        return f"{t.dtype} {list(t.shape)}"
    return type(t).__name__
