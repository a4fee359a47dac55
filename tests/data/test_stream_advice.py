"""``prepare stream`` advises what lets runs use a domain whose classes are too small: the
episode sizes its classes fit (with the images they have), and fewer ways only where that helps.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

from avalanche_sets.cli import main
from avalanche_sets.data.splits import fitting_episode, min_class_images
from avalanche_sets.data.stream_folder import _smaller_episodes
from avalanche_sets.presets import run_target

sys.path.insert(0, str(Path(__file__).parent))
from image_folders import image_folder  # noqa: E402


@pytest.mark.parametrize("n_way", [5, 2])
def test_a_domain_of_small_classes_is_advised_the_episodes_that_fit_not_fewer_ways(
    tmp_path, capsys, n_way
):
    """27 classes of 6 images (the cpu preset's episodes need 16): 6 images are 2 labeled and
    4 unlabeled, so 1 shot, 1 query and 4 unlabeled fit; no number of ways helps."""
    image_folder(tmp_path / "big", 27, per_class=16, seed=0)
    image_folder(tmp_path / "emoji", 27, per_class=6, seed=2)
    out = tmp_path / "packs"
    argv = ["prepare", "stream", "--out", str(out), "--size", "8", "--split", "15,6,6",
            "--n-way", str(n_way), "--domains", str(tmp_path / "big"), str(tmp_path / "emoji"),
            "--ood", "synthetic:rings"]  # fmt: skip
    with pytest.warns(UserWarning):  # emoji's classes are named as too small
        assert main(argv) == 0
    note = json.loads((out / "manifest.json").read_text())["run_command_note"]
    assert note in capsys.readouterr().out
    assert f"'emoji': the smallest of its {n_way} largest train classes has 6 images" in note
    assert "episodes of n_shot=1, n_query=1, n_unlabeled=4" in note, note
    assert "runs with --set n_query=1 --set n_unlabeled=4 can use it" in note, note
    assert "--n-way" not in note and "fewer ways" not in note, note


def test_fewer_ways_are_advised_when_enough_classes_are_large_enough():
    target = run_target()
    entry = {"usable": {"train": 9, "val": 3, "test": 4},
             "nth_class_images": {"train": 16, "val": 10, "test": 12}}  # fmt: skip
    said = _smaller_episodes("mine", entry, target, 5)
    assert said.startswith("'mine': the smallest of its 5 largest val classes has 10 images")
    assert said.endswith(", or prepare the stream with --n-way 3"), said
    entry["usable"]["val"] = 1  # one class: no stream domain of fewer ways either
    assert "--n-way" not in _smaller_episodes("mine", entry, target, 5)


def test_the_advised_episode_fits_the_class_it_was_computed_for():
    """For every class size, a run with the advised episode sizes can draw from such a class
    (the check the run itself makes), and a larger query would not fit."""
    target = run_target()
    for size in range(4, 40):
        fits = fitting_episode(size, target)
        assert fits is not None, size
        shaped = dataclasses.replace(target, **fits)
        assert min_class_images(shaped) <= size, (size, fits)
        if fits["n_query"] < target.n_query:
            bigger = dataclasses.replace(shaped, n_query=fits["n_query"] + 1)
            assert min_class_images(bigger) > size, (size, fits)
    assert fitting_episode(3, target) is None  # 1 labeled image: no shot and query
