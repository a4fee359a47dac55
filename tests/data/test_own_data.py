"""One's own image folders: the class split of a pack (fractions or counts) and the minimum
number of classes an ``n_way``-way episode needs, refused before any image is decoded."""

from __future__ import annotations

import ast
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from avalanche_sets.data.packs import build_pack_from_folder, load_pack
from avalanche_sets.data.splits import (
    RunTarget,
    class_split,
    min_class_images,
    min_classes,
    parse_split,
)
from avalanche_sets.presets import PRESETS, run_target

sys.path.insert(0, str(Path(__file__).parent))
from image_folders import image_folder  # noqa: E402


def _sizes(path: Path) -> list[int]:
    dom = load_pack(path)
    return [dom.classes(s).size for s in ("train", "val", "test")]


def test_six_classes_are_refused_for_five_way_before_decoding(tmp_path, monkeypatch):
    folder = image_folder(tmp_path / "imgs", 6, per_class=2)
    import avalanche_sets.data.packs as packs

    decoded = []
    monkeypatch.setattr(packs, "load_images", lambda *a, **k: decoded.append(1))
    with pytest.raises(ValueError) as err:
        build_pack_from_folder(folder, tmp_path / "p.npz")
    message = str(err.value)
    # the counts, the minimum (3 * n_way) and the ways out
    assert "6 classes split 4/1/1" in message
    assert "at least 15 classes" in message
    assert "--n-way (n_way=) to 2, with --split 2,2,2" in message
    assert "OOD source" in message
    assert not decoded and not (tmp_path / "p.npz").exists()


def test_split_as_counts_and_as_fractions(tmp_path):
    folder = image_folder(tmp_path / "imgs", 20)
    counts = build_pack_from_folder(folder, tmp_path / "c.npz", image_size=8, split=(12, 4, 4),
                                    n_way=4)  # fmt: skip
    assert _sizes(counts) == [12, 4, 4]
    fractions = build_pack_from_folder(folder, tmp_path / "f.npz", image_size=8,
                                       split=(0.5, 0.25, 0.25))  # fmt: skip
    assert _sizes(fractions) == [10, 5, 5]
    # counts follow the shared packs' rule: test first, then val, from one permutation
    perm = np.random.default_rng(3).permutation(15)
    split = class_split(15, (5, 5, 5), seed=3)
    assert set(split[perm[:5]]) == {"test"} and set(split[perm[5:10]]) == {"val"}


def test_split_mistakes_are_named():
    with pytest.raises(ValueError, match=r"add up to 20, but there are 16 classes.*--split 10,3,3"):
        class_split(16, (12, 4, 4))
    with pytest.raises(ValueError, match="add up to 1"):
        class_split(20, (0.6, 0.2, 0.3))
    with pytest.raises(ValueError, match=r"9/3/3.*\['val', 'test'\].*--split 5,5,5"):
        class_split(15, (0.6, 0.2, 0.2), n_way=5)
    assert parse_split("0.6, 0.2, 0.2") == (0.6, 0.2, 0.2)
    assert parse_split("12,4,4") == (12, 4, 4)
    for bad in ("0.6,0.4", "a,b,c", "1,,2"):
        with pytest.raises(ValueError, match="three comma-separated numbers|not a number"):
            parse_split(bad)


def test_an_ood_pack_needs_one_class_per_split(tmp_path):
    folder = image_folder(tmp_path / "imgs", 6)
    path = build_pack_from_folder(folder, tmp_path / "o.npz", image_size=8, n_way=1)
    assert _sizes(path) == [4, 1, 1]


def test_minimums_and_the_small_class_warning(tmp_path):
    assert min_classes(5) == 15
    cpu = run_target("cpu")
    assert cpu == RunTarget.of("cpu", PRESETS["cpu"]) and (cpu.n_shot, cpu.n_query) == (1, 5)
    assert min_class_images(cpu) == 16  # 6 labeled (1 shot + 5 queries) + 10 unlabeled, 40%
    # the paper's episodes: 16 labeled (1 shot + 15 queries) = round(0.4 * 39), 23 unlabeled
    assert min_class_images(run_target("paper")) == 39
    folder = image_folder(tmp_path / "imgs", 15, per_class=16)
    for c in range(3):  # three classes too small for the cpu preset's episodes
        for f in sorted((folder / f"class_{c:02d}").iterdir())[:10]:
            f.unlink()
    with pytest.warns(UserWarning, match=r"3 of 15 classes have fewer than 16 images.*cpu"):
        build_pack_from_folder(folder, tmp_path / "p.npz", image_size=8, split=(5, 5, 5),
                               target=cpu)  # fmt: skip
    with warnings.catch_warnings():  # no runs in view: no class is too small for them
        warnings.simplefilter("error")
        build_pack_from_folder(folder, tmp_path / "q.npz", image_size=8, split=(5, 5, 5))
    with pytest.raises(ValueError, match=r"unknown preset 'cup' \(did you mean 'cpu'\?\)"):
        run_target("cup")


def test_the_data_package_reads_no_preset():
    """The presets sit above the data they configure: no module of ``avalanche_sets.data``
    imports ``avalanche_sets.presets`` (the command line hands a data function its
    :class:`RunTarget`)."""
    data = Path(__file__).resolve().parents[2] / "avalanche_sets" / "data"
    offenders = []
    for path in sorted(data.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom):
                names = [node.module or "", *(a.name for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            if any(n == "presets" or n.endswith(".presets") for n in names):
                offenders.append(f"{path.relative_to(data.parent)}:{node.lineno}")
    assert not offenders, f"data modules import the presets: {offenders}"
