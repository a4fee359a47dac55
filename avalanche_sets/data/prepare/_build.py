"""Writing domain packs from torchvision datasets: one pack per dataset
(:func:`build_torchvision_pack`: the kept classes, their split, the decoded images), and a whole
stream folder (:func:`prepare_torchvision_stream`: every pack, ``manifest.json`` and
``README.md``), each checked before any image is decoded.
"""

from __future__ import annotations

import datetime
import json
import os
import shlex
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ... import __version__
from .._readme import readme_head
from ..images import split_classes
from ..packs import load_pack, save_pack
from ._read import (
    _NOT_FOUND_FIX,
    DatasetNotFoundError,
    _missing,
    collect_labels,
    decode_images,
    open_torchvision_parts,
    select_images,
)
from ._sources import (
    DEFAULT_DOMAINS,
    DEFAULT_OOD,
    TORCHVISION_SOURCES,
    _unknown,
    check_stream_names,
)

#: File-name prefix of OOD packs (the ``packs`` source reads ``ood_*.npz`` as OOD sources).
OOD_PREFIX = "ood_"


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
    lines = readme_head(
        manifest,
        title="SETS domain packs from torchvision datasets",
        written=f"Written by `avalanche-sets prepare torchvision` on {manifest['date']} "
        f"(avalanche-sets {manifest['avalanche_sets']}, torchvision "
        f"{manifest['torchvision_version']}) from the torchvision root `{s['root']}`",
        run_on="Run on them (stream order as prepared)",
        columns=["pack", "role", "dataset"],
        cells=lambda e: [f"`{e['pack']}`", e["role"], e["title"]],
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
    options = dict(
        image_size=image_size,
        min_images_per_class=min_images_per_class,
        max_images_per_class=max_images_per_class,
        split=split,
        seed=seed,
        n_way=n_way,
    )
    _check_settings(options, download=download, skip_md5=skip_md5)
    _check_full_datasets(domains, ood, options)
    out = Path(out).expanduser()
    files = {n: f"{n}.npz" for n in domains} | {n: f"{OOD_PREFIX}{n}.npz" for n in ood}
    _check_out_folder(out, list(files.values()))
    if not download:  # every missing dataset at once, before anything is decoded
        _check_present(root, domains + ood)
    entries = [
        build_torchvision_pack(
            name,
            root,
            out / files[name],
            ood=name in ood,
            download=download,
            skip_md5=skip_md5,
            workers=workers,
            progress=progress,
            **options,
        )
        for name in domains + ood
    ]
    # the root as given: no absolute path of this machine is added; "split" keeps its place
    settings = {"root": str(root), "domains": domains, "ood": ood, **options}
    settings.update(split=list(split), skip_md5=skip_md5)
    manifest = _manifest(out, domains, settings, entries, command)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    (out / "README.md").write_text(_readme(manifest))
    for e in entries:  # what was written reads back as a valid pack
        load_pack(out / e["pack"])
    return out


def _check_settings(options: dict[str, Any], *, download: bool, skip_md5: bool) -> None:
    """Refuse ``download`` with ``skip_md5``, a size or ``n_way`` below its least, max < min."""
    image_size, n_way = options["image_size"], options["n_way"]
    min_images_per_class = options["min_images_per_class"]
    max_images_per_class = options["max_images_per_class"]
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


def _check_full_datasets(domains: list[str], ood: list[str], options: dict[str, Any]) -> None:
    """Refuse a dataset whose full class list cannot be split for its role (before reading)."""
    for name in domains + ood:
        check_class_split(
            name,
            TORCHVISION_SOURCES[name].n_classes,
            ood=name in ood,
            n_way=options["n_way"],
            split=options["split"],
            seed=options["seed"],
            what=f"classes in the full {TORCHVISION_SOURCES[name].title}",
        )


def _check_present(root: str | os.PathLike, names: Sequence[str]) -> None:
    """Refuse datasets missing under ``root``: every one named in one error."""
    missing = [m for m in (_missing(TORCHVISION_SOURCES[n], Path(root).expanduser())
                           for n in names) if m]  # fmt: skip
    if missing:
        raise DatasetNotFoundError("; ".join(missing) + f"; {_NOT_FOUND_FIX}")


def _manifest(
    out: Path, domains: list[str], settings: dict, entries: list[dict], command: str
) -> dict[str, Any]:
    """``manifest.json`` of a torchvision stream folder: versions, commands, settings, packs."""
    import torchvision  # for its version; heavy (torch), loaded by the reading by now

    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "avalanche_sets": __version__,
        "torchvision_version": torchvision.__version__,
        "command": command or "prepare_torchvision_stream(...)",
        "run_command": _run_command(str(out), domains),
        "settings": settings,
        "packs": entries,
    }
