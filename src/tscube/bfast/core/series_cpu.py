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

from ..._jit import jit
from ..._prefetch import prefetch_row


@jit(plain_args=True)
def tile_buffer(width, stop):
    """An uninitialised float64 tile for :func:`load_tile`: ``width`` rows of at least
    ``stop`` values, each row an odd number of cache lines long. (Rows a power of two of
    lines apart, e.g. 256 dates, fall into the same few sets of the L1 cache, and the
    transposed writes of :func:`load_tile` then evict each other.)"""
    lines = max(1, (stop + 7) // 8)
    return np.empty((width, 8 * (lines | 1)))


_PREFETCH_DATES = 8  # dates ahead whose rows load_tile asks the cache for


@jit(plain_args=True)
def load_tile(values, p0, width, stop, tile):
    """``tile[q, t] = values[t, p0 + q]`` (float64) for ``q < width``, ``t < stop``.

    The rows of consecutive dates are a page apart, which no hardware prefetcher follows:
    each row is asked for ``_PREFETCH_DATES`` dates ahead."""
    base = np.uint64(p0)
    line = max(1, 64 // values.itemsize)  # elements per cache line
    for t in range(stop):
        if t + _PREFETCH_DATES < stop:
            for q in range(0, width, line):
                prefetch_row(values, t + _PREFETCH_DATES, base + np.uint64(q))
            prefetch_row(values, t + _PREFETCH_DATES, base + np.uint64(width - 1))
        for q in range(width):
            tile[q, t] = np.float64(values[t, base + np.uint64(q)])


@jit()
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
