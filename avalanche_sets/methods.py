"""Registry of runnable methods: ORDER, its ablations and the baselines, by name.

``build_strategy(name, preset, seed=..., evaluator=...)`` builds the backbone the preset asks
for and the strategy; the command line, the examples and the benchmark scripts all go through
it, so a method means the same thing everywhere.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch loads only when a strategy is built (the CLI parses without it)
    from .models.backbone import ConvBackbone

__all__ = [
    "METHODS",
    "ORDER_VARIANTS",
    "JOINT_METHODS",
    "build_strategy",
    "check_method",
    "method_names",
    "make_backbone",
]

# ORDER and its ablations (paper Tables 2-3 and the appendix ablation tables).
ORDER_VARIANTS: dict[str, dict[str, Any]] = {
    "order": {},
    "order-mi-only": {"use_replay": False, "use_ot": False},
    "order-ot-only": {"use_mi": False},
    "order-ot-support-only": {"use_mi": False, "ot_unlabeled": False},
    "order-no-ot": {"use_ot": False},
    "order-mi-id-only": {"mi_terms": ("id",)},
    "order-mi-ood-only": {"mi_terms": ("ood",)},
    "order-ood-filter-only": {"use_mi": False, "use_replay": False, "use_ot": False},
}

# Baselines: name -> (module, class) in avalanche_sets.baselines.
BASELINES: dict[str, tuple[str, str]] = {
    "protonet": ("meta", "ProtoNet"),
    "anil": ("meta", "ANIL"),
    "mskm": ("meta", "MSKM"),
    "tpn": ("tpn", "TPN"),
    "lst": ("lst", "LST"),
    "semi-seq": ("continual", "SemiSeq"),
    "semi-er": ("continual", "SemiER"),
    "semi-agem": ("continual", "SemiAGEM"),
    "semi-gem": ("continual", "SemiGEM"),
    "semi-mer": ("continual", "SemiMER"),
    "semi-gpm": ("continual", "SemiGPM"),
    "semi-der": ("continual", "SemiDER"),
    "joint": ("continual", "JointTraining"),  # trained on joint_benchmark(bench)
    # Joint with ORDER's B + R tasks per iteration, on (B + R) / B times the training tasks
    "joint-matched": ("continual", "ComputeMatchedJoint"),
}

#: Methods trained on the stationary mixture of the domains (``joint_benchmark``).
JOINT_METHODS: tuple[str, ...] = ("joint", "joint-matched")

METHODS: tuple[str, ...] = (*ORDER_VARIANTS, *BASELINES)


def method_names() -> list[str]:
    return list(METHODS)


def make_backbone(preset: dict) -> ConvBackbone:
    """The backbone a preset asks for: channels-last (the fast CPU layout; ``channels_last=False``
    in the preset makes it NCHW-contiguous, the same network with another float summation
    order) in the preset's ``precision`` (``"auto"``: bf16 where the device runs it natively; a
    preset without the setting, as those of runs recorded before it existed, means ``"fp32"``)."""
    from .models.backbone import ConvBackbone

    return ConvBackbone(
        n_blocks=preset["n_blocks"],
        width=preset["width"],
        image_size=preset["image_size"],
        channels_last=preset.get("channels_last", True),
        precision=preset.get("precision", "fp32"),
    )


def _common(preset: dict, evaluator, plugins) -> dict[str, Any]:
    return dict(
        train_mb_size=preset["meta_batch"],
        eval_mb_size=preset["eval_mb_size"],
        device=preset["device"],
        evaluator=evaluator,
        plugins=plugins,
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


def _strategy_class(name: str) -> type:
    if name in ORDER_VARIANTS:
        from .order import OrderStrategy

        return OrderStrategy
    module, cls_name = BASELINES[name]
    return getattr(importlib.import_module(f".baselines.{module}", __package__), cls_name)


def _accepted_options(cls: type) -> set[str]:
    """Keyword arguments ``cls`` or any class it inherits from accepts (as Avalanche checks)."""
    names: set[str] = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None or klass is object:
            continue
        for p in inspect.signature(init).parameters.values():
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self":
                names.add(p.name)
    return names


def check_method(name: str, preset: dict, overrides: dict[str, Any] | None = None) -> None:
    """Check a method name, the preset it is built for and its strategy options.

    :func:`build_strategy` calls it first; call it yourself to fail before loading any data.

    Raises:
        ValueError: an unknown method (with the closest name), a preset without the settings
            a strategy needs, an override that contradicts the ORDER ablation it is applied to
            (``build_strategy("order-no-ot", ..., use_ot=True)``), or an OT set-up the
            ``cvxpylayers`` solver cannot build (more than 100 points per side).
        TypeError: a strategy option the method does not accept (with the closest name).
    """
    if name not in METHODS:
        close = difflib.get_close_matches(str(name), METHODS, n=1, cutoff=0.5)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"unknown method {name!r}{hint}; choose one of {list(METHODS)}")
    if not isinstance(preset, dict):
        raise TypeError(
            f"preset must be a dict of settings, got {type(preset).__name__}; fix: "
            "preset = avalanche_sets.presets.resolve_preset('quick')"
        )
    missing = [k for k in STRATEGY_PRESET_KEYS if k not in preset]
    if missing:
        raise ValueError(
            f"the preset lacks setting(s) {missing} that method {name!r} needs; fix: start from "
            "avalanche_sets.presets.resolve_preset(<name>, **overrides)"
        )
    overrides = dict(overrides or {})
    cls = _strategy_class(name)
    accepted = _accepted_options(cls)
    unknown = sorted(set(overrides) - accepted)
    if unknown:
        hints = "".join(
            f" (did you mean {c[0]!r}?)"
            for c in (difflib.get_close_matches(k, sorted(accepted), n=1) for k in unknown[:3])
            if c
        )
        raise TypeError(
            f"method {name!r} ({cls.__name__}) does not accept option(s) {unknown}{hints}; "
            f"valid options: {sorted(accepted)}"
        )
    if name not in ORDER_VARIANTS:
        return
    variant = ORDER_VARIANTS[name]
    for key, value in overrides.items():
        if key in variant and _normal(value) != _normal(variant[key]):
            plain = [m for m, v in ORDER_VARIANTS.items() if _same(v, {**variant, key: value})]
            fix = (
                f"use method {plain[0]!r}" if plain else "drop the override or pick another method"
            )
            raise ValueError(
                f"method {name!r} is ORDER with {key}={variant[key]!r}; the option "
                f"{key}={value!r} contradicts it; fix: {fix}"
            )
    defaults = inspect.signature(cls.__init__).parameters
    settings = {k: p.default for k, p in defaults.items() if p.default is not p.empty}
    settings.update({k: preset[k] for k in ("ot_solver", "ot_max_points") if k in preset})
    settings.update(variant)
    settings.update(overrides)
    if settings.get("use_replay", True) and settings.get("use_ot", True):
        if settings.get("ot_solver") == "cvxpylayers":
            from .functional.ot import CVXPYLAYERS_MAX_ENTRIES

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


def _normal(value: Any) -> Any:
    return tuple(value) if isinstance(value, (list, tuple)) else value


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    defaults = {"use_mi": True, "use_replay": True, "use_ot": True, "ot_unlabeled": True}
    defaults["mi_terms"] = ("id", "ood")
    full_a = {**defaults, **{k: _normal(v) for k, v in a.items()}}
    full_b = {**defaults, **{k: _normal(v) for k, v in b.items()}}
    return full_a == full_b


#: Preset settings a strategy receives when its constructor takes them (read from its signature
#: by :func:`_accepted_options`, as ``seed``): the memory size and the replayed tasks per step.
_PRESET_OPTIONS = ("mem_size", "replay_batch")
#: ORDER's weights and OT set-up, taken from the preset when it sets them.
_ORDER_PRESET_OPTIONS = ("lam", "beta", "ot_solver", "ot_max_points")


def build_strategy(
    name: str,
    preset: dict,
    *,
    seed: int = 0,
    evaluator=None,
    plugins=None,
    check: bool = True,
    **overrides: Any,
):
    """Build method ``name`` for ``preset``; ``overrides`` go to the strategy constructor.

    The model is initialised from ``torch.manual_seed(seed)``. A strategy whose constructor
    takes ``seed``, ``mem_size`` or ``replay_batch`` receives the seed and the preset's values.
    ``check=False`` skips :func:`check_method` when the caller has run it on these arguments
    already (a run checks its method once, before loading any data).
    """
    if check:
        check_method(name, preset, overrides)
    import torch

    from .models.episodic import PrototypicalModel
    from .training.template import silent_evaluator

    evaluator = evaluator if evaluator is not None else silent_evaluator()
    cls: Callable = _strategy_class(name)
    accepted = _accepted_options(cls)
    torch.manual_seed(seed)
    backbone = make_backbone(preset)
    kwargs: dict[str, Any] = _common(preset, evaluator, plugins)
    if name in ORDER_VARIANTS:
        kwargs.update(model=PrototypicalModel(backbone, refine="soft_kmeans"), lr=preset["lr"])
        kwargs.update(ORDER_VARIANTS[name])
        kwargs.update({k: preset[k] for k in _ORDER_PRESET_OPTIONS if k in preset})
    elif "backbone" in accepted:  # the meta-learners build their own head on the backbone
        kwargs.update(backbone=backbone, lr=preset["lr"])
    else:  # every continual baseline is MSKM + a mechanism (paper §5.3)
        kwargs["model"] = PrototypicalModel(backbone, refine="mskm")
        if name != "semi-gpm":  # GPM's update is orthogonal only with its own SGD default
            kwargs["lr"] = preset["lr"]
    if "seed" in accepted:
        kwargs["seed"] = seed
    kwargs.update({k: preset[k] for k in _PRESET_OPTIONS if k in accepted})
    kwargs.update(overrides)
    return cls(**kwargs)
