"""`prepare stream`: one's own image folders and packs, the synthetic domains and OOD sources in
one stream folder with clean names, read back by the packs source and the cpu preset."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from avalanche_sets.data import sets_benchmark
from avalanche_sets.data.benchmark import load_source
from avalanche_sets.data.packs import build_pack_from_folder, load_pack, save_pack
from avalanche_sets.data.stream_folder import (
    parse_stream_item,
    prepare_stream,
    read_stream_manifest,
)
from avalanche_sets.presets import resolve_preset, run_target
from avalanche_sets.runs.experiment import build_benchmark

sys.path.insert(0, str(Path(__file__).parent))
from image_folders import image_folder  # noqa: E402

CPU = run_target("cpu")  # the runs the streams are prepared for

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "sets-mini"


@pytest.fixture(scope="module")
def stream(tmp_path_factory):
    """An image folder (20 classes) + a pack named ood_* + two synthetic domains, and as OOD
    sources a synthetic one and an image folder."""
    tmp = tmp_path_factory.mktemp("stream")
    flowers = image_folder(tmp / "flowers", 20, per_class=16)
    ood_dots = image_folder(tmp / "dots", 6, per_class=30, seed=1)
    own = build_pack_from_folder(image_folder(tmp / "mine", 15, seed=2), tmp / "ood_mine.npz",
                                 image_size=16, split=(5, 5, 5))  # fmt: skip
    return prepare_stream(
        tmp / "out",
        [str(flowers), "synthetic:shapes", f"own={own}", "synthetic:strokes"],
        ["synthetic:rings", str(ood_dots)],
        image_size=16,
        target=CPU,
    )


def test_stream_names_are_clean_and_episodes_draw(stream):
    assert sorted(p.name for p in stream.glob("*.npz")) == [
        "flowers.npz", "ood_dots.npz", "ood_rings.npz", "own.npz", "shapes.npz", "strokes.npz",
    ]  # fmt: skip
    assert read_stream_manifest(stream) == (
        {"flowers": "flowers.npz", "shapes": "shapes.npz", "own": "own.npz",
         "strokes": "strokes.npz"},
        {"rings": "ood_rings.npz", "dots": "ood_dots.npz"},
    )  # fmt: skip
    preset = resolve_preset("cpu", root=str(stream), image_size=16, n_test_episodes=2,
                            n_val_episodes=2, tasks_per_domain=2)  # fmt: skip
    bench = build_benchmark(preset, seed=0)
    assert bench.domain_names == ["flowers", "shapes", "own", "strokes"]  # stream order
    assert [d.name for d in bench.ood_sources] == ["rings", "dots"]  # not ood_rings
    text = bench.describe()
    assert "OOD sources: rings (36/12/12 classes), dots (4/1/1 classes)" in text
    assert "ood_" not in text
    for s in (bench.train_stream, bench.valid_stream, bench.test_stream):
        for exp in s:
            ep = exp.dataset[0]
            assert tuple(ep.unlabeled_x.shape) == (5 * 10 + 50, 16, 16, 3)
    flowers = bench.domains[0]
    assert [flowers.classes(s).size for s in ("train", "val", "test")] == [10, 5, 5]
    # the synthetic domain is the one the synthetic source generates
    synthetic = sets_benchmark("synthetic", domains=["shapes"], ood=[], n_ood=0, image_size=16,
                               tasks_per_domain=1, n_val_episodes=1, n_test_episodes=1)  # fmt: skip
    np.testing.assert_array_equal(bench.domains[1].images, synthetic.domains[0].images)
    # names chosen by the user; --set domains uses them
    custom = sets_benchmark("packs", root=stream, domains=["own", "flowers"], ood=["dots"],
                            n_query=5, n_ood=10, tasks_per_domain=1, n_val_episodes=1,
                            n_test_episodes=1)  # fmt: skip
    assert custom.domain_names == ["own", "flowers"] and custom.ood_sources[0].name == "dots"
    manifest = json.loads((stream / "manifest.json").read_text())
    # the stream is 16 px: its run command sets that, as the cpu preset is 32 px
    assert manifest["run_command"].endswith(f"--root {stream} --set image_size=16")
    assert (
        "| rings | `ood_rings.npz` | ood | `synthetic:rings` |"
        in (stream / "README.md").read_text()
    )


def test_a_pack_the_manifest_does_not_name_is_not_loaded_with_a_warning(stream, tmp_path):
    folder = Path(shutil.copytree(stream, tmp_path / "stream"))
    shutil.copy(folder / "own.npz", folder / "extra.npz")
    with pytest.warns(UserWarning, match=r"names the stream, and not \['extra.npz'\]") as caught:
        domains, ood = load_source("packs", root=folder)
    assert [d.name for d in domains] == ["flowers", "shapes", "own", "strokes"]
    assert [d.name for d in ood] == ["rings", "dots"]
    assert caught[0].filename == __file__  # it points at the line that loaded the folder


def test_a_folder_of_packs_without_a_stream_manifest_reads_as_before(tmp_path):
    """File names decide where no manifest names the stream (sets-mini, prepare torchvision)."""
    dom = load_pack(build_pack_from_folder(image_folder(tmp_path / "a", 15, per_class=8),
                                           tmp_path / "a.npz", image_size=8, split=(5, 5, 5)))  # fmt: skip
    for name in ("a", "ood_b"):
        save_pack(dom, tmp_path / "packs" / f"{name}.npz")
    (tmp_path / "packs" / "manifest.json").write_text('{"packs": []}')  # prepare torchvision's
    bench = sets_benchmark("packs", root=tmp_path / "packs", n_shot=1, n_query=1, n_unlabeled=1,
                           n_ood=1, tasks_per_domain=1, n_val_episodes=1, n_test_episodes=1,
                           small_classes="drop")  # fmt: skip
    assert bench.domain_names == ["a"] and [d.name for d in bench.ood_sources] == ["ood_b"]


@pytest.mark.skipif(not (SHARED / "gtsrb.npz").is_file(), reason="shared packs not found")
def test_sets_mini_names_are_unchanged():
    from avalanche_sets.data.benchmark import load_source

    ids, oods = load_source("packs", root=SHARED)
    assert [d.name for d in oods] == ["ood_fish", "ood_omniglot", "ood_textures"]
    assert ids[0].name == "tinyimagenet_animals"


def test_every_item_is_checked_before_anything_is_written(tmp_path):
    folder = image_folder(tmp_path / "imgs", 20, per_class=2)
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=r"unknown synthetic domain 'shaps'.*did you mean "
                       r"'synthetic:shapes'.*valid: ID domains shapes, strokes"):  # fmt: skip
        prepare_stream(out, [str(folder), "synthetic:shaps"], target=CPU)
    with pytest.raises(FileNotFoundError, match=r"item 'nope.npz': domain pack nope.npz not found"):
        prepare_stream(out, [str(folder)], ["nope.npz"], target=CPU)
    with pytest.raises(FileNotFoundError, match="no pack or image folder"):
        prepare_stream(out, [str(tmp_path / "missing")], target=CPU)
    with pytest.raises(ValueError, match=r"name\(s\) \['imgs'\] are given by more than one"):
        prepare_stream(out, [str(folder)], [f"{folder}"], target=CPU)
    with pytest.raises(ValueError, match="prefix 'ood_'"):
        prepare_stream(out, [f"ood_x={folder}"], target=CPU)
    six = image_folder(tmp_path / "six", 6, per_class=2)
    with pytest.raises(ValueError, match=r"6 classes split 4/1/1.*at least 15 classes"):
        prepare_stream(out, [str(folder), str(six)], [], target=CPU)
    small = tmp_path / "small.npz"
    save_pack(load_pack(build_pack_from_folder(six, small, image_size=8, n_way=1)), small)
    with pytest.raises(ValueError, match=r"item '.*small.npz': its 6 classes are split 4/1/1"):
        prepare_stream(out, [str(small)], target=CPU)
    assert not out.exists()  # nothing written by any refused call


def test_items_parse_with_clean_default_names(tmp_path):
    assert parse_stream_item("synthetic:rings").name == "rings"
    pack = tmp_path / "ood_fish.npz"
    pack.write_bytes(b"")
    assert parse_stream_item(str(pack)).name == "fish"  # the file prefix is not its name
    assert parse_stream_item(f"carp={pack}").name == "carp"
    assert parse_stream_item(str(tmp_path)).kind == "folder"
