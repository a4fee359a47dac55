"""A method's strategy options, typed: the value that says its options were typed and checked.

An option is typed once, where a caller hands it over (the command line's text by
:func:`~avalanche_sets.methods.parse_options`, Python's values by
:func:`~avalanche_sets.methods.typed_options`); what that gives is a :class:`MethodOptions`, and
every later step of a run (its checks, its folder's name, its strategy's construction) takes it
as it is instead of typing it again. So that holding one means its values were typed for its
method, only the typing functions make one, it cannot be changed, and it remembers the method
it was typed for: options of one method handed to another are refused, not re-read.
"""

from __future__ import annotations

import types
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["MethodOptions"]

_FROZEN = "MethodOptions cannot be changed; fix: dict(options) is a copy to change"


class MethodOptions(Mapping[str, Any]):
    """Method :attr:`method`'s strategy options, each typed and checked against the option's
    type (an int given for a float option is that float, a list for a sequence a tuple): a
    read-only mapping of option names to values.

    Made only by the typing functions of :mod:`avalanche_sets.methods`
    (:func:`~avalanche_sets.methods.typed_options`,
    :func:`~avalanche_sets.methods.parse_options`,
    :func:`~avalanche_sets.methods.normal_options`), which return one handed to them for the
    same method unchanged. ``dict(options)`` is a plain (mutable) copy.

    Raises:
        TypeError: made directly (with the fix), or changed.
    """

    __slots__ = ("_method", "_values")
    _method: str
    _values: Mapping[str, Any]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            "MethodOptions are made by the functions that type a method's options; fix: "
            "avalanche_sets.methods.typed_options(method, {...}) for Python values, "
            "parse_options(method, {...}) for command-line text"
        )

    @property
    def method(self) -> str:
        """The method whose options these are (as its name was given)."""
        return self._method

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __setattr__(self, name: str, value: Any) -> None:
        raise TypeError(_FROZEN)

    def __delattr__(self, name: str) -> None:
        raise TypeError(_FROZEN)

    def __repr__(self) -> str:
        return f"MethodOptions({self._method!r}, {dict(self._values)!r})"

    def __reduce__(self) -> tuple:
        # a worker process (a sweep's pool, Ray) receives the typed options as typed
        return _typed, (self._method, dict(self._values))


def _typed(method: str, values: Mapping[str, Any]) -> MethodOptions:
    """Method ``method``'s options ``values``, typed already: for the typing functions of
    :mod:`avalanche_sets.methods.check` alone."""
    options = object.__new__(MethodOptions)
    object.__setattr__(options, "_method", method)
    object.__setattr__(options, "_values", types.MappingProxyType(dict(values)))
    return options
