"""What a run of a method reads: the preset settings it ignores and the options it runs with.

Two runs that compute the same thing are one run: one folder, one identity, one table row. This
module is the one place that knows

* which preset settings a run of a method does **not** read (:func:`unread_settings`): a
  memory size for a method that keeps no memory, the preset's ``lr`` for a method that trains
  with a rate of its own, the size of the evaluation stream the run does not draw. The method's
  check refuses such a setting when the user set it
  (:func:`~avalanche_sets.methods.check_method`), and a run records them so that its identity
  and its table row leave them out;
* which value each strategy option has when no override names it (:func:`default_options`:
  the signature default, the declaration's fixed and tuned options, the values taken from the
  preset), so that an override equal to it is no override (:func:`normal_options`).

Strategy classes are imported here (torch loads): a run calls these once, before any data
loads, and writes what they found into its record; the ``table`` command then reads records
alone.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..presets import RunConfig, preset_settings

if TYPE_CHECKING:
    from ..method_spec import MethodSpec

__all__ = ["default_options", "normal_options", "preset_options", "unread_settings"]

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


def preset_options(spec: MethodSpec, cls: type, config: RunConfig) -> dict[str, Any]:
    """The strategy options a declared method takes from the preset and its declaration, as
    :func:`~avalanche_sets.methods.build_strategy` hands them to ``cls`` (before the run's
    seed and overrides): the batch sizes and the device, the preset's ``lr`` (not for a method
    with a rate of its own), the declaration's fixed options, the preset's ``mem_size`` and
    ``replay_batch`` where ``cls`` takes them, then the declaration's tuned options."""
    from . import _accepted_options

    accepted = _accepted_options(cls)
    out: dict[str, Any] = {
        "train_mb_size": config.meta_batch,
        "eval_mb_size": config.eval_mb_size,
        "device": config.device,
    }
    if spec.family in ("order", "meta") or spec.own_lr is None:
        out["lr"] = config.lr
    out.update(spec.fixed)
    out.update({k: getattr(config, k) for k in PRESET_OPTIONS if k in accepted})
    out.update(spec.tuned_options)
    return out


def default_options(name: str, preset: RunConfig | Mapping[str, Any]) -> dict[str, Any]:
    """The value of each strategy option a run of method ``name`` with ``preset`` runs with when
    no override names it: its signature default (a class's tuned default), then what
    :func:`preset_options` hands it. Options whose values are objects or the seed are left out.

    A factory of one's own: its own keyword parameters' defaults and, when it passes its
    ``**options`` on to a method (:data:`~avalanche_sets.methods.PASSES_OPTIONS_TO`, which
    hands them on unchanged), that method's (for the options the factory does not name).
    """
    from . import (
        FACTORY_ARGUMENTS,
        PASSES_OPTIONS_TO,
        _class_options,
        _strategy_class,
        method_factory,
        method_spec,
    )
    from .options import signature_options

    config = RunConfig.of(preset)
    spec = method_spec(name)
    if spec is None:
        factory = method_factory(name)
        try:
            params = list(inspect.signature(factory).parameters.values())
        except (TypeError, ValueError):  # no signature: nothing known
            return {}
        first = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        own = signature_options(factory, skip={*FACTORY_ARGUMENTS, *first[:1]})
        target = getattr(factory, PASSES_OPTIONS_TO, None)
        passed = default_options(target, config) if isinstance(target, str) else {}
        values = {**passed, **{k: o.default for k, o in own.items()}}
        return {k: v for k, v in values.items() if v is not inspect.Parameter.empty}
    cls = _strategy_class(spec)
    values = {k: o.default for k, o in _class_options(cls).items()}
    values.update(preset_options(spec, cls, config))
    return {
        k: v
        for k, v in values.items()
        if k not in _NOT_COMPARED and v is not inspect.Parameter.empty
    }


def _same(a: Any, b: Any) -> bool:
    """Whether two option values are one value (a list and a tuple of equal items are; a bool is
    no number: ``True`` is not ``1``)."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    try:
        return bool(a == b)
    except Exception:  # an object whose == raises or is no truth value: not comparable
        return False


def normal_options(
    name: str, preset: RunConfig | Mapping[str, Any], overrides: Mapping[str, Any] | None
) -> dict[str, Any]:
    """``overrides`` typed as method ``name``'s options
    (:func:`~avalanche_sets.methods.typed_options`), less every option whose value is the one
    the run has anyway (:func:`default_options`): ``policy="hardest"`` where ``"hardest"`` is
    the default is no override. The strategy options a run's folder name and identity hold.

    Raises:
        MethodOptionError: as :func:`~avalanche_sets.methods.typed_options`.
    """
    from . import typed_options

    typed = typed_options(name, overrides or {})
    if not typed:
        return typed
    defaults = default_options(name, preset)
    return {k: v for k, v in typed.items() if not (k in defaults and _same(v, defaults[k]))}


def unread_settings(
    name: str,
    preset: RunConfig | Mapping[str, Any],
    overrides: Mapping[str, Any] | None = None,
    *,
    eval_stream: str = "test",
) -> dict[str, str]:
    """The preset settings a run of method ``name`` (with strategy ``overrides``, evaluated on
    ``eval_stream``) does not read, each with the reason: ``{"mem_size": "mskm keeps no memory
    of tasks"}``.

    * the size of the stream the run does not evaluate on (``n_val_episodes`` of a run on the
      test stream): for every method, the run never draws that stream;
    * for a declared method: ``mem_size`` and ``replay_batch`` where its strategy class does
      not take them, those of an ORDER component the method (or an override) turns off
      (``use_replay=False``), and ``lr`` when it trains with a rate of its own
      (``MethodSpec.own_lr``).

    A factory of one's own may read any other setting from the preset it is handed: only the
    stream's are known unread.
    """
    from . import _accepted_options, _settings, _strategy_class, method_spec

    settings = preset_settings(preset)
    unread = {
        key: f"a run evaluated on the {eval_stream} stream never draws the {stream} stream"
        for key, stream in STREAM_SETTINGS.items()
        if key in settings and stream != eval_stream
    }
    spec = method_spec(name)
    if spec is None:
        return unread
    cls = _strategy_class(spec)
    accepted = _accepted_options(cls)
    for key in PRESET_OPTIONS:
        if key not in accepted:
            unread[key] = f"{name} {_WHY_NOT[key]}"
    if spec.own_lr is not None:
        unread["lr"] = f"{name}: {spec.own_lr}"
    options = {**_settings(cls, spec.fixed), **(overrides or {})}
    for switch, keys in getattr(cls, "component_options", {}).items():
        if not options.get(switch, True):
            for key in keys:
                if key in settings:
                    unread.setdefault(key, f"{name} runs with {switch}=False")
    return dict(sorted(unread.items()))
