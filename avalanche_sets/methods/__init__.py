"""Registry of runnable methods: ORDER, its ablations, the baselines, and methods of your own.

A method is one strategy class that says what it is (:class:`~avalanche_sets.method.Method`:
its name, one line, the options it fixes, its tuned options) and how a run builds it. Its name
resolves to its class (:mod:`.resolve`: the built-ins' table, installed entry points,
``package.module:Class``), its options and settings are checked before any data loads
(:mod:`.check`; typed once: :class:`MethodOptions`), and it is built for a run (:mod:`.build`).
This package re-exports them.
"""

from __future__ import annotations

from .build import (
    build_checked_strategy,
    build_strategy,
    make_backbone,
    training_benchmark,
    training_config,
)
from .builtins import builtin_methods
from .check import (
    MethodOptionError,
    check_method,
    checked_method,
    default_options,
    method_options,
    normal_options,
    parse_options,
    run_config,
    tuned_options,
    typed_options,
    unread_settings,
)
from .resolve import (
    ENTRY_POINT_GROUP,
    installed_methods,
    is_custom_method,
    method_class,
    method_folder_name,
    method_names,
    method_target,
)
from .typed import MethodOptions

__all__ = [
    "ENTRY_POINT_GROUP",
    "MethodOptionError",
    "MethodOptions",
    "build_checked_strategy",
    "build_strategy",
    "builtin_methods",
    "check_method",
    "checked_method",
    "default_options",
    "installed_methods",
    "is_custom_method",
    "make_backbone",
    "method_class",
    "method_folder_name",
    "method_names",
    "method_options",
    "method_target",
    "normal_options",
    "parse_options",
    "run_config",
    "training_benchmark",
    "training_config",
    "tuned_options",
    "typed_options",
    "unread_settings",
]
