"""BFAST Lite equals R ``bfast::bfastlite`` on every fixture case; cpu equals reference."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from tscube import BfastLiteStatus, bfast_lite

from conftest import bfast_series, read_fixture_text


@lru_cache(maxsize=1)
def lite_cases() -> list[dict]:
    return json.loads(read_fixture_text("r_bfastlite/cases.json"))["cases"]


def _case_kwargs(case: dict) -> dict:
    values, times, freq = bfast_series(case["series"])
    formula, breaks = case["formula"], case["breaks"]
    return dict(
        data=values, dates=times, freq=freq, order=case["order"] if "harmon" in formula else 0,
        trend="trend" in formula, season="season" in formula, h=case["h"],
        breaks=int(breaks) if str(breaks).isdigit() else breaks, level=case["level"], criteria=True,
    )


#: R's stops, and the status tscube gives the pixel instead.
R_ERRORS = {
    "minimum segment size must be greater than the number of regressors": BfastLiteStatus.SEGMENT_TOO_SHORT,
    "minimum segment size must be smaller than half the number of observations": BfastLiteStatus.TOO_FEW_OBSERVATIONS,
    "length of 'dimnames' [2] not equal to array extent": BfastLiteStatus.NO_ROOM_FOR_BREAK,
}


def _assert_matches_r(result, case):
    values, _, _ = bfast_series(case["series"])
    if case["status"] == "error":
        assert result.status == R_ERRORS[case["message"]]
        assert result.n_breaks == 0
        return
    if case["skipped_by_sctest"]:
        assert result.status == BfastLiteStatus.STABLE_BY_PRETEST
        assert result.n_breaks == 0
        np.testing.assert_allclose(result.pretest_p, case["sctest_p"], rtol=1e-8)
        return
    assert result.status == BfastLiteStatus.OK
    assert (result.n_obs, result.h_obs, result.max_breaks) == (case["n_obs"], case["h_obs"], case["max_breaks"])
    if case["sctest_p"] is not None:
        np.testing.assert_allclose(result.pretest_p, case["sctest_p"], rtol=1e-8)
    m = int(result.n_breaks)
    rows = np.flatnonzero(np.isfinite(values))
    breakpoints = [int(np.searchsorted(rows, i)) + 1 for i in result.break_index[:m]]  # R's 1-based rows
    assert breakpoints == case["breakpoints"]
    np.testing.assert_array_equal(result.break_time[:m], case["break_times"])
    names = case["coef_names"]
    coef = np.array([np.nan if v is None else v for v in case["coef"]]).reshape(m + 1, len(names))
    assert result.attrs["regressors"] == names
    # every coefficient, the seasonal ones included: the season columns hold R's own
    # contr.poly values (tscube.bfast.core.design.season_contrasts)
    ours = result.coefficients[: m + 1]
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(coef))
    np.testing.assert_allclose(ours, coef, rtol=1e-8, atol=1e-14)
    if case.get("magnitude") is not None:
        mags = np.array(case["magnitude"]).reshape(m, 6)
        np.testing.assert_allclose(result.magnitudes[:m], mags, rtol=1e-8, atol=1e-12)
        np.testing.assert_allclose(result.magnitude, case["mag_largest"], rtol=1e-8)
    # R's RSS triangle carries its own rounding (SPEC-bfastlite §3.3): compared loosely;
    # segments of h < 2k rows are nearly exact fits whose RSS (a residual or two) normal
    # equations lose up to 10 % of: the cpu engine's QR-based values are the exact least
    # squares there, and R's total over 20 such segments is 6e-4 from them
    rtol = 3e-3 if "season" in case["formula"] else (1e-3 if case["h_obs"] < 2 * case["nreg"] else 1e-4)
    for key, name in (("criteria_RSS", "rss"), ("criteria_BIC", "bic"), ("criteria_LWZ", "lwz")):
        expected = np.array(case[key])
        scale = np.abs(expected) if name == "rss" else np.abs(expected) + case["n_obs"]
        assert np.all(np.abs(getattr(result, name)[: expected.size] - expected) <= rtol * scale), name


def _cases(predicate):
    cases = [c for c in lite_cases() if predicate(c)]
    return pytest.mark.parametrize("case", cases, ids=[c["id"] for c in cases])


@_cases(lambda c: True)
def test_cpu_matches_r(case):
    _assert_matches_r(bfast_lite(**_case_kwargs(case), engine="cpu"), case)


@_cases(lambda c: "season" not in c["formula"] or (c["series"] == "som_b" and c["group"] == "grid" and c["h"] == 0.15)
        or (c["series"] == "ndvi" and c["h"] == 0.25 and str(c["breaks"]) == "2" and c["level"] == 0))
def test_reference_matches_r(case):
    """Every case but the seasonal-dummy ones on long or gappy series (the reference
    refits rank-deficient segment starts one by one: seconds per case), of which som_b's
    and ndvi's h = 0.25 two-break one run here (ndvi: 150 missing values, segments
    starting rank deficient by the hundred)."""
    _assert_matches_r(bfast_lite(**_case_kwargs(case), engine="reference"), case)


def planted_cube(n_pixels, n_dates, nan_fraction, seed, freq=23, max_breaks=3, noise=0.02):
    """Season-trend series with 0..max_breaks planted level shifts (at least 0.2 apart)."""
    rng = np.random.default_rng(seed)
    t = 2000 + np.arange(n_dates) / freq
    data = np.empty((n_dates, n_pixels))
    truth = []
    for p in range(n_pixels):
        y = 0.5 + 0.1 * np.sin(2 * np.pi * t + rng.uniform(0, 6)) + 0.002 * rng.normal() * np.arange(n_dates)
        n_b = rng.integers(0, max_breaks + 1)
        where = np.sort(rng.choice(np.arange(int(0.2 * n_dates), int(0.8 * n_dates), int(0.2 * n_dates)), n_b, replace=False)) if n_b else []
        for b in where:
            y[b:] += rng.choice([-1, 1]) * rng.uniform(0.1, 0.3)
        data[:, p] = y + rng.normal(0, noise, n_dates)
        truth.append(list(where))
    data[rng.random(data.shape) < nan_fraction] = np.nan
    return data, t, truth


def _assert_same(a, b, rtol=1e-7):
    np.testing.assert_array_equal(a.status, b.status)
    np.testing.assert_array_equal(a.n_breaks, b.n_breaks)
    np.testing.assert_array_equal(a.break_index, b.break_index)
    np.testing.assert_array_equal(a.break_time, b.break_time)
    np.testing.assert_array_equal(a.h_obs, b.h_obs)
    np.testing.assert_allclose(a.magnitudes, b.magnitudes, rtol=rtol, atol=1e-10)
    np.testing.assert_allclose(a.coefficients, b.coefficients, rtol=rtol, atol=1e-10)
    # the triangle by recursive updates (cpu) vs least squares (reference): ~1e-6 apart
    np.testing.assert_allclose(a.rss, b.rss, rtol=1e-5, atol=1e-12)
    np.testing.assert_allclose(a.pretest_p, b.pretest_p, rtol=1e-9)


@pytest.mark.parametrize("nan_fraction", [0.0, 0.5, 0.9])
@pytest.mark.parametrize("options", [dict(), dict(breaks="BIC", h=12, level=0.05), dict(order=1, trend=False, breaks=2)])
def test_cpu_equals_reference_on_random_cubes(nan_fraction, options):
    data, t, _ = planted_cube(12, 120, nan_fraction, seed=int(nan_fraction * 10) + len(options))
    data[:, 0] = np.nan  # all missing
    data[:, 1] = 0.3  # constant: an exact fit
    data[:40, 2] = np.nan  # short
    kwargs = dict(freq=23, criteria=True, **options)
    cpu = bfast_lite(data, t, engine="cpu", **kwargs)
    _assert_same(cpu, bfast_lite(data, t, engine="reference", **kwargs))
    # the constant series: an exact fit, decided before any pre-test (rounding noise over
    # rounding noise would give it a p-value that differs between machines)
    assert cpu.status[1] == BfastLiteStatus.PERFECT_FIT and np.isnan(cpu.pretest_p[1])


def test_cpu_equals_reference_with_season_dummies_and_gaps():
    data, t, _ = planted_cube(6, 100, 0.4, seed=9, freq=12)
    kwargs = dict(freq=12, order=0, season=True, h=0.25, criteria=True)
    _assert_same(bfast_lite(data, t, engine="cpu", **kwargs), bfast_lite(data, t, engine="reference", **kwargs), rtol=1e-6)


@pytest.mark.parametrize("nan_fraction, h, n_dates", [(0.0, 0.15, 275), (0.2, 0.15, 275), (0.5, 0.25, 275),
                                                      (0.9, 0.3, 1000)])
def test_cpu_equals_reference_where_segment_starts_run_side_by_side(nan_fraction, h, n_dates):
    """Segments of at least 3k rows of the default model: the cpu engine's starts run as
    SIMD lanes (:mod:`tscube.bfast.core.start_lanes_cpu`), each pixel with its own gaps."""
    data, t, _ = planted_cube(6, n_dates, nan_fraction, seed=3)
    kwargs = dict(freq=23, h=h, criteria=True)
    cpu = bfast_lite(data, t, engine="cpu", **kwargs)
    assert np.all(cpu.h_obs >= 3 * 8) and cpu.n_breaks.sum() > 0
    _assert_same(cpu, bfast_lite(data, t, engine="reference", **kwargs))


@pytest.mark.parametrize("nan_fraction", [0.0, 0.2, 0.5])
@pytest.mark.parametrize("options", [dict(h=12), dict(h=10, breaks="BIC"), dict(h=9, order=1, breaks=3),
                                     dict(h=30, order=0, season=True, breaks="BIC")])
def test_cpu_equals_reference_with_short_segments(nan_fraction, options):
    """Minimum segments shorter than 3k rows (R's h = 12 observations; trend + season at
    h = 30 < 72): segment starts from the sums, their first RSS from their residuals
    (``bai_perron_cpu.refined_rss``) where the plain ``y'y - b'X'y`` of so few residual
    degrees of freedom would lose it, R's recursion where the first rows are rank
    deficient or the Gram near singular."""
    data, t, _ = planted_cube(8, 230, nan_fraction, seed=17 + int(10 * nan_fraction), freq=23)
    kwargs = dict(freq=23, criteria=True, **options)
    cpu = bfast_lite(data, t, engine="cpu", **kwargs)
    assert np.all(cpu.status == BfastLiteStatus.OK) and cpu.n_breaks.sum() > 0
    assert np.all(cpu.h_obs < 3 * (4 if options.get("order") == 1 else 24 if options.get("season") else 8))
    ref = bfast_lite(data, t, engine="reference", **kwargs)
    if options.get("season"):  # rank-deficient starts' restricted residuals: R's recursion (cpu) against
        # least squares plus its correction (reference), 1e-4 apart (SPEC-bfastlite §10), as before
        np.testing.assert_allclose(cpu.rss, ref.rss, rtol=1e-4)
        ref.rss[...] = cpu.rss
    _assert_same(cpu, ref)


@pytest.mark.parametrize("k", [4, 6, 8, 9, 24])
def test_the_one_start_updates_sum_in_the_order_written(k):
    """``_update`` (the one-start Sherman–Morrison updates of every model but the default
    eight regressors) against the same arithmetic in Python, row by row: ``P x`` summed in
    the order of ``b``, then ``f``, the prediction from the sums, the RSS and the downdate.
    Bit for bit: the recorded steps are what the memo's replays read back."""
    from tscube.bfast.core import bai_perron_cpu as bp

    rng = np.random.default_rng(k)
    n, first, count = 6 * k, 3 * k, 2 * k
    X, y, mean = rng.normal(size=(n, k)), rng.normal(size=n), 0.25
    U = np.concatenate([np.zeros((1, k)), np.cumsum(X * (y - mean)[:, None], axis=0)])
    P0 = np.linalg.inv(X[:first].T @ X[:first])
    P, Px, out, steps = P0.copy(), np.zeros(k), np.zeros(count), np.zeros((count, k + 1))
    bp._update(X, np.arange(n), y, mean, U, 0, first, 1, count, 0.5, P, Px, out, steps, 0, True)
    Q, total = P0.tolist(), 0.5
    for c in range(count):
        x = X[first + c].tolist()
        px = [0.0] * k
        for b in range(k):
            for a in range(k):
                px[a] += Q[b][a] * x[b]
        f = 1.0
        for a in range(k):
            f += x[a] * px[a]
        inv_f = 1.0 / f
        pred = 0.0
        for a in range(k):
            pred += px[a] * (U[first + c, a] - U[0, a])
        err = (y[first + c] - mean) - pred
        total += err * (err * inv_f)
        assert steps[c].tolist() == px + [inv_f] and out[c] == total
        for a in range(k):
            for b in range(k):
                Q[a][b] -= (px[a] * inv_f) * px[b]
    assert P.tolist() == Q


@pytest.mark.parametrize("k", [1, 3, 8, 24])
def test_the_factor_kernels_do_the_plain_loops_arithmetic(k):
    """R's recursion's kernels (``_upper_inverse``, ``_rotate_rows``), written so that
    they vectorise, against the plain loops in Python: bit for bit. The inverse of the
    triangle, column by column by back substitution; a row rotated into the factor, one
    rotation at a time (a zero entry skipped)."""
    from tscube.bfast.core import bai_perron_cpu as bp

    rng = np.random.default_rng(k)
    R = np.triu(rng.normal(size=(k, k + 1))) + 2 * np.eye(k, k + 1)
    inverse = np.zeros((k, k))
    bp._upper_inverse(R, k, inverse)
    plain = [[0.0] * k for _ in range(k)]
    for c in range(k):
        plain[c][c] = 1.0 / R[c, c]
        for a in range(c - 1, -1, -1):
            s = 0.0
            for m in range(a + 1, c + 1):
                s += R[a, m] * plain[m][c]
            plain[a][c] = -s / R[a, a]
    assert inverse.tolist() == plain

    u = rng.normal(size=k + 1)
    u[k // 2] = 0.0
    G, g, v = R.copy(), R.tolist(), u.tolist()
    bp._rotate_rows(G, u, 0, k)
    for m in range(k):
        b = v[m]
        if b == 0.0:
            continue
        a = g[m][m]
        r = math.sqrt(a * a + b * b)
        inv = 1.0 / r
        c, s = a * inv, b * inv
        g[m][m], v[m] = r, 0.0
        for j in range(m + 1, k + 1):
            g[m][j], v[j] = c * g[m][j] + s * v[j], c * v[j] - s * g[m][j]
    assert G.tolist() == g and u.tolist() == v


def test_the_condition_bound_of_a_window_is_numpys():
    """``_well_conditioned`` (a start's first ``h < 3k`` rows: the bound that decides
    between the sums and R's recursion) against NumPy's 1-norm condition number of the
    window's Gram scaled to a unit diagonal, on windows from well conditioned to nearly
    collinear columns: the same decision wherever the number is not within 1e-6 of the
    bound, and both decisions met."""
    from tscube.bfast.core import bai_perron_cpu as bp

    rng = np.random.default_rng(11)
    n, k, h = 80, 24, 30
    decisions = set()
    for a in (0.1, 0.3, 0.5, 0.55, 0.6):
        # columns mixed by a unit upper triangle of -a above the diagonal: every equilibrated
        # pivot passes the sums' bound, the condition number grows as (1 + a)^k (the
        # near-singular Grams of R's 24-column season contrasts on short windows)
        X = rng.normal(size=(n, k)) @ (np.eye(k) - a * np.triu(np.ones((k, k)), 1))
        rows = np.arange(n)
        S, U, YY = np.zeros((n + 1, k, k)), np.zeros((n + 1, k)), np.zeros(n + 1)
        bp._prefix_sums(X, rows, rng.normal(size=n), n, S, U, YY)
        P, L = np.zeros((k, k)), np.zeros((k, k))
        for i in range(0, n - h, 5):
            if not bp._inverse_from_sums(S, i, i + h, P, L):
                continue  # pivots too small for the sums: the bound is not asked
            gram = X[i:i + h].T @ X[i:i + h]
            scale = 1 / np.sqrt(np.diag(gram))
            scaled = gram * np.outer(scale, scale)
            number = np.linalg.norm(scaled, 1) * np.linalg.norm(np.linalg.inv(scaled), 1)
            if abs(number / bp._SHORT_MAX_COND - 1) > 1e-6:
                decision = bp._well_conditioned(S, i, i + h, P, L)
                assert decision == (number <= bp._SHORT_MAX_COND)
                decisions.add(decision)
    assert decisions == {True, False}


def test_refined_rss_keeps_what_the_plain_sums_lose():
    """Twelve consecutive 16-day rows of the default design (8 columns): the plain
    ``y'y - b'X'y`` from the prefix sums of a 275-date series is off by up to 1e-4 of the
    least-squares RSS; the refined residuals are within 1e-9 of it."""
    from tscube.bfast.core import bai_perron_cpu as bp
    from tscube.bfast.core.design import build_design
    from tscube.timeaxis import build_time_axis

    t = 2000 + np.arange(275) / 23
    X = np.ascontiguousarray(build_design(build_time_axis(t, 23), 3, True).matrix)
    y = 0.5 + 0.2 * np.sin(2 * np.pi * t) + np.random.default_rng(3).normal(0, 0.02, t.size)
    n, k, h = t.size, X.shape[1], 12
    rows = np.arange(n)
    S, U, YY = np.zeros((n + 1, k, k)), np.zeros((n + 1, k)), np.zeros(n + 1)
    mean = bp._prefix_sums(X, rows, y, n, S, U, YY)
    P, L, scratch, u, beta = np.zeros((k, k)), np.zeros((k, k)), np.zeros(n), np.zeros(k), np.zeros(k)
    plain_error = refined_error = 0.0
    for i in range(0, n - h, 7):
        assert bp._inverse_from_sums(S, i, i + h, P, L) and bp._well_conditioned(S, i, i + h, P, L)
        exact = np.sum((y[i:i + h] - X[i:i + h] @ np.linalg.lstsq(X[i:i + h], y[i:i + h], rcond=None)[0]) ** 2)
        plain_error = max(plain_error, abs(bp._rss_from_sums(P, U, YY, i, i + h) - exact) / exact)
        refined = bp._first_rss(X, rows, y, mean, P, U, YY, i, i + h, scratch, u, beta)
        refined_error = max(refined_error, abs(refined - exact) / exact)
    assert plain_error > 1e-6 and refined_error < 1e-9


def test_wide_designs_take_the_exact_rank_test():
    """R's 22 season contrasts of 23 levels plus trend: 24-row windows missing a level
    whose Gram passes the pivot shortcut all the same (the rounding of a near-singular
    leading block). The rank test may send a full-rank window to R's recursion (which
    gives least squares there) but must never call a deficient one full rank, which
    would start it from the sums."""
    from tscube.bfast.core import bai_perron_cpu as bp
    from tscube.bfast.core.design import build_design
    from tscube.timeaxis import build_time_axis

    t = 2000 + np.arange(460) / 23
    X = np.ascontiguousarray(build_design(build_time_axis(t, 23), 0, True, season=True).matrix)
    k = X.shape[1]
    rng = np.random.default_rng(0)
    Q, L = np.zeros((k, t.size)), np.zeros((k, k))
    passed_shortcut = full = 0
    for _ in range(8):
        rows = np.flatnonzero(rng.random(t.size) >= 0.2).astype(np.int64)
        n = rows.size
        S, U, YY = np.zeros((n + 1, k, k)), np.zeros((n + 1, k)), np.zeros(n + 1)
        bp._prefix_sums(X, rows, rng.random(n), n, S, U, YY)
        for i in range(n - k + 1):
            exact = np.linalg.matrix_rank(X[rows[i:i + k]]) == k
            if bp.first_rows_full_rank(X, rows, i, Q, S, L):
                assert exact
                full += 1
            passed_shortcut += bool(not exact and bp._cholesky_of_sums(S, i, i + k, k, bp._SURELY_FULL_PIVOT, L))
    assert passed_shortcut > 0 and full > 0  # the windows the shortcut alone would have called full rank


@pytest.mark.parametrize("season", [True, False])
def test_givens_recursion_of_rank_deficient_starts(season):
    """Segment starts whose first k rows are rank deficient (season levels missing;
    harmonics observed a year apart, twice a year): R's recursion with its restricted
    residuals, by the Givens-updated factor (``bai_perron_cpu._givens_recursion``), gives
    the RSS of R's rule computed by refits of every prefix (the reference's closed form).
    Trend + season's restricted fits are ill-conditioned: R's own rounding reaches 7e-4
    there (SPEC-bfastlite §10), the refits of the cpu engine before this one 6e-4; a
    column kept or aliased against R's rule moves the RSS by percents."""
    from tscube.bfast.core import bai_perron_cpu as bp
    from tscube.bfast.core.bai_perron import segment_rss_triangle
    from tscube.bfast.core.design import build_design
    from tscube.timeaxis import build_time_axis

    rng = np.random.default_rng(5)
    t = 2000 + np.arange(300) / 23
    X = np.ascontiguousarray(build_design(build_time_axis(t, 23), 0 if season else 3, True, season=season).matrix)
    k, h = X.shape[1], 41 if season else 30
    keep = rng.random(t.size) >= (0.2 if season else 0.0)
    if not season:
        keep[100:250] = False
        keep[100:250:23] = keep[101:250:23] = True
    rows = np.flatnonzero(keep).astype(np.int64)
    n = rows.size
    y = 0.5 + 0.1 * np.sin(2 * np.pi * t[rows]) + 0.02 * rng.standard_normal(n) + 0.001 * np.arange(n)
    S, U, YY = np.zeros((n + 1, k, k)), np.zeros((n + 1, k)), np.zeros(n + 1)
    mean = bp._prefix_sums(X, rows, y, n, S, U, YY)
    exact = segment_rss_triangle(X[rows], y, h)
    P, Px, steps, Q, L = np.zeros((k, k)), np.zeros(k), np.zeros((1, k + 1)), np.zeros((k, t.size)), np.zeros((k, k))
    deficient = 0
    for i in range(n - h + 1):
        if bp.first_rows_full_rank(X, rows, i, Q, S, L):
            continue
        deficient += 1
        out = np.zeros(t.size)
        assert bp._givens_recursion(X, rows, y, mean, U, i, n - i, out, P, Px, steps)
        np.testing.assert_allclose(out[h - 1 - k:n - i - k], exact[i, i + h - 1:], rtol=2e-3 if season else 1e-9)
    assert deficient > (100 if season else 10)


def test_rank_deficient_starts_among_starts_side_by_side():
    """Pixels observed once a year, on the same date, for ten years in the middle of
    their series: the starts there have rank-deficient first rows (R's recursion, one
    start at a time) between starts fitted from the sums in lanes, which then move down
    into the free lanes."""
    data, t, _ = planted_cube(4, 690, 0.2, seed=21)
    data[300:530, :2] = np.nan
    data[300:530:23, :2] = 0.5 + 0.01 * np.arange(10)[:, None]
    design = np.column_stack([np.ones(690), t] + [f(2 * np.pi * j * t) for j in (1, 2, 3) for f in (np.sin, np.cos)])
    rows = np.flatnonzero(np.isfinite(data[:, 0]))
    stretch = np.searchsorted(rows, 300)
    assert np.linalg.matrix_rank(design[rows[stretch:stretch + 8]]) < 8
    kwargs = dict(freq=23, criteria=True)
    cpu = bfast_lite(data, t, engine="cpu", **kwargs)
    assert cpu.h_obs[0] <= stretch <= rows.size - cpu.h_obs[0]  # a segment can start there
    _assert_same(cpu, bfast_lite(data, t, engine="reference", **kwargs))


def test_written_out_lane_kernels_are_what_their_script_writes():
    script = Path(__file__).resolve().parents[1] / "tools" / "write_start_lanes.py"
    result = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_statuses_of_degenerate_pixels():
    data, t, _ = planted_cube(6, 92, 0.0, seed=2)
    data[:, 0] = np.nan
    data[:, 1] = 0.3
    data[20:, 2] = np.nan  # 20 observations: h = 3 <= k = 8
    result = bfast_lite(data, t, freq=23)
    assert list(result.status[:3]) == [BfastLiteStatus.ALL_MISSING, BfastLiteStatus.PERFECT_FIT,
                                       BfastLiteStatus.SEGMENT_TOO_SHORT]
    assert np.all(result.n_breaks[:3] == 0) and np.all(np.isnan(result.break_time[:, :3]))
    assert result.status_counts()["ALL_MISSING"] == 1
    assert bfast_lite(data[:, 3:4], t, freq=23, h=0.5).status[0] == BfastLiteStatus.NO_ROOM_FOR_BREAK  # n = 2h
    too_few = bfast_lite(data[:, 4:5], t, freq=23, h=50)
    assert too_few.status[0] == BfastLiteStatus.TOO_FEW_OBSERVATIONS


@pytest.mark.parametrize("engine", ["cpu", "reference"])
def test_values_whose_squares_overflow_are_flagged(engine):
    """|y| beyond 1e150: OVERFLOW, no crash and no break, in every selection; values just
    below are fitted as any others (scale does not move the breaks)."""
    data, t, _ = planted_cube(4, 120, 0.2, seed=5)
    data[:, 0] *= 1e160
    data[5, 1] = -1e200  # one value is enough
    data[:, 2] *= 1e149
    for breaks in ("LWZ", "all"):
        result = bfast_lite(data, t, freq=23, breaks=breaks, engine=engine)
        assert list(result.status[:2]) == [BfastLiteStatus.OVERFLOW] * 2
        assert np.all(result.n_breaks[:2] == 0) and np.all(result.break_index[:, :2] == -1)
        plain = bfast_lite(data[:, 2:4] / np.array([1e149, 1.0]), t, freq=23, breaks=breaks, engine=engine)
        np.testing.assert_array_equal(result.break_index[:, 2:4], plain.break_index[: result.break_index.shape[0]])


def test_planted_breaks_are_found():
    """Clean cloudy series (30 % missing, noise 0.02, shifts 0.1-0.3): every planted break
    found, none spurious, the first date after each within three valid dates of the shift."""
    data, t, truth = planted_cube(40, 230, 0.3, seed=11)
    result = bfast_lite(data, t, freq=23)
    assert np.all(result.status == BfastLiteStatus.OK)
    for p, planted in enumerate(truth):
        found = result.break_index[: result.n_breaks[p], p]
        assert len(found) == len(planted)
        valid = np.flatnonzero(np.isfinite(data[:, p]))
        after = np.searchsorted(valid, found, side="right")  # the first valid date after the break
        assert np.all(np.abs(after - np.searchsorted(valid, planted)) <= 3)


def test_outputs_shape_like_the_pixels():
    data, t, _ = planted_cube(6, 120, 0.2, seed=3)
    result = bfast_lite(data.reshape(120, 2, 3), t, freq=23, max_breaks=4)
    assert result.n_breaks.shape == (2, 3)
    assert result.break_time.shape == (4, 2, 3)
    assert result.magnitudes.shape == (4, 2, 3, 6)
    assert result.intercept.shape == result.slope.shape == (5, 2, 3)
    assert np.all(result.n_breaks <= 4)
    int16 = np.where(np.isnan(data), -3000, np.round(data * 1e4)).astype(np.int16)
    scaled = bfast_lite(int16, t, freq=23, nodata=-3000)
    plain = bfast_lite(np.where(np.isnan(data), np.nan, np.round(data * 1e4)), t, freq=23)
    np.testing.assert_array_equal(scaled.break_index, plain.break_index)


@pytest.mark.parametrize("kwargs, message", [
    (dict(h=1.5), "whole"),
    (dict(h=0), "fraction"),
    (dict(breaks="AIC"), "breaks must be"),
    (dict(breaks=1.5), "breaks must be"),
    (dict(season=True), "collinear"),
    (dict(level=1.5), "level"),
    (dict(max_breaks=0), "max_breaks"),
    (dict(engine="gpu"), "engine"),
])
def test_bad_parameters_raise(kwargs, message):
    data, t, _ = planted_cube(2, 60, 0.0, seed=1)
    with pytest.raises(ValueError, match=message):
        bfast_lite(data, t, freq=23, **kwargs)


def test_bad_input_raises():
    data, t, _ = planted_cube(2, 60, 0.0, seed=1)
    with pytest.raises(ValueError, match="dates"):
        bfast_lite(data[:50], t, freq=23)
    with pytest.raises(ValueError, match="duplicate|increasing"):
        bfast_lite(data, np.r_[t[:30], t[29:59]], freq=23)
    with pytest.raises(TypeError, match="dtype"):
        bfast_lite(data.astype(bool), t, freq=23)


def test_xarray_equals_numpy_and_keeps_the_grid():
    xr = pytest.importorskip("xarray")
    pytest.importorskip("dask")
    import pandas as pd

    data, _, _ = planted_cube(12, 120, 0.3, seed=1)
    dates = pd.date_range("2000-01-01", periods=120, freq="16D")
    da = xr.DataArray(data.reshape(120, 3, 4), dims=("time", "y", "x"),
                      coords={"time": dates, "y": [30.0, 20.0, 10.0], "x": [1.0, 2.0, 3.0, 4.0]}).chunk({"x": 2})
    ds = bfast_lite(da, criteria=True, max_breaks=3)
    assert ds["break_time"].dims == ("break", "y", "x") and ds.sizes["break"] == 3
    assert ds["intercept"].dims == ("segment", "y", "x") and ds.sizes["model"] == 4
    ds = ds.compute()
    expected = bfast_lite(data.reshape(120, 3, 4), dates, criteria=True, max_breaks=3)
    np.testing.assert_array_equal(ds["n_breaks"].values, expected.n_breaks)
    np.testing.assert_array_equal(ds["break_index"].values, expected.break_index)
    np.testing.assert_array_equal(ds["magnitude_rmsd"].values, expected.magnitude_of("rmsd"))
    np.testing.assert_array_equal(ds["slope"].values, expected.slope)
    np.testing.assert_array_equal(ds["lwz"].values, expected.lwz)
    np.testing.assert_array_equal(ds["y"].values, [30.0, 20.0, 10.0])
    assert ds.attrs["tscube_function"] == "bfast_lite"


def test_plots_show_every_break():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from tscube.plot import lite_maps, plot_lite_pixel, result_maps

    data, t, truth = planted_cube(12, 200, 0.2, seed=11)
    cube = data.reshape(200, 3, 4)
    result = bfast_lite(cube, t, freq=23)
    fig = lite_maps(result)
    assert len(fig.axes) == 6  # three maps and their colour bars
    assert result_maps(result).axes[0].get_title() == "number of breaks"
    fig = plot_lite_pixel(cube, t, x=1, y=0, freq=23)
    lines = [line.get_gid() for line in fig.axes[0].lines]
    n = int(result.n_breaks[0, 1])
    assert lines.count("break") == n and lines.count("fit") == n + 1
    assert fig.tscube_result.n_breaks[0] == n


def _shared_mask_cube(seed):
    """Pixels in runs that share their valid dates (gap-free, under one cloud mask, the
    same mask again after a different pixel), pixels with their own gaps between them,
    and an exact fit inside a run."""
    data, t, _ = planted_cube(40, 150, 0.0, seed=seed)
    rng = np.random.default_rng(seed)
    clouds = rng.random(150) < 0.3
    data[:, 12:24][clouds] = np.nan  # a run under one cloud mask
    own = data[:, 24:30]
    own[rng.random(own.shape) < 0.3] = np.nan  # each its own gaps
    data[:, 31][clouds] = np.nan  # the run's mask once more, after a different pixel
    data[:, 16] = np.where(clouds, np.nan, 0.4)  # an exact fit under the shared mask
    return data, t


@pytest.mark.parametrize("options", [dict(), dict(h=30), dict(breaks="BIC", h=40, order=2), dict(h=12),
                                     dict(h=14, order=1)])
def test_pixels_with_shared_valid_dates_equal_each_pixel_alone(options):
    """Pixels in a row with the same valid dates share the rows-only part of the RSS
    triangle (recorded by the second, replayed by the others): bit for bit what each
    pixel gets alone, where nothing is shared (``h=30``: recorded by the starts side by
    side in lanes; ``h=12`` and ``h=14, order=1``: first fits shorter than 3k rows, their
    RSS from their refined residuals, in lanes and one start at a time)."""
    data, t = _shared_mask_cube(seed=5)
    kwargs = dict(freq=23, criteria=True, engine="cpu", **options)
    together = bfast_lite(data, t, **kwargs)
    def pixel(array, p):  # pixels on axis 0 of 1-d outputs, else on axis 1
        return array[p] if array.ndim == 1 else array[:, p]

    for p in range(data.shape[1]):
        alone = bfast_lite(data[:, p:p + 1], t, **kwargs)
        for name in ("status", "n_breaks", "break_index", "break_time", "magnitudes", "coefficients", "rss",
                     "bic", "lwz"):
            got, want = pixel(getattr(together, name), p), pixel(getattr(alone, name), 0)
            if got.ndim:  # a break (or segment, or m) axis padded to the cube's largest
                rest = got[len(want):]
                assert np.all(np.isnan(rest) if rest.dtype.kind == "f" else rest == -1), name
                got = got[:len(want)]
            np.testing.assert_array_equal(got, want, err_msg=f"{name} of pixel {p}")
    assert (together.n_breaks > 0).sum() > 10 and together.status[16] == BfastLiteStatus.PERFECT_FIT
