"""Continual-learning plugins for episodic (SETS) strategies.

Adaptations of Avalanche's own plugins to meta-batches of episodes
(:class:`EpisodicReplayPlugin`, :class:`EpisodicAGEMPlugin`, :class:`EpisodicGEMPlugin`) and
the mechanisms Avalanche lacks (:class:`MERPlugin`, :class:`GPMPlugin`, :class:`DERPlugin`).
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
