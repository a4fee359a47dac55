"""A method's options are read from its constructor's signature: their annotations resolved as
types in the constructor's module (strings under ``from __future__ import annotations``),
without evaluating anything but the annotations."""

from __future__ import annotations

import typing

from avalanche_sets.methods.options import signature_options

if typing.TYPE_CHECKING:  # a name a type checker sees and the running code does not
    from collections import OrderedDict as OnlyForTypeCheckers


def _constructor(
    self,
    *,
    lam: float = 1e-5,
    steps: int | None = None,
    solver: typing.Literal["exact", "sinkhorn"] = "exact",
    order: OnlyForTypeCheckers | None = None,  # noqa: F821
    plain=3,
) -> None:
    pass


def test_string_annotations_are_types_and_an_unresolvable_one_is_left_untyped():
    options = signature_options(_constructor)
    assert list(options) == ["lam", "steps", "solver", "order", "plain"]
    assert options["lam"].type is float and options["lam"].default == 1e-5
    assert options["steps"].type == (int | None)
    assert options["solver"].type == typing.Literal["exact", "sinkhorn"]
    assert options["order"].type is None  # no known type, the others kept
    assert options["plain"].type is int  # its default's plain type


def test_skip_leaves_out_what_is_no_option():
    assert "lam" not in signature_options(_constructor, skip=("lam",))
