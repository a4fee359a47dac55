"""`avalanche-sets prepare pack --split/--n-way` and `prepare stream`: one's own data in one
command, every flag doing something or refused with what to do."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from avalanche_sets.cli import build_parser, main
from avalanche_sets.data.packs import build_pack_from_folder, load_pack
from avalanche_sets.data.synthetic import SYNTHETIC_DOMAINS
from avalanche_sets.presets import resolve_preset
from avalanche_sets.runs.experiment import build_benchmark

sys.path.insert(0, str(Path(__file__).parents[1] / "data"))
from image_folders import image_folder  # noqa: E402


def _sizes(path: Path) -> list[int]:
    dom = load_pack(path)
    return [dom.classes(s).size for s in ("train", "val", "test")]


def test_cli_pack_split_and_refusal(tmp_path, capsys):
    from avalanche_sets.cli import main

    folder = image_folder(tmp_path / "imgs", 6, per_class=2)
    code = main(["prepare", "pack", "--folder", str(folder), "--out", str(tmp_path / "p.npz")])
    err = capsys.readouterr().err
    assert code == 2 and "6 classes split 4/1/1" in err and "at least 15 classes" in err
    argv = ["prepare", "pack", "--folder", str(folder), "--out", str(tmp_path / "p.npz"),
            "--size", "8", "--split", "2,2,2", "--n-way", "2"]  # fmt: skip
    with pytest.warns(UserWarning, match="fewer than 16 images"):
        assert main(argv) == 0
    assert "class split 2/2/2" in capsys.readouterr().out
    assert _sizes(tmp_path / "p.npz") == [2, 2, 2]
    code = main([*argv[:-4], "--split", "0.5,0.5", "--n-way", "2"])
    assert code == 2 and "three comma-separated numbers" in capsys.readouterr().err


def test_cli_stream_end_to_end(tmp_path, capsys):
    flowers = image_folder(tmp_path / "flowers", 20, per_class=16)
    out = tmp_path / "out"
    argv = ["prepare", "stream", "--out", str(out), "--size", "16",
            "--domains", str(flowers), "synthetic:blobs", "--ood", "synthetic:spirals"]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "ood 'spirals' from synthetic:spirals" in printed
    assert f"run on it: avalanche-sets run --preset cpu --root {out}" in printed
    preset = resolve_preset("cpu", root=str(out), image_size=16, n_test_episodes=2,
                            n_val_episodes=2, tasks_per_domain=2)  # fmt: skip
    bench = build_benchmark(preset, seed=0)
    assert bench.domain_names == ["flowers", "blobs"]
    assert [d.name for d in bench.ood_sources] == ["spirals"]
    assert bench.test_stream[1].dataset[1].unlabeled_x.shape[0] == 5 * 10 + 50


def test_cli_refuses_flags_that_would_do_nothing(tmp_path, capsys):
    pack = build_pack_from_folder(image_folder(tmp_path / "mine", 15, per_class=2),
                                  tmp_path / "mine.npz", image_size=8, split=(5, 5, 5))  # fmt: skip
    base = ["prepare", "stream", "--out", str(tmp_path / "o"), "--domains", str(pack), "--ood"]
    assert main([*base, "--split", "0.5,0.25,0.25"]) == 2
    assert "--split sets the class split of image folders" in capsys.readouterr().err
    assert main([*base, "--seed", "3"]) == 2
    assert "fix: drop --seed" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    help_text = build_parser()._subparsers._group_actions[0].choices["prepare"]
    stream_help = help_text._subparsers._group_actions[0].choices["stream"].format_help()
    assert all(name in stream_help for name in SYNTHETIC_DOMAINS)


def _two_folders_with_bad_files(tmp_path: Path) -> tuple[Path, Path, list[str]]:
    """Two image folders of 6 classes, three unreadable files between them, one text file."""
    flowers = image_folder(tmp_path / "flowers", 6, per_class=16)
    birds = image_folder(tmp_path / "birds", 6, per_class=16, seed=1)
    bad = [flowers / "class_00" / "bad.png", flowers / "class_01" / "bad.jpg",
           birds / "class_03" / "worse.png"]  # fmt: skip
    for path in bad:
        path.write_bytes(b"not an image")
    (birds / "class_03" / "notes.txt").write_text("not an image either")
    return flowers, birds, [str(p) for p in bad]


def test_the_printed_run_command_runs_as_printed(tmp_path, capsys):
    import json
    import shlex

    flowers = image_folder(tmp_path / "flowers", 6, per_class=16)
    out = tmp_path / "out"
    argv = ["prepare", "stream", "--out", str(out), "--size", "16", "--n-way", "2",
            "--split", "2,2,2", "--domains", str(flowers), "synthetic:blobs",
            "--ood", "synthetic:spirals"]  # fmt: skip
    assert main(argv) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("run on it: ")]
    command = shlex.split(line.removeprefix("run on it: "))
    assert command[:2] == ["avalanche-sets", "run"]
    assert json.loads((out / "manifest.json").read_text())["run_command"] == shlex.join(command)
    tiny = ["--set", "tasks_per_domain=2", "--set", "n_test_episodes=2", "--set", "n_ood=4",
            "--set", "interim_test_episodes=2", "--set", "width=4", "--set", "n_blocks=2",
            "--seeds", "0", "--out", str(tmp_path / "runs"), "--loggers"]  # fmt: skip
    assert main([*command[1:], *tiny]) == 0, capsys.readouterr().err
    (record,) = (tmp_path / "runs").rglob("result.json")
    preset = json.loads(record.read_text())["preset"]
    assert (preset["n_way"], preset["image_size"]) == (2, 16)


def test_every_unreadable_file_is_named_in_one_pass(tmp_path, capsys):
    flowers, birds, bad = _two_folders_with_bad_files(tmp_path)
    out = tmp_path / "out"
    argv = ["prepare", "stream", "--out", str(out), "--size", "16", "--n-way", "2",
            "--split", "2,2,2", "--domains", str(flowers), str(birds), "--ood",
            "synthetic:spirals"]  # fmt: skip
    with pytest.warns(UserWarning, match=r"ignored 1 file\(s\) .*: class_03/notes\.txt"):
        assert main(argv) == 2
    err = capsys.readouterr().err
    assert "cannot read 3 image files" in err and all(p in err for p in bad)
    assert "--skip-unreadable" in err
    assert not out.exists()


def test_skip_unreadable_leaves_them_out_and_lists_them_in_the_manifest(tmp_path, capsys):
    import json

    flowers, birds, bad = _two_folders_with_bad_files(tmp_path)
    out = tmp_path / "out"
    argv = ["prepare", "stream", "--out", str(out), "--size", "16", "--n-way", "2",
            "--split", "2,2,2", "--domains", str(flowers), str(birds), "--ood",
            "synthetic:spirals", "--skip-unreadable"]  # fmt: skip
    with pytest.warns(UserWarning, match=r"class_03/notes\.txt"):
        assert main(argv) == 0
    printed = capsys.readouterr().out
    manifest = json.loads((out / "manifest.json").read_text())
    skipped = {e["name"]: e.get("skipped") for e in manifest["packs"]}
    assert skipped == {"flowers": bad[:2], "birds": bad[2:], "spirals": None}
    assert all(p in printed for p in bad)
    assert load_pack(out / "flowers.npz").labels.size == 6 * 16
    assert load_pack(out / "birds.npz").labels.size == 6 * 16
    assert "--skip-unreadable" in manifest["command"]


def test_prepare_pack_names_every_unreadable_file_and_can_skip_them(tmp_path, capsys):
    flowers, _, bad = _two_folders_with_bad_files(tmp_path)
    argv = ["prepare", "pack", "--folder", str(flowers), "--out", str(tmp_path / "p.npz"),
            "--size", "8", "--split", "2,2,2", "--n-way", "2"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "cannot read 2 image files" in err and all(p in err for p in bad[:2])
    with pytest.warns(UserWarning, match=r"skipped 2 unreadable image file\(s\): .*bad\.png"):
        assert main([*argv, "--skip-unreadable"]) == 0
    assert load_pack(tmp_path / "p.npz").labels.size == 6 * 16


def test_a_messy_folder_names_every_stray_file_and_prints_a_command_that_runs(tmp_path, capsys):
    """Done-when of issue 45: stray files at every level, a too-small class in two domains and
    a domain the cpu preset cannot use."""
    import json
    import re
    import shlex
    import warnings

    from image_folders import messy_stream_folders

    stray = messy_stream_folders(tmp_path / "mine")
    out = tmp_path / "packs"
    argv = ["prepare", "stream", "--out", str(out), "--size", "8", "--split", "15,6,6",
            "--domains", *(str(tmp_path / "mine" / d) for d in stray),
            "--ood", "synthetic:rings"]  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(argv) == 0
    printed = capsys.readouterr().out
    warned = [str(w.message) for w in caught]
    for name, entries in stray.items():  # every stray entry, at every level, named
        (line,) = [w for w in warned if f"mine/{name}: ignored" in w]
        assert line.endswith(": " + ", ".join(entries)), line
        assert (
            f"ignored {len(entries)} file(s) that are not images of a class folder: "
            + ", ".join(entries)
            in printed
        )
    manifest = json.loads((out / "manifest.json").read_text())
    assert {e["name"]: e.get("ignored") for e in manifest["packs"]} == {**stray, "rings": None}
    # the small classes of both domains in one pass, with the command line's spelling of the fix
    for name in ("flowers", "birds"):
        (small,) = [w for w in warned if f"mine/{name}: 1 of 27 classes have fewer than 16" in w]
        assert "'class_05' (4)" in small and "--set small_classes=drop" in small
        assert "small_classes='drop'" not in small
    # the command leaves out the domain cpu runs cannot use, and says why
    (line,) = [x for x in printed.splitlines() if x.startswith("run on it: ")]
    assert line.endswith("""--set "domains=['flowers','birds']\"""")
    note = "the run command leaves out stream domain(s) ['emoji']: 5-way episodes of the cpu "
    assert note in printed and "'emoji' has 0/0/0 (train/val/test)" in printed
    command = shlex.split(line.removeprefix("run on it: "))
    assert manifest["run_command"] == line.removeprefix("run on it: ")
    tiny = ["--set", "tasks_per_domain=2", "--set", "n_test_episodes=2", "--set", "n_ood=4",
            "--set", "interim_test_episodes=2", "--set", "width=4", "--set", "n_blocks=2",
            "--set", "threads=1", "--seeds", "0", "--out", str(tmp_path / "runs"),
            "--loggers"]  # fmt: skip
    with pytest.warns(UserWarning, match=r"1 of 15 train classes of domain|too small"):
        assert main([*command[1:], *tiny]) == 0, capsys.readouterr().err
    (record,) = (tmp_path / "runs").rglob("result.json")
    assert json.loads(record.read_text())["preset"]["domains"] == ["flowers", "birds"]
    capsys.readouterr()

    # the first run on one's own packs: --root of the quick preset reads them; classes too
    # small for its episodes are refused for every domain at once, the fix as --set
    runs = tmp_path / "quick"
    quick = ["run", "--preset", "quick", "--root", str(out), "--set", "image_size=8",
             "--set", "tasks_per_domain=2", "--set", "n_test_episodes=2", "--set", "width=4",
             "--set", "n_blocks=2", "--set", "threads=1", "--out", str(runs), "--loggers"]  # fmt: skip
    assert main(quick) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and not runs.exists()  # refused before the stream is described
    err = captured.err  # the packs were read (no refusal of --root): their domains named
    named = re.findall(r"^  '(\w+)' (train|val|test): ", err, re.M)
    assert {n for n, _ in named} == {"flowers", "birds", "emoji"}, err
    assert "--set small_classes=drop" in err
    fixed = [*quick, "--set", "small_classes=drop", "--set", "domains=['flowers','birds']"]
    with pytest.warns(UserWarning, match="too small"):
        assert main(fixed) == 0, capsys.readouterr().err
    (record,) = runs.rglob("result.json")
    assert json.loads(record.read_text())["preset"]["source"] == "packs"


def test_root_of_a_synthetic_preset_without_packs_is_refused_with_the_fix(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    for root, why in ((tmp_path / "empty", "holds no .npz domain packs"),
                      (tmp_path / "nowhere", "does not exist")):  # fmt: skip
        assert main(["run", "--root", str(root), "--out", str(tmp_path / "runs")]) == 2
        err = capsys.readouterr().err
        assert f"--root {root} {why}, and the quick preset generates its data" in err
        assert "add --source paper for the paper's datasets, or drop --root" in err
    assert not (tmp_path / "runs").exists()


def test_a_pack_no_run_can_use_gives_no_run_command_but_the_reason(tmp_path, capsys):
    import json

    folder = image_folder(tmp_path / "imgs", 6, per_class=16)
    for p in sorted((folder / "class_00").glob("*.png"))[4:]:
        p.unlink()
    pack = build_pack_from_folder(folder, tmp_path / "mine.npz", image_size=8, split=(2, 2, 2),
                                  n_way=2)  # fmt: skip
    out = tmp_path / "out"
    argv = ["prepare", "stream", "--out", str(out), "--size", "8", "--n-way", "2",
            "--domains", str(pack), "--ood", "synthetic:rings"]  # fmt: skip
    with pytest.warns(UserWarning, match=rf"item '{pack}': 1 of 6 classes .*--set small_classes"):
        assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "run on it:" not in printed
    assert "no run command: cpu runs can use none of the stream domains: 2-way episodes" in printed
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["run_command"] is None
    assert (
        manifest["run_command_note"] in printed
        and manifest["run_command_note"] in (out / "README.md").read_text()
    )
