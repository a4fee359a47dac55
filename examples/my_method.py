"""Semi-L2, a method of one's own in one file: MSKM + an L2 pull toward the weights the
previous domain ended with.

A method is a class: subclass a built-in method's class, say what it is (``name``,
``summary``, and ``tuned`` values if it has some), and take its options as keyword arguments
of the constructor (their annotations type them on the command line). Then name it:

    avalanche-sets run --method my_method:SemiL2 --strategy-set anchor_weight=0.1

from this folder (or with it on ``PYTHONPATH``), or register it in your package's
``pyproject.toml`` and call it by its name::

    [project.entry-points."avalanche_sets.methods"]
    semi-l2 = "my_package.my_method:SemiL2"
"""

from __future__ import annotations

# --8<-- [start:method]
import torch

from avalanche_sets.baselines import SemiSeq
from avalanche_sets.training import EpisodicPlugin


class L2AnchorPlugin(EpisodicPlugin):
    """Adds ``anchor_weight · Σ‖θ − θ_prev‖²`` to the loss, θ_prev the weights at the end of
    the previous domain (nothing during the first)."""

    TERM = "l2_anchor"  # the name the term is logged and checked under

    def __init__(self, *, anchor_weight: float = 0.01) -> None:
        super().__init__()
        if not anchor_weight >= 0:
            raise ValueError(f"anchor_weight must be >= 0, got {anchor_weight!r}")
        self.anchor_weight = anchor_weight
        self.anchor: list[torch.Tensor] = []

    def after_training_exp(self, strategy, **kwargs) -> None:
        self.anchor = [p.detach().clone() for p in strategy.model.parameters()]

    def loss_term(self, strategy) -> torch.Tensor | None:  # the criterion adds it
        if not self.anchor:
            return None
        pairs = zip(strategy.model.parameters(), self.anchor, strict=True)
        return self.anchor_weight * sum(((p - a) ** 2).sum() for p, a in pairs)

    def state_dict(self) -> dict:  # a checkpoint keeps the anchor: a resumed run is the same
        return {"anchor": [a.cpu() for a in self.anchor]}

    def load_state_dict(self, state: dict) -> None:
        self.anchor = [a.clone() for a in state["anchor"]]


class SemiL2(SemiSeq):
    """MSKM (as Semi-Seq) + :class:`L2AnchorPlugin` as its continual mechanism."""

    name = "semi-l2"
    summary = "MSKM + an L2 pull toward the weights the previous domain ended with"

    def __init__(self, *, anchor_weight: float = 0.01, **kwargs) -> None:
        super().__init__(cl_plugin=L2AnchorPlugin(anchor_weight=anchor_weight), **kwargs)


# --8<-- [end:method]
