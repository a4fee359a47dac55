"""Deprecated alias of :mod:`avalanche_sets.runs.folder` (see :mod:`avalanche_sets.experiment`)."""

from .runs.folder import *  # noqa: F403
from .runs.folder import __all__  # noqa: F401
