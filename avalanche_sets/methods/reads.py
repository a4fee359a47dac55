"""What a method's strategy takes and what a run of it reads: the one home of that knowledge.

Two runs that compute the same thing are one run: one folder, one identity, one table row. This
module knows, for a method class (:class:`~avalanche_sets.method.Method`),

* the options its strategy class takes, each with its type and default (:func:`_class_options`),
  and the value each has in a run when no override names it (:func:`declared_defaults`: the
  signature default, then what :func:`preset_options` hands the class — the preset's values,
  its fixed and tuned options), so that an override equal to it is no override
  (:func:`avalanche_sets.methods.normal_options`);
* which preset settings a run of it does **not** read (:func:`_unread_of`): a memory size for a
  method that keeps no memory, the preset's ``lr`` for a method that trains with a rate of its
  own, the size of the evaluation stream the run does not draw.
  :func:`avalanche_sets.methods.check_method` refuses such a setting when the user set it, and a
  run records them so that its identity and its table row leave them out.

The registry (:mod:`avalanche_sets.methods`) resolves a method's name to its class and calls
these (the class imported: torch loads): a run calls these once, before any data loads, and
writes what they found into its record, so the ``table`` command reads records alone.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..method import Method, _settings
from ..presets import RunConfig
from .options import OptionSpec, signature_options

__all__ = ["PRESET_OPTIONS", "STREAM_SETTINGS", "declared_defaults", "preset_options"]

#: Preset settings a strategy receives when its constructor takes them (read from its signature,
#: as ``seed``): the memory size and the replayed tasks per step.
PRESET_OPTIONS = ("mem_size", "replay_batch")

#: Preset settings only one evaluation stream reads: the size of the other stream.
STREAM_SETTINGS = {"n_val_episodes": "valid", "n_test_episodes": "test"}

# what a preset option that a class does not take means for the method
_WHY_NOT = {
    "mem_size": "keeps no memory of tasks",
    "replay_batch": "replays no batch of remembered tasks",
}

# options whose values are objects built per run (or the run's seed): no default to compare
_NOT_COMPARED = ("seed", "model", "optimizer", "criterion", "evaluator", "plugins", "cl_plugin")


def _model_option_names(cls: type) -> tuple[str, ...]:
    """The options a baseline hands its model (its ``model_options``); none for ORDER."""
    names = getattr(cls, "model_option_names", None)
    return names() if names is not None else ()


def _class_options(cls: type) -> dict[str, OptionSpec]:
    """The keyword arguments ``cls`` or any class it inherits from accepts (as Avalanche
    checks; the nearest class's declaration wins: a continual baseline's names its plugin's
    options) and the options it hands its model (typed by the model class's signature), each
    with its type and default (its tuned value where it has one: :attr:`Method.tuned`)."""
    options: dict[str, OptionSpec] = {}
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None or klass is object:
            continue
        for key, spec in signature_options(init).items():
            options.setdefault(key, spec)
    options.pop("model_options", None)  # its entries are options of their own
    model_names = _model_option_names(cls)
    if model_names:
        of_model = signature_options(cls.model_class.__init__)
        for key in model_names:
            options.setdefault(key, of_model.get(key, OptionSpec(key)))
    if getattr(cls, "plugin_class", None) is not None:
        options.pop("cl_plugin", None)  # the method builds it from its plugin's options
    for key, value in getattr(cls, "tuned", {}).items():
        options[key] = replace(options.get(key, OptionSpec(key)), default=value)
    return options


def _accepted_options(cls: type) -> set[str]:
    """The names of :func:`_class_options`."""
    return set(_class_options(cls))


def preset_options(cls: type[Method], config: RunConfig) -> dict[str, Any]:
    """The strategy options method class ``cls`` takes from the preset, as
    :func:`~avalanche_sets.methods.build_strategy` hands them to it (before the run's seed and
    options; the class adds its fixed and tuned options itself: :meth:`Method.own_arguments`):
    the batch sizes and the device, the preset's ``lr`` (not for a method with a rate of its
    own: :attr:`Method.own_lr`), and the preset's ``mem_size`` and ``replay_batch`` where
    ``cls`` takes them; none that the class tunes or fixes (its own value wins, as
    :func:`declared_defaults` says)."""
    accepted = _accepted_options(cls)
    out: dict[str, Any] = {
        "train_mb_size": config.meta_batch,
        "eval_mb_size": config.eval_mb_size,
        "device": config.device,
    }
    if cls.own_lr is None:
        out["lr"] = config.lr
    out.update({k: getattr(config, k) for k in PRESET_OPTIONS if k in accepted})
    return {k: v for k, v in out.items() if k not in cls.tuned and k not in cls.fixed}


def declared_defaults(cls: type[Method], config: RunConfig) -> dict[str, Any]:
    """The value of each strategy option a run of method class ``cls`` with ``config`` runs
    with when no override names it: its signature default (its tuned value), then what
    :func:`preset_options` hands it, then its fixed and tuned options. Options whose values
    are objects or the seed are left out."""
    values = {k: o.default for k, o in _class_options(cls).items()}
    values.update(preset_options(cls, config))
    values.update({**cls.fixed, **cls.tuned})
    return {
        k: v
        for k, v in values.items()
        if k not in _NOT_COMPARED and v is not inspect.Parameter.empty
    }


def _unread_of(
    name: str,
    cls: type[Method],
    config: RunConfig,
    overrides: Mapping[str, Any] | None = None,
    *,
    eval_stream: str = "test",
) -> dict[str, str]:
    """The preset settings a run of method ``name`` (class ``cls``) does not read, each with
    the reason, sorted by name:

    * the size of the stream the run does not evaluate on (``n_val_episodes`` of a run on the
      test stream): the run never draws that stream;
    * ``mem_size`` and ``replay_batch`` where its class does not take them, those of an ORDER
      component the method (or an override) turns off (``use_replay=False``), and ``lr`` when
      it trains with a rate of its own (:attr:`Method.own_lr`).
    """
    settings = config.as_dict()
    unread = {
        key: f"a run evaluated on the {eval_stream} stream never draws the {stream} stream"
        for key, stream in STREAM_SETTINGS.items()
        if key in settings and stream != eval_stream
    }
    accepted = _accepted_options(cls)
    for key in PRESET_OPTIONS:
        if key not in accepted:
            unread[key] = f"{name} {_WHY_NOT[key]}"
    if cls.own_lr is not None:
        unread["lr"] = f"{name}: {cls.own_lr}"
    options = {**_settings(cls, cls.fixed), **(overrides or {})}
    for switch, keys in getattr(cls, "component_options", {}).items():
        if not options.get(switch, True):
            for key in keys:
                if key in settings:
                    unread.setdefault(key, f"{name} runs with {switch}=False")
    return dict(sorted(unread.items()))
