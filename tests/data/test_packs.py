"""Domain packs: real shared packs, malformed packs, and the image folder -> pack round trip."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from avalanche_sets.data.domain import Domain
from avalanche_sets.data.episodes import EpisodeConfig, EpisodeSampler
from avalanche_sets.data.packs import (
    CorruptImageError,
    build_pack_from_folder,
    list_packs,
    load_pack,
    load_packs,
    save_pack,
    split_classes,
)


def _shared_packs() -> Path:
    env = os.environ.get("AVALANCHE_SETS_SHARED_DATA")
    if env:
        base = Path(env).expanduser()
        return base / "sets-mini" if (base / "sets-mini").is_dir() else base
    return Path(__file__).resolve().parents[2].parent / "shared" / "data" / "sets-mini"


@pytest.fixture(scope="module")
def shared() -> Path:
    root = _shared_packs()
    if not (root / "ood_textures.npz").is_file():
        pytest.skip(f"shared domain packs not found at {root}")
    return root


def _arrays(n_classes=3, per_class=4, size=8, **override):
    rng = np.random.default_rng(0)
    arrays = {
        "images": rng.integers(0, 256, (n_classes * per_class, size, size, 3), dtype=np.uint8),
        "labels": np.repeat(np.arange(n_classes), per_class).astype(np.int32),
        "class_names": np.array([f"c{i}" for i in range(n_classes)]),
        "class_split": np.array(["train", "val", "test"][:n_classes]),
        "source": np.array("unit test"),
    }
    arrays.update(override)
    return {k: v for k, v in arrays.items() if v is not None}


# ----------------------------------------------------------------------------- real packs
def test_real_pack_loads_with_its_shapes_and_split(shared):
    assert {"ood_textures", "gtsrb", "ood_fish"} <= set(list_packs(shared))
    dom = load_pack(shared / "ood_textures.npz")
    assert isinstance(dom, Domain) and dom.name == "ood_textures"
    assert dom.images.shape == (1000, 32, 32, 3) and dom.images.dtype == np.uint8
    assert dom.n_classes == 10 and "crosshatched" in dom.class_names
    assert [dom.classes(s).size for s in ("train", "val", "test")] == [6, 2, 2]
    assert "DTD" in dom.source
    # labeled/unlabeled split of 100 images per class: 40 / 60
    assert set(dom.part_sizes("labeled").tolist()) == {40}

    small = load_pack(shared / "ood_textures.npz", image_size=16, name="tex")
    assert small.name == "tex" and small.images.shape == (1000, 16, 16, 3)
    np.testing.assert_array_equal(small.labels, dom.labels)


def test_split_classes_reproduces_the_shared_packs(shared):
    for name in ("ood_textures", "ood_fish", "gtsrb"):  # C = 10, 22 (n >= 5 rule), 43
        with np.load(shared / f"{name}.npz") as z:
            split = z["class_split"]
        np.testing.assert_array_equal(split_classes(len(split), seed=0), split)


def test_load_packs_and_missing_paths(shared, tmp_path):
    packs = load_packs(shared, ["ood_textures"])
    assert list(packs) == ["ood_textures"]
    with pytest.raises(FileNotFoundError, match="nope.npz"):
        load_packs(shared, ["nope"])
    with pytest.raises(FileNotFoundError, match=r"folder of <name>\.npz"):
        list_packs(tmp_path / "absent")
    with pytest.raises(FileNotFoundError, match="absent.npz"):
        load_pack(tmp_path / "absent.npz")


# ----------------------------------------------------------------------------- malformed
@pytest.mark.parametrize(
    "override, pattern",
    [
        ({"class_split": None}, r"missing key\(s\) \['class_split'\]"),
        ({"images": np.zeros((12, 8, 8, 3), np.float32)}, r"'images' must be uint8.*float32"),
        ({"images": np.zeros((12, 8, 6, 3), np.uint8)}, r"'images' must be square"),
        ({"labels": np.zeros(12, np.float64)}, r"'labels' must be an integer array"),
        ({"labels": np.full(12, 7)}, r"'labels' must be class ids in 0\.\.2"),
        ({"class_split": np.array(["train", "valid", "test"])}, r"'class_split'.*\['valid'\]"),
        ({"class_split": np.array(["train", "val"])}, r"'class_split' must be shape \[3\]"),
        ({"class_names": np.array(["a", "a", "b"])}, r"'class_names' must be unique"),
    ],
)
def test_malformed_pack_errors_name_file_and_key(tmp_path, override, pattern):
    path = tmp_path / "bad_pack.npz"
    np.savez(path, **_arrays(**override))
    with pytest.raises(ValueError, match=pattern) as err:
        load_pack(path)
    assert "bad_pack.npz" in str(err.value)


def test_pickled_and_non_npz_files_are_refused(tmp_path):
    path = tmp_path / "pickled.npz"
    np.savez(path, **_arrays(class_names=np.array(["a", "b", "c"], dtype=object)))
    with pytest.raises(ValueError, match=r"pickled.npz.*'class_names'.*pickled object array"):
        load_pack(path)
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"definitely not a zip file")
    with pytest.raises(ValueError, match="junk.npz"):
        load_pack(junk)


def test_save_pack_round_trip_is_atomic(tmp_path):
    arrays = _arrays()
    dom = Domain("d", arrays["images"], arrays["labels"], ["a", "b", "c"], arrays["class_split"])
    out = save_pack(dom, tmp_path / "sub" / "d.npz", source="made here")
    assert sorted(p.name for p in out.parent.iterdir()) == ["d.npz"]  # no temporary left
    back = load_pack(out)
    np.testing.assert_array_equal(back.images, dom.images)
    np.testing.assert_array_equal(back.labels, dom.labels)
    assert back.class_names == ("a", "b", "c") and back.source == "made here"
    with np.load(out, allow_pickle=False) as z:  # readable without pickle
        assert set(z.files) == {"images", "labels", "class_names", "class_split", "source"}
    with pytest.raises(ValueError, match="'labels'"):
        save_pack(_arrays(labels=np.arange(12)), tmp_path / "x.npz")
    assert not (tmp_path / "x.npz").exists()


# ----------------------------------------------------------------------------- folders
def _fabricate_folder(root: Path, n_classes=8, per_class=12) -> dict[str, list]:
    """Tiny image folder: per class a distinct colour, various sizes and modes."""
    colours = {}
    for c in range(n_classes):
        d = root / f"class_{c:02d}"
        d.mkdir(parents=True)
        base = np.array([30 * c % 256, 255 - 25 * c, (60 + 40 * c) % 256], dtype=np.uint8)
        colours[d.name] = base
        for i in range(per_class):
            w, h = 10 + (i % 3) * 3, 10 + (i % 2) * 4  # some non-square
            arr = np.broadcast_to(base, (h, w, 3)).copy()
            arr[0, 0] = (i * 17) % 256  # make images differ
            img = Image.fromarray(arr)
            if i == 1:
                img = img.convert("L")  # grey -> replicated
            if i == 3:
                img = img.convert("RGBA")  # saved as png (odd i)
            img.save(d / f"img_{i:02d}.{'png' if i % 2 else 'jpg'}")
    # a fully transparent image must come out white
    Image.new("RGBA", (9, 9), (0, 0, 0, 0)).save(root / "class_00" / "zz_transparent.png")
    (root / "class_00" / "notes.txt").write_text("not an image")
    return colours


def test_folder_to_pack_to_domain_to_episodes(tmp_path):
    folder = tmp_path / "imgs"
    _fabricate_folder(folder)
    with pytest.warns(UserWarning, match="ignored 1 file"):
        out = build_pack_from_folder(
            folder, tmp_path / "packs" / "mine.npz", image_size=8, seed=3, n_way=2
        )
    dom = load_pack(out)
    assert dom.name == "mine" and dom.images.shape == (8 * 12 + 1, 8, 8, 3)
    assert dom.class_names == tuple(f"class_{c:02d}" for c in range(8))
    np.testing.assert_array_equal(dom.class_split, split_classes(8, (0.6, 0.2, 0.2), seed=3))
    assert [dom.classes(s).size for s in ("train", "val", "test")] == [4, 2, 2]
    assert str(folder) in dom.source

    with np.load(out) as z:
        pixels = z["images"]
    # transparent RGBA -> white, grey -> three equal channels
    assert (pixels[12] == 255).all()  # class_00 sorted: img_00..img_11, zz_transparent
    grey = pixels[1]
    assert (grey[..., 0] == grey[..., 1]).all() and (grey[..., 1] == grey[..., 2]).all()

    cfg = EpisodeConfig(n_way=3, n_shot=1, n_query=3, n_unlabeled=4, n_ood=0)
    sampler = EpisodeSampler(dom, split="train", config=cfg, seed=0)
    for i in range(3):
        ep = sampler.sample(i)
        o = ep.oracle
        s_idx, q_idx = o.support_index.numpy(), o.query_index.numpy()
        u_idx = o.unlabeled_index.numpy()
        assert not set(s_idx) & set(q_idx) and not set(u_idx) & (set(s_idx) | set(q_idx))
        np.testing.assert_array_equal(ep.support_x.numpy(), pixels[s_idx])
        np.testing.assert_array_equal(ep.query_x.numpy(), pixels[q_idx])
        np.testing.assert_array_equal(ep.unlabeled_x.numpy(), pixels[u_idx])
        classes = o.class_ids.numpy()
        assert set(dom.class_split[classes]) == {"train"}
        np.testing.assert_array_equal(dom.labels[s_idx], np.repeat(classes, 1))


def test_folder_split_ratios_and_small_classes(tmp_path):
    folder = tmp_path / "imgs"
    for c in range(10):
        (folder / f"k{c}").mkdir(parents=True)
        for i in range(2 if c else 1):
            Image.new("RGB", (4, 4), (c, i, 0)).save(folder / f"k{c}" / f"{i}.png")
    with pytest.warns(UserWarning, match=r"left out 1 class.*'k0' \(1\)"):
        out = build_pack_from_folder(
            folder,
            tmp_path / "p.npz",
            image_size=4,
            split=(5, 3, 1),
            n_way=1,
            min_images_per_class=2,
        )
    dom = load_pack(out)
    assert dom.n_classes == 9
    assert [dom.classes(s).size for s in ("train", "val", "test")] == [5, 3, 1]


def test_corrupt_image_is_reported_by_name(tmp_path):
    folder = tmp_path / "imgs"
    _fabricate_folder(folder, n_classes=2, per_class=2)
    (folder / "class_01" / "broken.jpg").write_bytes(b"\xff\xd8\xff garbage")
    with pytest.raises(CorruptImageError, match=r"broken\.jpg"):
        with pytest.warns(UserWarning):
            build_pack_from_folder(folder, tmp_path / "out.npz", image_size=4, n_way=None)
    assert not (tmp_path / "out.npz").exists()


def test_folder_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="one sub-folder per class"):
        build_pack_from_folder(tmp_path / "absent", tmp_path / "o.npz")
    (tmp_path / "flat").mkdir()
    Image.new("RGB", (4, 4)).save(tmp_path / "flat" / "a.png")
    with pytest.raises(ValueError, match="no class sub-folders"):
        build_pack_from_folder(tmp_path / "flat", tmp_path / "o.npz")
    (tmp_path / "empty" / "cls").mkdir(parents=True)
    with pytest.raises(ValueError, match="no class with at least 1 image"):
        with pytest.warns(UserWarning):
            build_pack_from_folder(tmp_path / "empty", tmp_path / "o.npz")


def test_split_classes_general_ratios():
    for c in (1, 2, 3, 7, 19, 20, 100):
        split = split_classes(c, (0.6, 0.2, 0.2), seed=1)
        assert split.shape == (c,) and (split == "train").sum() >= 1
    assert [(split_classes(100, (70, 15, 15)) == s).sum() for s in ("train", "val", "test")] == [
        70,
        15,
        15,
    ]
    assert set(split_classes(10, (1, 0, 0)).tolist()) == {"train"}
    with pytest.raises(ValueError, match="three non-negative ratios"):
        split_classes(10, (0.5, -0.1, 0.6))
