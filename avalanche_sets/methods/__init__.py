"""Registry of runnable methods: ORDER, its ablations, the baselines, and methods of your own.

``build_strategy(name, preset, seed=..., evaluator=...)`` builds the backbone the preset asks
for and the strategy; the command line, the examples and the benchmark scripts all go through
it, so a method means the same thing everywhere. The preset is a
:class:`~avalanche_sets.presets.RunConfig` (checked when it was made); a dictionary of settings
is checked once, on arrival.

A method is **declared** once, where it is implemented: a module-level
``NAME = MethodSpec(...)`` (:mod:`avalanche_sets.method_spec`) beside its strategy class —
its name, one line, its family, the options it fixes, its tuned options and the rows of the
paper's tables it fills. The built-ins are the declarations in the package's modules
(:func:`builtin_methods`, read without importing them, so the command line lists them without
torch); a declaration of one's own is registered under an entry point (below) whose value is
the ``MethodSpec``. Every reader — this registry, the command line, ``benchmarks/``, the
documentation's methods page, the tests — takes the methods from :func:`method_specs`.

A method of your own may instead be a **factory**, ``factory(preset, *, seed, evaluator,
plugins, **options) -> strategy``, named wherever a built-in name goes (``--method``,
``run_experiment``, sweeps, tables) in one of two ways:

* ``"package.module:factory"``: imported from the Python path (the current folder included);
* an entry point's name: an installed package declares ``my-method = "my_pkg.methods:build"``
  in the ``[project.entry-points."avalanche_sets.methods"]`` table of its ``pyproject.toml``.

A strategy option's type and default have one home: the annotated signature that takes it
(:func:`method_options`; the strategy class and those it inherits from, a baseline's model
class or its mechanism's plugin class, a factory's own parameters — and, for a factory with
``**options`` whose :data:`PASSES_OPTIONS_TO` attribute names a method, that method's); a
declaration's tuned options are the defaults it shows. :func:`parse_options` types the command
line's text by it and :func:`typed_options` checks Python values by it.

The factory must hand ``evaluator`` and ``plugins`` to the strategy it builds (checked); it
usually calls :func:`build_strategy` on a built-in method with its own plugins added. It is
handed the run's :class:`~avalanche_sets.presets.RunConfig` and reads a setting by its
attribute (``preset.lr``); ``preset.replace(width=16)`` is a checked copy with a change.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from ..method_spec import MethodSpec
from ..presets import RunConfig
from ..suggest import did_you_mean
from .builtins import _builtin_specs, builtin_methods
from .options import (
    OptionSpec,
    OptionValueError,
    close_names,
    describe_options,
    signature_options,
)
from .reads import (
    _accepted_options,
    _class_options,
    _model_option_names,
    _normal,
    _same,
    _settings,
    _strategy_class,
    _unread_of,
    declared_defaults,
    preset_options,
)

if TYPE_CHECKING:  # torch loads only when a strategy is built (the CLI parses without it)
    from ..models.backbone import ConvBackbone

__all__ = [
    "ENTRY_POINT_GROUP",
    "MethodOptionError",
    "MethodSpec",
    "PASSES_OPTIONS_TO",
    "build_strategy",
    "builtin_methods",
    "check_method",
    "default_options",
    "installed_methods",
    "is_custom_method",
    "method_factory",
    "method_folder_name",
    "method_names",
    "method_options",
    "method_spec",
    "method_specs",
    "make_backbone",
    "normal_options",
    "parse_options",
    "tuned_options",
    "typed_options",
    "unread_settings",
]


def method_specs() -> tuple[MethodSpec, ...]:
    """Every declared method: the built-ins, then those installed packages declare."""
    installed = [method_spec(n) for n in sorted(set(installed_methods()) - set(_builtin_specs()))]
    return (*_builtin_specs().values(), *(s for s in installed if s is not None))


def method_spec(name: str) -> MethodSpec | None:
    """The declaration of method ``name``; ``None`` for a factory of one's own.

    Raises:
        ValueError: as :func:`method_factory` for a name that is no built-in method; an
            installed declaration whose name is not its entry point's.
    """
    if name in _builtin_specs():
        return _builtin_specs()[name]
    target = _resolve(name)
    if not isinstance(target, MethodSpec):
        return None
    installed = installed_methods()
    if name in installed and target.name != name:
        raise ValueError(
            f"the entry point {name!r} ({installed[name]}) declares method "
            f"{target.name!r}; fix: name the entry point {target.name!r}"
        )
    module = installed.get(name, name).partition(":")[0]
    return target if target.module else replace(target, module=module)


class MethodOptionError(TypeError, ValueError):
    """A strategy option the method does not take, or a factory of one's own that does not
    take or keep what a factory is handed (a ``TypeError``; also a ``ValueError``, as every
    other bad setting, so the command line reports it as one)."""


#: The entry-point group under which installed packages register their methods.
ENTRY_POINT_GROUP = "avalanche_sets.methods"


def installed_methods() -> dict[str, str]:
    """The methods installed packages register (:data:`ENTRY_POINT_GROUP`): name -> factory
    (``"module:attribute"``)."""
    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


def method_names() -> list[str]:
    """The built-in methods, then the installed ones (a ``module:factory`` is always valid)."""
    builtin = builtin_methods()
    return [*builtin, *sorted(set(installed_methods()) - set(builtin))]


def is_custom_method(name: str) -> bool:
    """Whether ``name`` names a method of one's own (an installed entry point or a
    ``module:factory``) rather than a built-in method."""
    return name not in _builtin_specs()


def tuned_options(name: str) -> dict[str, Any]:
    """The options every run of method ``name`` gets unless told otherwise: its declaration's
    tuned options (``{}`` for a method without, a factory of one's own among them)."""
    spec = method_spec(name)
    return spec.tuned_options if spec is not None else {}


def method_folder_name(name: str) -> str:
    """The folder a method's runs go to under a run root: its name, with the ``:`` of a
    ``module:factory`` spelled ``.`` (a ``:`` has other meanings in paths and log-dir lists)."""
    return name.replace(":", ".")


def _target(name: str) -> str:
    """``module:attribute`` of a method of one's own: an installed entry point's value, or the
    name itself."""
    return installed_methods().get(name, name)


def _resolve(name: str) -> Any:
    """What a method of one's own names: its entry point's or ``module:attribute``'s object.

    The module is imported from the Python path; the current folder is searched last (as for
    ``python -m``), so a file next to where the command runs needs no installing.

    Raises:
        ValueError: ``name`` is neither (with the closest built-in name), the module or the
            attribute is missing, or it names a built-in method.
    """
    if name in _builtin_specs():
        raise ValueError(f"{name!r} is a built-in method, not a factory of one's own")
    target = _target(name)
    module_name, colon, attr = target.partition(":")
    if not colon or not module_name or not attr:
        hint = did_you_mean(str(name), method_names(), cutoff=0.5)
        raise ValueError(
            f"unknown method {name!r}{hint}; choose one of {method_names()}, or name a method "
            "of your own as 'package.module:factory' (or install it under the entry-point "
            f"group {ENTRY_POINT_GROUP!r})"
        )
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.append(os.getcwd())  # searched last: an installed module of the name wins
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name is None or not module_name.startswith(err.name):
            raise  # the module exists but imports something that does not
        raise ValueError(
            f"method {name!r}: no module {module_name!r} on the Python path or in the current "
            f"folder {os.getcwd()}; fix: run from the folder that holds {module_name}.py, add "
            "its folder to PYTHONPATH, or install its package"
        ) from None
    found: Any = module
    for part in attr.split("."):
        if not hasattr(found, part):
            public = sorted(n for n in vars(module) if not n.startswith("_"))
            raise ValueError(
                f"method {name!r}: module {module_name!r} has no attribute {attr!r}; it "
                f"defines {public}"
            )
        found = getattr(found, part)
    return found


def method_factory(name: str) -> Callable[..., Any]:
    """The factory of a method of one's own: an installed entry point's or a ``module:factory``.

    Raises:
        ValueError: as :func:`_resolve`; the attribute is not callable, or it is a method's
            declaration (``MethodSpec``: built by :func:`build_strategy` as a built-in is).
    """
    factory = _resolve(name)
    if isinstance(factory, MethodSpec) or not callable(factory):
        raise ValueError(
            f"method {name!r}: {_target(name)} is a {type(factory).__name__}, not callable"
        )
    return factory


def make_backbone(preset: RunConfig | Mapping[str, Any]) -> ConvBackbone:
    """The backbone a preset asks for: channels-last (the fast CPU layout; ``channels_last=False``
    in the preset makes it NCHW-contiguous, the same network with another float summation
    order) in the preset's ``precision`` (``"auto"``: bf16 where the device runs it natively)."""
    from ..models.backbone import ConvBackbone  # torch: the CLI parses without it

    config = RunConfig.of(preset)
    return ConvBackbone(
        n_blocks=config.n_blocks,
        width=config.width,
        image_size=config.image_size,
        channels_last=config.channels_last,
        precision=config.precision,
    )


#: Preset settings :func:`build_strategy` reads.
STRATEGY_PRESET_KEYS = (
    "n_blocks",
    "width",
    "image_size",
    "meta_batch",
    "eval_mb_size",
    "device",
    "lr",
    "mem_size",
    "replay_batch",
)


#: The attribute by which a method factory of one's own that takes ``**options`` names the
#: method it passes them on to (``build.passes_options_to = "order"``), so that they are typed
#: and checked as that method's before any data loads.
PASSES_OPTIONS_TO = "passes_options_to"


def method_options(name: str) -> tuple[dict[str, OptionSpec], bool]:
    """The strategy options method ``name`` takes, each with its type and default (read from
    the signature that takes it: :func:`avalanche_sets.methods.options.signature_options`), and
    whether it takes others besides (a factory of one's own with ``**options`` that does not
    say where they go: they are checked when its strategy is built).

    A factory's own named options come first; with ``**options`` and a
    :data:`PASSES_OPTIONS_TO` method, that method's options are added.

    Raises:
        ValueError: as :func:`method_factory`; a :data:`PASSES_OPTIONS_TO` that names no method.
    """
    spec = method_spec(name)
    if spec is not None:
        return _class_options(_strategy_class(spec)), False
    factory = method_factory(name)
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):  # a callable without a signature: its call will tell
        return {}, True
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    skip = {*FACTORY_ARGUMENTS, *positional[:1]}  # the preset, the arguments every factory gets
    options = signature_options(factory, skip=skip)
    if not any(p.kind is p.VAR_KEYWORD for p in params):
        return options, False
    target = getattr(factory, PASSES_OPTIONS_TO, None)
    if target is None:
        return options, True
    if not isinstance(target, str) or target == name or target not in method_names():
        raise ValueError(
            f"method {name!r}: its factory's {PASSES_OPTIONS_TO}={target!r} names no method; fix: "
            f"set it to the method its **options go to, one of {method_names()}"
        )
    base, open_ = method_options(target)
    return {**base, **options}, open_


def _method_what(name: str) -> str:
    spec = method_spec(name)
    if spec is not None:
        return spec.strategy
    return getattr(method_factory(name), "__qualname__", name)


def _option_specs(name: str, keys: Iterable[str]) -> dict[str, OptionSpec]:
    """The options of method ``name`` named ``keys``: an option it does not take is refused,
    with its typed option list and the closest name."""
    options, open_ = method_options(name)
    unknown = sorted(set(keys) - set(options))
    if unknown and not open_:
        raise MethodOptionError(
            f"method {name!r} ({_method_what(name)}) does not accept option(s) {unknown}"
            f"{close_names(unknown, options)}; fix: use its valid options "
            f"{describe_options(options)}"
        )
    return {k: options.get(k, OptionSpec(k)) for k in keys}


def typed_options(name: str, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``overrides`` checked against the types of method ``name``'s options and kept as the
    option keeps them (an int given for a float option is that float, a list for a sequence a
    tuple): the values a run's folder name and identity hold.

    Raises:
        MethodOptionError: an option ``name`` does not take (with its typed option list and the
            closest name), or a value of another type (``use_ot="false"``: a string is no bool).
    """
    specs = _option_specs(name, overrides)
    where = f"method {name!r}: "
    try:
        return {k: specs[k].check(v, where=where) for k, v in overrides.items()}
    except OptionValueError as err:
        raise MethodOptionError(str(err)) from None


def default_options(name: str, preset: RunConfig | Mapping[str, Any]) -> dict[str, Any]:
    """The value of each strategy option a run of method ``name`` with ``preset`` runs with when
    no override names it (:func:`~avalanche_sets.methods.reads.declared_defaults` for a declared
    method). A factory of one's own: its keyword parameters' defaults and, when it hands its
    ``**options`` on to a method (:data:`PASSES_OPTIONS_TO`: unchanged), that method's for the
    options it does not name; nothing for options it takes without saying where they go."""
    spec = method_spec(name)
    if spec is not None:
        return declared_defaults(spec, RunConfig.of(preset))
    factory = method_factory(name)
    try:
        params = [p.name for p in inspect.signature(factory).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]  # fmt: skip
    except (TypeError, ValueError):  # no signature: nothing known
        return {}
    own = signature_options(factory, skip={*FACTORY_ARGUMENTS, *params[:1]})
    target = getattr(factory, PASSES_OPTIONS_TO, None)
    values = default_options(target, preset) if isinstance(target, str) else {}
    values.update(
        {k: o.default for k, o in own.items() if o.default is not inspect.Parameter.empty}
    )
    return values


def normal_options(
    name: str, preset: RunConfig | Mapping[str, Any], overrides: Mapping[str, Any] | None
) -> dict[str, Any]:
    """``overrides`` typed (:func:`typed_options`), less every option whose value is the one a
    run of ``name`` with ``preset`` has anyway (:func:`default_options`): an explicit default is
    no override. The strategy options a run's folder name and identity hold.

    Raises:
        MethodOptionError: as :func:`typed_options`.
    """
    typed = typed_options(name, overrides or {})
    defaults = default_options(name, preset) if typed else {}
    return {k: v for k, v in typed.items() if not (k in defaults and _same(v, defaults[k]))}


def unread_settings(
    name: str,
    preset: RunConfig | Mapping[str, Any],
    overrides: Mapping[str, Any] | None = None,
    *,
    eval_stream: str = "test",
) -> dict[str, str]:
    """The preset settings a run of method ``name`` (with strategy ``overrides``, evaluated on
    ``eval_stream``) does not read, each with the reason (``{"mem_size": "mskm keeps no memory
    of tasks"}``; which ones: :mod:`avalanche_sets.methods.reads`). :func:`check_method`
    refuses those a user set; a run records them (its identity and table row leave them out)."""
    return _unread_of(name, method_spec(name), preset, overrides, eval_stream=eval_stream)


def parse_options(name: str, texts: Mapping[str, str]) -> dict[str, Any]:
    """Command-line text (``--strategy-set KEY=VALUE``) as method ``name``'s typed options:
    ``use_ot=false`` is ``False``, ``lr=1e-3x`` is refused (spellings:
    :mod:`avalanche_sets.methods.options`).

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
    return typed_options(name, values)


def check_method(
    name: str,
    preset: RunConfig | Mapping[str, Any] | str,
    overrides: dict[str, Any] | None = None,
    *,
    given: Iterable[str] = (),
    eval_stream: str = "test",
) -> RunConfig:
    """Check a method name, the preset it is built for and its strategy options; returns the
    run's config (``preset`` itself when it is a :class:`~avalanche_sets.presets.RunConfig`,
    else the dictionary's settings checked once: :meth:`RunConfig.of`).

    :func:`build_strategy` calls it first; call it yourself to fail before loading any data.
    ``given``: the preset settings the user set explicitly (the command line's ``--set``); each
    must be read by this run of ``name`` on ``eval_stream``, or it is refused rather than
    ignored. Strategy options (``overrides``) are always given: an option of an ORDER component
    that the method turns off (``beta`` of ``order-no-ot``) is refused too.

    Raises:
        ValueError: an unknown method (with the closest name), a preset without the settings
            a strategy needs or with a bad one, an override that contradicts the ORDER ablation
            it is applied to
            (``build_strategy("order-no-ot", ..., use_ot=True)``), a setting or option the run
            would not read, or an OT set-up the ``cvxpylayers`` solver cannot build (more than
            100 points per side).
        TypeError: a strategy option the method does not accept (with the closest name) or a
            value of another type than the option's (:func:`typed_options`), or a factory of
            one's own that does not take a factory's arguments.
    """
    if name in _builtin_specs() and name in installed_methods():
        raise ValueError(
            f"an installed package registers a method named {name!r} (entry point "
            f"{installed_methods()[name]!r}), which is a built-in method's name; fix: rename "
            f"that entry point in its package's {ENTRY_POINT_GROUP!r} group"
        )
    spec = method_spec(name)
    config = _method_config(name, preset)
    if spec is None:
        _check_factory(name, method_factory(name))
    overrides = typed_options(name, overrides or {})
    ignored = unread_settings(name, config, overrides, eval_stream=eval_stream)
    unread = {k: why for k, why in ignored.items() if k in set(given)}
    if spec is None:
        _refuse_unread(name, unread)
        return config
    cls = _strategy_class(spec)
    for key, value in overrides.items():
        if key in spec.fixed and _normal(value) != _normal(spec.fixed[key]):
            asked = {**spec.fixed, key: value}
            plain = [
                other.name
                for other in _builtin_specs().values()
                if other.module == spec.module
                and other.strategy == spec.strategy
                and _settings(cls, other.fixed) == _settings(cls, asked)
            ]
            fix = (
                f"use method {plain[0]!r}" if plain else "drop the override or pick another method"
            )
            raise ValueError(
                f"method {name!r} is {_strategy_label(spec)} with {key}={spec.fixed[key]!r}; the "
                f"option {key}={value!r} contradicts it; fix: {fix}"
            )
    settings = {**_settings(cls, spec.fixed), **overrides}
    for switch, options in getattr(cls, "component_options", {}).items():
        if settings.get(switch, True):
            continue
        for key in options:
            if key in overrides:
                unread[key] = f"{name} runs with {switch}=False"
    _refuse_unread(name, unread)
    if settings.get("use_replay", True) and settings.get("use_ot", True):
        if settings.get("ot_solver") == "cvxpylayers":
            from ..functional.ot import CVXPYLAYERS_MAX_ENTRIES  # torch: the CLI parses without it

            g = settings.get("ot_max_points")
            side = int(CVXPYLAYERS_MAX_ENTRIES**0.5)
            if g is None or (isinstance(g, int) and g * g > CVXPYLAYERS_MAX_ENTRIES):
                size = "any number of" if g is None else f"up to {g}x{g}"
                raise ValueError(
                    f"ot_solver='cvxpylayers' with ot_max_points={g!r} would build OT problems "
                    f"of {size} points, above the "
                    f"{CVXPYLAYERS_MAX_ENTRIES} entries cvxpy can canonicalise (memory grows "
                    f"like (n·m)²); fix: pass ot_max_points={side} or less, or "
                    "ot_solver='exact'"
                )
    return config


def _method_config(name: str, preset: RunConfig | Mapping[str, Any] | str) -> RunConfig:
    """The config of a run of ``name``: ``preset`` itself when it is a :class:`RunConfig`, the
    named preset for a name (``"quick"``), else the dictionary's settings checked once (naming
    first those a strategy needs)."""
    if isinstance(preset, Mapping):  # a RunConfig or a name is checked by RunConfig.of alone
        missing = [k for k in STRATEGY_PRESET_KEYS if k not in preset]
        if missing:
            raise ValueError(
                f"the preset lacks setting(s) {missing} that method {name!r} needs; fix: start "
                "from avalanche_sets.presets.resolve_preset(<name>, **overrides)"
            )
    return RunConfig.of(preset)  # refuses what is neither a name, a config nor a mapping


def _refuse_unread(name: str, unread: dict[str, str]) -> None:
    if unread:
        why = "; ".join(f"{key}: {reason}" for key, reason in sorted(unread.items()))
        raise ValueError(
            f"method {name!r} would not read setting(s) {sorted(unread)} ({why}); they would "
            "change the run's folder name and nothing it computes; fix: drop them, or choose "
            "the method (or --eval-stream) that uses them"
        )


#: The arguments :func:`build_strategy` hands a factory of one's own besides the preset.
FACTORY_ARGUMENTS = ("seed", "evaluator", "plugins")


def _check_factory(name: str, factory: Callable) -> None:
    """A factory takes ``(preset, *, seed, evaluator, plugins, **options)``."""
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return  # a callable without a signature (a C function): its call will tell
    kinds = {p.kind for p in params.values()}
    takes_any = inspect.Parameter.VAR_KEYWORD in kinds
    named = {p.name for p in params.values() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    lacks = [a for a in FACTORY_ARGUMENTS if a not in named and not takes_any]
    positional = [
        p for p in params.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    if lacks or not (positional or inspect.Parameter.VAR_POSITIONAL in kinds):
        raise MethodOptionError(
            f"method {name!r}: a method factory is called as factory(preset, *, seed, "
            f"evaluator, plugins, **options), but {factory.__qualname__} "
            f"{f'lacks {lacks}' if lacks else 'takes no preset'}; fix: def "
            f"{factory.__name__}(preset, *, seed, evaluator, plugins, **options)"
        )


def _strategy_label(spec: MethodSpec) -> str:
    """The method a declaration's fixed options modify (``ORDER`` for ORDER's ablations)."""
    return "ORDER" if spec.family == "order" else spec.strategy


def build_strategy(
    name: str,
    preset: RunConfig | Mapping[str, Any] | str,
    *,
    seed: int = 0,
    evaluator=None,
    plugins=None,
    check: bool = True,
    **overrides: Any,
):
    """Build method ``name`` for ``preset``; ``overrides`` go to the strategy constructor.

    ``preset``: the run's :class:`~avalanche_sets.presets.RunConfig`, or a preset's name as
    the command line's ``--preset`` (``build_strategy("order", "quick")``; a dictionary of
    settings is checked once, on arrival). The strategy keeps it as ``strategy.run_config``:
    :func:`~avalanche_sets.training.run_sets` runs it with the preset's torch threads and
    interim test episodes, as the command line does. Without ``evaluator`` the strategy gets
    :func:`~avalanche_sets.training.quiet_evaluator` (Avalanche's default metrics, which
    ``eval`` returns, and no logger). ``plugins`` are added after the method's own plugins, so
    their callbacks run after them in every event. The model is initialised from
    ``torch.manual_seed(seed)``. A strategy whose constructor takes ``seed``, ``mem_size`` or
    ``replay_batch`` receives the seed and the preset's values; a declared method receives
    its tuned options (:func:`tuned_options`) and the options it fixes, which ``overrides``
    override (an override that contradicts a fixed option is refused by :func:`check_method`). ``check=False`` skips :func:`check_method` when the caller has run
    it on these arguments already (a run checks its method once, before loading any data).

    A method of one's own (see the module's docstring) is built by its factory, called as
    ``factory(preset, seed=seed, evaluator=evaluator, plugins=plugins, **overrides)``.

    Raises:
        ValueError, TypeError: as :func:`check_method`; a factory that returns no Avalanche
            strategy, or one without the evaluator or the plugins it was handed.
    """
    config = check_method(name, preset, overrides) if check else _method_config(name, preset)
    overrides = typed_options(name, overrides)  # as the run's identity holds them
    # torch, Avalanche and the strategies load here, when a strategy is built: the command
    # line imports this module to parse its arguments without them
    import torch
    from avalanche.training.templates import BaseTemplate

    from ..models.episodic import PrototypicalModel
    from ..training.template import quiet_evaluator

    evaluator = evaluator if evaluator is not None else quiet_evaluator()
    plugins = list(plugins or [])
    spec = method_spec(name)
    if spec is None:
        torch.manual_seed(seed)
        strategy = method_factory(name)(
            config, seed=seed, evaluator=evaluator, plugins=plugins, **overrides
        )
        if not isinstance(strategy, BaseTemplate) or strategy.evaluator is not evaluator:
            what = (
                f"a {type(strategy).__name__}, not an Avalanche strategy"
                if not isinstance(strategy, BaseTemplate)
                else "a strategy without the evaluator it was handed (its metrics and run "
                "folder logs would be lost)"
            )
            raise MethodOptionError(
                f"method {name!r}: the factory returned {what}; fix: return build_strategy("
                "<method>, preset, seed=seed, evaluator=evaluator, plugins=[*yours, "
                "*plugins], **options) or a strategy built with evaluator=evaluator"
            )
        dropped = [type(p).__name__ for p in plugins if p not in strategy.plugins]
        if dropped:
            raise MethodOptionError(
                f"method {name!r}: the factory dropped the plugin(s) {dropped} it was handed; "
                "fix: pass plugins=[*yours, *plugins] to the strategy it builds"
            )
        strategy.run_config = config
        return strategy
    cls: Callable = _strategy_class(spec)
    accepted = _accepted_options(cls)
    torch.manual_seed(seed)
    backbone = make_backbone(config)
    kwargs: dict[str, Any] = {"evaluator": evaluator, "plugins": plugins or None}
    if spec.family == "order":
        kwargs["model"] = PrototypicalModel(backbone, refine="soft_kmeans")
    elif spec.family == "meta":  # the meta-learners build their own head on the backbone
        if "model" not in overrides:  # a model handed over is used as it is
            kwargs["model_options"] = {"backbone": backbone}
    else:  # every continual baseline is MSKM + a mechanism (paper §5.3)
        kwargs["model"] = PrototypicalModel(backbone, refine="mskm")
    # the batch sizes, the device, the lr, the fixed, memory and tuned options: one home
    kwargs.update(preset_options(spec, cls, config))
    if "seed" in accepted:
        kwargs["seed"] = seed
    model_options = _model_option_names(cls)
    for key, value in overrides.items():  # a meta-learner's model options go to its model
        target = kwargs.setdefault("model_options", {}) if key in model_options else kwargs
        target[key] = value
    strategy = cls(**kwargs)
    if isinstance(strategy.model, PrototypicalModel) and strategy.model.n_way is None:
        strategy.model.n_way = config.n_way  # labels checked on the device, N never read
    strategy.run_config = config
    return strategy
