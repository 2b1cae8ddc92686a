"""Season dummies on gappy histories: the fits that start rank deficient.

Where a history or a segment misses some cycle positions, R's recursive residuals (ROC,
Bai–Perron's segment RSS) and its segment fits keep the first contrast columns, and what
those predict for the missing positions follows R's ``contr.poly`` values: the season
columns hold them (``tests/test_season_contrasts.py``). On MODIS pixels with the gap
patterns of R's held-back checks (conftest's ``gappy_modis``) and on a gappy monthly
series: the cpu engine equals the reference (the cuda engine: ``cudasim/``); the cases
really start rank deficient; and R's values, not exact polynomials, decide there (with
the exact ones some history starts and break times move). R's own outputs on such
pixels: the ``ndvi`` fixture series (150 missing values), below and in
``test_bfast_monitor_ext.py`` / ``test_bfast_lite.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from tscube import BfastStatus, bfast_lite, bfast_monitor
from tscube.bfast.core import design as design_module
from tscube.bfast.core.design import build_design
from tscube.bfast.core.ols import deficient_prefix_residuals
from tscube.timeaxis import build_time_axis

from conftest import GAP_PATTERNS, ext_cases, ext_kwargs, gappy_modis
from test_bfast_cpu import assert_same_result
from test_bfast_lite import _assert_same as assert_same_lite
from test_season_contrasts import _exact_polynomials

START = 2009.0  # monitoring start: three years of monitoring, nine of history
MODELS = {"trend+season": True, "season": False}  # -> trend


def _exact_contrasts(monkeypatch):
    """Code the season dummies with exact orthonormal polynomials instead of R's values."""
    monkeypatch.setattr(design_module, "season_contrasts", _exact_polynomials)


def _deficient_start(X, y):
    """Whether the recursive residuals of ``X``, ``y`` start on rank-deficient prefixes."""
    return deficient_prefix_residuals(X, y)[0] > X.shape[1]


def _roc_candidates(data, times, trend, p):
    """The reversed ROC candidates of pixel ``p``: its valid rows before :data:`START`."""
    design = build_design(build_time_axis(times, 23), 0, trend, season=True)
    rows = np.flatnonzero(np.isfinite(data[:, p]) & (times < START))[::-1]
    return design.matrix[rows], data[rows, p]


@pytest.mark.parametrize("process", ["OLS-MOSUM", "OLS-CUSUM"])
@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("pattern", GAP_PATTERNS)
def test_roc_on_gappy_modis_cpu_equals_reference(pattern, model, process):
    """ROC history, season dummies, 25 MODIS pixels: identical statuses, history starts and
    breaks, floats to 1e-7; most pixels' reversed candidates start rank deficient."""
    data, times = gappy_modis(pattern, seed=1)
    kwargs = dict(data=data, dates=times, start=START, freq=23, order=0, trend=MODELS[model], season=True,
                  type=process, history="ROC", return_process=True)
    cpu = bfast_monitor(**kwargs, engine="cpu")
    assert_same_result(cpu, bfast_monitor(**kwargs, engine="reference"), rtol=1e-7)
    deficient = [p for p in range(data.shape[1]) if _deficient_start(*_roc_candidates(data, times, MODELS[model], p))]
    assert len(deficient) >= 10
    ok = cpu.status == BfastStatus.OK
    assert ok.sum() >= 15 and np.any(cpu.n_history[ok] < np.isfinite(data[times < START]).sum(axis=0)[ok])


def test_roc_starts_follow_rs_values(monkeypatch):
    """The same runs with exact polynomials in the season columns move some ROC history
    starts (R's held-back checks: by one or two observations), so the comparisons above
    see R's coding, not just any basis of the season space."""
    moved = 0
    for pattern in GAP_PATTERNS:
        data, times = gappy_modis(pattern, seed=1)
        kwargs = dict(start=START, freq=23, order=0, season=True, history="ROC", engine="cpu")
        ours = bfast_monitor(data, times, **kwargs).history_start
        with monkeypatch.context() as patch:
            _exact_contrasts(patch)
            exact = bfast_monitor(data, times, **kwargs).history_start
        moved += np.count_nonzero(ours != exact)
    assert moved >= 3


def _gappy_monthly(n_pixels=4, seed=4):
    """Monthly season-trend series, 20 years of history (a level shift after year 8, so
    that Bai–Perron breaks), three of monitoring, 20 % missing at random."""
    rng = np.random.default_rng(seed)
    n = 276
    t = 1990 + np.arange(n) / 12
    season = 0.2 * np.sin(2 * np.pi * t)[:, None] + 0.05 * np.cos(4 * np.pi * t)[:, None]
    data = 0.5 + season + 0.002 * np.arange(n)[:, None] + rng.normal(0, 0.02, (n, n_pixels))
    data[96:] += rng.choice([-0.2, 0.2], n_pixels)
    data[rng.random(data.shape) < 0.2] = np.nan
    return data, t


@pytest.mark.parametrize("model", list(MODELS))
def test_bp_history_with_season_dummies_cpu_equals_reference(model):
    """BP history (h = 6k rows) with season dummies on gappy monthly series: identical
    history starts, floats to 1e-7; segment starts rank deficient by the dozen."""
    data, t = _gappy_monthly()
    start = t[240]
    kwargs = dict(data=data, dates=t, start=start, freq=12, order=0, trend=MODELS[model], season=True,
                  history="BP", return_process=True)
    cpu = bfast_monitor(**kwargs, engine="cpu")
    assert_same_result(cpu, bfast_monitor(**kwargs, engine="reference"), rtol=1e-7)
    assert np.all(cpu.status == BfastStatus.OK)
    assert np.all(cpu.history_start >= t[90])  # after the shift, not before
    design = build_design(build_time_axis(t, 12), 0, MODELS[model], season=True)
    rows = np.flatnonzero(np.isfinite(data[:240, 0]))
    deficient = [i for i in range(rows.size - 6 * design.k)
                 if _deficient_start(design.matrix[rows[i:i + 3 * design.k]], data[rows[i:i + 3 * design.k], 0])]
    assert len(deficient) >= 12


#: BFAST Lite as R's held-back checks ran it on these patterns.
LITE = dict(order=0, trend=True, season=True, h=0.25, breaks=2, freq=23, criteria=True)


@pytest.mark.parametrize("pattern", GAP_PATTERNS)
def test_lite_on_gappy_modis_cpu_equals_reference(pattern):
    """BFAST Lite, trend + season, two breaks, 4 MODIS pixels (the reference refits every
    rank-deficient segment start: seconds per pixel): identical breaks, coefficients
    (NaN where R aliases) and magnitudes to 1e-6; the RSS of the rank-deficient starts'
    restricted residuals, where R's own rounding reaches 7e-4 (SPEC-bfastlite §10), to 1e-4."""
    data, times = gappy_modis(pattern, seed=1)
    pixels = data[:, [0, 4, 12, 20]]
    cpu = bfast_lite(pixels, times, engine="cpu", **LITE)
    ref = bfast_lite(pixels, times, engine="reference", **LITE)
    np.testing.assert_allclose(cpu.rss, ref.rss, rtol=1e-4)
    ref.rss[...] = cpu.rss  # compared above, loosely
    assert_same_lite(cpu, ref, rtol=1e-6)
    assert np.all(cpu.n_breaks == 2)
    design = build_design(build_time_axis(times, 23), 0, True, season=True)
    deficient = 0
    for p in range(pixels.shape[1]):
        rows = np.flatnonzero(np.isfinite(pixels[:, p]))
        starts = [0] + [int(np.searchsorted(rows, b)) + 1 for b in cpu.break_index[:2, p]]
        deficient += sum(_deficient_start(design.matrix[rows[s:]], pixels[rows[s:], p]) for s in starts)
    assert deficient >= 3


def test_lite_segments_missing_levels_have_r_aliased_coefficients(monkeypatch):
    """Segments that never see a cycle position: R aliases the last contrast (NaN); the
    intercept, the mean over all positions of what the kept columns fit, extrapolates to
    the missing one, so it depends on R's values (exact polynomials move it by 0.2 % and
    4 %; the trend stays), and with it the magnitudes. Both engines agree."""
    data, times = gappy_modis("random 20 %", seed=1)
    pixel = data[:, 5:6]
    cpu = bfast_lite(pixel, times, engine="cpu", **LITE)
    ref = bfast_lite(pixel, times, engine="reference", **LITE)
    aliased = np.isnan(cpu.coefficients[:, 0])
    assert aliased[:2, -1].all() and aliased.sum() == 2  # the first two segments miss a level
    np.testing.assert_array_equal(aliased, np.isnan(ref.coefficients[:, 0]))
    np.testing.assert_allclose(cpu.coefficients, ref.coefficients, rtol=1e-6, atol=1e-10)
    np.testing.assert_allclose(cpu.magnitudes, ref.magnitudes, rtol=1e-6, atol=1e-10)
    with monkeypatch.context() as patch:
        _exact_contrasts(patch)
        exact = bfast_lite(pixel, times, engine="cpu", **LITE)
    np.testing.assert_array_equal(exact.break_index, cpu.break_index)
    moved = np.abs(exact.coefficients[:2, 0, :2] / cpu.coefficients[:2, 0, :2] - 1)
    assert np.all(moved[:, 0] > 1e-3) and np.all(moved[:, 1] < 1e-9), moved


def test_lite_break_times_follow_rs_values(monkeypatch):
    """With exact polynomials in the season columns some of these pixels' break times move
    (as in R's held-back checks): R's values decide on gappy series."""
    moved = 0
    for pattern in GAP_PATTERNS:
        data, times = gappy_modis(pattern, seed=1)
        ours = bfast_lite(data, times, engine="cpu", **LITE)
        with monkeypatch.context() as patch:
            _exact_contrasts(patch)
            exact = bfast_lite(data, times, engine="cpu", **LITE)
        moved += np.count_nonzero(np.any(ours.break_index != exact.break_index, axis=0))
    assert moved >= 1


_NDVI_ROC = [c for c in ext_cases() if c["series"] == "ndvi" and c["history"] == "ROC" and "season" in c["formula"]
             and c["type"] in ("OLS-MOSUM", "OLS-CUSUM")]


@pytest.mark.parametrize("case", _NDVI_ROC[::4], ids=[c["id"] for c in _NDVI_ROC[::4]])
def test_r_fixture_roc_on_rank_deficient_prefixes(case):
    """R's own ROC on a gappy series: the ndvi fixture's reversed history candidates start
    rank deficient (45 of their first recursive residuals from restricted fits); history
    start, break and process equal R's on both engines."""
    kwargs = ext_kwargs(case)
    axis = build_time_axis(kwargs["dates"], kwargs["freq"])
    design = build_design(axis, 0, kwargs["trend"], season=True)
    rows = np.flatnonzero(np.isfinite(kwargs["data"]) & (axis.time < case["start_time"] - 1e-9))
    p, restricted = deficient_prefix_residuals(design.matrix[rows[::-1]], kwargs["data"][rows[::-1]])
    assert p - design.k == restricted.size == 45
    for engine in ("reference", "cpu"):
        result = bfast_monitor(**kwargs, return_process=True, engine=engine)
        assert result.status == BfastStatus.OK and result.history_start == case["history_start"]
        assert result.n_history == case["histsize"]
        assert (result.break_time == case["breakpoint"]) if case["breakpoint"] is not None else result.break_index == -1
        np.testing.assert_allclose(result.process[np.isfinite(result.process)], case["process"], rtol=1e-7, atol=1e-12)
