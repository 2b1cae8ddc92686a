"""cpu engine's block path (BLOCK series at a time, SIMD across series) with gaps: equal to
the reference engine for many gap patterns mixed in one block, both flavours; the lanes'
neighbourhoods equal the per-point search; gap-free series through the masked kernel
equal statsmodels."""

from __future__ import annotations

import numpy as np
import pytest
from statsmodels.tsa.stl._stl import STL

from tscube.stl import StlStatus, _cpu, stl


def _patterned_cube(n_times, period, n_series, seed):
    """Seasonal series with outliers and, per series, one gap pattern out of: none,
    0-70 % random, long gaps at the start, end or both, whole missing cycles, a burst of
    gaps, all missing, too few values, one empty cycle-subseries, a constant series."""
    rng = np.random.default_rng(seed)
    t = np.arange(n_times)[:, None]
    cube = (5 + 0.01 * t + np.sin(2 * np.pi * t / period + rng.uniform(0, 6, n_series))
            + 0.3 * rng.standard_t(3, (n_times, n_series)))
    for s in range(n_series):
        kind = s % 11
        y = cube[:, s]
        if kind == 1:
            y[rng.random(n_times) < rng.uniform(0, 0.7)] = np.nan
        elif kind == 2:
            y[: n_times // 3] = np.nan
        elif kind == 3:
            y[-(n_times // 3):] = np.nan
        elif kind == 4:
            y[: n_times // 5] = np.nan
            y[-(n_times // 5):] = np.nan
            y[rng.random(n_times) < 0.2] = np.nan
        elif kind == 5:
            y[period: 3 * period] = np.nan
        elif kind == 6:
            y[n_times // 2: n_times // 2 + period // 2] = np.nan
            y[rng.random(n_times) < 0.4] = np.nan
        elif kind == 7:
            y[:] = np.nan
        elif kind == 8:
            y[2 * period - 1:] = np.nan
        elif kind == 9:
            y[3::period] = np.nan
        elif kind == 10:
            y[:] = 0.0  # residuals exactly 0 (any other constant: rounding noise)
            y[rng.random(n_times) < 0.3] = np.nan
    cube[7, 0] = cube[20, 12] = 50.0  # outliers: robustness weights near 0
    return cube


CONFIGS = [
    dict(flavor="statsmodels", seasonal=7),
    dict(flavor="statsmodels", seasonal=9, seasonal_jump=2, trend_jump=3, low_pass_jump=2,
         robust=True, inner_iter=2, outer_iter=3),
    dict(flavor="statsmodels", seasonal=9, seasonal_deg=2, trend_deg=2, low_pass_deg=0,
         seasonal_jump=2, trend_jump=3, low_pass_jump=2, robust=True, inner_iter=1,
         outer_iter=2),
    dict(flavor="statsmodels", seasonal=7, trend=131, low_pass=11),  # trend window > T
    dict(flavor="stlplus", seasonal=7),
    dict(flavor="stlplus", seasonal=11, robust=True, inner_iter=1, outer_iter=3),
    dict(flavor="stlplus", seasonal=9, seasonal_deg=2, trend_deg=2, seasonal_jump=2,
         trend_jump=3, low_pass_jump=2, robust=True, inner_iter=2, outer_iter=1),
]


@pytest.mark.parametrize("kw", CONFIGS, ids=[str(i) for i in range(len(CONFIGS))])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_blocks_with_gaps_equal_reference(kw, dtype):
    n_times, period, n_series = 97, 8, 70  # odd length; two full blocks and a short one
    cube = _patterned_cube(n_times, period, n_series, seed=3).astype(dtype)
    ref = stl(cube, period, engine="reference", **kw)
    cpu = stl(cube, period, engine="cpu", **kw)
    np.testing.assert_array_equal(cpu.status, ref.status)
    for code in (StlStatus.OK, StlStatus.ALL_MISSING, StlStatus.TOO_FEW_OBSERVATIONS,
                 StlStatus.SUBSERIES_EMPTY):
        assert (ref.status == code).any(), code
    scale = float(np.nanmax(np.abs(cube)))
    rounding = 0.0 if dtype == np.float64 else np.finfo(dtype).eps  # of the float32 outputs
    for name in ("seasonal", "trend", "remainder", "weights", "trend_slope"):
        np.testing.assert_allclose(getattr(cpu, name), getattr(ref, name), rtol=rounding,
                                   atol=1e-9 * scale, err_msg=name)
        assert getattr(cpu, name).dtype == dtype


def test_lanes_of_one_block_with_very_different_gaps_equal_reference():
    """One block: gap-free lanes, lanes missing most values or long stretches at the
    ends, and all-NaN lanes side by side (the block's windows span the widest lane)."""
    n_times, period = 120, 12
    rng = np.random.default_rng(5)
    t = np.arange(n_times)[:, None]
    cube = 1 + np.cos(2 * np.pi * t / period + rng.uniform(0, 6, 32)) + 0.2 * rng.random((n_times, 32))
    for s in range(32):
        if s % 4 == 1:
            cube[rng.random(n_times) < 0.75, s] = np.nan
        elif s % 4 == 2:
            cube[: 40 + s, s] = np.nan
        elif s % 4 == 3 and s % 8 == 3:
            cube[:, s] = np.nan
    kw = dict(seasonal=11, seasonal_jump=2, trend_jump=2, low_pass_jump=2, robust=True,
              inner_iter=2, outer_iter=2)
    for flavor in ("statsmodels", "stlplus"):
        ref = stl(cube, period, engine="reference", flavor=flavor, **kw)
        cpu = stl(cube, period, engine="cpu", flavor=flavor, **kw)
        np.testing.assert_array_equal(cpu.status, ref.status)
        assert (ref.status == StlStatus.ALL_MISSING).sum() == 4
        for name in ("seasonal", "trend", "weights"):
            np.testing.assert_allclose(getattr(cpu, name), getattr(ref, name), rtol=0,
                                       atol=1e-9, err_msg=f"{flavor} {name}")


def test_weight_one_rule_of_wide_neighbourhoods_equals_reference():
    """Neighbourhoods with h >= 1000, where Fortran's weight 1 up to 0.001 h acts on
    integer distances >= 1, take the masked loess' row-by-row loop (the others its
    four-row pass without that rule): a gappy block with such a trend window equals the
    reference. (The rule itself moves a weight by < 3e-9 of it, below what the
    comparison can see.)"""
    n_times, period = 2300, 23
    rng = np.random.default_rng(8)
    t = np.arange(n_times)[:, None]
    cube = 2 + 1e-3 * t + np.sin(2 * np.pi * t / period + rng.uniform(0, 6, 5)) + 0.1 * rng.standard_normal((n_times, 5))
    cube[rng.random(cube.shape) < 0.3] = np.nan
    cube[: n_times // 2, 4] = np.nan  # a lane whose trend window widens past 1000
    kw = dict(seasonal=7, trend=2101, trend_jump=150, low_pass_jump=50, robust=True, outer_iter=1)
    ref = stl(cube, period, engine="reference", **kw)
    cpu = stl(cube, period, engine="cpu", **kw)
    np.testing.assert_array_equal(cpu.status, ref.status)
    assert (ref.status == StlStatus.OK).all()
    for name in ("seasonal", "trend", "weights"):
        np.testing.assert_allclose(getattr(cpu, name), getattr(ref, name), rtol=0, atol=1e-9, err_msg=name)


@pytest.mark.parametrize("flavor", ["statsmodels", "stlplus"])
def test_lane_neighbourhoods_equal_per_point_search(flavor):
    rng = np.random.default_rng(7)
    flavor_code = 1 if flavor == "stlplus" else 0
    for trial in range(60):
        n_full = int(rng.integers(1, 40))
        valid = rng.random(n_full) < rng.uniform(0.05, 1)
        valid[rng.integers(n_full)] = True
        xv = np.flatnonzero(valid).astype(np.int64) + 1
        nv = len(xv)
        window = int(rng.integers(1, 30)) * 2 + 1
        jump = int(rng.integers(1, 5))
        _, n_eval, n_total = _cpu._eval_counts(n_full, jump, True)
        nb_h = np.zeros((n_total, 2))
        nb_span = np.tile(np.array([[n_full + 2, -1]], dtype=np.int64), (n_total, 1))
        _cpu._lane_neighbourhoods(xv, 0, nv, n_full, window, jump, True, flavor_code, 1, nb_h,
                                  nb_span, 0)
        for e in range(n_total):
            m = _cpu._eval_position(e, n_eval, min(jump, max(n_full - 1, 1)), n_full)
            q = min(window, nv)
            lo, hi, nearest = _cpu._neighbourhood(xv, 0, nv, False, m, q)
            widen = max(window - nv, 0) * 0.5 if flavor == "stlplus" else max(window - nv, 0) // 2
            h = max(m - xv[lo], xv[hi - 1] - m) + widen
            assert nb_h[e, 1] == h, (trial, e)
            mask = np.zeros((2 * n_full + 5, 2))
            mask[3 + (xv - 1) * 2, 1] = 1.0
            if 1 <= m <= n_full:
                assert _cpu._nearest_valid(mask, 1, m, n_full, 3, 2) == 3 + (xv[nearest] - 1) * 2
            assert nb_span[e, 0] <= xv[lo] and nb_span[e, 1] >= xv[hi - 1]
            # every point of positive weight lies inside the lane's window
            r = np.abs(xv - m)
            inside = (xv >= xv[lo]) & (xv <= xv[hi - 1])
            assert (r[~inside] >= h).all()


@pytest.mark.parametrize("kw", [
    dict(seasonal=7),
    dict(seasonal=11, seasonal_jump=2, trend_jump=3, low_pass_jump=2, robust=True,
         inner_iter=2, outer_iter=3),
], ids=["plain", "robust-jumps"])
def test_gap_free_blocks_through_the_masked_kernel_equal_statsmodels(kw, monkeypatch):
    """Without tables (windows above TABLE_MAX_WINDOW) gap-free series take the masked
    kernel: still statsmodels' numbers."""
    monkeypatch.setattr(_cpu, "TABLE_MAX_WINDOW", 1)
    period, n_times = 12, 123
    rng = np.random.default_rng(9)
    t = np.arange(n_times)[:, None]
    cube = 10 + 0.02 * t + 2 * np.sin(2 * np.pi * t / period) + rng.standard_t(3, (n_times, 40))
    ours = stl(cube, period, **kw)
    fit_kw = dict(inner_iter=kw.pop("inner_iter", None), outer_iter=kw.pop("outer_iter", None))
    for s in (0, 17, 39):
        res = STL(cube[:, s], period=period, **kw).fit(**fit_kw)
        scale = np.abs(cube[:, s]).max()
        np.testing.assert_allclose(ours.seasonal[:, s], res.seasonal, rtol=0, atol=1e-12 * scale)
        np.testing.assert_allclose(ours.trend[:, s], res.trend, rtol=0, atol=1e-12 * scale)
        np.testing.assert_allclose(ours.weights[:, s], res.weights, rtol=0, atol=1e-12)


@pytest.mark.parametrize("kw", [
    dict(seasonal=9, seasonal_jump=2, trend_jump=3, low_pass_jump=2),
    dict(seasonal=7, seasonal_deg=0, robust=True, inner_iter=1, outer_iter=3),
], ids=["jumps", "robust"])
def test_gap_free_stlplus_blocks_through_the_tables_equal_reference(kw):
    """Gap-free blocks of the stlplus flavour use the loess tables (fits and slopes)."""
    period, n_times = 6, 67
    rng = np.random.default_rng(13)
    t = np.arange(n_times)[:, None]
    cube = 3 + np.sin(2 * np.pi * t / period + rng.uniform(0, 6, 36)) + rng.standard_t(
        3, (n_times, 36))
    ref = stl(cube, period, engine="reference", flavor="stlplus", **kw)
    cpu = stl(cube, period, engine="cpu", flavor="stlplus", **kw)
    np.testing.assert_array_equal(cpu.status, ref.status)
    assert (ref.status == StlStatus.OK).all()
    for name in ("seasonal", "trend", "weights"):
        np.testing.assert_allclose(getattr(cpu, name), getattr(ref, name), rtol=0, atol=1e-9,
                                   err_msg=name)


@pytest.mark.parametrize("flavor", ["statsmodels", "stlplus"])
def test_series_too_long_for_blocks_go_one_by_one_with_the_same_result(flavor, monkeypatch):
    """Above BLOCK_MAX_BYTES series take the per-series path (the cuda engine's code):
    same statuses and components as the blocks."""
    cube = _patterned_cube(97, 8, 40, seed=17)
    kw = dict(flavor=flavor, seasonal=9, seasonal_jump=2, trend_jump=3, low_pass_jump=2,
              robust=True, inner_iter=2, outer_iter=2)
    blocks = stl(cube, 8, **kw)
    monkeypatch.setattr(_cpu, "BLOCK_MAX_BYTES", 0)
    one_by_one = stl(cube, 8, **kw)
    np.testing.assert_array_equal(one_by_one.status, blocks.status)
    assert (blocks.status == StlStatus.OK).sum() >= 25
    for name in ("seasonal", "trend", "weights"):
        np.testing.assert_allclose(getattr(one_by_one, name), getattr(blocks, name), rtol=0,
                                   atol=1e-9 * np.nanmax(np.abs(cube)), err_msg=name)
