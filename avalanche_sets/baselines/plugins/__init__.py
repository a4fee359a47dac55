"""Continual-learning plugins for episodic (SETS) strategies.

Adaptations of Avalanche's own plugins to meta-batches of episodes
(:class:`EpisodicReplayPlugin`, :class:`EpisodicAGEMPlugin`, :class:`EpisodicGEMPlugin`) and
the mechanisms Avalanche has no episodic plugin for (:class:`MERPlugin`, :class:`GPMPlugin`,
:class:`DERPlugin`; Avalanche's ``MER`` and ``DER`` strategies work on single samples, see
those classes for why they are not reused and how they are compared).
"""

from .der import DERPlugin
from .episodic_agem import EpisodicAGEMPlugin
from .episodic_gem import EpisodicGEMPlugin
from .episodic_replay import EpisodicReplayPlugin
from .gpm import GPMPlugin
from .mer import MERPlugin

__all__ = [
    "EpisodicReplayPlugin",
    "EpisodicAGEMPlugin",
    "EpisodicGEMPlugin",
    "MERPlugin",
    "GPMPlugin",
    "DERPlugin",
]
