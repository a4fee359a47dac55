"""The paper's nine datasets: tiny fabricated trees in each documented on-disk layout."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from avalanche_sets.data import paper
from avalanche_sets.data.domain import Domain
from avalanche_sets.data.packs import CorruptImageError
from avalanche_sets.data.paper import (
    PAPER_DATASETS,
    PAPER_OOD,
    PAPER_ORDERS,
    DatasetNotFoundError,
    PaperSplitWarning,
    load_paper_domain,
    load_paper_domains,
    locate_paper_dataset,
    paper_dataset,
)

# Tiny trees never have the paper's class counts: that warning is expected here.
pytestmark = pytest.mark.filterwarnings("ignore::avalanche_sets.data.paper.PaperSplitWarning")

SIZE = 8


def _img(path: Path, seed: int, size=(12, 10), mode="RGB") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    arr = rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    Image.fromarray(arr).convert(mode).save(path)


def _folder_classes(base: Path, classes: dict[str, int], ext="jpg", mode="RGB") -> None:
    for k, (name, n) in enumerate(classes.items()):
        for i in range(n):
            _img(base / name / f"{i:03d}.{ext}", 100 * k + i, mode=mode)


def _load(name, root, tmp_path, **kw):
    return load_paper_domain(name, root, image_size=SIZE, cache_dir=tmp_path / "cache", **kw)


def _split_of(dom: Domain) -> dict[str, str]:
    return dict(zip(dom.class_names, dom.class_split.tolist()))


def _check(dom: Domain, name: str, n_images: int) -> None:
    assert isinstance(dom, Domain) and dom.name == name
    assert dom.images.shape == (n_images, SIZE, SIZE, 3) and dom.images.dtype == np.uint8
    assert dom.image_size == SIZE


# ----------------------------------------------------------------------------- specs
def test_specs_orders_and_names():
    ids = [n for n, s in PAPER_DATASETS.items() if s.role == "id"]
    assert sorted(ids) == sorted(PAPER_ORDERS[1]) and len(ids) == 6
    assert [n for n, s in PAPER_DATASETS.items() if s.role == "ood"] == PAPER_OOD
    for order in PAPER_ORDERS.values():
        assert sorted(order) == sorted(ids)
    sizes = {n: s.split_sizes for n, s in PAPER_DATASETS.items()}
    assert sizes["miniimagenet"] == sizes["cifarfs"] == (64, 16, 20)
    assert sizes["cub"] == sizes["plantae"] == (100, 50, 50)
    assert sizes["aircraft"] == (70, 15, 15) and sizes["butterfly"] == (100, 40, 45)
    assert PAPER_DATASETS["fish"].n_classes == 1000 and PAPER_DATASETS["omniglot"].n_classes == 1623
    for s in PAPER_DATASETS.values():
        assert s.layout and s.where and s.split and s.dirnames[0] == s.name
    assert paper_dataset("CIFAR-FS").name == "cifarfs"
    assert paper_dataset("mini-ImageNet").name == "miniimagenet"
    assert paper_dataset("WildFish").name == "fish"
    with pytest.raises(ValueError, match="unknown paper dataset"):
        paper_dataset("imagenet")


# ----------------------------------------------------------------------------- datasets
def _mini_pickles(ds: Path) -> dict[str, list[str]]:
    ds.mkdir(parents=True)
    rng = np.random.default_rng(0)
    classes = {"train": ["n01", "n02", "n03"], "validation": ["n04", "n05"], "test": ["n06", "n07"]}
    for mode, wnids in classes.items():
        n = 4 * len(wnids)
        data = {
            "image_data": rng.integers(0, 256, (n, 84, 84, 3), dtype=np.uint8),
            "class_dict": {w: list(range(4 * k, 4 * k + 4)) for k, w in enumerate(wnids)},
        }
        with open(ds / f"mini-imagenet-cache-{mode}.pkl", "wb") as f:
            pickle.dump(data, f)
    return classes


def test_miniimagenet_pickles(tmp_path):
    classes = _mini_pickles(tmp_path / "data" / "miniimagenet")
    dom = _load("miniimagenet", tmp_path / "data", tmp_path)
    _check(dom, "miniimagenet", 28)
    split = _split_of(dom)
    assert {w for w, s in split.items() if s == "train"} == set(classes["train"])
    assert {w for w, s in split.items() if s == "val"} == set(classes["validation"])
    assert {w for w, s in split.items() if s == "test"} == set(classes["test"])
    assert (dom.part_sizes("all") == 4).all()


def test_miniimagenet_pickle_with_code_is_refused(tmp_path):
    ds = tmp_path / "miniimagenet"
    _mini_pickles(ds)

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    with open(ds / "mini-imagenet-cache-test.pkl", "wb") as f:
        pickle.dump({"image_data": Evil(), "class_dict": {}}, f)
    with pytest.raises(DatasetNotFoundError, match=r"refusing to unpickle builtins\.print"):
        _load("miniimagenet", tmp_path, tmp_path)


def test_miniimagenet_ravi_csv(tmp_path):
    ds = tmp_path / "mini-imagenet"
    rows = {"train": ["n01", "n02"], "val": ["n03"], "test": ["n04", "n05"]}
    seed = 0
    for split, wnids in rows.items():
        lines = ["filename,label"]
        for w in wnids:
            for i in range(3):
                fname = f"{w}0000{i}.jpg"
                seed += 1
                _img(ds / "images" / fname, seed)
                lines.append(f"{fname},{w}")
        (ds / f"{split}.csv").write_text("\n".join(lines) + "\n")
    dom = _load("miniimagenet", tmp_path, tmp_path)
    _check(dom, "miniimagenet", 15)
    assert _split_of(dom) == {w: s for s, ws in rows.items() for w in ws}


def test_cifarfs_with_bertinetto_split_and_fallback(tmp_path):
    base = tmp_path / "cifarfs" / "cifar100"
    names = ["apple", "bear", "cloud", "dolphin", "maple_tree"]
    _folder_classes(base / "data", {n: 3 for n in names}, ext="png")
    splits = {"train": ["apple", "bear", "maple_tree"], "val": ["cloud"], "test": ["dolphin"]}
    (base / "splits" / "bertinetto").mkdir(parents=True)
    for s, ns in splits.items():
        (base / "splits" / "bertinetto" / f"{s}.txt").write_text("\n".join(ns) + "\n")
    dom = _load("cifarfs", tmp_path, tmp_path)
    _check(dom, "cifarfs", 15)
    assert _split_of(dom) == {n: s for s, ns in splits.items() for n in ns}
    assert "Bertinetto" in dom.source

    for p in (base / "splits" / "bertinetto").iterdir():
        p.unlink()
    with pytest.warns(PaperSplitWarning, match="NOT the Bertinetto"):
        fallback = _load("cifarfs", tmp_path, tmp_path, cache=False)
    assert sorted(fallback.class_names) == names
    assert set(fallback.class_split.tolist()) == {"train", "val", "test"}


def test_cub_chen_split(tmp_path):
    names = [f"{i:03d}.Bird_{i}" for i in range(1, 9)]
    _folder_classes(tmp_path / "cub" / "CUB_200_2011" / "images", {n: 2 for n in names})
    dom = _load("cub", tmp_path, tmp_path)
    _check(dom, "cub", 16)
    split = _split_of(dom)
    assert [split[n] for n in names] == ["train", "val", "train", "test"] * 2


def test_aircraft_vuorio_split_and_banner(tmp_path):
    data = tmp_path / "aircraft" / "fgvc-aircraft-2013b" / "data"
    variants = ["707-320", "727-200", "A300B4", "F/A-18", "Cessna 172", "DC-3", "Hawk T1"]
    variants += ["MD-11", "Tu-154", "Yak-42"]
    (data / "images").mkdir(parents=True)
    (data / "variants.txt").write_text("\n".join(variants) + "\n")
    trainval, test = [], []
    for k, v in enumerate(variants):
        for i in range(3):
            image_id = f"{1000000 + 10 * k + i}"
            _img(data / "images" / f"{image_id}.jpg", k * 10 + i, size=(16, 14))
            (test if i == 2 else trainval).append(f"{image_id} {v}")
    banner = np.full((100, 120, 3), 50, dtype=np.uint8)
    banner[-20:] = 0  # FGVC-Aircraft's 20-pixel copyright banner is cropped off
    Image.fromarray(banner).save(data / "images" / "1000000.jpg", quality=100)
    (data / "images_variant_trainval.txt").write_text("\n".join(trainval) + "\n")
    (data / "images_variant_test.txt").write_text("\n".join(test) + "\n")
    dom = _load("aircraft", tmp_path, tmp_path)
    _check(dom, "aircraft", 30)
    assert list(dom.class_names) == variants
    assert np.abs(dom.images[0].astype(int) - 50).max() <= 2
    order = list(variants)
    np.random.RandomState(123).shuffle(order)  # Vuorio et al.: 70% / 15% / rest
    expected = {v: "train" for v in order[:7]} | {order[7]: "val"}
    expected |= {v: "test" for v in order[8:]}
    assert _split_of(dom) == expected


def test_plantae_tseng_rule_and_user_split(tmp_path):
    counts = {f"Species_{c}": n for c, n in zip("ABCDEFGH", [3, 5, 2, 4, 6, 1, 7, 8])}
    _folder_classes(tmp_path / "plantae" / "Plantae", counts)
    dom = _load("plantae", tmp_path, tmp_path)
    _check(dom, "plantae", sum(counts.values()))
    ordered = sorted(counts, key=lambda n: (counts[n], n))  # ascending image count
    split = _split_of(dom)
    assert [split[n] for n in ordered] == ["train", "val", "train", "test"] * 2

    splits_dir = tmp_path / "plantae" / "splits"
    splits_dir.mkdir()
    (splits_dir / "train.txt").write_text("# mine\nSpecies_A\nSpecies_B\n")
    (splits_dir / "val.txt").write_text("Species_C\n")
    (splits_dir / "test.txt").write_text("Species_D\n\n")
    user = _load("plantae", tmp_path, tmp_path)  # new cache key: the split files changed
    assert _split_of(user) == {
        "Species_A": "train",
        "Species_B": "train",
        "Species_C": "val",
        "Species_D": "test",
    }
    assert user.images.shape[0] == 3 + 5 + 2 + 4 and "user split files" in user.source

    (splits_dir / "test.txt").write_text("Species_Z\n")
    with pytest.raises(DatasetNotFoundError, match=r"Species_Z") as err:
        _load("plantae", tmp_path, tmp_path)
    assert "test.txt" in str(err.value)


def test_butterfly_keeps_classes_with_more_than_50_images(tmp_path):
    counts = {"001.Papilio": 51, "002.Troides": 52, "003.Pieris": 51, "004.Delias": 50}
    counts |= {"005.Morpho": 53, "006.Danaus": 10}
    _folder_classes(tmp_path / "butterfly" / "images_small", counts, ext="png")
    dom = _load("butterfly", tmp_path, tmp_path)
    kept = sorted(n for n, c in counts.items() if c > 50)
    _check(dom, "butterfly", sum(counts[n] for n in kept))
    assert sorted(dom.class_names) == kept
    assert [dom.classes(s).size for s in ("train", "val", "test")] == [2, 1, 1]


def test_omniglot_layout_and_ood_split(tmp_path):
    base = tmp_path / "omniglot" / "omniglot-py"
    layout = {
        "images_background": {"Greek": 3, "Latin": 2},
        "images_evaluation": {"Tengwar": 3},
    }
    for part, alphabets in layout.items():
        for alphabet, n_chars in alphabets.items():
            for c in range(1, n_chars + 1):
                for i in range(2):
                    path = base / part / alphabet / f"character{c:02d}" / f"{c:04d}_{i:02d}.png"
                    _img(path, c * 7 + i, size=(20, 20), mode="1")
    dom = _load("omniglot", tmp_path, tmp_path)
    _check(dom, "omniglot", 16)
    assert "Tengwar/character03" in dom.class_names and dom.n_classes == 8
    sizes = [dom.classes(s).size for s in ("train", "val", "test")]
    assert sizes == [4, 2, 2] and sum(sizes) == dom.n_classes  # 60/20/20, disjoint
    grey = dom.images[0]
    assert (grey[..., 0] == grey[..., 2]).all()


def test_vggflower_mat_labels(tmp_path):
    import scipy.io

    ds = tmp_path / "vggflower"
    labels = np.array([3, 1, 2, 3, 1, 5, 4, 2, 5, 4, 1])
    for i in range(1, labels.size + 1):
        _img(ds / "jpg" / f"image_{i:05d}.jpg", i)
    scipy.io.savemat(ds / "imagelabels.mat", {"labels": labels[None, :]})
    dom = _load("vggflower", tmp_path, tmp_path)
    _check(dom, "vggflower", labels.size)
    assert dom.class_names == tuple(f"class_{k:03d}" for k in range(1, 6))
    np.testing.assert_array_equal(dom.part_sizes("all"), np.bincount(labels)[1:])
    assert [dom.classes(s).size for s in ("train", "val", "test")] == [3, 1, 1]


def test_wildfish_parts_are_merged(tmp_path):
    ds = tmp_path / "fish"
    _folder_classes(ds / "WildFish_part1", {"Amphiprion_ocellaris": 2, "Betta_splendens": 2})
    _folder_classes(ds / "WildFish_part2", {"Amphiprion_ocellaris": 1, "Carassius_auratus": 3})
    (ds / "WildFish_part2" / "Amphiprion_ocellaris" / "000.jpg").rename(
        ds / "WildFish_part2" / "Amphiprion_ocellaris" / "x.jpg"
    )
    _folder_classes(ds / "WildFish_part3", {"Danio_rerio": 2, "Esox_lucius": 2})
    dom = _load("fish", tmp_path, tmp_path)
    _check(dom, "fish", 12)
    assert dom.n_classes == 5 and dom.part_sizes("all")[0] == 3


# ----------------------------------------------------------------------------- errors
def test_missing_dataset_names_path_layout_and_source(tmp_path):
    for name in PAPER_DATASETS:
        with pytest.raises(DatasetNotFoundError) as err:
            _load(name, tmp_path, tmp_path)
        message = str(err.value)
        spec = PAPER_DATASETS[name]
        assert isinstance(err.value, FileNotFoundError)
        assert str(tmp_path / spec.dirnames[0]) in message
        assert spec.layout in message and spec.where in message
    with pytest.raises(DatasetNotFoundError, match="root folder does not exist"):
        _load("cub", tmp_path / "nowhere", tmp_path)


def test_malformed_datasets(tmp_path):
    (tmp_path / "cifarfs" / "cifar100" / "data").mkdir(parents=True)
    with pytest.raises(DatasetNotFoundError, match=r"malformed: no class sub-folders"):
        _load("cifarfs", tmp_path, tmp_path)
    ds = tmp_path / "miniimagenet"
    _mini_pickles(ds)
    (ds / "mini-imagenet-cache-validation.pkl").unlink()
    with pytest.raises(DatasetNotFoundError, match=r"mini-imagenet-cache-validation\.pkl"):
        _load("miniimagenet", tmp_path, tmp_path)
    with open(ds / "mini-imagenet-cache-validation.pkl", "wb") as f:
        pickle.dump({"images": np.zeros(3)}, f)
    with pytest.raises(DatasetNotFoundError, match=r"'image_data' and 'class_dict'"):
        _load("miniimagenet", tmp_path, tmp_path)
    vgg = tmp_path / "vggflower"
    (vgg / "jpg").mkdir(parents=True)
    (vgg / "imagelabels.mat").write_bytes(b"not a mat file")
    with pytest.raises(DatasetNotFoundError, match=r"imagelabels\.mat"):
        _load("vggflower", tmp_path, tmp_path)


def test_corrupt_image_names_the_file(tmp_path):
    images = tmp_path / "cub" / "CUB_200_2011" / "images"
    _folder_classes(images, {"001.A": 2, "002.B": 2})
    (images / "002.B" / "broken.jpg").write_bytes(b"\xff\xd8\xffnot really a jpeg")
    with pytest.raises(CorruptImageError, match=r"002\.B.broken\.jpg"):
        _load("cub", tmp_path, tmp_path)


# ----------------------------------------------------------------------------- cache
def test_cache_is_reused_and_keyed_by_size(tmp_path, monkeypatch):
    _folder_classes(tmp_path / "cub" / "images", {f"{i:03d}.X": 2 for i in range(4)})
    first = _load("cub", tmp_path, tmp_path)
    cached = sorted((tmp_path / "cache").glob("cub-8px-*.npz"))
    assert len(cached) == 1

    def boom(*args, **kwargs):
        raise AssertionError("the cache should have been used")

    monkeypatch.setattr(paper, "load_images", boom)
    again = _load("cub", tmp_path, tmp_path)
    np.testing.assert_array_equal(again.images, first.images)
    assert again.class_names == first.class_names and again.source == first.source
    with pytest.raises(AssertionError, match="cache should"):
        _load("cub", tmp_path, tmp_path, refresh=True)
    with pytest.raises(AssertionError, match="cache should"):
        load_paper_domain("cub", tmp_path, image_size=6, cache_dir=tmp_path / "cache")
    monkeypatch.undo()
    monkeypatch.setenv("AVALANCHE_SETS_CACHE", str(tmp_path / "env_cache"))
    load_paper_domain("cub", tmp_path, image_size=4)
    assert len(list((tmp_path / "env_cache").glob("cub-4px-*.npz"))) == 1


def test_locate_and_load_many(tmp_path):
    _folder_classes(tmp_path / "CUB_200_2011" / "images", {"001.A": 1, "002.B": 1})
    assert locate_paper_dataset("cub", tmp_path) == tmp_path / "CUB_200_2011"
    assert locate_paper_dataset("cub", tmp_path / "CUB_200_2011") == tmp_path / "CUB_200_2011"
    _mini_pickles(tmp_path / "miniimagenet")
    doms = load_paper_domains(
        tmp_path, ["CUB-200", "miniimagenet"], image_size=SIZE, cache_dir=tmp_path / "c"
    )
    assert list(doms) == ["cub", "miniimagenet"]
