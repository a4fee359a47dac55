"""The built-in methods: the declarations (``MethodSpec``) in the package's own modules.

They are read from the modules' source without importing them
(:func:`~avalanche_sets.method_spec.package_declarations`), once per process, so the command
line lists the methods before torch loads; a module added to the package with a declaration is
a method, with nothing else to edit.
"""

from __future__ import annotations

import functools
from pathlib import Path

from ..method_spec import FAMILIES, MethodSpec, package_declarations

__all__ = ["builtin_methods"]


@functools.cache
def _builtin_specs() -> dict[str, MethodSpec]:
    specs = package_declarations(Path(__file__).resolve().parent.parent, __package__.split(".")[0])
    by_name: dict[str, MethodSpec] = {}
    for spec in specs:
        if spec.name in by_name:
            raise ValueError(
                f"method {spec.name!r} is declared twice, in {by_name[spec.name].module} and "
                f"{spec.module}; fix: rename one"
            )
        by_name[spec.name] = spec
    order = sorted(by_name.values(), key=_listing_key)
    return {spec.name: spec for spec in order}


def _listing_key(spec: MethodSpec) -> tuple:
    """Methods are listed by family (a method before its variants), then by their first row in
    the paper's Tables 2 and 3."""
    first = min((r.position for r in spec.rows if r.table in ("table2", "table3")), default=99)
    return (FAMILIES.index(spec.family), bool(spec.fixed), first, spec.name)


def builtin_methods() -> tuple[str, ...]:
    """The built-in methods' names (by family: ORDER's, the meta-learners, the continual
    baselines, joint training)."""
    return tuple(_builtin_specs())
