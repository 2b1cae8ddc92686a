"""Stable-history selection (ROC, BP): cpu equals reference; planted history breaks are cut off."""

from __future__ import annotations

import numpy as np
import pytest

from tscube import BfastStatus, bfast_monitor
from tscube.bfast.core.bai_perron import segment_rss_triangle
from tscube.bfast.monitor.history._reference import rec_cusum_pvalue, recursive_residuals
from tscube.datasets import make_cube

from test_bfast_cpu import assert_same_result


def _cube_with_history_break(seed, nan_fraction=0.2, with_break=True):
    """180 dates, monitoring from date 150; a +0.4 level shift at date 60 for every pixel
    (BP needs at least 2 x 6k = 96 valid history observations)."""
    cube = make_cube("demo", shape=(3, 4), n_dates=180, n_history=150, nan_fraction=nan_fraction,
                     change_fraction=0.0, noise=0.02, seed=seed)
    data = cube.data.astype(np.float64)
    if with_break:
        data[60:] += 0.4
    return cube, data


@pytest.mark.parametrize("history", ["ROC", "BP"])
@pytest.mark.parametrize("with_break", [True, False])
def test_cpu_equals_reference(history, with_break):
    cube, data = _cube_with_history_break(seed=3, with_break=with_break)
    kwargs = dict(data=data, dates=cube.dates, start=cube.start, freq=23, history=history, return_process=True)
    assert_same_result(bfast_monitor(**kwargs, engine="cpu"), bfast_monitor(**kwargs, engine="reference"), rtol=1e-6)


@pytest.mark.parametrize("history", ["ROC", "BP"])
def test_history_starts_after_a_planted_break(history):
    cube, data = _cube_with_history_break(seed=5)
    result = bfast_monitor(data, cube.dates, cube.start, freq=23, history=history)
    assert np.all(result.status == BfastStatus.OK)
    # BP locates the shift (date 60); ROC's reversed CUSUM crosses its boundary a little
    # after the shift in reversed time, i.e. a few dates before it
    first = 58 if history == "BP" else 45
    assert np.all(result.history_start >= cube.time[first])
    full = bfast_monitor(data, cube.dates, cube.start, freq=23, history="all")
    assert np.all(result.n_history < full.n_history)


def test_roc_keeps_a_stable_history():
    cube, data = _cube_with_history_break(seed=6, with_break=False)
    roc = bfast_monitor(data, cube.dates, cube.start, freq=23, history="ROC")
    full = bfast_monitor(data, cube.dates, cube.start, freq=23, history="all")
    assert np.mean(roc.n_history == full.n_history) >= 0.75


def test_roc_is_the_default_and_level_pair():
    cube, data = _cube_with_history_break(seed=7)
    default = bfast_monitor(data, cube.dates, cube.start, freq=23)
    roc = bfast_monitor(data, cube.dates, cube.start, freq=23, history="ROC", level=(0.05, 0.05))
    np.testing.assert_array_equal(default.history_start, roc.history_start)
    assert default.attrs["history"] == "ROC"
    strict = bfast_monitor(data, cube.dates, cube.start, freq=23, history="ROC", level=(0.05, 1e-12))
    full = bfast_monitor(data, cube.dates, cube.start, freq=23, history="all")
    np.testing.assert_array_equal(strict.n_history, full.n_history)  # the ROC test never rejects


def test_roc_pixel_with_too_few_candidates():
    cube, data = _cube_with_history_break(seed=8)
    data[:145, 0, 0] = np.nan
    result = bfast_monitor(data, cube.dates, cube.start, freq=23, history="ROC", engine="cpu")
    assert result.status[0, 0] == BfastStatus.TOO_FEW_HISTORY
    reference = bfast_monitor(data, cube.dates, cube.start, freq=23, history="ROC", engine="reference")
    assert reference.status[0, 0] == BfastStatus.TOO_FEW_HISTORY


def test_recursive_residuals_equal_refits():
    """w_r = (y_r - x_r' b_{r-1}) / sqrt(1 + x_r' (X'X)^-1 x_r) with b from lstsq on rows < r."""
    rng = np.random.default_rng(0)
    X = np.column_stack([np.ones(30), np.linspace(-1, 1, 30), rng.normal(size=30)])
    y = rng.normal(size=30)
    expected = []
    for r in range(3, 30):
        b = np.linalg.lstsq(X[:r], y[:r], rcond=None)[0]
        f = 1 + X[r] @ np.linalg.inv(X[:r].T @ X[:r]) @ X[r]
        expected.append((y[r] - X[r] @ b) / np.sqrt(f))
    np.testing.assert_allclose(recursive_residuals(X, y), expected, rtol=1e-10)
    # and their squares add up to the RSS of the full fit (the BP table's identity)
    rss = segment_rss_triangle(X, y, 5)
    full_rss = np.sum((y - X @ np.linalg.lstsq(X, y, rcond=None)[0]) ** 2)
    np.testing.assert_allclose(rss[0, 29], full_rss, rtol=1e-10)
    np.testing.assert_allclose(np.sum(recursive_residuals(X, y) ** 2), full_rss, rtol=1e-10)


@pytest.mark.parametrize("model", ["season", "harmonics twice a year", "harmonics"])
def test_givens_residuals_equal_r_refits(model):
    """ROC's per-pixel recursive residuals by the Givens-updated factor
    (``bai_perron_cpu.givens_residuals``) equal R's refit of every rank-deficient prefix
    and R's updates after (``recursive_residuals``), forwards and reversed, on random gaps:
    the same signs, first full-rank fit and final coefficients. Season dummies' restricted
    fits are ill-conditioned (R's own rounding reaches 7e-4 there, SPEC-bfastlite §10; each
    of the two here lies up to 2.5e-3 of the largest residual from the reference's
    normal equations, on different rows);
    harmonics observed twice a year have many rank-deficient rows, whose column changes
    reorder the factor."""
    from tscube.bfast.core import bai_perron_cpu as bp
    from tscube.bfast.core.design import build_design
    from tscube.timeaxis import build_time_axis

    rng = np.random.default_rng(11)
    t = 2000 + np.arange(200) / 23
    season = model == "season"
    X = np.ascontiguousarray(build_design(build_time_axis(t, 23), 0 if season else 3, True, season=season).matrix)
    k = X.shape[1]
    deficient = 0
    for case in range(40):
        keep = rng.random(t.size) >= (0.2, 0.5)[case % 2]
        if model == "harmonics twice a year":
            keep[80:] = False
            keep[80::23] = keep[81::23] = True
        rows = np.flatnonzero(keep).astype(np.int64)
        n = rows.size
        y = 0.5 + 0.1 * np.sin(2 * np.pi * t[rows]) + 0.02 * rng.standard_normal(n) + 0.001 * np.arange(n)
        first, step = (n - 1, -1) if case % 4 < 2 else (0, 1)
        Q, R, P, Px = np.zeros((k, t.size)), np.zeros((k, k)), np.zeros((k, k)), np.zeros(k)
        idx, beta = np.zeros(k, dtype=np.int64), np.zeros(k)
        r_refits = np.zeros(n)
        full_at = bp.recursive_residuals(X, rows, y, first, step, n, r_refits, Q, R, idx, beta, P, Px, 1)
        givens, beta_givens = np.zeros(n), np.zeros(k)
        scratch = (np.zeros((k, k + 1)), R, np.zeros(k + 1), np.zeros(k, dtype=np.bool_),
                   *(np.zeros(k, dtype=np.int64) for _ in range(3)), np.zeros(k), beta_givens)
        assert bp.givens_residuals(X, rows, y, first, step, n, givens, 1, P, Px, *scratch) == full_at
        deficient += full_at > k
        w, expected = givens[:n - k], r_refits[:n - k]
        scale = np.abs(expected).max()
        np.testing.assert_allclose(w, expected, rtol=0, atol=(5e-3 if season else 1e-5) * scale)
        big = np.abs(expected) > 1e-2 * scale
        np.testing.assert_array_equal(np.sign(w[big]), np.sign(expected[big]))
        if full_at <= n:  # (else the refits' coefficients are a restricted fit of all rows but the last)
            np.testing.assert_allclose(beta_givens, beta, rtol=1e-6, atol=1e-9 * np.abs(beta).max())
    assert deficient >= {"season": 40, "harmonics twice a year": 20, "harmonics": 0}[model]  # (reversed: 20)


def test_rss_triangle_follows_r_on_rank_deficient_starts():
    """A segment whose first k rows are rank deficient (a column zero there): R's RSS is
    the sum of squared recursive residuals with the aliased column dropped until full rank,
    which exceeds least squares; the closed form equals that sum for every segment."""
    rng = np.random.default_rng(4)
    n = 24
    X = np.column_stack([np.ones(n), np.linspace(-1, 1, n), np.r_[np.zeros(6), rng.normal(size=n - 6)]])
    y = rng.normal(size=n)
    rss = segment_rss_triangle(X, y, 5)
    for i in range(n - 4):
        w = recursive_residuals(X[i:], y[i:])
        for j in range(i + 4, n):
            np.testing.assert_allclose(rss[i, j], np.sum(w[: j - i - 2] ** 2), rtol=1e-9)
    least_squares = np.sum((y[:12] - X[:12] @ np.linalg.lstsq(X[:12], y[:12], rcond=None)[0]) ** 2)
    assert rss[0, 11] > least_squares * (1 + 1e-6)


def test_rec_cusum_pvalue_is_continuous_and_decreasing():
    s = np.linspace(0.01, 3, 300)
    p = np.array([rec_cusum_pvalue(v) for v in s])
    assert np.all(np.diff(p) < 0) and p[0] == pytest.approx(1 - 0.1465 * 0.01)
    assert rec_cusum_pvalue(0.947898101732124) == pytest.approx(0.05, abs=2e-4)  # R's lambda


def test_cpu_roc_matches_reference_at_a_near_tie():
    """A pixel whose reversed Rec-CUSUM passes within 5e-5 of its boundary: Sherman–Morrison
    updates started from the nearly singular k-row fit used to cross there (history of 51
    dates instead of the reference's 49); the first fits are now solved exactly."""
    cube = make_cube("demo", shape=(2, 65), n_dates=112, n_history=29, nan_fraction=0.0,
                     seed=566312861, dtype=np.float64)
    pixel = cube.data[:, 0:1, 18:19]
    kwargs = dict(dates=cube.dates, start=cube.dates[106], freq=23, order=3, h=1.0, history="ROC")
    reference = bfast_monitor(pixel, engine="reference", **kwargs)
    cpu = bfast_monitor(pixel, engine="cpu", **kwargs)
    assert int(reference.n_history.ravel()[0]) == 49
    np.testing.assert_array_equal(cpu.n_history, reference.n_history)
    np.testing.assert_array_equal(cpu.history_start, reference.history_start)


def test_bp_that_cannot_run_is_flagged_and_keeps_the_full_history():
    """Fewer than 2 x 6k = 96 valid history observations: R stops; tscube keeps every
    candidate, monitors, and says so with BP_TOO_SHORT, in every cpu engine alike."""
    cube, data = _cube_with_history_break(seed=7, nan_fraction=0.0, with_break=False)
    data[:80, 0, :2] = np.nan  # 70 history observations left in two pixels
    data[:40, 1, 0] = np.nan  # 110 left: BP runs
    kwargs = dict(data=data, dates=cube.dates, start=cube.start, freq=23)
    got = {engine: bfast_monitor(**kwargs, history="BP", engine=engine) for engine in ("reference", "cpu")}
    assert_same_result(got["cpu"], got["reference"], rtol=1e-6)
    bp = got["cpu"]
    expected = np.full((3, 4), BfastStatus.OK)
    expected[0, :2] = BfastStatus.BP_TOO_SHORT
    np.testing.assert_array_equal(bp.status, expected)
    assert bp.status_counts() == {"OK": 10, "BP_TOO_SHORT": 2}
    full = bfast_monitor(**kwargs, history="all", engine="cpu")
    for name in ("history_start", "n_history", "magnitude", "break_index", "sigma"):
        np.testing.assert_array_equal(getattr(bp, name)[0, :2], getattr(full, name)[0, :2], err_msg=name)
    roc = bfast_monitor(**kwargs, history="ROC", engine="cpu")  # ROC has no such limit
    assert not np.any(roc.status == BfastStatus.BP_TOO_SHORT)


@pytest.mark.parametrize("nan_fraction", [0.0, 0.5, 0.9])
def test_cpu_roc_lanes_equal_reference(nan_fraction):
    """The cpu engine's ROC runs blocks of pixels as SIMD lanes (k <= 8): on 70 pixels
    (two full blocks and a partial one) with breaks planted at different dates inside the
    history, constant pixels, sparse pixels, two monitoring starts and designs of 2 to 8
    regressors (and 10, the per-pixel loop), exact and nearly exact season-trend fits
    (the perfect-fit check), it selects the same history as the reference."""
    cube = make_cube("demo", shape=(5, 14), n_dates=200, n_history=150, nan_fraction=nan_fraction,
                     noise=0.02, seed=11, dtype=np.float64)
    data = cube.data.copy()
    for j in range(6):
        data[30 + 15 * j:150, 0, j] += 0.3  # a shift inside the history
    data[:, 1, :4] = 0.5  # constant: an exact fit, nothing to test
    data[:100, 2, :5] = np.nan  # few candidates
    years = np.arange(200) / 23.0
    exact = 0.5 + 0.01 * years + 0.1 * np.sin(2 * np.pi * years)
    data[:, 3, :3] = exact[:, None]  # an exact season-trend fit (order >= 1), not constant
    noise = np.random.default_rng(3).standard_normal((200, 3))
    data[:, 3, 3:6] = exact[:, None] * (1 + 1e-5 * noise)  # nearly exact
    data[:, 3, 6:9] = np.where(np.isnan(cube.data[:, 3, 6:9]), np.nan, data[:, 3, 3:6])
    starts = [cube.dates[150], cube.dates[120]]
    for order in (0, 1, 3, 4):
        kwargs = dict(data=data, dates=cube.dates, start=starts, freq=23, order=order, history="ROC")
        cpu = bfast_monitor(**kwargs, engine="cpu")
        assert_same_result(cpu, bfast_monitor(**kwargs, engine="reference"), rtol=1e-6)
    if nan_fraction == 0.0:
        assert np.all(cpu.n_history[0, 0, :6] < 150)  # the shifts were cut off


@pytest.mark.parametrize("nan_fraction", [0.5, 0.9])
def test_cpu_roc_lanes_exact_fits_with_gaps_equal_reference(nan_fraction):
    """Constant and exact season-trend pixels under cloud masks (128 pixels: two blocks of
    lanes): an exact fit has nothing to test, as in the reference. The recursion's first
    solves on unevenly spaced rows carry rounding far above the perfect-fit threshold, so
    the check needs the RSS of the final fit, not the sum of the squared recursive
    residuals (which gave such pixels spurious history starts)."""
    cube = make_cube("demo", shape=(8, 16), n_dates=300, n_history=250, nan_fraction=nan_fraction,
                     noise=0.02, seed=4, dtype=np.float64)
    years = np.arange(300) / 23.0
    exact = 0.3 + 0.02 * years + 0.1 * np.sin(2 * np.pi * years) - 0.05 * np.cos(4 * np.pi * years)
    data = np.where(np.isnan(cube.data), np.nan, exact[:, None, None])
    data[:, :4] = np.where(np.isnan(cube.data[:, :4]), np.nan, 0.7)  # constant
    for order in (1, 2, 3):
        kwargs = dict(data=data, dates=cube.dates, start=cube.dates[250], freq=23, order=order, history="ROC")
        cpu = bfast_monitor(**kwargs, engine="cpu")
        reference = bfast_monitor(**kwargs, engine="reference")
        np.testing.assert_array_equal(cpu.n_history, reference.n_history)
        np.testing.assert_array_equal(cpu.history_start, reference.history_start)
        np.testing.assert_array_equal(cpu.status, reference.status)


def _yearly_candidates_cube(nan_fraction, seed, aliased_rows):
    """A 3 x 20-pixel cube of 330 dates (300 of history) whose ``aliased_rows`` keep only
    one date a year in their last ten years of history (equal harmonics), and a shift in
    five pixels' histories."""
    cube = make_cube("demo", shape=(3, 20), n_dates=330, n_history=300, nan_fraction=nan_fraction,
                     noise=0.02, seed=seed, dtype=np.float64)
    data = cube.data.copy()
    yearly = np.zeros(300, dtype=bool)
    yearly[300 - 23 * 10::23] = True
    sparse = np.arange(300) >= 300 - 23 * 10
    data[:300][sparse & ~yearly, aliased_rows] = np.nan
    data[100:300, 0, :5] += 0.3
    return cube, data


def test_cpu_roc_lanes_aliased_starts_equal_reference():
    """Pixels whose latest history candidates are one date a year apart (equal harmonics:
    the reversed recursion starts rank deficient for many rows, solved in order per lane)."""
    cube, data = _yearly_candidates_cube(0.0, 1, slice(0, 2))
    for order in (1, 3):
        kwargs = dict(data=data, dates=cube.dates, start=cube.dates[300], freq=23, order=order, history="ROC")
        assert_same_result(bfast_monitor(**kwargs, engine="cpu"), bfast_monitor(**kwargs, engine="reference"), rtol=1e-6)


def test_cpu_roc_pixels_left_to_the_per_pixel_loop_at_some_starts_equal_reference(monkeypatch):
    """Pixels whose first rows are rank deficient at one start and not at another: the
    lanes leave them to the per-pixel loop (a kernel of its own, run after the lanes on
    those pixels' columns) for that start only, and the results are the reference's."""
    from tscube.bfast.monitor.history import _cpu as history_cpu

    cube, data = _yearly_candidates_cube(0.1, 4, slice(1, 3))
    deferred = []
    per_pixel = history_cpu._per_pixel
    monkeypatch.setattr(history_cpu, "_per_pixel", lambda values, *args: deferred.append(values.shape[1])
                        or per_pixel(values, *args))
    kwargs = dict(data=data, dates=cube.dates, start=[cube.time[60], cube.time[300]], freq=23, history="ROC")
    cpu = bfast_monitor(**kwargs, engine="cpu")
    assert deferred == [40]  # rows 1 and 2 of the cube (3 x 20 pixels): aliased at the second start
    assert_same_result(cpu, bfast_monitor(**kwargs, engine="reference"), rtol=1e-6)


def test_lane_inverse_is_generated_and_solves_every_k():
    """The written-out exact solve of the ROC lanes is the generator's current output, and
    for every k <= 8 gives each lane the inverse and coefficients of its normal equations
    (identity past k), with ``S_OK`` = 0 on a lane with an aliased column."""
    from tscube.bfast.monitor.history import _cpu_lane_inverse_gen as _lane_inverse_gen
    from tscube.bfast.monitor.history._cpu_lane_inverse import inverse_lanes
    from tscube.bfast.monitor.history._cpu_lanes import LANES, S_BNEW, S_G, S_OK, S_PNEW, S_RHS, S_ROWS

    assert _lane_inverse_gen.TARGET.read_text() == _lane_inverse_gen.source()
    rng = np.random.default_rng(2)
    low = np.tril_indices(8)
    for k in range(1, 9):
        X = rng.standard_normal((LANES, 3 * k, k)) * np.logspace(0, 3, k)  # scaled columns
        X[1, :, k - 1] = X[1, :, 0]  # lane 1: an aliased column (k > 1)
        y = rng.standard_normal((LANES, 3 * k))
        S = np.zeros(S_ROWS * LANES)
        G = np.zeros((LANES, 8, 8))
        G[:, :k, :k] = np.einsum("qta,qtb->qab", X, X)
        rhs = np.zeros((LANES, 8))
        rhs[:, :k] = np.einsum("qta,qt->qa", X, y)
        S[S_G * LANES:(S_G + 36) * LANES] = G[:, low[0], low[1]].T.ravel()
        S[S_RHS * LANES:(S_RHS + 8) * LANES] = rhs.T.ravel()
        inverse_lanes(S, k)
        ok = S[S_OK * LANES:(S_OK + 1) * LANES]
        P = np.zeros((LANES, 8, 8))
        P[:, low[0], low[1]] = S[S_PNEW * LANES:(S_PNEW + 36) * LANES].reshape(36, LANES).T
        beta = S[S_BNEW * LANES:(S_BNEW + 8) * LANES].reshape(8, LANES).T
        good = np.arange(LANES) != 1 if k > 1 else np.ones(LANES, dtype=bool)
        assert np.all(ok[good] == 1.0) and (k == 1 or ok[1] == 0.0)
        expected = np.linalg.inv(G[good][:, :k, :k])
        np.testing.assert_allclose(P[good][:, :k, :k], np.tril(expected), rtol=1e-9, atol=1e-12 * np.abs(expected).max())
        np.testing.assert_array_equal(P[good][:, k:, k:], np.eye(8 - k)[None].repeat(good.sum(), 0))
        np.testing.assert_allclose(beta[good][:, :k], np.linalg.solve(G[good][:, :k, :k], rhs[good][:, :k, None])[..., 0], rtol=1e-8, atol=1e-12)
        assert np.all(beta[good][:, k:] == 0.0)


def test_bp_pixels_with_shared_valid_dates_equal_each_pixel_alone():
    """BP's triangles share their rows-only part between pixels in a row with the same
    valid dates (gap-free, under one cloud mask), for each of several starts: the same
    history starts and flags as each pixel alone."""
    rng = np.random.default_rng(11)
    cube, data = _cube_with_history_break(seed=8, nan_fraction=0.0)
    data = np.concatenate([data.reshape(180, -1)] * 4, axis=1)  # 48 pixels
    data += rng.normal(0, 0.02, data.shape)
    data[60:, ::3] -= 0.4  # some pixels without the shift
    clouds = rng.random(180) < 0.25
    data[:, 20:34][clouds] = np.nan
    own = data[:, 40:46]
    own[rng.random(own.shape) < 0.25] = np.nan
    starts = [cube.time[140], cube.start]
    together = bfast_monitor(data, cube.dates, starts, freq=23, history="BP")
    assert len(np.unique(together.history_start)) > 2
    for p in range(data.shape[1]):
        alone = bfast_monitor(data[:, p:p + 1], cube.dates, starts, freq=23, history="BP")
        np.testing.assert_array_equal(together.history_start[..., p], alone.history_start[..., 0], err_msg=str(p))
        np.testing.assert_array_equal(together.status[..., p], alone.status[..., 0], err_msg=str(p))
