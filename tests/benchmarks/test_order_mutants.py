"""Every mutant of ``benchmarks.order_mutants`` still applies to the code it breaks.

The script edits the package by text: a refactoring that renames a line would leave a mutant
that changes nothing and would then count as "missed". Each mutant's original text must occur
exactly once in its file, and its edit must change that file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import order_mutants

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("mutant", order_mutants.MUTANTS, ids=lambda m: m[0])
def test_the_mutant_finds_its_line_once(mutant):
    ident, _kind, fault, path, original, mutated = mutant
    text = (ROOT / path).read_text()
    assert text.count(original) == 1, f"{ident} ({fault}): {original!r} in {path}"
    assert original != mutated, ident


def test_mutant_ids_are_unique_and_their_extra_tests_exist():
    ids = [m[0] for m in order_mutants.MUTANTS]
    assert len(ids) == len(set(ids))
    assert set(order_mutants.EXTRA_TESTS) <= set(ids)
    for path in order_mutants.TESTS:
        assert (ROOT / path).is_file(), path
