"""A run's typed identity (:class:`avalanche_sets.runs.run.Run`): made once from a checked
config, it refuses anything else early, and resolves the run's precision once for everything
that names, identifies and records the run."""

from __future__ import annotations

import pytest

from avalanche_sets.models import backbone
from avalanche_sets.presets import resolve_preset
from avalanche_sets.runs.folder import run_dir_name, run_identity
from avalanche_sets.runs.run import Run


def test_a_dictionary_of_settings_is_refused_naming_the_fix():
    settings = resolve_preset("quick").as_dict()
    with pytest.raises(
        TypeError, match=r"^Run\(config=...\) takes a RunConfig, got dict; fix: .*RunConfig\.of"
    ):
        Run(method="protonet", config=settings, seed=0)
    with pytest.raises(TypeError, match="positional argument"):
        Run("protonet", resolve_preset("quick"), 0)  # keyword-only: no silent argument swap


def test_the_precision_is_resolved_once_for_the_name_identity_and_record(monkeypatch):
    calls = []

    def counted(precision, device_type="cpu"):
        calls.append((precision, device_type))
        return "bf16"  # as a machine that runs bf16 natively resolves "auto"

    monkeypatch.setattr(backbone, "resolve_precision", counted)
    config = resolve_preset("quick", precision="auto")
    run = Run.of("protonet", config, seed=3, strategy_overrides={"lr": config.lr})
    assert calls == [("auto", "cpu")]
    assert run.precision == "bf16" and run.name.endswith("-seed3-bf16")
    assert run.settings["precision"] == run.wandb_config["precision"] == "bf16"
    assert run.identity["preset"]["precision"] == "bf16"
    assert "seeds" not in run.settings and list(run.settings) == [
        k for k in config.as_dict() if k != "seeds"
    ]  # the record's settings in the config's order
    assert run.strategy_options == {}  # an explicit default is no option
    assert run.folder("runs").as_posix() == f"runs/{run.name}"
    assert len(calls) == 1  # everything above read the one resolution
    # the same name and identity as the functions that resolve it themselves
    assert run.name == run_dir_name("protonet", config, 3, unread=run.unread)
    assert run.identity == run_identity("protonet", config, **run.apart, data=None)


def test_a_tag_is_checked_and_names_the_folder():
    config = resolve_preset("quick", precision="fp32")
    assert Run.of("protonet", config, seed=0, tag="v2").name.endswith("-seed0-tag_v2")
    with pytest.raises(ValueError, match="tag 'a b' is not a name"):
        Run.of("protonet", config, seed=0, tag="a b")


def test_a_part_of_order_is_no_option_of_a_run():
    """A part of ORDER handed to a run as an option would be named by its repr: refused, from
    Python and from the command line, with the fix (a method class that passes it)."""
    from avalanche_sets.cli import main
    from avalanche_sets.order import PrototypeDistanceDetector

    with pytest.raises(ValueError, match=r"\['ood_detector'\] given as options .* fix: a method"):
        Run.of(
            "order", resolve_preset("quick"), seed=0,
            strategy_overrides={"ood_detector": PrototypeDistanceDetector()},
        )  # fmt: skip
    assert main(["run", "--method", "order", "--strategy-set", "transport=1"]) == 2
