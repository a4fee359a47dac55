"""run_sets: the accuracy matrix, cheaper intermediate rows, Avalanche metrics alongside."""

import numpy as np
import torch
from avalanche.training.plugins import EvaluationPlugin

from avalanche_sets import run_sets, sets_benchmark
from avalanche_sets.methods import build_strategy
from avalanche_sets.metrics import episode_metrics
from avalanche_sets.presets import resolve_preset
from avalanche_sets.training import episode_accuracies


def test_interim_rows_use_the_first_episodes_and_the_last_row_all():
    torch.set_num_threads(1)
    preset = resolve_preset("quick", width=4, threads=1)
    bench = sets_benchmark(
        "synthetic", domains=["shapes", "strokes"], n_query=2, n_unlabeled=2, n_ood=4,
        tasks_per_domain=4, n_test_episodes=6,
    )  # fmt: skip
    strategy = build_strategy("order", preset, evaluator=EvaluationPlugin(*episode_metrics()))
    result = run_sets(strategy, bench, interim_episodes=2)
    assert len(result.matrix) == 2 and len(result.episode_acc) == 2 * 6
    # Row 1 (final) evaluated all 6 episodes: recomputing on the full stream agrees.
    final = [float(a.mean()) for a in episode_accuracies(strategy, bench.test_stream)]
    np.testing.assert_allclose(result.matrix[-1], final, atol=1e-6)
