"""The paper's nine datasets (ORDER, ECCV 2022, appendix A), loaded from a local root.

Six in-distribution domains form the stream (:data:`PAPER_ORDERS`) and three sources provide
out-of-distribution images (:data:`PAPER_OOD`). **Nothing is downloaded**: every dataset must
already be on disk under ``root`` in the layout documented in :data:`PAPER_DATASETS`
(``PAPER_DATASETS[name].layout``); a missing or malformed dataset raises
:class:`DatasetNotFoundError`, whose message names the path, the expected layout and where to
get the data.

Canonical names (used everywhere in the package): ``plantae``, ``cub``, ``miniimagenet``,
``cifarfs``, ``aircraft``, ``butterfly`` (in-distribution) and ``omniglot``, ``vggflower``,
``fish`` (OOD). Common spellings (``CIFAR-FS``, ``mini-imagenet``, ``CUB-200``,
``FGVC-Aircraft``, ``Butterfly-200``, ``VGG-Flower-102``, ``WildFish``) are accepted too.

Class splits (the paper's appendix A), in order of precedence:

1. ``<dataset dir>/splits/{train,val,test}.txt`` when present: one class name per line (the
   names the loader gives the classes, i.e. the class folder names; lines starting with
   ``#`` are comments).
   Classes listed in no file are left out. Use this to reproduce a published split exactly
   where the split's own files are not part of the dataset's layout.
2. The split shipped with the data: miniImageNet (Ravi & Larochelle 2017, in the pickles or
   csv files), CIFAR-FS (Bertinetto et al. 2019, ``cifar100/splits/bertinetto``).
3. The published rule, re-implemented: CUB (Chen et al. 2019, exact), FGVC-Aircraft
   (Vuorio et al. 2019, exact), Plantae (Tseng et al. 2020, exact up to ties, see its spec).
4. A documented seeded random split of the paper's sizes: Butterfly (the paper's own random
   100/40/45 draw is not published), the OOD sources (60/20/20 so that the OOD classes of
   training and of evaluation are disjoint), and CIFAR-FS when its split files are absent
   (warned).

A :class:`PaperSplitWarning` is issued whenever the resulting split sizes differ from the
paper's (for instance an incomplete dataset).

Images are decoded once, converted to RGB, centre-cropped to a square, resized (Pillow
LANCZOS) to ``image_size`` and cached as an ``.npz`` domain pack (uncompressed, written
atomically) in ``cache_dir`` (default ``$AVALANCHE_SETS_CACHE`` or
``~/.cache/avalanche_sets/paper``), keyed by dataset, dataset folder, image size, class-split
seed and the contents of ``splits/*.txt``. Pass ``refresh=True`` after changing the images on
disk.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import json
import os
import pickle
import re
import warnings
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .domain import SPLITS, Domain
from .packs import (
    _atomic_savez,
    _validate_arrays,
    load_images,
    load_pack,
    resize_images,
    scan_image_folder,
    split_classes,
)

__all__ = [
    "PAPER_DATASETS",
    "PAPER_ORDERS",
    "PAPER_ID",
    "PAPER_OOD",
    "PaperDataset",
    "DatasetNotFoundError",
    "PaperSplitWarning",
    "paper_dataset",
    "locate_paper_dataset",
    "load_paper_domain",
    "load_paper_domains",
    "default_cache_dir",
]

_CACHE_VERSION = 1


class DatasetNotFoundError(FileNotFoundError):
    """A paper dataset is missing or malformed under the given root.

    The message names the path, the problem, the expected layout and where to get the data.
    """

    def __init__(self, spec: PaperDataset, path: str | os.PathLike, problem: str) -> None:
        self.dataset = spec.name
        self.path = Path(path)
        self.problem = problem
        message = (
            f"{spec.title} ({spec.name!r}) {problem} [path: {self.path}].\n"
            f"Expected layout:\n  {spec.layout}\n"
            f"Where to get it: {spec.where}\n"
            "Nothing is downloaded automatically; place the data there (or pass another root)."
        )
        super().__init__(message)


class PaperSplitWarning(UserWarning):
    """The class split of a paper dataset differs from the paper's (sizes or provenance)."""


@dataclass
class _Listing:
    """What a layout scanner found: classes and their images (files or in-memory arrays)."""

    class_names: list[str]
    items: list[Sequence]  # per class: image files, or indices into ``arrays``
    arrays: np.ndarray | None = None
    official: dict[str, str] | None = None  # class name -> split, from the layout's own files
    official_note: str = ""
    fallback_note: str = ""  # set when the split falls back to a rule the paper did not use
    crop_bottom: int = 0

    def counts(self) -> np.ndarray:
        return np.array([len(i) for i in self.items], dtype=np.int64)


_Rule = Callable[[list[str], np.ndarray, int], dict[str, str]]


@dataclass(frozen=True)
class PaperDataset:
    """Specification of one of the paper's datasets.

    Attributes:
        name: canonical lowercase name.
        title: the dataset's usual name.
        role: ``"id"`` (a stream domain) or ``"ood"`` (a source of OOD images).
        split_sizes: classes in (train, val, test) as in the paper.
        split: how the class split is defined (and how faithful it is).
        layout: the expected on-disk layout under ``<root>/<dirnames[0]>/``.
        where: where to get the data (URL and citation).
        dirnames: accepted folder names under ``root`` (first = documented one).
        notes: anything else worth knowing.
    """

    name: str
    title: str
    role: str
    split_sizes: tuple[int, int, int]
    split: str
    layout: str
    where: str
    dirnames: tuple[str, ...]
    markers: tuple[str, ...] = field(repr=False)
    root_markers: tuple[str, ...] = field(default=(), repr=False)
    notes: str = ""
    max_images_per_class: int | None = field(default=None, repr=False)
    scan: Callable[[Path, PaperDataset], _Listing] | None = field(default=None, repr=False)
    rule: _Rule | None = field(default=None, repr=False)

    @property
    def n_classes(self) -> int:
        return int(sum(self.split_sizes))


# ============================================================================ helpers
def _malformed(spec: PaperDataset, path: Path, problem: str) -> DatasetNotFoundError:
    return DatasetNotFoundError(spec, path, f"is malformed: {problem}")


def _first_dir(base: Path, candidates: Sequence[str]) -> Path | None:
    for c in candidates:
        p = base / c
        if p.is_dir():
            return p
    return None


def _folder_listing(spec: PaperDataset, folder: Path) -> _Listing:
    classes = scan_image_folder(folder, what=f"{spec.title} folder")
    if not classes:
        raise _malformed(spec, folder, "no class sub-folders found")
    if not any(classes.values()):
        raise _malformed(spec, folder, "the class sub-folders hold no image files")
    return _Listing(class_names=list(classes), items=list(classes.values()))


def _read_lines(path: Path) -> list[str]:
    """Non-empty stripped lines of a text file; lines starting with ``#`` are comments."""
    lines = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            lines.append(line)
    return lines


def _split_from_files(
    spec: PaperDataset, files: Mapping[str, Path], known: Sequence[str]
) -> dict[str, str]:
    """``{class: split}`` from three list files; unknown or repeated names are errors."""
    known_set = set(known)
    out: dict[str, str] = {}
    for split, path in files.items():
        try:
            names = _read_lines(path)
        except (OSError, UnicodeDecodeError) as err:
            raise _malformed(spec, path, f"split file cannot be read ({err})") from err
        unknown = [n for n in names if n not in known_set]
        if unknown:
            raise _malformed(
                spec,
                path,
                f"split file names {len(unknown)} class(es) not found in the data, e.g. "
                f"{unknown[:5]} (known classes look like {list(known)[:3]}); fix: restore the "
                "missing class folder(s) or remove the name(s) from the split file",
            )
        for n in names:
            if n in out:
                raise _malformed(spec, path, f"class {n!r} is listed in two splits")
            out[n] = split
    return out


def _user_split_files(ds_dir: Path) -> dict[str, Path] | None:
    folder = ds_dir / "splits"
    if not folder.is_dir():
        return None
    return {s: folder / f"{s}.txt" for s in SPLITS}


def _user_split(spec: PaperDataset, ds_dir: Path, known: Sequence[str]) -> dict[str, str] | None:
    files = _user_split_files(ds_dir)
    if files is None:
        return None
    missing = [str(p) for p in files.values() if not p.is_file()]
    if missing:
        raise _malformed(
            spec,
            ds_dir / "splits",
            f"user split folder lacks {missing}; it must hold train.txt, val.txt and test.txt "
            "(one class name per line)",
        )
    return _split_from_files(spec, files, known)


def _user_split_digest(ds_dir: Path) -> str:
    files = _user_split_files(ds_dir)
    if files is None:
        return ""
    h = hashlib.sha256()
    for s, p in files.items():
        h.update(s.encode())
        h.update(p.read_bytes() if p.is_file() else b"<missing>")
    return h.hexdigest()


# ---------------------------------------------------------------------------- split rules
def _rule_chen(names: list[str], counts: np.ndarray, seed: int) -> dict[str, str]:
    """Chen et al. 2019 (CUB): sorted class folders; i%2==0 train, i%4==1 val, i%4==3 test."""
    out = {}
    for i, n in enumerate(sorted(names)):
        out[n] = "train" if i % 2 == 0 else ("val" if i % 4 == 1 else "test")
    return out


def _rule_vuorio(names: list[str], counts: np.ndarray, seed: int) -> dict[str, str]:
    """Vuorio et al. 2019 (Aircraft): variants.txt order shuffled by RandomState(123), 70/15/15.

    The seed is the published one (123); ``class_split_seed`` does not change it.
    """
    order = list(names)
    np.random.RandomState(123).shuffle(order)
    n_train, n_val = int(0.70 * len(order)), int(0.15 * len(order))
    out = {n: "train" for n in order[:n_train]}
    out.update({n: "val" for n in order[n_train : n_train + n_val]})
    out.update({n: "test" for n in order[n_train + n_val :]})
    return out


def _rule_tseng(names: list[str], counts: np.ndarray, seed: int) -> dict[str, str]:
    """Tseng et al. 2020 (Plantae): top-200 species by image count, ascending, then Chen's rule."""
    order = sorted(range(len(names)), key=lambda i: (int(counts[i]), names[i]))
    kept = [names[i] for i in order[-200:]]
    out = {}
    for i, n in enumerate(kept):
        out[n] = "train" if i % 2 == 0 else ("val" if i % 4 == 1 else "test")
    return out


def _rule_random(sizes: tuple[int, int, int], min_images: int = 0) -> _Rule:
    """Seeded random split of the stated sizes (scaled when the class count differs)."""

    def rule(names: list[str], counts: np.ndarray, seed: int) -> dict[str, str]:
        kept = sorted(n for n, c in zip(names, counts) if c > min_images)
        if not kept:
            return {}
        split = split_classes(len(kept), sizes, seed)
        return dict(zip(kept, split.tolist()))

    return rule


# ============================================================================ scanners
# ---- miniImageNet
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
                "containers are allowed in the miniImageNet pickles"
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


_MINI_PKL = {"train": "train", "val": "validation", "test": "test"}


def _scan_miniimagenet(ds: Path, spec: PaperDataset) -> _Listing:
    pkls = {s: ds / f"mini-imagenet-cache-{m}.pkl" for s, m in _MINI_PKL.items()}
    csvs = {s: ds / f"{s}.csv" for s in SPLITS}
    if any(p.exists() for p in pkls.values()):
        missing = [p.name for p in pkls.values() if not p.is_file()]
        if missing:
            raise _malformed(spec, ds, f"missing {missing}")
        return _mini_from_pickles(spec, pkls)
    if any(p.exists() for p in csvs.values()):
        missing = [p.name for p in csvs.values() if not p.is_file()]
        if not (ds / "images").is_dir():
            missing.append("images/")
        if missing:
            raise _malformed(spec, ds, f"missing {missing}")
        return _mini_from_csv(spec, ds, csvs)
    raise DatasetNotFoundError(spec, ds, "not found: neither the pickles nor the csv files exist")


def _mini_from_pickles(spec: PaperDataset, pkls: Mapping[str, Path]) -> _Listing:
    names, items, official, parts = [], [], {}, []
    offset = 0
    for split, path in pkls.items():
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
            items.append(idx.astype(np.int64) + offset)
            official[wnid] = split
        parts.append(images)
        offset += len(images)
    shapes = {p.shape[1:] for p in parts}
    if len(shapes) != 1:
        raise _malformed(spec, pkls["train"], f"the pickles hold images of sizes {shapes}")
    return _Listing(
        class_names=names,
        items=items,
        arrays=np.concatenate(parts) if len(parts) > 1 else parts[0],
        official=official,
        official_note="Ravi & Larochelle (2017) split of the learn2learn pickles",
    )


def _mini_from_csv(spec: PaperDataset, ds: Path, csvs: Mapping[str, Path]) -> _Listing:
    images_dir = ds / "images"
    present = {p.name for p in images_dir.iterdir()}
    by_class: dict[str, list[Path]] = {}
    official: dict[str, str] = {}
    for split, path in csvs.items():
        lines = [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
        if lines and lines[0].replace(" ", "").lower() == "filename,label":
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
        raise _malformed(spec, ds, "the csv files list no images")
    return _Listing(
        class_names=list(by_class),
        items=list(by_class.values()),
        official=official,
        official_note="Ravi & Larochelle (2017) split of the csv files",
    )


# ---- CIFAR-FS
def _scan_cifarfs(ds: Path, spec: PaperDataset) -> _Listing:
    base = ds / "cifar100"
    data = base / "data"
    if not data.is_dir():
        raise DatasetNotFoundError(spec, data, "not found")
    listing = _folder_listing(spec, data)
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


# ---- CUB
def _scan_cub(ds: Path, spec: PaperDataset) -> _Listing:
    folder = _first_dir(ds, ("CUB_200_2011/images", "images"))
    if folder is None:
        raise DatasetNotFoundError(spec, ds / "CUB_200_2011" / "images", "not found")
    return _folder_listing(spec, folder)


# ---- FGVC-Aircraft
_AIRCRAFT_BANNER = 20  # rows of copyright banner at the bottom of every FGVC-Aircraft image


def _scan_aircraft(ds: Path, spec: PaperDataset) -> _Listing:
    data = _first_dir(ds, ("fgvc-aircraft-2013b/data", "data"))
    if data is None or not (data / "images").is_dir():
        raise DatasetNotFoundError(
            spec, ds / "fgvc-aircraft-2013b" / "data" / "images", "not found"
        )
    variants_path = data / "variants.txt"
    if not variants_path.is_file():
        raise _malformed(spec, variants_path, "variants.txt (one variant name per line) is missing")
    variants = _read_lines(variants_path)
    if not variants or len(set(variants)) != len(variants):
        raise _malformed(spec, variants_path, "variants.txt is empty or repeats a name")
    groups = [("trainval", "test"), ("train", "val", "test")]
    label_files = None
    for group in groups:
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


# ---- Plantae
def _scan_plantae(ds: Path, spec: PaperDataset) -> _Listing:
    folder = _first_dir(ds, ("Plantae", "images", "train_val_images/Plantae"))
    if folder is None:
        raise DatasetNotFoundError(spec, ds / "Plantae", "not found")
    return _folder_listing(spec, folder)


# ---- Butterfly-200
def _scan_butterfly(ds: Path, spec: PaperDataset) -> _Listing:
    folder = _first_dir(ds, ("images_small", "images"))
    if folder is None:
        raise DatasetNotFoundError(spec, ds / "images_small", "not found")
    return _folder_listing(spec, folder)


# ---- Omniglot
def _scan_omniglot(ds: Path, spec: PaperDataset) -> _Listing:
    base = ds / "omniglot-py" if (ds / "omniglot-py").is_dir() else ds
    sets = [base / s for s in ("images_background", "images_evaluation") if (base / s).is_dir()]
    if not sets:
        raise DatasetNotFoundError(spec, ds / "omniglot-py" / "images_background", "not found")
    by_class: dict[str, list[Path]] = {}
    for s in sets:
        for alphabet in sorted(p for p in s.iterdir() if p.is_dir() and not p.name.startswith(".")):
            chars = scan_image_folder(alphabet, what=f"{spec.title} folder")
            for char, files in chars.items():
                by_class.setdefault(f"{alphabet.name}/{char}", []).extend(files)
    if not by_class:
        raise _malformed(spec, base, "no <alphabet>/<character>/ folders found")
    names = sorted(by_class)
    return _Listing(class_names=names, items=[by_class[n] for n in names])


# ---- VGG-Flower-102
def _scan_vggflower(ds: Path, spec: PaperDataset) -> _Listing:
    jpg, mat_path = ds / "jpg", ds / "imagelabels.mat"
    if not jpg.is_dir() or not mat_path.is_file():
        raise DatasetNotFoundError(
            spec, ds, f"not found ({'jpg/' if not jpg.is_dir() else 'imagelabels.mat'} missing)"
        )
    try:
        import scipy.io

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


# ---- WildFish
def _scan_fish(ds: Path, spec: PaperDataset) -> _Listing:
    if (ds / "images").is_dir():
        roots = [ds / "images"]
    else:
        roots = sorted(p for p in ds.glob("WildFish_part*") if p.is_dir())
    if not roots:
        raise DatasetNotFoundError(spec, ds / "WildFish_part1", "not found")
    by_class: dict[str, list[Path]] = {}
    for r in roots:
        for species, files in scan_image_folder(r, what=f"{spec.title} folder").items():
            by_class.setdefault(species, []).extend(files)
    if not by_class or not any(by_class.values()):
        raise _malformed(spec, roots[0], "no species folders with images found")
    names = sorted(by_class)
    return _Listing(class_names=names, items=[sorted(by_class[n]) for n in names])


# ============================================================================ specs
_OOD_SPLIT = (
    "OOD source: seeded random 60/20/20 class split so that the OOD classes seen in training "
    "and in evaluation are disjoint: sorted class names, "
    "np.random.default_rng(class_split_seed).permutation(C), first round(0.2 C) -> test, next "
    "round(0.2 C) -> val, the rest -> train (the paper does not state how it split them)"
)


def _spec(**kw) -> PaperDataset:
    return PaperDataset(**kw)


PAPER_DATASETS: dict[str, PaperDataset] = {
    s.name: s
    for s in (
        _spec(
            name="plantae",
            title="Plantae (iNaturalist 2017)",
            role="id",
            split_sizes=(100, 50, 50),
            split=(
                "Tseng et al. (ICLR 2020) 100/50/50: the 200 species with the most images, "
                "ordered by ascending image count (ties by name), at most 600 images each "
                "(seeded choice), index i -> train if i % 2 == 0, val if i % 4 == 1, test if "
                "i % 4 == 3. Their script breaks count ties in os.listdir order and picks the "
                "600 images unseeded, so reproduce their exact split with splits/*.txt"
            ),
            layout=(
                "<root>/plantae/Plantae/<species>/*.jpg (iNaturalist 2017 "
                "train_val_images/Plantae, as in Tseng et al.'s plantae.tar.gz); "
                "<root>/plantae/images/<species>/*.jpg (after their write_plantae_filelist.py) "
                "works too; optional <root>/plantae/splits/{train,val,test}.txt"
            ),
            where=(
                "http://vllab.ucmerced.edu/ym41608/projects/CrossDomainFewShot/filelists/"
                "plantae.tar.gz (Tseng et al., ICLR 2020, "
                "https://github.com/hytseng0509/CrossDomainFewShot) or iNaturalist 2017 "
                "https://github.com/visipedia/inat_comp/tree/master/2017 (Van Horn et al., "
                "CVPR 2018)"
            ),
            dirnames=("plantae", "Plantae", "inat2017_plantae"),
            markers=("Plantae", "images", "train_val_images/Plantae"),
            max_images_per_class=600,
            scan=_scan_plantae,
            rule=_rule_tseng,
        ),
        _spec(
            name="cub",
            title="CUB-200-2011",
            role="id",
            split_sizes=(100, 50, 50),
            split=(
                "Chen et al. (ICLR 2019, 'A closer look at few-shot classification') 100/50/50: "
                "class folders sorted by name, index i -> train if i % 2 == 0, val if "
                "i % 4 == 1, test if i % 4 == 3 (their write_CUB_filelist.py rule; exact)"
            ),
            layout=(
                "<root>/cub/CUB_200_2011/images/<NNN.Species_name>/*.jpg (200 classes: the "
                "official CUB_200_2011.tgz unpacked into cub/); optional "
                "<root>/cub/splits/{train,val,test}.txt"
            ),
            where=(
                "https://data.caltech.edu/records/65de6-vp158 (CUB_200_2011.tgz); Wah et al., "
                "Caltech CNS-TR-2011-001 / Welinder et al. 2010"
            ),
            dirnames=("cub", "CUB", "cub200", "CUB_200_2011", "cubirds200"),
            markers=("CUB_200_2011/images", "images"),
            root_markers=("CUB_200_2011/images",),
            scan=_scan_cub,
            rule=_rule_chen,
        ),
        _spec(
            name="miniimagenet",
            title="miniImageNet",
            role="id",
            split_sizes=(64, 16, 20),
            split="Ravi & Larochelle (ICLR 2017) 64/16/20, read from the pickles or csv files",
            layout=(
                "<root>/miniimagenet/ holding either (a) learn2learn's pickles "
                "mini-imagenet-cache-{train,validation,test}.pkl, each a dict {'image_data': "
                "uint8 [n, 84, 84, 3], 'class_dict': {wnid: [image indices]}}, or (b) Ravi & "
                "Larochelle's csv files train.csv, val.csv, test.csv (lines 'filename,label') "
                "with the images in images/<filename>"
            ),
            where=(
                "pickles: https://zenodo.org/record/7978538 (learn2learn's mirror, "
                "mini-imagenet-cache-*.pkl); csv split: "
                "https://github.com/twitter/meta-learning-lstm/tree/master/data/miniImagenet "
                "with ImageNet images (https://image-net.org, registration required). "
                "Vinyals et al., NeurIPS 2016; Ravi & Larochelle, ICLR 2017"
            ),
            dirnames=(
                "miniimagenet",
                "mini-imagenet",
                "mini_imagenet",
                "miniImagenet",
                "miniImageNet",
            ),
            markers=("mini-imagenet-cache-*.pkl", "train.csv", "val.csv", "test.csv"),
            root_markers=("mini-imagenet-cache-*.pkl",),
            notes=(
                "The pickles are read with a restricted unpickler that accepts numpy arrays and "
                "plain containers only."
            ),
            scan=_scan_miniimagenet,
        ),
        _spec(
            name="cifarfs",
            title="CIFAR-FS",
            role="id",
            split_sizes=(64, 16, 20),
            split=(
                "Bertinetto et al. (ICLR 2019) 64/16/20, from cifar100/splits/bertinetto/*.txt; "
                "without those files a seeded random 64/16/20 split (with a PaperSplitWarning)"
            ),
            layout=(
                "<root>/cifarfs/cifar100/data/<class>/*.png (100 CIFAR-100 classes, 600 "
                "images each) and <root>/cifarfs/cifar100/splits/bertinetto/{train,val,test}.txt "
                "(one class per line): learn2learn's cifar100.zip unpacked into cifarfs/"
            ),
            where=(
                "https://zenodo.org/record/7978538/files/cifar100.zip (learn2learn's CIFAR-FS "
                "archive, with the split files of Bertinetto et al., ICLR 2019); CIFAR-100: "
                "Krizhevsky 2009, https://www.cs.toronto.edu/~kriz/cifar.html"
            ),
            dirnames=("cifarfs", "cifar-fs", "CIFAR-FS", "CIFARFS", "cifar_fs"),
            markers=("cifar100/data",),
            scan=_scan_cifarfs,
            rule=_rule_random((64, 16, 20)),
        ),
        _spec(
            name="aircraft",
            title="FGVC-Aircraft",
            role="id",
            split_sizes=(70, 15, 15),
            split=(
                "Vuorio et al. (NeurIPS 2019, MMAML) 70/15/15: the variants of variants.txt "
                "shuffled by np.random.RandomState(123), first int(0.7 C) -> train, next "
                "int(0.15 C) -> val, rest -> test (their proc_aircraft.py rule; exact)"
            ),
            layout=(
                "<root>/aircraft/fgvc-aircraft-2013b/data/ with images/<id>.jpg, variants.txt "
                "and images_variant_{trainval,test}.txt (or images_variant_{train,val,test}.txt),"
                " lines '<id> <variant>': the official fgvc-aircraft-2013b.tar.gz unpacked into "
                "aircraft/"
            ),
            where=(
                "https://www.robots.ox.ac.uk/~vgg/data/fgvc-aircraft/archives/"
                "fgvc-aircraft-2013b.tar.gz; Maji et al., arXiv:1306.5151, 2013"
            ),
            dirnames=("aircraft", "fgvc_aircraft", "fgvc-aircraft", "FGVC-Aircraft"),
            markers=("fgvc-aircraft-2013b/data/images", "data/images"),
            root_markers=("fgvc-aircraft-2013b/data/images",),
            notes=(
                "The release has 100 variants (the paper says 102 categories). The 20-pixel "
                "copyright banner at the bottom of every image is cropped off before the "
                "centre crop."
            ),
            scan=_scan_aircraft,
            rule=_rule_vuorio,
        ),
        _spec(
            name="butterfly",
            title="Butterfly-200",
            role="id",
            split_sizes=(100, 40, 45),
            split=(
                "ORDER appendix A: species with more than 50 images (185 of 200), random "
                "100/40/45 split. The paper's draw is not published, so: sorted species names, "
                "np.random.default_rng(class_split_seed).permutation(185), first 45 -> test, "
                "next 40 -> val, rest -> train; supply splits/*.txt for another split"
            ),
            layout=(
                "<root>/butterfly/images_small/<species>/*.jpg (Butterfly-200's image folder, "
                "one sub-folder per species; images/<species>/ works too); optional "
                "<root>/butterfly/splits/{train,val,test}.txt"
            ),
            where=(
                "Butterfly-200 from its authors: Chen et al., 'Fine-grained representation "
                "learning and recognition by exploiting hierarchical semantic embedding', "
                "ACM Multimedia 2018 (download link in the paper / the authors' HSE project)"
            ),
            dirnames=("butterfly", "butterfly200", "Butterfly200", "Butterfly-200"),
            markers=("images_small", "images"),
            scan=_scan_butterfly,
            rule=_rule_random((100, 40, 45), min_images=50),
        ),
        _spec(
            name="omniglot",
            title="Omniglot",
            role="ood",
            split_sizes=(973, 325, 325),
            split=_OOD_SPLIT + "; 1623 characters -> 973/325/325",
            layout=(
                "<root>/omniglot/omniglot-py/images_background/<alphabet>/<characterNN>/*.png "
                "and .../images_evaluation/... (torchvision's and learn2learn's layout: the "
                "official images_background.zip and images_evaluation.zip unpacked into "
                "omniglot-py/; <root>/omniglot-py/ works too); classes are "
                "'<alphabet>/<characterNN>'"
            ),
            where=(
                "https://github.com/brendenlake/omniglot (python/images_background.zip, "
                "python/images_evaluation.zip); Lake et al., Science 2015"
            ),
            dirnames=("omniglot", "Omniglot"),
            markers=(
                "omniglot-py/images_background",
                "omniglot-py/images_evaluation",
                "images_background",
                "images_evaluation",
            ),
            root_markers=("omniglot-py/images_background", "omniglot-py/images_evaluation"),
            scan=_scan_omniglot,
            rule=_rule_random((60, 20, 20)),
        ),
        _spec(
            name="vggflower",
            title="VGG-Flower-102",
            role="ood",
            split_sizes=(62, 20, 20),
            split=_OOD_SPLIT + "; 102 classes -> 62/20/20",
            layout=(
                "<root>/vggflower/jpg/image_00001.jpg ... image_08189.jpg and "
                "<root>/vggflower/imagelabels.mat ('labels' [1, 8189], class ids 1..102): the "
                "official 102flowers.tgz and imagelabels.mat (learn2learn's vgg_flower102/ "
                "folder works too); classes are named class_001 ... class_102"
            ),
            where=(
                "https://www.robots.ox.ac.uk/~vgg/data/flowers/102/ (102flowers.tgz, "
                "imagelabels.mat); Nilsback & Zisserman, ICVGIP 2008"
            ),
            dirnames=("vggflower", "vgg_flower102", "flowers102", "vgg-flower", "102flowers"),
            markers=("imagelabels.mat", "jpg"),
            scan=_scan_vggflower,
            rule=_rule_random((60, 20, 20)),
        ),
        _spec(
            name="fish",
            title="WildFish",
            role="ood",
            split_sizes=(600, 200, 200),
            split=_OOD_SPLIT + "; 1000 species -> 600/200/200",
            layout=(
                "<root>/fish/WildFish_part1/<species>/*.jpg ... WildFish_part4/<species>/*.jpg "
                "(the four archives of the WildFish release unpacked side by side; a species "
                "may appear in several parts) or <root>/fish/images/<species>/*.jpg"
            ),
            where=(
                "WildFish (1000 species, 54,459 images): Zhuang et al., 'WildFish: a large "
                "benchmark for fish recognition in the wild', ACM Multimedia 2018, "
                "https://github.com/PeiqinZhuang/WildFish"
            ),
            dirnames=("fish", "wildfish", "WildFish"),
            markers=("images", "WildFish_part*"),
            scan=_scan_fish,
            rule=_rule_random((60, 20, 20)),
        ),
    )
}

#: The paper's domain orders (section 5 and appendix C).
PAPER_ORDERS: dict[int, list[str]] = {
    1: ["plantae", "cub", "miniimagenet", "cifarfs", "aircraft", "butterfly"],
    2: ["butterfly", "cub", "cifarfs", "plantae", "miniimagenet", "aircraft"],
    3: ["cub", "cifarfs", "plantae", "miniimagenet", "butterfly", "aircraft"],
}
#: The six in-distribution domains (order 1).
PAPER_ID: list[str] = list(PAPER_ORDERS[1])
#: The OOD sources, mixed equally in every episode.
PAPER_OOD: list[str] = ["omniglot", "vggflower", "fish"]


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", str(name).lower())


_ALIASES: dict[str, str] = {}
for _s in PAPER_DATASETS.values():
    for _a in (_s.name, _s.title, *_s.dirnames):
        _ALIASES[_norm(_a)] = _s.name
_ALIASES.update(
    {
        "cub2002011": "cub",
        "cubirds": "cub",
        "fgvcaircraft": "aircraft",
        "vggflower102": "vggflower",
        "vggflowers": "vggflower",
        "oxfordflowers102": "vggflower",
        "flowers": "vggflower",
        "inaturalistplantae": "plantae",
        "inaturalist2017": "plantae",
    }
)


def paper_dataset(name: str) -> PaperDataset:
    """The spec of a paper dataset by canonical name or a common spelling (``"CIFAR-FS"``)."""
    key = _ALIASES.get(_norm(name))
    if key is None:
        close = difflib.get_close_matches(_norm(name), sorted(_ALIASES), n=1, cutoff=0.6)
        hint = f"; did you mean {_ALIASES[close[0]]!r}?" if close else ""
        raise ValueError(
            f"unknown paper dataset {name!r}{hint} (choose one of {sorted(PAPER_DATASETS)})"
        )
    return PAPER_DATASETS[key]


# ============================================================================ loading
def default_cache_dir() -> Path:
    """``$AVALANCHE_SETS_CACHE`` if set, else ``~/.cache/avalanche_sets/paper``."""
    env = os.environ.get("AVALANCHE_SETS_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "avalanche_sets" / "paper"


def _has_marker(folder: Path, markers: Iterable[str]) -> bool:
    return folder.is_dir() and any(next(iter(folder.glob(m)), None) is not None for m in markers)


def locate_paper_dataset(name: str, root: str | os.PathLike) -> Path:
    """The folder of one paper dataset under ``root`` (or ``root`` itself if it is that folder).

    Looks for ``<root>/<dirname>`` for every accepted folder name of the dataset, then at
    ``root`` itself.

    Raises:
        DatasetNotFoundError: nothing that looks like the dataset was found.
    """
    spec = paper_dataset(name)
    root = Path(root).expanduser()
    if not root.is_dir():
        raise DatasetNotFoundError(
            spec, root / spec.dirnames[0], "not found: the root folder does not exist"
        )
    for d in spec.dirnames:
        if _has_marker(root / d, spec.markers):
            return root / d
    if _norm(root.name) in {_norm(d) for d in spec.dirnames} and _has_marker(root, spec.markers):
        return root
    if _has_marker(root, spec.root_markers):
        return root
    present = [d for d in spec.dirnames if (root / d).is_dir()]
    problem = (
        f"not found: {root / present[0]} exists but does not have the expected layout"
        if present
        else f"not found: no folder {' / '.join(spec.dirnames)} under {root}"
    )
    return_path = root / (present[0] if present else spec.dirnames[0])
    raise DatasetNotFoundError(spec, return_path, problem)


def _cache_file(
    spec: PaperDataset, ds_dir: Path, image_size: int, seed: int, cache_dir: Path
) -> Path:
    key = json.dumps(
        [
            _CACHE_VERSION,
            spec.name,
            str(ds_dir.resolve()),
            image_size,
            seed,
            _user_split_digest(ds_dir),
        ]
    )
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return cache_dir / f"{spec.name}-{image_size}px-{digest}.npz"


def _build_arrays(
    spec: PaperDataset,
    ds_dir: Path,
    image_size: int,
    seed: int,
    workers: int | None,
    progress: bool | None,
) -> dict[str, np.ndarray]:
    assert spec.scan is not None
    listing = spec.scan(ds_dir, spec)
    names, counts = listing.class_names, listing.counts()

    user = _user_split(spec, ds_dir, names)
    if user is not None:
        split_map, note = user, f"user split files {ds_dir / 'splits'}/{{train,val,test}}.txt"
    elif listing.official is not None:
        split_map, note = listing.official, listing.official_note
    else:
        assert spec.rule is not None
        split_map, note = spec.rule(names, counts, seed), spec.split
        if listing.fallback_note:
            warnings.warn(f"{spec.title}: {listing.fallback_note}", PaperSplitWarning, stacklevel=3)
            note = listing.fallback_note
    keep = [i for i, n in enumerate(names) if n in split_map]
    if user is not None and len(keep) < len(names):
        left_out = [n for n in names if n not in split_map]
        warnings.warn(
            f"{spec.title}: {len(left_out)} class(es) found in {ds_dir} are listed in none of "
            f"{ds_dir / 'splits'}/{{train,val,test}}.txt and are left out, e.g. {left_out[:5]}",
            PaperSplitWarning,
            stacklevel=3,
        )
    if not keep:
        raise _malformed(spec, ds_dir, "no class is left after applying the class split")
    empty = [names[i] for i in keep if counts[i] == 0]
    if empty:
        raise _malformed(
            spec,
            ds_dir,
            f"{len(empty)} class(es) have no images, e.g. {empty[:5]}; fix: restore their "
            "image files, or leave them out with splits/{train,val,test}.txt",
        )

    selected = []
    for i in keep:
        sel = listing.items[i]
        cap = spec.max_images_per_class
        if cap is not None and len(sel) > cap:
            rng = np.random.default_rng([seed, zlib.crc32(names[i].encode())])
            sel = [sel[j] for j in np.sort(rng.choice(len(sel), size=cap, replace=False))]
        selected.append(sel)
    sizes = [len(s) for s in selected]
    if listing.arrays is None:
        files = [p for s in selected for p in s]
        images = load_images(
            files,
            image_size,
            crop_bottom=listing.crop_bottom,
            workers=workers,
            desc=spec.name,
            progress=progress,
        )
    else:
        idx = np.concatenate([np.asarray(s, dtype=np.int64) for s in selected])
        images = resize_images(listing.arrays[idx], image_size)

    class_names = [names[i] for i in keep]
    class_split = np.array([split_map[n] for n in class_names], dtype="<U5")
    got = tuple(int((class_split == s).sum()) for s in SPLITS)
    if got != spec.split_sizes:
        warnings.warn(
            f"{spec.title}: class split train/val/test = {got[0]}/{got[1]}/{got[2]} differs "
            f"from the paper's {spec.split_sizes[0]}/{spec.split_sizes[1]}/"
            f"{spec.split_sizes[2]} ({len(names)} classes found in {ds_dir}); results are not "
            "comparable with the paper's",
            PaperSplitWarning,
            stacklevel=3,
        )
    source = (
        f"{spec.title} from {ds_dir}; class split: {note}; {sum(sizes)} images resized to "
        f"{image_size}px"
    )
    return _validate_arrays(
        {
            "images": images,
            "labels": np.repeat(np.arange(len(class_names)), sizes),
            "class_names": np.asarray(class_names, dtype=str),
            "class_split": class_split,
            "source": np.asarray(source, dtype=str),
        },
        f"{spec.title} at {ds_dir}",
    )


def load_paper_domain(
    name: str,
    root: str | os.PathLike,
    *,
    image_size: int = 84,
    cache_dir: str | os.PathLike | None = None,
    cache: bool = True,
    refresh: bool = False,
    labeled_fraction: float = 0.4,
    split_seed: int = 0,
    class_split_seed: int = 0,
    workers: int | None = None,
    progress: bool | None = None,
) -> Domain:
    """Load one of the paper's datasets from ``root`` as a :class:`Domain`.

    Args:
        name: ``plantae``, ``cub``, ``miniimagenet``, ``cifarfs``, ``aircraft``,
            ``butterfly``, ``omniglot``, ``vggflower`` or ``fish`` (or a common spelling).
        root: folder holding the datasets, each in its own sub-folder
            (``<root>/cub/CUB_200_2011/...``; see ``PAPER_DATASETS[name].layout``), or the
            dataset's own folder.
        image_size: side of the square images (the paper: 84).
        cache_dir: where the decoded, resized images are cached (default
            :func:`default_cache_dir`).
        cache: read and write the cache; ``False`` decodes every time.
        refresh: ignore an existing cache entry and rebuild it.
        labeled_fraction: fraction of every class's images in its labeled part (0.4).
        split_seed: seed of the labeled/unlabeled split inside every class.
        class_split_seed: seed of the seeded-random class splits (Butterfly, the OOD sources,
            CIFAR-FS without its split files) and of Plantae's 600-image cap; published
            splits do not depend on it.
        workers: image-decoding threads.
        progress: tqdm progress bar (``None``: on a terminal only).

    Raises:
        DatasetNotFoundError: the dataset is missing or malformed (names the path, the
            expected layout and where to get the data).
        CorruptImageError: an image file cannot be decoded (names the file).
    """
    spec = paper_dataset(name)
    if int(image_size) < 1:
        raise ValueError(f"image_size must be a positive integer, got {image_size!r}")
    image_size = int(image_size)
    ds_dir = locate_paper_dataset(spec.name, root)
    domain_kw = dict(labeled_fraction=labeled_fraction, split_seed=split_seed)

    path = None
    if cache:
        folder = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
        path = _cache_file(spec, ds_dir, image_size, int(class_split_seed), folder)
        if path.is_file() and not refresh:
            try:
                dom = load_pack(path, name=spec.name, **domain_kw)
                dom.origin = f"{spec.title} at {ds_dir}"
                return dom
            except ValueError as err:
                warnings.warn(
                    f"ignoring unreadable cache file {path} ({err}); rebuilding", stacklevel=2
                )

    arrays = _build_arrays(spec, ds_dir, image_size, int(class_split_seed), workers, progress)
    if path is not None:
        _atomic_savez(path, arrays, compress=False)
    return Domain(
        name=spec.name,
        images=arrays["images"],
        labels=arrays["labels"],
        class_names=arrays["class_names"].tolist(),
        class_split=arrays["class_split"],
        source=str(arrays["source"]),
        origin=f"{spec.title} at {ds_dir}",
        **domain_kw,
    )


def load_paper_domains(
    root: str | os.PathLike, names: Iterable[str] | None = None, **kwargs
) -> dict[str, Domain]:
    """Load several paper datasets: ``{canonical name: Domain}`` in the order of ``names``.

    ``names`` defaults to the six stream domains of order 1 followed by the three OOD
    sources; ``kwargs`` go to :func:`load_paper_domain`.
    """
    names = list(PAPER_ORDERS[1] + PAPER_OOD) if names is None else list(names)
    out: dict[str, Domain] = {}
    for n in names:
        spec = paper_dataset(n)
        if spec.name not in out:
            out[spec.name] = load_paper_domain(spec.name, root, **kwargs)
    return out
