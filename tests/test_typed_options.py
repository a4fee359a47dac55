"""Strategy options are typed by the signature that takes them, and checked — name and type —
at the command line before any data loads: built-in methods, ORDER variants, a baseline's model
options and a method class of one's own alike; ``use_ot=false`` is ``False``, never a truthy string."""

from __future__ import annotations

import json
import re
import textwrap
import typing

import pytest

from avalanche_sets import cli
from avalanche_sets.functional.ood import OOD_RULES
from avalanche_sets.functional.ot import OT_SOLVERS
from avalanche_sets.methods import (
    MethodOptionError,
    build_strategy,
    method_options,
    parse_options,
    typed_options,
)
from avalanche_sets.methods.options import BOOL_SPELLINGS, RUN_ARGUMENTS, OptionSpec
from avalanche_sets.presets import resolve_preset
from avalanche_sets.runs import experiment
from avalanche_sets.runs.folder import run_folder

TINY = [
    "--set", "tasks_per_domain=2", "--set", "n_test_episodes=2", "--set", "n_query=2",
    "--set", "n_unlabeled=2", "--set", "n_ood=4", "--set", "width=4", "--set", "eval_mb_size=2",
    "--set", "domains=['shapes','strokes']", "--set", "threads=1",
    "--set", "interim_test_episodes=2",
]  # fmt: skip

FACTORY = """
from avalanche_sets import OrderStrategy
from avalanche_sets.baselines import ProtoNet


class OrderPlus(OrderStrategy):
    name = "order-plus"
    summary = "ORDER with two options of its own"

    def __init__(self, *, gamma: float = 0.5, mode: str = "soft", **kwargs):
        super().__init__(**kwargs)
        self.gamma, self.mode = gamma, mode


class Own(ProtoNet):
    name = "own"
    summary = "ProtoNet with two options of its own"

    def __init__(self, *, steps: int = 1, keep: bool = True, **kwargs):
        super().__init__(**kwargs)
        self.steps, self.keep = steps, keep


def build(preset, *, seed, evaluator, plugins):
    return None
"""


@pytest.fixture
def factory(tmp_path, monkeypatch) -> str:
    """A module of one's own in the current folder (a fresh name per test)."""
    name = f"typed_{abs(hash(str(tmp_path))) % 10**8}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(FACTORY))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


@pytest.fixture
def no_data(monkeypatch):
    """Loading any data fails the test: an option error must come first."""

    def refuse(*args, **kwargs):
        raise AssertionError("data was loaded before the option was checked")

    monkeypatch.setattr(experiment, "build_benchmark", refuse)


def _cli_error(capsys, *argv: str) -> str:
    assert cli.main(list(argv)) == 2
    return capsys.readouterr().err


# ------------------------------------------------------------------ one home: the signature
def test_an_options_type_and_default_come_from_the_signature_that_takes_it():
    order, _ = method_options("order")
    assert (order["use_ot"].type, order["use_ot"].default) == (bool, True)
    assert order["beta"].type is float and order["mem_size"].type is int
    assert typing.get_args(order["ot_solver"].type) == OT_SOLVERS  # one home: the signature
    lst, _ = method_options("lst")  # a model option, typed by the model class
    assert lst["n_stages"].type is int and lst["first_order"].type is bool
    gpm, _ = method_options("semi-gpm")  # the nearest class's declaration wins
    assert gpm["lr"].default == pytest.approx(0.01)


@pytest.mark.parametrize("text", sorted({*BOOL_SPELLINGS, "FALSE", "True", "No", "YES"}))
def test_every_bool_spelling_reads_as_its_bool(text):
    expected = BOOL_SPELLINGS[text.lower()]
    assert parse_options("order", {"use_ot": text}) == {"use_ot": expected}


def test_command_line_text_is_typed_by_the_option():
    got = parse_options(
        "order",
        {"use_ot": "false", "beta": "0", "lr": "1e-3", "mi_terms": "id", "ot_max_points": "none",
         "ood_n_id": "3", "ot_solver": "sinkhorn"},
    )  # fmt: skip
    assert got == {
        "use_ot": False, "beta": 0.0, "lr": 1e-3, "mi_terms": ("id",), "ot_max_points": None,
        "ood_n_id": 3, "ot_solver": "sinkhorn",
    }  # fmt: skip
    assert type(got["beta"]) is float and type(got["ood_n_id"]) is int
    assert parse_options("lst", {"swn_hidden": "32,4"}) == {"swn_hidden": (32, 4)}


# ------------------------------------------------------- refused before any data loads (CLI)
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        # bool
        (["--strategy-set", "use_ot=maybe"],
         r"option 'use_ot' takes a bool, got 'maybe'; fix: use_ot=true or use_ot=false"),
        # float
        (["--strategy-set", "lr=1e-3x"], r"option 'lr' takes a float, got '1e-3x'"),
        (["--method", "semi-mer", "--strategy-set", "across_batch_rate=high"],
         r"method 'semi-mer': option 'across_batch_rate' takes a float, got 'high'.*its "
         r"options: \[.*"
         r"within_batch_rate: float = 1\.0"),
        # int (an option of the strategy, and one of a baseline's model)
        (["--method", "semi-gpm", "--strategy-set", "n_episodes=ten"],
         r"option 'n_episodes' takes an int, got 'ten'"),
        (["--method", "lst", "--strategy-set", "n_stages=2.5"],
         r"option 'n_stages' takes an int, got '2\.5'"),
        # int | None
        (["--strategy-set", "ot_max_points=lots"],
         r"option 'ot_max_points' takes a value of type int \| None, got 'lots'"),
        # str: a name one letter off
        (["--strategy-set", "ot_solvr=exact"],
         r"does not accept option\(s\) \['ot_solvr'\] \(did you mean 'ot_solver'\?\); fix: use "
         r"its valid options \[.*ot_solver: one of 'exact', 'sinkhorn', 'cvxpylayers' = 'exact'"),
        # an object: not from the command line
        (["--strategy-set", "model=resnet"],
         r"'model' is an argument the run sets, not a strategy option"),
        (["--strategy-set", "device=cuda"],
         r"'device' is an argument the run sets, not a strategy option: a preset setting: "
         r"--set device=\.\.\.; fix: drop --strategy-set device="),
    ],
)  # fmt: skip
def test_a_wrong_option_is_refused_before_any_data_loads(no_data, capsys, tmp_path, argv, message):
    # a data folder that does not exist would fail too, later: the option error comes first
    err = _cli_error(
        capsys, "run", *TINY, "--source", "packs", "--root", str(tmp_path / "nowhere"), *argv,
        "--out", str(tmp_path / "runs"),
    )  # fmt: skip
    assert __import__("re").search(message, err), err
    assert not (tmp_path / "runs").exists()


def test_a_method_classs_annotated_options_are_typed_before_any_data_loads(
    factory, no_data, capsys, tmp_path
):
    method = f"{factory}:OrderPlus"
    base = ["run", *TINY, "--method", method, "--out", str(tmp_path / "runs")]
    err = _cli_error(capsys, *base, "--strategy-set", "gamma=high")
    assert f"method '{method}': option 'gamma' takes a float, got 'high'" in err
    # a typo: the class's own options and those it inherits from ORDER
    err = _cli_error(capsys, *base, "--strategy-set", "gama=0.5")
    assert "does not accept option(s) ['gama'] (did you mean 'gamma'?)" in err
    assert "gamma: float = 0.5" in err and "mode: str = 'soft'" in err
    # what goes on to ORDER is typed as ORDER's
    err = _cli_error(capsys, *base, "--strategy-set", "use_ot=nah")
    assert "option 'use_ot' takes a bool, got 'nah'" in err
    own = f"{factory}:Own"
    assert parse_options(own, {"steps": "3", "keep": "no"}) == {"steps": 3, "keep": False}
    with pytest.raises(MethodOptionError, match=r"option 'steps' takes an int, got '3\.5'"):
        parse_options(own, {"steps": "3.5"})
    with pytest.raises(MethodOptionError, match=r"\['stpes'\] \(did you mean 'steps'\?\)"):
        parse_options(own, {"stpes": "3"})


def test_a_function_is_no_method_and_is_refused_with_the_fix(factory):
    with pytest.raises(ValueError, match=r"is a function, not a method class; fix: subclass"):
        method_options(f"{factory}:build")


# -------------------------------------------------------------------- Python values, typed too
@pytest.mark.parametrize(
    ("method", "options", "message"),
    [
        ("order", {"use_ot": "false"}, r"option 'use_ot' takes a bool, got 'false' \(str\)"),
        ("order", {"beta": "0.1"}, r"option 'beta' takes a float, got '0\.1' \(str\)"),
        (
            "semi-gpm",
            {"other_params": 1},
            r"option 'other_params' takes one of 'freeze', 'train', got 1 \(int\)",
        ),
        ("lst", {"n_stages": 2.0}, r"option 'n_stages' takes an int, got 2\.0 \(float\)"),
    ],
)
def test_python_values_of_another_type_are_refused(method, options, message):
    preset = resolve_preset("quick")
    with pytest.raises(MethodOptionError, match=message):
        build_strategy(method, preset, **options)


def test_python_values_are_kept_as_the_option_keeps_them():
    assert typed_options("order", {"beta": 0, "mi_terms": ["id"]}) == {
        "beta": 0.0,
        "mi_terms": ("id",),
    }
    assert type(typed_options("order", {"beta": 0})["beta"]) is float


# ------------------------------------------------------------------ use_ot=false: no OT at all
def test_use_ot_false_builds_order_without_ot(monkeypatch):
    from avalanche_sets.order import ot_loss

    calls = []
    monkeypatch.setattr(ot_loss.OTFeatureLossPlugin, "__init__", lambda *a, **k: calls.append(1))
    preset = resolve_preset("quick", width=4)
    options = parse_options("order", {"use_ot": "false"})
    strategy = build_strategy("order", preset, **options)
    assert strategy.ot is None and not calls
    assert not any(type(p).__name__ == "OTFeatureLossPlugin" for p in strategy.plugins)


def test_use_ot_false_runs_without_ot_in_one_folder_with_use_ot_False(tmp_path, monkeypatch):
    from avalanche_sets.order import ot_loss

    def no_ot(*args, **kwargs):
        raise AssertionError("the OT loss was computed")

    monkeypatch.setattr(ot_loss.OTFeatureLossPlugin, "loss_term", no_ot)
    out = tmp_path / "runs"
    argv = ["run", *TINY, "--out", str(out), "--loggers"]
    assert cli.main([*argv, "--strategy-set", "use_ot=false"]) == 0
    (record,) = out.rglob("result.json")
    assert "-use_otFalse" in record.parent.name  # the typed value names the folder
    assert json.loads(record.read_text())["strategy_overrides"] == {"use_ot": False}
    # the same run, spelled another way: found finished, not run again
    assert cli.main([*argv, "--strategy-set", "use_ot=False"]) == 0
    assert len(list(out.rglob("result.json"))) == 1


def test_one_typed_value_is_one_folder():
    preset = resolve_preset("quick")
    folders = {
        run_folder("runs", "order", preset, 0, strategy_overrides=parse_options("order", t))
        for t in ({"use_ot": "false"}, {"use_ot": "False"}, {"use_ot": "no"}, {"use_ot": "0"})
    }
    assert len(folders) == 1
    a = run_folder(
        "runs", "order", preset, 0, strategy_overrides=parse_options("order", {"beta": "1"})
    )
    b = run_folder(
        "runs", "order", preset, 0, strategy_overrides=typed_options("order", {"beta": 1.0})
    )
    assert a == b


# ----------------------------------------------------------------- given twice; one method only
@pytest.mark.parametrize("command", ["run", "sweep"])
@pytest.mark.parametrize(
    "sets",
    [
        ["beta=0.1", "beta=0.2"],
        ["beta=0.1", "beta=0.1"],  # even the same value: one of them is a slip
        ["order:beta=0.1", "beta=0.2"],
        ["order:beta=0.1", "order:beta=0.2"],
    ],
)
def test_an_option_given_twice_is_refused(no_data, capsys, tmp_path, command, sets):
    method = ["--method", "order"] if command == "run" else ["--methods", "order"]
    flags = [x for s in sets for x in ("--strategy-set", s)]
    err = _cli_error(capsys, command, *TINY, *method, *flags, "--out", str(tmp_path / "runs"))
    assert "--strategy-set gives option 'beta' of method 'order' twice" in err
    assert "fix: give it once" in err


def _sweep_specs(monkeypatch, argv: list[str]) -> list:
    from avalanche_sets.runs import sweep

    seen = []

    def capture(specs, **kwargs):
        seen.extend(specs)
        return []

    monkeypatch.setattr(sweep, "run_sweep", capture)
    assert cli.main(["sweep", *TINY, *argv]) == 0
    return seen


def test_a_sweep_gives_a_method_its_own_options(monkeypatch, tmp_path):
    specs = _sweep_specs(
        monkeypatch,
        ["--methods", "order", "semi-der", "--seeds", "0", "--out", str(tmp_path),
         "--strategy-set", "order:beta=0.1", "--strategy-set", "semi-der:label_weight=0.5",
         "--strategy-set", "lr=2e-3", "--strategy-set", "order:ot_unlabeled=no"],
    )  # fmt: skip
    got = {s.method: s.strategy_overrides for s in specs}
    assert got == {
        "order": {"beta": 0.1, "lr": 2e-3, "ot_unlabeled": False},
        "semi-der": {"label_weight": 0.5, "lr": 2e-3},
    }


def test_a_sweep_refuses_an_option_for_every_method_that_one_lacks(capsys, tmp_path):
    err = _cli_error(
        capsys, "sweep", *TINY, "--methods", "order", "mskm", "--strategy-set", "lam=0.1",
        "--out", str(tmp_path),
    )  # fmt: skip
    assert (
        "--strategy-set lam=0.1 goes to every method, but ['mskm'] take(s) no option 'lam'" in err
    )
    assert "fix: give it to the method(s) that take it: --strategy-set order:lam=0.1" in err
    err = _cli_error(
        capsys, "sweep", *TINY, "--methods", "order", "mskm", "--strategy-set", "ordr:lam=0.1",
        "--out", str(tmp_path),
    )  # fmt: skip
    assert "method 'ordr' is not run by this command (did you mean 'order'?)" in err


def test_option_spec_describes_itself():
    assert OptionSpec("beta", float, 0.003).describe() == "beta: float = 0.003"
    assert OptionSpec("n", int | None, None).describe() == "n: int | None = None"


# ------------------------------------------------- fixed sets of values, and the option lists
@pytest.mark.parametrize(
    "method, option, values",
    [("order", "ot_solver", OT_SOLVERS), ("order", "ood_rule", OOD_RULES),
     ("tpn", "sigma_mode", ("exp", "raw")), ("semi-gpm", "other_params", ("freeze", "train"))],
)  # fmt: skip
def test_an_option_of_fixed_values_takes_only_those(method, option, values):
    spec = method_options(method)[0][option]
    assert typing.get_args(spec.type) == values  # the constructor's own check agrees
    wrong = values[0] + values[0][-1]  # 'exactt'
    pattern = rf"option '{option}' takes one of .*got '{wrong}'( \(str\))? \(did you mean '{values[0]}'\?\)"
    with pytest.raises(MethodOptionError, match=pattern):
        parse_options(method, {option: wrong})
    with pytest.raises(MethodOptionError, match=pattern):
        typed_options(method, {option: wrong})  # Python: the same check, the same hint
    assert parse_options(method, {option: values[-1]}) == {option: values[-1]}


def test_a_fixed_value_option_is_refused_before_the_stream_is_printed(capsys, tmp_path):
    runs = tmp_path / "runs"
    argv = ["run", *TINY, "--strategy-set", "ot_solver=exactt", "--out", str(runs)]
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and not runs.exists()  # no stream described, no episode picture
    assert "option 'ot_solver' takes one of 'exact', 'sinkhorn', 'cvxpylayers', got " in err
    assert "'exactt' (did you mean 'exact'?)" in err


@pytest.mark.parametrize("method", ["order", "tpn", "semi-gpm", "semi-er", "anil"])
def test_every_option_list_names_the_same_options_a_user_may_set(method, capsys, tmp_path):
    options, _ = method_options(method)
    number = next(k for k, o in sorted(options.items()) if o.type in (int, float))
    lists = []
    for item in ("no_such_option=1", f"{number}=many"):
        err = _cli_error(capsys, "run", *TINY, "--method", method, "--strategy-set", item,
                         "--out", str(tmp_path / "runs"))  # fmt: skip
        lists.append(re.search(r"options:? (\[.*\])$", err.strip()).group(1))
    assert lists[0] == lists[1], lists  # one list, the same in every message
    shown = re.findall(r"(?:\[|, )(\w+): ", lists[0])
    assert shown and not set(shown) & set(RUN_ARGUMENTS), shown
    assert set(shown) == {k for k, o in options.items() if o.from_text} - set(RUN_ARGUMENTS)
