"""The tiny ORDER set-up the checkpoint tests share: a 2-domain synthetic stream of 12 tasks per
domain and a width-4 network, one thread (seconds per run)."""

from __future__ import annotations

from avalanche_sets import sets_benchmark
from avalanche_sets.presets import resolve_preset

PRESET = resolve_preset(
    "quick", image_size=16, n_blocks=2, width=4, n_way=2, n_shot=1, n_query=2, n_unlabeled=2,
    n_ood=2, tasks_per_domain=12, n_test_episodes=4, n_val_episodes=2, mem_size=4,
    domains=["shapes", "strokes"], ood=["rings"], eval_mb_size=4, threads=1,
)  # fmt: skip


def tiny_bench():
    """The stream :data:`PRESET` describes (seed 0)."""
    return sets_benchmark(
        "synthetic", domains=PRESET.domains, ood=PRESET.ood, n_way=2, n_shot=1,
        n_query=2, n_unlabeled=2, n_ood=2, tasks_per_domain=12, n_test_episodes=4,
        n_val_episodes=2, image_size=16, seed=0,
    )  # fmt: skip
