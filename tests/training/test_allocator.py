"""The run keeps freed memory for the next step (glibc), unless the user opts out; building a
strategy leaves the process's allocator as it was (a process-wide setting is the run's)."""

import pytest

from avalanche_sets.data import sets_benchmark
from avalanche_sets.methods import build_strategy
from avalanche_sets.presets import resolve_preset
from avalanche_sets.training import allocator, run_sets

glibc = pytest.mark.skipif(allocator._libc() is None, reason="not glibc: nothing to tune")


def _strategy():
    return build_strategy("mskm", resolve_preset("quick", width=4), seed=0)


def _one_iteration(strategy) -> None:
    bench = sets_benchmark(
        "synthetic", domains=["shapes"], n_query=2, n_unlabeled=2, n_ood=2, tasks_per_domain=2,
        n_test_episodes=1,
    )  # fmt: skip
    run_sets(strategy, bench, stop_after=1)


@glibc
def test_building_a_strategy_leaves_the_allocator_and_the_run_keeps_freed_memory():
    assert allocator.keep_freed_memory(False) and allocator.allocator_mode() == "system"
    strategy = _strategy()
    assert allocator.allocator_mode() == "system"
    _one_iteration(strategy)
    assert allocator.allocator_mode() == "kept"


@glibc
def test_the_opt_out_leaves_malloc_alone(monkeypatch):
    allocator.keep_freed_memory(False)
    monkeypatch.setenv("AVALANCHE_SETS_MALLOC", "system")
    _one_iteration(_strategy())
    assert allocator.allocator_mode() == "system"
    assert not allocator.keep_freed_memory()
    monkeypatch.delenv("AVALANCHE_SETS_MALLOC")
    assert allocator.keep_freed_memory() and allocator.allocator_mode() == "kept"


def test_the_cudnn_autotuner_is_the_runs_to_set(monkeypatch):
    """Building a strategy never reaches the autotuner; run_sets sets it for the strategy's
    device (a no-op on the CPU, so the call itself is what is checked)."""
    from avalanche_sets.training import runner

    calls = []
    monkeypatch.setattr(runner, "use_cudnn_autotuner", calls.append)
    strategy = _strategy()
    assert calls == []
    _one_iteration(strategy)
    assert calls == [strategy.device]


def test_only_the_run_makes_the_process_wide_settings():
    """No module but the run's (runner.py) calls the process-wide setters: a constructor that
    did would change the process for everything built after it."""
    import re
    from pathlib import Path

    import avalanche_sets

    package = Path(avalanche_sets.__file__).parent
    home = {"training/runner.py", "training/allocator.py", "training/cuda_settings.py"}
    callers = sorted(
        p.relative_to(package).as_posix()
        for p in package.rglob("*.py")
        if p.relative_to(package).as_posix() not in home
        and re.search(r"\b(use_cudnn_autotuner|keep_freed_memory)\(", p.read_text())
    )
    assert callers == []
