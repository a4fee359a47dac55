"""A method built for a run: its strategy on the preset's backbone, and what it trains on.

``build_strategy(name, preset, seed=..., evaluator=...)`` checks the method and its options
(:func:`~avalanche_sets.methods.check_method`) and builds its class on the preset's backbone
through the class's hooks (:func:`_build`); the command line, the examples and the benchmark
scripts all go through it, so a method means the same thing everywhere. A run, which checked
its method and typed its options once when it was handed over, builds its strategy from them
with :func:`build_checked_strategy`, the same construction without the checks.
:func:`training_config` and :func:`training_benchmark` say what a run of the method trains on
(its class's hooks).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..method import Method
from ..presets import RunConfig, require_config
from .check import checked_method, run_config, typed_options
from .reads import _accepted_options, _model_option_names, preset_options
from .resolve import method_class
from .typed import MethodOptions

if TYPE_CHECKING:  # torch loads only when a strategy is built (the CLI parses without it)
    from ..data.benchmark import SETSBenchmark
    from ..models.backbone import ConvBackbone

__all__ = [
    "building_error",
    "building_method",
    "build_checked_strategy",
    "build_strategy",
    "make_backbone",
    "training_benchmark",
    "training_config",
]


#: The attribute :func:`build_checked_strategy` sets on an exception that building a method
#: raised (its constructor, ``model_arguments``/``make_model``, the plugins it builds): the
#: method's name, so the command line reports it in one line (:func:`building_method`).
_BUILDING = "avalanche_sets_building_method"


def building_method(err: BaseException) -> str | None:
    """The method whose construction raised ``err`` (the exception itself, unchanged, marked
    by :func:`build_checked_strategy`), or ``None`` for an exception raised elsewhere."""
    return getattr(err, _BUILDING, None)


def building_error(err: BaseException, *, verbose: bool = False) -> str | None:
    """What the command line prints for an exception that building a method raised
    (:func:`building_method`), whatever its type: one line naming the method and the
    exception's type, after its traceback when ``verbose``; ``None`` for any other exception."""
    method = building_method(err)
    if method is None:
        return None
    line = f"error: building method {method!r} raised {type(err).__name__}: "
    line += " ".join(str(err).split())  # one line
    if not verbose:
        return line + " (-v prints the traceback)"
    import traceback

    return "".join(traceback.format_exception(err)) + line


def make_backbone(config: RunConfig | str) -> ConvBackbone:
    """The backbone a preset asks for: channels-last (the fast CPU layout; ``channels_last=False``
    in the preset makes it NCHW-contiguous, the same network with another float summation
    order) in the preset's ``precision`` (``"auto"``: bf16 where the device runs it natively)."""
    from ..models.backbone import ConvBackbone  # torch: the CLI parses without it

    config = run_config(config)  # a dictionary refused with the fix
    return ConvBackbone(
        n_blocks=config.n_blocks,
        width=config.width,
        image_size=config.image_size,
        channels_last=config.channels_last,
        precision=config.precision,
    )


def training_config(name: str, config: RunConfig) -> RunConfig:
    """The config method ``name``'s benchmark is built from: ``config`` itself, except for a
    method that needs more training tasks (the compute-matched joint run:
    :meth:`~avalanche_sets.baselines.ComputeMatchedJoint.training_config`). The run folder and
    its identity keep ``config``: the method's name says the rest.

    Raises:
        ValueError: a config the method cannot scale.
    """
    return method_class(name).training_config(config)


def training_benchmark(name: str, benchmark: SETSBenchmark, *, seed: int) -> SETSBenchmark:
    """What method ``name`` trains on, from the benchmark of :func:`training_config`: the
    stationary mixture of its domains for the joint methods (shuffled by ``seed``), the
    benchmark itself for every other method."""
    return method_class(name).training_benchmark(benchmark, seed=seed)


def build_strategy(
    name: str,
    preset: RunConfig | str,
    *,
    seed: int = 0,
    evaluator=None,
    plugins=None,
    check: bool = True,
    **overrides: Any,
):
    """Build method ``name`` for ``preset``; ``overrides`` go to the strategy constructor.

    ``preset``: the run's :class:`~avalanche_sets.presets.RunConfig`, or a preset's name as
    the command line's ``--preset`` (``build_strategy("order", "quick")``). The strategy keeps
    it as ``strategy.run_config``: :func:`~avalanche_sets.training.run_sets` runs it with the
    preset's torch threads and interim test episodes, as the command line does. Without
    ``evaluator`` the strategy gets :func:`~avalanche_sets.training.quiet_evaluator`
    (Avalanche's default metrics, which ``eval`` returns, and no logger). ``plugins`` are added
    after the method's own plugins, so their callbacks run after them in every event. The
    model is initialised from ``torch.manual_seed(seed)``; the rest is the class's
    :func:`_build` (its tuned and fixed options, which
    ``overrides`` override: an override that contradicts a fixed option is refused by
    :func:`check_method`). ``overrides`` are typed once (:func:`typed_options`), as the run's
    identity holds them. ``check=False`` skips :func:`check_method` when the caller has run it
    on these arguments already (a run checks its method once, before loading any data, and
    builds with :func:`build_checked_strategy`).

    Raises:
        ValueError, TypeError: as :func:`check_method`.
    """
    if check:
        config, options = checked_method(name, preset, overrides)
    else:
        config, options = run_config(preset), typed_options(name, overrides)
    return build_checked_strategy(
        name, config, options, seed=seed, evaluator=evaluator, plugins=plugins
    )


def build_checked_strategy(
    name: str,
    config: RunConfig,
    options: MethodOptions,
    *,
    seed: int = 0,
    evaluator=None,
    plugins=None,
):
    """:func:`build_strategy` of a config and options that were checked already
    (:func:`~avalanche_sets.methods.checked_method`, or typed by
    :func:`~avalanche_sets.methods.normal_options`): what a run builds its strategy with, its
    options typed once, where the run was handed over, and not again here.

    Raises:
        TypeError: ``config`` is no :class:`~avalanche_sets.presets.RunConfig`, or ``options``
            are not typed (a plain dictionary: :func:`build_strategy` types it).
        MethodOptionError: ``options`` typed for another method.
        Exception: whatever building the method raises, as it is, marked with the method's
            name (:func:`building_method`).
    """
    config = require_config(config, "build_checked_strategy")
    if not isinstance(options, MethodOptions):
        raise TypeError(
            f"build_checked_strategy takes typed options, got a {type(options).__name__}; "
            f"fix: build_strategy({name!r}, config, **options), which types and checks them"
        )
    options = typed_options(name, options)  # refuses options typed for another method
    # torch, Avalanche and the strategies load here, when a strategy is built: the command
    # line imports this module to parse its arguments without them
    from ..models.episodic import PrototypicalModel
    from ..training.template import quiet_evaluator

    evaluator = evaluator if evaluator is not None else quiet_evaluator()
    cls = method_class(name)
    try:
        strategy = _build(
            cls, config, seed=seed, evaluator=evaluator, plugins=list(plugins or []),
            options=options,
        )  # fmt: skip
    except Exception as err:  # raised as it is, marked with the method (building_method)
        if building_method(err) is None:
            setattr(err, _BUILDING, name)
        raise
    if isinstance(strategy.model, PrototypicalModel) and strategy.model.n_way is None:
        strategy.model.n_way = config.n_way  # labels checked on the device, N never read
    strategy.run_config = config
    return strategy


def _build(
    cls: type[Method],
    config: RunConfig,
    *,
    seed: int,
    evaluator: Any,
    plugins: list,
    options: Mapping[str, Any],
) -> Method:
    """The strategy a run of method class ``cls`` trains: the preset's backbone from
    ``torch.manual_seed(seed)``, its learner on it (:meth:`Method.model_arguments`), the preset's
    batch sizes, device and ``lr`` (not with :attr:`Method.own_lr`), its fixed options, the
    preset's ``mem_size`` and ``replay_batch`` where the constructor takes them, its tuned
    options, the seed, then ``options`` (typed and checked already: :func:`check_method`);
    ``plugins`` after its own."""
    import torch  # the command line checks methods without torch

    accepted = _accepted_options(cls)
    torch.manual_seed(seed)
    backbone = make_backbone(config)
    kwargs: dict[str, Any] = {"evaluator": evaluator, "plugins": plugins or None}
    kwargs.update(cls.model_arguments(config, backbone, options))
    kwargs.update(preset_options(cls, config))
    if "seed" in accepted:
        kwargs["seed"] = seed
    model_options = _model_option_names(cls)
    for key, value in options.items():  # a meta-learner's model options go to its model
        target = kwargs.setdefault("model_options", {}) if key in model_options else kwargs
        target[key] = value
    return cls(**kwargs)
