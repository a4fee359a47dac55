"""The paper's nine datasets: tiny fabricated trees in each documented on-disk layout."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from avalanche_sets.data.domain import Domain
from avalanche_sets.data.packs import CorruptImageError
from avalanche_sets.data.paper import (
    PAPER_DATASETS,
    PAPER_OOD,
    PAPER_ORDERS,
    DatasetNotFoundError,
    PaperDataWarning,
    PaperSplitWarning,
    check_figures,
    load_paper_domain,
    load_paper_domains,
    locate_paper_dataset,
    paper_dataset,
)
from avalanche_sets.data.paper import _load as paper_load
from avalanche_sets.data.paper._common import _Listing

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


def _wildfish(base: Path, parts: dict[str, dict[str, int]]) -> None:
    """The release: flat ``Genus_species_N.jpg`` files in ``WildFish_partK/`` folders."""
    seed = 0
    for part, species in parts.items():
        for name, n in species.items():
            for _ in range(n):
                seed += 1
                _img(base / part / f"{name}_{seed}.jpg", seed)


_WILDFISH = {
    "WildFish_part1": {"Amphiprion_ocellaris": 2, "Betta_splendens": 2},
    "WildFish_part2": {"Amphiprion_ocellaris": 1, "Carassius_auratus": 3},
    "WildFish_part3": {"Danio_rerio": 2, "Esox_lucius_lucius": 2},
}


@pytest.mark.parametrize("wrapper", ["", "images"])
def test_wildfish_parts_are_merged(tmp_path, wrapper):
    """Species come from the file names, merged across parts, with or without images/."""
    _wildfish(tmp_path / "fish" / wrapper, _WILDFISH)
    dom = _load("fish", tmp_path, tmp_path)
    _check(dom, "fish", 12)
    assert list(dom.class_names) == [
        "Amphiprion_ocellaris",
        "Betta_splendens",
        "Carassius_auratus",
        "Danio_rerio",
        "Esox_lucius_lucius",
    ]
    assert dom.part_sizes("all").tolist() == [3, 2, 3, 2, 2]
    # the dataset folder itself as root, and species sorted into folders by a user
    assert _load("fish", tmp_path / "fish", tmp_path).class_names == dom.class_names
    sorted_root = tmp_path / "sorted" / "wildfish"
    _folder_classes(sorted_root / "WildFish_part1", {"Danio_rerio": 2})
    _folder_classes(sorted_root / "WildFish_part2", {"Danio_rerio": 1, "Esox_lucius": 1})
    assert _load("fish", tmp_path / "sorted", tmp_path).part_sizes("all").tolist() == [3, 1]


def test_wildfish_bad_file_name_is_refused(tmp_path):
    _wildfish(tmp_path / "fish", {"WildFish_part1": {"Danio_rerio": 2}})
    _img(tmp_path / "fish" / "WildFish_part1" / "IMG0001.jpg", 1)
    with pytest.raises(DatasetNotFoundError, match=r"<Genus_species>_<N>.*IMG0001\.jpg"):
        _load("fish", tmp_path, tmp_path)


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

    monkeypatch.setattr(paper_load, "load_images", boom)
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
    images = tmp_path / "CUB_200_2011" / "images"
    assert locate_paper_dataset("cub", tmp_path) == images
    assert locate_paper_dataset("cub", tmp_path / "CUB_200_2011") == images
    _mini_pickles(tmp_path / "miniimagenet")
    doms = load_paper_domains(
        tmp_path, ["CUB-200", "miniimagenet"], image_size=SIZE, cache_dir=tmp_path / "c"
    )
    assert list(doms) == ["cub", "miniimagenet"]


# ----------------------------------------------------------------------------- real layouts
# Each test builds a tree shaped like what a user has on disk after downloading: the real
# file and folder names and metadata files of the release, torchvision, learn2learn,
# torchmeta or the ORDER authors' archive.
WNIDS = ["n01532829", "n01558993", "n01704323", "n01749939", "n01770081", "n01843383"]


def _mini_pickles_named(ds: Path, val_name: str) -> None:
    ds.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for mode, wnids in {"train": WNIDS[:3], val_name: WNIDS[3:4], "test": WNIDS[4:]}.items():
        data = {
            "image_data": rng.integers(0, 256, (3 * len(wnids), 84, 84, 3), dtype=np.uint8),
            "class_dict": {w: [3 * k, 3 * k + 1, 3 * k + 2] for k, w in enumerate(wnids)},
        }
        with open(ds / f"mini-imagenet-cache-{mode}.pkl", "wb") as f:
            pickle.dump(data, f)


@pytest.mark.parametrize("val_name", ["val", "validation"])
def test_miniimagenet_pickle_names_of_ren_torchmeta_and_learn2learn(tmp_path, val_name):
    _mini_pickles_named(tmp_path / "mini-imagenet", val_name)
    dom = _load("miniimagenet", tmp_path, tmp_path)
    assert _split_of(dom) == {w: "train" for w in WNIDS[:3]} | {WNIDS[3]: "val"} | {
        w: "test" for w in WNIDS[4:]
    }
    assert dom.images.shape[0] == 18


def test_miniimagenet_both_validation_pickles_are_ambiguous(tmp_path):
    _mini_pickles_named(tmp_path / "miniimagenet", "val")
    _mini_pickles_named(tmp_path / "miniimagenet", "validation")
    with pytest.raises(DatasetNotFoundError, match=r"both mini-imagenet-cache-val\.pkl and"):
        _load("miniimagenet", tmp_path, tmp_path)


def test_miniimagenet_vinyals_csv_with_class_header(tmp_path):
    ds = tmp_path / "miniImagenet"
    rows = {"train": WNIDS[:2], "val": WNIDS[2:3], "test": WNIDS[3:5]}
    seed = 0
    for split, wnids in rows.items():
        lines = ["filename,class"]
        for w in wnids:
            for i in range(2):
                seed += 1
                fname = f"{w}{i + 1:08d}.jpg"
                _img(ds / "images" / fname, seed)
                lines.append(f"{fname},{w}")
        (ds / f"{split}.csv").write_text("\n".join(lines) + "\n")
    dom = _load("miniimagenet", tmp_path, tmp_path)
    assert _split_of(dom) == {w: s for s, ws in rows.items() for w in ws}
    assert "filename" not in dom.class_names


def test_miniimagenet_split_folders(tmp_path):
    ds = tmp_path / "mini_imagenet_full_size"
    rows = {"train": WNIDS[:3], "val": WNIDS[3:4], "test": WNIDS[4:]}
    for split, wnids in rows.items():
        _folder_classes(ds / split, {w: 2 for w in wnids})
    dom = _load("miniimagenet", tmp_path, tmp_path)
    assert _split_of(dom) == {w: s for s, ws in rows.items() for w in ws}


def test_flowers_torchvision_layout(tmp_path):
    import scipy.io

    base = tmp_path / "flowers-102"
    labels = np.array([2, 1, 3, 2, 1, 3, 3])
    for i in range(1, labels.size + 1):
        _img(base / "jpg" / f"image_{i:05d}.jpg", i)
    scipy.io.savemat(base / "imagelabels.mat", {"labels": labels[None, :]})
    ids = {"trnid": [[1, 2]], "valid": [[3, 4]], "tstid": [[5, 6, 7]]}  # image split: ignored
    scipy.io.savemat(base / "setid.mat", ids)
    dom = _load("vggflower", tmp_path, tmp_path)
    assert dom.class_names == ("class_001", "class_002", "class_003")
    assert dom.part_sizes("all").tolist() == [2, 2, 3]
    assert "torchvision Flowers102" in dom.source
    assert _load("vggflower", base, tmp_path).class_names == dom.class_names


PLANTS = {"Quercus agrifolia": 5, "Rosa californica": 3, "Yucca schidigera": 4, "Acer rubrum": 2}


@pytest.mark.parametrize(
    ("tree", "root"),
    [
        ("Plantae", ""),  # Tseng et al.'s plantae.tar.gz unpacked in root
        ("Plantae", "Plantae"),  # ... and that folder passed as root
        ("plantae/Plantae", ""),  # the documented layout
        ("train_val_images/Plantae", ""),  # iNaturalist 2017 unpacked in root
        ("inat2017/train_val_images/Plantae", ""),
        ("train_val_images/Plantae", "train_val_images"),
        ("2017/Plantae", ""),  # torchvision INaturalist(version="2017")
    ],
)
def test_plantae_layouts(tmp_path, tree, root):
    _folder_classes(tmp_path / "data" / tree, PLANTS)
    dom = _load("plantae", tmp_path / "data" / root, tmp_path)
    assert sorted(dom.class_names) == sorted(PLANTS)
    ordered = sorted(PLANTS, key=lambda n: (PLANTS[n], n))  # Tseng's rule
    assert [_split_of(dom)[n] for n in ordered] == ["train", "val", "train", "test"]


def test_generic_folders_in_a_shared_root_are_not_taken_for_a_dataset(tmp_path):
    # <root>/images/ could be anything: read as species only in a folder named like Plantae
    _folder_classes(tmp_path / "images", PLANTS)
    for name in ("plantae", "cub", "butterfly"):
        with pytest.raises(DatasetNotFoundError, match="none of the accepted layouts"):
            _load(name, tmp_path, tmp_path)
    (tmp_path / "images").rename(tmp_path / "inat2017")
    assert sorted(_load("plantae", tmp_path / "inat2017", tmp_path).class_names) == sorted(PLANTS)


def test_plantae_user_split_for_a_shared_root(tmp_path):
    _folder_classes(tmp_path / "Plantae", PLANTS)
    splits = tmp_path / "splits" / "plantae"  # the root holds several datasets
    splits.mkdir(parents=True)
    (splits / "train.txt").write_text("Acer rubrum\nRosa californica\n")
    (splits / "val.txt").write_text("Quercus agrifolia\n")
    (splits / "test.txt").write_text("Yucca schidigera\n")
    dom = _load("plantae", tmp_path, tmp_path)
    assert _split_of(dom)["Quercus agrifolia"] == "val" and "user split" in dom.source


def test_plantae_tseng_json_split(tmp_path):
    import json

    base = tmp_path / "plantae"
    _folder_classes(base / "images", PLANTS)
    names = ["Acer rubrum", "Rosa californica", "Yucca schidigera", "Quercus agrifolia"]
    for fname, labels in (("base.json", [0, 0, 2]), ("val.json", [1]), ("novel.json", [3])):
        meta = {"label_names": names, "image_names": ["x"] * len(labels), "image_labels": labels}
        (base / fname).write_text(json.dumps(meta))
    dom = _load("plantae", tmp_path, tmp_path)
    assert _split_of(dom) == {
        "Acer rubrum": "train",
        "Yucca schidigera": "train",
        "Rosa californica": "val",
        "Quercus agrifolia": "test",
    }
    assert "Tseng et al. (2020) split from" in dom.source


CIFAR = {"train": ["apple", "bear", "maple_tree"], "val": ["cloud"], "test": ["dolphin"]}


@pytest.mark.parametrize("root", ["", "cifar100"])
def test_cifarfs_r2d2_layout_in_root(tmp_path, root):
    base = tmp_path / "cifar100"  # Bertinetto et al.'s $DATASET_PATH/cifar100
    _folder_classes(base / "data", {n: 2 for ns in CIFAR.values() for n in ns}, ext="png")
    (base / "splits" / "bertinetto").mkdir(parents=True)
    for s, ns in CIFAR.items():
        (base / "splits" / "bertinetto" / f"{s}.txt").write_text("\n".join(ns) + "\n")
    dom = _load("cifarfs", tmp_path / root, tmp_path)
    assert _split_of(dom) == {n: s for s, ns in CIFAR.items() for n in ns}
    assert "Bertinetto" in dom.source


def test_cifarfs_learn2learn_processed_folders(tmp_path):
    base = tmp_path / "cifarfs" / "processed"  # learn2learn after its first use, raw zip gone
    for split, names in CIFAR.items():
        _folder_classes(base / split, {n: 2 for n in names}, ext="png")
    dom = _load("cifarfs", tmp_path, tmp_path)
    assert _split_of(dom) == {n: s for s, ns in CIFAR.items() for n in ns}
    assert "learn2learn's copy" in dom.source


def test_cifarfs_from_torchvision_cifar100_warns(tmp_path):
    base = tmp_path / "cifar-100-python"
    base.mkdir()
    names = ["apple", "bear", "cloud", "dolphin", "maple_tree"]
    with open(base / "meta", "wb") as f:
        pickle.dump({"fine_label_names": names, "coarse_label_names": ["x"]}, f)
    rng = np.random.default_rng(0)
    for part, labels in (("train", [0, 1, 2, 3, 4, 0]), ("test", [4, 3])):
        data = {"data": rng.integers(0, 256, (len(labels), 3072), dtype=np.uint8)}
        data["fine_labels"] = labels
        with open(base / part, "wb") as f:
            pickle.dump(data, f)
    with pytest.warns(PaperSplitWarning, match="raw CIFAR-100 without Bertinetto"):
        dom = _load("cifarfs", tmp_path, tmp_path)
    assert list(dom.class_names) == names
    assert dom.part_sizes("all").tolist() == [2, 1, 1, 2, 2]
    # channels: CIFAR stores planes R, G, B of 32x32; the domain is HWC
    first = pickle.loads((base / "train").read_bytes())["data"][0].reshape(3, 32, 32)
    resized = load_paper_domain(
        "cifarfs", tmp_path, image_size=32, cache_dir=tmp_path / "c32"
    ).images[0]
    np.testing.assert_array_equal(resized, first.transpose(1, 2, 0))


@pytest.mark.parametrize("root", ["", "omniglot"])
def test_omniglot_zips_unpacked_in_root(tmp_path, root):
    for part, alphabet in (("images_background", "Greek"), ("images_evaluation", "Tengwar")):
        for c in (1, 2):
            for i in range(2):
                path = tmp_path / root / part / alphabet / f"character{c:02d}" / f"{i:02d}.png"
                _img(path, 10 * c + i, size=(20, 20), mode="1")
    with pytest.warns(PaperSplitWarning, match="NOT the Vinyals split"):
        dom = _load("omniglot", tmp_path, tmp_path)
    assert sorted(dom.class_names) == [
        "Greek/character01",
        "Greek/character02",
        "Tengwar/character01",
        "Tengwar/character02",
    ]


def test_aircraft_torchvision_layout_in_root(tmp_path):
    data = tmp_path / "fgvc-aircraft-2013b" / "data"
    variants = ["707-320", "A300B4", "Cessna 172", "DC-3"]
    (data / "images").mkdir(parents=True)
    (data / "variants.txt").write_text("\n".join(variants) + "\n")
    lines = []
    for k, v in enumerate(variants):
        _img(data / "images" / f"{1000 + k}.jpg", k, size=(40, 40))
        lines.append(f"{1000 + k} {v}")
    (data / "images_variant_trainval.txt").write_text("\n".join(lines) + "\n")
    (data / "images_variant_test.txt").write_text("")
    assert _load("aircraft", tmp_path, tmp_path).class_names == tuple(variants)


def _butterfly_release(base: Path, per_split: dict[str, list[str]]) -> dict[str, int]:
    """images_small/<NNN.Genus_species>/ + species.txt + Butterfly200_*_release.txt."""
    species = sorted({s for names in per_split.values() for s in names})
    counts = dict.fromkeys(species, 0)
    for split, names in per_split.items():
        lines = []
        for k, name in enumerate(names):
            rel = f"{name}/{split}_{k}_{counts[name]}.jpg"
            counts[name] += 1
            _img(base / "images_small" / rel, len(lines) + 7 * k)
            label = species.index(name) + 1
            lines.append(f"{rel} {label} {label} 1 1")
        (base / f"Butterfly200_{split}_release.txt").write_text("\n".join(lines) + "\n")
    (base / "species.txt").write_text(
        "\n".join(f"{i + 1} {n}" for i, n in enumerate(species)) + "\n"
    )
    return counts


def test_butterfly_release_files_split_images_not_species(tmp_path):
    names = ["001.Atrophaneura_horishanus", "002.Byasa_alcinous", "003.Troides_aeacus"]
    # every species in all three files (51 images each: the paper keeps species with > 50)
    per_split = {"train": names * 49, "val": names, "test": names}
    counts = _butterfly_release(tmp_path / "Butterfly200", per_split)
    dom = _load("butterfly", tmp_path, tmp_path)
    assert sorted(dom.class_names) == names and set(counts.values()) == {51}
    assert dom.images.shape[0] == 153
    assert "split images, not species" in dom.source
    assert "ORDER appendix A" in dom.source  # the documented seeded rule, not the files


def test_butterfly_release_split_by_species_is_used(tmp_path):
    names = ["001.Atrophaneura_horishanus", "002.Byasa_alcinous", "003.Troides_aeacus"]
    per_split = {"train": [names[0]] * 2, "val": [names[1]], "test": [names[2]]}
    _butterfly_release(tmp_path / "butterfly", per_split)
    dom = _load("butterfly", tmp_path, tmp_path)
    assert _split_of(dom) == {names[0]: "train", names[1]: "val", names[2]: "test"}
    (tmp_path / "butterfly" / "images_small" / names[1] / "val_0_0.jpg").unlink()
    with pytest.raises(DatasetNotFoundError, match=r"listed in Butterfly200_val_release\.txt"):
        _load("butterfly", tmp_path, tmp_path, cache=False)


# ----------------------------------------------------------------------------- authors' archive
def _labels_json(folder: Path, split: str, labels) -> None:
    import json

    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{split}_labels.json").write_text(json.dumps(labels))


def _authors_pt(folder: Path, splits: dict[str, list[str]], value: float = 0.5) -> None:
    """``<Folder>/{split}_labels.json`` + ``<Folder>/<split>/<label>.pt`` = {label: [n,3,H,W]}."""
    import torch

    for split, labels in splits.items():
        _labels_json(folder, split, labels)
        (folder / split).mkdir(parents=True, exist_ok=True)
        for k, label in enumerate(labels):
            images = torch.full((2 + k, 3, 10, 10), value, dtype=torch.float32)
            torch.save({label: images}, folder / split / f"{label}.pt")


def _torchmeta_mini(folder: Path, splits: dict[str, list[str]]) -> None:
    import h5py

    rng = np.random.default_rng(1)
    for split, wnids in splits.items():
        _labels_json(folder, split, sorted(wnids))
        with h5py.File(folder / f"{split}_data.hdf5", "w") as f:
            group = f.create_group("datasets")
            for w in wnids:
                group.create_dataset(w, data=rng.integers(0, 256, (3, 12, 12, 3), dtype=np.uint8))


def _torchmeta_cifarfs(folder: Path, splits: dict[str, list[list[str]]]) -> None:
    import h5py

    rng = np.random.default_rng(2)
    folder.mkdir(parents=True, exist_ok=True)
    with h5py.File(folder / "data.hdf5", "w") as f:
        for pairs in splits.values():
            for coarse, fine in pairs:
                group = f.require_group(coarse)
                group.create_dataset(fine, data=rng.integers(0, 256, (4, 32, 32, 3), np.uint8))
    for split, pairs in splits.items():
        _labels_json(folder / "cifar-fs", split, pairs)


def _torchmeta_omniglot(folder: Path, splits: dict[str, list[list[str]]]) -> None:
    import h5py

    folder.mkdir(parents=True, exist_ok=True)
    strokes = np.zeros((2, 12, 12), dtype=np.uint8)  # torchmeta stores them inverted
    strokes[:, 5, :] = 255
    with h5py.File(folder / "data.hdf5", "w") as f:
        for triples in splits.values():
            for group, alphabet, char in triples:
                f.create_dataset(f"{group}/{alphabet}/{char}", data=strokes)
    for split, triples in splits.items():
        _labels_json(folder, f"vinyals_{split}", triples)


def _authors_archive(root: Path) -> dict[str, dict]:
    """The authors' data folder: their .pt datasets, fishprocess.pt and torchmeta's three."""
    import torch

    splits = {
        "CUB": {"train": ["001.Black_footed_Albatross"], "val": ["002.Laysan_Albatross"]},
        "Aircraft": {"train": ["A300B4", "DC-3"], "val": ["Tu-154"]},
        "Plantae": {"train": ["Acer rubrum"], "val": ["Rosa californica"]},
        "Butterfly": {"train": ["001.Atrophaneura_horishanus"], "val": ["002.Byasa_alcinous"]},
        "vgg_flower": {"train": ["class_001", "class_002"], "val": ["class_003"]},
    }
    for folder, split in splits.items():
        split["test"] = [f"{folder}_test_class"]
        _authors_pt(root / folder, split)
    torch.save([torch.rand(3, 10, 10) for _ in range(10)], root / "fishprocess.pt")
    _torchmeta_mini(
        root / "miniimagenet", {"train": WNIDS[:2], "val": WNIDS[2:4], "test": WNIDS[4:]}
    )
    cifar = {
        "train": [["fish", "shark"]],
        "val": [["insects", "bee"]],
        "test": [["trees", "oak_tree"]],
    }
    _torchmeta_cifarfs(root / "cifar100", cifar)
    omni = {
        "train": [["images_background", "Greek", "character01"]],
        "val": [["images_background", "Greek", "character02"]],
        "test": [["images_evaluation", "Tengwar", "character01"]],
    }
    _torchmeta_omniglot(root / "omniglot", omni)
    return splits


def test_authors_archive_gives_their_splits(tmp_path, recwarn):
    splits = _authors_archive(tmp_path / "data")
    domains = load_paper_domains(tmp_path / "data", image_size=SIZE, cache_dir=tmp_path / "c")
    by_folder = {
        "CUB": "cub",
        "Aircraft": "aircraft",
        "Plantae": "plantae",
        "Butterfly": "butterfly",
        "vgg_flower": "vggflower",
    }
    for folder, name in by_folder.items():
        dom = domains[name]
        assert _split_of(dom) == {c: s for s, cs in splits[folder].items() for c in cs}, name
        assert "the authors' own split" in dom.source and folder in dom.source
        assert (dom.images == 128).all()  # ToTensor floats 0.5 -> 128
    assert _split_of(domains["miniimagenet"]) == {
        WNIDS[0]: "train",
        WNIDS[1]: "train",
        WNIDS[2]: "val",
        WNIDS[3]: "val",
        WNIDS[4]: "test",
        WNIDS[5]: "test",
    }
    assert _split_of(domains["cifarfs"]) == {"shark": "train", "bee": "val", "oak_tree": "test"}
    omni = domains["omniglot"]
    assert _split_of(omni) == {
        "Greek/character01": "train",
        "Greek/character02": "val",
        "Tengwar/character01": "test",
    }
    assert omni.images.mean() > 200  # inverted back: black strokes on white
    fish = domains["fish"]
    assert fish.classes("train").size == 1 and fish.part_sizes("all").tolist() == [7, 1, 2]
    assert "first 70%" in fish.source
    # the authors' own splits are the paper's: no split-size warning for them
    size_warnings = [
        str(w.message) for w in recwarn if "differs from the paper's" in str(w.message)
    ]
    assert size_warnings == [], size_warnings


def test_authors_dataset_folder_as_root_is_only_that_dataset(tmp_path):
    splits = {"train": ["001.A"], "val": ["002.B"], "test": ["003.C"]}
    _authors_pt(tmp_path / "CUB", splits)
    assert _split_of(_load("cub", tmp_path / "CUB", tmp_path)) == {
        "001.A": "train",
        "002.B": "val",
        "003.C": "test",
    }
    for other in ("aircraft", "butterfly", "plantae", "vggflower"):  # same markers, other name
        with pytest.raises(DatasetNotFoundError, match="none of the accepted layouts"):
            _load(other, tmp_path / "CUB", tmp_path)


def test_authors_archive_missing_class_file(tmp_path):
    _authors_pt(tmp_path / "CUB", {"train": ["001.A"], "val": ["002.B"], "test": ["003.C"]})
    (tmp_path / "CUB" / "val" / "002.B.pt").unlink()
    with pytest.raises(DatasetNotFoundError, match=r"val_labels\.json names class '002\.B'"):
        _load("cub", tmp_path, tmp_path)


def test_torchmeta_cub_jpeg_bytes(tmp_path):
    import io
    import json

    import h5py

    base = tmp_path / "cub"
    base.mkdir()
    labels = {"train": ["001.Black_footed_Albatross"], "val": ["002.Laysan_Albatross"]}
    labels["test"] = ["003.Sooty_Albatross"]
    for split, names in labels.items():
        (base / f"{split}_labels.json").write_text(json.dumps(names))
        with h5py.File(base / f"{split}_data.hdf5", "w") as f:
            group = f.create_group("datasets")
            ds = group.create_dataset(names[0], (2,), dtype=h5py.vlen_dtype(np.uint8))
            for i in range(2):
                buf = io.BytesIO()
                Image.new("RGB", (20, 16), (200, 10, 10)).save(buf, format="JPEG")
                ds[i] = np.frombuffer(buf.getvalue(), dtype=np.uint8)
    dom = _load("cub", tmp_path, tmp_path)
    assert _split_of(dom) == {n[0]: s for s, n in labels.items()}
    assert abs(int(dom.images[..., 0].mean()) - 200) < 10
    assert "torchmeta's split" in dom.source


# ----------------------------------------------------------------------------- sanity checks
def test_classes_named_like_layout_folders_are_refused(tmp_path):
    # what the old loader did with images/WildFish_partN/: the parts taken as species
    spec = PAPER_DATASETS["fish"]
    parts = _Listing(class_names=["WildFish_part1", "WildFish_part2"], items=[[1, 2], [3]])
    with pytest.raises(DatasetNotFoundError, match=r"named like folders of the dataset's layout"):
        check_figures(spec, parts, spec.figures, tmp_path)
    species = _Listing(class_names=["Danio_rerio", "Esox_lucius"], items=[[1, 2], [3]])
    with pytest.warns(PaperDataWarning, match="1000 classes"):
        check_figures(spec, species, spec.figures, tmp_path)


def test_more_classes_or_bigger_classes_than_the_release_are_refused(tmp_path):
    # Omniglot alphabets read as characters: a "class" with more than 20 drawings
    _folder_classes(tmp_path / "omniglot" / "images_background", {})
    for i in range(21):
        _img(tmp_path / "omniglot" / "images_background" / "Greek" / "all" / f"{i}.png", i)
    with pytest.raises(DatasetNotFoundError, match=r"has 21 images, more than any class"):
        _load("omniglot", tmp_path, tmp_path)
    # 201 "classes" of CUB
    _folder_classes(tmp_path / "cub" / "images", {f"{i:03d}.Bird": 1 for i in range(201)})
    with pytest.raises(DatasetNotFoundError, match=r"201 classes found but the complete"):
        _load("cub", tmp_path, tmp_path)


@pytest.mark.filterwarnings("default::avalanche_sets.data.paper.PaperSplitWarning")
def test_incomplete_copy_warns_by_name(tmp_path):
    _folder_classes(tmp_path / "cub" / "CUB_200_2011" / "images", {"001.A": 2, "002.B": 2})
    with pytest.warns(PaperDataWarning, match=r"CUB-200-2011: 2 classes and 4 images .* 200"):
        _load("cub", tmp_path, tmp_path)


def test_not_found_lists_every_layout(tmp_path):
    (tmp_path / "Plantae" / "train").mkdir(parents=True)  # a broken authors' archive
    with pytest.raises(DatasetNotFoundError) as err:
        _load("fish", tmp_path, tmp_path)
    for layout in PAPER_DATASETS["fish"].layouts:
        assert layout.label in str(err.value)
    # the authors' Plantae folder without its label files is not read as species
    (tmp_path / "Plantae" / "val").mkdir()
    _img(tmp_path / "Plantae" / "train" / "x.jpg", 0)
    _img(tmp_path / "Plantae" / "val" / "y.jpg", 1)
    with pytest.raises(DatasetNotFoundError, match=r"named like folders"):
        _load("plantae", tmp_path, tmp_path)
