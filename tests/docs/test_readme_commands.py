"""The README's commands are a stranger's: they run on a fresh clone with internet.

* Every shell command of the README's fenced ``bash`` blocks (and of the site's home page, which
  repeats them) is one the project parses: ``avalanche-sets ...`` by the command line's own
  parser, a ``run``/``sweep`` down to the preset it resolves to, a ``make`` target by the
  Makefile; and no command names a path outside the clone, nor reads one inside it that neither
  the clone nor an earlier command of the page makes.
* Installing: the README and the getting-started page give the same torch commands, one of them
  with PyTorch's CPU index, pinned to the releases ``scripts/install.sh`` installs, which
  pyproject.toml's supported range holds.
* The packs' public route: the README's ``prepare torchvision --download`` and then its ``run``
  on those packs, offline: the datasets stand where ``--download`` would put them (fabricated in
  torchvision's layouts, ``tests/data/torchvision_layouts.py``) and every torchvision download
  function fails the test if called, so the download itself is what this cannot check.
* The headline's packs: the table of the sets-mini packs (docs/guide/data.md) names every pack
  of the shared folder with its role, class count and terms (skipped without the packs).
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

import numpy as np
import pytest
from packaging.requirements import Requirement

from avalanche_sets.cli import _grid, _parse_sets, _preset_from_args, build_parser, main
from avalanche_sets.data.prepare import DEFAULT_DOMAINS, DEFAULT_OOD, TORCHVISION_SOURCES
from avalanche_sets.methods import method_names

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = [README, ROOT / "docs" / "index.md"]  # the site's home repeats the README's commands
GETTING_STARTED = ROOT / "docs" / "getting-started.md"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"

sys.path.insert(0, str(ROOT / "tests" / "data"))
from torchvision_layouts import MAKERS  # noqa: E402


def shell_commands(text: str) -> list[list[str]]:
    """Every command of the text's fenced ``bash`` blocks, continuation lines joined, comments
    dropped, as argument lists."""
    commands = []
    for block in re.findall(r"^```bash\n(.*?)^```", text, flags=re.S | re.M):
        for line in block.replace("\\\n", " ").splitlines():
            argv = shlex.split(line, comments=True)
            if argv:
                commands.append(argv)
    return commands


def make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([\w.-]+)\s*:(?!=)", text, flags=re.M))


def _outside(path: str) -> bool:
    """Whether ``path`` (as a command names it, from the clone's root) leaves the clone."""
    if path.startswith(("/", "~")):
        return True
    return not (ROOT / path).resolve().is_relative_to(ROOT.resolve())


def _in_the_clone(path: str) -> bool:
    """Whether a fresh clone has ``path``: a file git tracks, or a folder holding one (a
    git-ignored ``runs/`` or ``packs/`` of this checkout is no clone's)."""
    import subprocess

    try:
        listed = subprocess.run(
            ["git", "ls-files", "--", path], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: what is on disk
        return (ROOT / path).exists()
    return bool(listed.strip())


def _inside(path: str, folders: list[str]) -> bool:
    parts = Path(path).parts
    return any(parts[: len(Path(f).parts)] == Path(f).parts for f in folders)


def check_commands(commands: list[list[str]]) -> list[str]:
    """What is wrong with ``commands`` run in order on a fresh clone (empty when nothing)."""
    parser, methods, targets = build_parser(list_methods=False), set(method_names()), make_targets()
    made: list[str] = []  # folders and files the commands before this one write
    wrong = []
    for argv in commands:
        line = shlex.join(argv)
        outside = [a for a in argv if re.match(r"(\.\./|/|~)", a) or "/../" in a]
        if outside:
            wrong.append(f"{line}: names {outside}, outside a fresh clone")
        if argv[0] == "make":
            missing = [t for t in argv[1:] if t not in targets]
            if missing:
                wrong.append(f"{line}: no Makefile target {missing}")
            continue
        if argv[0] == "pip":  # its pins and index: test_the_install_commands_*
            if argv[1:2] != ["install"]:
                wrong.append(f"{line}: not a pip install")
            continue
        if argv[0] != "avalanche-sets":
            wrong.append(f"{line}: {argv[0]!r} is no command this test knows how to check")
            continue
        try:
            args = parser.parse_args(argv[1:])
        except SystemExit:
            wrong.append(f"{line}: the command line's parser refuses it")
            continue
        if args.command in ("run", "sweep"):
            unknown = sorted(set(getattr(args, "methods", None) or [args.method]) - methods)
            if unknown:
                wrong.append(f"{line}: no method {unknown}")
            try:  # the preset, --set values and flags, checked as the command checks them
                _grid(args) if args.command == "sweep" else _preset_from_args(args)
            except (ValueError, TypeError, KeyError) as err:
                wrong.append(f"{line}: {err}")
        reads = [getattr(args, k) for k in ("root", "folder") if getattr(args, k, None)]
        reads += getattr(args, "folders", None) or []
        if getattr(args, "download", False):  # prepare torchvision --download fills its root
            made.append(args.root)
            reads.remove(args.root)
        for path in reads:
            if not _outside(path) and not _in_the_clone(path) and not _inside(path, made):
                wrong.append(f"{line}: reads {path}, which neither the clone nor an earlier "
                             "command makes")  # fmt: skip
        if getattr(args, "out", None):
            made.append(args.out)
    return wrong


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_command_of_the_page_runs_on_a_fresh_clone(page):
    commands = shell_commands(page.read_text(encoding="utf-8"))
    assert len(commands) >= 6  # make demo and test, prepare, run, sweep, table (and pip)
    assert check_commands(commands) == []


@pytest.mark.parametrize(
    "command, complaint",
    [
        ("avalanche-sets run --preset cpu --root ../shared/data/sets-mini", "outside a fresh"),
        ("avalanche-sets run --preset cpu --root packs/tv", "reads packs/tv, which neither"),
        ("avalanche-sets run --preset cpu --root ~/packs", "outside a fresh clone"),
        ("avalanche-sets run --preset cpu --sett n_shot=5", "parser refuses it"),
        ("avalanche-sets run --method ordr", "no method ['ordr']"),
        ("avalanche-sets run --set n_shoot=5", "n_shoot"),
        ("avalanche-sets table elsewhere/", "reads elsewhere/"),
        ("avalanche-sets table runs/", "reads runs/, which neither"),  # ignored: no clone has it
        ("make demoo", "no Makefile target ['demoo']"),
        ("wget https://x.org/data.zip", "no command this test knows"),
    ],
)
def test_a_command_a_stranger_cannot_run_is_named(command, complaint):
    argv = shlex.split(command)
    (wrong,) = check_commands([argv])
    assert complaint in wrong and wrong.startswith(shlex.join(argv))


def test_a_path_an_earlier_command_makes_may_be_read():
    ok = [
        "avalanche-sets prepare torchvision --download --root data/tv --out packs/tv",
        "avalanche-sets run --preset cpu --root packs/tv",
        "avalanche-sets table runs/ --out runs/table",
    ]
    assert check_commands([shlex.split(c) for c in ok]) == []
    # without --download, the torchvision root is read, and nothing made it
    (wrong,) = check_commands([shlex.split(ok[0].replace(" --download", ""))])
    assert "reads data/tv" in wrong


# ------------------------------------------------------------------------------- installing
def pip_installs(text: str) -> tuple[set[str], set[str]]:
    """Every ``pip install ...`` a page gives: in its code blocks, and in inline code."""
    found: tuple[set[str], set[str]] = (set(), set())
    blocks = re.findall(r"^```bash\n(.*?)^```", text, flags=re.S | re.M)
    for where, codes in zip(found, (blocks, re.findall(r"`(pip install [^`]+)`", text))):
        for code in codes:
            where.update(" ".join(m.split()) for m in re.findall(r"pip install [^\n#`]*", code))
    return found


def _pin(command: str, name: str) -> str:
    (pin,) = re.findall(rf"\b{name}==([\w.+]+)", command)
    return pin


def _torch(commands: set[str]) -> set[str]:
    return {c for c in commands if re.search(r"\btorch==", c)}


def test_the_install_commands_name_the_cpu_wheels_and_the_pinned_releases():
    readme_blocks, readme_inline = pip_installs(README.read_text(encoding="utf-8"))
    guide_blocks, guide_inline = pip_installs(GETTING_STARTED.read_text(encoding="utf-8"))
    # the block a reader copies: the same on both pages, PyTorch's CPU wheels
    (copied,) = _torch(readme_blocks)
    assert _torch(guide_blocks) == {copied}, "README and getting-started install torch differently"
    assert f"--index-url {CPU_INDEX}" in copied, copied
    # and both pages name the same two routes: CPU wheels, and PyPI's (CUDA) build for a GPU
    routes = _torch(readme_blocks | readme_inline)
    assert routes == _torch(guide_blocks | guide_inline)
    assert len(routes) == 2 and [c for c in routes if "--index-url" not in c], routes
    assert readme_blocks <= guide_blocks, f"README commands the guide lacks: {readme_blocks}"

    script = (ROOT / "scripts" / "install.sh").read_text()
    pins = dict(re.findall(r'^(TORCH|TORCHVISION)_PIN="\w+==([\w.]+)"', script, flags=re.M))
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    supported = {r.name: r.specifier for r in map(Requirement, deps)}
    for command in routes:
        assert _pin(command, "torch") == pins["TORCH"], command
        assert _pin(command, "torchvision") == pins["TORCHVISION"], command
    assert supported["torch"].contains(pins["TORCH"]), (supported["torch"], pins)
    assert supported["torchvision"].contains(pins["TORCHVISION"])
    # the newest release the range admits is the one installed and documented
    assert f"<={pins['TORCH']}" in str(supported["torch"]), (supported["torch"], pins)


# --------------------------------------------------------------------------- the packs' route
def _offline_torchvision(monkeypatch) -> list[str]:
    """torchvision as on a machine where ``--download`` has fetched everything: a file that is
    there passes its md5 check (fabricated files cannot carry the official sums), and anything
    that would go to the network records its address and fails."""
    import urllib.request

    import torchvision.datasets.utils as tv_utils

    called: list[str] = []

    def no_network(request, *args, **kwargs):
        called.append(getattr(request, "full_url", str(request)))
        raise AssertionError(f"torchvision went to the network for {called[-1]}")

    monkeypatch.setattr(tv_utils, "check_md5", lambda fpath, md5, **kwargs: True)
    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    monkeypatch.setattr(tv_utils, "_download_file_from_remote_location", no_network)
    return called


def _as_downloaded(root: Path, name: str, n_classes: int) -> None:
    """Dataset ``name`` under the torchvision root as ``download=True`` leaves it: the layout
    torchvision reads (20 images in each class), and the archive it keeps where its
    ``download()`` checks for one before fetching (Omniglot's zip)."""
    import shutil

    MAKERS[name](root, n_classes, 20)
    if name == "omniglot":
        folder = root / "omniglot-py" / "images_background"
        shutil.make_archive(str(folder), "zip", folder.parent, folder.name)


def test_the_readme_packs_route_prepares_packs_its_run_runs_on(tmp_path, monkeypatch, capsys):
    commands = [a[1:] for a in shell_commands(README.read_text()) if a[0] == "avalanche-sets"]
    (prepare,) = [c for c in commands if c[:2] == ["prepare", "torchvision"]]
    assert "--download" in prepare  # the public route: nothing needed beside the clone
    parser = build_parser(list_methods=False)
    prep = parser.parse_args(prepare)
    (run,) = [c for c in commands if c[0] == "run" and parser.parse_args(c).root == prep.out]
    assert commands.index(run) > commands.index(prepare)

    monkeypatch.chdir(tmp_path)  # the clone's root: the README's relative paths from here
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    names = [*(prep.domains or DEFAULT_DOMAINS), *(DEFAULT_OOD if prep.ood is None else prep.ood)]
    for name in names:  # 25 classes (SVHN: its ten digits)
        _as_downloaded(Path(prep.root), name, min(25, TORCHVISION_SOURCES[name].n_classes))
    called = _offline_torchvision(monkeypatch)
    assert main(prepare) == 0
    assert called == []
    printed = capsys.readouterr().out
    manifest = json.loads((Path(prep.out) / "manifest.json").read_text())
    assert manifest["run_command"] in printed

    # the README's run is the one prepare prints, given a method and seeds
    def meaning(argv):
        args = vars(parser.parse_args(argv))
        return {**args, "set": _parse_sets(args["set"], grid=False)}

    printed_run = shlex.split(manifest["run_command"])[1:]
    ran = parser.parse_args(run)
    given = ["--method", ran.method, "--seeds", *map(str, ran.seeds)]
    assert meaning(run) == meaning([*printed_run, *given])
    assert "Licences: " in (Path(prep.out) / "README.md").read_text()

    tiny = ["n_way=2", "n_shot=1", "n_query=1", "n_unlabeled=1", "n_ood=2", "tasks_per_domain=2",
            "n_test_episodes=2", "interim_test_episodes=1", "width=4",
            "eval_mb_size=2"]  # fmt: skip
    argv = [*run, "--seeds", "0", "--out", "runs", *[a for s in tiny for a in ("--set", s)]]
    assert main(argv) == 0
    (result,) = Path("runs").rglob("result.json")
    record = json.loads(result.read_text())
    assert record["result"]["domains"] == list(prep.domains or DEFAULT_DOMAINS)
    assert np.asarray(record["result"]["matrix"]).shape == (6, 6)


# ------------------------------------------------------------------------ the headline's packs
def sets_mini_table() -> dict[str, list[str]]:
    """Pack -> its row's cells in docs/guide/data.md's table of the sets-mini packs."""
    text = (ROOT / "docs" / "guide" / "data.md").read_text(encoding="utf-8")
    section = text.split("## The sets-mini packs: the results' data", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \|(.*)\|$", section, flags=re.M)
    return {pack: [c.strip() for c in cells.split("|")] for pack, cells in rows}


def test_the_sets_mini_table_names_every_shared_pack_and_its_terms():
    from benchmarks._common import SHARED_PACKS

    packs = sorted(Path(SHARED_PACKS).glob("*.npz"))
    if not packs:
        pytest.skip(f"the shared sets-mini packs are not at {SHARED_PACKS}")
    table = sets_mini_table()
    assert sorted(table) == sorted(p.stem for p in packs)
    for path in packs:
        role, classes, origin, terms = table[path.stem]
        with np.load(path) as z:
            source, names = str(z["source"]), z["class_names"]
        assert role == ("OOD" if path.stem.startswith("ood_") else "stream"), path.stem
        assert int(classes) == len(names), path.stem
        for word in ("research", "MIT", "CC-BY-4.0", "non-commercial", "OFL-1.1"):
            assert (word in source) == (word in terms), (path.stem, word, source, terms)
