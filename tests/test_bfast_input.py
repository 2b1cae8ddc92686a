"""Bad input gives a clear exception or a documented status, never a crash or a wrong number."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from tscube import BfastStatus, bfast_monitor
from tscube.datasets import make_cube

ENGINES = ["reference", "cpu"]


@pytest.fixture(scope="module")
def cube():
    return make_cube("demo", shape=(2, 3), n_dates=100, n_history=60, nan_fraction=0.2, seed=11)


@pytest.mark.parametrize("engine", ENGINES)
def test_pixel_statuses(engine, cube):
    data = cube.data.reshape(100, -1).astype(np.float64).copy()
    data[:, 0] = np.nan  # all missing
    data[8:60, 1] = np.nan  # 8 history observations <= k = 8
    data[:, 2] = 0.7  # constant: exact fit
    data[60:, 3] = np.nan  # nothing to monitor
    data[5, 4] = np.inf  # inf is missing, and counted
    data[6, 4] = -np.inf
    result = bfast_monitor(data, cube.dates, cube.start, freq=23, engine=engine)
    assert list(result.status) == [
        BfastStatus.ALL_MISSING,
        BfastStatus.TOO_FEW_HISTORY,
        BfastStatus.PERFECT_FIT,
        BfastStatus.NO_MONITORING_DATA,
        BfastStatus.OK,
        BfastStatus.OK,
    ]
    assert list(result.break_index[:4]) == [-1, -1, -1, -1]
    assert np.isnan(result.magnitude[[0, 1, 3]]).all() and result.magnitude[2] == pytest.approx(0.0, abs=1e-12)
    assert list(result.n_inf) == [0, 0, 0, 0, 2, 0]
    clean = data[:, 4].copy()
    clean[[5, 6]] = np.nan
    same = bfast_monitor(clean, cube.dates, cube.start, freq=23, engine=engine)
    assert same.magnitude == result.magnitude[4] and same.break_index == result.break_index[4]


@pytest.mark.parametrize("engine", ENGINES)
def test_aliased_harmonics_flagged(engine, cube):
    result = bfast_monitor(cube.data, cube.dates, cube.start, freq=23, order=12, engine=engine)
    assert np.all(result.status == BfastStatus.SINGULAR_DESIGN)
    assert np.all(np.isnan(result.magnitude))


def test_too_short_window_flagged(cube):
    """floor(h * n) <= 1 is R's other 'too few observations' rule."""
    data = cube.data[:, 0, 0].astype(float).copy()
    data[:52] = np.nan  # 8 -> at most 8 history obs with k = 4 (order 1)
    result = bfast_monitor(data, cube.dates, cube.start, freq=23, order=1, engine="reference")
    assert result.status == BfastStatus.TOO_FEW_HISTORY


def test_unsorted_dates_name_the_position(cube):
    dates = cube.dates.copy()
    dates[[10, 11]] = dates[[11, 10]]
    with pytest.raises(ValueError, match="unsorted dates at positions 10 and 11"):
        bfast_monitor(cube.data, dates, cube.start, freq=23)


def test_duplicate_dates_name_the_position(cube):
    dates = cube.dates.copy()
    dates[21] = dates[20]
    with pytest.raises(ValueError, match="duplicate dates at positions 20 and 21"):
        bfast_monitor(cube.data, dates, cube.start, freq=23)


def test_two_dates_in_one_16day_slot(cube):
    dates = cube.dates.copy()
    dates[21] = dates[20] + np.timedelta64(2, "D")
    with pytest.raises(ValueError, match=r"the dates \S+ and \S+ \(positions 20 and 21\) fall on the same slot of the "
                                         r"time grid of freq=23 \(one slot per 16 days\)"):
        bfast_monitor(cube.data, dates, cube.start, freq=23)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(start=dt.date(1999, 1, 1)), ValueError, "before the first date"),
        (dict(start=dt.date(2030, 1, 1)), ValueError, "after the last date"),
        (dict(start=pd.Timestamp("2030-01-01")), ValueError, r"^start 2030-01-01 \(= 2030\.0+\) is after"),
        (dict(start=np.datetime64("1999-01-01")), ValueError, r"^start 1999-01-01 \(="),
        (dict(h=1.5), ValueError, r"h = 1.5 must lie in \(0, 1\]"),
        (dict(h=0), ValueError, r"h = 0 must lie in \(0, 1\]"),
        (dict(end=1), ValueError, r"end = 1 must lie in \(1, 100\]"),
        (dict(level=(1.5, 0.05)), ValueError, r"level = 1.5 \(monitoring significance\) must lie in \(0, 1\)"),
        (dict(level=1e-5), ValueError, "too small for a simulated critical value"),
        (dict(h=np.nan), ValueError, "h must be finite"),
        (dict(type="RE"), ValueError, "type must be one of 'OLS-MOSUM', 'OLS-CUSUM'"),
        (dict(season=True), ValueError, "season=True with order=0"),
        (dict(level=(0.05, 0.05, 0.05)), ValueError, "pair"),
        (dict(history="XYZ"), ValueError, "history must be one of"),
        (dict(history=dt.date(2005, 1, 1), start=dt.date(2004, 1, 1)), ValueError,
         "^history 2005-01-01 must lie before every monitoring start"),
        (dict(engine="gpu"), ValueError, "engine must be one of"),
        (dict(order=-1), ValueError, "order"),
        (dict(nodata="x"), TypeError, "nodata"),
        (dict(freq=0), ValueError, "freq"),
        (dict(start="not a date"), ValueError, "cannot parse"),
    ],
)
def test_caller_errors(cube, kwargs, error, match):
    args = dict(data=cube.data, dates=cube.dates, start=cube.start, freq=23)
    args.update(kwargs)
    with pytest.raises(error, match=match):
        bfast_monitor(**args)


def test_season_dummies_need_a_coarse_grid(cube):
    """Daily dates (R's freq 365) give 366 seasonal regressors: refused with the limit named."""
    dates = pd.date_range("2001-01-01", periods=900, freq="D")
    data = np.random.default_rng(0).normal(size=(900, 2))
    with pytest.raises(ValueError, match=r"366 regressors \(season dummies at freq = 365\); at most 64"):
        bfast_monitor(data, dates, "2003-01-01", order=0, season=True)
    monthly = bfast_monitor(data[:120], pd.date_range("2000-01-01", periods=120, freq="MS"), "2007-01-01",
                            freq=12, order=0, season=True)
    assert monthly.attrs["regressors"][:3] == ["(Intercept)", "trend", "season.L"]
    assert len(monthly.attrs["regressors"]) == 13 and set(monthly.status.tolist()) == {0}


def test_shape_and_dtype_errors(cube):
    with pytest.raises(ValueError, match="dates has 99"):
        bfast_monitor(cube.data, cube.dates[:-1], cube.start, freq=23)
    with pytest.raises(TypeError, match="dtype"):
        bfast_monitor(cube.data > 0.5, cube.dates, cube.start, freq=23)
    with pytest.raises(TypeError, match="dtype"):
        bfast_monitor(cube.data.astype(complex), cube.dates, cube.start, freq=23)
    with pytest.raises(ValueError, match="freq"):
        bfast_monitor(cube.data, 2000 + np.arange(100) / 23, 2002.0)
    with pytest.raises(ValueError, match="not on the regular grid"):
        bfast_monitor(cube.data, 2000 + np.arange(100) / 23 + np.r_[0, 0.01, np.zeros(98)], 2002.0, freq=23)
    with pytest.raises(ValueError, match="scalar"):
        bfast_monitor(np.float32(1.0), cube.dates[:1], cube.start, freq=23)


def test_irregular_dates_use_r_daily_axis():
    """datetimes without freq: bfastts(type='irregular'), yday365, 29 Feb = 1 Mar slot."""
    dates = np.array(["2004-02-28", "2004-02-29", "2005-03-01"], dtype="datetime64[D]")
    with pytest.raises(ValueError, match="29 February shares 1 March's slot"):
        bfast_monitor(np.ones(3), np.array(["2004-02-29", "2004-03-01", "2004-03-02"], dtype="datetime64[D]"), "2004-03-02")
    from tscube.timeaxis import build_time_axis

    axis = build_time_axis(dates)
    assert axis.freq == 365
    np.testing.assert_array_equal(axis.slot, [0, 1, 366])
    assert axis.time[0] == pytest.approx(2004 + 58 / 365, abs=1e-12)
