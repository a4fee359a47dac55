"""The template keeps freed memory for the next step (glibc), unless the user opts out."""

import pytest

from avalanche_sets.methods import build_strategy
from avalanche_sets.presets import resolve_preset
from avalanche_sets.training import allocator

glibc = pytest.mark.skipif(allocator._libc() is None, reason="not glibc: nothing to tune")


@glibc
def test_building_a_strategy_keeps_freed_memory():
    assert allocator.keep_freed_memory(False) and allocator.allocator_mode() == "system"
    build_strategy("mskm", resolve_preset("quick", width=4), seed=0)
    assert allocator.allocator_mode() == "kept"


@glibc
def test_the_opt_out_leaves_malloc_alone(monkeypatch):
    allocator.keep_freed_memory(False)
    monkeypatch.setenv("AVALANCHE_SETS_MALLOC", "system")
    build_strategy("mskm", resolve_preset("quick", width=4), seed=0)
    assert allocator.allocator_mode() == "system"
    assert not allocator.keep_freed_memory()
    monkeypatch.delenv("AVALANCHE_SETS_MALLOC")
    assert allocator.keep_freed_memory() and allocator.allocator_mode() == "kept"
