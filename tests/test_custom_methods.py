"""Methods of one's own (a method class named ``package.module:Class`` or by an entry point)
and extra plugins: found, checked before any data is loaded, built as a built-in method is,
and given what a built-in method gets — their own run folder, a checkpoint to resume from, an
identity. A function (a factory) is refused, naming the fix."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from avalanche_sets.methods import (
    MethodOptionError,
    build_strategy,
    check_method,
    installed_methods,
    method_names,
)
from avalanche_sets.presets import resolve_preset
from avalanche_sets.runs.experiment import run_experiment
from avalanche_sets.runs.folder import RunConflictError
from avalanche_sets.training.template import EpisodicPlugin

TINY = dict(
    tasks_per_domain=4, n_test_episodes=2, n_query=2, n_unlabeled=2, n_ood=4, width=4,
    domains=["shapes", "strokes"], eval_mb_size=2, threads=1,
)  # fmt: skip

MODULE = '''
from avalanche_sets.baselines import ProtoNet
from avalanche_sets.training.template import EpisodicPlugin

CRASH = {"at": None}


class Crash(EpisodicPlugin):
    """Stops the run at training iteration CRASH["at"] (a killed process, in a test)."""

    def __init__(self):
        super().__init__()
        self.seen = 0

    def after_training_iteration(self, strategy, **kwargs):
        self.seen += 1
        if self.seen == CRASH["at"]:
            raise KeyboardInterrupt("killed")


class Good(ProtoNet):
    name = "protonet-plus"
    summary = "ProtoNet that a test can stop"

    def __init__(self, *, plugins=None, **kwargs):
        super().__init__(plugins=[Crash(), *(plugins or [])], **kwargs)


class Strict(ProtoNet):
    name = "strict"
    summary = "ProtoNet with an option of its own"

    def __init__(self, *, scale: float = 1.0, **kwargs):
        super().__init__(**kwargs)
        self.scale = scale


class Nameless(ProtoNet):
    summary = "ProtoNet under another class name"


def good(preset, *, seed, evaluator, plugins, **options):
    return None


NOT_CALLABLE = 3
'''


@pytest.fixture
def module(tmp_path, monkeypatch) -> str:
    """A module of one's own, ``mine_<n>.py`` in the current folder (a fresh name per test)."""
    name = f"mine_{abs(hash(str(tmp_path))) % 10**8}"
    (tmp_path / f"{name}.py").write_text(MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


@pytest.fixture
def preset() -> dict:
    return resolve_preset("quick", **TINY)


def test_a_class_in_the_current_folder_builds_the_method_with_the_plugins_handed_to_it(
    module, preset
):
    extra = EpisodicPlugin()
    strategy = build_strategy(f"{module}:Good", preset, seed=0, plugins=[extra])
    names = [type(p).__name__ for p in strategy.plugins]
    assert names.index("Crash") < names.index("EpisodicPlugin")  # its own first, then ours
    # the seed reaches it: the model is the built-in method's of the same seed
    same = build_strategy("protonet", preset, seed=0)
    assert all(
        torch.equal(a, b) for a, b in zip(strategy.model.parameters(), same.model.parameters())
    )


@pytest.mark.parametrize(
    ("spec", "error", "message"),
    [
        ("nowhere_at_all:Mine", ValueError, r"no module 'nowhere_at_all' on the Python path"),
        ("{m}:missing", ValueError, r"has no attribute 'missing'; it defines \[.*'Good'"),
        ("{m}:NOT_CALLABLE", ValueError, r"is a int, not a method class; fix: subclass"),
        ("{m}:good", ValueError, r"is a function, not a method class; fix: subclass a built-in"),
        ("{m}:Nameless", ValueError, r"does not name itself .*'protonet'.*; fix: set name"),
        ("ordr", ValueError, r"unknown method 'ordr' \(did you mean 'order'\?\)"),
    ],
)
def test_a_method_that_cannot_be_found_or_is_no_method_class_is_refused_before_any_data(
    module, preset, spec, error, message
):
    with pytest.raises(error, match=message):
        check_method(spec.format(m=module), preset)


def test_options_are_checked_against_the_class_signature(module, preset):
    check_method(f"{module}:Strict", preset, {"scale": 2.0})
    with pytest.raises(MethodOptionError, match=r"does not accept option\(s\) \['scael'\]"):
        check_method(f"{module}:Strict", preset, {"scael": 2.0})
    assert build_strategy(f"{module}:Strict", preset, scale=2.0).scale == 2.0


def _install(tmp_path: Path, monkeypatch, entry: str) -> None:
    """A package installed on the path: a module and a dist-info with an entry point."""
    pkg = tmp_path / "site"
    (pkg / "my_methods_pkg").mkdir(parents=True)
    (pkg / "my_methods_pkg" / "__init__.py").write_text(MODULE)
    info = pkg / "my_methods_pkg-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-methods-pkg\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        textwrap.dedent(f"""\
        [avalanche_sets.methods]
        {entry} = my_methods_pkg:Good
        """)
    )
    monkeypatch.syspath_prepend(str(pkg))


def test_an_installed_entry_point_is_a_method_by_its_name(tmp_path, monkeypatch, preset):
    _install(tmp_path, monkeypatch, "protonet-plus")
    assert installed_methods()["protonet-plus"] == "my_methods_pkg:Good"
    assert "protonet-plus" in method_names()
    strategy = build_strategy("protonet-plus", preset, seed=0)
    assert "Crash" in [type(p).__name__ for p in strategy.plugins]


def test_an_installed_method_may_not_take_a_built_in_name(tmp_path, monkeypatch, preset):
    _install(tmp_path, monkeypatch, "order")
    with pytest.raises(ValueError, match=r"registers a method named 'order'.*rename"):
        check_method("order", preset)


def test_an_entry_point_is_named_as_its_class(tmp_path, monkeypatch, preset):
    _install(tmp_path, monkeypatch, "protonet-pls")
    with pytest.raises(ValueError, match=r"is named 'protonet-plus'; fix: .*the entry point"):
        check_method("protonet-pls", preset)


def test_a_method_of_ones_own_gets_a_run_folder_and_resumes_identically(module, preset, tmp_path):
    import importlib

    mine = importlib.import_module(module)
    spec = f"{module}:Good"
    whole = run_experiment(spec, preset, seed=0, out_root=tmp_path / "a", loggers=())
    folder = next((tmp_path / "a").glob("*/*/result.json")).parent
    assert folder.parent.name == f"{module}.Good" and whole.method == spec
    # killed after iteration 3 of 4 (a checkpoint every iteration), then run again: resumed
    mine.CRASH["at"] = 3
    with pytest.raises(KeyboardInterrupt):
        run_experiment(spec, preset, seed=0, out_root=tmp_path / "b", loggers=(),
                       checkpoint_every=1)  # fmt: skip
    mine.CRASH["at"] = None
    again = run_experiment(spec, preset, seed=0, out_root=tmp_path / "b", loggers=(),
                           checkpoint_every=1)  # fmt: skip
    assert again.status == "ran" and len(again.provenance.resumes) == 1
    assert again.result == whole.result


def test_extra_plugins_are_part_of_a_runs_identity_and_folder(preset, tmp_path):
    class Spread(EpisodicPlugin):
        def __init__(self, weight: float) -> None:
            super().__init__()
            self.weight = weight

    plain = run_experiment("protonet", preset, seed=0, out_root=tmp_path, loggers=())
    extra = run_experiment("protonet", preset, seed=0, out_root=tmp_path, loggers=(),
                           plugins=[Spread(0.1)])  # fmt: skip
    assert plain.plugins == () and extra.plugins == ("Spread(weight=0.1)",)
    assert extra.status == "ran"  # not the plain run's result, found finished
    assert (tmp_path / "protonet+Spread").is_dir() and (tmp_path / "protonet").is_dir()
    with pytest.raises(RunConflictError, match=r"plugins: \['Spread\(weight=0.1\)'\] there"):
        run_experiment("protonet", preset, seed=0, out_root=tmp_path, loggers=(),
                       plugins=[Spread(0.2)])  # fmt: skip
