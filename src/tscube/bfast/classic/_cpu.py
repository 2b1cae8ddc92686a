"""cpu engine of classic BFAST: one numba kernel, pixels in parallel, each pixel's
iterations until it converges.

Per pixel, the steps of the reference (:mod:`tscube.bfast.classic._reference`) with
per-thread buffers: the valid observations compacted; per iteration the trend step and
the seasonal step, each an OLS fit and pre-test, the Bai–Perron programme of
:mod:`tscube.bfast.core.bai_perron_cpu` (BFAST Lite's and ``history="BP"``'s) with BIC,
the segment fits and R's intervals (:mod:`.confint`); then the magnitudes. Every pixel
with the same valid dates (a gap-free cube: all of them) has the same designs, so each
design keeps a triangle memo per thread: the rows-only part of its segments' RSS is
recorded once and replayed for every later pixel and iteration at O(k) per update. The
periodic STL start comes from the batched :func:`tscube.stl` before the kernel.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ..._jit import jit
from ..._threads import run_tasks, task_count
from ..core.bai_perron_cpu import breaks_of, minus_2_loglik, optimal_partitions, qr_fit_in_order, triangle_memo
from ..core.inputs import invalid_mask, kernel_nodata
from ..core.series_cpu import compact_valid
from ..lite.plan import MOSUM_PRETEST_H, MOSUM_PRETEST_P, MOSUM_PRETEST_TABLE
from .confint import break_interval
from .plan import TEST_TYPES, ClassicPlan
from .pretest import pretest_pvalue
from .result import empty_classic_outputs
from .start import start_seasonal
from .status import OVERFLOW_VALUE, BfastClassicStatus

_OK = int(BfastClassicStatus.OK)
_MAX_ITER = int(BfastClassicStatus.MAX_ITER)
_SEGMENT_TOO_SHORT = int(BfastClassicStatus.SEGMENT_TOO_SHORT)
_PERFECT_FIT = int(BfastClassicStatus.PERFECT_FIT)
_OVERFLOW = int(BfastClassicStatus.OVERFLOW)


@jit()
def _scratch(n_times, k, max_m):
    """One design's per-thread buffers: QR and update scratch, prefix sums, the
    programme (one lane), segment coefficients, and the triangle memo."""
    return (np.empty((k, n_times)), np.empty((k, k)), np.empty(k, dtype=np.int64), np.empty(k), np.empty((k, k)),
            np.empty(k), np.empty((n_times + 1, k, k)), np.empty((n_times + 1, k)), np.empty(n_times + 1),
            np.empty((max_m + 1, n_times, 1)), np.empty((max_m + 1, n_times, 1), dtype=np.int64),
            np.empty((max_m + 1, k)), triangle_memo(n_times, k))


@jit()
def _residuals(X, rows, y, n, beta, e):
    """``e = y - X beta`` on the ``n`` compacted rows."""
    k = X.shape[1]
    for i in range(n):
        v = y[i]
        for a in range(k):
            v -= X[rows[i], a] * beta[a]
        e[i] = v


@jit()
def _mean_square_change(X, rows, first, stop, before, after):
    """``delta' Q delta`` of rows ``first..stop-1``: the mean square of the difference of
    two segment fits there (``delta = after - before``, ``Q = X'X / n_s``)."""
    k = X.shape[1]
    total = 0.0
    for i in range(first, stop):
        d = 0.0
        for a in range(k):
            d += X[rows[i], a] * (after[a] - before[a])
        total += d * d
    return total / (stop - first)


@jit()
def _joint_harmonic_fit(Xh, rows, y, n, breaks, m, ones, w, Q, R, idx, beta, P, fitted):
    """Fitted values of R's ``y ~ (harmonics) %in% breakfactor(bp)`` (one intercept, the
    harmonics per segment): with each segment's projection M_s off its harmonics, the
    intercept is ``sum 1'M_s y / sum 1'M_s 1`` and the segments' coefficients follow
    from their fits of ``y`` and of ``1``."""
    k = Xh.shape[1]
    beta_one = np.empty((m + 1, k))
    num = 0.0
    den = 0.0
    for s in range(m + 1):
        first = 0 if s == 0 else breaks[s - 1] + 1
        stop = n if s == m else breaks[s] + 1
        qr_fit_in_order(Xh, rows, ones, first, 1, stop - first, Q, R, idx, beta, P)
        for a in range(k):
            beta_one[s, a] = beta[a]
        _residuals(Xh, rows[first:], ones[first:], stop - first, beta, w)
        qr_fit_in_order(Xh, rows, y, first, 1, stop - first, Q, R, idx, beta, P)
        _residuals(Xh, rows[first:], y[first:], stop - first, beta, fitted[first:])
        for i in range(stop - first):
            num += w[i] * fitted[first + i]
            den += w[i] * w[i]
    c = num / den
    for s in range(m + 1):
        first = 0 if s == 0 else breaks[s - 1] + 1
        stop = n if s == m else breaks[s] + 1
        qr_fit_in_order(Xh, rows, y, first, 1, stop - first, Q, R, idx, beta, P)
        for i in range(first, stop):
            v = c
            for a in range(k):
                v += Xh[rows[i], a] * (beta[a] - c * beta_one[s, a])
            fitted[i] = v


@jit()
def _component(X, rows, y, n, h_frac, level, asked, test, table, table_h, table_p, scratch, w, e,
               breaks, confint, fitted, Xh, ones):
    """One component's step (reference ``component_step``): returns ``(m, p)``, the
    number of breaks (into ``breaks``, intervals into ``confint``, the fitted component
    into ``fitted``) and the pre-test's p-value, or ``(-status, p)`` where R stops.
    ``Xh``: the harmonic columns of a model with a shared intercept (None: segment-wise
    fits)."""
    Q, R, idx, beta, P, Px, S, U, YY, best, arg, seg_beta, memo = scratch
    k = X.shape[1]
    kept = qr_fit_in_order(X, rows, y, 0, 1, n, Q, R, idx, beta, P)
    _residuals(X, rows, y, n, beta, e)
    y_scale = 0.0
    for i in range(n):
        y_scale = max(y_scale, abs(y[i]))
    p = pretest_pvalue(e, n, kept, y_scale, h_frac, test, table, table_h, table_p)
    if math.isnan(p):
        return -_PERFECT_FIT, p
    m = 0
    if p <= level:
        h = int(math.floor(n * h_frac))
        if h <= k:
            return -_SEGMENT_TOO_SHORT, p
        M = -(-n // h) - 2
        if asked >= 0:
            M = min(asked, M)
        optimal_partitions(X, rows, y, n, h, M, best, arg, 0, w, Q, R, idx, beta, P, Px, S, U, YY, memo)
        if asked >= 0:
            m = M
        else:
            penalty = math.log(n) * (k + 1)
            best_bic = math.inf
            for j in range(M + 1):
                bic = minus_2_loglik(best[j, n - 1, 0], n) + penalty * (j + 1)
                if bic < best_bic:
                    best_bic = bic
                    m = j
            m = max(m, 1)  # R: breakpoints(bp, breaks = NULL) takes length(NA) = 1 break
        breaks_of(arg, m, n, breaks)
    if m == 0:
        for i in range(n):
            fitted[i] = y[i] - e[i]
        return 0, p
    rss = 0.0
    for s in range(m + 1):
        first = 0 if s == 0 else breaks[s - 1] + 1
        stop = n if s == m else breaks[s] + 1
        qr_fit_in_order(X, rows, y, first, 1, stop - first, Q, R, idx, beta, P)
        for a in range(k):
            seg_beta[s, a] = beta[a]
        _residuals(X, rows[first:], y[first:], stop - first, beta, e[first:])
        for i in range(first, stop):
            fitted[i] = y[i] - e[i]
            rss += e[i] * e[i]
    for r in range(m):
        first = 0 if r == 0 else breaks[r - 1] + 1
        stop = n if r + 1 == m else breaks[r + 1] + 1
        q1 = _mean_square_change(X, rows, first, breaks[r] + 1, seg_beta[r], seg_beta[r + 1])
        q2 = _mean_square_change(X, rows, breaks[r] + 1, stop, seg_beta[r], seg_beta[r + 1])
        break_interval(breaks[r], rss / n, q1, q2, confint[r])
    if Xh is not None:
        _joint_harmonic_fit(Xh, rows, y, n, breaks, m, ones, w, Q, R, idx, beta, P, fitted)
    return m, p


@jit()
def _full_position(rows, n, index):
    """A 0-based position on the valid observations on the full series (beyond the
    data: extended from the first or last valid date); NaN stays NaN."""
    if index != index:
        return index
    inside = min(max(int(index), 0), n - 1)
    return rows[inside] + (index - inside)


@jit()
def _same_breaks(a, m_a, b, m_b):
    if m_a != m_b:
        return False
    for i in range(m_a):
        if a[i] != b[i]:
            return False
    return True


@jit(nogil=True)
def _classic_kernel(task, n_tasks, values, nodata, has_nodata, start, Xt, Xs, Xh, h_frac, level_t, level_s,
                    asked_t, asked_s, test, max_iter, table, table_h, table_p, max_m,
                    status, n_iter, magnitude, magnitude_index, magnitudes, trend_out, seasonal_out, remainder_out,
                    n_trend, trend_index, trend_ci, trend_p, n_season, season_index, season_ci, season_p,
                    iter_trend, iter_season):
    """Pixels ``task``/``n_tasks`` of the cube (a task of :func:`tscube._threads.run_tasks`).

    ``values`` (T, P) any numeric dtype; ``start`` (T, P) the STL start's seasonal;
    ``status`` holds the start's verdict on entry. ``Xt``, ``Xs``: the trend and seasonal
    designs (``Xs`` None: no seasonal model); ``Xh``: the harmonic columns of ``Xs``
    when its segments share the intercept, else None. ``asked_*``: breaks asked for (-1:
    BIC); ``test``: :data:`TEST_TYPES` index. Outputs as :func:`empty_classic_outputs`."""
    T, P = values.shape
    seasonal_model = Xs is not None
    ks = Xs.shape[1] if seasonal_model else 1
    trend_scratch = _scratch(T, Xt.shape[1], max_m)
    season_scratch = _scratch(T, ks, max_m)
    series = np.empty(T)
    rows = np.empty(T, dtype=np.int64)
    y = np.empty(T)
    comp = np.empty(T)
    w = np.empty(T)
    e = np.empty(T)
    ones = np.ones(T)
    trend = np.empty(T)
    seasonal = np.empty(T)
    tb = np.empty(T, dtype=np.int64)
    sb = np.empty(T, dtype=np.int64)
    prev_tb = np.empty(T, dtype=np.int64)
    prev_sb = np.empty(T, dtype=np.int64)
    tci = np.empty((T, 2))
    sci = np.empty((T, 2))
    for p in range(task * P // n_tasks, (task + 1) * P // n_tasks):
        if status[p] != _OK:
            continue
        for t in range(T):
            series[t] = np.float64(values[t, p])
        n = compact_valid(series, T, nodata, has_nodata, rows, y)
        too_large = False
        for i in range(n):
            too_large |= abs(y[i]) > OVERFLOW_VALUE
        if too_large:
            status[p] = _OVERFLOW
            continue
        for i in range(n):
            seasonal[i] = start[rows[i], p] if seasonal_model else 0.0
        m_t = m_s = 0
        prev_mt = prev_ms = 0
        p_t = p_s = math.nan
        failed = 0
        converged = False
        it = 0
        while it < max_iter:
            for i in range(n):
                comp[i] = y[i] - seasonal[i]
            m_t, p_t = _component(Xt, rows, comp, n, h_frac, level_t, asked_t, test, table, table_h, table_p,
                                  trend_scratch, w, e, tb, tci, trend, None, ones)
            if m_t < 0:
                failed = -m_t
                break
            if seasonal_model:
                for i in range(n):
                    comp[i] = y[i] - trend[i]
                m_s, p_s = _component(Xs, rows, comp, n, h_frac, level_s, asked_s, test, table, table_h, table_p,
                                      season_scratch, w, e, sb, sci, seasonal, Xh, ones)
                if m_s < 0:
                    failed = -m_s
                    break
            if it < iter_trend.shape[0]:
                for j in range(m_t):
                    iter_trend[it, j, p] = rows[tb[j]]
                for j in range(m_s):
                    iter_season[it, j, p] = rows[sb[j]]
            it += 1
            if _same_breaks(tb, m_t, prev_tb, prev_mt) and _same_breaks(sb, m_s, prev_sb, prev_ms):
                converged = True
                break
            for j in range(m_t):
                prev_tb[j] = tb[j]
            for j in range(m_s):
                prev_sb[j] = sb[j]
            prev_mt = m_t
            prev_ms = m_s
        n_iter[p] = it
        if failed:
            status[p] = failed
            for j in range(iter_trend.shape[0]):  # R returns nothing
                for b in range(iter_trend.shape[1]):
                    iter_trend[j, b, p] = -1
                    iter_season[j, b, p] = -1
            continue
        status[p] = _OK if converged else _MAX_ITER
        n_trend[p] = m_t
        n_season[p] = m_s
        trend_p[p] = p_t
        season_p[p] = p_s if seasonal_model else math.nan
        largest = -1
        for j in range(m_t):
            b = tb[j]
            trend_index[j, p] = rows[b]
            for c in range(2):
                trend_ci[j, p, c] = _full_position(rows, n, tci[j, c])
            before = trend[b]
            after = trend[b + 1]
            magnitudes[j, p, 0] = before
            magnitudes[j, p, 1] = after
            magnitudes[j, p, 2] = after - before
            if largest < 0 or abs(after - before) > abs(magnitudes[largest, p, 2]):
                largest = j
        for j in range(m_s):
            season_index[j, p] = rows[sb[j]]
            for c in range(2):
                season_ci[j, p, c] = _full_position(rows, n, sci[j, c])
        magnitude[p] = magnitudes[largest, p, 2] if largest >= 0 else 0.0
        magnitude_index[p] = trend_index[largest, p] if largest >= 0 else -1
        for i in range(n):
            trend_out[rows[i], p] = trend[i]
            seasonal_out[rows[i], p] = seasonal[i]
            remainder_out[rows[i], p] = y[i] - trend[i] - seasonal[i]


def run(values: np.ndarray, plan: ClassicPlan, iterations: bool = False) -> dict[str, np.ndarray]:
    """Engine entry point: ``values`` (T, P) -> the outputs of :func:`empty_classic_outputs`."""
    n_times, n_pixels = values.shape
    out = empty_classic_outputs(n_times, n_pixels, plan.break_slots, plan.max_iter if iterations else 0)
    invalid, _ = invalid_mask(values, plan.nodata)
    start, status = start_seasonal(values, invalid, plan.freq, "cpu")
    out["status"][:] = status
    out["n_obs"][:] = n_times - invalid.sum(axis=0)
    nodata, has_nodata = kernel_nodata(values, plan.nodata)
    season_design = plan.season_design
    harmonic_columns = np.ascontiguousarray(season_design[:, 1:]) if plan.season_intercept else None
    iter_shape = (0, max(plan.break_slots, 1), n_pixels)
    iter_trend = out.get("iter_trend_break_index", np.empty(iter_shape, np.int64))
    iter_season = out.get("iter_season_break_index", np.empty(iter_shape, np.int64))
    asked = [-1 if b is None else b for b in plan.breaks]
    run_tasks(
        _classic_kernel, task_count(n_pixels),
        values, nodata, has_nodata, start, plan.trend_design, season_design, harmonic_columns, plan.h,
        plan.level[0], plan.level[1], asked[0], asked[1], TEST_TYPES.index(plan.test), plan.max_iter,
        MOSUM_PRETEST_TABLE, MOSUM_PRETEST_H, MOSUM_PRETEST_P, max(plan.break_slots, 1),
        out["status"], out["n_iter"], out["magnitude"], out["magnitude_index"], out["magnitudes"], out["trend"],
        out["seasonal"], out["remainder"], out["n_trend_breaks"], out["trend_break_index"], out["trend_confint"],
        out["trend_pretest_p"], out["n_season_breaks"], out["season_break_index"], out["season_confint"],
        out["season_pretest_p"], iter_trend, iter_season,
    )
    return out
