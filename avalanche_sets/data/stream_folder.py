"""A stream folder from any mix of one's own data, domain packs and the synthetic domains.

:func:`prepare_stream` (CLI ``avalanche-sets prepare stream``) writes one domain pack per item
into an output folder, plus ``manifest.json`` and ``README.md``;
``avalanche-sets run --preset cpu --root <out>`` then runs on it::

    avalanche-sets prepare stream --out packs/mine \\
        --domains flowers/ birds.npz synthetic:shapes synthetic:gratings \\
        --ood synthetic:rings textures=my_textures/

**Items** (stream domains with ``--domains``, in stream order; OOD sources with ``--ood``):

* ``synthetic:NAME``: a synthetic domain (:data:`~.synthetic.SYNTHETIC_DOMAINS`, any of them in
  either role), generated at the stream's image size with ``seed``;
* ``PATH.npz``: a domain pack (its own class split is kept; images resized to the stream's size);
* ``FOLDER``: an image folder with one sub-folder per class, built like ``prepare pack``
  (class split ``split``, ``seed``);
* ``NAME=ITEM``: any of these, named ``NAME`` in the stream.

**Names are clean.** An item is named after the synthetic domain, the pack's file stem (without
an ``ood_`` prefix) or the folder. Packs are written as ``<name>.npz`` (stream domains) and
``ood_<name>.npz`` (OOD sources), and ``manifest.json`` has a ``stream`` section listing each
role's names and files in order: the ``packs`` source reads it (:func:`read_stream_manifest`), so
the domains and OOD sources of the stream are ``flowers`` and ``rings``, not ``ood_rings``. A
folder without that section (``../shared/data/sets-mini``, ``prepare torchvision``) is read as
before: ``ood_*.npz`` are the OOD sources, named after their files.

**Checked before anything is written**: every item (an unknown synthetic name lists the valid
ones, a missing path is named), the names (distinct; a stream domain's name does not start with
``ood_``), and the classes: a stream domain needs ``n_way`` classes in each of train, val and
test, an OOD source one (:mod:`avalanche_sets.data.splits`).
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shlex
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import __version__
from ..suggest import did_you_mean
from ._readme import readme_head
from .domain import SPLITS, Domain
from .images import UnreadableImagesError, ignored_files, scan_image_folder
from .packs import (
    SKIP_UNREADABLE_HINT,
    FolderImages,
    load_pack,
    read_image_folder,
    save_pack,
)
from .splits import (
    RunTarget,
    class_split,
    fitting_episode,
    min_class_images,
    min_classes,
    nth_largest_sizes,
    split_counts,
    usable_counts,
    warn_small_classes,
)
from .synthetic import (
    GENERATOR_VERSION,
    SYNTHETIC_DOMAINS,
    SYNTHETIC_ID_DOMAINS,
    SYNTHETIC_OOD_SOURCES,
    make_synthetic_domain,
)

__all__ = [
    "StreamItem",
    "DEFAULT_STREAM_OOD",
    "MANIFEST",
    "parse_stream_item",
    "check_split_and_seed",
    "prepare_command",
    "prepare_stream",
    "read_stream_manifest",
    "report",
    "run_command",
]

#: OOD sources of :func:`prepare_stream` when none are named: the three synthetic ones.
DEFAULT_STREAM_OOD: tuple[str, ...] = tuple(f"synthetic:{n}" for n in SYNTHETIC_OOD_SOURCES)
#: The file of a stream folder that names its domains and OOD sources.
MANIFEST = "manifest.json"

_OOD_PREFIX = "ood_"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_ITEM_FORMS = (
    "an item is synthetic:NAME (ID domains: {id}; OOD sources: {ood}), a .npz domain pack, or "
    "an image folder with one sub-folder per class, optionally named as NAME=ITEM"
).format(id=", ".join(SYNTHETIC_ID_DOMAINS), ood=", ".join(SYNTHETIC_OOD_SOURCES))


@dataclass(frozen=True)
class StreamItem:
    """One domain or OOD source of a stream folder.

    Attributes:
        text: the item as given (for messages and the manifest).
        kind: ``"synthetic"``, ``"pack"`` or ``"folder"``.
        name: its name in the stream.
        ref: the synthetic domain's name, or the pack's / folder's path.
    """

    text: str
    kind: str
    name: str
    ref: str


def parse_stream_item(text: str) -> StreamItem:
    """Read one item: ``synthetic:NAME``, ``PATH.npz``, an image folder, or ``NAME=ITEM``.

    Raises:
        ValueError: an unknown synthetic name (the valid ones are listed), a file that is not a
            ``.npz`` pack, or a name that is not a plain file name.
        FileNotFoundError: a pack or folder that does not exist.
    """
    text = str(text)
    name, rest = None, text
    head, sep, tail = text.partition("=")
    if sep and _NAME.fullmatch(head) and tail:
        name, rest = head, tail
    if rest.startswith("synthetic:"):
        ref = rest[len("synthetic:") :]
        if ref not in SYNTHETIC_DOMAINS:
            hint = did_you_mean(ref, SYNTHETIC_DOMAINS, prefix="synthetic:")
            raise ValueError(
                f"unknown synthetic domain {ref!r} in item {text!r}{hint}; valid: ID domains "
                f"{', '.join(SYNTHETIC_ID_DOMAINS)}; OOD sources "
                f"{', '.join(SYNTHETIC_OOD_SOURCES)} (any of them in either role)"
            )
        kind, default = "synthetic", ref
    else:
        path = Path(rest).expanduser()
        if path.is_dir():
            kind, default = "folder", path.resolve().name
        elif path.is_file() and path.suffix == ".npz":
            kind, default = "pack", path.stem.removeprefix(_OOD_PREFIX)
        elif path.exists():
            raise ValueError(
                f"item {text!r}: {path} is neither a .npz pack nor a folder; {_ITEM_FORMS}"
            )
        else:
            raise FileNotFoundError(
                f"item {text!r}: {'domain pack' if path.suffix == '.npz' else 'no pack or image folder'} "
                f"{path} not found; {_ITEM_FORMS}"
            )
        ref = str(path)
    name = default if name is None else name
    if not _NAME.fullmatch(name):
        raise ValueError(
            f"item {text!r}: {name!r} is not a usable name (letters, digits, '_', '.', '-'); "
            "fix: name it as NAME=ITEM"
        )
    return StreamItem(text=text, kind=kind, name=name, ref=ref)


def _check_names(domains: list[StreamItem], ood: list[StreamItem]) -> None:
    if not domains:
        raise ValueError("a stream needs at least one domain; fix: name items in --domains")
    names = [i.name for i in domains + ood]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        items = [i.text for i in domains + ood if i.name in twice]
        raise ValueError(
            f"the name(s) {twice} are given by more than one item {items}; every domain and "
            "OOD source needs its own name; fix: name them as NAME=ITEM"
        )
    prefixed = [i.text for i in domains if i.name.startswith(_OOD_PREFIX)]
    if prefixed:
        raise ValueError(
            f"stream domain(s) {prefixed} are named with the prefix {_OOD_PREFIX!r}, which "
            "marks OOD packs; fix: name them as NAME=ITEM, or pass them with --ood (ood=)"
        )


def _role(need: int) -> str:
    return "an OOD source" if need == 1 else f"a stream domain of {need}-way episodes"


def _check_domain(dom: Domain, item: StreamItem, need: int) -> None:
    counts = split_counts(dom.class_split)
    short = [s for s in SPLITS if counts[s] < need]
    if short:
        sizes = "/".join(str(counts[s]) for s in SPLITS)
        fix = "pass it with --ood (ood=)" if need > 1 else "pick another OOD source"
        raise ValueError(
            f"item {item.text!r}: its {dom.n_classes} classes are split {sizes} "
            f"(train/val/test), fewer than {need} in {short}; {_role(need)} needs {need} in "
            f"each ({min_classes(need)} in all); fix: rebuild the pack with `avalanche-sets "
            f"prepare pack --split ...` (counts with {need} or more in each part), {fix}, or "
            "lower --n-way (n_way=)"
        )


def _load(item: StreamItem, image_size: int, seed: int) -> Domain:
    if item.kind == "synthetic":
        return make_synthetic_domain(item.ref, seed=seed, image_size=image_size)
    return load_pack(item.ref, image_size=image_size, name=item.name)


def _source(item: StreamItem, dom: Domain, seed: int) -> str:
    if item.kind == "synthetic":
        return (
            f"synthetic domain {item.ref} (avalanche_sets.data.synthetic, generator "
            f"v{GENERATOR_VERSION}, seed {seed}); generated, free of third-party rights"
        )
    return dom.source


def _warn_small_ood(
    item: StreamItem, images: dict[str, int], n_sources: int, target: RunTarget
) -> None:
    """An episode draws ``n_ood / n_sources`` images from each OOD source's classes of its
    split: warn when ``target``'s episodes would draw more than a split holds."""
    n_ood = target.n_ood
    per_source = -(-n_ood // n_sources)
    short = {s: n for s, n in images.items() if n < per_source}
    if short:
        warnings.warn(
            f"OOD source {item.name!r} (item {item.text!r}) has {short} images in those splits' "
            f"classes, fewer than the {per_source} that the {target.preset} preset's episodes "
            f"draw from it (n_ood = {n_ood} over {n_sources} OOD source(s)), so runs with it "
            "stop; fix: "
            "give it more images, add OOD sources, or run with a lower --set n_ood=...",
            stacklevel=3,
        )


def _entry(item: StreamItem, role: str, pack: str, dom: Domain, source: str) -> dict[str, Any]:
    counts = np.bincount(dom.labels, minlength=dom.n_classes)
    return {
        "name": item.name,
        "pack": pack,
        "role": role,
        "item": item.text,
        "classes": dom.n_classes,
        "images": int(dom.labels.size),
        "images_per_class": [int(counts.min()), int(np.median(counts)), int(counts.max())],
        "split": split_counts(dom.class_split),
        "source": source,
    }


def prepare_stream(
    out: str | os.PathLike,
    domains: Sequence[str | StreamItem],
    ood: Sequence[str | StreamItem] = DEFAULT_STREAM_OOD,
    *,
    image_size: int = 32,
    split: Sequence[float] | Sequence[int] = (0.6, 0.2, 0.2),
    seed: int = 0,
    n_way: int = 5,
    target: RunTarget,
    progress: bool | None = None,
    command: str = "",
    skip_unreadable: bool = False,
) -> Path:
    """Write a stream folder: one pack per item, ``manifest.json`` and ``README.md``.

    Args:
        out: output folder (it must hold no other ``.npz`` files).
        domains: stream domains in stream order (items, see the module doc, or
            :class:`StreamItem`).
        ood: OOD sources (default: the synthetic ``rings``, ``lattices``, ``spirals``; ``[]``
            for none, then run with ``--set n_ood=0``).
        image_size: side of every pack's images (packs of another size are resized).
        split: class split of the image folders: fractions or class counts
            (:func:`~avalanche_sets.data.splits.class_split`).
        seed: seed of the image folders' class split and of the synthetic generator.
        n_way: episode width: every stream domain needs ``n_way`` classes in each split, every
            OOD source one.
        target: the runs the stream is prepared for (``avalanche_sets.presets.run_target(
            "cpu")``): classes and OOD sources too small for their episodes are named in a
            warning, and the manifest's run command starts from their preset.
        progress: progress bars while image folders are decoded.
        command: the command line to record in the manifest.
        skip_unreadable: leave out the image files of the image folders that cannot be
            decoded (listed in the manifest, entry ``skipped``) instead of refusing them; every
            such file of every folder is named in one pass either way.

    Returns:
        ``out`` as a :class:`~pathlib.Path`.

    Raises:
        ValueError, FileNotFoundError: a bad item, name or setting, a domain whose classes
            cannot serve its role, or unreadable image files (every one named, in one
            :class:`~avalanche_sets.data.images.UnreadableImagesError`); all checked before
            anything is written.
    """
    id_items, ood_items = _stream_items(domains, ood, image_size, n_way)
    roles = [(i, "stream", n_way) for i in id_items] + [(i, "ood", 1) for i in ood_items]
    files = {i.name: (_OOD_PREFIX if r == "ood" else "") + f"{i.name}.npz" for i, r, _ in roles}
    out = Path(out).expanduser()
    _check_out_folder(out, files)
    loaded: dict[str, Domain] = {}
    for item, _, need in roles:  # every check before the first file is written
        if item.kind == "folder":
            cls, sizes = _check_folder(item, roles, split, seed, need)
        else:
            loaded[item.name] = dom = _load(item, image_size, seed)
            _check_domain(dom, item, need)
            cls, sizes = dom.class_split, np.bincount(dom.labels, minlength=dom.n_classes)
            if need > 1 and item.kind == "pack":  # folders: named when they are read
                counts = dict(zip(dom.class_names, map(int, sizes)))
                warn_small_classes(counts, cls, need, f"item {item.text!r}", target=target)
        if need == 1:
            counts = {s: int(sizes[cls == s].sum()) for s in SPLITS}
            _warn_small_ood(item, counts, len(ood_items), target)
    folders = _read_folders(roles, image_size, split, seed, target, progress, skip_unreadable)
    entries = _write_packs(out, roles, files, loaded, folders, seed, target)
    settings = {
        "image_size": image_size,
        "split": list(split),
        "seed": seed,
        "n_way": n_way,
        "skip_unreadable": skip_unreadable,
    }  # fmt: skip
    manifest = _manifest(out, id_items, ood_items, files, entries, settings, target, command)
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    (out / "README.md").write_text(_readme(manifest))
    read_stream_manifest(out)  # what was written reads back
    return out


def _stream_items(
    domains: Sequence[str | StreamItem], ood: Sequence[str | StreamItem], image_size, n_way
) -> tuple[list[StreamItem], list[StreamItem]]:
    """The stream's items and OOD items, parsed, their names and the sizes checked."""
    if isinstance(domains, str) or isinstance(ood, str):
        raise TypeError("domains and ood are lists of items, e.g. domains=['synthetic:shapes']")
    for what, value, low in (("image_size", image_size, 8), ("n_way", n_way, 2)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{what} must be an integer >= {low}, got {value!r}")
    id_items = [i if isinstance(i, StreamItem) else parse_stream_item(i) for i in domains]
    ood_items = [i if isinstance(i, StreamItem) else parse_stream_item(i) for i in ood]
    _check_names(id_items, ood_items)
    return id_items, ood_items


def _check_out_folder(out: Path, files: dict[str, str]) -> None:
    """Refuse an output path that is a file or a folder holding packs other than ``files``."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"output folder {out} is a file; fix: name a folder")
    if out.is_dir():
        others = sorted(p.name for p in out.glob("*.npz") if p.name not in files.values())
        if others:
            raise ValueError(
                f"output folder {out} already holds other packs {others}; fix: use an empty "
                "folder or delete them"
            )


def _check_folder(item: StreamItem, roles: list, split, seed: int, need: int):
    """An image folder item's ``(class split, images per class)``, from its file names only."""
    with warnings.catch_warnings():  # the files it ignores: named once, when it is read
        warnings.simplefilter("ignore")
        classes = {c: f for c, f in scan_image_folder(Path(item.ref)).items() if f}
    if not classes:
        raise ValueError(
            f"item {item.text!r}: image folder {item.ref} has no class sub-folder with "
            "images; expected <folder>/<class name>/<image files>"
        )
    try:
        cls = class_split(len(classes), split, seed, n_way=need,
                    where=f"image folder {item.ref} (item {item.text!r})")  # fmt: skip
    except ValueError as err:
        if sum(i.kind == "folder" for i, _, _ in roles) < 2:
            raise
        raise ValueError(
            f"{err}; the split applies to every image folder of the stream: build a "
            "folder that needs its own with `avalanche-sets prepare pack --split ...` "
            "and pass its .npz"
        ) from None
    return cls, np.asarray([len(f) for f in classes.values()])


def _read_folders(
    roles: list, image_size: int, split, seed: int, target: RunTarget, progress, skip_unreadable
) -> dict[str, FolderImages]:
    """Every image of every folder item decoded, every unreadable file named in one pass."""
    folders: dict[str, FolderImages] = {
        item.name: read_image_folder(
            item.ref,
            image_size=image_size,
            split=split,
            seed=seed,
            n_way=need,
            target=target,
            progress=progress,
            skip_unreadable=True,
        )  # fmt: skip
        for item, _, need in roles
        if item.kind == "folder"
    }
    unreadable = [e for read in folders.values() for e in read.unreadable]
    if unreadable and not skip_unreadable:
        raise UnreadableImagesError(unreadable, skip_hint=SKIP_UNREADABLE_HINT)
    return folders


def _write_packs(
    out: Path, roles: list, files: dict[str, str], loaded, folders, seed: int, target: RunTarget
) -> list[dict[str, Any]]:
    """Write every item's pack, in stream order; return their manifest entries."""
    entries = []
    for item, role, need in roles:
        path = out / files[item.name]
        if item.kind == "folder":
            read = folders.pop(item.name)
            save_pack(read.arrays, path, source=read.source)
            dom = load_pack(path, name=item.name)
        else:
            dom = loaded.pop(item.name)
            save_pack(dom, path, source=_source(item, dom, seed))
        entry = _entry(item, role, files[item.name], dom, _source(item, dom, seed))
        if item.kind == "folder":
            entry["skipped"] = read.skipped  # unreadable files left out (skip_unreadable)
            entry["ignored"] = ignored_files(Path(item.ref))  # every file not read, by name
        if role == "stream":
            sizes = np.bincount(dom.labels, minlength=dom.n_classes)
            entry["usable"] = usable_counts(sizes, dom.class_split, target)
            # the class size its episodes are limited by, in each split (what fits: the advice)
            entry["nth_class_images"] = nth_largest_sizes(sizes, dom.class_split, need)
        entries.append(entry)
    return entries


def _manifest(
    out: Path, id_items, ood_items, files, entries, settings: dict, target: RunTarget, command
) -> dict[str, Any]:
    """``manifest.json``: the run command of the usable domains, settings, stream, pack entries."""
    n_way = settings["n_way"]
    unusable = {
        e["name"]: e for e in entries if e["role"] == "stream" and min(e["usable"].values()) < n_way
    }
    usable = [i.name for i in id_items if i.name not in unusable]
    why = _unusable_note(unusable, target, n_way, usable)
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "avalanche_sets": __version__,
        "command": command or "prepare_stream(...)",
        "run_command": run_command(
            out,
            target=target,
            image_size=settings["image_size"],
            n_way=n_way,
            n_ood=bool(ood_items),
            domains=usable if unusable else None,
        )
        if usable
        else None,
        "run_command_note": why,
        "settings": settings,
        "stream": {
            "domains": [{"name": i.name, "pack": files[i.name]} for i in id_items],
            "ood": [{"name": i.name, "pack": files[i.name]} for i in ood_items],
        },
        "packs": entries,
    }


def check_split_and_seed(
    items: Sequence[StreamItem], *, split: str | None, seed: int | None
) -> None:
    """Refuse a class split or a seed that no item reads (``None``: not given): the split is
    that of image folders, the seed that of image folders and the synthetic domains; packs keep
    their own.

    Raises:
        ValueError: names the option and the fix (drop it).
    """
    kinds = {i.kind for i in items}
    if split is not None and "folder" not in kinds:
        raise ValueError(
            "--split sets the class split of image folders, and no item is one (packs and "
            "synthetic domains keep their own split); fix: drop --split"
        )
    if seed is not None and not kinds & {"folder", "synthetic"}:
        raise ValueError(
            "--seed draws the class split of image folders and the synthetic domains, and no "
            "item is either (packs keep their own split); fix: drop --seed"
        )


def prepare_command(
    out: str, domains: Sequence[str], ood: Sequence[StreamItem], *, image_size: int,
    n_way: int, seed: int | None, split: str | None, skip_unreadable: bool,
) -> str:  # fmt: skip
    """The ``avalanche-sets prepare stream`` command that writes this stream folder (the
    manifest records it): ``domains`` as given, ``ood`` as resolved, ``seed`` and ``split``
    where given."""
    return shlex.join(
        ["avalanche-sets", "prepare", "stream", "--out", out, "--domains", *domains,
         "--ood", *(i.text for i in ood), "--size", str(image_size), "--n-way", str(n_way)]
        + (["--seed", str(seed)] if seed is not None else [])
        + (["--split", split] if split is not None else [])
        + ["--skip-unreadable"] * skip_unreadable
    )  # fmt: skip


def _unusable_note(
    unusable: dict[str, dict[str, int]], target: RunTarget, n_way: int, usable: list[str]
) -> str:
    """Why the run command leaves domains out (or why there is none): ``""`` when none is."""
    if not unusable:
        return ""
    need = min_class_images(target)
    each = ", ".join(
        f"{name!r} has {'/'.join(map(str, e['usable'].values()))}" for name, e in unusable.items()
    )
    why = (
        f"{n_way}-way episodes of the {target.preset} preset need {n_way} classes of at least "
        f"{need} images in each of train/val/test, and {each} (train/val/test); fix: add "
        f"images to their classes (at least {need} per class)"
        + "".join(f"; {_smaller_episodes(name, e, target, n_way)}" for name, e in unusable.items())
    )
    if usable:
        return f"the run command leaves out stream domain(s) {list(unusable)}: {why}"
    return f"no run command: {target.preset} runs can use none of the stream domains: {why}"


def _smaller_episodes(name: str, entry: dict[str, Any], target: RunTarget, n_way: int) -> str:
    """What lets runs use stream domain ``name`` besides more images: the episode sizes its
    ``n_way``-th largest class of each split fits (:func:`~.splits.fitting_episode`), and fewer
    ways where more of its classes are large enough (``usable``) in every split."""
    split, size = min(entry["nth_class_images"].items(), key=lambda kv: kv[1])
    fits = fitting_episode(size, target)
    where = f"{name!r}: the smallest of its {n_way} largest {split} classes has {size} images"
    if fits is None:
        said = f"{where}, too few for any episode (1 shot and 1 query labeled)"
    else:
        sets = " ".join(f"--set {k}={v}" for k, v in fits.items() if v != getattr(target, k))
        shape = ", ".join(f"{k}={v}" for k, v in fits.items())
        said = f"{where}, enough for episodes of {shape}: runs with {sets} can use it"
    k = min(entry["usable"].values())
    if 2 <= k < n_way:  # more of its classes are large enough for fewer ways
        said += f", or prepare the stream with --n-way {k}"
    return said


def run_command(
    out: str | os.PathLike, *, target: RunTarget, image_size: int, n_way: int, n_ood: bool,
    domains: Sequence[str] | None = None,
) -> str:  # fmt: skip
    """The command that runs ``target``'s preset on a stream folder as it was written: with the
    settings the folder fixes where they differ from the preset's — its episode width
    (``n_way``), its image size, and ``n_ood=0`` without OOD sources — so it runs as printed;
    ``domains``: the stream domains its runs can use, when that is not all of them (names of
    the folder's manifest, so a double-quoted list needs no other quoting)."""
    sets = []
    if n_way != target.n_way:
        sets.append(f"n_way={n_way}")
    if image_size != target.image_size:
        sets.append(f"image_size={image_size}")
    if not n_ood:
        sets.append("n_ood=0")
    if domains is not None:
        sets.append('"domains=[' + ",".join(f"'{d}'" for d in domains) + ']"')
    head = f"avalanche-sets run --preset {target.preset} --root {shlex.quote(str(out))}"
    return head + "".join(f" --set {s}" for s in sets)


def report(out: Path) -> list[str]:
    """What ``prepare stream`` prints about the folder it wrote: each pack, the files it
    skipped, the run command (or why there is none) and the domains it leaves out."""
    manifest = json.loads((out / MANIFEST).read_text())
    lines = []
    for e in manifest["packs"]:
        sp = "/".join(str(v) for v in e["split"].values())
        lines.append(
            f"wrote {out / e['pack']}: {e['role']} {e['name']!r} from {e['item']}, "
            f"{e['classes']} classes ({sp} train/val/test), {e['images']} images"
        )
        if e.get("skipped"):
            lines.append(
                f"  skipped {len(e['skipped'])} unreadable file(s): {', '.join(e['skipped'])}"
            )
        if e.get("ignored"):
            lines.append(
                f"  ignored {len(e['ignored'])} file(s) that are not images of a class folder: {', '.join(e['ignored'])}"
            )
    lines.append(f"manifest: {out / MANIFEST}")
    if manifest["run_command"]:
        lines.append(f"run on it: {manifest['run_command']}")
    if manifest["run_command_note"]:
        lines.append(manifest["run_command_note"])
    return lines


def _readme(manifest: dict[str, Any]) -> str:
    lines = readme_head(
        manifest,
        title="A SETS stream of domain packs",
        written=f"Written by `avalanche-sets prepare stream` on {manifest['date']} "
        f"(avalanche-sets {manifest['avalanche_sets']})",
        run_on="Run on it (stream order and names from `manifest.json`)",
        columns=["name", "pack", "role", "from"],
        cells=lambda e: [e["name"], f"`{e['pack']}`", e["role"], f"`{e['item']}`"],
    )
    lines += ["", "Sources:", ""]
    lines += [f"* {e['name']}: {e['source']}" for e in manifest["packs"]]
    return "\n".join(lines) + "\n"


def read_stream_manifest(root: str | os.PathLike) -> tuple[dict[str, str], dict[str, str]] | None:
    """The stream a folder's ``manifest.json`` names: ``({domain: pack file}, {ood: file})``.

    ``None`` when the folder has no ``manifest.json`` or its manifest has no ``stream`` section
    (e.g. ``prepare torchvision``'s): then the file names decide (``ood_*.npz`` are the OOD
    sources).

    Raises:
        ValueError: a ``stream`` section that is malformed or names a name twice.
        FileNotFoundError: a pack it names is missing.
    """
    root = Path(root).expanduser()
    path = root / MANIFEST
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"{path}: not readable JSON ({err})") from err
    stream = manifest.get("stream") if isinstance(manifest, dict) else None
    if stream is None:
        return None
    fix = "fix: write the folder again with `avalanche-sets prepare stream`"
    out: list[dict[str, str]] = []
    for role in ("domains", "ood"):
        entries = stream.get(role) if isinstance(stream, dict) else None
        ok = isinstance(entries, list) and all(
            isinstance(e, dict)
            and isinstance(e.get("name"), str)
            and isinstance(e.get("pack"), str)
            for e in entries
        )
        if not ok:
            raise ValueError(
                f'{path}: stream.{role} must be a list of {{"name": ..., "pack": ...}}; {fix}'
            )
        out.append({e["name"]: e["pack"] for e in entries})
    names = [e["name"] for role in ("domains", "ood") for e in stream[role]]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"{path}: the stream names {twice} more than once; {fix}")
    missing = [str(root / f) for d in out for f in d.values() if not (root / f).is_file()]
    if missing:
        raise FileNotFoundError(f"{path} names packs that are missing: {missing}; {fix}")
    return out[0], out[1]
