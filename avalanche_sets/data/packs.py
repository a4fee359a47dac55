"""Domain packs: one ``.npz`` file per image domain, and tools to read, write and build them.

This module is the format; turning image files into arrays is :mod:`avalanche_sets.data.images`
(its names are re-exported here, where they were first defined).

A *domain pack* is the on-disk form of a :class:`~avalanche_sets.data.domain.Domain`
(``np.savez_compressed``, loadable with ``np.load(path)`` and no pickle):

=============== =================== ==================================================
key             dtype / shape       meaning
=============== =================== ==================================================
``images``      uint8 ``[N,H,W,3]`` RGB, channels last, square (``H == W``)
``labels``      int ``[N]``         class ids ``0..C-1`` (index into ``class_names``)
``class_names`` str ``[C]``         human-readable class names
``class_split`` str ``[C]``         ``"train"`` / ``"val"`` / ``"test"`` per class
``source``      str scalar          optional: where the images come from, and their licence
=============== =================== ==================================================

``../shared/data/sets-mini/`` holds real packs (see its README). Build your own from a folder
with one sub-folder per class::

    from avalanche_sets.data.packs import build_pack_from_folder, load_pack
    path = build_pack_from_folder("my_images/", "packs/my_domain.npz", image_size=32)
    domain = load_pack(path)

The class split of :func:`build_pack_from_folder` follows the shared packs:
``np.random.default_rng(seed).permutation(C)``; the first ``n_test`` classes go to test, the
next ``n_val`` to val, the rest to train (see :func:`split_classes`). It is given as fractions
or class counts and must leave ``n_way`` classes in every split
(:mod:`avalanche_sets.data.splits`).
"""

from __future__ import annotations

import os
import warnings
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..files import atomic_write
from .domain import SPLITS, Domain
from .images import (
    IMAGE_EXTENSIONS,
    CorruptImageError,
    UnreadableImagesError,
    load_image,
    load_images,
    load_readable_images,
    resize_images,
    scan_image_folder,
    split_classes,
)
from .splits import RunTarget, class_split, warn_small_classes

__all__ = [
    "PACK_KEYS",
    "IMAGE_EXTENSIONS",
    "CorruptImageError",
    "UnreadableImagesError",
    "FolderImages",
    "read_image_folder",
    "load_pack",
    "load_packs",
    "list_packs",
    "save_pack",
    "build_pack_from_folder",
    "split_classes",
    "scan_image_folder",
    "load_image",
    "load_images",
    "resize_images",
    "validate_arrays",
    "write_npz",
]

#: Required keys of a domain pack (``source`` is optional).
PACK_KEYS = ("images", "labels", "class_names", "class_split")


_PACK_LAYOUT = (
    "a .npz file with keys images (uint8 [N,H,W,3]), labels (int [N]), class_names (str [C]), "
    "class_split (str [C] in train/val/test) and optionally source (str)"
)
#: What to do without a packs folder (said by every "no packs here" error).
NO_PACKS_HINT = (
    "to build packs from public datasets: `avalanche-sets prepare torchvision --root TVROOT "
    "--out packs/tv` (CIFAR-100, Omniglot, GTSRB, ... from a torchvision root; add --download "
    "on a machine with internet), or from class folders of images: `avalanche-sets prepare "
    "pack --folder IMAGES --out packs/NAME.npz` (docs/guide/data.md); to run without any data, "
    "use the generated benchmark: `--set source=synthetic`"
)
_FOLDER_LAYOUT = "<folder>/<class name>/<image files>, one sub-folder per class"


# ----------------------------------------------------------------------------- validation
def _fail(where: str, key: str, expected: str, got: str, fix: str = "") -> ValueError:
    message = f"{where}: key {key!r} must be {expected}, got {got}"
    return ValueError(f"{message}; fix: {fix}" if fix else message)


_WRITE_HINT = (
    "write packs with avalanche_sets.data.packs.save_pack(...) or "
    "`avalanche-sets prepare pack --folder <images> --out <pack>.npz`"
)


def _images_dtype_fix(dtype: np.dtype) -> str:
    if dtype.kind == "f":
        return (
            "store 8-bit RGB: np.clip(np.round(images * 255), 0, 255).astype(np.uint8) for "
            "values in [0, 1] (images.astype(np.uint8) if they already lie in 0..255)"
        )
    if dtype.kind in "iub":
        return "store 8-bit RGB: images.astype(np.uint8) after checking the values lie in 0..255"
    return "store 8-bit RGB images as a numeric uint8 array"


def _images_shape_fix(shape: tuple[int, ...]) -> str:
    if len(shape) == 3:
        return "grey images [N, H, W]: replicate them with np.repeat(images[..., None], 3, -1)"
    if len(shape) == 4 and shape[-1] == 1:
        return "one-channel images: replicate them with np.repeat(images, 3, axis=-1)"
    if len(shape) == 4 and shape[-1] == 4:
        return "RGBA images: drop the alpha channel with images[..., :3]"
    if len(shape) == 4 and shape[1] in (1, 3, 4):
        return "channels-first [N, C, H, W]: use images.transpose(0, 2, 3, 1) (then make C = 3)"
    return "store one RGB image per row, channels last: [N, H, W, 3]"


def _as_str_array(value: np.ndarray, where: str, key: str) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype.kind == "S":
        try:
            arr = np.char.decode(arr, "utf-8")
        except UnicodeDecodeError as err:
            raise _fail(where, key, "UTF-8 strings", f"undecodable bytes ({err})") from err
    if arr.dtype.kind != "U":
        raise _fail(where, key, "a unicode string array", f"dtype {arr.dtype}")
    return arr


def _check_one_per(array: np.ndarray, n: int, where: str, key: str, each: str, fix: str) -> None:
    """Refuse ``array`` unless it is 1-D with one entry per ``each`` (``n`` of them)."""
    if array.shape != (n,):
        raise _fail(where, key, f"shape [{n}] (one per {each})", f"shape {array.shape}", fix)


def _pack_images(arrays: Mapping[str, object], where: str) -> np.ndarray:
    """A pack's ``images``, checked: uint8 ``[N, H, W, 3]``, non-empty, square."""
    images = np.asarray(arrays["images"])
    if images.dtype != np.uint8:
        raise _fail(
            where,
            "images",
            "uint8 [N, H, W, 3]",
            f"dtype {images.dtype}",
            _images_dtype_fix(images.dtype),
        )
    if images.ndim != 4 or images.shape[-1] != 3:
        raise _fail(
            where,
            "images",
            "uint8 [N, H, W, 3] (RGB, channels last)",
            f"shape {images.shape}",
            _images_shape_fix(images.shape),
        )
    if images.shape[0] == 0:
        raise _fail(
            where,
            "images",
            "a non-empty uint8 [N, H, W, 3] array",
            "N = 0",
            "a pack needs the images of every class it names",
        )
    if images.shape[1] != images.shape[2]:
        raise _fail(
            where,
            "images",
            "square (H == W)",
            f"shape {images.shape}",
            "centre-crop the images to a square (build_pack_from_folder does) and resize them",
        )
    return images


def _pack_labels(arrays: Mapping[str, object], n: int, where: str) -> np.ndarray:
    """A pack's ``labels``, checked: integers, one per image (their range: with the names)."""
    labels = np.asarray(arrays["labels"])
    if labels.dtype.kind not in "iu":
        raise _fail(
            where,
            "labels",
            "an integer array [N]",
            f"dtype {labels.dtype}",
            "store whole-number class ids 0..C-1 as integers: labels.astype(np.int64)",
        )
    _check_one_per(
        labels, n, where, "labels", "image", "store exactly one class id per image, as a 1-D array"
    )
    return labels


def _pack_class_names(arrays: Mapping[str, object], labels: np.ndarray, where: str) -> np.ndarray:
    """A pack's ``class_names``, checked: unique, non-empty, one per class id ``labels`` use."""
    names = _as_str_array(arrays["class_names"], where, "class_names")
    if names.ndim != 1 or names.size == 0:
        raise _fail(
            where,
            "class_names",
            "a non-empty 1-D string array [C]",
            f"{names.shape}",
            "store one name per class, e.g. np.array(['cat', 'dog'])",
        )
    n_classes = names.size
    if labels.min() < 0 or labels.max() >= n_classes:
        bad = np.flatnonzero((labels < 0) | (labels >= n_classes))
        raise _fail(
            where,
            "labels",
            f"class ids in 0..{n_classes - 1} (C = {n_classes} class_names)",
            f"values {labels.min()}..{labels.max()} ({bad.size} label(s) out of range, the "
            f"first at image {int(bad[0])}: {int(labels[bad[0]])})",
            "labels index class_names: remap them to 0..C-1 or add the missing class names",
        )
    if len(set(names.tolist())) != n_classes:
        dup = sorted({s for s in names.tolist() if (names == s).sum() > 1})
        raise _fail(
            where,
            "class_names",
            "unique names",
            f"duplicates {dup[:5]}",
            "rename the duplicates or merge their labels into one class",
        )
    return names


def _pack_class_split(arrays: Mapping[str, object], n_classes: int, where: str) -> np.ndarray:
    """A pack's ``class_split``, checked: one of ``SPLITS`` per class."""
    split = _as_str_array(arrays["class_split"], where, "class_split")
    _check_one_per(
        split,
        n_classes,
        where,
        "class_split",
        "class",
        "give every entry of class_names a split (split_classes(C) draws one)",
    )
    bad = sorted(set(split.tolist()) - set(SPLITS))
    if bad:
        raise _fail(
            where,
            "class_split",
            f"values in {list(SPLITS)}",
            f"{bad}",
            "use exactly 'train', 'val' and 'test' (e.g. 'valid' -> 'val')",
        )
    return split


def validate_arrays(arrays: Mapping[str, object], where: str) -> dict[str, np.ndarray]:
    """Check the pack keys, dtypes and shapes; return normalised arrays (or raise ValueError)."""
    missing = [k for k in PACK_KEYS if k not in arrays]
    if missing:
        raise ValueError(
            f"{where}: missing key(s) {missing}; a domain pack is {_PACK_LAYOUT} "
            f"(found keys {sorted(arrays)}); fix: add the missing key(s), e.g. {_WRITE_HINT}"
        )
    images = _pack_images(arrays, where)
    n = images.shape[0]
    labels = _pack_labels(arrays, n, where)
    names = _pack_class_names(arrays, labels, where)
    n_classes = names.size
    split = _pack_class_split(arrays, n_classes, where)
    out = {
        "images": images,
        "labels": labels.astype(np.int32 if n_classes < 2**31 else np.int64, copy=False),
        "class_names": names,
        "class_split": split,
    }
    if "source" in arrays and arrays["source"] is not None:
        source = _as_str_array(arrays["source"], where, "source")
        if source.size != 1:
            raise _fail(where, "source", "a single string", f"shape {source.shape}")
        out["source"] = source.reshape(())
    return out


# ----------------------------------------------------------------------------- reading
def _read_npz(path: Path) -> dict[str, np.ndarray]:
    where = f"domain pack {path}"
    try:
        npz = np.load(path, allow_pickle=False)
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as err:
        raise ValueError(
            f"{where}: not a readable .npz file ({err}); expected {_PACK_LAYOUT}"
        ) from err
    if not isinstance(npz, np.lib.npyio.NpzFile):
        raise ValueError(
            f"{where}: holds a single array, not a .npz archive; expected {_PACK_LAYOUT}"
        )
    arrays: dict[str, np.ndarray] = {}
    with npz:
        for key in npz.files:
            if key not in (*PACK_KEYS, "source"):
                continue
            try:
                arrays[key] = npz[key]
            except ValueError as err:  # object arrays need pickle: refused
                raise ValueError(
                    f"{where}: key {key!r} is stored as a pickled object array, which is not "
                    f"loaded (allow_pickle=False); store strings as a unicode array ({err})"
                ) from err
            except (OSError, zipfile.BadZipFile, EOFError) as err:
                raise ValueError(f"{where}: key {key!r} cannot be read ({err})") from err
    return validate_arrays(arrays, where)


def load_pack(
    path: str | os.PathLike,
    *,
    image_size: int | None = None,
    labeled_fraction: float = 0.4,
    split_seed: int = 0,
    name: str | None = None,
) -> Domain:
    """Load one domain pack as a :class:`Domain`.

    Args:
        path: the ``.npz`` file.
        image_size: resize the images to this side (Pillow LANCZOS) if it differs from the
            pack's; ``None`` keeps the pack's size.
        labeled_fraction: fraction of every class's images in its labeled part (paper: 0.4).
        split_seed: seed of the labeled/unlabeled split inside every class.
        name: domain name; defaults to the file stem (``gtsrb.npz`` -> ``"gtsrb"``).

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: the file is not a valid pack; the message names the file, the key and what
            was expected.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"domain pack {path} not found; expected {_PACK_LAYOUT}")
    arrays = _read_npz(path)
    images = arrays["images"]
    if image_size is not None:
        if int(image_size) < 1:
            raise ValueError(f"image_size must be a positive integer, got {image_size!r}")
        images = resize_images(images, int(image_size))
    source = str(arrays["source"]) if "source" in arrays else f"domain pack {path.name}"
    return Domain(
        name=name if name is not None else path.stem,
        images=images,
        labels=arrays["labels"],
        class_names=arrays["class_names"].tolist(),
        class_split=arrays["class_split"],
        labeled_fraction=labeled_fraction,
        split_seed=split_seed,
        source=source,
        origin=f"pack {path}",
    )


def _check_root(root: str | os.PathLike) -> Path:
    root = Path(root).expanduser()
    if not root.is_dir():
        raise FileNotFoundError(
            f"domain pack folder {root} not found; expected a folder of <name>.npz files, each "
            f"{_PACK_LAYOUT} (e.g. ../shared/data/sets-mini); {NO_PACKS_HINT}"
        )
    return root


def list_packs(root: str | os.PathLike) -> list[str]:
    """Names (file stems) of the ``.npz`` domain packs in ``root``, sorted."""
    root = _check_root(root)
    return sorted(p.stem for p in root.glob("*.npz") if p.is_file() and not p.name.startswith("."))


def load_packs(
    root: str | os.PathLike, names: Iterable[str] | None = None, **kwargs
) -> dict[str, Domain]:
    """Load several packs of a folder: ``{name: Domain}`` in the order of ``names``.

    Args:
        root: folder of ``<name>.npz`` packs.
        names: pack names (file stems); all packs of the folder when ``None``.
        **kwargs: passed to :func:`load_pack` (``image_size``, ``labeled_fraction``, ...).
    """
    root = _check_root(root)
    available = list_packs(root)
    names = available if names is None else list(names)
    missing = [n for n in names if n not in available]
    if missing:
        raise FileNotFoundError(
            f"domain pack(s) {[str(root / f'{n}.npz') for n in missing]} not found; "
            f"available in {root}: {available}"
        )
    if "name" in kwargs:
        raise TypeError("load_packs names every domain after its file; do not pass name=")
    return {n: load_pack(root / f"{n}.npz", **kwargs) for n in names}


# ----------------------------------------------------------------------------- writing
def write_npz(path: Path, arrays: Mapping[str, np.ndarray], *, compress: bool = True) -> None:
    """Write ``arrays`` to ``path`` as .npz, atomically (:func:`~avalanche_sets.files.atomic_write`)."""
    for key, value in arrays.items():
        if np.asarray(value).dtype.kind == "O":  # pragma: no cover - validated before
            raise ValueError(f"{path}: refusing to write key {key!r} as a pickled object array")
    atomic_write(path, lambda f: (np.savez_compressed if compress else np.savez)(f, **arrays))


def _pack_arrays(domain_or_arrays: Domain | Mapping[str, object], source: str) -> dict:
    if isinstance(domain_or_arrays, Domain):
        d = domain_or_arrays
        arrays: dict[str, object] = {
            "images": d.images,
            "labels": d.labels,
            "class_names": np.asarray(list(d.class_names), dtype=str),
            "class_split": np.asarray(d.class_split, dtype=str),
            "source": source or d.source,
        }
    elif isinstance(domain_or_arrays, Mapping):
        arrays = dict(domain_or_arrays)
        for key in ("class_names", "class_split"):
            if key in arrays and not isinstance(arrays[key], np.ndarray):
                arrays[key] = np.asarray([str(s) for s in arrays[key]], dtype=str)
        if source:
            arrays["source"] = source
    else:
        raise TypeError(
            f"save_pack needs a Domain or a mapping of arrays, got {type(domain_or_arrays)}"
        )
    if "source" in arrays:
        arrays["source"] = np.asarray(str(arrays["source"] or ""), dtype=str)
    return arrays


def save_pack(
    domain_or_arrays: Domain | Mapping[str, object],
    path: str | os.PathLike,
    *,
    source: str = "",
) -> Path:
    """Write a domain pack (``np.savez_compressed``, no pickles), atomically.

    Args:
        domain_or_arrays: a :class:`Domain`, or a mapping with the keys ``images``,
            ``labels``, ``class_names``, ``class_split`` (and optionally ``source``).
        path: destination ``.npz`` file (parent folders are created).
        source: one line on where the images come from (overrides the domain's own).

    Returns:
        The path written. The file appears only once complete (temporary file, then
        :func:`os.replace`).
    """
    path = Path(path).expanduser()
    arrays = validate_arrays(_pack_arrays(domain_or_arrays, source), f"domain pack for {path}")
    arrays.setdefault("source", np.asarray("", dtype=str))
    write_npz(path, arrays, compress=True)
    return path


# ----------------------------------------------------------------------------- folders
#: How a refusal of unreadable image files says to skip them instead.
SKIP_UNREADABLE_HINT = (
    "leave them out with --skip-unreadable (skip_unreadable=True), which lists them in the "
    "manifest (prepare stream) or the output (prepare pack)"
)


@dataclass(frozen=True)
class FolderImages:
    """An image folder read as a domain pack: :attr:`arrays` (``images``, ``labels``,
    ``class_names``, ``class_split``), its :attr:`source` line, and the :attr:`unreadable`
    files left out (one :class:`CorruptImageError` each)."""

    arrays: dict[str, Any]
    source: str
    unreadable: tuple[CorruptImageError, ...] = ()

    @property
    def skipped(self) -> list[str]:
        """The unreadable files left out, as paths."""
        return [str(e.path) for e in self.unreadable]


def build_pack_from_folder(
    folder: str | os.PathLike,
    out_path: str | os.PathLike,
    *,
    image_size: int = 32,
    split: Sequence[float] | Sequence[int] = (0.6, 0.2, 0.2),
    seed: int = 0,
    n_way: int | None = 5,
    target: RunTarget | None = None,
    min_images_per_class: int = 1,
    source: str = "",
    workers: int | None = None,
    progress: bool | None = None,
    skip_unreadable: bool = False,
) -> Path:
    """Build a domain pack from an image folder with one sub-folder per class.

    Every image is converted to RGB (grey replicated, transparency composited on white),
    centre-cropped to a square and resized to ``image_size`` with Pillow LANCZOS. Classes are
    the sub-folder names, sorted; their train/val/test split is
    :func:`~avalanche_sets.data.splits.class_split` ``(C, split, seed, n_way=n_way)``, checked
    before any image is decoded: ``n_way``-way episodes need ``n_way`` classes in each split
    (``3 * n_way`` classes in all). Classes too small for the episodes of ``target``'s runs
    (:func:`~avalanche_sets.data.splits.min_class_images`: 16 images for the ``cpu`` preset's)
    are named in a warning.

    Args:
        folder: ``<folder>/<class name>/<image files>``.
        out_path: the ``.npz`` pack to write (atomically).
        image_size: side of the square images.
        split: (train, val, test) fractions of the classes, adding up to 1 (``(0.6, 0.2,
            0.2)``), or class counts, three whole numbers adding up to the number of classes
            (``(12, 4, 4)``).
        seed: seed of the class split.
        n_way: the episode width the pack must support: every split needs at least ``n_way``
            classes (1 for a pack used only as an OOD source; ``None``: no check).
        target: the runs the pack is prepared for
            (``avalanche_sets.presets.run_target("cpu")``: the ``cpu`` preset's), whose
            episodes its classes must fill; ``None``: no runs in view, so no class is too small.
        min_images_per_class: classes with fewer images are left out (with a warning naming
            them).
        source: one line stored in the pack (default: the folder's path).
        workers: decoding threads (default: up to 8).
        progress: tqdm progress bar; ``None`` shows it on a terminal for big folders.
        skip_unreadable: leave out the image files that cannot be decoded (with a warning
            naming each) instead of refusing the folder; see :func:`read_image_folder`.

    Raises:
        FileNotFoundError: ``folder`` does not exist.
        ValueError: no class sub-folders / no images, a split leaving fewer than ``n_way``
            classes in a part (naming the counts, the minimum and a split that works), or
            image files that cannot be decoded (:class:`UnreadableImagesError`, naming every
            one of them; nothing is skipped silently).
    """
    read = read_image_folder(
        folder, image_size=image_size, split=split, seed=seed, n_way=n_way, target=target,
        min_images_per_class=min_images_per_class, source=source, workers=workers,
        progress=progress, skip_unreadable=skip_unreadable,
    )  # fmt: skip
    if read.unreadable:
        warnings.warn(
            f"image folder {folder}: skipped {len(read.unreadable)} unreadable image file(s): "
            f"{', '.join(read.skipped)}",
            stacklevel=2,
        )
    return save_pack(read.arrays, out_path, source=read.source)


def read_image_folder(
    folder: str | os.PathLike,
    *,
    image_size: int = 32,
    split: Sequence[float] | Sequence[int] = (0.6, 0.2, 0.2),
    seed: int = 0,
    n_way: int | None = 5,
    target: RunTarget | None = None,
    min_images_per_class: int = 1,
    source: str = "",
    workers: int | None = None,
    progress: bool | None = None,
    skip_unreadable: bool = False,
) -> FolderImages:
    """An image folder's pack arrays (as :func:`build_pack_from_folder`, which writes them).

    Every image file is decoded, in one pass: those that cannot be are refused together
    (:class:`UnreadableImagesError`) or, with ``skip_unreadable=True``, left out and returned
    in :attr:`FolderImages.unreadable` for the caller to report. The class split is drawn
    before decoding, from the folder's files; a class left with no readable image is refused.

    Raises:
        FileNotFoundError, ValueError: as :func:`build_pack_from_folder`.
    """
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise FileNotFoundError(f"image folder {folder} not found; expected {_FOLDER_LAYOUT}")
    if int(image_size) < 1:
        raise ValueError(f"image_size must be a positive integer, got {image_size!r}")
    classes = scan_image_folder(folder)
    if not classes:
        raise ValueError(
            f"image folder {folder} has no class sub-folders; expected {_FOLDER_LAYOUT}"
        )
    small = {c: len(f) for c, f in classes.items() if len(f) < max(1, min_images_per_class)}
    if small:
        empty = [c for c, n in small.items() if n == 0]
        detail = ", ".join(f"{c!r} ({n})" for c, n in list(small.items())[:10])
        warnings.warn(
            f"image folder {folder}: left out {len(small)} class(es) with fewer than "
            f"{max(1, min_images_per_class)} images: {detail}"
            + (f"; {len(empty)} of them have no image files" if empty else ""),
            stacklevel=3,
        )
    kept = {c: f for c, f in classes.items() if c not in small}
    if not kept:
        raise ValueError(
            f"image folder {folder} has no class with at least {max(1, min_images_per_class)} "
            f"image(s); expected {_FOLDER_LAYOUT} with files ending in {IMAGE_EXTENSIONS}"
        )
    names = list(kept)
    cls_split = class_split(len(names), split, seed, n_way=n_way, where=f"image folder {folder}")
    if target is not None:
        sizes = {c: len(kept[c]) for c in names}
        warn_small_classes(sizes, cls_split, n_way, f"image folder {folder}", target=target)
    files = [p for c in names for p in kept[c]]
    labels = np.repeat(np.arange(len(names)), [len(kept[c]) for c in names])
    images, unreadable = load_readable_images(
        files, int(image_size), workers=workers, desc=folder.name, progress=progress
    )
    if unreadable and not skip_unreadable:
        raise UnreadableImagesError(unreadable, skip_hint=SKIP_UNREADABLE_HINT)
    if unreadable:
        bad = {e.path for e in unreadable}
        labels = labels[[p not in bad for p in files]]
        emptied = [names[c] for c in range(len(names)) if not (labels == c).any()]
        if emptied:
            raise ValueError(
                f"image folder {folder}: class(es) {emptied} have no readable image left once "
                f"the {len(unreadable)} unreadable file(s) are skipped; fix: replace those "
                "files with valid images, or remove the class folder(s)"
            )
    n_files = len(files) - len(unreadable)
    return FolderImages(
        arrays={
            "images": images,
            "labels": labels,
            "class_names": names,
            "class_split": cls_split,
        },
        source=source or f"image folder {folder} ({len(names)} classes, {n_files} images)",
        unreadable=tuple(unreadable),
    )
