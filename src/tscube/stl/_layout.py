"""Moving a cube between :func:`tscube.stl`'s time-first layout and the engines' series
rows, in parallel (numba), with the missing-value cleaning and the per-series summaries.

Done with NumPy one array at a time, these copies and transposes took most of a call
(docs/gpu.md, benchmarks/README.md). Here
each is one pass over blocks of series (cache-sized tiles of the transpose). The
reference and cuda engines take this path (:func:`decompose_via_rows`); the cpu engine
reads and writes the time-first arrays itself and shares only the cleaning of a value
and the summaries of a series.
"""

from __future__ import annotations

import numpy as np

from .._jit import jit
from .._numbers import as_kernel_floats
from .._threads import run_tasks, task_count

#: Series per tile of the transposes: TILE x T reads stay in cache while the writes of
#: one date touch TILE consecutive values.
TILE = 64


@jit(inline="always")
def clean_value(raw, has_nodata, nodata):
    """One value of the data as float64, NaN where missing (NaN, +-inf or ``nodata``)."""
    value = np.float64(raw)
    if (has_nodata and raw == nodata) or not np.isfinite(value):
        value = np.nan
    return value


@jit(nogil=True)
def _rows(task, n_tasks, data, has_nodata, nodata, out):
    """Task ``task`` of ``n_tasks`` of :func:`series_rows`: a range of tiles of series."""
    n_times, n_series = data.shape
    n_tiles = (n_series + TILE - 1) // TILE
    for block in range(task * n_tiles // n_tasks, (task + 1) * n_tiles // n_tasks):
        s0 = block * TILE
        s1 = min(s0 + TILE, n_series)
        for t in range(n_times):
            for s in range(s0, s1):
                out[s, t] = clean_value(data[t, s], has_nodata, nodata)


def kernel_values(values: np.ndarray, nodata):
    """``(values, has_nodata, marker)`` for the kernels that read ``(T, n)`` data in place:
    float32 or float64 in native byte order (other types are converted, nodata becoming
    NaN: integers of up to 16 bits to float32, the rest to float64), and ``nodata`` in
    the data's dtype (``has_nodata`` False where no value of that dtype can equal it)."""
    values, nodata = as_kernel_floats(values, nodata)
    has_nodata, marker = _nodata_in(values.dtype, nodata)
    return _one_array_type(values), has_nodata, marker


def _one_array_type(values: np.ndarray) -> np.ndarray:
    """``values`` as one numba array type per dtype: C-contiguous (other layouts copied,
    one pass against STL's hundreds of operations per value) and seen read-only (a view;
    the kernels only read it). Each other layout or writeability would compile the
    kernels once more, the cpu engine's large batch kernel included."""
    values = np.ascontiguousarray(values).view()
    values.flags.writeable = False
    return values


def series_rows(values: np.ndarray, nodata) -> np.ndarray:
    """``(T, n)`` numeric data -> ``(n, T)`` float64 rows, NaN where missing (NaN, +-inf,
    or equal to ``nodata`` compared in the data's dtype, as ``values == nodata``)."""
    n_times, n_series = values.shape
    out = np.empty((n_series, n_times))
    run_tasks(_rows, task_count(-(-n_series // TILE)), *kernel_values(values, nodata), out)
    return out


def _nodata_in(dtype, nodata):
    """``(has, marker)``: ``nodata`` in ``dtype``, and whether the cast is exact, i.e.
    whether ``values == nodata`` can hold for some value of that dtype (NumPy's own
    comparison of the cast with ``nodata``: no pass over the data)."""
    if nodata is not None:
        try:
            with np.errstate(invalid="ignore", over="ignore"):
                marker = np.asarray(nodata).astype(dtype)[()]
            if bool(marker == nodata):
                return True, marker
        except (OverflowError, TypeError, ValueError):  # e.g. an int beyond int64
            pass
    return False, np.zeros((), dtype)[()]


def centred_times(times):
    """The times centred on their mean (float64: the trend slope's regressor) and their
    sum of squares."""
    centered = np.ascontiguousarray(times - times.mean(), dtype=np.float64)
    return centered, _sum_of_squares(centered)


@jit()
def _sum_of_squares(x):
    total = 0.0
    for t in range(x.shape[0]):
        total += x[t] * x[t]
    return total


@jit()
def series_summaries(trend, seasonal, centered_t, denominator, period, cycle):
    """``(slope, amplitude)`` of one series: the OLS slope of its trend against the
    centred times (``denominator``: their sum of squares) and the range of its mean
    seasonal cycle (NaN if a cycle position is NaN, as np.max / np.min)."""
    n_times = trend.shape[0]
    mean = 0.0
    for t in range(n_times):
        mean += trend[t]
    mean /= n_times
    numerator = 0.0
    for t in range(n_times):
        numerator += (trend[t] - mean) * centered_t[t]
    for j in range(period):
        total = 0.0
        count = 0
        for t in range(j, n_times, period):
            total += seasonal[t]
            count += 1
        cycle[j] = total / count
    high = cycle[0]
    low = cycle[0]
    for j in range(period):
        if np.isnan(cycle[j]):
            high = low = np.nan
            break
        high = max(high, cycle[j])
        low = min(low, cycle[j])
    return numerator / denominator, high - low


@jit(nogil=True)
def _finish(task, n_tasks, y, seasonal, trend, weights, centered_t, denominator, period, out_s, out_t, out_r,
            out_w, slope, amplitude):
    """Task ``task`` of ``n_tasks`` of :func:`finish`: a range of tiles of series."""
    n_series, n_times = y.shape
    n_tiles = (n_series + TILE - 1) // TILE
    for block in range(task * n_tiles // n_tasks, (task + 1) * n_tiles // n_tasks):
        s0 = block * TILE
        s1 = min(s0 + TILE, n_series)
        cycle = np.empty(period)
        for s in range(s0, s1):
            slope[s], amplitude[s] = series_summaries(trend[s], seasonal[s], centered_t,
                                                      denominator, period, cycle)
        for t in range(n_times):
            for s in range(s0, s1):
                out_s[t, s] = seasonal[s, t]
                out_t[t, s] = trend[s, t]
                out_r[t, s] = y[s, t] - seasonal[s, t] - trend[s, t]
                out_w[t, s] = weights[s, t]


def finish(series, seasonal, trend, weights, times, period, out_dtype):
    """Time-first ``(T, n)`` seasonal, trend, remainder and weights in ``out_dtype``, and
    per series the OLS slope of the trend against ``times`` and the range of the mean
    seasonal cycle, from the engines' ``(n, T)`` float64 rows."""
    n_series, n_times = series.shape
    outputs = [np.empty((n_times, n_series), out_dtype) for _ in range(4)]
    slope = np.empty(n_series)
    amplitude = np.empty(n_series)
    run_tasks(_finish, task_count(-(-n_series // TILE)), series, seasonal, trend, weights, *centred_times(times), int(period),
              *outputs, slope, amplitude)
    return outputs, slope, amplitude


def decompose_via_rows(decompose, values, nodata, prm, times, out_dtype):
    """An engine's ``decompose`` of ``(n, T)`` series rows applied to ``(T, n)`` data:
    the rows, the decomposition, then :func:`finish`. Returns ``(seasonal, trend,
    remainder, weights)`` time-first in ``out_dtype``, the slopes, the amplitudes and the
    statuses."""
    series = series_rows(values, nodata)
    seasonal, trend, weights, status = decompose(series, prm)
    outputs, slope, amplitude = finish(series, seasonal, trend, weights, times, prm.period, out_dtype)
    return outputs, slope, amplitude, status
