"""The software prefetch used by the cpu kernels compiles for the cube dtypes and leaves
values untouched (it is a cache hint)."""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit
from numba.core.errors import TypingError

from tscube._prefetch import prefetch_row


@njit
def _sum_with_prefetch(a, ahead):
    total = 0.0
    for t in range(a.shape[0]):
        if t + ahead < a.shape[0]:
            for q in range(a.shape[1]):
                prefetch_row(a, t + ahead, np.uint64(q))
        for q in range(a.shape[1]):
            total += a[t, q]
    return total


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int16, np.uint8])
def test_prefetch_is_a_hint_only(dtype):
    a = (np.arange(5 * 7) % 11).astype(dtype).reshape(5, 7)
    before = a.copy()
    assert _sum_with_prefetch(a, 2) == pytest.approx(float(a.sum()))
    np.testing.assert_array_equal(a, before)
    view = a[:, 1:6]  # a strided (non-contiguous) view
    assert _sum_with_prefetch(view, 1) == pytest.approx(float(view.sum()))


def test_prefetch_rejects_what_is_not_a_2d_array():
    @njit
    def bad(a):
        prefetch_row(a, 0, 0)

    with pytest.raises(TypingError):
        bad(np.zeros(3))
