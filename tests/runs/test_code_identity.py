"""A run is its code (issue 42): the user's own code and the library's files are fingerprinted,
a finished run or a checkpoint made by other code is never reused, and ``table`` keeps runs of
different code on different rows."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from avalanche_sets.presets import resolve_preset
from avalanche_sets.runs import code, experiment, protocols
from avalanche_sets.runs.experiment import run_experiment
from avalanche_sets.runs.folder import RunConflictError, record_identity, run_identity
from avalanche_sets.runs.record import RunRecord, read_record
from avalanche_sets.runs.report import aggregate_results, find_results, write_table
from avalanche_sets.training.template import EpisodicPlugin

TINY = dict(
    tasks_per_domain=4, n_test_episodes=2, n_query=2, n_unlabeled=2, n_ood=4, width=4,
    domains=["shapes", "strokes"], eval_mb_size=2, threads=1, interim_test_episodes=2,
)  # fmt: skip
REPO = Path(__file__).resolve().parents[2]

METHOD = '''
from avalanche_sets.baselines import ProtoNet
from avalanche_sets.training.template import EpisodicPlugin

STEPS = {"crash_at": None}
SCALE = 1


class Crash(EpisodicPlugin):
    """Stops the run at training iteration STEPS["crash_at"] (a killed process, in a test)."""

    def __init__(self):
        super().__init__()
        self.seen = 0

    def after_training_iteration(self, strategy, **kwargs):
        self.seen += 1
        if self.seen == STEPS["crash_at"]:
            raise KeyboardInterrupt("killed")


class Nudge(EpisodicPlugin):
    """A plugin of one's own (added to a built-in method)."""

    def __init__(self, weight=0.5):
        super().__init__()
        self.weight = weight


class Build(ProtoNet):
    name = "crashing-protonet"
    summary = "ProtoNet, stopped where a test says"

    def __init__(self, *, plugins=None, **kwargs):
        super().__init__(plugins=[Crash(), *(plugins or [])], **kwargs)
'''


@pytest.fixture
def mine(tmp_path, monkeypatch) -> str:
    """A method module of one's own in the current folder, ``mine_<n>.py`` (a fresh name per
    test); no bytecode is written, so an edited file is what the next import reads."""
    name = f"mine_{abs(hash(str(tmp_path))) % 10**8}"
    (tmp_path / f"{name}.py").write_text(METHOD)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setenv("AVALANCHE_SETS_CACHE", str(tmp_path / "cache"))
    yield name
    sys.modules.pop(name, None)


def _edit(path: Path, old: str, new: str) -> None:
    """Change one constant of a module, as a researcher does between two runs (a new process
    imports the new file: the module is imported again)."""
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    sys.modules.pop(path.stem, None)
    importlib.invalidate_caches()


@pytest.fixture
def preset():
    return resolve_preset("quick", **TINY)


# ------------------------------------------------------------------ what is fingerprinted
def test_the_package_fingerprint_is_every_file_of_the_package_and_nothing_else(tmp_path):
    pkg = tmp_path / "avalanche_sets"
    shutil.copytree(REPO / "avalanche_sets", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    before = code.tree_fingerprint(pkg)
    assert before == code.package_fingerprint()  # this process's package: the same files
    (pkg / "runs" / "__pycache__").mkdir()
    (pkg / "runs" / "__pycache__" / "code.cpython-311.pyc").write_bytes(b"\0")
    # the temporary file Python writes bytecode to before renaming it
    (pkg / "runs" / "__pycache__" / "code.cpython-311.pyc.140234").write_bytes(b"\0")
    (pkg / "presets.cpython-311.pyc").write_bytes(b"\0")
    assert code.tree_fingerprint(pkg) == before  # bytecode Python writes: not the code
    notes = pkg / "data" / "notes.txt"
    notes.write_text("a file of the package\n")
    assert code.tree_fingerprint(pkg) != before  # every file counts, not only .py
    notes.unlink()
    (pkg / "defaults.py").rename(pkg / "defaults2.py")
    assert code.tree_fingerprint(pkg) != before  # a path is part of the content


def test_a_run_writes_nothing_into_the_package(tmp_path, preset, monkeypatch):
    """Its hash is taken once per process: a file written into the package while it runs would
    make the record lie (bytecode aside)."""
    monkeypatch.setenv("AVALANCHE_SETS_CACHE", str(tmp_path / "cache"))
    before = code.tree_fingerprint(REPO / "avalanche_sets")
    run_experiment("protonet", preset, seed=0, out_root=tmp_path, loggers=("csv",))
    assert code.tree_fingerprint(REPO / "avalanche_sets") == before


def test_user_code_hashes_the_whole_package_a_method_class_lives_in(tmp_path, monkeypatch):
    pkg = tmp_path / "my_lab"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "methods.py").write_text(
        "from avalanche_sets.baselines import ProtoNet\n\nfrom .helpers import SCALE\n\n\n"
        "class Build(ProtoNet):\n    name = 'lab'\n    summary = 'ProtoNet'\n    scale = SCALE\n"
    )
    (pkg / "helpers.py").write_text("SCALE = 1\n")
    (pkg / "README.md").write_text("not code\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    try:
        first = code.user_code("my_lab.methods:Build")
        assert list(first) == ["my_lab"] and len(first["my_lab"]) == 64
        assert first["my_lab"] == code.tree_fingerprint(pkg, python_only=True)
        (pkg / "README.md").write_text("still not code\n")
        assert code.user_code("my_lab.methods:Build") == first
        (pkg / "helpers.py").write_text("SCALE = 2\n")  # a helper the class imports
        assert code.user_code("my_lab.methods:Build") != first
    finally:
        for name in ("my_lab", "my_lab.methods", "my_lab.helpers"):
            sys.modules.pop(name, None)


def test_built_in_code_has_no_user_code_and_a_plugin_of_ones_own_has(mine):
    from avalanche_sets.order.ood_split import OODSplitPlugin

    module = importlib.import_module(mine)
    assert code.user_code("order") == {}
    assert (
        code.user_code("order", [OODSplitPlugin.__new__(OODSplitPlugin)]) == {}
    )  # the package's own plugin
    own = code.source_fingerprint(mine)
    assert own == (mine, code.tree_fingerprint(Path.cwd(), python_only=True))
    assert code.user_code("order", [module.Nudge()]) == dict([own])
    assert code.user_code(f"{mine}:Build") == dict([own])
    # the identity has the key only when there is user code: built-in runs keep theirs
    preset = resolve_preset("quick", **TINY)
    plain = run_identity("order", preset, data=None)
    assert "user_code" not in plain and "tag" not in plain
    assert run_identity("order", preset, data=None, user_code={}, tag="") == plain


def test_a_class_of_the_running_script_hashes_the_script(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        textwrap.dedent("""\
        import json
        from avalanche_sets.runs.code import user_code
        from avalanche_sets.training.template import EpisodicPlugin

        class Mine(EpisodicPlugin):
            pass

        print(json.dumps(user_code("order", [Mine()])))
        """)
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, check=True
    )
    assert json.loads(out.stdout) == {"__main__": code.tree_fingerprint(tmp_path, python_only=True)}


def test_code_without_a_source_file_is_recorded_as_such_with_a_warning():
    cls = type("Typed", (EpisodicPlugin,), {"__module__": "__main__"})
    main = sys.modules["__main__"]
    saved = main.__dict__.pop("__file__", None), main.__spec__
    main.__spec__ = None
    try:
        with pytest.warns(UserWarning, match=r"no source file to fingerprint.*\.py file"):
            got = code.user_code("order", [cls()])
    finally:
        if saved[0] is not None:
            main.__file__ = saved[0]
        main.__spec__ = saved[1]
    assert got == {"__main__": code.NO_SOURCE}


# ------------------------------------------------------------------ changed code, old runs
def _table(*folders) -> str:
    return write_table(aggregate_results(find_results(folders)))


def test_an_edited_method_module_is_not_finished_before_and_runs_beside_the_old_one(
    mine, tmp_path, capsys
):
    """The command line: run a method of one's own, edit one constant, run the same command."""
    from avalanche_sets.cli import main

    command = ["run", "--method", f"{mine}:Build", "--preset", "quick", "--seeds", "0",
               "--out", str(tmp_path / "runs"), *[f"--set={k}={v}" for k, v in TINY.items()]]  # fmt: skip
    assert main(command) == 0
    first = find_results([tmp_path / "runs"])
    assert len(first) == 1 and list(first[0].user_code) == [mine]
    assert main(command) == 0 and "finished before" in capsys.readouterr().out  # same code
    _edit(tmp_path / f"{mine}.py", "SCALE = 1\n", "SCALE = 10\n")
    assert main(command) == 2
    out, err = capsys.readouterr()
    assert "SETS benchmark" not in out  # refused before the stream is built and described
    old, new = first[0].user_code[mine][:7], code.source_fingerprint(mine)[1][:7]
    assert f"code of {mine}: {old} there, {new} now" in err
    assert "--tag NAME" in err and "another --out" in err and "delete that folder" in err
    assert main([*command, "--tag", "scale10"]) == 0
    records = find_results([tmp_path / "runs"])
    assert len(records) == 2
    codes = {r.tag: r.user_code[mine] for r in records}
    assert codes[""] != codes["scale10"] and codes["scale10"][:7] == new
    assert {r.code["package"] for r in records} == {code.package_fingerprint()}
    # the table: two rows, each with its code's short hash (and its tag)
    rows = aggregate_results(records)
    assert len(rows) == 2
    text = _table(tmp_path / "runs")
    assert old in text and new in text and "scale10" in text
    assert f"user_code.{mine}" in text and codes[""] not in text  # a short hash, as a commit's
    # the code of one's own and the tag say which method a row is: each row pairs with the
    # built-in reference run in the same setting (table --vs)
    run_experiment("protonet", resolve_preset("quick", **TINY), seed=0,
                   out_root=tmp_path / "runs", loggers=())  # fmt: skip
    rows = aggregate_results(find_results([tmp_path / "runs"]), vs="protonet")
    mine_rows = [r for r in rows if r["method"] != "protonet"]
    assert len(mine_rows) == 2 and all(r["delta"] is not None for r in mine_rows)


def test_a_plugin_of_ones_own_is_fingerprinted_and_an_edit_refuses_the_old_run(
    mine, tmp_path, preset
):
    module = importlib.import_module(mine)
    first = run_experiment("protonet", preset, seed=0, out_root=tmp_path / "runs", loggers=(),
                           plugins=[module.Nudge()])  # fmt: skip
    assert first.status == "ran"
    assert first.user_code == {mine: code.source_fingerprint(mine)[1]}
    assert record_identity(first)["user_code"] == first.user_code
    again = run_experiment("protonet", preset, seed=0, out_root=tmp_path / "runs", loggers=(),
                           plugins=[module.Nudge()])  # fmt: skip
    assert again.status == "finished before"
    path = tmp_path / f"{mine}.py"
    path.write_text(path.read_text().replace("weight=0.5", "weight=0.50"))
    with pytest.raises(RunConflictError, match=rf"code of {mine}: {first.user_code[mine][:7]} "
                       r"there, [0-9a-f]{7} now.*--tag NAME"):  # fmt: skip
        run_experiment("protonet", preset, seed=0, out_root=tmp_path / "runs", loggers=(),
                       plugins=[module.Nudge()])  # fmt: skip
    # a built-in run beside it has no user code at all
    plain = run_experiment("protonet", preset, seed=0, out_root=tmp_path / "runs", loggers=())
    assert plain.user_code == {} and "user_code" not in record_identity(plain)


def test_a_record_of_other_library_code_is_refused_and_one_without_the_hash_is_reused(
    tmp_path, preset, monkeypatch
):
    monkeypatch.setenv("AVALANCHE_SETS_CACHE", str(tmp_path / "cache"))
    run_experiment("protonet", preset, seed=0, out_root=tmp_path, loggers=())
    folder = next(tmp_path.rglob("result.json")).parent

    def record_package(package: str | None) -> None:
        for name in ("result.json", "run.json"):  # both name the code
            body = json.loads((folder / name).read_text())
            body["code"].pop("package", None)
            body["code"].update({"package": package} if package else {})
            (folder / name).write_text(json.dumps(body))

    record_package(None)  # made before records held the package's hash: no difference
    again = run_experiment("protonet", preset, seed=0, out_root=tmp_path, loggers=())
    assert again.status == "finished before"
    record_package("3fa2b1c" + "0" * 57)  # made by other files of the library
    now = code.package_fingerprint()[:7]
    with pytest.raises(
        RunConflictError, match=rf"avalanche_sets package: 3fa2b1c.* there, {now}.* now.*--tag"
    ):
        run_experiment("protonet", preset, seed=0, out_root=tmp_path, loggers=())


def test_a_checkpoint_of_other_code_is_not_resumed(mine, tmp_path, preset, monkeypatch):
    module = importlib.import_module(mine)
    spec, out = f"{mine}:Build", tmp_path / "runs"
    module.STEPS["crash_at"] = 3
    with pytest.raises(KeyboardInterrupt):
        run_experiment(spec, preset, seed=0, out_root=out, loggers=(), checkpoint_every=1)
    module.STEPS["crash_at"] = None
    path = tmp_path / f"{mine}.py"
    original = path.read_text()
    path.write_text(original.replace("SCALE = 1\n", "SCALE = 2\n"))
    with pytest.raises(RunConflictError, match=rf"checkpoint .* written by other code \(code of "
                       rf"{mine}: [0-9a-f]{{7}} then, [0-9a-f]{{7}} now\).*delete .*checkpoint\.pt"
                       r".*restore the code"):  # fmt: skip
        run_experiment(spec, preset, seed=0, out_root=out, loggers=(), checkpoint_every=1)
    path.write_text(original)
    real = code.code_info()
    monkeypatch.setattr(experiment, "code_info", lambda: {**real, "package": "f" * 64})
    with pytest.raises(RunConflictError, match=r"\(avalanche_sets package: [0-9a-f]{7} then, "
                       r"fffffff now\)"):  # fmt: skip
        run_experiment(spec, preset, seed=0, out_root=out, loggers=(), checkpoint_every=1)
    monkeypatch.undo()
    resumed = run_experiment(spec, preset, seed=0, out_root=out, loggers=(), checkpoint_every=1)
    assert resumed.status == "ran" and len(resumed.provenance.resumes) == 1  # the same code resumes


# ------------------------------------------------------------------ the table
def _rec(**code_fields) -> RunRecord:
    code = {"version": "0.1.0", "commit": None, "dirty": None, **code_fields}
    return RunRecord(method="protonet", seed=0, preset={}, result={}, code=code)


def test_code_keys_and_labels_use_the_package_hash_where_recorded():
    a, b = _rec(package="3fa2b1c" + "0" * 57), _rec(package="9e8d7c6" + "0" * 57)
    assert protocols.code_key(a) != protocols.code_key(b)  # two no-git installs
    assert protocols.code_label(a) == "0.1.0 (no git, pkg 3fa2b1c)"
    assert protocols.code_key(_rec()) == ("version", "0.1.0")  # no hash, no git: the version
    assert protocols.code_label(_rec()) == "0.1.0 (no git)"
    one, two = (_rec(commit="a" * 40, dirty=True, package=p) for p in ("1" * 64, "2" * 64))
    assert protocols.code_key(one) != protocols.code_key(two)  # one commit, other changes
    assert protocols.code_label(one) == "aaaaaaa+dirty (pkg 1111111)"
    no_hash = _rec(commit="a" * 40, dirty=False)
    assert protocols.code_label(no_hash) == "aaaaaaa"
    assert protocols.code_key(no_hash) == ("a" * 40, False)


INSTALLED = """
import sys
import avalanche_sets
from avalanche_sets.presets import resolve_preset
from avalanche_sets.runs.experiment import run_experiment
from avalanche_sets.runs.folder import RunConflictError

assert avalanche_sets.__file__.startswith(sys.argv[2]), avalanche_sets.__file__
preset = resolve_preset("quick", **{tiny})
try:
    rec = run_experiment("protonet", preset, seed=0, out_root=sys.argv[1], loggers=())
except RunConflictError as err:
    print(err, file=sys.stderr)
    sys.exit(3)
print(rec.status)
"""


def test_two_installed_versions_of_the_library_are_two_codes(tmp_path):
    """Installed (no git): a copy of the package on PYTHONPATH, run, one file changed, run."""
    lib = tmp_path / "site"
    shutil.copytree(
        REPO / "avalanche_sets", lib / "avalanche_sets",
        ignore=shutil.ignore_patterns("__pycache__"),
    )  # fmt: skip
    script = tmp_path / "run_it.py"
    script.write_text(INSTALLED.format(tiny=repr(TINY)))
    env = {**os.environ, "PYTHONPATH": str(lib), "AVALANCHE_SETS_CACHE": str(tmp_path / "c")}

    def run(out: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, str(script), str(tmp_path / out), str(lib)],
            capture_output=True, text=True, env=env, cwd=tmp_path,
        )  # fmt: skip

    first = run("one")
    assert first.returncode == 0 and first.stdout.split()[-1] == "ran", first.stderr
    with open(lib / "avalanche_sets" / "defaults.py", "a") as f:
        f.write("# a changed installed file\n")
    refused = run("one")
    assert refused.returncode == 3, refused.stderr
    assert "avalanche_sets package:" in refused.stderr and "--tag NAME" in refused.stderr
    assert "(commit" not in refused.stderr  # no git: no commit claimed
    second = run("two")
    assert second.returncode == 0 and second.stdout.split()[-1] == "ran", second.stderr
    records = find_results([tmp_path / "one", tmp_path / "two"])
    codes = [r.code for r in records]
    assert all(c["commit"] is None and c["dirty"] is None for c in codes)
    assert codes[0]["package"] != codes[1]["package"]
    assert record_identity(records[0]) == record_identity(records[1])  # only the code differs
    rows = aggregate_results(records)
    assert len(rows) == 2
    text = write_table(rows)
    for c in codes:
        assert f"0.1.0 (no git, pkg {c['package'][:7]})" in text or c["package"][:7] in text
    with pytest.raises(ValueError, match=r"appears twice in one protocol.*--pool-code"):
        aggregate_results(records, pool_code=True)  # pooled, the same seed twice: refused
    read_record(records[0].folder)  # the record reads back


def test_run_identity_is_unchanged_for_every_committed_record():
    """The new keys are present only when non-empty: no committed record gains one."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for path in sorted((REPO / "benchmarks" / "results").rglob("result.json")):
            ident = record_identity(read_record(path.parent))
            assert "user_code" not in ident and "tag" not in ident, path
