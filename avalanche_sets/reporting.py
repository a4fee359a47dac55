"""Deprecated alias of :mod:`avalanche_sets.runs.report` (see :mod:`avalanche_sets.experiment`)."""

from .runs.report import *  # noqa: F403
from .runs.report import __all__  # noqa: F401
