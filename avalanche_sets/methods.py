"""Registry of runnable methods: ORDER, its ablations and the baselines, by name.

``build_strategy(name, preset, seed=..., evaluator=...)`` builds the backbone the preset asks
for and the strategy; the command line, the examples and the benchmark scripts all go through
it, so a method means the same thing everywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .models.backbone import ConvBackbone

__all__ = ["METHODS", "ORDER_VARIANTS", "build_strategy", "method_names", "make_backbone"]

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
}

MEMORY_BASELINES = ("semi-er", "semi-agem", "semi-gem", "semi-mer", "semi-der")

METHODS: tuple[str, ...] = (*ORDER_VARIANTS, *BASELINES)


def method_names() -> list[str]:
    return list(METHODS)


def make_backbone(preset: dict) -> ConvBackbone:
    """The backbone a preset asks for (channels-last: the fast CPU layout)."""
    return ConvBackbone(
        n_blocks=preset["n_blocks"],
        width=preset["width"],
        image_size=preset["image_size"],
        channels_last=True,
    )


def _common(preset: dict, evaluator, plugins) -> dict[str, Any]:
    return dict(
        train_mb_size=preset["meta_batch"],
        eval_mb_size=preset["eval_mb_size"],
        device=preset["device"],
        evaluator=evaluator,
        plugins=plugins,
    )


def build_strategy(
    name: str,
    preset: dict,
    *,
    seed: int = 0,
    evaluator=None,
    plugins=None,
    **overrides: Any,
):
    """Build method ``name`` for ``preset``; ``overrides`` go to the strategy constructor.

    The model is initialised from ``torch.manual_seed(seed)``.
    """
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; choose one of {list(METHODS)}")
    from avalanche.training.plugins import EvaluationPlugin

    evaluator = evaluator if evaluator is not None else EvaluationPlugin()
    torch.manual_seed(seed)
    backbone = make_backbone(preset)
    if name in ORDER_VARIANTS:
        from .models.episodic import PrototypicalModel
        from .order import OrderStrategy

        model = PrototypicalModel(backbone, refine="soft_kmeans")
        kwargs = dict(
            model=model,
            lr=preset["lr"],
            mem_size=preset["mem_size"],
            replay_batch=preset["replay_batch"],
            seed=seed,
            **ORDER_VARIANTS[name],
            **_common(preset, evaluator, plugins),
        )
        for key in ("lam", "beta", "ot_solver", "ot_max_points"):
            if key in preset:
                kwargs[key] = preset[key]
        kwargs.update(overrides)
        return OrderStrategy(**kwargs)
    import importlib

    from .models.episodic import PrototypicalModel

    module, cls_name = BASELINES[name]
    cls: Callable = getattr(importlib.import_module(f".baselines.{module}", __package__), cls_name)
    kwargs: dict[str, Any] = _common(preset, evaluator, plugins)
    if module in ("meta", "tpn", "lst"):
        kwargs.update(backbone=backbone, lr=preset["lr"])
    else:  # every continual baseline is MSKM + a mechanism (paper §5.3)
        kwargs["model"] = PrototypicalModel(backbone, refine="mskm")
        if name != "semi-gpm":  # GPM's update is orthogonal only with its own SGD default
            kwargs["lr"] = preset["lr"]
        if name not in ("semi-seq", "joint"):
            kwargs["seed"] = seed
        if name in MEMORY_BASELINES:
            kwargs["mem_size"] = preset["mem_size"]
        if name in ("semi-er", "semi-mer", "semi-der"):
            kwargs["replay_batch"] = preset["replay_batch"]
    kwargs.update(overrides)
    return cls(**kwargs)
