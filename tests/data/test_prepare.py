"""``prepare torchvision``: torchvision datasets (fabricated in their real layouts) to packs.

No network here and no real archives: every dataset is fabricated by
``tests/data/torchvision_layouts.py`` in the exact on-disk layout torchvision's class reads, and
read through that class. CIFAR-100, Omniglot, Flowers-102 and SVHN are md5-checked by
torchvision even with ``download=False``; fabricated files cannot match the official md5 sums,
so those four are read with ``skip_md5=True`` (the other six through the default path), and a
separate test checks that without it they fail with a message that says so.
"""

from __future__ import annotations

import json
import shlex
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from avalanche_sets.data.packs import load_pack, split_classes
from avalanche_sets.data.prepare import (
    DEFAULT_DOMAINS,
    TORCHVISION_SOURCES,
    DatasetNotFoundError,
    build_torchvision_pack,
    prepare_torchvision_stream,
)

sys.path.insert(0, str(Path(__file__).parent))
from torchvision_layouts import MAKERS  # noqa: E402

MD5_CHECKED = sorted(n for n, s in TORCHVISION_SOURCES.items() if s.md5_module)
SMALL = dict(n_way=2, min_images_per_class=3, max_images_per_class=5)


def _colour_of_each_class(path: Path) -> dict[str, np.ndarray]:
    z = np.load(path)
    return {
        str(name): z["images"][z["labels"] == c].reshape(-1, 3).mean(0)
        for c, name in enumerate(z["class_names"])
    }


def test_every_torchvision_dataset_has_a_fabricated_layout():
    assert sorted(MAKERS) == sorted(TORCHVISION_SOURCES)
    assert MD5_CHECKED == ["cifar100", "flowers102", "omniglot", "svhn"]


@pytest.mark.parametrize("name", sorted(TORCHVISION_SOURCES))
def test_each_layout_becomes_a_pack(name, tmp_path):
    # 10 classes of 6 images, class 3 with only 2 (< min 3): left out with a warning naming it.
    truth = MAKERS[name](tmp_path / "tv", 10, 6, {3: 2})
    out = tmp_path / f"{name}.npz"
    with pytest.warns(UserWarning, match=r"left out 1 class.*\(2\)"):
        entry = build_torchvision_pack(
            name, tmp_path / "tv", out, ood=False, skip_md5=name in MD5_CHECKED, **SMALL
        )
    z = np.load(out)
    names = [str(n) for n in z["class_names"]]
    dropped = sorted(set(truth) - set(names))
    assert len(dropped) == 1 and len(names) == 9
    assert names == sorted(names)
    assert z["images"].dtype == np.uint8 and z["images"].shape == (45, 32, 32, 3)
    assert np.array_equal(z["labels"], np.repeat(np.arange(9), 5))  # max 5 of 6, sorted
    assert np.array_equal(z["class_split"], split_classes(9, (0.6, 0.2, 0.2), 0))
    assert entry["split"] == {"train": 5, "val": 2, "test": 2} and entry["classes_left_out"] == 1
    # Images stay with their labels: every class has its own colour (JPEG: within 6 levels).
    for cls, mean in _colour_of_each_class(out).items():
        assert np.abs(mean - np.asarray(truth[cls])).max() < 6, cls
    assert load_pack(out).n_classes == 9  # a valid pack


def test_same_seed_same_pack_other_seed_other_draw(tmp_path):
    MAKERS["cifar100"](tmp_path / "tv", 10, 8)
    packs = {}
    for tag, seed in (("a", 0), ("b", 0), ("c", 1)):
        build_torchvision_pack("cifar100", tmp_path / "tv", tmp_path / f"{tag}.npz", ood=False,
                               seed=seed, skip_md5=True, **SMALL)  # fmt: skip
        packs[tag] = np.load(tmp_path / f"{tag}.npz")
    for key in ("images", "labels", "class_names", "class_split"):
        assert np.array_equal(packs["a"][key], packs["b"][key])
    assert not np.array_equal(packs["a"]["class_split"], packs["c"]["class_split"])


@pytest.mark.parametrize("name", MD5_CHECKED)
def test_md5_checked_datasets_refuse_fabricated_files_unless_skip_md5(name, tmp_path):
    import importlib

    module = importlib.import_module(f"torchvision.datasets.{TORCHVISION_SOURCES[name].md5_module}")
    original = module.check_integrity
    MAKERS[name](tmp_path / "tv", 10, 6)
    with pytest.raises(ValueError, match=r"md5 of .*--download .*--skip-md5"):
        build_torchvision_pack(name, tmp_path / "tv", tmp_path / "x.npz", ood=True, **SMALL)
    build_torchvision_pack(name, tmp_path / "tv", tmp_path / "x.npz", ood=True, skip_md5=True,
                           **SMALL)  # fmt: skip
    assert module.check_integrity is original  # the md5 check is back for everyone else


@pytest.mark.parametrize("name, pattern", [("gtsrb", "*/00002/00000_00001.ppm"),
                                           ("omniglot", "*/Alphabet_1/character02/*_02.png")])  # fmt: skip
def test_an_unreadable_image_names_its_file(name, pattern, tmp_path):
    MAKERS[name](tmp_path / "tv", 10, 4)
    (bad,) = (tmp_path / "tv").rglob(pattern)
    bad.write_bytes(b"not an image")
    with pytest.raises(ValueError, match=rf"cannot decode image .*{bad.name}.*replace or delete"):
        build_torchvision_pack(name, tmp_path / "tv", tmp_path / "x.npz", ood=True, skip_md5=True,
                               **SMALL)  # fmt: skip
    assert not (tmp_path / "x.npz").exists()


def test_missing_dataset_names_the_path_torchvision_reads_and_download(tmp_path):
    (tmp_path / "tv").mkdir()
    with pytest.raises(DatasetNotFoundError) as err:
        prepare_torchvision_stream(tmp_path / "tv", tmp_path / "out")
    msg = str(err.value)
    assert "CIFAR-100 not found" in msg and "--download" in msg
    assert str(tmp_path / "tv" / "cifar-100-python" / "train") in msg
    # Every missing dataset is named at once, before anything is read or written.
    MAKERS["dtd"](tmp_path / "tv", 10, 4)
    with pytest.raises(DatasetNotFoundError) as err:
        prepare_torchvision_stream(tmp_path / "tv", tmp_path / "out")
    msg = str(err.value)
    assert "DTD" not in msg and msg.count(" not found: ") == 6
    assert str(tmp_path / "tv" / "omniglot-py" / "images_background") in msg
    assert str(tmp_path / "tv" / "train_32x32.mat") in msg
    assert not (tmp_path / "out").exists()


def test_a_stream_domain_with_too_few_classes_fails_before_reading(tmp_path):
    # SVHN has 10 classes: 6/2/2 cannot give 5-way val/test episodes. The root is empty, so
    # reaching the data would say "not found" instead.
    with pytest.raises(ValueError, match=r"svhn: 10 classes .* split 6/2/2 .* fewer than 5 .*"
                                         r"\['val', 'test'\].*--ood"):  # fmt: skip
        prepare_torchvision_stream(tmp_path, tmp_path / "out", domains=["svhn", "dtd"], ood=[])


def test_too_few_classes_on_disk_names_the_numbers(tmp_path):
    MAKERS["dtd"](tmp_path / "tv", 10, 4)  # full DTD has 47 classes; this copy 10
    with pytest.raises(ValueError, match=r"dtd: 10 classes with >= 3 images split 6/2/2 "
                                         r"\(train/val/test.*fewer than 5"):  # fmt: skip
        prepare_torchvision_stream(tmp_path / "tv", tmp_path / "out", domains=["dtd"], ood=[],
                                   min_images_per_class=3)  # fmt: skip
    assert not list((tmp_path / "out").glob("*.npz"))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(domains=["cifar10"]), r"unknown torchvision dataset 'cifar10' \(did you mean "),
        (dict(domains=["dtd", "gtsrb"], ood=["dtd"]), r"\['dtd'\] named twice"),
        (dict(domains=[]), "at least one domain"),
        (dict(download=True, skip_md5=True), "only one of them"),
        (dict(max_images_per_class=5, min_images_per_class=10), "max_images_per_class=5 <"),
        (dict(n_way=1), "n_way must be an integer >= 2"),
    ],
)
def test_bad_settings_fail_early(kwargs, match, tmp_path):
    with pytest.raises(ValueError, match=match):
        prepare_torchvision_stream(tmp_path, tmp_path / "out", **kwargs)


def test_an_output_folder_with_other_packs_is_refused(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "old.npz").write_bytes(b"")
    with pytest.raises(ValueError, match=r"already holds other packs \['old.npz'\]"):
        prepare_torchvision_stream(tmp_path, tmp_path / "out", domains=["dtd"], ood=[])


def test_cli_prepares_a_stream_that_runs(tmp_path, capsys):
    from avalanche_sets.cli import main

    tv = tmp_path / "tv"
    ood = ["svhn", "eurosat"]
    for name in (*DEFAULT_DOMAINS, *ood):
        MAKERS[name](tv, 10, 5)
    out = tmp_path / "packs"
    argv = ["prepare", "torchvision", "--root", str(tv), "--out", str(out), "--ood", *ood,
            "--n-way", "2", "--min-per-class", "3", "--max-per-class", "5", "--skip-md5"]  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing left out here
        assert main(argv) == 0
    printed = capsys.readouterr().out
    assert f"run on it: avalanche-sets run --preset cpu --root {out}" in printed
    files = sorted(p.name for p in out.iterdir())
    assert files == sorted(
        ["README.md", "manifest.json", *(f"{n}.npz" for n in DEFAULT_DOMAINS),
         "ood_svhn.npz", "ood_eurosat.npz"]
    )  # fmt: skip
    manifest = json.loads((out / "manifest.json").read_text())
    assert [e["dataset"] for e in manifest["packs"]] == [*DEFAULT_DOMAINS, *ood]
    assert [e["role"] for e in manifest["packs"]] == ["stream"] * 6 + ["ood"] * 2
    assert manifest["settings"]["root"] == str(tv) and "--skip-md5" in manifest["command"]
    assert all(e["images"] == 50 and e["classes"] == 10 for e in manifest["packs"])
    assert (
        "| `ood_svhn.npz` | ood | SVHN | 10 | 50 | 5/5/5 | 6/2/2 |"
        in (out / "README.md").read_text()
    )

    # The run command the manifest gives, on a tiny budget, in the prepared stream order.
    run_argv = shlex.split(manifest["run_command"])
    assert run_argv == ["avalanche-sets", "run", "--preset", "cpu", "--root", str(out),
                        "--set", f"domains={list(DEFAULT_DOMAINS)!r}"]  # fmt: skip
    runs = tmp_path / "runs"
    tiny = ["n_way=2", "n_shot=1", "n_query=1", "n_unlabeled=1", "n_ood=2", "tasks_per_domain=2",
            "n_test_episodes=2", "interim_test_episodes=1", "width=4",
            "eval_mb_size=2"]  # fmt: skip
    argv = [*run_argv[1:], "--out", str(runs), "--seeds", "0", "--loggers",
            *[a for s in tiny for a in ("--set", s)]]  # fmt: skip
    assert main(argv) == 0
    (result,) = runs.rglob("result.json")
    record = json.loads(result.read_text())
    assert record["result"]["domains"] == list(DEFAULT_DOMAINS)
    assert np.asarray(record["result"]["matrix"]).shape == (6, 6)
