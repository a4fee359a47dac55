"""Embedding network and prototype heads shared by ORDER and the baselines."""

from . import backbone, heads
from .backbone import *  # noqa: F403
from .heads import *  # noqa: F403

# every public name of the submodules (each module's __all__ is the one list of its names)
__all__ = [*backbone.__all__, *heads.__all__]
