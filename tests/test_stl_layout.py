"""tscube.stl._layout (the parallel copies between the cube and the engines' series rows)
equals the plain NumPy formulas it replaces."""

from __future__ import annotations

import numpy as np
import pytest

from tscube.stl._layout import finish, series_rows


@pytest.mark.parametrize("dtype, nodata", [(np.float32, None), (np.float32, 0.1), (np.int16, -3000),
                                           (np.float64, np.inf), (np.uint8, 3.5), (np.float16, 0.1),
                                           (np.longdouble, 7.0)])
def test_series_rows_transposes_and_marks_missing(dtype, nodata):
    rng = np.random.default_rng(0)
    values = (rng.uniform(0, 200, (37, 131))).astype(dtype)
    if nodata is not None and np.asarray(nodata).astype(dtype) == nodata:
        values[rng.random(values.shape) < 0.2] = nodata
    if values.dtype.kind == "f":
        values[0, :5] = [np.nan, np.inf, -np.inf, 1.0, 2.0]
    expected = values.astype(np.float64)
    if nodata is not None:
        expected[values == nodata] = np.nan
    expected[~np.isfinite(expected)] = np.nan
    got = series_rows(values, nodata)
    np.testing.assert_array_equal(got, expected.T)
    assert got.flags.c_contiguous and got.dtype == np.float64


def test_finish_equals_numpy_summaries():
    rng = np.random.default_rng(1)
    n, T, period = 70, 50, 7
    y, seasonal, trend, weights = (rng.standard_normal((n, T)) for _ in range(4))
    seasonal[3] = trend[3] = weights[3] = np.nan  # a failed series
    y[5, ::4] = np.nan
    times = 2000 + np.arange(T) / 23
    (s_t, t_t, r_t, w_t), slope, amplitude = finish(y, seasonal, trend, weights, times, period,
                                                   np.float32)
    for got, want in ((s_t, seasonal), (t_t, trend), (r_t, y - seasonal - trend), (w_t, weights)):
        assert got.dtype == np.float32 and got.shape == (T, n)
        np.testing.assert_array_equal(got, want.T.astype(np.float32))
    c = times - times.mean()
    np.testing.assert_allclose(slope, (trend - trend.mean(axis=1, keepdims=True)) @ c / (c @ c),
                               rtol=1e-12)
    cycles = np.stack([seasonal[:, j::period].mean(axis=1) for j in range(period)], axis=1)
    np.testing.assert_allclose(amplitude, cycles.max(axis=1) - cycles.min(axis=1), rtol=1e-12)
    assert np.isnan(slope[3]) and np.isnan(amplitude[3])


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint64, np.float32, np.float64])
@pytest.mark.parametrize("nodata", [0, -1, 255, 3.5, 0.1, np.float64(0.1), -3000, 10**20, np.nan, np.inf])
def test_nodata_marks_what_numpy_equality_marks(dtype, nodata):
    """The nodata value is compared in the data's dtype exactly as ``values == nodata``,
    out-of-range and inexact values included."""
    with np.errstate(over="ignore", invalid="ignore"):  # 255 wraps to -1 in int8, 0.1 -> 0
        values = np.array([[0, 1, 3, 7, 100, 255, 0.1]]).astype(dtype).T.repeat(3, axis=1)
    expected = values.astype(np.float64)
    with np.errstate(over="ignore"):
        expected[values == nodata] = np.nan
    np.testing.assert_array_equal(series_rows(values, nodata), expected.T)


def test_series_rows_reads_big_endian_data():
    values = np.arange(12, dtype=">i2").reshape(4, 3)
    values[1, 2] = -3000
    expected = values.astype(np.float64)
    expected[1, 2] = np.nan
    np.testing.assert_array_equal(series_rows(values, -3000), expected.T)


@pytest.mark.parametrize("dtype, nodata", [(np.float32, None), (np.int16, -3000), (np.float64, np.inf),
                                           (np.uint8, 3.5), (np.float16, 0.5), (">i2", -3000)])
def test_cpu_time_first_path_equals_the_rows_path(dtype, nodata):
    """The cpu engine reads the time-first data and writes the components in place; the
    reference goes through series rows and :func:`finish`: same missing values (nodata,
    inf, NaN, big-endian data, float16), statuses, components, summaries and dtypes."""
    from tscube.stl import stl

    rng = np.random.default_rng(4)
    n_times, period, n_series = 61, 6, 45  # a full block and a short one
    t = np.arange(n_times)[:, None]
    values = 100 + 20 * np.sin(2 * np.pi * t / period + rng.uniform(0, 6, n_series)) + rng.uniform(0, 9, (n_times, n_series))
    values = values.astype(dtype)
    marker = np.nan if nodata is None else nodata
    with np.errstate(invalid="ignore"):
        cast = np.asarray(marker).astype(values.dtype)
    representable = bool(cast == marker or (np.isnan(marker) and np.isnan(cast)))  # not 3.5 in uint8
    if representable:
        values[rng.random(values.shape) < 0.2] = marker
        values[:, 3] = marker  # an all-missing series
    if values.dtype.kind == "f":
        values[0, :3] = [np.nan, np.inf, -np.inf]
    cpu = stl(values, period, nodata=nodata, engine="cpu", robust=True)
    ref = stl(values, period, nodata=nodata, engine="reference", robust=True)
    np.testing.assert_array_equal(cpu.status, ref.status)
    assert (cpu.status != 0).sum() == representable
    for name in ("seasonal", "trend", "remainder", "weights", "trend_slope", "seasonal_amplitude"):
        got, want = getattr(cpu, name), getattr(ref, name)
        assert got.dtype == want.dtype and got.shape == want.shape, name
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=name)
        np.testing.assert_allclose(got, want, rtol=1e-5 if got.dtype == np.float32 else 1e-10, atol=1e-9, err_msg=name)


def test_any_layout_runs_the_one_compiled_kernel_per_dtype():
    """C, Fortran-ordered, strided and read-only data give the same decomposition, through
    one compiled batch kernel per dtype: C-contiguous and read-only (every other layout
    would compile the ~25 s kernel again)."""
    from numba import types

    from tscube.stl import _cpu, stl

    rng = np.random.default_rng(7)
    wide = 50 + 10 * np.sin(np.arange(48)[:, None] * np.pi / 3) + rng.normal(0, 1, (48, 10))
    values = wide[:, ::2]  # strided
    readonly = values.copy()
    readonly.flags.writeable = False
    want = stl(np.ascontiguousarray(values), 6, engine="cpu")
    for layout in (values, np.asfortranarray(values), readonly):
        got = stl(layout, 6, engine="cpu")
        for name in ("seasonal", "trend", "remainder", "weights"):
            np.testing.assert_array_equal(getattr(got, name), getattr(want, name))
    assert not values.flags.c_contiguous and values.flags.writeable  # the input untouched
    data_types = {signature[2] for signature in _cpu._decompose_batch.signatures}  # [0], [1]: the task
    assert data_types <= {types.Array(dtype, 2, "C", readonly=True)
                          for dtype in (types.float32, types.float64)}, data_types
