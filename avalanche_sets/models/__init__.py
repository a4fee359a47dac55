"""Embedding network and prototype heads shared by ORDER and the baselines, and the MAML inner
loop of ANIL and LST."""

from . import backbone, heads, maml
from .backbone import *  # noqa: F403
from .heads import *  # noqa: F403
from .maml import *  # noqa: F403

# every public name of the submodules (each module's __all__ is the one list of its names)
__all__ = [*backbone.__all__, *heads.__all__, *maml.__all__]
