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
from ..._numbers import as_kernel_floats
from ..._prefetch import prefetch_row
from .inputs import kernel_nodata


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


def cube_bytes(values: np.ndarray, nodata: float | None) -> tuple[np.ndarray, int, float, bool]:
    """A ``(T, P)`` cube as ``(raw, itemsize, nodata, has_nodata)``: its bytes, a read-only
    C-contiguous ``(T, P × itemsize)`` uint8 array of float64 (``itemsize`` 8) or float32
    (4) values, and the nodata value as the kernels compare it
    (:func:`~tscube.bfast.core.inputs.kernel_nodata`). A kernel finds ``P`` as
    ``raw.shape[1] // itemsize``.

    numba compiles a kernel once per array type it is called with: per dtype, layout and
    writeability. For the per-pixel kernels (BFAST Lite, Bai–Perron and ROC history
    selection, classic BFAST: tens of seconds each, docs/performance.md) that was a
    compilation for every kind of cube a user or a test suite passes. A kernel that takes
    ``raw, itemsize`` is compiled once, and :func:`load_tile_bytes` reads float32 and
    float64 values in place. Other cubes are converted once
    (:func:`tscube._numbers.as_kernel_floats`: one pass, against hundreds of operations
    per value; for the call, a float32 copy of an int16 cube: twice its bytes), other
    layouts copied. A loader per integer type as well cost the first call 8 s of compiling
    (ten versions)."""
    values, nodata = as_kernel_floats(values, nodata)
    nodata, has_nodata = kernel_nodata(values, nodata)
    values = np.ascontiguousarray(values)
    raw = values.view(np.uint8)  # (T, P × itemsize)
    raw = raw.view()
    raw.flags.writeable = False
    return raw, values.itemsize, nodata, has_nodata


@jit(plain_args=True)
def load_tile_bytes(raw, itemsize, p0, width, stop, tile):
    """:func:`load_tile` from a cube passed as :func:`cube_bytes` (``raw``, ``itemsize``):
    the bytes seen as float64 or float32, a branch taken once per tile."""
    if itemsize == 8:
        load_tile(raw.view(np.float64), p0, width, stop, tile)
    else:
        load_tile(raw.view(np.float32), p0, width, stop, tile)


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
