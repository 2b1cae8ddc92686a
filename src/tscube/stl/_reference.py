"""Reference engine of :func:`tscube.stl`: one series at a time, plain NumPy, for clarity.

Follows ``SPEC-stl.md``: part A (Cleveland's Fortran, as in statsmodels) for
``flavor="statsmodels"`` and part B (R stlplus) for ``flavor="stlplus"``. Both use
nearest-valid-neighbour windows: a loess at point ``m`` uses the ``q = min(window,
n_valid)`` valid points nearest to ``m``; without missing values these are exactly the
Fortran windows.
"""

from __future__ import annotations

import numpy as np

from ._params import STLPLUS_ZERO_WEIGHT, StlParams
from ._status import StlStatus

# A local polynomial system is treated as singular below this relative determinant.
SINGULAR_RTOL = 1e-12


#: Loess points evaluated together (a points x valid-values matrix per block bounds the
#: memory on long series).
POINTS_PER_BLOCK = 256


def _solve_local_polynomials(u, weights, values, degree, scale):
    """Weighted least-squares polynomials in ``u``: (value, slope) at ``u = 0``, one per
    row of ``u`` and ``weights`` (points x valid values).

    ``u`` is scaled by ``scale`` (each point's window half-width) so that the determinant
    test is relative. NaNs where the system is singular (too few distinct ``u`` with
    positive weight).
    """
    value = np.full(len(u), np.nan)
    slope = np.full(len(u), np.nan)
    total = weights.sum(axis=1)
    ok = total > 0.0
    u, weights, total, scale = u[ok], weights[ok], total[ok], scale[ok]
    if degree == 0:
        value[ok] = (weights * values).sum(axis=1) / total
        slope[ok] = 0.0
        return value, slope
    v = u / scale[:, None]
    size = degree + 1
    moments = [(weights * v**k).sum(axis=1) / total for k in range(2 * degree + 1)]
    gram = np.stack([np.stack([moments[i + j] for j in range(size)], axis=-1) for i in range(size)], axis=-2)
    rhs = np.stack([(weights * v**i * values).sum(axis=1) / total for i in range(size)], axis=-1)
    regular = np.abs(np.linalg.det(gram)) > SINGULAR_RTOL
    coef = np.linalg.solve(gram[regular], rhs[regular][:, :, None])[:, :, 0]
    rows = np.flatnonzero(ok)[regular]
    value[rows] = coef[:, 0]
    slope[rows] = coef[:, 1] / scale[regular]
    return value, slope


def _local_fits(x, y, w, points, window, degree, n_full, flavor):
    """Loess values (and slopes, for Hermite interpolation) at the positions ``points``.

    ``x`` are the sorted valid positions (1-based), ``y`` and ``w`` the values and
    robustness weights there, ``n_full`` the length of the full (gappy) series. Each point
    is fitted on its own; the points of a block are only computed side by side.
    """
    points = np.asarray(points, dtype=np.float64)
    fits = np.empty(len(points))
    slopes = np.empty(len(points))
    for first in range(0, len(points), POINTS_PER_BLOCK):
        block = slice(first, first + POINTS_PER_BLOCK)
        fits[block], slopes[block] = _local_fits_block(x, y, w, points[block], window, degree, n_full, flavor)
    return fits, slopes


def _local_fits_block(x, y, w, m, window, degree, n_full, flavor):
    n_valid = len(x)
    q = min(window, n_valid)
    distance = np.abs(x[None, :] - m[:, None])
    h = np.partition(distance, q - 1, axis=1)[:, q - 1]  # distance to the q-th nearest valid point
    if window > n_valid:
        extra = window - n_valid
        h = h + (extra / 2.0 if flavor == "stlplus" else extra // 2)
    with np.errstate(divide="ignore", invalid="ignore"):  # h = 0: such weights are not used
        scaled = (1.0 - (distance / h[:, None]) ** 3) ** 3
    if flavor == "stlplus":
        tricube = np.where(distance < h[:, None], scaled, 0.0)
        return _solve_local_polynomials(x[None, :] - m[:, None], tricube * w, y, degree, h)

    # Cleveland's Fortran (stlest): cut-offs at 0.001h / 0.999h, degree-0 fallback.
    tricube = np.where(distance <= 0.001 * h[:, None], 1.0, scaled)
    tricube = np.where(distance <= 0.999 * h[:, None], tricube, 0.0) * w
    total = tricube.sum(axis=1)
    value = np.full(len(m), np.nan)
    ok = total > 0.0
    tricube[ok] /= total[ok, None]
    value[ok] = (tricube[ok] * y).sum(axis=1)
    linear = ok & (h > 0.0) if degree > 0 else np.zeros(len(m), dtype=bool)
    if degree == 2 and linear.any():
        rows = np.flatnonzero(linear)
        quad, _ = _solve_local_polynomials(x[None, :] - m[rows, None], tricube[rows], y, 2, h[rows])
        solved = np.isfinite(quad)
        value[rows[solved]] = quad[solved]
        linear[rows[solved]] = False
    if linear.any():
        t = tricube[linear]
        mean = (t * x).sum(axis=1)
        spread = (t * (x - mean[:, None]) ** 2).sum(axis=1)
        wide = np.sqrt(spread) > 0.001 * (n_full - 1)
        rows = np.flatnonzero(linear)[wide]
        correction = (m[rows] - mean[wide]) / spread[wide]
        value[rows] = (t[wide] * y * (correction[:, None] * (x - mean[wide, None]) + 1.0)).sum(axis=1)
    return value, np.zeros(len(m))


def _hermite(t, m0, m1, f0, f1, s0, s1):
    delta = m1 - m0
    u = (t - m0) / delta
    return ((2 * u**3 - 3 * u**2 + 1) * f0 + (3 * u**2 - 2 * u**3) * f1
            + (u**3 - 2 * u**2 + u) * delta * s0 + (u**3 - u**2) * delta * s1)


def loess(x, y, w, n_full, window, degree, jump, flavor, extend=False):
    """Loess of the valid points ``(x, y)`` with weights ``w``, at positions ``1..n_full``.

    With ``extend``, also at ``0`` and ``n_full + 1`` (cycle-subseries smoothing); the
    result then has ``n_full + 2`` values, position ``0`` first.
    """
    jump = min(jump, max(n_full - 1, 1))
    points = list(range(1, n_full + 1, jump))
    if points[-1] != n_full:
        points.append(n_full)
    fits, slopes = _local_fits(x, y, w, points, window, degree, n_full, flavor)

    positions = np.arange(1, n_full + 1)
    if flavor == "statsmodels":
        # Fortran falls back to the raw value where all weights vanish; at a missing
        # position we take the value of the nearest valid point.
        bad = ~np.isfinite(fits)
        if bad.any():
            nearest = np.abs(x[None, :] - np.asarray(points)[bad][:, None]).argmin(axis=1)
            fits[bad] = y[nearest]
        out = np.interp(positions, points, fits) if jump > 1 else fits
    else:
        if jump == 1:
            out = fits
        else:
            keep = np.isfinite(fits)
            pts, f, s = np.asarray(points)[keep], fits[keep], slopes[keep]
            out = np.full(n_full, np.nan)
            for i in range(len(pts) - 1):
                seg = np.arange(pts[i], pts[i + 1] + 1)
                out[seg - 1] = _hermite(seg, pts[i], pts[i + 1], f[i], f[i + 1], s[i], s[i + 1])
            if len(pts) == 1:
                out[pts[0] - 1] = f[0]
    if not extend:
        return out
    first, last = _local_fits(x, y, w, [0, n_full + 1], window, degree, n_full, flavor)[0]
    if flavor == "statsmodels":
        first = out[0] if not np.isfinite(first) else first
        last = out[-1] if not np.isfinite(last) else last
    return np.concatenate([[first], out, [last]])


def _moving_average(x, length):
    csum = np.concatenate([[0.0], np.cumsum(x)])
    return (csum[length:] - csum[:-length]) / length


def _cycle_subseries(detrended, valid, rw, prm: StlParams):
    """Smoothed cycle-subseries, length ``n + 2*period`` (one cycle added at each end)."""
    n, period = len(detrended), prm.period
    out = np.empty(n + 2 * period)
    for j in range(period):
        idx = np.arange(j, n, period)
        ok = valid[idx]
        x = np.flatnonzero(ok) + 1.0
        y, w = detrended[idx][ok], rw[idx][ok]
        if prm.periodic and prm.flavor == "stlplus":
            smooth = np.full(len(idx) + 2, (w * y).sum() / w.sum())
        else:
            smooth = loess(x, y, w, len(idx), prm.seasonal, prm.seasonal_deg,
                           prm.seasonal_jump, prm.flavor, extend=True)
        out[j::period][: len(idx) + 2] = smooth
    return out


def _robustness_weights(residual, valid, flavor):
    r = np.abs(residual[valid])
    weights = np.ones(len(residual))
    if flavor == "stlplus":
        n = len(residual)
        mid1 = int(np.floor(n / 2 + 1))
        mid2 = n - mid1 + 1
        if len(r) < mid1:  # stlplus indexes past the end: h = NA, all weights 1
            return weights
        r_sorted = np.sort(r)
        h = 3.0 * r_sorted[[mid1 - 1, mid2 - 1]].sum() if mid1 != mid2 else 3.0 * r_sorted[mid1 - 1]
        with np.errstate(divide="ignore", invalid="ignore"):
            w = (1.0 - (r / h) ** 2) ** 2
        w = np.where(r <= 0.001 * h, 1.0, w)
        w = np.where(r >= 0.999 * h, 0.0, w)
        w = np.where(w == 0.0, STLPLUS_ZERO_WEIGHT, w)
        weights[valid] = w
        return weights
    nv = len(r)
    r_part = np.sort(r)
    cmad = 3.0 * (r_part[nv // 2] + r_part[nv - nv // 2 - 1])  # 6 x median
    if cmad == 0.0:
        return weights
    w = np.where(r <= 0.999 * cmad, (1.0 - (r / cmad) ** 2) ** 2, 0.0)
    weights[valid] = np.where(r <= 0.001 * cmad, 1.0, w)
    return weights


def series_status(valid, prm: StlParams) -> StlStatus:
    """Status of one series from its validity mask alone (before fitting)."""
    n_valid = int(valid.sum())
    if n_valid == 0:
        return StlStatus.ALL_MISSING
    if n_valid < 2 * prm.period:
        return StlStatus.TOO_FEW_OBSERVATIONS
    per_cycle = [int(valid[j::prm.period].sum()) for j in range(prm.period)]
    if min(per_cycle) == 0:
        return StlStatus.SUBSERIES_EMPTY
    if prm.flavor == "stlplus" and not prm.periodic and min(per_cycle) < prm.seasonal_deg + 1:
        return StlStatus.SUBSERIES_TOO_SHORT
    return StlStatus.OK


def decompose_series(y, prm: StlParams):
    """STL of one series with NaN for missing values.

    Returns ``(seasonal, trend, weights, status)``; components are all NaN unless the
    status is ``OK``.
    """
    y = np.asarray(y, dtype=np.float64)
    n = len(y)
    valid = np.isfinite(y)
    nan = np.full(n, np.nan)
    status = series_status(valid, prm)
    if status != StlStatus.OK:
        return nan, nan.copy(), nan.copy(), status
    stlplus = prm.flavor == "stlplus"
    positions = np.arange(1, n + 1, dtype=np.float64)
    x_valid = positions[valid]
    trend = np.zeros(n)
    seasonal = np.zeros(n)
    rw = np.ones(n)
    n_passes = prm.outer_iter + 1
    for pass_index in range(n_passes):
        for _ in range(prm.inner_iter):
            detrended = np.where(valid, y - trend, np.nan)
            cycle = _cycle_subseries(detrended, valid, rw, prm)
            smoothed = _moving_average(_moving_average(_moving_average(cycle, prm.period),
                                                       prm.period), 3)
            if stlplus:  # quirk: low-pass on valid positions only, robustness-weighted
                low = loess(x_valid, smoothed[valid], rw[valid], n, prm.low_pass,
                            prm.low_pass_deg, prm.low_pass_jump, prm.flavor)
            else:
                low = loess(positions, smoothed, np.ones(n), n, prm.low_pass,
                            prm.low_pass_deg, prm.low_pass_jump, prm.flavor)
            seasonal = cycle[prm.period: prm.period + n] - low
            deseasonalised = y - seasonal
            trend = loess(x_valid, deseasonalised[valid], rw[valid], n, prm.trend,
                          prm.trend_deg, prm.trend_jump, prm.flavor)
        # statsmodels updates the weights between passes; stlplus after every pass,
        # the last included (those are reported although no fit used them).
        if prm.outer_iter > 0 and (stlplus or pass_index < n_passes - 1):
            rw = _robustness_weights(y - seasonal - trend, valid, prm.flavor)
    if prm.periodic and not stlplus:  # R stl: seasonal replaced by its cycle means
        for j in range(prm.period):
            seasonal[j::prm.period] = seasonal[j::prm.period].mean()
    if not (np.isfinite(seasonal).all() and np.isfinite(trend).all()):
        return nan, nan.copy(), nan.copy(), StlStatus.FIT_FAILED
    return seasonal, trend, rw, StlStatus.OK


def decompose(data, prm: StlParams):
    """Reference engine: ``data`` is ``(n_series, T)`` float64 with NaN for missing."""
    n_series, n = data.shape
    seasonal = np.empty((n_series, n))
    trend = np.empty((n_series, n))
    weights = np.empty((n_series, n))
    status = np.empty(n_series, dtype=np.int8)
    for i in range(n_series):
        seasonal[i], trend[i], weights[i], status[i] = decompose_series(data[i], prm)
    return seasonal, trend, weights, status
