"""The vector intrinsics of tscube._simd against NumPy, for every feature count a
k-means kernel may be compiled for (vectors of 1 to 17 lanes, odd sizes included)."""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit

from tscube._simd import TRANSPOSE_WIDTH, add_row, transpose_scaled


@njit
def _add_rows(sums, rows, X, features):
    for i in range(X.shape[0]):
        add_row(sums, rows[i], X, i, features)


@njit
def _transpose(out, column, X, row, origin, scale, features):
    transpose_scaled(out, column, X, row, origin, scale, features)


@pytest.mark.parametrize("n_features", [1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 17])
def test_add_row_adds_each_row_to_its_target_row(n_features):
    rng = np.random.default_rng(n_features)
    X = rng.normal(size=(50, n_features))
    rows = rng.integers(0, 6, 50)
    sums = rng.normal(size=(6, n_features))
    expected = sums.copy()
    for i, k in enumerate(rows):
        expected[k] += X[i]
    _add_rows(sums, rows, X, (0,) * n_features)
    np.testing.assert_array_equal(sums, expected)  # the same float64 adds, in the same order


@pytest.mark.parametrize("n_features", [1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 17])
def test_transpose_scaled_writes_the_shifted_scaled_float32_columns(n_features):
    rng = np.random.default_rng(n_features)
    X = rng.normal(1e3, 5.0, size=(30, n_features))
    origin = rng.normal(1e3, 1.0, n_features)
    out = np.full((n_features, 40), -1.0, dtype=np.float32)
    _transpose(out, 5, X, 11, origin, 0.125, (0,) * n_features)
    expected = ((X[11:11 + TRANSPOSE_WIDTH] - origin) * 0.125).astype(np.float32).T
    np.testing.assert_array_equal(out[:, 5:5 + TRANSPOSE_WIDTH], expected)  # bit for bit
    untouched = np.delete(out, np.s_[5:5 + TRANSPOSE_WIDTH], axis=1)
    assert (untouched == -1.0).all()


def test_intrinsics_refuse_other_layouts():
    from numba.core.errors import TypingError

    X = np.ones((16, 4))
    with pytest.raises(TypingError):
        _add_rows(np.ones((2, 4)), np.zeros(16, np.int64), np.asfortranarray(X), (0,) * 4)
    with pytest.raises(TypingError):
        _transpose(np.ones((4, 8)), 0, X, 0, np.zeros(4), 1.0, (0,) * 4)  # float64 out
