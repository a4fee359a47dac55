"""Checkpoint a run every 20 iterations and resume it after an interruption.

    python examples/resume_run.py          # stops after 50 iterations (simulated crash)
    python examples/resume_run.py          # resumes from run.ckpt and finishes

The resumed run ends with the same accuracy matrix as an uninterrupted one.
"""

from pathlib import Path

from avalanche_sets import run_sets, sets_benchmark
from avalanche_sets.methods import build_strategy
from avalanche_sets.presets import resolve_preset

ckpt = Path("run.ckpt")
preset = resolve_preset("quick")
bench = sets_benchmark(
    "synthetic", domains=["shapes", "strokes"], n_query=5, n_unlabeled=5, n_ood=20,
    tasks_per_domain=80, n_test_episodes=20,
)  # fmt: skip
strategy = build_strategy("order", preset, seed=0)  # build it the same way every time
first_time = not ckpt.exists()
result = run_sets(
    strategy, bench, checkpoint_path=ckpt, checkpoint_every=20,
    stop_after=50 if first_time else None,
)  # fmt: skip
if result.matrix and len(result.matrix) == len(bench.train_stream):
    print(result.table())
    ckpt.unlink()
else:
    print(f"interrupted; checkpoint in {ckpt} — run me again to resume")
