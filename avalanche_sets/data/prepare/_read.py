"""Reading a torchvision dataset from a local root: its dataset objects (the needed paths checked
first; md5 checks optionally skipped), the labels of its parts merged by class name without
decoding an image, the images kept per class, and the decoding of those images to uint8 arrays.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import warnings
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from tqdm.auto import tqdm

from ..images import LANCZOS, center_square, to_rgb
from ._sources import TorchvisionSource


class DatasetNotFoundError(FileNotFoundError):
    """A torchvision dataset missing from the root (the message names the path to create)."""


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
    import torchvision.datasets as tvd  # heavy (torch): loaded once a dataset is opened

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
