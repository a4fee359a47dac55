"""The accuracy-matrix heatmap: percent cells, a 0-100 colour bar, a title, whatever the scale."""

from __future__ import annotations

import numpy as np
import pytest

from avalanche_sets.metrics import accuracy_matrix_figure

FRACTIONS = np.array([[0.5, 0.25], [0.75, 0.875]])


@pytest.mark.parametrize("scale", [1.0, 100.0], ids=["fractions", "percent"])
def test_cells_colour_bar_and_title_are_in_percent(scale):
    fig = accuracy_matrix_figure(FRACTIONS * scale, ["a", "b"])
    ax, bar = fig.axes
    cells = sorted(t.get_text() for t in ax.texts)
    assert cells == ["25.0", "50.0", "75.0", "87.5"]
    assert bar.get_ylim() == (0.0, 100.0)  # the colour bar spans the cells' scale
    assert bar.get_ylabel() == "mean episode accuracy (%)"
    image = ax.images[0]
    assert image.get_clim() == (0.0, 100.0)
    assert np.allclose(image.get_array(), FRACTIONS * 100)  # colours from percentages
    assert "accuracy (%)" in ax.get_title()  # a default title that says what the cells are


def test_a_given_title_is_used():
    fig = accuracy_matrix_figure(FRACTIONS, ["a", "b"], title="order, seed 0")
    assert fig.axes[0].get_title() == "order, seed 0"
