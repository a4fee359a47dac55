"""Every record names its code, its numeric path and its data; what changes the numbers is part
of the run's identity (issue 35)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from avalanche_sets import __version__
from avalanche_sets.data import content
from avalanche_sets.data.packs import save_pack
from avalanche_sets.data.synthetic import make_synthetic_domain
from avalanche_sets.models.backbone import bf16_supported
from avalanche_sets.presets import RunConfig, resolve_preset
from avalanche_sets.runs import code
from avalanche_sets.runs.experiment import run_experiment, run_settings
from avalanche_sets.runs.folder import (
    RunConflictError,
    check_finished,
    record_identity,
    run_dir_name,
    run_identity,
)
from avalanche_sets.runs.record import read_record

TINY = dict(
    tasks_per_domain=4, n_test_episodes=2, n_query=2, n_unlabeled=2, n_ood=4,
    width=4, domains=["shapes", "strokes"], eval_mb_size=2, interim_test_episodes=2,
)  # fmt: skip
REPO = Path(__file__).resolve().parents[2]


def _git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
    }
    env["GIT_COMMITTER_EMAIL"] = "t@t"
    return subprocess.run(
        ["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True, env=env
    ).stdout.strip()


@pytest.fixture(autouse=True)
def _own_hash_cache(tmp_path, monkeypatch):
    """File hashes go to a cache of this test's own (never the user's)."""
    monkeypatch.setenv("AVALANCHE_SETS_CACHE", str(tmp_path / "cache"))
    content._memo.clear()


@pytest.fixture(scope="module")
def packs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("packs")
    for name in ("shapes", "strokes"):
        save_pack(make_synthetic_domain(name, seed=0), root / f"{name}.npz")
    save_pack(make_synthetic_domain("rings", seed=0), root / "ood_rings.npz")
    return root


# ---------------------------------------------------------------------------- the code
@pytest.mark.skipif(shutil.which("git") is None, reason="needs git to make a repository")
def test_commit_and_dirty_of_a_checkout_a_worktree_and_packed_refs(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "a.py").write_text("x = 1\n")
    _git(repo, "add", "a.py")
    _git(repo, "commit", "-q", "-m", "one")
    head = _git(repo, "rev-parse", "HEAD")
    assert code.git_commit(repo) == head and code.git_dirty(repo) is False
    (repo / "runs").mkdir()
    (repo / "runs" / "result.json").write_text("{}")  # untracked output: not dirty
    assert code.git_dirty(repo) is False
    (repo / "a.py").write_text("x = 2\n")  # a tracked file changed: dirty
    assert code.git_dirty(repo) is True
    _git(repo, "commit", "-q", "-am", "two")
    second = _git(repo, "rev-parse", "HEAD")
    assert second != head and code.git_commit(repo) == second and code.git_dirty(repo) is False
    _git(repo, "pack-refs", "--all")  # the branch's ref only in packed-refs
    assert not (repo / ".git" / "refs" / "heads" / "main").exists()
    assert code.git_commit(repo) == second
    _git(repo, "worktree", "add", "-q", "-b", "side", str(tmp_path / "wt"), head)
    assert code.git_commit(tmp_path / "wt") == head  # a linked worktree: its own HEAD
    _git(repo, "checkout", "-q", "--detach", head)  # a detached HEAD holds the commit
    assert code.git_commit(repo) == head
    # without a git program: the commit is still read, whether it is dirty is unknown
    monkeypatch.setattr(code.shutil, "which", lambda name: None)
    assert code.git_commit(repo) == head and code.git_dirty(repo) is None
    # not a checkout at all: nothing is claimed
    assert code.git_commit(tmp_path) is None


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git to make a repository")
def test_an_installed_package_claims_no_commit(monkeypatch, tmp_path):
    """Not even that of a repository its virtual environment sits in."""
    _git(tmp_path, "init", "-q")
    site = tmp_path / ".venv" / "lib" / "site-packages"
    (site / "avalanche_sets" / "runs").mkdir(parents=True)
    (site / "avalanche_sets" / "runs" / "code.py").write_text("# installed\n")
    monkeypatch.setattr(code, "__file__", str(site / "avalanche_sets" / "runs" / "code.py"))
    code.code_info.cache_clear()
    code.package_fingerprint.cache_clear()
    try:
        info = code.code_info()
    finally:
        code.code_info.cache_clear()
        code.package_fingerprint.cache_clear()
    assert info["commit"] is None and info["dirty"] is None and info["version"] == __version__
    # but the installed files are named by their content
    assert info["package"] == code.tree_fingerprint(site / "avalanche_sets")


def _expected_code() -> tuple[str | None, bool | None]:
    if not (REPO / ".git").exists() or shutil.which("git") is None:
        return None, None
    head = _git(REPO, "rev-parse", "HEAD")
    return head, bool(_git(REPO, "status", "--porcelain", "--untracked-files=no"))


def test_a_real_run_records_its_code_numerics_and_data(tmp_path):
    import torch

    preset = resolve_preset("quick", **TINY)
    rec = run_experiment("protonet", preset, seed=0, out_root=tmp_path, loggers=())
    commit, dirty = _expected_code()
    assert rec.code == rec.made_by == {
        "version": __version__, "commit": commit, "dirty": dirty,
        "torch": torch.__version__.split("+")[0], "avalanche": code._version("avalanche-lib"),
        "package": code.tree_fingerprint(REPO / "avalanche_sets"),
    }  # fmt: skip
    assert rec.numerics == {
        "precision": rec.preset["precision"], "device": "cpu", "threads": preset.threads,
        "cpu_bf16": bf16_supported("cpu"),
    }  # fmt: skip
    assert rec.data == {"source": "synthetic", "root": None, "content": None}
    # in result.json itself (what a table reads), not only in run.json
    body = json.loads((tmp_path / run_dir_name("protonet", preset, 0) / "result.json").read_text())
    assert {k: body[k] for k in ("code", "numerics", "data")} == {
        "code": rec.code,
        "numerics": rec.numerics,
        "data": rec.data,
    }


# ---------------------------------------------------------------------------- the identity
def test_two_runs_differing_only_in_threads_are_two_runs(tmp_path):
    one = resolve_preset("quick", threads=1, **TINY)
    two = resolve_preset("quick", threads=2, **TINY)
    assert run_identity("protonet", one) != run_identity("protonet", two)
    a = run_experiment("protonet", one, seed=0, out_root=tmp_path, loggers=())
    b = run_experiment("protonet", two, seed=0, out_root=tmp_path, loggers=())
    assert (a.status, b.status) == ("ran", "ran")  # the second is not "finished before"
    assert a.numerics["threads"] == 1 and b.numerics["threads"] == 2
    assert record_identity(a) != record_identity(b)
    folders = sorted(p.parent.name for p in tmp_path.glob("protonet/*/result.json"))
    plain = run_dir_name("protonet", two, 0).split("/")[1]  # the quick preset's own 2 threads
    apart = run_dir_name("protonet", one, 0).split("/")[1]  # "-t1", before "-bf16" where bf16
    assert "-t1" in apart and apart.replace("-t1", "", 1) == plain
    assert folders == sorted([plain, apart])
    # a folder holding the other thread count's run (renamed into place) is refused, named
    (tmp_path / "protonet" / folders[0]).rename(tmp_path / "x")
    (tmp_path / "protonet" / folders[1]).rename(tmp_path / "protonet" / folders[0])
    with pytest.raises(RunConflictError, match=r"threads: 1 there, 2 asked.*another --out"):
        run_experiment("protonet", two, seed=0, out_root=tmp_path, loggers=())


def test_runs_on_data_of_other_content_are_two_runs_and_a_moved_copy_is_the_same(tmp_path, packs):
    copy = tmp_path / "copy"
    shutil.copytree(packs, copy)
    preset = resolve_preset("quick", source="packs", root=str(copy), **TINY)
    first = run_experiment("protonet", preset, seed=0, out_root=tmp_path / "runs", loggers=())
    assert first.data == {
        "source": "packs", "root": os.path.relpath(copy), "content": content.data_content("packs", packs),
    }  # fmt: skip
    assert first.data["content"].startswith("sha256:")
    # the same files at another path: the same run, finished before
    moved = resolve_preset("quick", source="packs", root=str(packs), **TINY)
    again = run_experiment("protonet", moved, seed=0, out_root=tmp_path / "runs", loggers=())
    assert again.status == "finished before"
    # one byte of one pack changed: another run, refused in that folder, with the fix
    pack = copy / "strokes.npz"
    raw = bytearray(pack.read_bytes())
    raw[-100] ^= 0xFF
    pack.write_bytes(bytes(raw))
    changed = run_identity("protonet", preset)
    assert changed["data"] != first.data["content"]
    assert changed != record_identity(first)
    with pytest.raises(RunConflictError, match=r"data content: 'sha256:.*there.*asked.*--out"):
        run_experiment("protonet", preset, seed=0, out_root=tmp_path / "runs", loggers=())


def test_the_content_hash_is_cached_by_size_and_mtime_and_reads_the_stream_not_the_date(
    tmp_path, packs
):
    copy = tmp_path / "copy"
    shutil.copytree(packs, copy)
    before = content.data_content("packs", copy)
    assert json.loads(content.cache_file().read_text())  # kept for the next process
    pack, st = copy / "shapes.npz", (copy / "shapes.npz").stat()
    raw = bytearray(pack.read_bytes())
    raw[-100] ^= 0xFF
    pack.write_bytes(bytes(raw))
    os.utime(pack, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size and time: the cache answers
    content._memo.clear()
    assert content.data_content("packs", copy) == before
    os.utime(pack, ns=(st.st_atime_ns, st.st_mtime_ns + 1))  # touched: read again
    assert content.data_content("packs", copy) != before
    # a stream folder's manifest: its stream section counts, its date does not
    stream = {"domains": [{"name": "shapes", "pack": "shapes.npz"}], "ood": []}
    (copy / "manifest.json").write_text(json.dumps({"date": "1", "stream": stream}))
    with_stream = content.data_content("packs", copy)
    (copy / "manifest.json").write_text(json.dumps({"date": "2", "stream": stream}))
    assert content.data_content("packs", copy) == with_stream
    stream["domains"][0]["name"] = "other"
    (copy / "manifest.json").write_text(json.dumps({"date": "2", "stream": stream}))
    assert content.data_content("packs", copy) != with_stream
    renamed = content.data_content("packs", copy)
    (copy / "README.md").write_text("notes")  # not data
    assert content.data_content("packs", copy) == renamed
    with pytest.raises(ValueError, match=r"does not exist.*fix: pass --root"):
        content.data_content("packs", tmp_path / "nowhere")
    assert content.data_content("synthetic", None) is None


# ---------------------------------------------------------------------------- old records
def test_a_record_that_names_no_data_content_reads_and_is_not_taken_for_a_run_of_data(tmp_path):
    """A record of a folder source without ``data`` (or without its content) reads; its identity
    names no content, and a run asked on data of a known content is not taken for it (nothing
    says it read that data): refused by name, with the fix. Every other setting still counts."""
    old = REPO / "benchmarks" / "results" / "runs" / "protonet" / "packs-o1-5w5s-R50-seed0"
    if not (old / "result.json").is_file():
        pytest.skip("no committed run")
    folder = tmp_path / "old"
    shutil.copytree(old, folder)
    body = json.loads((folder / "result.json").read_text())
    for key in ("numerics", "data"):
        body.pop(key, None)
    body["code"].pop("package", None)  # the settings are compared here, not the library's code
    (folder / "result.json").write_text(json.dumps(body))
    rec = read_record(folder)
    ident = record_identity(rec)
    assert ident["data"] is None  # a folder source, content unknown: none named
    config = RunConfig.of(rec.preset)
    where = run_settings(rec.method, config)  # as a run asks it (what protonet reads)
    asked = run_identity(rec.method, config, **where, data="sha256:whatever")
    with pytest.raises(
        RunConflictError, match=r"data content: not recorded there, 'sha256:whatever' asked.*--tag"
    ):
        check_finished(folder, asked, rec.seed)
    same = run_identity(rec.method, config, **where, data=None)
    assert check_finished(folder, same, rec.seed).seed == rec.seed  # the rest matches
    other = run_identity(rec.method, config.replace(threads=3), **where, data="sha256:whatever")
    with pytest.raises(RunConflictError, match=r"threads: 1 there, 3 asked"):
        check_finished(folder, other, rec.seed)
    synthetic = dataclasses.replace(rec, preset={**rec.preset, "source": "synthetic"})
    assert record_identity(synthetic)["data"] is None  # it reads no files: nothing unknown
