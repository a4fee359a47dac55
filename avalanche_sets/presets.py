"""Experiment presets: plain dictionaries a user can copy, print and edit.

* ``quick`` — the demo: ORDER on the synthetic benchmark in under 5 minutes on a 2-core CPU.
* ``cpu`` — the preset of our committed tables: 32 px, a narrow 4-block backbone (32 filters),
  the paper's episode (5-way, Z = 10, R = 50) with Q = 5, 40 iterations of meta-batch 2 per
  domain, 100 test episodes per domain (20 for the intermediate rows of the accuracy matrix):
  about 4 minutes per ORDER run on one core and 2–3 for the baselines
  (``benchmarks/preset_cost.py`` measures it; results in ``benchmarks/results/preset_cost_cpu``).
* ``paper`` — the paper's protocol for a GPU: 84 px, 5 blocks of 64 filters, 6,000 iterations of
  meta-batch 2 per domain (12K tasks), 600 test episodes, 5 seeds.

``resolve_preset(name, **overrides)`` returns a copy with overrides applied and checked.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["PRESETS", "resolve_preset", "preset_names"]

_EPISODE = dict(n_way=5, n_shot=1, n_unlabeled=10, n_ood=50)

PRESETS: dict[str, dict[str, Any]] = {
    "quick": dict(
        source="synthetic",
        image_size=32,
        n_blocks=4,
        width=32,
        **{**_EPISODE, "n_unlabeled": 5, "n_ood": 20},
        n_query=5,
        tasks_per_domain=160,
        meta_batch=2,
        n_val_episodes=20,
        n_test_episodes=30,
        eval_mb_size=10,
        interim_test_episodes=None,
        lr=1e-3,
        mem_size=200,
        replay_batch=2,
        seeds=[0],
        device="cpu",
        threads=2,
    ),
    "cpu": dict(
        source="packs",
        image_size=32,
        n_blocks=4,
        width=32,
        **_EPISODE,
        n_query=5,
        tasks_per_domain=80,
        meta_batch=2,
        n_val_episodes=50,
        n_test_episodes=100,
        interim_test_episodes=20,
        eval_mb_size=10,
        lr=1e-3,
        mem_size=200,
        replay_batch=2,
        seeds=[0, 1, 2],
        device="cpu",
        threads=1,
        small_classes="drop",
    ),
    "paper": dict(
        source="paper",
        image_size=84,
        n_blocks=5,
        width=64,
        **_EPISODE,
        n_query=15,
        tasks_per_domain=12_000,
        meta_batch=2,
        n_val_episodes=600,
        n_test_episodes=600,
        eval_mb_size=20,
        interim_test_episodes=None,
        lr=1e-3,
        mem_size=200,
        replay_batch=2,
        seeds=[0, 1, 2, 3, 4],
        device="cuda",
        threads=4,
    ),
}


def preset_names() -> list[str]:
    return sorted(PRESETS)


def resolve_preset(name: str, **overrides: Any) -> dict[str, Any]:
    """A copy of preset ``name`` with ``overrides`` applied (unknown keys are an error)."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {preset_names()}")
    preset = copy.deepcopy(PRESETS[name])
    unknown = sorted(set(overrides) - set(preset) - {"root", "order", "domains", "ood"})
    if unknown:
        raise ValueError(
            f"unknown preset setting(s) {unknown}; valid settings: {sorted(preset)} "
            "(plus root, order, domains, ood)"
        )
    preset.update({k: v for k, v in overrides.items() if v is not None})
    return preset
