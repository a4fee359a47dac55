"""Processed archives: the ORDER authors' own (Semi-meta) and torchmeta's hdf5 files.

The authors' archive (linked from https://github.com/joey-wang123/Semi-meta) holds, under one
data folder: ``<Folder>/{train,val,test}_labels.json`` (a JSON list of class labels) with
``<Folder>/<split>/<label>.pt`` (``torch.save`` of ``{label: images}``) for CUB, Aircraft,
Plantae, Butterfly and VGG-Flower (``vgg_flower``); ``fishprocess.pt`` (a sequence of unlabeled
WildFish images whose first 70% the authors use in training, the rest in evaluation); and
torchmeta's processed miniImageNet, CIFAR-FS and Omniglot. Images are tensors or arrays
``[C, H, W]`` or ``[H, W, C]``, float in [0, 1] (torchvision ``ToTensor``) or uint8.
"""

from __future__ import annotations

import importlib
import io
import pickle
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from ..domain import SPLITS
from ..images import resize_images
from ._common import (
    OMNIGLOT_FALLBACK,
    DatasetNotFoundError,
    PaperDataset,
    _Listing,
    _malformed,
    _read_json,
)

AUTHORS = "the ORDER authors' processed archive (Semi-meta)"


# ---------------------------------------------------------------------------- image arrays
def _as_images(spec: PaperDataset, path: Path, data, what: str) -> np.ndarray:
    """Images of any of the archive's forms as uint8 ``[n, H, W, 3]`` (RGB, channels last).

    Converted a chunk at a time, so that a big float tensor is never copied whole.
    """
    if isinstance(data, (list, tuple)):
        if not data:
            raise _malformed(spec, path, f"{what} holds no image")
        return np.concatenate([_as_images(spec, path, _to_numpy(x)[None], what) for x in data])
    try:
        arr = _to_numpy(data)
    except (TypeError, ValueError) as err:
        raise _malformed(spec, path, f"{what} is not an image array ({err})") from err
    if arr.ndim == 3:  # [n, H, W] grey
        arr = arr[..., None]
    if arr.ndim != 4:
        raise _malformed(spec, path, f"{what} has shape {arr.shape}, expected [n, C, H, W]")
    if arr.shape[1] in (1, 3) and arr.shape[-1] not in (1, 3):  # channels first
        arr = arr.transpose(0, 2, 3, 1)
    if arr.shape[-1] not in (1, 3):
        raise _malformed(spec, path, f"{what} has shape {arr.shape}: 1 or 3 channels expected")
    if arr.dtype.kind not in "fiub":
        raise _malformed(spec, path, f"{what} has dtype {arr.dtype}, expected float or uint8")
    # torchvision's ToTensor gives floats in [0, 1]; larger floats are already 0..255
    scale = 255.0 if arr.dtype.kind == "f" and arr.size and float(arr.max()) <= 1.0 + 1e-6 else 1.0
    out = np.empty((*arr.shape[:3], 3), dtype=np.uint8)
    for a in range(0, len(arr), 256):
        chunk = arr[a : a + 256]
        if chunk.dtype != np.uint8:
            chunk = np.clip(np.rint(np.nan_to_num(chunk.astype(np.float32)) * scale), 0, 255)
        out[a : a + 256] = chunk  # a single grey channel broadcasts to three
    return out


def _to_numpy(x) -> np.ndarray:
    if hasattr(x, "detach"):  # a torch tensor
        return x.detach().cpu().numpy()
    return np.asarray(x)


def _torch_load(spec: PaperDataset, path: Path):
    """``torch.load`` restricted to tensors, numpy arrays and plain containers (no code)."""
    safe: list = [np.ndarray, np.dtype]
    for mod in ("numpy._core.multiarray", "numpy.core.multiarray"):
        try:
            safe.append(importlib.import_module(mod)._reconstruct)
            break
        except (ImportError, AttributeError):
            continue
    errors = (pickle.UnpicklingError, RuntimeError, EOFError, OSError, ValueError)
    try:
        with torch.serialization.safe_globals(safe):
            try:  # memory-mapped: a big float archive is converted without a full copy
                return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
            except errors:  # the legacy (non-zip) format cannot be memory-mapped
                return torch.load(path, map_location="cpu", weights_only=True)
    except errors as err:
        raise _malformed(
            spec, path, f"cannot read it with torch.load(weights_only=True) ({err})"
        ) from err


def _labels(spec: PaperDataset, path: Path) -> list:
    labels = _read_json(spec, path)
    if not isinstance(labels, list) or not labels:
        raise _malformed(spec, path, "expected a non-empty JSON list of class labels")
    return labels


def _split_classes_from_labels(
    spec: PaperDataset, files: Mapping[str, Path], read_class
) -> _Listing:
    """Classes from three label files; ``read_class(split, label)`` gives its images."""
    names, items, official = [], [], {}
    for split, path in files.items():
        for label in _labels(spec, path):
            name, images = read_class(split, label)
            if name in official:
                raise _malformed(spec, path, f"class {name!r} appears in two splits")
            names.append(name)
            items.append(images)
            official[name] = split
    return _Listing(class_names=names, items=items, official=official)


# ---------------------------------------------------------------------------- authors' .pt
def scan_authors(base: Path, spec: PaperDataset) -> _Listing:
    """``{split}_labels.json`` + ``{split}/<label>.pt``: the authors' split, exactly."""
    files = {s: base / f"{s}_labels.json" for s in SPLITS}

    def read_class(split: str, label) -> tuple[str, np.ndarray]:
        label = str(label)
        path = base / split / f"{label}.pt"
        if not path.is_file():
            raise _malformed(
                spec, path, f"{split}_labels.json names class {label!r} but its file is missing"
            )
        data = _torch_load(spec, path)
        if isinstance(data, Mapping):
            if label not in data:
                raise _malformed(
                    spec, path, f"expected {{{label!r}: images}}, found keys {list(data)[:3]}"
                )
            data = data[label]
        return label, _as_images(spec, path, data, f"class {label!r}")

    listing = _split_classes_from_labels(spec, files, read_class)
    listing.authors = True
    listing.official_note = (
        f"the authors' own split, from {AUTHORS} ({base}/{{train,val,test}}_labels.json)"
    )
    return listing


def scan_fishprocess(base: Path, spec: PaperDataset) -> _Listing:
    """``fishprocess.pt``: unlabeled images; the authors train on the first 70%.

    The images carry no species, so the domain gets three pseudo-classes: the first
    ``int(0.7 n)`` images (train, the authors' rule) and the rest cut in two halves (val,
    test) so that validation and test stay disjoint; the authors evaluate on all of the rest.
    """
    path = base / "fishprocess.pt"
    images = _as_images(spec, path, _torch_load(spec, path), "fishprocess.pt")
    n = len(images)
    if n < 3:
        raise _malformed(spec, path, f"holds {n} image(s); at least 3 are needed")
    n_train = int(0.7 * n)
    n_val = (n - n_train) // 2
    cuts = {"train": (0, n_train), "val": (n_train, n_train + n_val), "test": (n_train + n_val, n)}
    names = [f"fishprocess[{a}:{b}]" for a, b in cuts.values()]
    return _Listing(
        class_names=names,
        items=[images[a:b] for a, b in cuts.values()],
        official=dict(zip(names, cuts)),
        authors=True,
        official_note=(
            f"the authors' rule on {AUTHORS} ({path}): first 70% of the images -> train; the "
            "other 30% (their evaluation pool) cut into val and test halves; unlabeled "
            "images, so the classes are these three slices"
        ),
        check_figures=False,
    )


# ---------------------------------------------------------------------------- torchmeta
def _h5py(spec: PaperDataset, path: Path):
    try:
        import h5py  # an optional dependency (pip install 'avalanche-sets[datasets]')
    except ImportError as err:
        raise DatasetNotFoundError(
            spec,
            path,
            "is a torchmeta hdf5 file, which needs the h5py package; fix: pip install "
            "'avalanche-sets[datasets]' (or pip install h5py)",
        ) from err
    return h5py


def _h5_dataset(spec: PaperDataset, h5, path: Path, key: str):
    if key not in h5:
        raise _malformed(spec, path, f"has no dataset {key!r} (named in the labels file)")
    return h5[key]


def _jpeg_list(spec: PaperDataset, path: Path, data, what: str) -> list[bytes]:
    out = [bytes(np.asarray(x, dtype=np.uint8).tobytes()) for x in data]
    if not out:
        raise _malformed(spec, path, f"{what} holds no image")
    return out


def scan_torchmeta_splits(base: Path, spec: PaperDataset, *, authors: bool = False) -> _Listing:
    """torchmeta's ``{split}_data.hdf5`` (group ``datasets/<label>``) + ``{split}_labels.json``.

    miniImageNet stores uint8 ``[n, 84, 84, 3]`` arrays, CUB the JPEG bytes of every image.
    ``authors``: the ORDER authors' code reads this very layout (miniImageNet).
    """
    files = {s: base / f"{s}_labels.json" for s in SPLITS}
    handles = {}
    h5py = _h5py(spec, base / "train_data.hdf5")
    try:
        for s in SPLITS:
            path = base / f"{s}_data.hdf5"
            if not path.is_file():
                raise _malformed(spec, path, "torchmeta's per-split data file is missing")
            handles[s] = h5py.File(path, "r")

        def read_class(split: str, label) -> tuple[str, Sequence]:
            label = str(label)
            path = base / f"{split}_data.hdf5"
            data = _h5_dataset(spec, handles[split], path, f"datasets/{label}")
            if data.dtype.kind == "O":  # variable-length JPEG bytes
                return label, _jpeg_list(spec, path, data[()], f"class {label!r}")
            return label, _as_images(spec, path, data[()], f"class {label!r}")

        listing = _split_classes_from_labels(spec, files, read_class)
    finally:
        for h in handles.values():
            h.close()
    listing.official_note = f"torchmeta's split ({base}/{{train,val,test}}_labels.json)"
    if authors:
        listing.authors = True
        listing.official_note += f", the one the authors' code reads ({AUTHORS})"
    return listing


def scan_torchmeta_cifarfs(base: Path, spec: PaperDataset) -> _Listing:
    """torchmeta's CIFAR-FS: ``data.hdf5`` (``<coarse>/<fine>`` uint8 ``[600, 32, 32, 3]``) and
    ``cifar-fs/{split}_labels.json`` (``[coarse, fine]`` pairs, Bertinetto et al.'s split)."""
    path = base / "data.hdf5"
    files = {s: base / "cifar-fs" / f"{s}_labels.json" for s in SPLITS}
    h5py = _h5py(spec, path)
    with h5py.File(path, "r") as h5:

        def read_class(split: str, label) -> tuple[str, np.ndarray]:
            if not (isinstance(label, list) and len(label) == 2):
                raise _malformed(spec, files[split], f"expected [coarse, fine] pairs, got {label}")
            data = _h5_dataset(spec, h5, path, f"{label[0]}/{label[1]}")
            return str(label[1]), _as_images(spec, path, data[()], f"class {label[1]!r}")

        listing = _split_classes_from_labels(spec, files, read_class)
    listing.authors = True
    listing.official_note = (
        f"Bertinetto et al. (2019) split as shipped by torchmeta ({base}/cifar-fs), the one "
        f"the authors' code reads ({AUTHORS})"
    )
    return listing


def scan_torchmeta_omniglot(base: Path, spec: PaperDataset) -> _Listing:
    """torchmeta's Omniglot: ``data.hdf5`` (``images_<set>/<alphabet>/<character>``, uint8
    ``[20, 105, 105]``, inverted: strokes white) and ``vinyals_{split}_labels.json``.

    Images are inverted back to black strokes on white, as in the zips. With the Vinyals
    label files the split is theirs (the authors' code uses torchmeta's default, Vinyals);
    without them every character of ``data.hdf5`` is listed and the OOD rule applies.
    """
    path = base / "data.hdf5"
    files = {s: base / f"vinyals_{s}_labels.json" for s in SPLITS}
    h5py = _h5py(spec, path)
    with h5py.File(path, "r") as h5:

        def read(keys: Sequence[str]) -> tuple[str, np.ndarray]:
            data = _h5_dataset(spec, h5, path, "/".join(keys))
            return "/".join(keys[-2:]), 255 - _as_images(spec, path, data[()], "/".join(keys))

        if all(p.is_file() for p in files.values()):
            listing = _split_classes_from_labels(
                spec, files, lambda split, label: read([str(x) for x in label])
            )
            listing.authors = True
            listing.official_note = (
                f"Vinyals et al. (2016) split shipped by torchmeta ({base}), the one the "
                f"authors' code reads ({AUTHORS})"
            )
            return listing
        names, items = [], []
        for group in ("images_background", "images_evaluation"):
            if group not in h5:
                continue
            for alphabet in sorted(h5[group]):
                for char in sorted(h5[group][alphabet]):
                    name, images = read([group, alphabet, char])
                    names.append(name)
                    items.append(images)
    if not names:
        raise _malformed(spec, path, "holds no images_background/<alphabet>/<character> data")
    return _Listing(class_names=names, items=items, fallback_note=OMNIGLOT_FALLBACK)


def decode_bytes(data: bytes, image_size: int, where: str) -> np.ndarray:
    """One encoded image (JPEG/PNG bytes) as uint8 RGB ``[S, S, 3]``, centre-cropped."""
    try:
        with Image.open(io.BytesIO(data)) as img:
            arr = np.asarray(img.convert("RGB"), dtype=np.uint8)
    except (OSError, ValueError, SyntaxError) as err:
        raise ValueError(f"cannot decode an image of {where} ({err})") from err
    return resize_images(arr[None], image_size)[0]
