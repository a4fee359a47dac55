"""Image folders to arrays: decoding, RGB conversion, square crops, resizing, class splits.

Every way of turning image files into the uint8 ``[N, S, S, 3]`` arrays of a
:class:`~avalanche_sets.data.domain.Domain` goes through here — domain packs built from a folder
(:func:`avalanche_sets.data.packs.build_pack_from_folder`), the paper's datasets
(:mod:`avalanche_sets.data.paper`) and torchvision datasets (:mod:`avalanche_sets.data.prepare`):
the same conversion (grey replicated, transparency composited on white), the same centre crop
and the same Pillow LANCZOS resize. The ``.npz`` format those arrays are stored in is
:mod:`avalanche_sets.data.packs`.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps
from tqdm.auto import tqdm

__all__ = [
    "IMAGE_EXTENSIONS",
    "LANCZOS",
    "CorruptImageError",
    "UnreadableImagesError",
    "to_rgb",
    "center_square",
    "load_image",
    "load_images",
    "load_readable_images",
    "resize_images",
    "is_image_file",
    "ignored_files",
    "scan_image_folder",
    "split_classes",
]

#: File name endings treated as images when scanning folders (case-insensitive).
IMAGE_EXTENSIONS = (
    ".jpg",
    ".jpeg",
    ".png",
    ".bmp",
    ".gif",
    ".tif",
    ".tiff",
    ".webp",
    ".ppm",
    ".pgm",
    ".pbm",
)

LANCZOS = Image.Resampling.LANCZOS
"""Pillow's resampling filter for every resize of the package."""


class CorruptImageError(ValueError):
    """An image file that Pillow cannot decode (the message names the file)."""

    def __init__(self, path: str | os.PathLike, reason: object) -> None:
        self.path = Path(path)
        self.reason = reason
        super().__init__(
            f"cannot read image file {self.path}: {reason}; fix: replace the file with a valid "
            "image or delete it (nothing is skipped silently)"
        )


class UnreadableImagesError(CorruptImageError):
    """Image files that Pillow cannot decode, every one of a folder (or stream) found in one
    pass: :attr:`errors` holds each file's :class:`CorruptImageError`, :attr:`path` the first."""

    def __init__(self, errors: Sequence[CorruptImageError], *, skip_hint: str = "") -> None:
        self.errors = list(errors)
        self.paths = [e.path for e in self.errors]
        if len(self.errors) == 1:
            what = f"image file {self.paths[0]}: {self.errors[0].reason}; fix: replace the file"
            what += " with a valid image or delete it"
        else:
            listed = "; ".join(f"{e.path} ({e.reason})" for e in self.errors)
            what = f"{len(self.errors)} image files: {listed}; fix: replace them with valid "
            what += "images or delete them"
        ValueError.__init__(
            self,
            f"cannot read {what}"
            + (f", or {skip_hint}" if skip_hint else "")
            + " (nothing is skipped silently)",
        )
        self.path = self.paths[0]
        self.reason = self.errors[0].reason


# ----------------------------------------------------------------------------- images
def to_rgb(img: Image.Image) -> Image.Image:
    """RGB view of any Pillow image: grey is replicated, transparency composited on white."""
    if img.mode == "P" and "transparency" in img.info:
        img = img.convert("RGBA")
    if img.mode in ("RGBA", "LA", "PA", "RGBa", "La"):
        rgba = img.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    if img.mode in ("I", "I;16", "I;16B", "I;16L", "F"):
        arr = np.asarray(img, dtype=np.float64)
        top = arr.max() if arr.size and arr.max() > 255 else 255.0
        img = Image.fromarray(np.clip(arr * (255.0 / top), 0, 255).astype(np.uint8))
    return img if img.mode == "RGB" else img.convert("RGB")


def center_square(img: Image.Image) -> Image.Image:
    w, h = img.size
    if w == h:
        return img
    side = min(w, h)
    left, top = (w - side) // 2, (h - side) // 2
    return img.crop((left, top, left + side, top + side))


def load_image(
    path: str | os.PathLike,
    image_size: int,
    *,
    crop_bottom: int = 0,
    resample: Image.Resampling = LANCZOS,
) -> np.ndarray:
    """Read one image file as uint8 RGB ``[image_size, image_size, 3]``.

    The image is EXIF-oriented, converted to RGB (grey replicated to three channels, alpha
    composited on white), optionally stripped of its bottom ``crop_bottom`` pixel rows,
    centre-cropped to a square and resized (Pillow LANCZOS by default).

    Raises:
        CorruptImageError: (a :class:`ValueError`) naming the file when it cannot be decoded.
    """
    path = Path(path)
    try:
        with Image.open(path) as img:
            if img.format == "JPEG":
                # Decode big JPEGs at a reduced scale (1/2, 1/4 or 1/8) that is still >= 2x the
                # target size: much faster, and LANCZOS does the final reduction.
                height = img.size[1]
                img.draft(img.mode if img.mode in ("L", "CMYK") else "RGB", (2 * image_size,) * 2)
                crop_bottom = int(round(crop_bottom * img.size[1] / height))
            img.load()
            img = ImageOps.exif_transpose(img)
            img = to_rgb(img)
            if crop_bottom and img.size[1] > 4 * crop_bottom:
                img = img.crop((0, 0, img.size[0], img.size[1] - crop_bottom))
            img = center_square(img)
            if img.size != (image_size, image_size):
                img = img.resize((image_size, image_size), resample)
            out = np.asarray(img, dtype=np.uint8)
    except CorruptImageError:
        raise
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError, EOFError) as err:
        raise CorruptImageError(path, err) from err
    if out.shape != (image_size, image_size, 3):  # pragma: no cover - defensive
        raise CorruptImageError(path, f"decoded to an unexpected shape {out.shape}")
    return out


def _n_workers(workers: int | None) -> int:
    if workers is not None:
        return max(1, int(workers))
    return max(1, min(8, os.cpu_count() or 1))


def load_images(
    paths: Sequence[str | os.PathLike],
    image_size: int,
    *,
    crop_bottom: int = 0,
    workers: int | None = None,
    desc: str = "images",
    progress: bool | None = None,
) -> np.ndarray:
    """Decode many image files into one uint8 array ``[len(paths), S, S, 3]``.

    Decoding runs in a thread pool (Pillow releases the GIL while decoding and resizing) with
    a tqdm progress bar (``progress=None`` shows it only on a terminal, for 200+ images). Every
    file is tried: those that cannot be decoded are named together in one
    :class:`UnreadableImagesError` (:func:`load_readable_images` skips them instead); nothing
    is silently skipped.
    """
    images, unreadable = load_readable_images(
        paths, image_size, crop_bottom=crop_bottom, workers=workers, desc=desc,
        progress=progress,
    )  # fmt: skip
    if unreadable:
        raise UnreadableImagesError(unreadable)
    return images


def load_readable_images(
    paths: Sequence[str | os.PathLike],
    image_size: int,
    *,
    crop_bottom: int = 0,
    workers: int | None = None,
    desc: str = "images",
    progress: bool | None = None,
) -> tuple[np.ndarray, list[CorruptImageError]]:
    """Decode every file that can be decoded: ``(images, errors)``, ``images`` the readable
    files' ``[n, S, S, 3]`` in the order of ``paths``, ``errors`` one
    :class:`CorruptImageError` per file that cannot be (the caller reports or lists them)."""
    n = len(paths)
    out = np.empty((n, image_size, image_size, 3), dtype=np.uint8)
    if n == 0:
        return out, []
    disable = (n < 200 or None) if progress is None else (not progress)

    def one(p):
        try:
            return load_image(p, image_size, crop_bottom=crop_bottom)
        except CorruptImageError as err:
            return err

    n_workers = _n_workers(workers)
    errors: list[CorruptImageError] = []
    readable = np.ones(n, dtype=bool)
    with tqdm(total=n, desc=desc, unit="img", disable=disable, leave=False) as bar:
        if n_workers == 1 or n < 16:
            results = map(one, paths)
        else:
            pool = ThreadPoolExecutor(n_workers)
            results = pool.map(one, paths)
        try:
            for i, arr in enumerate(results):
                if isinstance(arr, CorruptImageError):
                    errors.append(arr)
                    readable[i] = False
                else:
                    out[i] = arr
                bar.update()
        finally:
            if n_workers > 1 and n >= 16:
                pool.shutdown(wait=True, cancel_futures=True)
    return (out if readable.all() else out[readable]), errors


def resize_images(
    images: np.ndarray, image_size: int, *, resample: Image.Resampling = LANCZOS
) -> np.ndarray:
    """Resize uint8 ``[N, H, W, 3]`` images to ``[N, S, S, 3]`` (centre-cropped to a square).

    Returns ``images`` itself when they already have the requested size.
    """
    images = np.asarray(images)
    n, h, w = images.shape[:3]
    if h == w == image_size:
        return images
    out = np.empty((n, image_size, image_size, 3), dtype=np.uint8)
    side = min(h, w)
    top, left = (h - side) // 2, (w - side) // 2
    for i in range(n):
        img = Image.fromarray(images[i, top : top + side, left : left + side])
        out[i] = np.asarray(img.resize((image_size, image_size), resample))
    return out


# ----------------------------------------------------------------------------- folders
def split_classes(
    n_classes: int,
    split: Sequence[float] = (0.6, 0.2, 0.2),
    seed: int = 0,
) -> np.ndarray:
    """A fixed random train/val/test split of ``n_classes`` classes, as the shared packs do.

    ``perm = np.random.default_rng(seed).permutation(n_classes)``; the first ``n_test`` classes
    of ``perm`` go to test, the next ``n_val`` to val, the rest to train, with
    ``n_x = round(ratio_x * C)`` (ratios normalised to sum 1). As in the shared packs, a
    non-zero val/test share gets at least 5 classes when ``C >= 20`` (so 5-way episodes are
    possible) and at least one class when ``C >= 3``; train keeps at least one class when its
    ratio is non-zero. With the default ratios this is exactly the split of
    ``../shared/data/sets-mini`` (``n = round(0.2 C)``, ``n >= 5`` for ``C >= 20``).

    Returns:
        ``[C]`` array of ``"train"`` / ``"val"`` / ``"test"``.
    """
    ratios = np.asarray(split, dtype=np.float64)
    if ratios.shape != (3,) or (ratios < 0).any() or ratios.sum() <= 0:
        raise ValueError(
            f"split must be three non-negative ratios (train, val, test), got {tuple(split)}"
        )
    ratios = ratios / ratios.sum()
    c = int(n_classes)
    if c < 1:
        raise ValueError(f"n_classes must be positive, got {n_classes}")

    def share(r: float) -> int:
        if r == 0:
            return 0
        n = int(round(r * c))
        if c >= 20:
            n = max(n, 5)
        if c >= 3:
            n = max(n, 1)
        return n

    n_test, n_val = share(ratios[2]), share(ratios[1])
    if ratios[0] > 0:
        while n_test + n_val > c - 1 and (n_test > 1 or n_val > 1):
            if n_test >= n_val:
                n_test -= 1
            else:
                n_val -= 1
    n_test = min(n_test, c)
    n_val = min(n_val, c - n_test)
    perm = np.random.default_rng(seed).permutation(c)
    out = np.full(c, "train", dtype="<U5")
    out[perm[:n_test]] = "test"
    out[perm[n_test : n_test + n_val]] = "val"
    return out


def is_image_file(p: Path) -> bool:
    return p.is_file() and not p.name.startswith(".") and p.suffix.lower() in IMAGE_EXTENSIONS


def ignored_files(folder: Path) -> list[str]:
    """Every entry of ``folder/<class>/<images>`` that is not read as an image, relative to
    ``folder`` (sub-folders with a trailing ``/``): files beside the class folders, hidden
    files and folders (``.DS_Store``) at every level, files whose ending is not in
    :data:`IMAGE_EXTENSIONS`, and folders inside a class folder (their files are not read)."""
    return _scan(Path(folder))[1]


def _scan(folder: Path) -> tuple[dict[str, list[Path]], list[str]]:
    classes: dict[str, list[Path]] = {}
    ignored: list[str] = []
    for d in sorted(folder.iterdir()):
        if not d.is_dir() or d.name.startswith("."):
            ignored.append(d.name + ("/" if d.is_dir() else ""))
            continue
        files = []
        for p in sorted(d.iterdir()):
            if is_image_file(p):
                files.append(p)
            else:
                ignored.append(f"{d.name}/{p.name}" + ("/" if p.is_dir() else ""))
        classes[d.name] = files
    return classes, ignored


def scan_image_folder(folder: Path, *, what: str = "image folder") -> dict[str, list[Path]]:
    """``{class name: sorted image files}`` of ``folder/<class>/<images>`` (sorted by name).

    Every entry that is not read is named in one warning (:func:`ignored_files`: files beside
    the class folders, hidden files such as ``.DS_Store`` at every level, files that are not
    images, folders inside a class folder): nothing is ignored unseen.
    """
    classes, ignored = _scan(folder)
    if ignored:
        more = f" and {len(ignored) - 20} more" if len(ignored) > 20 else ""
        warnings.warn(
            f"{what} {folder}: ignored {len(ignored)} file(s) that are not images of a class "
            f"folder (<folder>/<class>/<image file> with an image extension {IMAGE_EXTENSIONS}, "
            f"not hidden): {', '.join(ignored[:20])}{more}",
            stacklevel=3,
        )
    return classes
