"""Names of a package loaded on first use (PEP 562), so that importing the package is cheap."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any


def lazy_names(package: str, names: dict[str, str]) -> tuple[Callable[[str], Any], Callable]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` for ``names`` (name → submodule).

    A name is imported from its submodule (relative to ``package``) when first read, then
    cached in the package's namespace.
    """
    namespace = vars(import_module(package))

    def __getattr__(name: str) -> Any:
        if name in names:
            value = getattr(import_module(names[name], package), name)
            namespace[name] = value
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*namespace, *names})

    return __getattr__, __dir__
