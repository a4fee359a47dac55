"""Loading a paper dataset: find its layout, check it, split its classes, cache the images."""

from __future__ import annotations

import hashlib
import json
import os
import re
import warnings
import zlib
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from ..domain import SPLITS, Domain
from ..images import load_images, resize_images
from ..packs import load_pack, validate_arrays, write_npz
from ._archives import decode_bytes
from ._common import (
    DatasetNotFoundError,
    Figures,
    PaperDataset,
    PaperDataWarning,
    PaperSplitWarning,
    _Listing,
    _malformed,
    _user_split,
    _user_split_digest,
)
from ._search import LayoutMatch, find_layout
from ._specs import PAPER_OOD, PAPER_ORDERS, paper_dataset

_CACHE_VERSION = 2

#: Folder names of the layouts themselves: a "class" named like this means the images were
#: read one level too high (archive parts, split folders or image folders taken as classes).
_LAYOUT_FOLDER = re.compile(
    r"^(wildfish_part\d+|images|images_small|images_background|images_evaluation|jpg|data|"
    r"splits|train|val|test|validation|train_val_images|plantae|cub_200_2011|omniglot-py|"
    r"flowers-102|cifar100|fgvc-aircraft-2013b)$",
    re.IGNORECASE,
)


def default_cache_dir() -> Path:
    """``$AVALANCHE_SETS_CACHE`` if set, else ``~/.cache/avalanche_sets/paper``."""
    env = os.environ.get("AVALANCHE_SETS_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "avalanche_sets" / "paper"


def locate_paper_dataset(name: str, root: str | os.PathLike) -> Path:
    """The folder one paper dataset is read from under ``root`` (see :func:`find_paper_layout`).

    Raises:
        DatasetNotFoundError: no accepted layout was found (the message lists them all).
    """
    return find_paper_layout(name, root).folder


def find_paper_layout(name: str, root: str | os.PathLike) -> LayoutMatch:
    """The first accepted layout of a paper dataset under ``root``, in the documented order.

    Every layout is tried at ``<root>/<name>`` for each accepted folder name of the dataset
    and at ``root`` itself, so ``root`` may hold many datasets or be one dataset's folder.
    """
    return find_layout(paper_dataset(name), root)


def check_figures(spec: PaperDataset, listing: _Listing, figures: Figures, folder: Path) -> None:
    """Refuse classes that cannot be the dataset's; warn when the copy is incomplete.

    Raises :class:`DatasetNotFoundError` when a class is named like a layout folder, when
    there are more classes or images than the complete release has, or when one class has
    more images than any class of the release (classes merged). Warns
    (:class:`PaperDataWarning`) when there are fewer classes or images than the release has.
    """
    if not listing.check_figures:
        return
    names, counts = listing.class_names, listing.counts()
    wrong = [n for n in names if any(_LAYOUT_FOLDER.match(part) for part in n.split("/"))]
    if wrong:
        raise _malformed(
            spec,
            folder,
            f"{len(wrong)} 'class(es)' {wrong[:4]} are named like folders of the dataset's "
            "layout, not like its classes: the images were read one level too high; fix: "
            "unpack the archive as released (see the layouts below) or point root at the "
            "folder holding the dataset",
        )
    about = f"the complete {spec.title} has {figures.classes} classes ({figures.source})"
    if len(names) > figures.classes:
        raise _malformed(
            spec,
            folder,
            f"{len(names)} classes found but {about}: this is not (only) {spec.title}; fix: "
            "point root at the dataset's own folder",
        )
    if figures.max_per_class is not None and counts.size and counts.max() > figures.max_per_class:
        i = int(counts.argmax())
        raise _malformed(
            spec,
            folder,
            f"class {names[i]!r} has {int(counts[i])} images, more than any class of "
            f"{spec.title} ({figures.max_per_class}): several classes were read as one",
        )
    total = int(counts.sum())
    if figures.images is not None and total > figures.images:
        raise _malformed(
            spec,
            folder,
            f"{total} images found, more than the complete {spec.title} ({figures.images}, "
            f"{figures.source}); fix: point root at the dataset's own folder",
        )
    if len(names) < figures.classes or (figures.images is not None and total < figures.images):
        warnings.warn(
            f"{spec.title}: {len(names)} classes and {total} images found in {folder}, but "
            f"{about}; an incomplete copy gives results not comparable with the paper's",
            PaperDataWarning,
            stacklevel=4,
        )


def _cache_file(
    spec: PaperDataset, match: LayoutMatch, image_size: int, seed: int, cache_dir: Path
) -> Path:
    key = json.dumps(
        [
            _CACHE_VERSION,
            spec.name,
            str(match.folder.resolve()),
            match.layout.label,
            image_size,
            seed,
            _user_split_digest(match.split_dir),
        ]
    )
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return cache_dir / f"{spec.name}-{image_size}px-{digest}.npz"


def _choose(spec: PaperDataset, listing: _Listing, keep: list[int], seed: int, cap: bool):
    """Per kept class: the indices of its images (at most ``max_images_per_class`` if ``cap``)."""
    out = []
    for i in keep:
        n = len(listing.items[i])
        idx = np.arange(n)
        if cap and spec.max_images_per_class is not None and n > spec.max_images_per_class:
            rng = np.random.default_rng([seed, zlib.crc32(listing.class_names[i].encode())])
            idx = np.sort(rng.choice(n, size=spec.max_images_per_class, replace=False))
        out.append(idx)
    return out


def _images(
    spec: PaperDataset,
    listing: _Listing,
    keep: list[int],
    chosen: Sequence[np.ndarray],
    image_size: int,
    workers: int | None,
    progress: bool | None,
) -> np.ndarray:
    """The chosen images of the kept classes, in class order, as uint8 ``[N, S, S, 3]``."""
    first = listing.items[keep[0]]
    if isinstance(first, np.ndarray):
        parts = [resize_images(listing.items[i][idx], image_size) for i, idx in zip(keep, chosen)]
        return np.concatenate(parts) if parts else np.zeros((0, image_size, image_size, 3))
    picked = [[listing.items[i][j] for j in idx] for i, idx in zip(keep, chosen)]
    flat = [x for p in picked for x in p]
    if flat and isinstance(flat[0], bytes):  # encoded images of an archive (torchmeta's CUB)
        return np.stack(
            [
                decode_bytes(b, image_size, f"{spec.title} class {listing.class_names[i]!r}")
                for i, p in zip(keep, picked)
                for b in p
            ]
        )
    return load_images(
        flat,
        image_size,
        crop_bottom=listing.crop_bottom,
        workers=workers,
        desc=spec.name,
        progress=progress,
    )


def _build_arrays(
    spec: PaperDataset,
    match: LayoutMatch,
    image_size: int,
    seed: int,
    workers: int | None,
    progress: bool | None,
) -> dict[str, np.ndarray]:
    listing = match.layout.scan(match.folder, spec)
    check_figures(spec, listing, match.layout.figures or spec.figures, match.folder)
    names, counts = listing.class_names, listing.counts()

    user = _user_split(spec, match.split_dir, names)
    if user is not None:
        split_map, note = user, f"user split files {match.split_dir}/{{train,val,test}}.txt"
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
            f"{spec.title}: {len(left_out)} class(es) found in {match.folder} are listed in "
            f"none of {match.split_dir}/{{train,val,test}}.txt and are left out, e.g. "
            f"{left_out[:5]}",
            PaperSplitWarning,
            stacklevel=3,
        )
    if not keep:
        raise _malformed(spec, match.folder, "no class is left after applying the class split")
    empty = [names[i] for i in keep if counts[i] == 0]
    if empty:
        raise _malformed(
            spec,
            match.folder,
            f"{len(empty)} class(es) have no images, e.g. {empty[:5]}; fix: restore their "
            "image files, or leave them out with splits/{train,val,test}.txt",
        )
    # The image cap belongs to the published rule (Tseng et al.'s 600 per species); a split
    # that ships with the data comes with its images already chosen.
    chosen = _choose(spec, listing, keep, seed, cap=user is None and listing.official is None)
    images = _images(spec, listing, keep, chosen, image_size, workers, progress)
    sizes = [len(c) for c in chosen]

    class_names = [names[i] for i in keep]
    class_split = np.array([split_map[n] for n in class_names], dtype="<U5")
    got = tuple(int((class_split == s).sum()) for s in SPLITS)
    if got != spec.split_sizes and not (listing.authors and user is None):
        warnings.warn(
            f"{spec.title}: class split train/val/test = {got[0]}/{got[1]}/{got[2]} differs "
            f"from the paper's {spec.split_sizes[0]}/{spec.split_sizes[1]}/"
            f"{spec.split_sizes[2]} ({len(names)} classes found in {match.folder}); results "
            "are not comparable with the paper's",
            PaperSplitWarning,
            stacklevel=3,
        )
    extra = "".join(f"; {n}" for n in listing.notes)
    source = (
        f"{spec.title} from {match.folder} ({match.layout.label}); class split: {note}{extra}; "
        f"{sum(sizes)} images resized to {image_size}px"
    )
    return validate_arrays(
        {
            "images": images,
            "labels": np.repeat(np.arange(len(class_names)), sizes),
            "class_names": np.asarray(class_names, dtype=str),
            "class_split": class_split,
            "source": np.asarray(source, dtype=str),
        },
        f"{spec.title} at {match.folder}",
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
        root: folder holding the datasets (each in one of its accepted layouts, see
            ``PAPER_DATASETS[name].layout``), or the dataset's own folder.
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
        DatasetNotFoundError: the dataset is missing, malformed or not the dataset (names
            the path, the layouts looked for and where to get the data).
        CorruptImageError: an image file cannot be decoded (names the file).
    """
    spec = paper_dataset(name)
    if int(image_size) < 1:
        raise ValueError(f"image_size must be a positive integer, got {image_size!r}")
    image_size = int(image_size)
    match = find_layout(spec, root)
    domain_kw = dict(labeled_fraction=labeled_fraction, split_seed=split_seed)
    origin = f"{spec.title} at {match.folder}"

    path = None
    if cache:
        folder = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
        path = _cache_file(spec, match, image_size, int(class_split_seed), folder)
        if path.is_file() and not refresh:
            try:
                dom = load_pack(path, name=spec.name, **domain_kw)
                dom.origin = origin
                return dom
            except ValueError as err:
                warnings.warn(
                    f"ignoring unreadable cache file {path} ({err}); rebuilding", stacklevel=2
                )

    arrays = _build_arrays(spec, match, image_size, int(class_split_seed), workers, progress)
    if path is not None:
        write_npz(path, arrays, compress=False)
    return Domain(
        name=spec.name,
        images=arrays["images"],
        labels=arrays["labels"],
        class_names=arrays["class_names"].tolist(),
        class_split=arrays["class_split"],
        source=str(arrays["source"]),
        origin=origin,
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


__all__ = [
    "DatasetNotFoundError",
    "default_cache_dir",
    "locate_paper_dataset",
    "find_paper_layout",
    "check_figures",
    "load_paper_domain",
    "load_paper_domains",
]
