"""The run's config (avalanche_sets.presets.RunConfig): made and checked once, where the user
hands the settings over; frozen, typed, read by its attributes; ``as_dict()`` is the preset
dictionary it was made from."""

import dataclasses
import pickle
import re
from collections.abc import Mapping
from functools import partial

import pytest

from avalanche_sets import presets
from avalanche_sets.methods import build_strategy, check_method
from avalanche_sets.presets import PRESET_SCHEMA, PRESETS, RunConfig, resolve_preset
from avalanche_sets.runs.experiment import build_benchmark, method_preset, run_experiment
from avalanche_sets.runs.folder import portable_preset, run_dir_name, run_identity
from avalanche_sets.runs.sweep import RunSpec


def test_a_resolved_preset_is_a_typed_config_whose_dictionary_is_the_preset():
    config = resolve_preset("cpu", n_shot=5, seeds=(0, 1), root="data")
    assert isinstance(config, RunConfig) and not isinstance(config, Mapping)
    assert (config.n_shot, config.seeds, config.root, config.order) == (5, (0, 1), "data", None)
    expected = {**PRESETS["cpu"], "n_shot": 5, "seeds": [0, 1], "root": "data"}
    settings = config.as_dict()
    assert settings == expected and list(settings) == list(expected)
    assert settings["seeds"] == [0, 1] and "order" not in settings
    settings["n_shot"] = 1  # a new dictionary each time: the config does not change
    assert config.as_dict()["n_shot"] == 5
    assert resolve_preset("quick").as_dict() == PRESETS["quick"]
    assert resolve_preset("quick") == RunConfig.of(PRESETS["quick"])
    with pytest.raises(TypeError):
        config["n_shot"]  # type: ignore[index]  # read by attribute, config.n_shot
    assert {f.name for f in dataclasses.fields(RunConfig) if f.init} == set(PRESET_SCHEMA)


def test_a_config_is_frozen_and_changed_only_into_a_checked_copy():
    config = resolve_preset("quick")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.n_shot = 5
    with pytest.raises(TypeError):
        config["n_shot"] = 5  # type: ignore[index]
    assert config.replace(n_shot=5).n_shot == 5 and config.n_shot == 1
    with pytest.raises(ValueError, match="setting 'n_shot' must be a positive integer"):
        config.replace(n_shot=0)
    with pytest.raises(ValueError, match="setting 'n_shot' must be a positive integer"):
        dataclasses.replace(config, n_shot=0)
    assert pickle.loads(pickle.dumps(config)) == config  # a sweep's worker processes get it


def test_a_config_made_directly_is_checked_and_holds_what_differs_from_the_defaults():
    required = {f.name: PRESETS["quick"][f.name] for f in presets._REQUIRED_FIELDS}
    config = RunConfig(**{**required, "precision": "bf16"}, threads=3, channels_last=True)
    assert config.as_dict() == {**required, "precision": "bf16", "threads": 3}
    with pytest.raises(ValueError, match="RunConfig: setting 'precision' must be one of"):
        RunConfig(**{**required, "precision": "fp16"})


def test_every_run_names_its_precision():
    """No setting stands for "fp32 when absent": a dictionary without ``precision`` is refused,
    naming it."""
    assert "precision" in {f.name for f in presets._REQUIRED_FIELDS}
    settings = resolve_preset("quick").as_dict()
    del settings["precision"]
    with pytest.raises(ValueError, match=r"lacks setting\(s\) \['precision'\]"):
        RunConfig.of(settings)


def test_a_dictionary_handed_over_is_checked_once_with_the_presets_messages():
    settings = resolve_preset("quick", width=4).as_dict()
    with pytest.raises(ValueError, match="setting 'n_shot' must be a positive integer, got '5'"):
        RunConfig.of({**settings, "n_shot": "5"})
    with pytest.raises(TypeError, match="RunConfig or a preset's name, got a dict"):
        build_strategy("mskm", settings)  # a method takes a checked config, never a dict
    with pytest.raises(ValueError, match=r"unknown setting\(s\) \['n_wya'\] \(did you mean"):
        RunConfig.of({**settings, "n_wya": 3})
    with pytest.raises(ValueError, match=r"lacks setting\(s\) \['source'\] that every run"):
        RunConfig.of({k: v for k, v in settings.items() if k != "source"})
    for entry in (build_benchmark, partial(run_experiment, "mskm", out_root="runs")):
        with pytest.raises(TypeError, match="RunConfig or a preset's name, got a dict"):
            entry(settings, seed=0)  # refused before anything is made
    for wrong in ([("n_shot", 1)], settings):
        with pytest.raises(TypeError, match="RunConfig or a preset's name, got a"):
            RunSpec("mskm", wrong, 0, "runs")  # type: ignore[arg-type]


def test_every_setting_is_checked_once_where_it_is_handed_over(monkeypatch):
    calls = []
    check = presets.check_preset
    monkeypatch.setattr(presets, "check_preset", lambda p, **kw: calls.append(1) or check(p, **kw))
    config = resolve_preset("quick", width=4, mem_size=4, tasks_per_domain=2)
    assert calls == [1]
    assert check_method("semi-er", config) is config
    build_strategy("semi-er", config)
    build_strategy("joint-matched", config)
    method_preset("joint-matched", config)  # a changed copy: checked as it is made
    assert len(calls) == 2
    RunSpec("semi-er", config, 0, "runs").folder  # noqa: B018
    run_dir_name("semi-er", config, 0), run_identity("semi-er", config), portable_preset(config)
    build_benchmark(config, seed=0)
    assert len(calls) == 2
    build_strategy("semi-er", RunConfig.of(config.as_dict()))  # a dictionary: checked once
    assert len(calls) == 3


def test_the_naming_functions_take_a_config_and_refuse_a_dictionary_naming_the_fix():
    """A run is named and identified from its checked config; a dictionary of settings is
    refused at once, with the way to make a config of it."""
    config = resolve_preset("cpu", n_shot=5, mem_size=50, precision="fp32", domains=["a", "b"])
    over = {"strategy_overrides": {"lam": 1e-4}, "eval_stream": "valid"}
    assert run_dir_name("order", RunConfig.of(config.as_dict()), 0, **over) == run_dir_name(
        "order", config, 0, **over
    )
    for name, call in {
        "run_dir_name": lambda p: run_dir_name("order", p, 0, **over),
        "run_identity": lambda p: run_identity("order", p, **over),
        "portable_preset": portable_preset,
    }.items():
        with pytest.raises(
            TypeError, match=rf"{name} takes a RunConfig, got dict; fix: .*RunConfig\.of"
        ):
            call(config.as_dict())
    assert type(portable_preset(config)) is dict


def test_a_data_folder_for_a_preset_that_generates_its_data_is_refused_naming_the_fix(tmp_path):
    """In Python as on the command line, a ``root`` no source would read is refused, not
    ignored (the command line reads it as ``source=packs``; Python is told to say so)."""
    (tmp_path / "shapes.npz").write_bytes(b"")  # a folder of packs: still not read by synthetic
    assert PRESETS["quick"]["source"] == "synthetic"
    refused = (
        rf"root={re.escape(repr(str(tmp_path)))} is set, but source 'synthetic' reads no data folder .*the folder "
        r"would be ignored; fix: .*source=packs.*source=paper.*drop"
    )
    with pytest.raises(ValueError, match=refused):
        resolve_preset("quick", root=str(tmp_path))
    settings = resolve_preset("quick").as_dict()
    with pytest.raises(ValueError, match=refused):
        RunConfig.of({**settings, "root": str(tmp_path)})
    # the fix: a source that reads the folder
    assert resolve_preset("quick", root=str(tmp_path), source="packs").root == str(tmp_path)
