"""Typed strategy options: an option's type is read from the signature that takes it.

A strategy option (``--strategy-set KEY=VALUE`` on the command line, ``**overrides`` of
:func:`~avalanche_sets.methods.build_strategy`) has one home for its name, type and default:
the annotated signature of what implements it — a method class's constructor (every class it
inherits from), its model class's for a baseline's ``model_options``, its mechanism's plugin
class's for a continual baseline. :func:`signature_options` reads them; the command line types its text with
:meth:`OptionSpec.parse` and Python construction checks its values with
:meth:`OptionSpec.check`, so ``use_ot=false`` is ``False`` in both, before any data loads.

The types understood are those the package's strategies and models use: ``bool``, ``int``,
``float``, ``str``, ``None`` in a union (``int | None``), ``Literal[...]``, and sequences of
them (``Sequence[str]``, ``tuple[int, ...]``). An option without an annotation takes the type
of its default when that is one of ``bool``, ``int``, ``float`` or ``str``; an option of no
known type (``model``, ``optimizer``: objects) is accepted from Python as it is, and the command
line reads its text as a Python literal.

Command-line spellings: a bool is ``true``/``false``, ``yes``/``no``, ``1``/``0`` (any case);
``None`` is ``none`` or ``null`` (any case); a sequence is comma-separated (``mi_terms=id,ood``)
or a Python literal (``"mi_terms=('id',)"``).
"""

from __future__ import annotations

import ast
import collections.abc
import inspect
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..suggest import did_you_mean

__all__ = [
    "BOOL_SPELLINGS",
    "NONE_SPELLINGS",
    "ORDER_PARTS",
    "OptionSpec",
    "OptionValueError",
    "RUN_ARGUMENTS",
    "close_names",
    "describe_options",
    "signature_options",
]

#: Command-line spellings of a bool option's values (compared without case).
BOOL_SPELLINGS: dict[str, bool] = {
    "true": True, "yes": True, "1": True, "false": False, "no": False, "0": False,
}  # fmt: skip
#: Command-line spellings of ``None`` for an option whose type allows it (without case).
NONE_SPELLINGS = ("none", "null")

_EMPTY = inspect.Parameter.empty

#: ORDER's replaceable parts (:mod:`avalanche_sets.order.components`): objects, which a run
#: would name by their ``repr`` only; a method class of one's own passes them instead.
ORDER_PARTS = ("ood_detector", "mi_estimator", "memory", "transport")

#: Constructor arguments that a run builds or takes from its preset, never strategy options a
#: user sets (``--strategy-set`` refuses them, and no option list names them), with where each
#: comes from.
RUN_ARGUMENTS: dict[str, str] = {
    "model": "the run builds it from the preset (--set n_blocks=... width=...)",
    "optimizer": "the run builds it (its learning rate: --set lr=...)",
    "criterion": "the method's loss is part of the method",
    "evaluator": "the run builds it (its loggers: --loggers)",
    "plugins": "the run hands over its own (plugins of your own: docs/guide/custom-method.md)",
    "cl_plugin": "the method builds it from its own options",
    "model_options": "its entries are options of their own",
    "device": "a preset setting: --set device=...",
    "train_mb_size": "a preset setting: --set meta_batch=...",
    "eval_mb_size": "a preset setting: --set eval_mb_size=...",
    **{
        part: "a part of ORDER's, replaced in a method class of one's own that passes it "
        "(docs/guide/custom-method.md, 'Replacing a part of ORDER')"
        for part in ORDER_PARTS
    },
}
_PLAIN = (bool, int, float, str)


class OptionValueError(TypeError, ValueError):
    """A strategy option's value does not have the option's type (a ``TypeError``; also a
    ``ValueError``, as every other bad setting, so the command line reports it as one)."""


class _NoMatch(Exception):
    """One member of a union (or one element type) does not take the value."""


def _name(tp: Any) -> str:
    """A type as the messages write it: ``float``, ``int | None``, ``sequence of str``."""
    if tp is None:
        return "any"
    if tp is type(None):
        return "None"
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_name(a) for a in args)
    if _element_type(tp) is not _NOT_SEQUENCE:
        return f"sequence of {_name(_element_type(tp))}"
    return getattr(tp, "__name__", str(tp))


_NOT_SEQUENCE = object()


def _element_type(tp: Any) -> Any:
    """The element type of a sequence annotation (``None`` when it says none), else
    :data:`_NOT_SEQUENCE`."""
    origin = typing.get_origin(tp) or tp
    if origin in (tuple, list, collections.abc.Sequence):
        args = [a for a in typing.get_args(tp) if a is not Ellipsis]
        return args[0] if len(set(args)) == 1 else None
    return _NOT_SEQUENCE


def _known(tp: Any) -> bool:
    """Whether values of ``tp`` can be typed here (a plain type, None, Literal, a union or a
    sequence of them); the others (objects) are taken as they come."""
    if tp in _PLAIN or tp is type(None):
        return True
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Literal:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_known(a) for a in args)
    element = _element_type(tp)
    return element is not _NOT_SEQUENCE and (element is None or _known(element))


def _from_text(text: str, tp: Any) -> Any:
    """Command-line text as a value of ``tp``; raises :class:`_NoMatch`."""
    stripped = text.strip()
    if tp is type(None):
        if stripped.lower() in NONE_SPELLINGS or stripped == "None":
            return None
        raise _NoMatch
    if tp is bool:
        try:
            return BOOL_SPELLINGS[stripped.lower()]
        except KeyError:
            raise _NoMatch from None
    if tp is int:
        try:
            return int(stripped)
        except ValueError:
            raise _NoMatch from None
    if tp is float:
        try:
            return float(stripped)
        except ValueError:
            raise _NoMatch from None
    if tp is str:
        try:
            value = ast.literal_eval(stripped)  # a quoted string: 'exact'
        except (ValueError, SyntaxError):
            return text
        return value if isinstance(value, str) else text
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Literal:
        for allowed in args:
            try:
                if _from_text(text, type(allowed)) == allowed:
                    return allowed
            except _NoMatch:
                continue
        raise _NoMatch
    if origin in (typing.Union, types.UnionType):
        # None first (so "none" is not the string "none"), then the narrowest type
        order = sorted(args, key=lambda a: (a is not type(None), a is str))
        for member in order:
            try:
                return _from_text(text, member)
            except _NoMatch:
                continue
        raise _NoMatch
    element = _element_type(tp)
    if element is not _NOT_SEQUENCE:
        try:
            literal = ast.literal_eval(stripped)
        except (ValueError, SyntaxError):
            literal = None
        if isinstance(literal, (list, tuple)):
            return _check_value(literal, tp)
        items = [t for t in stripped.split(",") if t.strip()] if stripped else []
        if element is None:
            return tuple(_literal(t) for t in items)
        return tuple(_from_text(t, element) for t in items)
    raise _NoMatch


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _check_value(value: Any, tp: Any) -> Any:
    """A Python value as a value of ``tp`` (an int for a float option becomes a float, a list
    for a sequence a tuple); raises :class:`_NoMatch`."""
    if tp is type(None):
        if value is None:
            return None
        raise _NoMatch
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise _NoMatch
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise _NoMatch
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise _NoMatch
    if tp is str:
        if isinstance(value, str):
            return value
        raise _NoMatch
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Literal:
        for allowed in args:
            if type(value) is type(allowed) and value == allowed:
                return value
        raise _NoMatch
    if origin in (typing.Union, types.UnionType):
        for member in args:
            try:
                return _check_value(value, member)
            except _NoMatch:
                continue
        if not any(_known(a) for a in args):
            return value
        raise _NoMatch
    element = _element_type(tp)
    if element is not _NOT_SEQUENCE:
        if not isinstance(value, (list, tuple)):
            raise _NoMatch
        if element is None or not _known(element):
            return tuple(value)
        return tuple(_check_value(v, element) for v in value)
    return value  # an object's type: taken as it comes


@dataclass(frozen=True)
class OptionSpec:
    """One strategy option: its name, its type (``None``: no type known) and its default
    (:data:`inspect.Parameter.empty` when it has none)."""

    name: str
    type: Any = None
    default: Any = _EMPTY

    @property
    def typed(self) -> bool:
        """Whether values of this option are checked (its type is one this module reads)."""
        return self.type is not None and _known(self.type)

    @property
    def from_text(self) -> bool:
        """Whether the command line can give this option (it has a type read from text, or
        none known, when its text is read as a Python literal)."""
        return self.type is None or _from_command_line(self.type, "")

    def describe(self) -> str:
        """``name: type = default``, as option lists in messages write it."""
        default = "" if self.default is _EMPTY else f" = {_short(self.default)}"
        return f"{self.name}: {_name(self.type) if self.type is not None else 'any'}{default}"

    def parse(self, text: str, *, where: str = "") -> Any:
        """The value command-line ``text`` gives this option (see the module's docstring for
        the spellings); an option of no known type reads ``text`` as a Python literal.

        Raises:
            OptionValueError: an option of :data:`RUN_ARGUMENTS` (set by the run, not by the
                user), or ``text`` is no value of the option's type (with the fix and, for a
                fixed set of values, the closest one).
        """
        if self.name in RUN_ARGUMENTS:
            raise OptionValueError(
                f"{where}{self.name!r} is an argument the run sets, not a strategy option: "
                f"{RUN_ARGUMENTS[self.name]}; fix: drop --strategy-set {self.name}=..."
            )
        if not self.typed or not _from_command_line(self.type, text):
            if self.type is not None:  # an object (a model, an optimiser): not from text
                raise OptionValueError(
                    f"{where}option {self.name!r} takes a {_name(self.type)}, which the "
                    "command line cannot give; fix: build the strategy from Python "
                    "(avalanche_sets.build_strategy) or drop the option"
                )
            return _literal(text)
        try:
            return _from_text(text, self.type)
        except _NoMatch:
            raise OptionValueError(
                f"{where}option {self.name!r} takes {_article(self.type)}, got {text!r}"
                f"{_closest(self.type, text.strip())}; fix: {self._example()}"
            ) from None

    def check(self, value: Any, *, where: str = "") -> Any:
        """``value`` as this option keeps it: an int given for a float option is that float, a
        list for a sequence option a tuple; a value of an option of no known type as it is.

        Raises:
            OptionValueError: ``value`` is no value of the option's type (a string for a bool
                option among them: ``"false"`` is true in Python), with the fix.
        """
        if not self.typed:
            return value
        try:
            return _check_value(value, self.type)
        except _NoMatch:
            raise OptionValueError(
                f"{where}option {self.name!r} takes {_article(self.type)}, got {value!r} "
                f"({type(value).__name__}){_closest(self.type, value)}; fix: {self._example()}"
            ) from None

    def _example(self) -> str:
        """How to give a value of this option, on the command line and in Python."""
        tp = self.type
        if tp is bool or (
            typing.get_origin(tp) in (typing.Union, types.UnionType) and bool in typing.get_args(tp)
        ):
            return (
                f"{self.name}=true or {self.name}=false on the command line (also yes/no, 1/0), "
                f"{self.name}=True or {self.name}=False in Python"
            )
        example = f", e.g. {self.name}={self.default!r}" if type(self.default) in _PLAIN else ""
        return f"give {self.name} {_article(tp)}{example}"


def _from_command_line(tp: Any, text: str) -> bool:
    """Whether command-line ``text`` can be a value of ``tp``: some member of it besides
    ``None`` is a type read from text, or ``text`` spells ``None``."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(tp) if a is not type(None)]
        return any(_known(a) for a in members) or text.strip().lower() in NONE_SPELLINGS
    return _known(tp)


def _short(value: Any) -> str:
    """A default as an option list shows it: plain values as Python writes them, a function by
    its name, another object by its type."""
    if value is None or type(value) in _PLAIN or isinstance(value, tuple):
        return repr(value)
    return getattr(value, "__name__", type(value).__name__)


def _choices(tp: Any) -> tuple[str, ...]:
    """The strings a ``Literal`` (or a union or sequence holding one) allows."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Literal:
        return tuple(a for a in args if isinstance(a, str))
    if origin in (typing.Union, types.UnionType):
        return tuple(c for a in args for c in _choices(a))
    element = _element_type(tp)
    return _choices(element) if element not in (None, _NOT_SEQUENCE) else ()


def _closest(tp: Any, value: Any) -> str:
    """`` (did you mean 'exact'?)`` for a string (or strings) near a value ``tp`` allows."""
    choices = _choices(tp)
    if not choices:
        return ""
    given = [v.strip() for v in value.split(",")] if isinstance(value, str) else value
    given = [given] if isinstance(given, str) or not isinstance(given, Iterable) else given
    return close_names([g for g in given if isinstance(g, str) and g not in choices], choices)


def _article(tp: Any) -> str:
    name = _name(tp)
    if name.startswith("one of"):
        return name
    if name.startswith("sequence") or " | " in name:
        return f"a value of type {name}"
    return f"an {name}" if name[0] in "aeiou" else f"a {name}"


def _resolve(func: Callable) -> dict[str, Any]:
    """The annotations of ``func`` as types: strings (``from __future__ import annotations``)
    evaluated in its module; one that does not evaluate (a name imported only for type
    checkers) is left out, as having no known type."""
    try:
        return typing.get_type_hints(func)
    except Exception:  # one unresolvable name: resolve the others one by one
        pass
    namespace = {**vars(typing), **getattr(func, "__globals__", {})}
    out = {}
    for name, annotation in getattr(func, "__annotations__", {}).items():
        one = types.SimpleNamespace(__annotations__={name: annotation})
        try:
            out.update(typing.get_type_hints(one, globalns=namespace))
        except Exception:
            continue
    return out


def signature_options(func: Callable, *, skip: Iterable[str] = ()) -> dict[str, OptionSpec]:
    """The keyword parameters of ``func`` (a function or a constructor) as options, each with
    its annotated type (or its default's plain type) and its default; ``skip``: names that are
    not options (``self`` always)."""
    skip = {"self", *skip}
    hints = _resolve(func)
    out = {}
    for p in inspect.signature(func).parameters.values():
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) or p.name in skip:
            continue
        tp = hints.get(p.name)
        if tp is None and type(p.default) in _PLAIN:
            tp = type(p.default)
        out[p.name] = OptionSpec(p.name, tp, p.default)
    return out


def close_names(names: Iterable[str], valid: Iterable[str]) -> str:
    """`` (did you mean 'gamma'?)`` for each name with a close valid one (at most three)."""
    return did_you_mean(list(names), valid)


def describe_options(options: Mapping[str, OptionSpec]) -> str:
    """``[beta: float = 0.003, use_ot: bool = True, ...]``: an option list for a message, of
    the options a user may set: every message that lists options lists these, and no argument
    the run sets (:data:`RUN_ARGUMENTS`) or the command line cannot give."""
    shown = [k for k in sorted(options) if k not in RUN_ARGUMENTS and options[k].from_text]
    return "[" + ", ".join(options[k].describe() for k in shown) + "]"
