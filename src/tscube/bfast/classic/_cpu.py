"""cpu engine of classic BFAST: one numba kernel, blocks of pixels in parallel, each
pixel iterating until it converges.

Per pixel, the steps of the reference (:mod:`tscube.bfast.classic._reference`); the
pixels of a block go through the iterations together, so that every component step
runs the Bai–Perron programmes of all its pixels with the same valid dates at once (a
gap-free cube: the whole block), the pixels as SIMD lanes:

* the trend (``Vt ~ ti``) and the harmonic seasonal model: the segments' RSS of
  :mod:`tscube.bfast.core.bai_perron_cpu` (BFAST Lite's and ``history="BP"``'s), recorded
  once per design and thread for the rows (:func:`replay_partitions`), every later pixel
  and iteration replaying it at O(k) per update;
* the effect-coded seasonal dummies (``freq - 1`` columns, R's recursion from k rows,
  which cost O(k^2) per update) on gap-free pixels: least squares in closed form, the
  seasons' running means (:func:`dummy_partitions`), O(1) per update; its fits and the
  pre-test's as well (:func:`_dummy_fit`). Pixels with gaps take R's recursion.

Then per pixel the number of breaks by BIC, the segment fits and R's intervals
(:mod:`.confint`), and at the end the magnitudes. The periodic STL start comes from the
batched :func:`tscube.stl` before the kernel.
"""

from __future__ import annotations

import math

import numpy as np

from ..._jit import Callees, compile_elsewhere, compile_jobs, function_type, jit
from ..._threads import run_tasks
from ..core.bai_perron_cpu import (MEMO_TYPES, PROGRAMME_CALLS, REPLAY_SCRATCH_TYPES, breaks_of,
                                   dummy_partitions, fit_residuals, group_partitions, memo_chunks, minus_2_loglik,
                                   qr_fit_in_order, replay_scratch, triangle_memo)
from ..core.inputs import invalid_mask
from ..core.rules import MOSUM_PRETEST_H, MOSUM_PRETEST_P, MOSUM_PRETEST_TABLE
from ..core.rules_cpu import pretest_pvalue
from ..core.series_cpu import compact_valid, cube_bytes, load_tile, load_tile_bytes, tile_buffer
from .confint import break_interval
from .plan import TEST_TYPES, ClassicPlan
from .result import empty_classic_outputs
from .start import start_seasonal
from .status import OVERFLOW_VALUE, BfastClassicStatus

_OK = int(BfastClassicStatus.OK)
_MAX_ITER = int(BfastClassicStatus.MAX_ITER)
_SEGMENT_TOO_SHORT = int(BfastClassicStatus.SEGMENT_TOO_SHORT)
_PERFECT_FIT = int(BfastClassicStatus.PERFECT_FIT)
_OVERFLOW = int(BfastClassicStatus.OVERFLOW)

#: Pixels per block: the widest group that runs its programmes as lanes at once.
_BLOCK = 32


@jit()
def _design_scratch(n_times, k, max_m, lanes):
    """One design's per-thread buffers: QR and update scratch, prefix sums, segment
    coefficients, the triangle memo and the replay scratch for ``lanes`` pixels."""
    return (np.empty((k, n_times)), np.empty((k, k)), np.empty(k, dtype=np.int64), np.empty(k), np.empty((k, k)),
            np.empty(k), np.empty((n_times + 1, k, k)), np.empty((n_times + 1, k)), np.empty(n_times + 1),
            np.empty((max_m + 1, k)), triangle_memo(n_times, k), replay_scratch(n_times, k, lanes))


@jit(plain_args=True)  # one version for every caller's constants
def _dummy_fit(cycle, n_seasons, y, first, stop, counts, gamma, e, fitted):
    """Least squares of the gap-free rows ``first..stop-1`` on the effect-coded seasonal
    dummies (every season present): the season means shifted so that the effects sum
    to zero (:func:`dummy_partitions`). ``gamma[s]``: the fitted value of season ``s``."""
    for s in range(n_seasons):
        counts[s] = 0
        gamma[s] = 0.0
    for i in range(first, stop):
        counts[cycle[i]] += 1
        gamma[cycle[i]] += y[i]
    total = 0.0
    inverse_sum = 0.0
    for s in range(n_seasons):
        gamma[s] /= counts[s]
        total += gamma[s]
        inverse_sum += 1.0 / counts[s]
    shift = total / inverse_sum
    for s in range(n_seasons):
        gamma[s] -= shift / counts[s]
    for i in range(first, stop):
        fitted[i] = gamma[cycle[i]]
        e[i] = y[i] - fitted[i]


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
def _mean_square_change_dummy(cycle, first, stop, before, after):
    """:func:`_mean_square_change` of the dummy model from the seasons' fitted values."""
    total = 0.0
    for i in range(first, stop):
        d = after[cycle[i]] - before[cycle[i]]
        total += d * d
    return total / (stop - first)


@jit()
def _segment(breaks, m, n, s):
    """``(first, stop)``: the rows of segment ``s`` of the ``m + 1`` that ``breaks`` cut."""
    return 0 if s == 0 else breaks[s - 1] + 1, n if s == m else breaks[s] + 1


@jit()
def _joint_harmonic_fit(Xh, rows, y, n, breaks, m, ones, w, Q, R, idx, beta, P, fitted):
    """Fitted values of R's ``y ~ (harmonics) %in% breakfactor(bp)`` (one intercept, the
    harmonics per segment): with each segment's projection M_s off its harmonics, the
    intercept is ``sum 1'M_s y / sum 1'M_s 1`` and the segments' coefficients follow
    from their fits of ``y`` and of ``1``."""
    k = Xh.shape[1]
    beta_one = np.empty((m + 1, k))
    beta_y = np.empty((m + 1, k))
    num = 0.0
    den = 0.0
    for s in range(m + 1):
        first, stop = _segment(breaks, m, n, s)
        qr_fit_in_order(Xh, rows, ones, first, 1, stop - first, Q, R, idx, beta, P)
        for a in range(k):
            beta_one[s, a] = beta[a]
        fit_residuals(Xh, rows[first:], ones[first:], stop - first, beta, w)
        qr_fit_in_order(Xh, rows, y, first, 1, stop - first, Q, R, idx, beta, P)
        for a in range(k):
            beta_y[s, a] = beta[a]
        fit_residuals(Xh, rows[first:], y[first:], stop - first, beta, fitted[first:])
        for i in range(stop - first):
            num += w[i] * fitted[first + i]
            den += w[i] * w[i]
    c = num / den
    for s in range(m + 1):
        first, stop = _segment(breaks, m, n, s)
        for i in range(first, stop):
            v = c
            for a in range(k):
                v += Xh[rows[i], a] * (beta_y[s, a] - c * beta_one[s, a])
            fitted[i] = v


@jit()
def _fit_segments(X, cycle, dummy, Xh, rows, y, n, breaks, m, scratch, e, gamma, seg_gamma, counts, ones, w, confint,
                  fitted):
    """The fits of a component with ``m >= 1`` breaks into ``fitted`` and R's interval of
    each break into ``confint`` (``dummy``: the gap-free dummy model of seasons ``cycle``
    in closed form; ``Xh``: the harmonic columns of a model whose segments share the
    intercept, no columns for the others)."""
    Q, R, idx, beta, P, Px, S, U, YY, seg_beta, memo, replay = scratch
    k = X.shape[1]
    rss = 0.0
    for s in range(m + 1):
        first, stop = _segment(breaks, m, n, s)
        if dummy:
            _dummy_fit(cycle, seg_gamma.shape[1], y, first, stop, counts, seg_gamma[s], e, fitted)
        else:
            qr_fit_in_order(X, rows, y, first, 1, stop - first, Q, R, idx, beta, P)
            for a in range(k):
                seg_beta[s, a] = beta[a]
            fit_residuals(X, rows[first:], y[first:], stop - first, beta, e[first:])
            for i in range(first, stop):
                fitted[i] = y[i] - e[i]
        for i in range(first, stop):
            rss += e[i] * e[i]
    for r in range(m):  # the break between segments r and r + 1
        first = _segment(breaks, m, n, r)[0]
        stop = _segment(breaks, m, n, r + 1)[1]
        if dummy:
            q1 = _mean_square_change_dummy(cycle, first, breaks[r] + 1, seg_gamma[r], seg_gamma[r + 1])
            q2 = _mean_square_change_dummy(cycle, breaks[r] + 1, stop, seg_gamma[r], seg_gamma[r + 1])
        else:
            q1 = _mean_square_change(X, rows, first, breaks[r] + 1, seg_beta[r], seg_beta[r + 1])
            q2 = _mean_square_change(X, rows, breaks[r] + 1, stop, seg_beta[r], seg_beta[r + 1])
        break_interval(breaks[r], rss / n, q1, q2, confint[r])
    if Xh.shape[1] > 0:
        _joint_harmonic_fit(Xh, rows, y, n, breaks, m, ones, w, Q, R, idx, beta, P, fitted)


@jit(inline="always")
def _block_step(X, cycle, Xh, rows, y, other, comp, n_obs, gap_free, active, failed, width, h_frac, level, asked,
                test, table, table_h, table_p, scratch, best, arg, buffers, breaks, confint, fitted, m_out, p_out,
                calls):
    """One component's step (reference ``component_step``) for the active pixels of a
    block: per pixel the component ``comp = y - other`` (the series less the other
    component), its no-break fit and pre-test; the Bai–Perron programmes of the pixels
    that need them, those with the same valid dates together as lanes; per pixel the
    number of breaks, the fits and intervals. ``m_out[g]``: the breaks found; where R
    stops, the pixel leaves ``active`` with its status in ``failed``. ``cycle``: the
    dummy model's seasons (its gap-free pixels in closed form), else empty; ``Xh`` as
    :func:`_fit_segments`. (Empty arrays, not None: one compiled version serves every
    component.) ``calls``: :data:`CLASSIC_CALLS`."""
    Q, R, idx, beta, P, Px, S, U, YY, seg_beta, memo, replay = scratch
    e, w, ones, counts, gamma, seg_gamma, means, seg, group, need = buffers
    k = X.shape[1]
    dummy = cycle.shape[0] > 0
    for g in range(width):
        need[g] = False
        if not active[g]:
            continue
        n = n_obs[g]
        series = comp[g]
        for i in range(n):
            series[i] = y[g, i] - other[g, i]
        if dummy and gap_free[g]:
            _dummy_fit(cycle, gamma.shape[0], series, 0, n, counts, gamma, e, fitted[g])
            kept = k
        else:
            kept = qr_fit_in_order(X, rows[g], series, 0, 1, n, Q, R, idx, beta, P)
            fit_residuals(X, rows[g], series, n, beta, e)
            for i in range(n):
                fitted[g, i] = series[i] - e[i]
        y_scale = 0.0
        for i in range(n):
            y_scale = max(y_scale, abs(series[i]))
        p = pretest_pvalue(e, n, k, kept, y_scale, h_frac, test, table, table_h, table_p)
        p_out[g] = p
        m_out[g] = 0
        if math.isnan(p):
            m_out[g] = -_PERFECT_FIT
        elif p <= level:
            if int(math.floor(n * h_frac)) <= k:
                m_out[g] = -_SEGMENT_TOO_SHORT
            else:
                need[g] = True
    for q in range(width):
        if not need[q]:
            continue
        n = n_obs[q]
        h = int(math.floor(n * h_frac))
        M = -(-n // h) - 2
        if asked >= 0:
            M = min(asked, M)
        size = 0  # the group: every pixel from q on with the same valid dates
        for g in range(q, width):
            if need[g] and n_obs[g] == n and (gap_free[g] and gap_free[q] or g == q):
                group[size] = g
                size += 1
                need[g] = False
        if dummy and gap_free[q]:
            calls[_DUMMY](cycle, gamma.shape[0], comp, group[:size], n, h, M, best, arg, 0, counts, means, seg)
        else:
            group_partitions(X, rows, comp, group[:size], n, h, M, best, arg, memo, replay, w, Q, R, idx, beta, P, Px,
                             S, U, YY, calls)
        for gi in range(size):
            g = group[gi]
            if asked >= 0:
                m = M
            else:
                m = 0
                penalty = math.log(n) * (k + 1)
                best_bic = math.inf
                for j in range(M + 1):
                    bic = minus_2_loglik(best[j, n - 1, gi], n) + penalty * (j + 1)
                    if bic < best_bic:
                        best_bic = bic
                        m = j
                m = max(m, 1)  # R: breakpoints(bp, breaks = NULL) takes length(NA) = 1 break
            breaks_of(arg, m, n, breaks[g], gi)
            m_out[g] = m
            calls[_FIT](X, cycle, dummy and gap_free[g], Xh, rows[g], comp[g], n, breaks[g], m, scratch, e,
                        gamma, seg_gamma, counts, ones, w, confint[g], fitted[g])
    for g in range(width):
        if active[g] and m_out[g] < 0:
            failed[g] = -m_out[g]
            active[g] = False


@jit()
def _same_breaks(a, m_a, b, m_b):
    if m_a != m_b:
        return False
    for i in range(m_a):
        if a[i] != b[i]:
            return False
    return True


@jit()
def _full_position(rows, n, index):
    """A 0-based position on the valid observations on the full series (beyond the
    data: extended from the first or last valid date); NaN stays NaN."""
    if index != index:
        return index
    inside = min(max(int(index), 0), n - 1)
    return rows[inside] + (index - inside)


@jit(nogil=True)
def _classic_kernel(c, n_chunks, raw, itemsize, nodata, has_nodata, start, Xt, Xs, Xh, cycle, no_columns, no_cycle,
                    h_frac, level_t, level_s, asked_t, asked_s, test, max_iter, table, table_h, table_p, max_m, block,
                    status, n_iter, magnitude, magnitude_index, magnitudes, trend_out, seasonal_out, remainder_out,
                    n_trend, trend_index, trend_ci, trend_p, n_season, season_index, season_ci, season_p,
                    iter_trend, iter_season, calls):
    """Chunk ``c`` of ``n_chunks`` of consecutive blocks of ``block`` pixels (a task of
    :func:`tscube._threads.run_tasks`; one triangle memo per design and chunk).

    ``raw``, ``itemsize``: the cube (T, P) as :func:`~tscube.bfast.core.series_cpu.cube_bytes` (one
    kernel for every dtype); ``start`` (T, P) the STL start's seasonal;
    ``status`` holds the start's verdict on entry. ``Xt``, ``Xs``: the trend and seasonal
    designs (``Xs`` without columns: no seasonal model); ``Xh``: the harmonic columns of
    ``Xs`` when its segments share the intercept, else no columns; ``cycle``: each date's
    season for the dummy model, else empty; ``no_columns``, ``no_cycle``: empty arrays
    of the types of ``Xh`` and ``cycle``, for the trend step. ``asked_*``: breaks asked
    for (-1: BIC); ``test``: the :data:`TEST_TYPES` index. Outputs as
    :func:`empty_classic_outputs`."""
    T = raw.shape[0]
    P = raw.shape[1] // itemsize
    seasonal_model = Xs.shape[1] > 0
    n_seasons = Xs.shape[1] + 1 if seasonal_model else 1
    t_scratch = _design_scratch(T, Xt.shape[1], max_m, block)
    s_scratch = _design_scratch(T, Xs.shape[1] if seasonal_model else 1, max_m, block)
    buffers = (np.empty(T), np.empty(T), np.ones(T), np.empty(n_seasons, dtype=np.int64), np.empty(n_seasons),
               np.empty((max_m + 1, n_seasons)), np.empty((n_seasons, block)), np.empty((T, block)),
               np.empty(block, dtype=np.int64), np.zeros(block, dtype=np.bool_))
    best = np.empty((max_m + 1, T, block))
    arg = np.empty((max_m + 1, T, block), dtype=np.int64)
    tile = tile_buffer(block, T)
    start_tile = tile_buffer(block, T)
    rows = np.empty((block, T), dtype=np.int64)
    y = np.empty((block, T))
    comp = np.empty((block, T))
    trend = np.empty((block, T))
    seasonal = np.empty((block, T))
    tb = np.empty((block, T), dtype=np.int64)
    sb = np.empty((block, T), dtype=np.int64)
    prev_tb = np.empty((block, T), dtype=np.int64)
    prev_sb = np.empty((block, T), dtype=np.int64)
    tci = np.empty((block, T, 2))
    sci = np.empty((block, T, 2))
    n_obs = np.empty(block, dtype=np.int64)
    gap_free = np.empty(block, dtype=np.bool_)
    active = np.empty(block, dtype=np.bool_)
    converged = np.empty(block, dtype=np.bool_)
    m_t = np.zeros(block, dtype=np.int64)
    m_s = np.zeros(block, dtype=np.int64)
    prev_mt = np.empty(block, dtype=np.int64)
    prev_ms = np.empty(block, dtype=np.int64)
    p_t = np.empty(block)
    p_s = np.empty(block)
    failed = np.empty(block, dtype=np.int64)
    iters = np.empty(block, dtype=np.int64)
    n_blocks = (P + block - 1) // block
    for ib in range(c * n_blocks // n_chunks, (c + 1) * n_blocks // n_chunks):
        p0 = ib * block
        width = min(P, p0 + block) - p0
        load_tile_bytes(raw, itemsize, p0, width, T, tile)
        load_tile(start, p0, width, T, start_tile)
        any_active = False
        for g in range(width):
            active[g] = False
            converged[g] = False
            failed[g] = 0
            iters[g] = 0
            prev_mt[g] = 0
            prev_ms[g] = 0
            m_t[g] = 0
            m_s[g] = 0
            p_s[g] = math.nan
            if status[p0 + g] != _OK:
                continue
            n = compact_valid(tile[g], T, nodata, has_nodata, rows[g], y[g])
            n_obs[g] = n
            gap_free[g] = n == T
            too_large = False
            for i in range(n):
                too_large |= abs(y[g, i]) > OVERFLOW_VALUE
                seasonal[g, i] = start_tile[g, rows[g, i]] if seasonal_model else 0.0
            if too_large:
                status[p0 + g] = _OVERFLOW
                continue
            active[g] = True
            any_active = True
        it = 0
        while any_active and it < max_iter:
            for step in range(2 if seasonal_model else 1):  # one call site: its code compiled once
                on_trend = step == 0
                _block_step(Xt if on_trend else Xs, no_cycle if on_trend else cycle, no_columns if on_trend else Xh,
                            rows, y, seasonal if on_trend else trend, comp, n_obs, gap_free, active, failed, width,
                            h_frac, level_t if on_trend else level_s, asked_t if on_trend else asked_s, test, table,
                            table_h, table_p, t_scratch if on_trend else s_scratch, best, arg, buffers,
                            tb if on_trend else sb, tci if on_trend else sci, trend if on_trend else seasonal,
                            m_t if on_trend else m_s, p_t if on_trend else p_s, calls)
            any_active = False
            for g in range(width):
                if not active[g]:
                    continue
                p = p0 + g
                if it < iter_trend.shape[0]:
                    for j in range(m_t[g]):
                        iter_trend[it, j, p] = rows[g, tb[g, j]]
                    for j in range(m_s[g]):
                        iter_season[it, j, p] = rows[g, sb[g, j]]
                iters[g] = it + 1
                if (_same_breaks(tb[g], m_t[g], prev_tb[g], prev_mt[g])
                        and _same_breaks(sb[g], m_s[g], prev_sb[g], prev_ms[g])):
                    converged[g] = True
                    active[g] = False
                    continue
                for j in range(m_t[g]):
                    prev_tb[g, j] = tb[g, j]
                for j in range(m_s[g]):
                    prev_sb[g, j] = sb[g, j]
                prev_mt[g] = m_t[g]
                prev_ms[g] = m_s[g]
                any_active = True
            it += 1
        for g in range(width):
            p = p0 + g
            if status[p] != _OK:
                continue
            n_iter[p] = iters[g]
            if failed[g]:
                status[p] = failed[g]
                for j in range(iter_trend.shape[0]):  # R returns nothing
                    for b in range(iter_trend.shape[1]):
                        iter_trend[j, b, p] = -1
                        iter_season[j, b, p] = -1
                continue
            n = n_obs[g]
            status[p] = _OK if converged[g] else _MAX_ITER
            n_trend[p] = m_t[g]
            n_season[p] = m_s[g]
            trend_p[p] = p_t[g]
            season_p[p] = p_s[g]
            largest = -1
            for j in range(m_t[g]):
                b = tb[g, j]
                trend_index[j, p] = rows[g, b]
                for a in range(2):
                    trend_ci[j, p, a] = _full_position(rows[g], n, tci[g, j, a])
                before = trend[g, b]
                after = trend[g, b + 1]
                magnitudes[j, p, 0] = before
                magnitudes[j, p, 1] = after
                magnitudes[j, p, 2] = after - before
                if largest < 0 or abs(after - before) > abs(magnitudes[largest, p, 2]):
                    largest = j
            for j in range(m_s[g]):
                season_index[j, p] = rows[g, sb[g, j]]
                for a in range(2):
                    season_ci[j, p, a] = _full_position(rows[g], n, sci[g, j, a])
            magnitude[p] = magnitudes[largest, p, 2] if largest >= 0 else 0.0
            magnitude_index[p] = trend_index[largest, p] if largest >= 0 else -1
            for i in range(n):
                t = rows[g, i]
                trend_out[t, p] = trend[g, i]
                seasonal_out[t, p] = seasonal[g, i]
                remainder_out[t, p] = y[g, i] - trend[g, i] - seasonal[g, i]


#: :func:`_classic_kernel`'s callees by address (:class:`tscube._jit.Callees`): the
#: Bai–Perron programme's, then a component's fits and intervals (:func:`_fit_segments`)
#: and the dummy model's closed-form programme
#: (:func:`~tscube.bfast.core.bai_perron_cpu.dummy_partitions`).
CLASSIC_CALLS = PROGRAMME_CALLS + Callees(
    (_fit_segments, function_type(
        "f8[:, ::1], i8[::1], b1, f8[:, ::1], i8[::1], f8[::1], i8, i8[::1], i8, "
        "Tuple((f8[:, ::1], f8[:, ::1], i8[::1], f8[::1], f8[:, ::1], f8[::1], f8[:, :, ::1], f8[:, ::1], f8[::1], "
        f"f8[:, ::1], {MEMO_TYPES}, {REPLAY_SCRATCH_TYPES})), f8[::1], f8[::1], f8[:, ::1], i8[::1], f8[::1], "
        "f8[::1], f8[:, ::1], f8[::1]")),
    (dummy_partitions, function_type("i8[::1], i8, f8[:, ::1], i8[::1], i8, i8, i8, f8[:, :, ::1], i8[:, :, ::1], i8, "
                                     "i8[::1], f8[:, ::1], f8[:, ::1]")),
)
_FIT, _DUMMY = len(PROGRAMME_CALLS), len(PROGRAMME_CALLS) + 1

def run(values: np.ndarray, plan: ClassicPlan, iterations: bool = False) -> dict[str, np.ndarray]:
    """Engine entry point: ``values`` (T, P) -> the outputs of :func:`empty_classic_outputs`."""
    n_times, n_pixels = values.shape
    out = empty_classic_outputs(n_times, n_pixels, plan.break_slots, plan.max_iter if iterations else 0)
    invalid, _ = invalid_mask(values, plan.nodata)
    no_columns = np.empty((n_times, 0))
    season_design = no_columns if plan.season_design is None else plan.season_design
    harmonic_columns = np.ascontiguousarray(season_design[:, 1:]) if plan.season_intercept else no_columns
    no_cycle = np.empty(0, np.int64)
    cycle = plan.season_cycle if plan.season == "dummy" else no_cycle
    iter_shape = (0, max(plan.break_slots, 1), n_pixels)
    iter_trend = out.get("iter_trend_break_index", np.empty(iter_shape, np.int64))
    iter_season = out.get("iter_season_break_index", np.empty(iter_shape, np.int64))
    asked = [-1 if b is None else b for b in plan.breaks]
    max_m = max(plan.break_slots, 1)
    # the programmes of a block: (max_m + 1, T) floats and ints per pixel, 32 MiB at most
    block = max(1, min(_BLOCK, (32 << 20) // (16 * (max_m + 1) * n_times + 1)))
    n_chunks = memo_chunks(n_pixels, block)
    start = np.empty((1, 1))  # the STL start's seasonal, below
    raw, itemsize, nodata, has_nodata = cube_bytes(values, plan.nodata)  # one kernel for every dtype
    args = [
        raw, itemsize, nodata, has_nodata, start, plan.trend_design, season_design, harmonic_columns, cycle, no_columns,
        no_cycle, plan.h, plan.level[0], plan.level[1], asked[0], asked[1], TEST_TYPES.index(plan.test),
        plan.max_iter, MOSUM_PRETEST_TABLE, MOSUM_PRETEST_H, MOSUM_PRETEST_P, max_m, block,
        out["status"], out["n_iter"], out["magnitude"], out["magnitude_index"], out["magnitudes"], out["trend"],
        out["seasonal"], out["remainder"], out["n_trend_breaks"], out["trend_break_index"], out["trend_confint"],
        out["trend_pretest_p"], out["n_season_breaks"], out["season_break_index"], out["season_confint"],
        out["season_pretest_p"], iter_trend, iter_season, CLASSIC_CALLS,
    ]
    # a first call: other processes compile the kernel and its callees by address while
    # this one compiles the STL start (docs/performance.md)
    compile_elsewhere(compile_jobs(_classic_kernel, (0, n_chunks, *args), kernel_too=True))
    args[4], status = start_seasonal(values, invalid, plan.freq, "cpu")
    out["status"][:] = status
    out["n_obs"][:] = n_times - invalid.sum(axis=0)
    run_tasks(_classic_kernel, n_chunks, *args)
    return out
