"""A method's options and settings checked before any data loads.

A strategy option's type and default have one home: the annotated constructor of the method's
class (and of those it inherits from; a baseline's model class for its model options), read by
:func:`~avalanche_sets.methods.options.signature_options`. :func:`parse_options` types the
command line's text by it, :func:`typed_options` checks Python values by it; both return
:class:`~avalanche_sets.methods.typed.MethodOptions`, which every later step (and these
functions, handed one) takes as it is: an option is typed once, where it is handed over.
:func:`check_method` refuses, before any data loads, an option the method does not take, one
that contradicts an option it fixes (an ORDER ablation's switch), and a preset setting the user
set that the run would not read (:func:`unread_settings`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..method import _settings, same_value
from ..presets import RunConfig, require_config
from ..suggest import did_you_mean
from .options import OptionSpec, OptionValueError, close_names, describe_options
from .reads import _class_options, _unread_of, declared_defaults
from .resolve import method_class
from .typed import MethodOptions, _typed

__all__ = [
    "MethodOptionError",
    "check_method",
    "checked_method",
    "default_options",
    "method_options",
    "normal_options",
    "parse_options",
    "run_config",
    "strategy_set_options",
    "tuned_options",
    "typed_options",
    "unread_settings",
]


class MethodOptionError(TypeError, ValueError):
    """A strategy option the method does not take, or a value of another type than the
    option's (a ``TypeError``; also a ``ValueError``, as every other bad setting, so the
    command line reports it as one)."""


def tuned_options(name: str) -> dict[str, Any]:
    """The options every run of method ``name`` gets unless told otherwise: its class's
    :attr:`~avalanche_sets.method.Method.tuned` (``{}`` for a method without)."""
    return dict(method_class(name).tuned)


def method_options(name: str) -> tuple[dict[str, OptionSpec], bool]:
    """The strategy options method ``name`` takes, each with its type and default (read from
    its class's constructor: :func:`~avalanche_sets.methods.options.signature_options`), and
    whether it takes others besides (never: a method class names every option it takes).

    Raises:
        ValueError: as :func:`~avalanche_sets.methods.method_class`.
    """
    return _class_options(method_class(name)), False


def _option_specs(name: str, keys: Iterable[str]) -> dict[str, OptionSpec]:
    """The options of method ``name`` named ``keys``: an option it does not take is refused,
    with its typed option list and the closest name."""
    options, _ = method_options(name)
    unknown = sorted(set(keys) - set(options))
    if unknown:
        raise MethodOptionError(
            f"method {name!r} ({method_class(name).__name__}) does not accept option(s) "
            f"{unknown}{close_names(unknown, options)}; fix: use its valid options "
            f"{describe_options(options)}"
        )
    return {k: options[k] for k in keys}


def typed_options(name: str, overrides: Mapping[str, Any]) -> MethodOptions:
    """``overrides`` checked against the types of method ``name``'s options and kept as the
    option keeps them (an int given for a float option is that float, a list for a sequence a
    tuple): the values a run's folder name and identity hold. ``overrides`` typed already (a
    :class:`~avalanche_sets.methods.typed.MethodOptions` of ``name``) are returned as they are.

    Raises:
        MethodOptionError: an option ``name`` does not take (with its typed option list and the
            closest name), a value of another type (``use_ot="false"``: a string is no bool),
            or options typed for another method.
    """
    if isinstance(overrides, MethodOptions):
        if overrides.method != name:
            raise MethodOptionError(
                f"options typed for method {overrides.method!r} were handed to method "
                f"{name!r}; fix: type them for it: typed_options({name!r}, dict(options))"
            )
        return overrides
    specs = _option_specs(name, overrides)
    where = f"method {name!r}: "
    try:
        return _typed(name, {k: specs[k].check(v, where=where) for k, v in overrides.items()})
    except OptionValueError as err:
        raise MethodOptionError(str(err)) from None


def parse_options(name: str, texts: Mapping[str, str]) -> MethodOptions:
    """Command-line text (``--strategy-set KEY=VALUE``) as method ``name``'s typed options:
    ``use_ot=false`` is ``False``, ``lr=1e-3x`` is refused (spellings:
    :mod:`avalanche_sets.methods.options`). Each text is typed once, by
    :meth:`~avalanche_sets.methods.options.OptionSpec.parse`, which gives the value
    :meth:`~avalanche_sets.methods.options.OptionSpec.check` keeps (a float for a float option,
    a tuple for a sequence): nothing checks it again.

    Raises:
        MethodOptionError: an option ``name`` does not take, or text that is no value of the
            option's type; each with the method's typed option list or the fix.
    """
    specs = _option_specs(name, texts)
    where = f"method {name!r}: "
    try:
        values = {k: specs[k].parse(text, where=where) for k, text in texts.items()}
    except OptionValueError as err:
        options, _ = method_options(name)
        settable = {k: o for k, o in options.items() if o.from_text}
        raise MethodOptionError(f"{err}; its options: {describe_options(settable)}") from None
    return _typed(name, values)


def strategy_set_options(
    items: Iterable[str] | None, methods: list[str]
) -> dict[str, MethodOptions]:
    """``--strategy-set [METHOD:]KEY=VALUE`` → each method's typed options.

    A plain ``KEY=VALUE`` goes to every method; ``METHOD:KEY=VALUE`` to that method only (the
    ``:`` before the key is the last one, so ``pkg.module:Class:weight=0.5`` gives a method
    class's option).
    The text is typed by the option's type (:func:`~avalanche_sets.methods.parse_options`),
    once: the run takes the typed options it gives
    (:class:`~avalanche_sets.methods.MethodOptions`) as they are.

    Raises:
        ValueError: an item without ``=``; a method not in the command; an option given twice
            to one method (the later would win unseen); a plain option some method does not
            take while others do (naming which); text that is no value of the option's type.
    """
    texts: dict[str, dict[str, str]] = {m: {} for m in methods}
    given: dict[str, dict[str, str]] = {m: {} for m in methods}  # key -> the item that gave it
    shared: dict[str, str] = {}
    for item in items or []:
        target, eq, value = item.partition("=")
        method, _, key = target.rpartition(":")
        if not eq or not key:
            raise ValueError(f"--strategy-set expects [METHOD:]key=value, got {item!r}")
        if method and method not in texts:
            hint = did_you_mean(method, methods)
            raise ValueError(
                f"--strategy-set {item}: method {method!r} is not run by this command{hint}; "
                f"fix: name one of {methods}, or give key=value to every method"
            )
        for m in [method] if method else methods:
            if key in texts[m]:
                raise ValueError(
                    f"--strategy-set gives option {key!r} of method {m!r} twice "
                    f"({given[m][key]} and {item}); fix: give it once"
                )
            texts[m][key], given[m][key] = value, item
        if not method:
            shared[key] = item
    for key, item in shared.items():
        lacking = [m for m in methods if not _takes_option(method_options(m), key)]
        if lacking and len(lacking) < len(methods):
            takers = [m for m in methods if m not in lacking]
            raise ValueError(
                f"--strategy-set {item} goes to every method, but {lacking} take(s) no option "
                f"{key!r}; fix: give it to the method(s) that take it: "
                + " ".join(f"--strategy-set {m}:{item}" for m in takers)
            )
    return {m: parse_options(m, texts[m]) for m in methods}


def _takes_option(options: tuple[dict, bool], key: str) -> bool:
    named, open_ = options
    return open_ or key in named


def default_options(name: str, config: RunConfig) -> dict[str, Any]:
    """The value of each strategy option a run of method ``name`` with ``config`` runs with
    when no override names it (:func:`~avalanche_sets.methods.reads.declared_defaults`)."""
    return declared_defaults(method_class(name), require_config(config, "default_options"))


def normal_options(
    name: str, config: RunConfig, overrides: Mapping[str, Any] | None
) -> MethodOptions:
    """``overrides`` typed (:func:`typed_options`: options typed already are taken as they
    are), less every option whose value is the one a run of ``name`` with ``config`` has anyway
    (:func:`default_options`): an explicit default is no override. The strategy options a run's
    folder name and identity hold, and its strategy is built with.

    Raises:
        MethodOptionError: as :func:`typed_options`.
    """
    typed = typed_options(name, overrides or {})
    defaults = default_options(name, require_config(config, "normal_options")) if typed else {}
    kept = {k: v for k, v in typed.items() if not (k in defaults and same_value(v, defaults[k]))}
    return typed if len(kept) == len(typed) else _typed(name, kept)


def unread_settings(
    name: str,
    config: RunConfig,
    overrides: Mapping[str, Any] | None = None,
    *,
    eval_stream: str = "test",
) -> dict[str, str]:
    """The preset settings a run of method ``name`` (with strategy ``overrides``, evaluated on
    ``eval_stream``) does not read, each with the reason (``{"mem_size": "mskm keeps no memory
    of tasks"}``; which ones: :mod:`avalanche_sets.methods.reads`). :func:`check_method`
    refuses those a user set; a run records them (its identity and table row leave them out)."""
    config = require_config(config, "unread_settings")
    return _unread_of(name, method_class(name), config, overrides, eval_stream=eval_stream)


def _check_ot_solver(settings: Mapping[str, Any]) -> None:
    """Refuse a ``cvxpylayers`` OT set-up larger than its solver can build
    (:func:`~avalanche_sets.functional.ot.check_max_points`, the rule's one home), before any
    data loads."""
    if not (settings.get("use_replay", True) and settings.get("use_ot", True)):
        return
    if settings.get("ot_solver") != "cvxpylayers":
        return
    from ..functional.ot import check_max_points  # torch: the CLI parses without it

    check_max_points(
        "cvxpylayers", settings.get("ot_max_points"), option="ot_max_points",
        solver_option="ot_solver",
    )  # fmt: skip


def run_config(preset: RunConfig | str) -> RunConfig:
    """``preset`` as the run's config: itself, or the named preset for a name (``"quick"``).

    Raises:
        TypeError: anything else (a dictionary of settings among them, checked nowhere else),
            with the fix.
        ValueError: an unknown preset name.
    """
    if not isinstance(preset, (RunConfig, str)):
        raise TypeError(
            f"a run is made of a RunConfig or a preset's name, got a "
            f"{type(preset).__name__}; fix: avalanche_sets.presets.resolve_preset(<name>, "
            "**overrides), or RunConfig.of(settings) for a whole dictionary of settings"
        )
    return RunConfig.of(preset)


def check_method(
    name: str,
    preset: RunConfig | str,
    overrides: Mapping[str, Any] | None = None,
    *,
    given: Iterable[str] = (),
    eval_stream: str = "test",
) -> RunConfig:
    """Check a method name, the preset it is built for and its strategy options; returns the
    run's config (``preset`` itself, or the named preset for a name: ``"quick"``).

    :func:`~avalanche_sets.methods.build_strategy` calls it first; call it yourself to fail
    before loading any data. ``given``: the preset settings the user set explicitly (the
    command line's ``--set``); each must be read by this run of ``name`` on ``eval_stream``, or
    it is refused rather than ignored. Strategy options (``overrides``) are always given: an
    option of an ORDER component that the method turns off (``beta`` of ``order-no-ot``) is
    refused too.

    Raises:
        ValueError: an unknown method (with the closest name), a method of one's own that is
            no method class, a bad preset, an override that contradicts an option the method
            fixes (``build_strategy("order-no-ot", ..., use_ot=True)``), a setting or option the
            run would not read, or an OT set-up the ``cvxpylayers`` solver cannot build (more
            than 100 points per side).
        TypeError: a preset that is neither a config nor a name; a strategy option the method
            does not accept (with the closest name) or a
            value of another type than the option's (:func:`typed_options`).
    """
    config, _ = checked_method(name, preset, overrides, given=given, eval_stream=eval_stream)
    return config


def checked_method(
    name: str,
    preset: RunConfig | str,
    overrides: Mapping[str, Any] | None = None,
    *,
    given: Iterable[str] = (),
    eval_stream: str = "test",
) -> tuple[RunConfig, MethodOptions]:
    """:func:`check_method`, returning the run's config and its options typed
    (:func:`typed_options`) as it checked them: what a run hands on to name its folder and
    build its strategy (:func:`~avalanche_sets.methods.build.build_checked_strategy`) without
    typing them again.

    Raises:
        ValueError, TypeError: as :func:`check_method`.
    """
    cls = method_class(name)
    config = run_config(preset)
    overrides = typed_options(name, overrides or {})
    ignored = unread_settings(name, config, overrides, eval_stream=eval_stream)
    unread = {k: why for k, why in ignored.items() if k in set(given)}
    cls.check_fixed(overrides)
    settings = {**_settings(cls, cls.fixed), **overrides}
    for switch, options in getattr(cls, "component_options", {}).items():
        if settings.get(switch, True):
            continue
        for key in options:
            if key in overrides:
                unread[key] = f"{name} runs with {switch}=False"
    if unread:
        why = "; ".join(f"{key}: {reason}" for key, reason in sorted(unread.items()))
        raise ValueError(
            f"method {name!r} would not read setting(s) {sorted(unread)} ({why}); they would "
            "change the run's folder name and nothing it computes; fix: drop them, or choose "
            "the method (or --eval-stream) that uses them"
        )
    _check_ot_solver(settings)
    return config, overrides
