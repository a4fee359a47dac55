"""A method's strategy options are typed once, where they are handed over, and reach the strategy
as typed: the command line's text parsed once, Python's values checked once, and every later
step (the method's check, the run's folder name, the strategy's construction) taking the
:class:`~avalanche_sets.methods.MethodOptions` it was handed as it is."""

from __future__ import annotations

import pickle
from collections import Counter
from typing import Any

import pytest

from avalanche_sets import cli, training
from avalanche_sets.methods import (
    MethodOptionError,
    MethodOptions,
    build_checked_strategy,
    build_strategy,
    builtin_methods,
    check_method,
    method_options,
    normal_options,
    parse_options,
    typed_options,
)
from avalanche_sets.methods import build as build_module
from avalanche_sets.methods import check as check_module
from avalanche_sets.methods.options import RUN_ARGUMENTS, OptionSpec
from avalanche_sets.presets import resolve_preset
from avalanche_sets.runs import experiment

#: A run small enough to build in a test: the settings once, for the command line and Python.
TINY_SETTINGS = {
    "tasks_per_domain": 2, "n_test_episodes": 2, "n_query": 2, "n_unlabeled": 2, "n_ood": 4,
    "width": 4, "eval_mb_size": 2, "domains": ["shapes", "strokes"], "threads": 1,
    "interim_test_episodes": 2,
}  # fmt: skip
TINY = [arg for key, value in TINY_SETTINGS.items() for arg in ("--set", f"{key}={value!r}")]
OPTIONS = ["--strategy-set", "beta=0.01", "--strategy-set", "use_ot=true"]


class _Reached(Exception):
    """Training was reached: the run's strategy was built (not a RuntimeError, which the
    command line reports)."""


@pytest.fixture
def typings(monkeypatch) -> Counter:
    """How often each option was typed, by :meth:`OptionSpec.parse` (text) or
    :meth:`OptionSpec.check` (a value): ``{("parse", "beta"): 1, ...}``."""
    counts: Counter = Counter()
    parse, check = OptionSpec.parse, OptionSpec.check

    def counted_parse(self, text, **kwargs):
        counts["parse", self.name] += 1
        return parse(self, text, **kwargs)

    def counted_check(self, value, **kwargs):
        counts["check", self.name] += 1
        return check(self, value, **kwargs)

    monkeypatch.setattr(OptionSpec, "parse", counted_parse)
    monkeypatch.setattr(OptionSpec, "check", counted_check)
    return counts


@pytest.fixture
def built(monkeypatch) -> list[dict[str, Any]]:
    """The options every strategy was built with (its construction, :func:`_build`, watched),
    and training replaced by a stop once the run's strategy is built."""
    seen: list[dict[str, Any]] = []
    real = build_module._build

    def watched(cls, config, *, options, **kwargs):
        seen.append(dict(options))
        return real(cls, config, options=options, **kwargs)

    def stop(*args, **kwargs):
        raise _Reached

    monkeypatch.setattr(build_module, "_build", watched)
    monkeypatch.setattr(training, "run_sets", stop)
    return seen


@pytest.fixture
def checks(monkeypatch) -> list[str]:
    """The method of every check of a method (:func:`~avalanche_sets.methods.checked_method`,
    which :func:`check_method` and every run's check call)."""
    seen: list[str] = []
    real = check_module.checked_method

    def counted(name, *args, **kwargs):
        seen.append(name)
        return real(name, *args, **kwargs)

    for module in (check_module, build_module, experiment):
        monkeypatch.setattr(module, "checked_method", counted)
    return seen


# ------------------------------------------------------------------ typed once, on every path
def test_the_command_lines_options_are_typed_once_on_the_way_to_the_strategy(
    typings, built, checks, tmp_path
):
    argv = ["run", *TINY, "--method", "order", *OPTIONS, "--seeds", "0", "--loggers"]
    with pytest.raises(_Reached):
        cli.main([*argv, "--out", str(tmp_path / "runs")])
    assert typings == {("parse", "beta"): 1, ("parse", "use_ot"): 1}  # and never checked
    assert checks == ["order"]  # the method checked once per command
    # built twice (the probe before data loads, then the run's), with the typed values:
    # use_ot=true is the default, which the run's identity (and so its build) leaves out
    assert built == [{"beta": 0.01, "use_ot": True}, {"beta": 0.01}]
    assert all(type(b["beta"]) is float for b in built)


def test_a_sweeps_options_are_typed_once_and_its_method_checked_once(
    typings, built, checks, tmp_path
):
    argv = ["sweep", *TINY, "--methods", "order", *OPTIONS, "--seeds", "0", "1"]
    with pytest.raises(_Reached):
        cli.main([*argv, "--out", str(tmp_path / "runs")])
    assert typings == {("parse", "beta"): 1, ("parse", "use_ot"): 1}
    assert checks == ["order"]  # two seeds, one check
    assert built[-1] == {"beta": 0.01}


def test_a_python_run_types_its_options_once(typings, built, checks, tmp_path):
    preset = resolve_preset("quick", **TINY_SETTINGS)
    with pytest.raises(_Reached):
        experiment.run_experiment(
            "order", preset, seed=0, out_root=tmp_path, loggers=(),
            strategy_overrides={"beta": 1},
        )  # fmt: skip
    assert typings == {("check", "beta"): 1}
    assert checks == ["order"]
    assert built == [{"beta": 1.0}] and type(built[0]["beta"]) is float  # an int: a float


def test_a_python_sweep_types_its_options_once(typings, built, checks, tmp_path):
    from avalanche_sets.runs.sweep import RunSpec, run_sweep

    preset = resolve_preset("quick", **TINY_SETTINGS)
    specs = [RunSpec("order", preset, seed, tmp_path, strategy_overrides={"beta": 1})
             for seed in (0, 1)]  # fmt: skip
    assert typings == {("check", "beta"): 2}  # each spec typed when made
    with pytest.raises(_Reached):
        run_sweep(specs, progress=False)
    assert typings == {("check", "beta"): 2}  # and never again on the way to the strategy
    assert checks == ["order"]  # two seeds, one check
    assert built[-1] == {"beta": 1.0} and type(built[-1]["beta"]) is float


def test_build_strategy_types_once_per_call(typings, built):
    build_strategy("order", "quick", beta=1, use_ot=True)
    assert typings == {("check", "beta"): 1, ("check", "use_ot"): 1}
    assert built == [{"beta": 1.0, "use_ot": True}] and type(built[0]["beta"]) is float


# ---------------------------------------------------------------------- the typed value itself
def test_typed_options_are_taken_as_they_are_by_every_typing_function(typings):
    options = typed_options("order", {"beta": 0, "mi_terms": ["id"], "lam": 1e-5})
    assert isinstance(options, MethodOptions) and options.method == "order"
    assert options == {"beta": 0.0, "mi_terms": ("id",), "lam": 1e-5}
    typings.clear()
    assert typed_options("order", options) is options
    assert check_method("order", "quick", options) == resolve_preset("quick")
    normal = normal_options("order", resolve_preset("quick"), options)  # lam: its default
    assert normal == {"beta": 0.0, "mi_terms": ("id",)} and isinstance(normal, MethodOptions)
    assert not typings  # nothing typed again
    parsed = parse_options("order", {"beta": "0.5"})
    assert isinstance(parsed, MethodOptions) and parsed.method == "order"


def test_options_typed_for_another_method_are_refused_with_the_fix():
    options = parse_options("order", {"lam": "0.1"})
    fix = r"typed for method 'order' were handed to method 'semi-gpm'; fix: type them for it"
    with pytest.raises(MethodOptionError, match=fix):
        typed_options("semi-gpm", options)
    with pytest.raises(MethodOptionError, match=fix):
        check_method("semi-gpm", "quick", options)
    with pytest.raises(MethodOptionError, match=fix):
        build_checked_strategy("semi-gpm", resolve_preset("quick"), options)


def test_typed_options_cannot_be_changed_or_made_directly():
    options = typed_options("order", {"beta": 0.5})
    with pytest.raises(TypeError):
        options["beta"] = 1.0  # type: ignore[index]
    with pytest.raises(TypeError, match="cannot be changed"):
        options._values = {"beta": 1.0}  # type: ignore[misc]
    with pytest.raises(TypeError):
        options._values["beta"] = 1.0  # type: ignore[index]
    with pytest.raises(TypeError, match=r"fix: avalanche_sets\.methods\.typed_options"):
        MethodOptions({"beta": 0.5})
    copy = dict(options)
    copy["beta"] = 1.0  # a plain copy to change
    assert options["beta"] == 0.5
    # a worker process gets them as typed (a sweep's pool, Ray)
    again = pickle.loads(pickle.dumps(options))
    assert isinstance(again, MethodOptions) and (again.method, again) == ("order", options)


def test_a_run_builds_only_from_typed_options():
    with pytest.raises(TypeError, match=r"takes typed options, got a dict; fix: build_strategy"):
        build_checked_strategy("order", resolve_preset("quick"), {"beta": 0.5})  # type: ignore[arg-type]


# --------------------------------------------------- what parse gives is what check would keep
def _sample_texts(spec: OptionSpec) -> list[str]:
    """Command-line texts of ``spec``'s default (and a whole number for a float option)."""
    default = spec.default
    if isinstance(default, bool):
        return [str(default).lower()]
    if isinstance(default, (int, float, str)):
        return [str(default), "1"] if spec.type is float else [str(default)]
    if isinstance(default, tuple) and default:
        return [",".join(str(d) for d in default)]
    if default is None:
        return ["none"]
    return []


def test_parse_gives_the_value_check_keeps_for_every_builtin_option():
    tried = 0
    for method in builtin_methods():
        options, _ = method_options(method)
        for spec in options.values():
            if not (spec.typed and spec.from_text) or spec.name in RUN_ARGUMENTS:
                continue
            for text in _sample_texts(spec):
                value = spec.parse(text)
                kept = spec.check(value)
                assert kept == value and type(kept) is type(value), (method, spec, text)
                if isinstance(value, tuple):
                    assert [type(v) for v in kept] == [type(v) for v in value]
                tried += 1
    assert tried > 50
    beta = method_options("order")[0]["beta"]
    assert type(beta.parse("1")) is float  # an int's text for a float option: a float
