"""Shared pieces of the paper-dataset loaders: errors, specs, listings, split files and rules."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..domain import SPLITS
from ..images import scan_image_folder, split_classes

__all__ = [
    "DatasetNotFoundError",
    "PaperSplitWarning",
    "PaperDataWarning",
    "PaperDataset",
    "Layout",
    "Figures",
]


class DatasetNotFoundError(FileNotFoundError):
    """A paper dataset is missing or malformed under the given root.

    The message names the path, the problem, the layouts looked for and where to get the data.
    """

    def __init__(self, spec: PaperDataset, path: str | os.PathLike, problem: str) -> None:
        self.dataset = spec.name
        self.path = Path(path)
        self.problem = problem
        message = (
            f"{spec.title} ({spec.name!r}) {problem} [path: {self.path}].\n"
            f"Expected layout: any of these, tried in this order:\n{spec.layout}\n"
            f"Where to get it: {spec.where}\n"
            "Nothing is downloaded automatically; place the data there (or pass another root)."
        )
        super().__init__(message)


class PaperSplitWarning(UserWarning):
    """The class split of a paper dataset differs from the paper's (sizes or provenance)."""


class PaperDataWarning(PaperSplitWarning):
    """A paper dataset on disk has fewer classes or images than the release it comes from."""


@dataclass(frozen=True)
class Figures:
    """What a complete copy of a dataset holds, to catch wrong or partial copies.

    Attributes:
        classes: number of classes of the complete release.
        images: total images of the complete release (``None``: not checked).
        max_per_class: most images any class of the release has (``None``: not checked).
        source: where these figures come from.
    """

    classes: int
    images: int | None = None
    max_per_class: int | None = None
    source: str = ""


@dataclass
class _Listing:
    """What a layout scanner found: classes and their images.

    ``items[c]`` is a class's images: a list of image files, a uint8 array ``[n, H, W, 3]``
    or a list of encoded image ``bytes``.
    """

    class_names: list[str]
    items: list[Sequence]
    official: dict[str, str] | None = None  # class name -> split, from the layout's own files
    official_note: str = ""
    authors: bool = False  # the official split is the ORDER authors' own
    fallback_note: str = ""  # set when the split falls back to a rule the paper did not use
    crop_bottom: int = 0
    notes: list[str] = field(default_factory=list)  # added to the domain's source line
    check_figures: bool = True  # False where classes are not the dataset's (fishprocess.pt)

    def counts(self) -> np.ndarray:
        return np.array([len(i) for i in self.items], dtype=np.int64)


_Scan = Callable[[Path, "PaperDataset"], _Listing]
_Rule = Callable[[list[str], np.ndarray, int], dict[str, str]]


@dataclass(frozen=True)
class Layout:
    """One on-disk layout of a dataset, tried in a documented order.

    Attributes:
        label: what it is (whose layout), shown in errors and in the domain's source line.
        markers: glob patterns relative to the base folder that must all match.
        scan: reads the classes from ``base / sub``.
        sub: the folder (relative to the base) handed to ``scan``: the dataset's own folder.
        bases: folders relative to ``root`` tried as the base, in order (``""``: ``root``
            itself); ``None`` means the dataset's folder names, then ``root``.
        named: ``root`` itself is tried only when its name is one of the dataset's folder
            names (for layouts whose markers are too generic to trust elsewhere).
        figures: the complete release's figures for this layout (default: the dataset's).
    """

    label: str
    markers: tuple[str, ...]
    scan: _Scan
    sub: str = ""
    bases: tuple[str, ...] | None = None
    named: bool = False
    figures: Figures | None = None


@dataclass(frozen=True)
class PaperDataset:
    """Specification of one of the paper's datasets.

    Attributes:
        name: canonical lowercase name.
        title: the dataset's usual name.
        role: ``"id"`` (a stream domain) or ``"ood"`` (a source of OOD images).
        split_sizes: classes in (train, val, test) as in the paper (or our OOD rule).
        split: how the class split is defined when no split ships with the data.
        where: where to get the data (URL and citation).
        dirnames: accepted folder names under ``root`` (first = documented one).
        layouts: accepted on-disk layouts, in search order.
        figures: what the complete release holds (sanity check).
        notes: anything else worth knowing.
    """

    name: str
    title: str
    role: str
    split_sizes: tuple[int, int, int]
    split: str
    where: str
    dirnames: tuple[str, ...]
    layouts: tuple[Layout, ...] = field(repr=False)
    figures: Figures = field(repr=False)
    notes: str = ""
    max_images_per_class: int | None = field(default=None, repr=False)
    rule: _Rule | None = field(default=None, repr=False)

    @property
    def n_classes(self) -> int:
        return int(sum(self.split_sizes))

    def bases(self, layout: Layout) -> tuple[str, ...]:
        bases = layout.bases if layout.bases is not None else (*self.dirnames, "")
        return tuple(dict.fromkeys(bases))  # in order, each once

    @property
    def layout(self) -> str:
        """The accepted layouts in search order (one numbered line each)."""
        lines = []
        for i, lay in enumerate(self.layouts, start=1):
            found = " + ".join(lay.markers) if lay.markers else "<class folders>"
            named = [b for b in self.bases(lay) if b]
            where = [f"<root>/{{{','.join(named)}}}/{found}"] if named else []
            if "" in self.bases(lay):
                when = " when <root> is named like the dataset" if lay.named else ""
                where.append(f"<root>/{found}{when}")
            lines.append(f"  {i}. {lay.label}: {' or '.join(where)}")
        return "\n".join(lines)


#: The paper uses Vinyals et al.'s split, whose class lists ship with torchmeta, not the zips.
OMNIGLOT_FALLBACK = (
    "no Vinyals et al. class lists (torchmeta's vinyals_*_labels.json) here: using the seeded "
    "random 60/20/20 OOD class split, NOT the Vinyals split the paper follows"
)


# ============================================================================ helpers
def _malformed(spec: PaperDataset, path: Path, problem: str) -> DatasetNotFoundError:
    return DatasetNotFoundError(spec, path, f"is malformed: {problem}")


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", str(name).lower())


def _folder_listing(spec: PaperDataset, folder: Path) -> _Listing:
    """Classes = sub-folders of ``folder`` (a ``splits/`` folder of split files is skipped)."""
    classes = scan_image_folder(folder, what=f"{spec.title} folder")
    classes.pop("splits", None)
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


def _read_json(spec: PaperDataset, path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise _malformed(spec, path, f"cannot read it as JSON ({err})") from err


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


def _user_split_files(split_dir: Path) -> dict[str, Path] | None:
    """The user's ``{train,val,test}.txt`` in ``split_dir``; ``None`` when none exists.

    A ``splits/`` folder without them (CIFAR-FS's ``splits/bertinetto/``) is not a user split.
    """
    files = {s: split_dir / f"{s}.txt" for s in SPLITS}
    return files if any(p.is_file() for p in files.values()) else None


def _user_split(spec: PaperDataset, split_dir: Path, known: Sequence[str]) -> dict[str, str] | None:
    files = _user_split_files(split_dir)
    if files is None:
        return None
    missing = [str(p) for p in files.values() if not p.is_file()]
    if missing:
        raise _malformed(
            spec,
            split_dir,
            f"user split folder lacks {missing}; it must hold train.txt, val.txt and test.txt "
            "(one class name per line)",
        )
    return _split_from_files(spec, files, known)


def _user_split_digest(split_dir: Path) -> str:
    files = _user_split_files(split_dir)
    if files is None:
        return ""
    h = hashlib.sha256()
    for s, p in files.items():
        h.update(s.encode())
        h.update(p.read_bytes() if p.is_file() else b"<missing>")
    return h.hexdigest()


# ---------------------------------------------------------------------------- split rules
def _alternate(names: Sequence[str]) -> dict[str, str]:
    """Chen et al.'s rule on an ordered list: i%2==0 train, i%4==1 val, i%4==3 test."""
    return {
        n: "train" if i % 2 == 0 else ("val" if i % 4 == 1 else "test") for i, n in enumerate(names)
    }


def _rule_chen(names: list[str], counts: np.ndarray, seed: int) -> dict[str, str]:
    """Chen et al. 2019 (CUB): sorted class folders, then :func:`_alternate`."""
    return _alternate(sorted(names))


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
    return _alternate([names[i] for i in order[-200:]])


def _rule_random(sizes: tuple[int, int, int], min_images: int = 0) -> _Rule:
    """Seeded random split of the stated sizes (scaled when the class count differs)."""

    def rule(names: list[str], counts: np.ndarray, seed: int) -> dict[str, str]:
        kept = sorted(n for n, c in zip(names, counts) if c > min_images)
        if not kept:
            return {}
        split = split_classes(len(kept), sizes, seed)
        return dict(zip(kept, split.tolist()))

    return rule
