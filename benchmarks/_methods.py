"""What ``benchmarks/`` reads of the library's built-in methods, in one place.

Every benchmark script takes a method's name list, one-line summary, fixed and tuned options and
the class that implements it from here, never from the library's registry directly, so the
library's way of describing a method is read by these few functions alone. What the *lab* knows
of a method — the paper's rows it fills and its numbers (:mod:`benchmarks.paper_rows`), the
grid and record that tuned it (:mod:`benchmarks.baseline_tuning`) — lives in ``benchmarks/``.
"""

from __future__ import annotations

from typing import Any

from avalanche_sets.methods import builtin_methods, is_custom_method, method_class

__all__ = ["class_label", "fixed", "names", "strategy_path", "summary", "tuned"]


def names() -> list[str]:
    """The built-in methods, in the library's listing order."""
    return list(builtin_methods())


def _declared(name: str) -> type:  # the class of a built-in method
    if is_custom_method(name):
        raise ValueError(
            f"{name!r} is no built-in method; fix: name a built-in method ({', '.join(names())})"
        )
    return method_class(name)


def summary(name: str) -> str:
    """What method ``name`` is, in one line."""
    return _declared(name).summary


def fixed(name: str) -> dict[str, Any]:
    """The strategy options method ``name`` fixes (an ORDER ablation's switches; ``{}``: none)."""
    return dict(_declared(name).fixed)


def tuned(name: str) -> dict[str, Any]:
    """The tuned option values every run of method ``name`` gets (``{}``: its class defaults)."""
    return dict(_declared(name).tuned)


def class_label(name: str) -> str:
    """The name of the class that implements method ``name``."""
    return _declared(name).__name__


def strategy_path(name: str) -> str:
    """The repository file of the module that defines method ``name``'s class."""
    return _declared(name).__module__.replace(".", "/") + ".py"
