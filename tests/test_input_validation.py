"""Bad input, caught early and named: one table of malformed inputs and the error each gives.

Every case builds one bad input (a malformed pack, an image folder, impossible episode
settings, an unknown name, contradicting options), expects a specific exception and a message
that names what is wrong and how to fix it. The documentation page ``docs/guide/bad-input.md``
("Bad input: what is validated and what you are told") lists every case id;
``test_docs_catalogue_lists_every_case`` keeps the two in sync.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from avalanche_sets.data import Domain, EpisodeConfig, EpisodeSampler, sets_benchmark
from avalanche_sets.data.packs import (
    CorruptImageError,
    UnreadableImagesError,
    build_pack_from_folder,
    load_pack,
)
from avalanche_sets.data.paper import DatasetNotFoundError, PaperSplitWarning, load_paper_domain
from avalanche_sets.methods import build_strategy, check_method, parse_options
from avalanche_sets.methods.check import strategy_set_options
from avalanche_sets.presets import PRESET_SCHEMA, PRESETS, resolve_preset, root_source, run_target

CATALOGUE = Path(__file__).resolve().parents[1] / "docs" / "guide" / "bad-input.md"
SECTION = "# Bad input: what is validated and what you are told"


# ----------------------------------------------------------------------------- builders
def _arrays(**override) -> dict[str, np.ndarray]:
    """A valid 3-class pack (12 images of 8 px); ``key=None`` removes a key."""
    arrays = {
        "images": np.zeros((12, 8, 8, 3), np.uint8),
        "labels": np.repeat(np.arange(3), 4),
        "class_names": np.array(["a", "b", "c"]),
        "class_split": np.array(["train", "val", "test"]),
    }
    arrays.update(override)
    return {k: v for k, v in arrays.items() if v is not None}


def _pack(tmp: Path, name: str = "bad", **override) -> Path:
    path = tmp / f"{name}.npz"
    np.savez(path, **_arrays(**override))
    return path


def _load_bad(**override) -> Callable[[Path], object]:
    return lambda tmp: load_pack(_pack(tmp, **override))


def _domain(name: str, *, per_class: int = 10, size: int = 8, labels=None) -> Domain:
    """12 classes (4 train / 4 val / 4 test) of ``per_class`` images: 40% labeled."""
    rng = np.random.default_rng(len(name))
    images = rng.integers(0, 256, (12 * per_class, size, size, 3), dtype=np.uint8)
    return Domain(
        name,
        images,
        np.repeat(np.arange(12), per_class) if labels is None else labels,
        [f"{name}_c{c}" for c in range(12)],
        np.repeat(["train", "val", "test"], 4),
    )


def _bench(ood: list[Domain] | None = None, **kw):
    """A benchmark of one tiny in-memory domain (and one OOD source unless ``ood`` given)."""
    settings = dict(
        n_way=3, n_shot=1, n_query=2, n_unlabeled=2, n_ood=2,
        tasks_per_domain=2, n_val_episodes=1, n_test_episodes=1,
    )  # fmt: skip
    settings.update(kw)
    oods = [_domain("o1")] if ood is None else ood
    return sets_benchmark(loaded=([_domain("d0")], oods), **settings)


def _image(path: Path, seed: int = 0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    Image.fromarray(rng.integers(0, 256, (10, 12, 3), dtype=np.uint8)).save(path)


def _image_folder(base: Path, classes: dict[str, int]) -> Path:
    for k, (name, n) in enumerate(classes.items()):
        (base / name).mkdir(parents=True, exist_ok=True)
        for i in range(n):
            _image(base / name / f"{i:02d}.png", 10 * k + i)
    return base


def _cub(tmp: Path, classes: dict[str, int]) -> Path:
    """A tiny CUB tree ``<tmp>/cub/CUB_200_2011/images/<class>/...``; returns ``<tmp>/cub``."""
    _image_folder(tmp / "cub" / "CUB_200_2011" / "images", classes)
    return tmp / "cub"


def _load_cub(tmp: Path, **kw):
    return load_paper_domain("cub", tmp, image_size=8, cache_dir=tmp / "cache", **kw)


def _paper_split_names_missing_class(tmp: Path):
    ds = _cub(tmp, {"001.A": 2, "002.B": 2})
    (ds / "splits").mkdir()
    (ds / "splits" / "train.txt").write_text("001.A\n")
    (ds / "splits" / "val.txt").write_text("002.B\n")
    (ds / "splits" / "test.txt").write_text("003.Missing\n")
    return _load_cub(tmp)


def _paper_corrupt_image(tmp: Path):
    ds = _cub(tmp, {"001.A": 2, "002.B": 2})
    (ds / "CUB_200_2011" / "images" / "002.B" / "broken.jpg").write_bytes(b"\xff\xd8\xffjunk")
    return _load_cub(tmp)


def _folder_corrupt_image(tmp: Path):
    folder = _image_folder(tmp / "imgs", {"cat": 2, "dog": 2})
    (folder / "dog" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\nnot a png")
    return build_pack_from_folder(folder, tmp / "out.npz", image_size=8, n_way=None)


def _stream_unreadable_images(tmp: Path):
    from avalanche_sets.data.stream_folder import prepare_stream

    a = _image_folder(tmp / "a", {f"c{i}": 2 for i in range(6)})
    b = _image_folder(tmp / "b", {f"c{i}": 2 for i in range(6)})
    (a / "c0" / "broken.png").write_bytes(b"not a png")
    (b / "c2" / "bad.png").write_bytes(b"not a png")
    return prepare_stream(tmp / "out", [str(a), str(b)], [], image_size=8, n_way=2,
                          split=(2, 2, 2), target=run_target("cpu"))  # fmt: skip


def _pack_class_too_small(tmp: Path):
    labels = np.repeat(np.arange(6), [10, 10, 10, 10, 10, 3])
    _pack(
        tmp,
        "tiny",
        images=np.zeros((labels.size, 8, 8, 3), np.uint8),
        labels=labels,
        class_names=np.array(list("abcdef")),
        class_split=np.array(["train"] * 6),
    )
    return sets_benchmark(
        "packs", root=tmp, domains=["tiny"], ood=[], n_way=2, n_shot=1, n_query=2,
        n_unlabeled=2, n_ood=0, tasks_per_domain=1,
    )  # fmt: skip


def _two_packs_with_small_classes(tmp: Path):
    """Two domains with a class too small for the episode, and one without: all named at once."""
    labels = np.repeat(np.arange(9), [3] + [10] * 8)
    for name in ("tiny", "wee", "fine"):
        _pack(
            tmp, name, images=np.zeros((labels.size, 8, 8, 3), np.uint8), labels=labels,
            class_names=np.array(list("abcdefghi")),
            class_split=np.array(["train"] * 3 + ["val"] * 3 + ["test"] * 3),
        )  # fmt: skip
        labels = np.repeat(np.arange(9), 10) if name == "wee" else labels
    return sets_benchmark(
        "packs", root=tmp, domains=["tiny", "wee", "fine"], ood=[], n_way=2, n_shot=1,
        n_query=2, n_unlabeled=2, n_ood=0, tasks_per_domain=1,
    )  # fmt: skip


def _packs_folder(tmp: Path, names: list[str]) -> Path:
    for n in names:
        _pack(tmp, n)
    return tmp


def _order_strategy(**kw):
    from avalanche.training.plugins import EvaluationPlugin

    from avalanche_sets.order import OrderStrategy

    return OrderStrategy(evaluator=EvaluationPlugin(), **kw)


def _template_with(*plugins):
    """An episodic template with these plugins (ORDER's plugins used alone)."""
    import torch

    from avalanche_sets.models.backbone import ConvBackbone
    from avalanche_sets.models.episodic import PrototypicalModel
    from avalanche_sets.training import EpisodicTemplate, silent_evaluator

    model = PrototypicalModel(ConvBackbone(n_blocks=2, width=4, image_size=16))
    return EpisodicTemplate(model=model, optimizer=torch.optim.Adam(model.parameters()),
                            plugins=list(plugins), evaluator=silent_evaluator())  # fmt: skip


def _mi_alone(tmp: Path):
    from avalanche_sets.order import MIRegularizationPlugin

    return _template_with(MIRegularizationPlugin())


def _ot_next_to_der(tmp: Path):
    from avalanche_sets.baselines.plugins.der import DERPlugin
    from avalanche_sets.order import OTFeatureLossPlugin

    return _template_with(DERPlugin(), OTFeatureLossPlugin())


def _sweep_jobs_zero(tmp: Path):
    from avalanche_sets.runs.sweep import run_sweep

    return run_sweep([], jobs=0)


def _run_with_other_seeds_benchmark(tmp: Path):
    from types import SimpleNamespace

    from avalanche_sets.runs.experiment import run_experiment

    return run_experiment("protonet", _quick(), seed=0, out_root=tmp,
                          benchmark=SimpleNamespace(seed=1))  # fmt: skip


def _order_with_mskm_head(tmp: Path):
    from avalanche_sets.models import cpu_backbone
    from avalanche_sets.models.episodic import PrototypicalModel

    return _order_strategy(model=PrototypicalModel(cpu_backbone(), refine="mskm"))


def _quick():
    return resolve_preset("quick", width=4)


# ----------------------------------------------------------------------------- the table
@dataclass(frozen=True)
class Case:
    id: str
    build: Callable[[Path], object]
    exc: type[BaseException]
    message: str  # regex searched in str(exception)


FIX_DROP = (
    r"fix: lower n_shot/n_query/n_unlabeled, or leave these classes out with --set "
    r"small_classes=drop \(small_classes='drop' in Python"
)

CASES = [
    # --- domain packs (.npz): load_pack, load_packs, sets_benchmark("packs")
    Case("pack-file-missing", lambda t: load_pack(t / "absent.npz"), FileNotFoundError,
         r"domain pack .*absent\.npz not found; expected a \.npz file with keys images"),
    Case("pack-folder-missing", lambda t: sets_benchmark("packs", root=t / "nope"),
         FileNotFoundError, r"domain pack folder .*nope not found; expected a folder of"),
    Case("pack-not-npz",
         lambda t: (t / "junk.npz").write_bytes(b"not a zip") and load_pack(t / "junk.npz"),
         ValueError, r"junk\.npz: not a readable \.npz file"),
    Case("pack-pickled-object-array",
         _load_bad(class_names=np.array(["a", "b", "c"], dtype=object)), ValueError,
         r"bad\.npz: key 'class_names' is stored as a pickled object array.*unicode array"),
    Case("pack-missing-key", _load_bad(class_split=None), ValueError,
         r"bad\.npz: missing key\(s\) \['class_split'\].*fix: add the missing key.*save_pack"),
    Case("pack-images-float", _load_bad(images=np.zeros((12, 8, 8, 3), np.float64)),
         ValueError, r"bad\.npz: key 'images' must be uint8 \[N, H, W, 3\], got dtype float64; "
         r"fix: .*np\.round\(images \* 255\).*astype\(np\.uint8\)"),
    Case("pack-images-int32", _load_bad(images=np.zeros((12, 8, 8, 3), np.int32)),
         ValueError, r"'images' must be uint8.*got dtype int32; fix: .*astype\(np\.uint8\)"),
    Case("pack-images-grey", _load_bad(images=np.zeros((12, 8, 8), np.uint8)), ValueError,
         r"'images' must be uint8 \[N, H, W, 3\] \(RGB, channels last\), got shape \(12, 8, 8\)"
         r"; fix: grey images.*np\.repeat"),
    Case("pack-images-rgba", _load_bad(images=np.zeros((12, 8, 8, 4), np.uint8)), ValueError,
         r"got shape \(12, 8, 8, 4\); fix: RGBA images: drop the alpha channel"),
    Case("pack-images-channels-first", _load_bad(images=np.zeros((12, 3, 8, 8), np.uint8)),
         ValueError, r"got shape \(12, 3, 8, 8\); fix: channels-first.*transpose\(0, 2, 3, 1\)"),
    Case("pack-images-not-square", _load_bad(images=np.zeros((12, 8, 6, 3), np.uint8)),
         ValueError, r"'images' must be square \(H == W\).*fix: centre-crop"),
    Case("pack-images-empty",
         _load_bad(images=np.zeros((0, 8, 8, 3), np.uint8), labels=np.zeros(0, np.int64)),
         ValueError, r"'images' must be a non-empty .* got N = 0"),
    Case("pack-labels-float", _load_bad(labels=np.repeat(np.arange(3.0), 4)), ValueError,
         r"bad\.npz: key 'labels' must be an integer array \[N\], got dtype float64; "
         r"fix: .*labels\.astype\(np\.int64\)"),
    Case("pack-labels-negative", _load_bad(labels=np.array([-1] + [0] * 11)), ValueError,
         r"'labels' must be class ids in 0\.\.2 .*got values -1\.\.0 \(1 label\(s\) out of "
         r"range, the first at image 0: -1\); fix: labels index class_names"),
    Case("pack-labels-out-of-range", _load_bad(labels=np.repeat(np.arange(3), 4) + 1),
         ValueError, r"'labels' must be class ids in 0\.\.2 \(C = 3 class_names\), got values "
         r"1\.\.3 \(4 label\(s\) out of range, the first at image 8: 3\)"),
    Case("pack-labels-length", _load_bad(labels=np.arange(11) % 3), ValueError,
         r"'labels' must be shape \[12\] \(one per image\), got shape \(11,\)"),
    Case("pack-class-names-duplicate", _load_bad(class_names=np.array(["a", "a", "b"])),
         ValueError, r"'class_names' must be unique names, got duplicates \['a'\]; fix: rename"),
    Case("pack-class-split-value",
         _load_bad(class_split=np.array(["train", "valid", "test"])), ValueError,
         r"'class_split' must be values in \['train', 'val', 'test'\], got \['valid'\]; "
         r"fix: .*'valid' -> 'val'"),
    Case("pack-class-split-length", _load_bad(class_split=np.array(["train", "val"])),
         ValueError, r"'class_split' must be shape \[3\] \(one per class\), got shape \(2,\)"),
    Case("pack-name-unknown",
         lambda t: sets_benchmark("packs", root=_packs_folder(t, ["gtsrb"]), domains=["gtsrbb"],
                                  ood=[], n_ood=0),
         ValueError, r"unknown domain name\(s\) \['gtsrbb'\] for packs in .* \(did you mean "
         r"'gtsrb'\?\)"),
    Case("pack-class-too-small", _pack_class_too_small, ValueError,
         r"1 of 6 train classes of domain 'tiny' \(pack .*tiny\.npz\) are too small for "
         r"n_shot \+ n_query = 3 labeled and n_unlabeled = 2 unlabeled images per class: 1 "
         r"class\(es\) \('f'; 3 images: 1 labeled \+ 2 unlabeled\) have 1 labeled of the 3 "
         r"needed; with labeled_fraction = 0\.4 a class needs at least 7 images; no shape with "
         r"n_shot >= 1 and n_query >= 1 fits all 6 classes: .*; " + FIX_DROP
         + r"; with a warning; 5 of 6 would remain\)(\n|$)"),
    Case("packs-small-classes-in-several-domains", _two_packs_with_small_classes, ValueError,
         r"the episodes of 2 of the 3 stream domain\(s\) cannot be drawn \('tiny', 'wee'\), every "
         r"one named here:\n  'tiny' train: 1 of 3 train classes .*\n  'wee' train: .*"
         r"leave these classes out with --set small_classes=drop.*\nor run without them: --set "
         r"\"domains=\['fine'\]\" \(domains=\['fine'\] in Python\)$"),
    Case("packs-order-needs-six",
         lambda t: sets_benchmark("packs", root=_packs_folder(t, ["a", "b"]), ood=[], n_ood=0,
                                  order=2),
         ValueError, r"order=2 permutes six domains, but the packs in .* hold 2 "
         r"in-distribution packs \['a', 'b'\]; fix: pass domains="),
    # --- in-memory domains
    Case("domain-images-dtype",
         lambda t: Domain("d", np.zeros((4, 8, 8, 3)), np.zeros(4, int), ["a"], ["train"]),
         ValueError, r"domain 'd': images must be a uint8 array \[N, H, W, 3\], got float64 "
         r"\(4, 8, 8, 3\); fix: store 8-bit RGB"),
    Case("domain-labels-float",
         lambda t: _domain("d", labels=np.repeat(np.arange(12.0), 10)), ValueError,
         r"domain 'd': labels must be integer class ids, got dtype float64; fix: "
         r"labels\.astype\(np\.int64\)"),
    Case("domain-labels-out-of-range",
         lambda t: _domain("d", labels=np.repeat(np.arange(1, 13), 10)), ValueError,
         r"domain 'd': labels must lie in 0\.\.11, found 1\.\.12; fix: labels index class_names"),
    # --- image folders: build_pack_from_folder (`avalanche-sets prepare pack`)
    Case("folder-missing", lambda t: build_pack_from_folder(t / "nope", t / "o.npz"),
         FileNotFoundError, r"image folder .*nope not found; expected <folder>/<class name>/"),
    Case("folder-no-classes",
         lambda t: (t / "empty").mkdir() or build_pack_from_folder(t / "empty", t / "o.npz"),
         ValueError, r"image folder .*empty has no class sub-folders; expected <folder>/"),
    Case("folder-corrupt-image", _folder_corrupt_image, CorruptImageError,
         r"cannot read image file .*dog.broken\.png: .*fix: replace the file with a valid image "
         r"or delete it"),
    Case("stream-unreadable-images", _stream_unreadable_images, UnreadableImagesError,
         r"cannot read 2 image files: .*a.c0.broken\.png \(.*\); .*b.c2.bad\.png \(.*\); "
         r"fix: replace them with valid images or delete them, or leave them out with "
         r"--skip-unreadable"),
    # --- the paper's datasets: load_paper_domain, sets_benchmark("paper")
    Case("paper-root-missing", lambda t: _load_cub(t / "nowhere"), DatasetNotFoundError,
         r"(?s)CUB.*not found: the root folder does not exist \[path: .*nowhere.*\]\..*"
         r"Expected layout:.*Where to get it:"),
    Case("paper-dataset-missing", lambda t: _load_cub(t), DatasetNotFoundError,
         r"(?s)not found: no folder cub / .* under .*Expected layout:.*Where to get it:.*"
         r"Nothing is downloaded"),
    Case("paper-unknown-name", lambda t: load_paper_domain("cubb", t), ValueError,
         r"unknown paper dataset 'cubb' \(did you mean 'cub'\?\)"),
    Case("paper-split-lists-missing-class", _paper_split_names_missing_class,
         DatasetNotFoundError,
         r"is malformed: split file names 1 class\(es\) not found in the data, e\.g\. "
         r"\['003\.Missing'\].*fix: restore the missing class folder.*\[path: .*test\.txt\]"),
    Case("paper-class-without-images", lambda t: _load_cub(_cub(t, {"001.A": 2, "002.B": 0})),
         DatasetNotFoundError,
         r"is malformed: 1 class\(es\) have no images, e\.g\. \['002\.B'\]; fix: restore"),
    Case("paper-corrupt-image", _paper_corrupt_image, CorruptImageError,
         r"cannot read image file .*002\.B.broken\.jpg.*fix: replace the file"),
    # --- impossible episode settings: EpisodeConfig, EpisodeSampler, sets_benchmark
    Case("episode-n-way-below-2", lambda t: EpisodeConfig(n_way=1), ValueError,
         r"n_way must be at least 2 .*got 1; fix: pass n_way=2 or more"),
    Case("episode-n-shot-zero", lambda t: _bench(n_shot=0), ValueError,
         r"EpisodeConfig\.n_shot \(labeled support images per class\) must be a positive "
         r"integer, got 0; fix: pass n_shot=1 or more"),
    Case("episode-n-query-zero", lambda t: _bench(n_query=0), ValueError,
         r"EpisodeConfig\.n_query \(query images per class\) must be a positive integer, got 0"),
    Case("episode-n-ood-negative", lambda t: _bench(n_ood=-1), ValueError,
         r"EpisodeConfig\.n_ood \(unlabeled out-of-distribution images per episode\) must be a "
         r"non-negative integer, got -1; fix: pass n_ood=0 or more"),
    Case("episode-n-unlabeled-negative", lambda t: _bench(n_unlabeled=-2), ValueError,
         r"EpisodeConfig\.n_unlabeled .* must be a non-negative integer, got -2"),
    Case("episode-size-not-integer", lambda t: _bench(n_shot=1.5), ValueError,
         r"EpisodeConfig\.n_shot .* must be a positive integer, got 1\.5"),
    Case("episode-size-bool", lambda t: EpisodeConfig(n_query=True), ValueError,
         r"EpisodeConfig\.n_query .* must be a positive integer, got True"),
    Case("episode-n-way-too-large", lambda t: _bench(n_way=5), ValueError,
         r"domain 'd0' has 4 usable train classes, fewer than n_way = 5; fix: lower n_way to "
         r"at most 4 or use a domain with more train classes"),
    Case("episode-class-too-small", lambda t: _bench(n_query=4), ValueError,
         r"4 of 4 train classes of domain 'd0' are too small for n_shot \+ n_query = 5 labeled"
         r".*4 class\(es\) \('d0_c0', .*; 10 images: 4 labeled \+ 6 unlabeled\) have 4 "
         r"labeled of the 5 needed; .*a class needs at least 12 images; shapes that fit all 4 "
         r"classes: n_shot \+ n_query <= 4 \(e\.g\. n_shot=1, n_query=3\) with "
         r"n_unlabeled = 2; " + FIX_DROP),
    Case("episode-classes-all-dropped", lambda t: _bench(n_query=4, small_classes="drop"),
         ValueError,
         r"domain 'd0' has 0 usable train classes after leaving out 4 too small ones, fewer "
         r"than n_way = 3: .*have 4 labeled of the 5 needed.*shapes that fit n_way = 3 "
         r"classes: n_shot \+ n_query <= 4 .*; fix: lower n_shot/n_query/n_unlabeled(\n|$)"),
    Case("episode-too-few-unlabeled", lambda t: _bench(n_unlabeled=7), ValueError,
         r"too small for .* n_unlabeled = 7 unlabeled images per class: 4 class\(es\) .*have "
         r"6 unlabeled of the 7 needed; .*shapes that fit all 4 classes: n_unlabeled <= 6 "
         r"with n_shot \+ n_query = 3; " + FIX_DROP),
    Case("episode-ood-without-sources", lambda t: _bench(ood=[]), ValueError,
         r"n_ood = 2 OOD images per episode need at least one OOD source, but none was given; "
         r"fix: pass OOD sources \(sets_benchmark\(ood=\[\.\.\.\]\).*or set n_ood = 0"),
    Case("episode-ood-source-too-small", lambda t: _bench(n_ood=41), ValueError,
         r"OOD source 'o1' has 40 images in its train classes, fewer than the 41 an episode may "
         r"draw from it .*fix: lower n_ood"),
    Case("episode-ood-image-size", lambda t: _bench(ood=[_domain("o1", size=6)]), ValueError,
         r"OOD source 'o1' has 6 px images but domain 'd0' has 8 px; fix: load both at one size"),
    Case("episode-small-classes-option", lambda t: _bench(small_classes="skip"), ValueError,
         r"small_classes must be one of \('error', 'drop'\), got 'skip'"),
    Case("episode-split-unknown", lambda t: EpisodeSampler(_domain("d"), split="valid"),
         ValueError, r"split must be one of \('train', 'val', 'test'\), got 'valid'"),
    Case("episode-count-zero", lambda t: _bench(tasks_per_domain=0), ValueError,
         r"tasks_per_domain must be a positive integer, got 0"),
    # --- benchmark sources, names and orders: sets_benchmark / load_source
    Case("bench-unknown-source", lambda t: sets_benchmark("synthetics"), ValueError,
         r"unknown source 'synthetics' \(did you mean 'synthetic'\?\); choose one of"),
    Case("bench-root-missing", lambda t: sets_benchmark("paper"), ValueError,
         r"source='paper' needs root=<folder holding the paper's datasets>"),
    Case("bench-unknown-domain", lambda t: sets_benchmark("synthetic", domains=["shapez"]),
         ValueError, r"unknown domain name\(s\) \['shapez'\] for synthetic \(did you mean "
         r"'shapes'\?\); valid: "),
    Case("bench-order-out-of-range", lambda t: sets_benchmark("synthetic", order=4),
         ValueError, r"unknown domain order 4; the paper defines orders \[1, 2, 3\]; fix: pass "
         r"order=1, 2 or 3, or domains=\[\.\.\.\]"),
    Case("bench-order-and-domains",
         lambda t: sets_benchmark("synthetic", order=2, domains=["shapes", "strokes"]),
         ValueError, r"order=2 and domains=\['shapes', 'strokes'\] both set the domain order; "
         r"fix: pass only one of them"),
    Case("bench-custom-order-repeats",
         lambda t: sets_benchmark("synthetic", domains=["shapes", "strokes", "shapes"]),
         ValueError, r"\['shapes'\] appear\(s\) twice in the domain order .*fix: a custom order "
         r"is a permutation of distinct names"),
    Case("bench-ood-repeats", lambda t: sets_benchmark("synthetic", ood=["rings", "rings"]),
         ValueError, r"\['rings'\] appear\(s\) twice in the OOD sources \['rings', 'rings'\]; "
         r"fix: OOD sources are mixed equally, name each once"),
    Case("bench-domain-also-ood",
         lambda t: sets_benchmark("synthetic", domains=["shapes"], ood=["shapes"]), ValueError,
         r"\['shapes'\] cannot be both a stream domain and an OOD source; fix: remove it"),
    Case("bench-domains-not-a-list", lambda t: sets_benchmark("synthetic", domains="shapes"),
         TypeError, r"domains and ood are lists of names; fix: pass domains=\['a', 'b'\]"),
    # --- methods: build_strategy / check_method (CLI --method, --strategy-set)
    Case("method-unknown", lambda t: build_strategy("ordr", _quick()), ValueError,
         r"unknown method 'ordr' \(did you mean 'order'\?\); choose one of \['order', "),
    Case("method-unknown-option", lambda t: build_strategy("order", _quick(), lamda=1e-4),
         TypeError, r"method 'order' \(OrderStrategy\) does not accept option\(s\) \['lamda'\] "
         r"\(did you mean 'lam'\?\); fix: use its valid options "),
    Case("method-option-wrong-type",
         lambda t: build_strategy("order", _quick(), use_ot="false"), TypeError,
         r"method 'order': option 'use_ot' takes a bool, got 'false' \(str\); fix: use_ot=true "
         r"or use_ot=false on the command line \(also yes/no, 1/0\), use_ot=True or "
         r"use_ot=False in Python"),
    Case("method-option-bad-text",
         lambda t: parse_options("semi-mer", {"across_batch_rate": "high"}), TypeError,
         r"method 'semi-mer': option 'across_batch_rate' takes a float, got 'high'; fix: give "
         r"across_batch_rate a float, e\.g\. across_batch_rate=1\.0; its options: "
         r"\[across_batch_rate: float = 1\.0, "),
    Case("method-option-not-a-value",
         lambda t: parse_options("order", {"ot_solver": "exactt"}), TypeError,
         r"method 'order': option 'ot_solver' takes one of 'exact', 'sinkhorn', 'cvxpylayers', "
         r"got 'exactt' \(did you mean 'exact'\?\); fix: give ot_solver one of "),
    Case("method-option-run-argument",
         lambda t: parse_options("order", {"device": "cuda"}), TypeError,
         r"method 'order': 'device' is an argument the run sets, not a strategy option: a preset "
         r"setting: --set device=\.\.\.; fix: drop --strategy-set device=\.\.\.; its options: "
         r"\[beta: float"),
    Case("preset-root-without-packs", lambda t: root_source("quick", t), ValueError,
         r"--root .* holds no \.npz domain packs, and the quick preset generates its data \(source "
         r"'synthetic'\), so the folder would be read by nothing; fix: point --root at a folder "
         r"of packs"),
    Case("method-option-given-twice",
         lambda t: strategy_set_options(["beta=0.1", "beta=0.2"], ["order"]), ValueError,
         r"--strategy-set gives option 'beta' of method 'order' twice \(beta=0\.1 and "
         r"beta=0\.2\); fix: give it once"),
    Case("method-option-not-for-every-method",
         lambda t: strategy_set_options(["lam=0.1"], ["order", "mskm"]), ValueError,
         r"--strategy-set lam=0\.1 goes to every method, but \['mskm'\] take\(s\) no option "
         r"'lam'; fix: give it to the method\(s\) that take it: --strategy-set order:lam=0\.1"),
    Case("method-option-other-method",
         lambda t: strategy_set_options(["ordr:lam=0.1"], ["order", "mskm"]), ValueError,
         r"--strategy-set ordr:lam=0\.1: method 'ordr' is not run by this command \(did you "
         r"mean 'order'\?\); fix: name one of \['order', 'mskm'\], or give key=value to every "
         r"method"),
    Case("method-preset-not-a-config", lambda t: build_strategy("mskm", {"lr": 1e-3}),
         TypeError, r"a run is made of a RunConfig or a preset's name, got a dict; fix: "
         r"avalanche_sets\.presets\.resolve_preset"),
    Case("method-option-contradicts-ablation",
         lambda t: build_strategy("order-no-ot", _quick(), use_ot=True), ValueError,
         r"method 'order-no-ot' is ORDER with use_ot=False; the option use_ot=True contradicts "
         r"it; fix: use method 'order'"),
    Case("method-cvxpylayers-too-many-points",
         lambda t: check_method("order", _quick(), {"ot_solver": "cvxpylayers"}), ValueError,
         r"ot_solver='cvxpylayers' with ot_max_points=250 would build OT problems of up to "
         r"250x250 points.*fix: pass ot_max_points=100 or less, or ot_solver='exact'"),
    # --- ORDER's options: OrderStrategy (checked before anything is built)
    Case("order-mi-without-ood-split", lambda t: _order_strategy(use_ood_split=False),
         ValueError, r"use_mi=True needs use_ood_split=True"),
    Case("order-ot-without-replay", lambda t: _order_strategy(use_replay=False), ValueError,
         r"use_ot=True needs use_replay=True"),
    Case("order-plugin-without-partner", _mi_alone, ValueError,
         r"MIRegularizationPlugin needs OODSplitPlugin in the same strategy \(it separates U_id "
         r"from U_ood for the MI terms\), but the plugins are \['MIRegularizationPlugin'\]; fix: "
         r"add OODSplitPlugin\(\.\.\.\) to plugins, or use OrderStrategy"),
    Case("order-ot-with-another-memory", _ot_next_to_der, ValueError,
         r"OTFeatureLossPlugin needs FeatureReservoirReplayPlugin in the same strategy \(it "
         r"regularises the replayed tasks' features\), but the plugins are \['DERPlugin', "
         r"'OTFeatureLossPlugin'\]"),
    Case("order-unknown-solver", lambda t: _order_strategy(ot_solver="hungarian"), ValueError,
         r"unknown OT solver 'hungarian'; valid solvers are \['exact', 'sinkhorn', "
         r"'cvxpylayers'\]"),
    Case("order-topk-without-n-id", lambda t: _order_strategy(ood_rule="topk"), ValueError,
         r"rule='topk' needs n_id >= 0"),
    Case("order-mi-terms", lambda t: _order_strategy(mi_terms=("id", "xx")), ValueError,
         r"mi_terms must be a non-empty subset of \('id', 'ood'\)"),
    Case("order-negative-weight", lambda t: _order_strategy(lam=-1.0), ValueError,
         r"lam \(λ\) must be >= 0, got -1\.0"),
    Case("order-head-ignores-ood-split", _order_with_mskm_head, ValueError,
         r"the OOD split needs a head that weights the unlabeled images by it, but the model's "
         r"refinement \(refine='mskm'\) ignores unlabeled_weight, so U_ood would not be "
         r"filtered out of the prototypes; fix: use PrototypicalModel\(\.\.\., "
         r"refine='soft_kmeans'\), or turn the split off with use_ood_split=False, use_mi=False"),
    # --- runs: run_sweep, run_experiment
    Case("sweep-jobs", _sweep_jobs_zero, ValueError,
         r"jobs must be a positive number of parallel runs, got 0"),
    Case("run-benchmark-other-seed", _run_with_other_seeds_benchmark, ValueError,
         r"run_experiment\(seed=0\) was handed the benchmark of seed 1; fix: pass "
         r"build_benchmark\(preset, seed=seed\), or no benchmark"),
    # --- presets: resolve_preset (CLI --preset, --set, --source, --order, --root)
    Case("preset-unknown", lambda t: resolve_preset("quik"), ValueError,
         r"unknown preset 'quik' \(did you mean 'quick'\?\); choose one of \['converged', "
         r"'cpu', 'paper', 'quick'\]"),
    Case("preset-unknown-setting", lambda t: resolve_preset("quick", n_wya=3), ValueError,
         r"unknown preset setting\(s\) \['n_wya'\] \(did you mean 'n_way'\?\); valid settings: "),
    Case("preset-wrong-type", lambda t: resolve_preset("quick", n_shot="5"), ValueError,
         r"preset 'quick': setting 'n_shot' must be a positive integer, got '5' \(str\); fix: "
         r"e\.g\. n_shot=1"),
    Case("preset-wrong-value", lambda t: resolve_preset("cpu", lr=-1e-3), ValueError,
         r"preset 'cpu': setting 'lr' must be a positive number, got -0\.001"),
    Case("preset-grid-outside-sweep", lambda t: resolve_preset("quick", n_shot=(1, 5)),
         ValueError, r"setting 'n_shot' must be a positive integer, got \(1, 5\) \(tuple\).*a "
         r"comma-separated list is a grid: run it with `avalanche-sets sweep`"),
    Case("preset-bad-choice", lambda t: resolve_preset("quick", source="pack"), ValueError,
         r"setting 'source' must be one of \['synthetic', 'packs', 'paper'\], got 'pack' \(str\) "
         r"\(did you mean 'packs'\?\)"),
    Case("preset-order-and-domains",
         lambda t: resolve_preset("quick", order=2, domains=["shapes"]), ValueError,
         r"preset 'quick': order=2 and domains=\['shapes'\] both set the domain order; fix: "
         r"pass only one of them"),
    Case("preset-ood-empty", lambda t: resolve_preset("quick", ood=[]), ValueError,
         r"n_ood=20 OOD images per episode need OOD sources, but ood=\[\]; fix: set n_ood=0"),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_refused_with_a_named_error(case: Case, tmp_path: Path) -> None:
    with pytest.raises(case.exc) as err:
        case.build(tmp_path)
    assert err.type is case.exc or issubclass(err.type, case.exc)
    assert re.search(case.message, str(err.value)), (
        f"{case.id}: message does not match\n  pattern: {case.message}\n  got:     {err.value}"
    )


# ----------------------------------------------------------------------------- warnings
# Inputs that are accepted but lose something: never silently, always with a warning naming it.
@dataclass(frozen=True)
class WarnCase:
    id: str
    build: Callable[[Path], object]
    category: type[Warning]
    message: str


def _folder_with_empty_class(tmp: Path):
    folder = _image_folder(tmp / "imgs", {"cat": 2, "dog": 2, "emu": 0})
    return build_pack_from_folder(folder, tmp / "out.npz", image_size=8, n_way=None)


def _folder_with_text_file(tmp: Path):
    folder = _image_folder(tmp / "imgs", {"cat": 2, "dog": 2})
    (folder / "cat" / "notes.txt").write_text("not an image")
    return build_pack_from_folder(folder, tmp / "out.npz", image_size=8, n_way=None)


def _paper_split_leaves_out(tmp: Path):
    ds = _cub(tmp, {"001.A": 2, "002.B": 2, "003.C": 2, "004.D": 2})
    (ds / "splits").mkdir()
    for split, name in (("train", "001.A"), ("val", "002.B"), ("test", "003.C")):
        (ds / "splits" / f"{split}.txt").write_text(name + "\n")
    return _load_cub(tmp)


def _bench_drop():
    dom = _domain("d0")
    keep = np.concatenate([np.flatnonzero(dom.labels == 0)[:4], np.flatnonzero(dom.labels != 0)])
    small = Domain("d0", dom.images[keep], dom.labels[keep], dom.class_names, dom.class_split)
    return sets_benchmark(
        loaded=([small], []), n_way=2, n_shot=1, n_query=2, n_unlabeled=2, n_ood=0,
        tasks_per_domain=1, n_val_episodes=1, n_test_episodes=1, small_classes="drop",
    )  # fmt: skip


WARN_CASES = [
    WarnCase("warn-folder-class-without-images", _folder_with_empty_class, UserWarning,
             r"left out 1 class\(es\) with fewer than 1 images: 'emu' \(0\)"),
    WarnCase("warn-folder-non-image-file", _folder_with_text_file, UserWarning,
             r"ignored 1 file\(s\) that are not images of a class folder .*: cat/notes\.txt"),
    WarnCase("warn-small-classes-dropped", lambda t: _bench_drop(), UserWarning,
             r"1 of 4 train classes of domain 'd0' are too small .*they are left out"),
    WarnCase("warn-paper-class-in-no-split", _paper_split_leaves_out, PaperSplitWarning,
             r"1 class\(es\) found in .* are listed in none of .*splits.* and are left out, "
             r"e\.g\. \['004\.D'\]"),
]  # fmt: skip


@pytest.mark.parametrize("case", WARN_CASES, ids=[c.id for c in WARN_CASES])
def test_lossy_input_is_accepted_with_a_warning(case: WarnCase, tmp_path: Path) -> None:
    with pytest.warns(case.category, match=case.message):
        case.build(tmp_path)


# ----------------------------------------------------------------------------- consistency
def _catalogue() -> str:
    text = CATALOGUE.read_text(encoding="utf-8")
    assert text.startswith(SECTION), f"{CATALOGUE} does not start with {SECTION!r}"
    return text


def test_docs_catalogue_lists_every_case() -> None:
    catalogue = _catalogue()
    missing = [c.id for c in [*CASES, *WARN_CASES] if f"`{c.id}`" not in catalogue]
    assert not missing, f"docs/guide/bad-input.md's catalogue lacks the case(s) {missing}"


def test_case_ids_are_unique() -> None:
    ids = [c.id for c in [*CASES, *WARN_CASES]]
    assert len(ids) == len(set(ids))


def test_every_preset_setting_has_a_check() -> None:
    keys = {k for p in PRESETS.values() for k in p}
    assert keys <= set(PRESET_SCHEMA), sorted(keys - set(PRESET_SCHEMA))
    for name in PRESETS:  # the shipped presets pass their own checks
        resolve_preset(name)
