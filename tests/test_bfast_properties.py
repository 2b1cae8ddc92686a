"""Properties of BFAST Monitor that hold for every engine."""

from __future__ import annotations

import numpy as np
import pytest

from tscube import BfastStatus, bfast_monitor
from tscube.datasets import make_cube

ENGINES = ["reference", "cpu"]


@pytest.fixture(scope="module")
def cube():
    return make_cube("demo", shape=(6, 7), n_dates=120, n_history=70, nan_fraction=0.3, seed=3)


def _decimal_dates(n, freq=23, origin=2000.0):
    return origin + np.arange(n) / freq


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("shift", [10.0, 0.37])
def test_invariant_to_time_origin(engine, shift):
    """Shifting all decimal years by a constant shifts break times and nothing else."""
    c = make_cube("demo", shape=(4, 5), n_dates=120, n_history=70, nan_fraction=0.3, seed=1)
    t = _decimal_dates(120)
    a = bfast_monitor(c.data, t, t[70], freq=23, engine=engine)
    b = bfast_monitor(c.data, t + shift, t[70] + shift, freq=23, engine=engine)
    np.testing.assert_array_equal(a.break_index, b.break_index)
    np.testing.assert_array_equal(a.status, b.status)
    np.testing.assert_allclose(b.break_time, a.break_time + shift, rtol=0, atol=1e-9)
    np.testing.assert_allclose(b.magnitude, a.magnitude, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(b.mosum_mean, a.mosum_mean, rtol=1e-7, atol=1e-12)


@pytest.mark.parametrize("engine", ENGINES)
def test_complete_pixel_equals_plain_least_squares(engine):
    """A pixel without missing values: R's raw design, np.linalg.lstsq, MOSUM by hand."""
    rng = np.random.default_rng(5)
    freq, n_dates, n_hist, order = 23, 150, 90, 3
    t = _decimal_dates(n_dates, freq, 2003.0)
    y = 0.5 + 0.001 * np.arange(n_dates) + 0.1 * np.sin(2 * np.pi * t) + rng.normal(0, 0.05, n_dates)
    y[120:] -= 0.3
    result = bfast_monitor(y, t, t[n_hist], order=order, freq=freq, history="all", return_process=True, engine=engine)

    harmonics = [f(2 * np.pi * j * t) for f in (np.cos, np.sin) for j in range(1, order + 1)]
    X = np.column_stack([np.ones(n_dates), np.arange(1, n_dates + 1)] + harmonics)
    beta = np.linalg.lstsq(X[:n_hist], y[:n_hist], rcond=None)[0]
    e = y - X @ beta
    k = X.shape[1]
    sigma = np.sqrt(e[:n_hist] @ e[:n_hist] / (n_hist - k))
    window = int(0.25 * n_hist)
    process = np.array([e[i - window + 1 : i + 1].sum() for i in range(n_hist, n_dates)]) / (sigma * np.sqrt(n_hist))
    np.testing.assert_allclose(result.process[n_hist:], process, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(result.magnitude, np.median(e[n_hist:]), rtol=1e-9)
    np.testing.assert_allclose(result.sigma, sigma, rtol=1e-9)
    boundary = result.attrs["critval"] * np.sqrt(2.0)  # t/n < e here: logPlus = 1
    expected_break = n_hist + int(np.flatnonzero(np.abs(process) > boundary)[0])
    assert result.break_index == expected_break
    assert result.break_time == t[expected_break]


@pytest.mark.parametrize("engine", ENGINES)
def test_pixels_do_not_influence_each_other(engine, cube):
    whole = bfast_monitor(cube.data, cube.dates, cube.start, freq=23, return_process=True, engine=engine)
    for r, c in [(0, 0), (3, 4), (5, 6)]:
        alone = bfast_monitor(cube.data[:, r, c], cube.dates, cube.start, freq=23, return_process=True, engine=engine)
        for name, value in alone.to_dict().items():
            inside = getattr(whole, name)[..., r, c]
            if np.issubdtype(value.dtype, np.integer):
                np.testing.assert_array_equal(value, inside, err_msg=name)
            else:  # a BLAS Gram may sum in another order for another batch size
                np.testing.assert_allclose(value, inside, rtol=1e-12, atol=1e-15, err_msg=name)


@pytest.mark.parametrize("engine", ENGINES)
def test_integer_with_nodata_equals_float_with_nan(engine, cube):
    scaled = np.round(cube.data * 10000)
    as_int = np.where(np.isnan(scaled), -3000, scaled).astype(np.int16)
    a = bfast_monitor(as_int, cube.dates, cube.start, freq=23, nodata=-3000, engine=engine)
    b = bfast_monitor(scaled, cube.dates, cube.start, freq=23, engine=engine)
    for name, value in a.to_dict().items():
        np.testing.assert_array_equal(value, getattr(b, name), err_msg=name)


@pytest.mark.parametrize("engine", ENGINES)
def test_detects_planted_breaks(engine):
    """Large planted steps are found, at or after their date; status OK everywhere."""
    c = make_cube("demo", shape=(10, 10), change_fraction=0.5, change_magnitude=(-0.5, -0.4), noise=0.02, seed=7)
    result = bfast_monitor(c.data, c.dates, c.start, freq=23, history="all", engine=engine)
    assert np.all(result.status == BfastStatus.OK)
    assert np.all(result.has_break[c.changed])
    assert np.all(result.break_index[c.changed] >= c.change_index[c.changed])
    # magnitude is the median over the whole monitoring period: clearly negative when the
    # step covers most of it (planted in its first 40%: 138 history + 92 monitoring dates)
    early = c.changed & (c.change_index < 138 + 0.4 * 92)
    assert early.sum() > 5 and np.all(result.magnitude[early] < -0.2)


@pytest.mark.parametrize("engine", ENGINES)
def test_output_shapes_follow_pixel_dims(engine, cube):
    result = bfast_monitor(cube.data[:, :2, :3], cube.dates, cube.start, freq=23, return_process=True, engine=engine)
    assert result.break_time.shape == (2, 3) and result.status.dtype == np.int8
    assert result.process.shape == (cube.data.shape[0], 2, 3)
    single = bfast_monitor(cube.data[:, 0, 0], cube.dates, cube.start, freq=23, engine=engine)
    assert single.break_time.shape == ()
