"""Per-pixel series for the cpu kernels that work one pixel at a time (history selection,
BFAST Lite): a block of pixels read once from the time-major cube, then each pixel's
valid observations compacted.

Reading one pixel's series straight from a ``(T, P)`` array touches a new cache line at
every date (the pixels of a date are contiguous, the dates of a pixel are ``P`` apart);
a block of ``width`` pixels read date by date uses each line ``width`` times.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(cache=True)
def load_tile(values, p0, width, stop, tile):
    """``tile[q, t] = values[t, p0 + q]`` (float64) for ``q < width``, ``t < stop``."""
    for t in range(stop):
        for q in range(width):
            tile[q, t] = np.float64(values[t, p0 + q])


@njit(cache=True)
def compact_valid(series, stop, nodata, has_nodata, rows, y):
    """Indices (``rows``) and values (``y``) of the valid observations of
    ``series[:stop]`` (not NaN, not inf, not ``nodata``); returns their number."""
    n = 0
    for t in range(stop):
        v = series[t]
        rows[n] = t
        y[n] = v
        n += (v == v) & (not math.isinf(v)) & ((not has_nodata) | (v != nodata))
    return n
