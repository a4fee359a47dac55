"""From public torchvision datasets to a SETS stream of domain packs.

:func:`prepare_torchvision_stream` reads datasets a user already has in a torchvision root (the
folder passed as ``root=`` to :mod:`torchvision.datasets`), through torchvision's own dataset
classes, and writes one ``.npz`` domain pack per dataset (format:
:mod:`avalanche_sets.data.packs`) plus ``manifest.json`` and ``README.md`` into an output
folder. ``avalanche-sets run --preset cpu --root <out>`` then runs on them::

    avalanche-sets prepare torchvision --root ~/torchvision --out packs/tv
    avalanche-sets run --preset cpu --root packs/tv

Nothing is downloaded unless ``download=True`` (CLI ``--download``), which passes
``download=True`` to torchvision for machines with internet access.

**The stream.** :data:`DEFAULT_DOMAINS` (six in-distribution domains, written as
``<name>.npz``) and :data:`DEFAULT_OOD` (OOD sources, written as ``ood_<name>.npz``, the prefix
by which the ``packs`` source tells OOD packs apart). Any dataset of :data:`TORCHVISION_SOURCES`
can take either role.

**The rules** (those of ``../shared/data/sets-mini``):

* every official part of a dataset that :data:`TORCHVISION_SOURCES` lists is read (e.g.
  CIFAR-100 train + test) and classes are merged by name; the official image splits are not
  kept, SETS splits *classes*;
* classes with fewer than ``min_images_per_class`` images (20) are left out, with a warning
  naming them; at most ``max_images_per_class`` (100) images per class are kept, drawn with a
  seeded generator (``np.random.default_rng([seed, crc32(name)])``);
* images: RGB (grey replicated), centre-cropped to a square, resized with Pillow LANCZOS to
  ``image_size``, uint8; labels sorted by class;
* class split: :func:`~avalanche_sets.data.packs.split_classes` ``(C, split, seed)``, i.e. the
  first ``round(0.2 C)`` classes of ``default_rng(seed).permutation(C)`` to test, the next to
  val, the rest to train (at least 5 in val/test when ``C >= 20``). A stream domain needs at
  least ``n_way`` classes in every split (an OOD source at least one), checked before any
  image is decoded.

**Integrity.** torchvision verifies the md5 of the files of CIFAR-100, Omniglot (its zip),
Flowers-102 (the ``.mat`` files) and SVHN even with ``download=False``. ``skip_md5=True`` (CLI
``--skip-md5``) reads such files as they are, e.g. an Omniglot folder whose zip was deleted:
the md5 check of that dataset's torchvision module is replaced by "the file exists" while the
dataset object is built.
"""

from __future__ import annotations

import contextlib
import datetime
import difflib
import importlib
import json
import os
import shlex
import warnings
import zlib
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from tqdm.auto import tqdm

from .. import __version__
from .images import LANCZOS, center_square, split_classes, to_rgb
from .packs import load_pack, save_pack

__all__ = [
    "TorchvisionSource",
    "TORCHVISION_SOURCES",
    "DEFAULT_DOMAINS",
    "DEFAULT_OOD",
    "OOD_PREFIX",
    "DatasetNotFoundError",
    "prepare_torchvision_stream",
    "check_stream_names",
    "check_class_split",
    "open_torchvision_parts",
    "collect_labels",
    "select_images",
    "pil_to_array",
    "decode_images",
    "build_torchvision_pack",
]

#: File-name prefix of OOD packs (the ``packs`` source reads ``ood_*.npz`` as OOD sources).
OOD_PREFIX = "ood_"


class DatasetNotFoundError(FileNotFoundError):
    """A torchvision dataset missing from the root (the message names the path to create)."""


@dataclass(frozen=True)
class TorchvisionSource:
    """How one torchvision dataset becomes a domain pack.

    Attributes:
        name: our name (pack file stem, CLI name).
        title: the dataset's usual name.
        dataset: the class in :mod:`torchvision.datasets`.
        parts: constructor keyword arguments of each official part read (merged by class name).
        needs: paths under the torchvision root that must exist (checked before torchvision
            is called, so that a missing dataset names them).
        n_classes: classes of the full dataset (to refuse a stream that cannot work before
            reading anything).
        md5_module: the torchvision module whose ``check_integrity`` verifies md5 sums even
            with ``download=False`` (``None``: torchvision checks only that folders exist).
        md5_files: the files whose md5 torchvision verifies (for error messages).
        licence: where the images come from and their terms of use.
        class_names: names of a built dataset object's label ids (default ``ds.classes``).
    """

    name: str
    title: str
    dataset: str
    parts: tuple[dict[str, Any], ...]
    needs: tuple[str, ...]
    n_classes: int
    licence: str
    md5_module: str | None = None
    md5_files: tuple[str, ...] = ()
    class_names: Callable[[Any], list[str]] = field(default=lambda ds: [str(c) for c in ds.classes])


def _omniglot_names(ds) -> list[str]:
    # torchvision's Omniglot has no ``classes``; its label ids index "<alphabet>/<character>".
    return [str(c) for c in ds._characters]


def _gtsrb_names(ds) -> list[str]:
    # GTSRB labels are the indices of the sorted class folders (00000 ... 00042).
    from torchvision.datasets.folder import find_classes

    return find_classes(str(ds._target_folder))[0]


def _pet_names(ds) -> list[str]:
    # torchvision numbers a split's breeds by the labels *present in that split*; naming each
    # label from its own images' file names ("Bengal_12" -> "Bengal") stays right even when a
    # split lacks a breed.
    names: dict[int, str] = {}
    for path, label in zip(ds._images, ds._labels):
        names[int(label)] = " ".join(
            p.title() for p in Path(path).stem.rsplit("_", 1)[0].split("_")
        )
    return [names.get(i, f"class {i}") for i in range(max(names, default=-1) + 1)]


def _digit_names(ds) -> list[str]:
    return [str(d) for d in range(10)]  # SVHN: label 0..9 is the digit (10 mapped to 0)


#: The datasets ``prepare_torchvision_stream`` can read, by name.
TORCHVISION_SOURCES: dict[str, TorchvisionSource] = {
    s.name: s
    for s in (
        TorchvisionSource(
            name="cifar100",
            title="CIFAR-100",
            dataset="CIFAR100",
            parts=({"train": True}, {"train": False}),
            needs=("cifar-100-python/train", "cifar-100-python/test", "cifar-100-python/meta"),
            n_classes=100,
            md5_module="cifar",
            md5_files=("cifar-100-python/train", "cifar-100-python/test", "cifar-100-python/meta"),
            licence="CIFAR-100 (Krizhevsky 2009), 80 Million Tiny Images; research use",
        ),
        TorchvisionSource(
            name="aircraft",
            title="FGVC-Aircraft",
            dataset="FGVCAircraft",
            parts=({"split": "trainval"}, {"split": "test"}),
            needs=("fgvc-aircraft-2013b/data",),
            n_classes=100,
            licence="FGVC-Aircraft 2013b (Maji et al. 2013), variants; non-commercial research",
        ),
        TorchvisionSource(
            name="flowers102",
            title="Flowers-102",
            dataset="Flowers102",
            parts=({"split": "train"}, {"split": "val"}, {"split": "test"}),
            needs=("flowers-102/jpg", "flowers-102/imagelabels.mat", "flowers-102/setid.mat"),
            n_classes=102,
            md5_module="flowers102",
            md5_files=("flowers-102/imagelabels.mat", "flowers-102/setid.mat"),
            licence="Oxford 102 Flowers (Nilsback & Zisserman 2008); research use",
        ),
        TorchvisionSource(
            name="dtd",
            title="DTD",
            dataset="DTD",
            parts=({"split": "train"}, {"split": "val"}, {"split": "test"}),
            needs=("dtd/dtd/images", "dtd/dtd/labels"),
            n_classes=47,
            licence="Describable Textures Dataset (Cimpoi et al. 2014); research use",
        ),
        TorchvisionSource(
            name="gtsrb",
            title="GTSRB",
            dataset="GTSRB",
            parts=({"split": "train"},),
            needs=("gtsrb/GTSRB/Training",),
            n_classes=43,
            class_names=_gtsrb_names,
            licence="GTSRB training set (Stallkamp et al. 2011); research use",
        ),
        TorchvisionSource(
            name="omniglot",
            title="Omniglot (background)",
            dataset="Omniglot",
            parts=({"background": True},),
            needs=("omniglot-py/images_background",),
            n_classes=964,
            md5_module="omniglot",
            md5_files=("omniglot-py/images_background.zip",),
            class_names=_omniglot_names,
            licence="Omniglot (Lake et al. 2015), background set; MIT",
        ),
        TorchvisionSource(
            name="svhn",
            title="SVHN",
            dataset="SVHN",
            parts=({"split": "train"},),
            needs=("train_32x32.mat",),
            n_classes=10,
            md5_module="svhn",
            md5_files=("train_32x32.mat",),
            class_names=_digit_names,
            licence="SVHN (Netzer et al. 2011), cropped digits; non-commercial use",
        ),
        TorchvisionSource(
            name="food101",
            title="Food-101",
            dataset="Food101",
            parts=({"split": "train"}, {"split": "test"}),
            needs=("food-101/images", "food-101/meta"),
            n_classes=101,
            licence="Food-101 (Bossard et al. 2014), Foodspotting images; research use",
        ),
        TorchvisionSource(
            name="pets",
            title="Oxford-IIIT Pet",
            dataset="OxfordIIITPet",
            parts=({"split": "trainval"}, {"split": "test"}),
            needs=("oxford-iiit-pet/images", "oxford-iiit-pet/annotations"),
            n_classes=37,
            class_names=_pet_names,
            licence="Oxford-IIIT Pet (Parkhi et al. 2012); CC BY-SA 4.0",
        ),
        TorchvisionSource(
            name="eurosat",
            title="EuroSAT (RGB)",
            dataset="EuroSAT",
            parts=({},),
            needs=("eurosat/2750",),
            n_classes=10,
            licence="EuroSAT (Helber et al. 2019), Sentinel-2 RGB; MIT",
        ),
    )
}

#: Default stream domains, in stream order: every dataset of the issue with >= 20 classes.
DEFAULT_DOMAINS: tuple[str, ...] = (
    "cifar100",
    "aircraft",
    "flowers102",
    "dtd",
    "gtsrb",
    "omniglot",
)
#: Default OOD sources: SVHN's 10 digit classes are too few for 5-way val/test episodes.
DEFAULT_OOD: tuple[str, ...] = ("svhn",)


# ----------------------------------------------------------------------------- checks
def _unknown(name: str) -> ValueError:
    close = difflib.get_close_matches(name, list(TORCHVISION_SOURCES), n=1, cutoff=0.5)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return ValueError(
        f"unknown torchvision dataset {name!r}{hint}; known: {sorted(TORCHVISION_SOURCES)}; an "
        "image folder with one sub-folder per class goes through `avalanche-sets prepare pack`"
    )


def check_stream_names(domains: Sequence[str], ood: Sequence[str]) -> None:
    """Refuse unknown, repeated or doubly used dataset names (before anything is read)."""
    if isinstance(domains, str) or isinstance(ood, str):
        raise TypeError("domains and ood are lists of names, e.g. domains=['cifar100', 'dtd']")
    if not domains:
        raise ValueError("a stream needs at least one domain; fix: name datasets in domains=")
    for name in (*domains, *ood):
        if name not in TORCHVISION_SOURCES:
            raise _unknown(name)
    names = [*domains, *ood]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(
            f"{twice} named twice (domains {list(domains)}, ood {list(ood)}); a dataset is "
            f"either one stream domain or one OOD source; fix: name it once (the default OOD "
            f"sources are {list(DEFAULT_OOD)}: pass --ood / ood=[...] to choose others)"
        )


def check_class_split(
    name: str,
    n_classes: int,
    *,
    ood: bool,
    n_way: int,
    split: Sequence[float],
    seed: int,
    what: str = "classes",
) -> np.ndarray:
    """The class split of ``n_classes`` classes, or a ValueError naming the numbers.

    A stream domain needs ``n_way`` classes in each of train, val and test (episodes are
    ``n_way``-way in every split); an OOD source needs one class in each.
    """
    need = 1 if ood else int(n_way)
    role = "OOD source" if ood else f"stream domain ({n_way}-way episodes)"
    if n_classes < 3:
        raise ValueError(
            f"{name}: {n_classes} {what}, too few for a train/val/test class split (at least 3, "
            f"one per split){'' if ood else f'; as a {role} it needs {3 * need}'}"
        )
    cls_split = split_classes(n_classes, split, seed)
    counts = {s: int((cls_split == s).sum()) for s in ("train", "val", "test")}
    short = [s for s, c in counts.items() if c < need]
    if short:
        sizes = "/".join(str(c) for c in counts.values())
        fix = (
            "use it as an OOD source (ood=[...], CLI --ood), or lower n_way (--n-way)"
            if not ood
            else "lower min_images_per_class or pick another OOD source"
        )
        raise ValueError(
            f"{name}: {n_classes} {what} split {sizes} (train/val/test, split={tuple(split)}) "
            f"leave(s) fewer than {need} class(es) in {short}, which a {role} needs; fix: {fix}"
        )
    return cls_split


# ----------------------------------------------------------------------------- reading
@contextlib.contextmanager
def _md5_checks_skipped(source: TorchvisionSource, skip: bool) -> Iterator[None]:
    """While active, torchvision's md5 check of ``source``'s module accepts any file.

    Only the name ``check_integrity`` inside that dataset's module is replaced (and restored).
    It then accepts a missing file too (Omniglot checks its zip, which the extracted images do
    not need): :func:`open_torchvision_parts` has checked the paths the reading needs first.
    """
    if not (skip and source.md5_module):
        yield
        return
    module = importlib.import_module(f"torchvision.datasets.{source.md5_module}")
    original = module.check_integrity
    module.check_integrity = lambda fpath, md5=None: True
    try:
        yield
    finally:
        module.check_integrity = original


_NOT_FOUND_FIX = (
    "fix: put the dataset there as torchvision downloads it, or pass --download "
    "(download=True) on a machine with internet"
)


def _missing(source: TorchvisionSource, root: Path) -> str:
    """What of ``source`` is missing under ``root`` ("" when nothing is)."""
    missing = [str(root / p) for p in source.needs if not (root / p).exists()]
    if not missing:
        return ""
    return (
        f"{source.title} not found: torchvision.datasets.{source.dataset}(root={str(root)!r}) "
        f"reads {[str(root / p) for p in source.needs]}, missing {missing}"
    )


def open_torchvision_parts(
    source: TorchvisionSource,
    root: str | os.PathLike,
    *,
    download: bool = False,
    skip_md5: bool = False,
) -> list[Any]:
    """Build the torchvision dataset object of every part of ``source`` (no image decoded).

    Raises:
        DatasetNotFoundError: a path of ``source.needs`` is missing under ``root`` (and
            ``download`` is False); the message names the paths and ``--download``.
        ValueError: torchvision refuses the files (e.g. an md5 mismatch); the message says
            which files torchvision verifies and how to go on.
    """
    import torchvision.datasets as tvd

    root = Path(root).expanduser()
    if not download:
        missing = _missing(source, root)
        if missing:
            raise DatasetNotFoundError(f"{missing}; {_NOT_FOUND_FIX}")
    cls = getattr(tvd, source.dataset)
    parts = []
    with _md5_checks_skipped(source, skip_md5):
        for kwargs in source.parts:
            try:
                parts.append(cls(root=str(root), download=download, **kwargs))
            except RuntimeError as err:
                md5 = (
                    f" torchvision also verifies the md5 of {list(source.md5_files)} with "
                    "download=False; fix: --download to fetch the official files, or --skip-md5 "
                    "(skip_md5=True) to read the files as they are"
                    if source.md5_files and not skip_md5
                    else ""
                )
                raise ValueError(
                    f"torchvision.datasets.{source.dataset}(root={str(root)!r}, {kwargs}) "
                    f"refused the files: {err}.{md5}"
                ) from err
    return parts


def _targets(ds) -> list[int]:
    """Label ids of a torchvision dataset without decoding any image."""
    for attr in ("targets", "labels", "_labels"):
        value = getattr(ds, attr, None)
        if value is not None:
            return [int(t) for t in np.asarray(value).reshape(-1)]
    for attr in ("_samples", "_flat_character_images"):
        value = getattr(ds, attr, None)
        if value is not None:
            return [int(t) for _, t in value]
    raise TypeError(
        f"cannot read the labels of {type(ds).__name__} without decoding its images (torchvision "
        "changed its attributes?); known: targets, labels, _labels, _samples"
    )


@dataclass
class _Labels:
    """Every image of a dataset's parts: where it is and its merged class id."""

    class_names: list[str]
    part: np.ndarray  # [N] index of the part
    index: np.ndarray  # [N] index inside the part
    labels: np.ndarray  # [N] class id into class_names


def collect_labels(source: TorchvisionSource, parts: Sequence[Any]) -> _Labels:
    """Merge the parts' labels by class name (ids in order of first appearance)."""
    names: dict[str, int] = {}
    part, index, labels = [], [], []
    for p, ds in enumerate(parts):
        part_names = source.class_names(ds)
        targets = _targets(ds)
        for i, t in enumerate(targets):
            if not 0 <= t < len(part_names):
                raise ValueError(
                    f"{source.title}: label {t} of image {i} of part {source.parts[p]} is not a "
                    f"class id (0..{len(part_names) - 1})"
                )
            part.append(p)
            index.append(i)
            labels.append(names.setdefault(part_names[t], len(names)))
    return _Labels(
        class_names=list(names),
        part=np.asarray(part, dtype=np.int64),
        index=np.asarray(index, dtype=np.int64),
        labels=np.asarray(labels, dtype=np.int64),
    )


def select_images(
    labels: np.ndarray,
    class_names: Sequence[str],
    *,
    min_images_per_class: int,
    max_images_per_class: int,
    rng: np.random.Generator,
    where: str,
) -> tuple[list[int], list[np.ndarray]]:
    """Kept classes (sorted by name) and, for each, the positions of its chosen images.

    Classes with fewer than ``min_images_per_class`` images are left out with one warning
    naming them; a class with more than ``max_images_per_class`` keeps a random subset (sorted).
    """
    order = sorted(range(len(class_names)), key=lambda c: class_names[c])
    kept, picks, small = [], [], []
    for c in order:
        members = np.flatnonzero(labels == c)
        if members.size < min_images_per_class:
            small.append(f"{class_names[c]!r} ({members.size})")
            continue
        if members.size > max_images_per_class:
            members = np.sort(rng.choice(members, max_images_per_class, replace=False))
        kept.append(c)
        picks.append(members)
    if small:
        warnings.warn(
            f"{where}: left out {len(small)} class(es) with fewer than {min_images_per_class} "
            f"images: {', '.join(small[:10])}{' ...' if len(small) > 10 else ''}",
            stacklevel=3,
        )
    return kept, picks


def pil_to_array(img: Image.Image, image_size: int) -> np.ndarray:
    """uint8 RGB ``[S, S, 3]`` of a Pillow image: as :func:`~.packs.load_image` does for files."""
    img = center_square(to_rgb(img))
    if img.size != (image_size, image_size):
        img = img.resize((image_size, image_size), LANCZOS)
    return np.asarray(img, dtype=np.uint8)


def _image_file(ds, i: int) -> str:
    """The file of image ``i`` of a torchvision dataset, where its class keeps one."""
    for attr in ("_image_files", "_images", "samples", "_samples", "imgs"):
        value = getattr(ds, attr, None)
        if value is not None:
            item = value[i]
            return str(item[0] if isinstance(item, tuple) else item)
    flat = getattr(ds, "_flat_character_images", None)  # Omniglot: (file name, class)
    if flat is not None:
        name, label = flat[i]
        return os.path.join(ds.target_folder, ds._characters[label], name)
    return "file unknown"


def decode_images(
    parts: Sequence[Any],
    where: Sequence[tuple[int, int]],
    image_size: int,
    *,
    workers: int | None = None,
    desc: str = "images",
    progress: bool | None = None,
) -> np.ndarray:
    """``parts[p][i]`` images for every ``(p, i)`` of ``where``, as uint8 ``[N, S, S, 3]``.

    Decoding runs in a thread pool through the datasets' own ``__getitem__``; a file that
    cannot be decoded raises naming the image (nothing is skipped).
    """
    out = np.empty((len(where), image_size, image_size, 3), dtype=np.uint8)

    def one(pi: tuple[int, int]) -> np.ndarray:
        p, i = pi
        try:
            img = parts[p][i][0]
        except (OSError, ValueError, SyntaxError, EOFError) as err:
            raise ValueError(
                f"{desc}: cannot decode image {i} of {type(parts[p]).__name__} part {p} "
                f"({_image_file(parts[p], i)}): {err}; fix: replace or delete that file (nothing "
                "is skipped silently)"
            ) from err
        return pil_to_array(img, image_size)

    n_workers = max(1, min(8, os.cpu_count() or 1)) if workers is None else max(1, int(workers))
    disable = (len(where) < 200 or None) if progress is None else (not progress)
    with (
        tqdm(total=len(where), desc=desc, unit="img", disable=disable, leave=False) as bar,
        ThreadPoolExecutor(n_workers) as pool,
    ):
        for k, arr in enumerate(pool.map(one, where)):
            out[k] = arr
            bar.update()
    return out


# ----------------------------------------------------------------------------- building
def build_torchvision_pack(
    name: str,
    root: str | os.PathLike,
    out_path: str | os.PathLike,
    *,
    ood: bool,
    image_size: int = 32,
    min_images_per_class: int = 20,
    max_images_per_class: int = 100,
    split: Sequence[float] = (0.6, 0.2, 0.2),
    seed: int = 0,
    n_way: int = 5,
    download: bool = False,
    skip_md5: bool = False,
    workers: int | None = None,
    progress: bool | None = None,
) -> dict[str, Any]:
    """Write one domain pack from a torchvision dataset; return its manifest entry."""
    if name not in TORCHVISION_SOURCES:
        raise _unknown(name)
    source = TORCHVISION_SOURCES[name]
    parts = open_torchvision_parts(source, root, download=download, skip_md5=skip_md5)
    found = collect_labels(source, parts)
    where = f"{source.title} under {root}"
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    kept, picks = select_images(
        found.labels,
        found.class_names,
        min_images_per_class=min_images_per_class,
        max_images_per_class=max_images_per_class,
        rng=rng,
        where=where,
    )
    cls_split = check_class_split(
        name,
        len(kept),
        ood=ood,
        n_way=n_way,
        split=split,
        seed=seed,
        what=f"classes with >= {min_images_per_class} images",
    )
    rows = np.concatenate(picks)
    images = decode_images(
        parts,
        list(zip(found.part[rows].tolist(), found.index[rows].tolist())),
        image_size,
        workers=workers,
        desc=name,
        progress=progress,
    )
    counts = np.asarray([p.size for p in picks])
    path = save_pack(
        {
            "images": images,
            "labels": np.repeat(np.arange(len(kept)), counts).astype(np.int32),
            "class_names": [found.class_names[c] for c in kept],
            "class_split": cls_split,
        },
        out_path,
        source=f"{source.licence}; torchvision.datasets.{source.dataset} "
        f"{[dict(p) for p in source.parts]}, {len(kept)} classes, {rows.size} images",
    )
    return {
        "pack": path.name,
        "dataset": name,
        "title": source.title,
        "role": "ood" if ood else "stream",
        "torchvision": f"torchvision.datasets.{source.dataset}",
        "parts": [dict(p) for p in source.parts],
        "classes": len(kept),
        "classes_left_out": len(found.class_names) - len(kept),
        "images": int(rows.size),
        "images_per_class": [int(counts.min()), int(np.median(counts)), int(counts.max())],
        "split": {s: int((cls_split == s).sum()) for s in ("train", "val", "test")},
        "licence": source.licence,
    }


def _check_out_folder(out: Path, files: Sequence[str]) -> None:
    """Refuse an output folder holding other packs: the ``packs`` source would read them too."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"output folder {out} is a file; fix: name a folder")
    if out.is_dir():
        others = sorted(p.name for p in out.glob("*.npz") if p.name not in files)
        if others:
            raise ValueError(
                f"output folder {out} already holds other packs {others}, which a run on it "
                "would load as domains or OOD sources too; fix: use an empty folder or delete them"
            )


def _run_command(out: str, domains: Sequence[str]) -> str:
    """The run on these packs; ``--set domains=`` keeps the prepared order (a packs folder
    is otherwise read in file-name order)."""
    run = f"avalanche-sets run --preset cpu --root {shlex.quote(out)}"
    if list(domains) == sorted(domains):
        return run
    return run + " --set " + shlex.quote(f"domains={list(domains)!r}")


def _readme(manifest: dict[str, Any]) -> str:
    s = manifest["settings"]
    lines = [
        "# SETS domain packs from torchvision datasets",
        "",
        f"Written by `avalanche-sets prepare torchvision` on {manifest['date']} (avalanche-sets "
        f"{manifest['avalanche_sets']}, torchvision {manifest['torchvision_version']}) from the "
        f"torchvision root `{s['root']}`. Regenerate with:",
        "",
        f"    {manifest['command']}",
        "",
        "Run on them (stream order as prepared):",
        "",
        f"    {manifest['run_command']}",
        "",
        "| pack | role | dataset | classes | images | img/class min/med/max | split tr/va/te |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for e in manifest["packs"]:
        lo, med, hi = e["images_per_class"]
        sp = e["split"]
        lines.append(
            f"| `{e['pack']}` | {e['role']} | {e['title']} | {e['classes']} | {e['images']} | "
            f"{lo}/{med}/{hi} | {sp['train']}/{sp['val']}/{sp['test']} |"
        )
    lines += [
        "",
        f"Rules: every listed official part of a dataset is read and classes are merged by name; "
        f"classes with fewer than {s['min_images_per_class']} images are left out; at most "
        f"{s['max_images_per_class']} images per class (seeded draw, seed {s['seed']}); RGB, "
        f"centre crop, Pillow LANCZOS to {s['image_size']} px, uint8; class split "
        f"`split_classes(C, {tuple(s['split'])}, seed={s['seed']})` (first round(0.2 C) classes "
        "of `default_rng(seed).permutation(C)` to test, the next to val, the rest to train). "
        "OOD packs are named `ood_<dataset>.npz`.",
        "",
        "Licences: " + "; ".join(f"{e['title']}: {e['licence']}" for e in manifest["packs"]) + ".",
        "",
    ]
    return "\n".join(lines)


def prepare_torchvision_stream(
    root: str | os.PathLike,
    out: str | os.PathLike,
    *,
    domains: Sequence[str] = DEFAULT_DOMAINS,
    ood: Sequence[str] = DEFAULT_OOD,
    image_size: int = 32,
    min_images_per_class: int = 20,
    max_images_per_class: int = 100,
    split: Sequence[float] = (0.6, 0.2, 0.2),
    seed: int = 0,
    n_way: int = 5,
    download: bool = False,
    skip_md5: bool = False,
    workers: int | None = None,
    progress: bool | None = None,
    command: str = "",
) -> Path:
    """Write a SETS stream of domain packs from torchvision datasets into ``out``.

    Args:
        root: the torchvision root (``root=`` of :mod:`torchvision.datasets`).
        out: output folder: ``<domain>.npz`` per stream domain, ``ood_<name>.npz`` per OOD
            source, ``manifest.json`` and ``README.md``. It must hold no other ``.npz`` files.
        domains: stream domains, in stream order (names of :data:`TORCHVISION_SOURCES`).
        ood: OOD sources.
        image_size: side of the square images (32 for the ``cpu`` preset, 84 for ``paper``).
        min_images_per_class / max_images_per_class: class size bounds (see the module doc).
        split: (train, val, test) class ratios. seed: seed of the class split and image draws.
        n_way: episode width the stream domains must support in every split.
        download: pass ``download=True`` to torchvision (needs internet).
        skip_md5: read files whose md5 differs from the official one (see the module doc).
        workers, progress: decoding threads and progress bar.
        command: the command line to record in the manifest.

    Returns:
        ``out`` as a :class:`~pathlib.Path`.

    Raises:
        ValueError: unknown/repeated names, a dataset whose classes cannot be split for its
            role (checked on the full dataset before reading, and again on the kept classes),
            bad settings, or an output folder holding other packs.
        DatasetNotFoundError: a dataset missing under ``root`` (names the path and
            ``--download``).
    """
    check_stream_names(domains, ood)
    domains, ood = list(domains), list(ood)
    if download and skip_md5:
        raise ValueError(
            "download=True fetches the official files and skip_md5=True reads local files as "
            "they are; fix: pass only one of them (--download or --skip-md5)"
        )
    for what, value, low in (
        ("image_size", image_size, 1),
        ("min_images_per_class", min_images_per_class, 1),
        ("max_images_per_class", max_images_per_class, 1),
        ("n_way", n_way, 2),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{what} must be an integer >= {low}, got {value!r}")
    if max_images_per_class < min_images_per_class:
        raise ValueError(
            f"max_images_per_class={max_images_per_class} < min_images_per_class="
            f"{min_images_per_class}; fix: raise the maximum or lower the minimum"
        )
    for name in domains + ood:  # the full datasets: refuse a stream that cannot work, now
        check_class_split(
            name,
            TORCHVISION_SOURCES[name].n_classes,
            ood=name in ood,
            n_way=n_way,
            split=split,
            seed=seed,
            what=f"classes in the full {TORCHVISION_SOURCES[name].title}",
        )
    out = Path(out).expanduser()
    files = {n: f"{n}.npz" for n in domains} | {n: f"{OOD_PREFIX}{n}.npz" for n in ood}
    _check_out_folder(out, list(files.values()))
    if not download:  # every missing dataset at once, before anything is decoded
        missing = [m for m in (_missing(TORCHVISION_SOURCES[n], Path(root).expanduser())
                               for n in domains + ood) if m]  # fmt: skip
        if missing:
            raise DatasetNotFoundError("; ".join(missing) + f"; {_NOT_FOUND_FIX}")
    entries = [
        build_torchvision_pack(
            name,
            root,
            out / files[name],
            ood=name in ood,
            image_size=image_size,
            min_images_per_class=min_images_per_class,
            max_images_per_class=max_images_per_class,
            split=split,
            seed=seed,
            n_way=n_way,
            download=download,
            skip_md5=skip_md5,
            workers=workers,
            progress=progress,
        )
        for name in domains + ood
    ]
    import torchvision

    manifest = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "avalanche_sets": __version__,
        "torchvision_version": torchvision.__version__,
        "command": command or "prepare_torchvision_stream(...)",
        "run_command": _run_command(str(out), domains),
        "settings": {
            "root": str(root),  # as given: no absolute path of this machine is added
            "domains": domains,
            "ood": ood,
            "image_size": image_size,
            "min_images_per_class": min_images_per_class,
            "max_images_per_class": max_images_per_class,
            "split": list(split),
            "seed": seed,
            "n_way": n_way,
            "skip_md5": skip_md5,
        },
        "packs": entries,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    (out / "README.md").write_text(_readme(manifest))
    for e in entries:  # what was written reads back as a valid pack
        load_pack(out / e["pack"])
    return out
