"""A method's name to its class: the built-ins' table, installed entry points, ``module:Class``.

A name is one of

* a built-in method (:data:`~avalanche_sets.methods.builtins.BUILTIN_METHODS`);
* an entry point's name: an installed package declares ``my-method =
  "my_pkg.methods:MyMethod"`` in the ``[project.entry-points."avalanche_sets.methods"]`` table
  of its ``pyproject.toml``;
* ``"package.module:Class"``: imported from the Python path (the current folder included).

Every one names a method class (:class:`~avalanche_sets.method.Method`), imported only when it
is asked for: listing the names loads no torch.
"""

from __future__ import annotations

import importlib
import os
import sys
from importlib.metadata import entry_points

from ..method import Method
from ..suggest import did_you_mean
from .builtins import BUILTIN_METHODS, builtin_methods

__all__ = [
    "ENTRY_POINT_GROUP",
    "installed_methods",
    "is_custom_method",
    "method_class",
    "method_folder_name",
    "method_names",
    "method_target",
]

#: The entry-point group under which installed packages register their methods.
ENTRY_POINT_GROUP = "avalanche_sets.methods"


def installed_methods() -> dict[str, str]:
    """The methods installed packages register (:data:`ENTRY_POINT_GROUP`): name ->
    ``"module:Class"``."""
    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


def method_names() -> list[str]:
    """The built-in methods, then the installed ones (a ``module:Class`` is always valid)."""
    builtin = builtin_methods()
    return [*builtin, *sorted(set(installed_methods()) - set(builtin))]


def is_custom_method(name: str) -> bool:
    """Whether ``name`` names a method of one's own (an installed entry point or a
    ``module:Class``) rather than a built-in method."""
    return name not in BUILTIN_METHODS


def method_folder_name(name: str) -> str:
    """The folder a method's runs go to under a run root: its name, with the ``:`` of a
    ``module:Class`` spelled ``.`` (a ``:`` has other meanings in paths and log-dir lists)."""
    return name.replace(":", ".")


def method_target(name: str) -> str:
    """``"module:Class"`` of method ``name``: the built-ins' table's entry, an installed entry
    point's value, or the name itself."""
    return BUILTIN_METHODS.get(name) or installed_methods().get(name, name)


def _unknown(name: str) -> ValueError:
    hint = did_you_mean(str(name), method_names(), cutoff=0.5)
    return ValueError(
        f"unknown method {name!r}{hint}; choose one of {method_names()}, or name a method "
        "class of your own as 'package.module:Class' (or install it under the entry-point "
        f"group {ENTRY_POINT_GROUP!r})"
    )


def _import(name: str, module_name: str):
    """Module ``module_name`` of method ``name``; the current folder is searched last (as for
    ``python -m``), so a file next to where the command runs needs no installing."""
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.append(os.getcwd())  # searched last: an installed module of the name wins
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name is None or not module_name.startswith(err.name):
            raise  # the module exists but imports something that does not
        raise ValueError(
            f"method {name!r}: no module {module_name!r} on the Python path or in the current "
            f"folder {os.getcwd()}; fix: run from the folder that holds {module_name}.py, add "
            "its folder to PYTHONPATH, or install its package"
        ) from None


def method_class(name: str) -> type[Method]:
    """The class of method ``name`` (its module imported: torch loads here).

    Raises:
        ValueError: an unknown name (with the closest one); a module or attribute that is
            missing; a target that is no method class (a function: subclass a method class
            instead); a class of one's own without a ``name`` of its own; an entry point whose
            name is not its class's ``name``; an installed method that takes a built-in name.
    """
    if name in BUILTIN_METHODS and name in installed_methods():
        raise ValueError(
            f"an installed package registers a method named {name!r} (entry point "
            f"{installed_methods()[name]!r}), which is a built-in method's name; fix: rename "
            f"that entry point in its package's {ENTRY_POINT_GROUP!r} group"
        )
    target = method_target(name)
    module_name, colon, attr = target.partition(":")
    if not colon or not module_name or not attr:
        raise _unknown(name)
    module = _import(name, module_name)
    found = module
    for part in attr.split("."):
        if not hasattr(found, part):
            public = sorted(n for n in vars(module) if not n.startswith("_"))
            raise ValueError(
                f"method {name!r}: module {module_name!r} has no attribute {attr!r}; it "
                f"defines {public}"
            )
        found = getattr(found, part)
    if not (isinstance(found, type) and issubclass(found, Method)):
        raise ValueError(
            f"method {name!r}: {target} is a {type(found).__name__}, not a method class; fix: "
            "subclass a built-in method class (avalanche_sets.baselines.MSKM, "
            "avalanche_sets.OrderStrategy, ...), set its name and summary, and name the class "
            "(docs/guide/custom-method.md)"
        )
    if "name" not in vars(found):
        raise ValueError(
            f"method {name!r}: {target} does not name itself (it inherits name="
            f"{getattr(found, 'name', None)!r}); fix: set name = ... and summary = ... in the "
            "class"
        )
    if (name in BUILTIN_METHODS or name in installed_methods()) and found.name != name:
        where = "methods/builtins.py" if name in BUILTIN_METHODS else "the entry point"
        raise ValueError(
            f"the method {name!r} ({target}) is named {found.name!r}; fix: make the two one "
            f"name (in {where}, or the class's name)"
        )
    return found
