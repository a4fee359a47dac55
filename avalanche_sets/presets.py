"""Experiment presets: plain dictionaries a user can copy, print and edit.

* ``quick`` — the demo: ORDER on the synthetic benchmark in under 5 minutes on a 2-core CPU.
* ``cpu`` — the preset of our committed tables: 32 px, a narrow 4-block backbone (32 filters),
  the paper's episode (5-way, Z = 10, R = 50) with Q = 5, 40 iterations of meta-batch 2 per
  domain, 100 test episodes per domain (20 for the intermediate rows of the accuracy matrix):
  about 4 minutes per ORDER run on one core and 2–3 for the baselines
  (measured; docs/guide/cli.md gives the costs).
* ``converged`` — ``cpu`` trained until each domain's validation accuracy plateaus: 700
  iterations per domain instead of 40 (the largest plateau point of the learning curves), the
  regime in which forgetting is real.
* ``paper`` — the paper's protocol for a GPU: 84 px, 5 blocks of 64 filters, 6,000 iterations of
  meta-batch 2 per domain (12K tasks), 600 test episodes, 5 seeds.

Every preset sets ``precision="auto"``: the backbone runs in bfloat16 where the device does so
natively (oneDNN AVX-512 BF16/AMX on CPU), in fp32 elsewhere; ``precision="fp32"`` gives the
exact fp32 numbers (see :func:`avalanche_sets.models.backbone.resolve_precision`). Every run
names its precision: a dictionary of settings without it is refused.
The backbone is channels-last; ``channels_last=False`` (an extra setting, in no preset) keeps
it NCHW-contiguous: the same network, its convolutions summing in another order — the
float-order noise control of the precision comparison (docs/results/speed.md).

``resolve_preset(name, **overrides)`` returns the run's :class:`RunConfig`: the preset with the
overrides applied, every setting checked once, here, where the user hands it over: unknown names
(with the closest valid one), values of the wrong type or range and contradicting settings raise
:class:`ValueError` before anything is loaded or trained. The config is frozen and typed
(``config.n_shot``): its attributes are how code reads a setting. ``config.as_dict()`` is the
dictionary of the settings it was given, as a ``result.json`` records them, and
``config.replace(n_shot=5)`` a checked copy with changes. The functions that build and name a
run take it and check nothing again; the public entries of a run
(:func:`~avalanche_sets.runs.experiment.run_experiment`, a sweep's ``RunSpec``) also take a
dictionary, checked once, on arrival (:meth:`RunConfig.of`).
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import numbers
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .defaults import FOLDER_SOURCES, MEM_SIZE, N_OOD, PRECISIONS, REPLAY_BATCH, SOURCES
from .suggest import did_you_mean

if TYPE_CHECKING:
    from .data.splits import RunTarget

__all__ = [
    "PRESETS",
    "PRESET_SCHEMA",
    "RunConfig",
    "require_config",
    "resolve_preset",
    "check_preset",
    "preset_names",
    "run_target",
    "root_source",
    "parse_settings",
    "command_config",
]

_EPISODE = dict(n_way=5, n_shot=1, n_unlabeled=10, n_ood=N_OOD)

PRESETS: dict[str, dict[str, Any]] = {
    "quick": dict(
        source="synthetic",
        image_size=32,
        n_blocks=4,
        width=32,
        **{**_EPISODE, "n_unlabeled": 5, "n_ood": 20},
        n_query=5,
        tasks_per_domain=160,
        meta_batch=2,
        n_val_episodes=20,
        n_test_episodes=30,
        eval_mb_size=10,
        interim_test_episodes=None,
        lr=1e-3,
        mem_size=MEM_SIZE,
        replay_batch=REPLAY_BATCH,
        seeds=[0],
        device="cpu",
        threads=2,
        precision="auto",
    ),
    "cpu": dict(
        source="packs",
        image_size=32,
        n_blocks=4,
        width=32,
        **_EPISODE,
        n_query=5,
        tasks_per_domain=80,
        meta_batch=2,
        n_val_episodes=50,
        n_test_episodes=100,
        interim_test_episodes=20,
        eval_mb_size=10,
        lr=1e-3,
        mem_size=MEM_SIZE,
        replay_batch=REPLAY_BATCH,
        seeds=[0, 1, 2],
        device="cpu",
        threads=1,
        small_classes="drop",
        precision="auto",
    ),
    "paper": dict(
        source="paper",
        image_size=84,
        n_blocks=5,
        width=64,
        **_EPISODE,
        n_query=15,
        tasks_per_domain=12_000,
        meta_batch=2,
        n_val_episodes=600,
        n_test_episodes=600,
        eval_mb_size=20,
        interim_test_episodes=None,
        lr=1e-3,
        mem_size=MEM_SIZE,
        replay_batch=REPLAY_BATCH,
        seeds=[0, 1, 2, 3, 4],
        device="cuda",
        threads=4,
        precision="auto",
    ),
}
#: The converged CPU regime: the ``cpu`` preset trained until each domain's validation accuracy
#: plateaus. 700 iterations of meta-batch 2 per domain = the largest plateau point of MSKM and
#: ProtoNet over the six sets-mini domains (docs/results/learning-curves.md; the synthetic
#: domains plateau by 650).
PRESETS["converged"] = {**PRESETS["cpu"], "tasks_per_domain": 1400}

#: The presets a run folder's name is spelled against (``runs.folder.run_dir_name``): a
#: ``converged`` run differs from ``cpu`` only in its length, so it is named as a ``cpu`` run
#: with ``-tasks_per_domain1400`` rather than sharing the ``cpu`` run's short name.
NAMING_PRESETS = ("quick", "cpu", "paper")


def preset_names() -> list[str]:
    return sorted(PRESETS)


def root_source(name: str, root: str | os.PathLike) -> str | None:
    """The source a data folder given to preset ``name`` without a source implies: ``"packs"``
    when the preset generates its data (``source="synthetic"``) and ``root`` holds ``.npz``
    domain packs (a first run on one's own packs needs no ``--set source=packs``); ``None``
    when the preset's own source reads a folder.

    Raises:
        ValueError: a synthetic preset and a folder without packs, with the commands that run.
    """
    if PRESETS[name].get("source") != "synthetic":
        return None
    folder = os.path.expanduser(os.fspath(root))
    if os.path.isdir(folder) and any(
        f.endswith(".npz") and not f.startswith(".") for f in os.listdir(folder)
    ):
        return "packs"
    where = "holds no .npz domain packs" if os.path.isdir(folder) else "does not exist"
    raise ValueError(
        f"--root {root} {where}, and the {name} preset generates its data (source "
        f"'synthetic'), so the folder would be read by nothing; fix: point --root at a folder "
        "of packs (`avalanche-sets prepare stream --out FOLDER --domains ...` writes one), add "
        "--source paper for the paper's datasets, or drop --root"
    )


def command_config(name: str, overrides: Mapping[str, Any]) -> RunConfig:
    """The config a command line asks for: preset ``name`` with ``overrides``
    (:func:`resolve_preset`), where a ``root`` given to a preset that generates its data, without
    a ``source``, reads that folder's packs (:func:`root_source`).

    Raises:
        ValueError: as :func:`resolve_preset` and :func:`root_source`.
    """
    overrides = dict(overrides)
    if overrides.get("root") is not None and "source" not in overrides:  # --root of packs
        implied = root_source(name, overrides["root"])
        overrides.update({"source": implied} if implied else {})
    return resolve_preset(name, **overrides)


def run_target(name: str = "cpu") -> RunTarget:
    """The runs of preset ``name`` as the data functions that prepare packs and stream folders
    take them (:class:`~avalanche_sets.data.splits.RunTarget`): the presets sit above the data
    they configure, and hand it what it needs.

    Raises:
        ValueError: an unknown preset (with the closest name).
    """
    from .data.splits import RunTarget  # NumPy: the command line parses without it

    if name not in PRESETS:
        raise ValueError(
            f"unknown preset {name!r}{did_you_mean(name, PRESETS)}; choose one of {preset_names()}"
        )
    return RunTarget.of(name, PRESETS[name])


def _parse_value(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parse_settings(items: list[str] | None, *, grid: bool, flag: str = "--set") -> dict:
    """Settings as the command line gives them, ``key=value`` (or ``key=v1,v2`` for a grid of
    values), as a dictionary of values (lists for a grid); each value a Python literal, or the
    text itself.

    Raises:
        ValueError: an item without ``=``, or a key given twice (the later would win unseen).
    """
    out = {}
    for item in items or []:
        if "=" not in item:
            raise ValueError(f"{flag} expects key=value, got {item!r}")
        key, value = item.split("=", 1)
        if key in out:
            raise ValueError(
                f"{flag} {key}=... is given twice; fix: give it once (a sweep takes a grid as "
                f"{flag} {key}=v1,v2)"
            )
        parsed = _parse_value(value)
        if not grid:
            out[key] = parsed
        elif isinstance(parsed, tuple):  # n_shot=1,5 -> a grid over (1, 5)
            out[key] = list(parsed)
        elif isinstance(parsed, str) and "," in parsed:  # names=a,b
            out[key] = [_parse_value(v) for v in parsed.split(",")]
        else:  # one value (a list literal stays one value)
            out[key] = [parsed]
    return out


# ----------------------------------------------------------------------------- checks
def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _positive_int(v: Any) -> bool:
    return _is_int(v) and v >= 1


def _non_negative_int(v: Any) -> bool:
    return _is_int(v) and v >= 0


def _positive_number(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and v > 0


def _names(v: Any) -> bool:
    return isinstance(v, (list, tuple)) and all(isinstance(n, str) for n in v)


_POS = (_positive_int, "a positive integer")

#: Every preset setting (and the extra ones an override may add): (check, what it must be).
PRESET_SCHEMA: dict[str, tuple[Callable[[Any], bool], str]] = {
    "source": (lambda v: v in SOURCES, f"one of {list(SOURCES)}"),
    "image_size": _POS,
    "n_blocks": _POS,
    "width": _POS,
    "n_way": (lambda v: _is_int(v) and v >= 2, "an integer >= 2"),
    "n_shot": _POS,
    "n_query": _POS,
    "n_unlabeled": (_non_negative_int, "a non-negative integer"),
    "n_ood": (_non_negative_int, "a non-negative integer"),
    "tasks_per_domain": _POS,
    "meta_batch": _POS,
    "n_val_episodes": _POS,
    "n_test_episodes": _POS,
    "eval_mb_size": _POS,
    "interim_test_episodes": (lambda v: v is None or _positive_int(v), "a positive integer"),
    "lr": (_positive_number, "a positive number"),
    "mem_size": _POS,
    "replay_batch": _POS,
    "seeds": (
        lambda v: isinstance(v, (list, tuple)) and len(v) > 0 and all(_is_int(x) for x in v),
        "a non-empty list of integers",
    ),
    "device": (lambda v: isinstance(v, str) and v != "", "a torch device name ('cpu', 'cuda')"),
    "threads": _POS,
    "small_classes": (lambda v: v in ("error", "drop"), "'error' or 'drop'"),
    "precision": (lambda v: v in PRECISIONS, f"one of {list(PRECISIONS)}"),
    # Extra settings, in no preset by default.
    "channels_last": (lambda v: isinstance(v, bool), "True or False"),
    "root": (lambda v: isinstance(v, (str, os.PathLike)), "a folder path"),
    "order": (lambda v: _is_int(v) and 1 <= v <= 3, "the paper's domain order 1, 2 or 3"),
    "domains": (
        lambda v: _names(v) and len(v) > 0 and len(set(v)) == len(v),
        "a non-empty list of distinct domain names (a custom order)",
    ),
    "ood": (lambda v: _names(v) and len(set(v)) == len(v), "a list of distinct OOD names"),
}
_CHOICES = {"source": SOURCES, "small_classes": ("error", "drop"), "precision": PRECISIONS}
_EXTRA = ("root", "order", "domains", "ood", "small_classes", "channels_last")


def check_preset(preset: Mapping[str, Any], *, name: str = "preset") -> Mapping[str, Any]:
    """Check every setting of a (resolved) preset; raise ValueError naming the first bad one.

    Also refuses combinations that cannot work (``order`` together with ``domains``,
    ``n_ood > 0`` with ``ood=[]``) or that would be ignored (a ``root`` for a source that reads
    no folder). The episode settings' ranges are those of
    :class:`~avalanche_sets.data.EpisodeConfig`, so an impossible episode shape fails here,
    before any data is loaded. Returns ``preset``.
    """
    for key, value in preset.items():
        if key not in PRESET_SCHEMA:
            continue  # unknown keys are refused by resolve_preset and RunConfig.of
        ok, what = PRESET_SCHEMA[key]
        if not ok(value):
            example = PRESETS["quick"].get(key)
            fix = f"; fix: e.g. {key}={example!r}" if example is not None else ""
            if key in _CHOICES:
                fix = did_you_mean(str(value), _CHOICES[key])
            if isinstance(value, (tuple, list)) and key not in ("seeds", "domains", "ood"):
                fix += " (a comma-separated list is a grid: run it with `avalanche-sets sweep`)"
            raise ValueError(
                f"{name}: setting {key!r} must be {what}, got {value!r} "
                f"({type(value).__name__}){fix}"
            )
    if preset.get("domains") is not None and preset.get("order") is not None:
        raise ValueError(
            f"{name}: order={preset['order']!r} and domains={preset['domains']!r} both set the "
            "domain order; fix: pass only one of them"
        )
    if preset.get("root") is not None and preset.get("source") not in FOLDER_SOURCES:
        raise ValueError(
            f"{name}: root={str(preset['root'])!r} is set, but source {preset.get('source')!r} "
            "reads no data folder (it generates its images), so the folder would be ignored; "
            "fix: add --set source=packs (a folder of .npz domain packs) or --set source=paper "
            "(the paper's datasets), or drop --root"
        )
    if preset.get("n_ood", 0) > 0 and preset.get("ood") is not None and not preset["ood"]:
        raise ValueError(
            f"{name}: n_ood={preset['n_ood']} OOD images per episode need OOD sources, but "
            "ood=[]; fix: set n_ood=0 or name OOD sources"
        )
    return preset


# ----------------------------------------------------------------------------- the config
#: Settings held as tuples in a :class:`RunConfig` (frozen) and given out as lists by
#: :meth:`RunConfig.as_dict` (as a preset dictionary and a ``result.json`` hold them).
_SEQUENCES = ("seeds", "domains", "ood")


@dataclass(frozen=True, repr=False)
class RunConfig:
    """The settings of a run, each checked once, when the config is made; frozen and typed.

    Made by :func:`resolve_preset` (a named preset and overrides) or :meth:`of` (a dictionary
    of settings, e.g. a preset copied and edited); direct construction,
    ``RunConfig(source="synthetic", ...)``, is checked the same way. The functions that build,
    name and run a run (:func:`~avalanche_sets.methods.check_method`,
    :func:`~avalanche_sets.methods.build_strategy`,
    :func:`~avalanche_sets.runs.experiment.run_experiment`, a sweep's
    :class:`~avalanche_sets.runs.sweep.RunSpec`, ...) take it and check nothing again.

    Code reads a setting by its attribute. :meth:`as_dict` gives the settings it was given, in
    their order (``seeds``, ``domains`` and ``ood`` as lists): what a run's ``result.json``
    records, its identity and its folder's name are made of. A setting it was not given is
    absent from that dictionary, and its attribute holds what its absence means (``order``:
    ``None``, the paper's order 1 unless ``domains`` sets one; ``threads``: 1; ...).

    Attributes:
        source: where the domains come from (:data:`~avalanche_sets.defaults.SOURCES`).
        image_size, n_blocks, width: the images' side and the backbone (blocks, filters).
        n_way, n_shot, n_unlabeled, n_ood, n_query: the episode (N, K, Z, R, Q).
        tasks_per_domain, meta_batch: training tasks per domain, tasks per iteration.
        n_val_episodes, n_test_episodes, interim_test_episodes: evaluation episodes per
            domain (``interim_test_episodes``: for the accuracy matrix's intermediate rows;
            ``None``: as many as ``n_test_episodes``).
        eval_mb_size, lr, mem_size, replay_batch: evaluation batch, learning rate, memory in
            tasks, memory tasks replayed per iteration.
        seeds, device, threads: the seeds a command runs, the torch device, torch threads.
        precision, channels_last: the backbone's precision (``auto``, ``fp32``, ``bf16``;
            every run names it) and memory layout.
        small_classes: what a domain does with classes too small for an episode.
        root, order, domains, ood: the data folder, the paper's domain order (1-3) or a custom
            list of domains, the OOD sources (``None``: the source's own).
    """

    source: str
    image_size: int
    n_blocks: int
    width: int
    n_way: int
    n_shot: int
    n_unlabeled: int
    n_ood: int
    n_query: int
    tasks_per_domain: int
    meta_batch: int
    n_val_episodes: int
    n_test_episodes: int
    eval_mb_size: int
    lr: float
    mem_size: int
    replay_batch: int
    device: str
    precision: str
    interim_test_episodes: int | None = None
    seeds: tuple[int, ...] = (0,)
    threads: int = 1
    small_classes: str = "error"
    channels_last: bool = True
    root: str | os.PathLike | None = None
    order: int | None = None
    domains: tuple[str, ...] | None = None
    ood: tuple[str, ...] | None = None
    # The settings given, in their order: what :meth:`as_dict` holds.
    _given: tuple[str, ...] = field(default=(), init=False, repr=False)

    def __post_init__(self) -> None:
        """Direct construction: every required setting and every other one that differs from
        its default is given; all are checked."""
        for key in _SEQUENCES:
            value = getattr(self, key)
            if isinstance(value, list):
                object.__setattr__(self, key, tuple(value))
        given = tuple(
            f.name
            for f in _SETTING_FIELDS
            if f.default is dataclasses.MISSING or getattr(self, f.name) != f.default
        )
        object.__setattr__(self, "_given", given)
        check_preset(self.as_dict(), name="RunConfig")

    @classmethod
    def of(cls, preset: str | Mapping[str, Any], *, name: str = "preset") -> RunConfig:
        """``preset`` as a config: itself when it is one (checked already), a preset's name as
        the command line's ``--preset NAME`` (:func:`resolve_preset`), else its settings
        checked once (:func:`check_preset`; ``name`` starts the messages).

        Raises:
            ValueError: an unknown preset name or setting (with the closest valid name), a
                missing setting that every run needs, a bad value or contradicting settings.
            TypeError: ``preset`` is neither a preset's name nor a mapping of settings.
        """
        if isinstance(preset, RunConfig):
            return preset
        if isinstance(preset, str):
            return resolve_preset(preset)
        if not isinstance(preset, Mapping):
            raise TypeError(
                f"{name} must be a preset's name, a RunConfig or a dict of settings, got "
                f"{type(preset).__name__}; fix: preset = "
                "avalanche_sets.presets.resolve_preset('quick')"
            )
        unknown = sorted(set(preset) - set(PRESET_SCHEMA))
        if unknown:
            hints = did_you_mean(unknown, PRESET_SCHEMA)
            raise ValueError(
                f"{name}: unknown setting(s) {unknown}{hints}; valid settings: "
                f"{sorted(PRESET_SCHEMA)}"
            )
        missing = [f.name for f in _REQUIRED_FIELDS if f.name not in preset]
        if missing:
            raise ValueError(
                f"{name} lacks setting(s) {missing} that every run needs; fix: start from "
                "avalanche_sets.presets.resolve_preset(<name>, **overrides)"
            )
        check_preset(preset, name=name)
        # Filled in without __init__: the settings were checked just above, once.
        config = object.__new__(cls)
        for f in _SETTING_FIELDS:
            value = preset.get(f.name, f.default)
            if f.name in _SEQUENCES and isinstance(value, list):
                value = tuple(value)
            object.__setattr__(config, f.name, value)
        object.__setattr__(config, "_given", tuple(preset))
        return config

    def replace(self, **changes: Any) -> RunConfig:
        """A new config with ``changes`` applied (and checked)."""
        return RunConfig.of({**self.as_dict(), **changes})

    def as_dict(self) -> dict[str, Any]:
        """The settings this config was given, in their order, as a new dictionary (``seeds``,
        ``domains`` and ``ood`` as lists): what a run's ``result.json`` records as its
        ``preset``, and what its identity and its folder's name are made of."""
        out = {}
        for key in self._given:
            value = getattr(self, key)
            out[key] = list(value) if key in _SEQUENCES and value is not None else value
        return out

    def __repr__(self) -> str:
        return f"RunConfig({self.as_dict()!r})"


_SETTING_FIELDS = tuple(f for f in dataclasses.fields(RunConfig) if f.name != "_given")
_REQUIRED_FIELDS = tuple(f for f in _SETTING_FIELDS if f.default is dataclasses.MISSING)


def require_config(value: object, what: str, *, also: str = "") -> RunConfig:
    """``value`` when it is a :class:`RunConfig`; anything else (a dictionary of settings among
    them) is refused with a ``TypeError`` that names ``what`` took it and the fix
    (``RunConfig.of(settings)``; ``also``: where else the caller's fix may come from)."""
    if not isinstance(value, RunConfig):
        raise TypeError(
            f"{what} takes a RunConfig, got {type(value).__name__}; fix: "
            f"avalanche_sets.presets.RunConfig.of(settings){also}"
        )
    return value


def resolve_preset(name: str, **overrides: Any) -> RunConfig:
    """Preset ``name`` with ``overrides`` applied, every setting checked: the run's config.

    ``None`` values mean "not given" and leave the preset's value. Besides the preset's own
    settings, ``root``, ``order``, ``domains``, ``ood``, ``small_classes`` and
    ``channels_last`` may be set.

    Raises:
        ValueError: an unknown preset or setting (with the closest valid name), a value of the
            wrong type or range, or settings that contradict each other (:func:`check_preset`).
    """
    if name not in PRESETS:
        raise ValueError(
            f"unknown preset {name!r}{did_you_mean(name, PRESETS)}; choose one of {preset_names()}"
        )
    preset = copy.deepcopy(PRESETS[name])
    unknown = sorted(set(overrides) - set(preset) - set(_EXTRA))
    if unknown:
        hints = did_you_mean(unknown, {*preset, *_EXTRA})
        raise ValueError(
            f"unknown preset setting(s) {unknown}{hints}; valid settings: {sorted(preset)} "
            f"(plus {', '.join(k for k in _EXTRA if k not in preset)})"
        )
    preset.update({k: v for k, v in overrides.items() if v is not None})
    if preset.get("channels_last") is True:  # the default layout: same run, same identity
        del preset["channels_last"]
    return RunConfig.of(preset, name=f"preset {name!r}")
