"""``avalanche_sets.metrics`` loads its names on first use: reading :mod:`.stats` (the ``table``
command) costs no torch, and every public name still loads."""

from __future__ import annotations

import subprocess
import sys

from avalanche_sets import metrics


def test_every_public_name_is_lazy_and_loads():
    assert sorted(metrics.__all__) == sorted([*metrics._LAZY, "stats"])
    for name in metrics.__all__:
        assert getattr(metrics, name) is not None, name
    assert callable(metrics.episode_metrics)  # the factory (.factory), no module of that name


def test_the_stats_load_without_torch():
    code = (
        "import sys; from avalanche_sets.metrics import stats; stats.seed_ci95([0.1, 0.2]); "
        "print(sorted(m for m in ('torch', 'avalanche', 'scipy') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
