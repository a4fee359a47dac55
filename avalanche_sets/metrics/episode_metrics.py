"""Former home of the episode metrics, kept so that existing imports keep working.

The code now lives in one module per concern: :mod:`.stats` (confidence intervals,
forgetting, backward transfer, paired differences), :mod:`.episode_accuracy`,
:mod:`.accuracy_matrix`, :mod:`.ood_detection` and :mod:`.factory`. Import from
``avalanche_sets.metrics`` in new code.
"""

# Everything the package exports, derived from its ``__all__`` so the alias can never drift from
# it (the package imports this module last, once ``__all__`` is set), plus the one name that only
# this module ever exported.
from . import *  # noqa: F403
from . import __all__ as _package_all
from .episode_accuracy import STREAM_CI_METHODS

__all__ = [*_package_all, "STREAM_CI_METHODS"]  # noqa: PLE0604
