"""One run, settled once: what it is, and everything that follows from what it is.

A :class:`Run` holds a run's method, its :class:`~avalanche_sets.presets.RunConfig`, its seed,
evaluation stream, typed strategy options, added plugins (as their descriptions) and tag, and
derives, once, when it is made, what every later step of the run reads: the precision it
computes in (``"auto"`` resolved on this machine), the preset settings it does not read, the
name of its folder and the settings its record holds. Its data's identity (the content hash of
its data folder) is read once, on first use. The steps that run it
(:func:`~avalanche_sets.runs.experiment.run_experiment`), name it and check a finished folder
against it read these instead of working them out again from the config.

It is made where a caller hands a run over (:meth:`Run.of`: the command line, a sweep, Python's
``run_experiment``), after the method and its options were checked
(:func:`~avalanche_sets.methods.check_method`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from ..methods import normal_options, tuned_options, unread_settings
from ..methods.options import ORDER_PARTS
from ..presets import RunConfig, require_config
from .code import user_code
from .folder import (
    check_tag,
    portable_preset,
    run_data,
    run_dir_name,
    run_identity,
    run_precision,
)

__all__ = ["Run", "plugin_description"]


def plugin_description(plugin: object) -> str:
    """A plugin as a run's identity names it: its class and its public settings,
    ``"PrototypeSpreadPlugin(weight=0.1)"`` (attributes holding numbers, strings, booleans,
    ``None`` or tuples of them, read when the run starts)."""
    plain = (int, float, str, bool, type(None))
    settings = {
        k: v
        for k, v in sorted(vars(plugin).items())
        if not k.startswith("_")
        and (
            isinstance(v, plain) or (isinstance(v, tuple) and all(isinstance(x, plain) for x in v))
        )
    }
    inner = ", ".join(f"{k}={v!r}" for k, v in settings.items())
    return f"{type(plugin).__name__}({inner})"


@dataclass(frozen=True, kw_only=True)
class Run:
    """A run of one method on one config with one seed, and what follows from it, derived once.

    Attributes:
        method: a built-in method's name or a method of one's own
            (:mod:`avalanche_sets.methods`).
        config: the run's settings, as given (``precision`` as the preset names it).
        seed: the run's seed.
        eval_stream: ``"test"`` or ``"valid"``.
        strategy_options: the strategy options as the run holds them and builds its strategy
            with: typed, less every option equal to the value the method runs with anyway
            (:func:`~avalanche_sets.methods.normal_options`; options typed already, a
            :class:`~avalanche_sets.methods.MethodOptions`, are not typed again).
        plugins: the :func:`plugin_description` of every plugin added to the method.
        tag: the name that keeps the run apart (:func:`~.folder.check_tag`; ``""``: none).
        user_code: the content hash of the code of one's own that defines the run
            (:func:`~.code.user_code`).
        precision: the precision the run computes in, resolved once here
            (:func:`~.folder.run_precision`).
        unread: the preset settings the run does not read, each with the reason
            (:func:`~avalanche_sets.methods.unread_settings`).
        name: the run's folder under an output root (:func:`~.folder.run_dir_name`, plus
            ``-tag_<tag>``).

    Raises:
        TypeError: ``config`` is no :class:`~avalanche_sets.presets.RunConfig` (names the fix).
        ValueError: a tag :func:`~.folder.check_tag` refuses.
        MethodOptionError: as :func:`~avalanche_sets.methods.normal_options`.
    """

    method: str
    config: RunConfig
    seed: int
    eval_stream: str = "test"
    strategy_options: Mapping[str, Any] = field(default_factory=dict)
    plugins: tuple[str, ...] = ()
    tag: str = ""
    user_code: Mapping[str, str] = field(default_factory=dict)
    precision: str = field(init=False)
    unread: dict[str, str] = field(init=False, repr=False)
    name: str = field(init=False)

    def __post_init__(self) -> None:
        require_config(
            self.config, "Run(config=...)", also=" (or resolve_preset(name, **overrides)), or "
            "hand the settings to run_experiment, which checks them once",
        )  # fmt: skip
        check_tag(self.tag)
        parts = sorted(set(self.strategy_options) & set(ORDER_PARTS))
        if parts:
            raise ValueError(
                f"{parts} given as options of a run of {self.method!r}: a run names its options "
                "by value and would know a part of ORDER by its repr only; fix: a method class "
                "of your own that passes it to OrderStrategy (docs/guide/custom-method.md, "
                "'Replacing a part of ORDER'), run as --method module:Class"
            )
        options = normal_options(self.method, self.config, self.strategy_options)
        precision = run_precision(self.config)  # "auto" resolved: once per run
        unread = unread_settings(self.method, self.config, options, eval_stream=self.eval_stream)
        name = run_dir_name(
            self.method, self.config, self.seed, eval_stream=self.eval_stream,
            strategy_overrides=options, plugins=self.plugins, unread=unread, precision=precision,
        )  # fmt: skip
        derived = {
            "strategy_options": options,
            "plugins": tuple(self.plugins),
            "user_code": dict(self.user_code),
            "precision": precision,
            "unread": unread,
            "name": name + f"-tag_{self.tag}" if self.tag else name,
        }
        for key, value in derived.items():
            object.__setattr__(self, key, value)

    @classmethod
    def of(
        cls,
        method: str,
        config: RunConfig,
        *,
        seed: int,
        eval_stream: str = "test",
        strategy_overrides: Mapping[str, Any] | None = None,
        plugins: Iterable[object] = (),
        tag: str = "",
    ) -> Run:
        """The run of ``method`` with ``config`` and ``seed``, its ``plugins`` (objects)
        described and the code of one's own that defines it hashed as its files are now.
        ``strategy_overrides``: Python values, or options typed already
        (:class:`~avalanche_sets.methods.MethodOptions`: taken as they are)."""
        plugins = list(plugins)
        return cls(
            method=method, config=config, seed=seed, eval_stream=eval_stream,
            strategy_options=strategy_overrides if strategy_overrides is not None else {},
            plugins=tuple(plugin_description(p) for p in plugins), tag=tag,
            user_code=user_code(method, plugins),
        )  # fmt: skip

    def folder(self, out_root: str | Path) -> Path:
        """The run's folder under ``out_root``."""
        return Path(out_root) / self.name

    @property
    def apart(self) -> dict[str, Any]:
        """What sets the run apart besides its config and seed, as
        :func:`~.folder.run_folder` and :func:`~.folder.run_identity` take it (``**``)."""
        return {
            "eval_stream": self.eval_stream,
            "strategy_overrides": dict(self.strategy_options),
            "plugins": list(self.plugins),
            "unread": dict(self.unread),
        }

    @cached_property
    def data(self) -> dict[str, Any]:
        """The ``data`` of the run's record (:func:`~.folder.run_data`), read once.

        Raises:
            ValueError: the config's data folder does not exist.
        """
        return run_data(self.config)

    @cached_property
    def identity(self) -> dict:
        """The run's :func:`~.folder.run_identity`: what a finished folder must hold to be
        this run."""
        return run_identity(
            self.method, self.config, **self.apart, data=self.data["content"],
            user_code=self.user_code, tag=self.tag, precision=self.precision,
        )  # fmt: skip

    @property
    def settings(self) -> dict[str, Any]:
        """The settings the run's record holds as its ``preset``: every setting of its config
        but its seeds (a run has one seed), ``precision`` resolved, the data folder portable
        (:func:`~.folder.portable_preset`)."""
        settings = portable_preset(self.config)
        settings.pop("seeds", None)
        return {**settings, "precision": self.precision}

    @property
    def wandb_config(self) -> dict[str, Any]:
        """The W&B run's config: what the run computes with, resolved.

        The method, the seed, every setting of :attr:`settings` (the precision that runs, not
        ``"auto"``), the evaluation stream, ``strategy_options`` (the options the strategy is
        built with beyond its class defaults: a baseline's tuned defaults,
        :func:`~avalanche_sets.methods.tuned_options`, then the run's own) and the added
        ``plugins``.
        """
        config = {
            "method": self.method,
            "seed": self.seed,
            **self.settings,
            "eval_stream": self.eval_stream,
            "strategy_options": {**tuned_options(self.method), **self.strategy_options},
        }
        if self.plugins:
            config["plugins"] = list(self.plugins)
        return config
