"""The datasets as their releases unpack, and as torchvision, learn2learn and others lay them out.

Every scanner gets the dataset's own folder (the layout's ``base / sub``) and returns a
:class:`~._common._Listing`; none of them looks further than the layout it was matched for.
"""

from __future__ import annotations

import importlib
import pickle
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ..domain import SPLITS
from ..images import is_image_file, scan_image_folder
from ._common import (
    OMNIGLOT_FALLBACK,
    DatasetNotFoundError,
    PaperDataset,
    _folder_listing,
    _Listing,
    _malformed,
    _read_json,
    _read_lines,
    _split_from_files,
)


def scan_folder(base: Path, spec: PaperDataset) -> _Listing:
    """``base/<class>/<images>``: one sub-folder per class."""
    return _folder_listing(spec, base)


# ============================================================================ miniImageNet
_PICKLE_ALLOWED = {
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy.core.numeric", "_frombuffer"),
    ("numpy._core.numeric", "_frombuffer"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("collections", "OrderedDict"),
    ("_codecs", "encode"),
    ("builtins", "bytearray"),
}


class _ArrayUnpickler(pickle.Unpickler):
    """Unpickles plain containers and numpy arrays only (no arbitrary code)."""

    def find_class(self, module: str, name: str):
        if (module, name) not in _PICKLE_ALLOWED:
            raise pickle.UnpicklingError(
                f"refusing to unpickle {module}.{name}: only numpy arrays and plain "
                "containers are allowed in the dataset pickles"
            )
        if module.startswith("numpy"):
            for cand in (
                module.replace("numpy.core", "numpy._core"),
                module.replace("numpy._core", "numpy.core"),
            ):
                try:
                    return getattr(importlib.import_module(cand), name)
                except (ImportError, AttributeError):
                    continue
        return super().find_class(module, name)


#: The validation pickle's name: Ren et al. / torchmeta ``val``, learn2learn ``validation``.
_MINI_VAL_NAMES = ("val", "validation")


def _mini_pickle_paths(spec: PaperDataset, base: Path) -> dict[str, Path]:
    paths = {"train": base / "mini-imagenet-cache-train.pkl"}
    vals = [base / f"mini-imagenet-cache-{m}.pkl" for m in _MINI_VAL_NAMES]
    present = [p for p in vals if p.is_file()]
    if len(present) > 1:
        raise _malformed(
            spec, base, f"both {present[0].name} and {present[1].name} exist; keep one"
        )
    paths["val"] = present[0] if present else vals[0]
    paths["test"] = base / "mini-imagenet-cache-test.pkl"
    missing = [p.name for p in paths.values() if not p.is_file()]
    if missing:
        raise _malformed(
            spec,
            base,
            f"missing {missing} (the validation pickle may be named "
            "mini-imagenet-cache-val.pkl or mini-imagenet-cache-validation.pkl)",
        )
    return paths


def scan_mini_pickles(base: Path, spec: PaperDataset) -> _Listing:
    """``mini-imagenet-cache-{train,val|validation,test}.pkl``: ``{'image_data': uint8
    [n, 84, 84, 3], 'class_dict': {wnid: [indices]}}`` (Ren et al.; learn2learn)."""
    names, items, official = [], [], {}
    for split, path in _mini_pickle_paths(spec, base).items():
        try:
            with open(path, "rb") as f:
                data = _ArrayUnpickler(f, encoding="latin1").load()
        except (pickle.UnpicklingError, EOFError, OSError, ValueError, TypeError) as err:
            raise _malformed(spec, path, f"cannot unpickle ({err})") from err
        if not isinstance(data, Mapping) or not {"image_data", "class_dict"} <= set(data):
            raise _malformed(spec, path, "expected a dict with keys 'image_data' and 'class_dict'")
        images = data["image_data"]
        if (
            not isinstance(images, np.ndarray)
            or images.dtype != np.uint8
            or images.ndim != 4
            or images.shape[-1] != 3
        ):
            raise _malformed(
                spec,
                path,
                "'image_data' must be a uint8 array [n, H, W, 3], got "
                f"{getattr(images, 'dtype', type(images))} {getattr(images, 'shape', '')}",
            )
        class_dict = data["class_dict"]
        if not isinstance(class_dict, Mapping) or not class_dict:
            raise _malformed(spec, path, "'class_dict' must be a non-empty dict {wnid: [indices]}")
        for wnid, idx in class_dict.items():
            idx = np.asarray(idx)
            if idx.dtype.kind not in "iu" or idx.ndim != 1:
                raise _malformed(spec, path, f"class_dict[{wnid!r}] is not a list of indices")
            if idx.size and (idx.min() < 0 or idx.max() >= len(images)):
                raise _malformed(spec, path, f"class_dict[{wnid!r}] indexes past image_data")
            wnid = str(wnid)
            if wnid in official:
                raise _malformed(spec, path, f"class {wnid!r} appears in two splits")
            names.append(wnid)
            items.append(images[idx])
            official[wnid] = split
    return _Listing(
        class_names=names,
        items=items,
        official=official,
        official_note="Ravi & Larochelle (2017) split of the pickles",
    )


#: Header names of the csv files' second column: Ravi & Larochelle ``label``, others ``class``.
_CSV_HEADERS = {"filename,label", "filename,class"}


def scan_mini_csv(base: Path, spec: PaperDataset) -> _Listing:
    """``{train,val,test}.csv`` (``filename,label`` or ``filename,class`` lines) + ``images/``."""
    csvs = {s: base / f"{s}.csv" for s in SPLITS}
    images_dir = base / "images"
    missing = [p.name for p in csvs.values() if not p.is_file()]
    if missing:
        raise _malformed(spec, base, f"missing {missing}")
    present = {p.name for p in images_dir.iterdir()}
    by_class: dict[str, list[Path]] = {}
    official: dict[str, str] = {}
    for split, path in csvs.items():
        lines = [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
        if lines and lines[0].replace(" ", "").lower() in _CSV_HEADERS:
            lines = lines[1:]
        for ln in lines:
            parts = ln.split(",")
            if len(parts) != 2:
                raise _malformed(spec, path, f"expected 'filename,label' lines, found {ln!r}")
            fname, label = parts[0].strip(), parts[1].strip()
            if fname not in present:
                raise _malformed(
                    spec, images_dir / fname, f"image listed in {path.name} is missing"
                )
            if official.setdefault(label, split) != split:
                raise _malformed(spec, path, f"class {label!r} appears in two splits")
            by_class.setdefault(label, []).append(images_dir / fname)
    if not by_class:
        raise _malformed(spec, base, "the csv files list no images")
    return _Listing(
        class_names=list(by_class),
        items=list(by_class.values()),
        official=official,
        official_note="Ravi & Larochelle (2017) split of the csv files",
    )


def scan_split_folders(
    base: Path, spec: PaperDataset, *, whose: str = "Ravi & Larochelle (2017)"
) -> _Listing:
    """``{train,val,test}/<class>/<images>``: the split is the folder a class lies in."""
    names, items, official = [], [], {}
    for split in SPLITS:
        folder = base / split
        if not folder.is_dir():
            raise _malformed(spec, folder, "split folder missing (train/, val/ and test/ needed)")
        listing = _folder_listing(spec, folder)
        for n, files in zip(listing.class_names, listing.items):
            if n in official:
                raise _malformed(spec, folder / n, f"class {n!r} is in two split folders")
            names.append(n)
            items.append(files)
            official[n] = split
    return _Listing(
        class_names=names,
        items=items,
        official=official,
        official_note=f"{whose} split of the folders {base}/{{train,val,test}}",
    )


# ============================================================================ CIFAR-FS
def scan_cifar_r2d2(base: Path, spec: PaperDataset) -> _Listing:
    """``base = cifar100/``: ``data/<class>/*.png`` and ``splits/bertinetto/{split}.txt``."""
    listing = _folder_listing(spec, base / "data")
    split_dir = base / "splits" / "bertinetto"
    files = {s: split_dir / f"{s}.txt" for s in SPLITS}
    if all(p.is_file() for p in files.values()):
        listing.official = _split_from_files(spec, files, listing.class_names)
        listing.official_note = f"Bertinetto et al. (2019) split from {split_dir}"
    else:
        listing.fallback_note = (
            f"{split_dir}/{{train,val,test}}.txt not found: using a seeded random 64/16/20 "
            "class split, NOT the Bertinetto et al. split of the paper (supply the split files "
            "or splits/{train,val,test}.txt)"
        )
    return listing


def _unpickle(spec: PaperDataset, path: Path):
    try:
        with open(path, "rb") as f:
            return _ArrayUnpickler(f, encoding="latin1").load()
    except (pickle.UnpicklingError, EOFError, OSError, ValueError, TypeError) as err:
        raise _malformed(spec, path, f"cannot unpickle ({err})") from err


def scan_cifar100_python(base: Path, spec: PaperDataset) -> _Listing:
    """torchvision's CIFAR100 (``cifar-100-python/{train,test,meta}``): the 100 fine classes.

    The raw release has no class split: without the user's split files a seeded random
    64/16/20 split is used, with a warning (Bertinetto et al.'s lists ship with learn2learn's
    and torchmeta's copies, not with CIFAR-100).
    """
    meta = _unpickle(spec, base / "meta")
    names = meta.get("fine_label_names") if isinstance(meta, Mapping) else None
    if not isinstance(names, list) or len(names) < 2:
        raise _malformed(spec, base / "meta", "expected a dict with 'fine_label_names'")
    parts, labels = [], []
    for part in ("train", "test"):
        data = _unpickle(spec, base / part)
        if not isinstance(data, Mapping) or not {"data", "fine_labels"} <= set(data):
            raise _malformed(spec, base / part, "expected a dict with 'data' and 'fine_labels'")
        images = np.asarray(data["data"])
        if images.dtype != np.uint8 or images.ndim != 2 or images.shape[1] != 3 * 32 * 32:
            raise _malformed(
                spec, base / part, f"'data' must be uint8 [n, 3072], got {images.shape}"
            )
        parts.append(images.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))
        labels.append(np.asarray(data["fine_labels"], dtype=np.int64))
    images, label = np.concatenate(parts), np.concatenate(labels)
    if label.shape != (len(images),) or label.min() < 0 or label.max() >= len(names):
        raise _malformed(spec, base, "'fine_labels' do not match 'data' and 'fine_label_names'")
    return _Listing(
        class_names=[str(n) for n in names],
        items=[images[label == k] for k in range(len(names))],
        fallback_note=(
            f"{base} is raw CIFAR-100 without Bertinetto et al.'s class lists: using a seeded "
            "random 64/16/20 class split, NOT the paper's (supply splits/{train,val,test}.txt, "
            "or learn2learn's / torchmeta's CIFAR-FS copy)"
        ),
    )


# ============================================================================ FGVC-Aircraft
_AIRCRAFT_BANNER = 20  # rows of copyright banner at the bottom of every FGVC-Aircraft image


def scan_aircraft(data: Path, spec: PaperDataset) -> _Listing:
    """``data/`` of fgvc-aircraft-2013b: ``images/``, ``variants.txt``, label files."""
    variants_path = data / "variants.txt"
    if not variants_path.is_file():
        raise _malformed(spec, variants_path, "variants.txt (one variant name per line) is missing")
    variants = _read_lines(variants_path)
    if not variants or len(set(variants)) != len(variants):
        raise _malformed(spec, variants_path, "variants.txt is empty or repeats a name")
    label_files = None
    for group in (("trainval", "test"), ("train", "val", "test")):
        cand = [data / f"images_variant_{g}.txt" for g in group]
        if all(p.is_file() for p in cand):
            label_files = cand
            break
    if label_files is None:
        raise _malformed(
            spec,
            data,
            "missing images_variant_trainval.txt + images_variant_test.txt "
            "(or images_variant_{train,val,test}.txt)",
        )
    present = {p.name for p in (data / "images").iterdir()}
    by_class: dict[str, list[Path]] = {v: [] for v in variants}
    seen: set[str] = set()
    for path in label_files:
        for ln in path.read_text(encoding="utf-8").splitlines():
            if not ln.strip():
                continue
            parts = ln.strip().split(" ", 1)
            if len(parts) != 2:
                raise _malformed(spec, path, f"expected '<image id> <variant>' lines, found {ln!r}")
            image_id, variant = parts[0], parts[1].strip()
            if variant not in by_class:
                raise _malformed(spec, path, f"variant {variant!r} is not in variants.txt")
            if image_id in seen:
                continue
            seen.add(image_id)
            if f"{image_id}.jpg" not in present:
                raise _malformed(
                    spec,
                    data / "images" / f"{image_id}.jpg",
                    f"image listed in {path.name} is missing",
                )
            by_class[variant].append(data / "images" / f"{image_id}.jpg")
    for files in by_class.values():
        files.sort()
    return _Listing(
        class_names=variants,
        items=[by_class[v] for v in variants],
        crop_bottom=_AIRCRAFT_BANNER,
    )


# ============================================================================ Plantae
_TSENG_FILES = {"train": "base.json", "val": "val.json", "test": "novel.json"}


def scan_tseng_json(base: Path, spec: PaperDataset) -> _Listing:
    """Tseng et al.'s processed Plantae: ``images/<species>/`` with ``{base,val,novel}.json``.

    The json files (``label_names``, ``image_labels``) fix their exact 200-species split.
    """
    listing = _folder_listing(spec, base / "images")
    known = set(listing.class_names)
    official: dict[str, str] = {}
    for split, fname in _TSENG_FILES.items():
        path = base / fname
        meta = _read_json(spec, path)
        if not isinstance(meta, Mapping) or not {"label_names", "image_labels"} <= set(meta):
            raise _malformed(spec, path, "expected a dict with 'label_names' and 'image_labels'")
        names = [str(n) for n in meta["label_names"]]
        for label in sorted({int(i) for i in meta["image_labels"]}):
            if not 0 <= label < len(names):
                raise _malformed(spec, path, f"image label {label} is outside label_names")
            name = names[label]
            if name not in known:
                raise _malformed(
                    spec, base / "images" / name, f"species named in {fname} has no folder"
                )
            if official.setdefault(name, split) != split:
                raise _malformed(spec, path, f"species {name!r} appears in two splits")
    listing.official = official
    listing.official_note = f"Tseng et al. (2020) split from {base}/{{base,val,novel}}.json"
    return listing


# ============================================================================ Butterfly-200
_BUTTERFLY_RELEASE = {s: f"Butterfly200_{s}_release.txt" for s in SPLITS}


def scan_butterfly(folder: Path, spec: PaperDataset) -> _Listing:
    """``images_small/<NNN.Genus_species>/`` (or ``images/``), checked against the release files.

    ``Butterfly200_{train,val,test}_release.txt`` (``<species folder>/<file> <labels>``) split
    the *images* of all 200 species for fine-grained recognition; they are not a split of the
    species. When they are present, every image they list must exist and their species must
    be the folders'; a split that is disjoint by species would be used as the class split.
    """
    listing = _folder_listing(spec, folder)
    files = {s: folder.parent / f for s, f in _BUTTERFLY_RELEASE.items()}
    if not all(p.is_file() for p in files.values()):
        return listing
    species_of: dict[str, set[str]] = {}
    known = set(listing.class_names)
    for split, path in files.items():
        species = species_of.setdefault(split, set())
        for ln in _read_lines(path):
            rel = ln.split()[0]
            name = rel.split("/", 1)[0]
            if name not in known or not (folder / rel).is_file():
                raise _malformed(
                    spec,
                    folder / rel,
                    f"image listed in {path.name} is missing; fix: restore the release's "
                    f"{folder.name}/ folder completely",
                )
            species.add(name)
    overlap = set.intersection(*species_of.values())
    if not overlap:
        listing.official = {n: s for s, names in species_of.items() for n in names}
        listing.official_note = f"class split of the release files {folder.parent}"
    else:
        listing.notes.append(
            f"the release's Butterfly200_*_release.txt split images, not species ({len(overlap)} "
            "species in all three), so they do not define the paper's class split"
        )
    return listing


# ============================================================================ Omniglot
_OMNIGLOT_SETS = ("images_background", "images_evaluation")


def scan_omniglot_sets(base: Path, spec: PaperDataset) -> _Listing:
    """``images_background/`` and ``images_evaluation/``: ``<alphabet>/<characterNN>/*.png``."""
    sets = [base / s for s in _OMNIGLOT_SETS if (base / s).is_dir()]
    by_class: dict[str, list[Path]] = {}
    for s in sets:
        for alphabet in sorted(p for p in s.iterdir() if p.is_dir() and not p.name.startswith(".")):
            chars = scan_image_folder(alphabet, what=f"{spec.title} folder")
            for char, files in chars.items():
                by_class.setdefault(f"{alphabet.name}/{char}", []).extend(files)
    if not by_class:
        raise _malformed(spec, base, "no <alphabet>/<character>/ folders found")
    names = sorted(by_class)
    listing = _Listing(class_names=names, items=[by_class[n] for n in names])
    listing.fallback_note = OMNIGLOT_FALLBACK
    absent = [s for s in _OMNIGLOT_SETS if not (base / s).is_dir()]
    if absent:
        listing.notes.append(f"{absent[0]}/ absent")
    return listing


# ============================================================================ VGG-Flower-102
def scan_flowers(ds: Path, spec: PaperDataset) -> _Listing:
    """``jpg/image_NNNNN.jpg`` with ``imagelabels.mat`` (``labels``: class ids 1..102)."""
    jpg, mat_path = ds / "jpg", ds / "imagelabels.mat"
    try:
        import scipy.io  # heavy to import; only VGG-Flower's labels need it

        labels = np.asarray(scipy.io.loadmat(str(mat_path))["labels"]).reshape(-1)
    except Exception as err:  # scipy raises MatReadError, ValueError, KeyError, ...
        raise _malformed(
            spec, mat_path, f"cannot read a 'labels' vector from it ({type(err).__name__}: {err})"
        ) from err
    if labels.size == 0 or labels.dtype.kind not in "iuf" or labels.min() < 1:
        raise _malformed(spec, mat_path, "'labels' must hold class ids 1..K")
    labels = labels.astype(np.int64)
    present = {p.name for p in jpg.iterdir()}
    n_classes = int(labels.max())
    items: list[list[Path]] = [[] for _ in range(n_classes)]
    for i, label in enumerate(labels, start=1):
        fname = f"image_{i:05d}.jpg"
        if fname not in present:
            raise _malformed(spec, jpg / fname, "image listed in imagelabels.mat is missing")
        items[label - 1].append(jpg / fname)
    names = [f"class_{k:03d}" for k in range(1, n_classes + 1)]
    return _Listing(class_names=names, items=items)


# ============================================================================ WildFish
#: ``Genus_species_N.jpg``: the species is the name up to the last underscore.
_WILDFISH_FILE = re.compile(r"^(?P<species>.+)_(?P<n>\d+)$")


def scan_wildfish(base: Path, spec: PaperDataset) -> _Listing:
    """``WildFish_part1..4/``: flat ``Genus_species_N.jpg`` files (the release), or species
    sub-folders (after a user sorted them); a species may span several parts."""
    parts = sorted(p for p in base.glob("WildFish_part*") if p.is_dir())
    if not parts:
        raise DatasetNotFoundError(spec, base / "WildFish_part1", "not found")
    by_class: dict[str, list[Path]] = {}
    for part in parts:
        for p in sorted(part.iterdir()):
            if p.name.startswith("."):
                continue
            if p.is_dir():
                files = [f for f in sorted(p.iterdir()) if is_image_file(f)]
                by_class.setdefault(p.name, []).extend(files)
            elif is_image_file(p):
                m = _WILDFISH_FILE.match(p.stem)
                if m is None:
                    raise _malformed(
                        spec,
                        p,
                        "a WildFish file name must be <Genus_species>_<N>.<ext> (the species "
                        "is read from it); fix: rename or remove the file",
                    )
                by_class.setdefault(m["species"], []).append(p)
    if not any(by_class.values()):
        raise _malformed(spec, base, f"no images found in {[p.name for p in parts]}")
    names = sorted(by_class)
    return _Listing(class_names=names, items=[sorted(by_class[n]) for n in names])
