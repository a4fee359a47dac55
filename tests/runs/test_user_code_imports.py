"""A run's code of one's own is everything of one's own its method imports (issue 51): a flat
helper module next to the method file, a local package, a library installed from a git URL
(by its commit), each fingerprinted, so an edited helper never reads as "finished before"."""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from avalanche_sets.runs import code
from avalanche_sets.runs.folder import identity_differences
from avalanche_sets.runs.report import find_results

TINY = dict(
    tasks_per_domain=4, n_test_episodes=2, n_query=2, n_unlabeled=2, n_ood=4, width=4,
    domains=["shapes", "strokes"], eval_mb_size=2, threads=1, interim_test_episodes=2,
)  # fmt: skip
REPO = Path(__file__).resolve().parents[2]
COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def lab(tmp_path, monkeypatch):
    """A folder of one's own code, the current folder and first on the import path; its
    modules get fresh names per test (``<stem>_<n>``) and leave ``sys.modules`` after it."""
    suffix = f"{abs(hash(str(tmp_path))) % 10**8}"
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setenv("AVALANCHE_SETS_CACHE", str(tmp_path / "cache"))
    before = set(sys.modules)

    def write(relative: str, text: str) -> Path:
        path = tmp_path / relative.format(n=suffix)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).format(n=suffix))
        importlib.invalidate_caches()
        return path

    write.n = suffix
    yield write
    for name in set(sys.modules) - before:
        if name.split(".")[0].endswith(f"_{suffix}"):
            sys.modules.pop(name, None)


METHOD = """\
    import helper_{n}
    from avalanche_sets.baselines import ProtoNet


    class Build(ProtoNet):
        name = "helped-protonet"
        summary = "ProtoNet with a constant from a helper module"
        scale = helper_{n}.SCALE
"""


def _edit(path: Path, old: str, new: str, n: str) -> None:
    """Change one constant of a file, as between two runs: a new process imports the code of
    one's own anew (every module of the test's, named ``*_<n>``, is forgotten)."""
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    for name in [m for m in sys.modules if m.split(".")[0].endswith(f"_{n}")]:
        sys.modules.pop(name)
    importlib.invalidate_caches()


def test_an_edited_flat_helper_module_refuses_the_old_run(lab, tmp_path, capsys):
    """The command line: a method file that imports a helper next to it; one constant of the
    helper changed: the same command is refused as changed code, never "finished before"."""
    from avalanche_sets.cli import main

    n = lab.n
    lab("mine_{n}.py", METHOD)
    helper = lab("helper_{n}.py", "SCALE = 1\n")
    command = ["run", "--method", f"mine_{n}:Build", "--preset", "quick", "--seeds", "0",
               "--out", str(tmp_path / "runs"), *[f"--set={k}={v}" for k, v in TINY.items()]]  # fmt: skip
    assert main(command) == 0
    (first,) = find_results([tmp_path / "runs"])
    assert sorted(first.user_code) == [f"helper_{n}", f"mine_{n}"]
    assert first.user_code[f"helper_{n}"] == code.source_fingerprint(f"helper_{n}")[1]
    assert main(command) == 0 and "finished before" in capsys.readouterr().out  # same code
    _edit(helper, "SCALE = 1\n", "SCALE = 2\n", n)
    assert main(command) == 2
    out, err = capsys.readouterr()
    assert "finished before" not in out
    old, new = first.user_code[f"helper_{n}"][:7], code.source_fingerprint(f"helper_{n}")[1][:7]
    assert old != new
    assert f"code of helper_{n}: {old} there, {new} now" in err
    assert f"code of mine_{n}" not in err  # the method file itself is unchanged
    assert "--tag NAME" in err and "another --out" in err and "delete that folder" in err


def test_user_code_follows_imports_of_ones_own_through_one_another(lab, tmp_path):
    """A flat helper, the local package it imports, a module imported inside a function: each
    by its own hash; a file no code imports, and libraries from an index, are not the run's."""
    n = lab.n
    lab(
        "mine_{n}.py",
        """\
        import json

        import torch

        import helper_{n}
        from avalanche_sets.baselines import ProtoNet


        class Build(ProtoNet):
            name = "helped-protonet"
            summary = "ProtoNet with helpers"

            def score(self):
                import lazy_{n}  # imported when it runs: the run's code all the same

                return lazy_{n}.K, json, torch
        """,
    )
    lab("helper_{n}.py", "from lab_{n}.scores import energy\n")
    lab("lab_{n}/__init__.py", "")
    scores = lab("lab_{n}/scores.py", "def energy(x):\n    return -x\n")
    lab("lab_{n}/notes.txt", "not code\n")
    lab("lazy_{n}.py", "K = 1\n")
    unused = lab("unused_{n}.py", "K = 1\n")
    got = code.user_code(f"mine_{n}:Build")
    assert list(got) == [f"helper_{n}", f"lab_{n}", f"lazy_{n}", f"mine_{n}"]  # sorted
    assert got[f"lab_{n}"] == code.tree_fingerprint(tmp_path / f"lab_{n}", python_only=True)
    assert got[f"helper_{n}"] == code.source_fingerprint(f"helper_{n}")[1]
    unused.write_text("K = 2\n")
    assert code.user_code(f"mine_{n}:Build") == got  # imported by nothing: not the run's
    scores.write_text("def energy(x):\n    return x\n")  # a local package's file, edited
    changed = code.user_code(f"mine_{n}:Build")
    assert {k for k in got if changed[k] != got[k]} == {f"lab_{n}"}


def test_the_test_runner_and_a_fresh_interpreter_give_one_user_code(lab, tmp_path):
    """Modules loaded for other reasons (this test file and the others pytest collected, from
    the checkout) are not the method's code: the same code has one identity in a test and in a
    command."""
    n = lab.n
    lab("mine_{n}.py", METHOD)
    lab("helper_{n}.py", "SCALE = 1\n")
    here = code.user_code(f"mine_{n}:Build")
    assert Path(sys.modules[__name__].__file__).is_relative_to(REPO)  # loaded, not counted
    script = (
        "import json; from avalanche_sets.runs.code import user_code; "
        f"print(json.dumps(user_code('mine_{n}:Build')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)}, check=True,
    )  # fmt: skip
    assert json.loads(out.stdout.splitlines()[-1]) == here
    assert sorted(here) == [f"helper_{n}", f"mine_{n}"]


def _install(site: Path, name: str, version: str, text: str, *, commit: str | None = None) -> Path:
    """A distribution ``name`` installed into the folder ``site`` as pip leaves it (a package, a
    ``.dist-info`` with ``METADATA`` and ``RECORD``; from a git URL: a ``direct_url.json``
    naming ``commit``); returns its ``__init__.py``."""
    init = site / name / "__init__.py"
    init.parent.mkdir(parents=True)
    init.write_text(textwrap.dedent(text))
    (site / name / "__pycache__").mkdir()
    (site / name / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"\0")
    info = site / f"{name}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    listed = [f"{name}/__init__.py", f"{name}/__pycache__/__init__.cpython-311.pyc",
              f"{info.name}/METADATA", f"{info.name}/RECORD", f"../../bin/{name}"]  # fmt: skip
    if commit:
        url = {"url": f"https://github.com/lab/{name}.git", "vcs_info": {"vcs": "git", "commit_id": commit}}  # fmt: skip
        (info / "direct_url.json").write_text(json.dumps(url))
        listed.append(f"{info.name}/direct_url.json")
    script = site.parents[1] / "bin" / name  # a script pip writes outside the site folder
    script.parent.mkdir(exist_ok=True)
    script.write_text(f"#!{site.parents[1]}/bin/python\n")
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in listed))
    importlib.invalidate_caches()
    return init


@pytest.fixture
def site(tmp_path, monkeypatch) -> Path:
    """A site-packages folder of the test's own, first on the import path."""
    folder = tmp_path / "env" / "lib" / "site-packages"
    folder.mkdir(parents=True)
    monkeypatch.syspath_prepend(str(folder))
    return folder


def test_a_library_installed_from_git_is_recorded_by_its_version_commit_and_files(lab, site):
    """``pip install git+URL``: the library the method imports is recorded by its version, the
    commit of its ``direct_url.json`` and its files; another commit or an edited installed file
    is other code. A library from a package index (no ``direct_url.json``) is not recorded."""
    n = lab.n
    init = _install(site, f"gitlib_{n}", "1.2", "K = 1\n", commit=COMMIT)
    _install(site, f"pypilib_{n}", "3.0", "K = 1\n")  # from a package index: the environment
    uses = METHOD.replace("import helper_{n}", "import gitlib_{n}, pypilib_{n}")
    lab("mine_{n}.py", uses.replace("helper_{n}.SCALE", "gitlib_{n}.K"))
    method = f"mine_{n}:Build"
    got = code.user_code(method)
    assert list(got) == [f"gitlib_{n}", f"mine_{n}"]
    value = got[f"gitlib_{n}"]
    # its files as RECORD lists them, bytecode, metadata and a script outside the folder left out
    files = code._digest([(f"gitlib_{n}/__init__.py", init)])
    assert value == f"version 1.2, commit {COMMIT}, files {files}"
    assert code.short_code(value) == f"version 1.2, commit 0123456, files {value[-64:][:7]}"
    (init.parent / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"\1")
    assert code.user_code(method) == got  # bytecode is not the code
    direct = site / f"gitlib_{n}-1.2.dist-info" / "direct_url.json"
    direct.write_text(direct.read_text().replace(COMMIT, "f" * 40))  # reinstalled, new commit
    other = code.user_code(method)
    assert identity_differences(
        {"preset": {}, "user_code": got}, {"preset": {}, "user_code": other}
    ) == [
        f"code of gitlib_{n}: {code.short_code(value)} there, "
        f"{code.short_code(value).replace('0123456', 'fffffff')} now"
    ]
    init.write_text("K = 2\n")  # an installed file edited in place
    assert code.user_code(method)[f"gitlib_{n}"].split("files ")[1] != value.split("files ")[1]


def test_a_method_of_an_installed_package_is_recorded_by_its_distribution(lab, site):
    """Installed from an index or not: the distribution that provides the method is the run's
    code, by version and files."""
    n = lab.n
    _install(site, f"methods_{n}", "0.3", METHOD.replace("    import helper_{n}\n", "").replace(
        "helper_{n}.SCALE", "1"
    ))  # fmt: skip
    got = code.user_code(f"methods_{n}:Build")
    assert list(got) == [f"methods_{n}"]
    assert re.fullmatch(r"version 0\.3, files [0-9a-f]{64}", got[f"methods_{n}"])
