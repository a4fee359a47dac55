"""The one squared-distance function: both forms against a brute-force float64 loop, the size
switch of the default form, dtypes, autocast, gradients and bad shapes."""

from __future__ import annotations

import pytest
import torch

from avalanche_sets.functional import distance as distance_module
from avalanche_sets.functional.distance import squared_euclidean


def _points(*shape: int, seed: int, dtype=torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=dtype)


def _brute(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``[n, d]``, ``[m, d]`` -> ``[n, m]`` in float64, one pair at a time."""
    out = torch.zeros(x.shape[0], y.shape[0], dtype=torch.float64)
    for i in range(x.shape[0]):
        for j in range(y.shape[0]):
            out[i, j] = sum((float(a) - float(b)) ** 2 for a, b in zip(x[i], y[j]))
    return out


@pytest.mark.parametrize("expand", [False, True, None])
def test_every_form_matches_brute_force(expand):
    x, y = _points(5, 3, seed=0, dtype=torch.float64), _points(4, 3, seed=1, dtype=torch.float64)
    d = squared_euclidean(x, y, expand=expand)
    assert d.shape == (5, 4) and d.dtype == torch.float64
    torch.testing.assert_close(d, _brute(x, y))


@pytest.mark.parametrize("expand", [False, True, None])
def test_leading_dimensions_broadcast(expand):
    x, y = _points(2, 6, 4, seed=2), _points(2, 3, 4, seed=3)
    d = squared_euclidean(x, y, expand=expand)
    assert d.shape == (2, 6, 3)
    for b in range(2):
        torch.testing.assert_close(d[b], squared_euclidean(x[b], y[b], expand=expand))
    shared = squared_euclidean(x, y[0], expand=expand)  # one point set against a batch
    torch.testing.assert_close(shared[1], squared_euclidean(x[1], y[0], expand=expand))


def test_broadcast_form_is_exactly_zero_for_identical_points():
    x = _points(2, 5, 3, seed=4) * 100
    d = squared_euclidean(x, x, expand=False)
    assert torch.all(d.diagonal(dim1=-2, dim2=-1) == 0)


def test_expanded_form_never_goes_negative():
    z = _points(6, 3, seed=5) * 100  # float32: the expansion's rounding exceeds |x - y|² = 0
    assert (squared_euclidean(z, z, expand=True) >= 0).all()


def test_default_form_switches_on_the_size_of_the_difference_tensor(monkeypatch):
    x, y = _points(40, 16, seed=6), _points(30, 16, seed=7)
    broadcast = squared_euclidean(x, y, expand=False)
    expanded = squared_euclidean(x, y, expand=True)
    assert not torch.equal(broadcast, expanded)  # the two forms round differently
    assert torch.equal(squared_euclidean(x, y), broadcast)  # 40·30·16 elements: small
    monkeypatch.setattr(distance_module, "_BROADCAST_LIMIT", 40 * 30 * 16 - 1)
    assert torch.equal(squared_euclidean(x, y), expanded)
    torch.testing.assert_close(expanded, broadcast, rtol=1e-5, atol=1e-4)


def test_dtype_follows_x_and_autocast_is_off():
    x, y = _points(5, 8, seed=8), _points(3, 8, seed=9, dtype=torch.float64)
    d = squared_euclidean(x, y)
    assert d.dtype == torch.float32
    torch.testing.assert_close(d, squared_euclidean(x, y.float()), rtol=0, atol=0)
    for expand in (False, True):
        ref = squared_euclidean(x, y, expand=expand)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = squared_euclidean(x, y, expand=expand)
        assert out.dtype == torch.float32
        assert torch.equal(out, ref)


@pytest.mark.parametrize("expand", [False, True])
def test_gradient_flows_into_both_point_sets(expand):
    x = _points(4, 3, seed=10, dtype=torch.float64).requires_grad_(True)
    y = _points(2, 3, seed=11, dtype=torch.float64).requires_grad_(True)
    gx, gy = torch.autograd.grad(squared_euclidean(x, y, expand=expand).sum(), (x, y))
    # d/dx_i Σ_j ‖x_i − y_j‖² = 2 Σ_j (x_i − y_j), and symmetrically for y
    torch.testing.assert_close(gx, 2 * (2 * x - y.sum(0)).detach())
    torch.testing.assert_close(gy, 2 * (4 * y - x.sum(0)).detach())


def test_different_feature_sizes_are_refused():
    with pytest.raises(ValueError, match=r"feature sizes differ: x \(4, 3\) vs y \(2, 5\)"):
        squared_euclidean(torch.zeros(4, 3), torch.zeros(2, 5))
