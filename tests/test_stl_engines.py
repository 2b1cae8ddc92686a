"""cpu engine == reference engine with gaps; statuses, input handling and derived outputs."""

from __future__ import annotations

import numpy as np
import pytest

from tscube.stl import StlStatus, stl


def _gappy_cube(n_times, period, n_series, seed):
    """Seasonal series with 0-50% random gaps; one with two whole missing cycles."""
    rng = np.random.default_rng(seed)
    t = np.arange(n_times)[:, None]
    cube = (5 + 0.01 * t + np.sin(2 * np.pi * t / period + rng.uniform(0, 6, n_series))
            + 0.3 * rng.standard_normal((n_times, n_series)))
    for s in range(n_series):
        fraction = s / max(n_series - 1, 1) * 0.5
        cube[rng.random(n_times) < fraction, s] = np.nan
    cube[period: 3 * period, 0] = np.nan  # whole cycles missing
    cube[-period // 2:, 1] = np.nan  # gap at the end: extrapolated trend
    return cube


CONFIGS = [
    dict(flavor="statsmodels", seasonal=7),
    dict(flavor="statsmodels", seasonal=9, seasonal_deg=2, trend_deg=2, low_pass_deg=0,
         seasonal_jump=2, trend_jump=3, low_pass_jump=2, robust=True, inner_iter=1, outer_iter=2),
    dict(flavor="statsmodels", seasonal="periodic", robust=True, inner_iter=1, outer_iter=1),
    dict(flavor="stlplus", seasonal=7),
    dict(flavor="stlplus", seasonal=11, seasonal_deg=2, trend_deg=2, robust=True, inner_iter=1,
         outer_iter=2),
    dict(flavor="stlplus", seasonal="per", seasonal_deg=1, trend=15, low_pass_deg=0,
         robust=True, inner_iter=2, outer_iter=1),
]


@pytest.mark.parametrize("kw", CONFIGS, ids=[str(i) for i in range(len(CONFIGS))])
@pytest.mark.parametrize("n_times,period", [(97, 8), (61, 6)])  # odd lengths
def test_cpu_equals_reference_with_gaps(kw, n_times, period):
    cube = _gappy_cube(n_times, period, 6, seed=n_times)
    ref = stl(cube, period, engine="reference", **kw)
    cpu = stl(cube, period, engine="cpu", **kw)
    assert ref.params == cpu.params
    np.testing.assert_array_equal(cpu.status, ref.status)
    assert (ref.status == StlStatus.OK).sum() >= 5
    for name in ("seasonal", "trend", "remainder", "weights", "trend_slope",
                 "seasonal_amplitude"):
        np.testing.assert_allclose(getattr(cpu, name), getattr(ref, name), rtol=0, atol=1e-9,
                                   err_msg=name)
    ok = ref.status == StlStatus.OK
    # seasonal and trend everywhere, remainder exactly where data is missing
    assert np.isfinite(cpu.seasonal[:, ok]).all() and np.isfinite(cpu.trend[:, ok]).all()
    np.testing.assert_array_equal(np.isnan(cpu.remainder[:, ok]), np.isnan(cube[:, ok]))



@pytest.mark.parametrize("kw", [
    dict(seasonal=7, seasonal_jump=2, trend_jump=3, low_pass_jump=2),
    dict(seasonal=9, seasonal_deg=0, low_pass_deg=0, robust=True, inner_iter=1, outer_iter=3),
], ids=["plain", "robust"])
def test_cpu_blocks_of_gap_free_series_equal_reference(kw):
    """More gap-free series than one block (plus a short block), mixed with gappy ones,
    an outlier burst that zeroes robustness weights and a constant series."""
    n_times, period, n_series = 61, 6, 60
    rng = np.random.default_rng(11)
    t = np.arange(n_times)[:, None]
    cube = (5 + 0.01 * t + np.sin(2 * np.pi * t / period + rng.uniform(0, 6, n_series))
            + 0.3 * rng.standard_t(2, (n_times, n_series)))
    cube[rng.random((n_times, n_series)) < 0.1 * (np.arange(n_series) % 3 == 0)] = np.nan
    cube[10:16, 4] = 1e3
    cube[:, 5] = 0.0
    ref = stl(cube, period, engine="reference", **kw)
    cpu = stl(cube, period, engine="cpu", **kw)
    np.testing.assert_array_equal(cpu.status, ref.status)
    assert (ref.status == StlStatus.OK).all()
    for name in ("seasonal", "trend", "weights"):
        np.testing.assert_allclose(getattr(cpu, name), getattr(ref, name), rtol=0, atol=1e-9,
                                   err_msg=name)

def test_statuses_per_series():
    period, n_times = 6, 60
    cube = _gappy_cube(n_times, period, 6, seed=3)
    cube[:, 0] = np.nan                                   # all missing
    cube[: n_times - 2 * period + 1, 1] = np.nan          # 2*period - 1 valid values
    cube[2::period, 2] = np.nan                           # one cycle-subseries empty
    cube[:, 3] = np.inf
    cube[3::period, 4] = np.nan
    cube[3, 4] = 1.0                                      # subseries with one value
    for engine in ("reference", "cpu"):
        res = stl(cube, period, engine=engine)
        assert list(res.status[:5]) == [StlStatus.ALL_MISSING, StlStatus.TOO_FEW_OBSERVATIONS,
                                        StlStatus.SUBSERIES_EMPTY, StlStatus.ALL_MISSING,
                                        StlStatus.OK]
        assert np.isnan(res.trend[:, :4]).all() and np.isnan(res.trend_slope[:4]).all()
        plus = stl(cube, period, flavor="stlplus", engine=engine)
        assert plus.status[4] == StlStatus.SUBSERIES_TOO_SHORT
        assert plus.status[5] == StlStatus.OK


def test_shapes_dtypes_nodata_and_dates():
    period, n_times = 12, 60
    rng = np.random.default_rng(1)
    t = np.arange(n_times)
    base = 1000 + 20 * t[:, None, None] + 300 * np.sin(2 * np.pi * t / period)[:, None, None]
    cube = (base + rng.integers(-50, 50, (n_times, 2, 3))).astype(np.int16)
    cube[5, 0, 1] = -9999
    res = stl(cube, period, nodata=-9999)
    assert res.seasonal.shape == (n_times, 2, 3) and res.trend_slope.shape == (2, 3)
    assert res.seasonal.dtype == np.float64 and res.status.dtype == np.int8
    assert np.isnan(res.remainder[5, 0, 1]) and np.isfinite(res.trend[5, 0, 1])
    # trend slope per step ~ 20; with monthly dates ~ 240 per year
    assert np.all(np.abs(res.trend_slope - 20) < 3)
    dates = np.arange("2000-01", "2005-01", dtype="datetime64[M]").astype("datetime64[D]")
    yearly = stl(cube, period, nodata=-9999, dates=dates)
    step_years = np.diff(dates).astype(float).mean() / 365.25
    np.testing.assert_allclose(yearly.trend_slope, res.trend_slope / step_years, rtol=2e-2)
    decimal = stl(cube, period, nodata=-9999, dates=2000 + t / 12.0)
    np.testing.assert_allclose(decimal.trend_slope, res.trend_slope * 12, rtol=1e-9)
    np.testing.assert_allclose(res.seasonal_amplitude, 600, rtol=0.1)
    single = stl(cube.astype(np.float32)[:, 1, 2], period)
    assert single.seasonal.dtype == np.float32 and single.trend_slope.shape == ()
    np.testing.assert_allclose(single.trend, res.trend[:, 1, 2], rtol=1e-5)


def test_bad_arguments():
    y = np.random.default_rng(0).standard_normal(50)
    with pytest.raises(ValueError, match="engine"):
        stl(y, 12, engine="gpu")
    with pytest.raises(ValueError, match="flavor"):
        stl(y, 12, flavor="R")
    with pytest.raises(ValueError, match="2\\*period"):
        stl(y, 25)
    with pytest.raises(ValueError, match="period"):
        stl(y, 1)
    with pytest.raises(ValueError, match="period"):
        stl(y, 3, flavor="stlplus")
    with pytest.raises(ValueError, match="seasonal_deg"):
        stl(y, 12, seasonal_deg=3)
    with pytest.raises(ValueError, match="seasonal"):
        stl(y, 12, seasonal="weekly")
    with pytest.raises(TypeError, match="trend"):
        stl(y, 12, trend="long")
    with pytest.raises(ValueError, match="trend_jump"):
        stl(y, 12, trend_jump=0)
    with pytest.raises(ValueError, match="dates"):
        stl(y, 12, dates=np.arange(49.0))
    with pytest.raises(TypeError, match="data"):
        stl(np.array(["a"] * 50), 12)


def test_resolved_defaults():
    y = np.zeros(240)
    sm = stl(y, 23).params
    assert (sm.seasonal, sm.trend, sm.low_pass, sm.inner_iter, sm.outer_iter) == (7, 45, 25, 5, 0)
    assert stl(y, 12, seasonal=8).params.seasonal == 9  # made odd as in R's Fortran
    plus = stl(y, 24, flavor="stlplus", seasonal=7).params
    assert (plus.trend, plus.low_pass, plus.seasonal_jump, plus.trend_jump) == (41, 25, 1, 5)
    per = stl(y, 12, flavor="stlplus", seasonal="periodic", seasonal_deg=1).params
    assert per.periodic and per.seasonal == 2401 and per.seasonal_deg == 0 and per.trend == 17
    robust = stl(y, 12, robust=True).params
    assert (robust.inner_iter, robust.outer_iter) == (2, 15)
    # constant series: zero seasonal, constant trend, no crash with robustness
    flat = stl(np.full(60, 3.0), 6, robust=True)
    np.testing.assert_allclose(flat.trend, 3.0)
    np.testing.assert_allclose(flat.seasonal, 0.0, atol=1e-12)
    assert flat.status == StlStatus.OK
