"""cpu engine of BFAST Lite: one numba kernel, parallel over blocks of pixels.

Per pixel, the steps of the reference (:mod:`tscube.bfast.lite._reference`) in one
pass with per-thread buffers: compaction of the valid observations, the optional
OLS-MOSUM pre-test, the Bai–Perron segments' RSS and programme of
:mod:`tscube.bfast.core.bai_perron_cpu` (shared with ``history="BP"``), the criteria, the
segment fits (QR, R's aliasing) and the magnitudes.
"""

from __future__ import annotations

import math

import numpy as np

from ..._jit import Callees, compile_elsewhere, compile_jobs, function_type, jit
from ..._threads import run_tasks, task_count
from ..core.bai_perron import LWZ_FACTOR, LWZ_POWER
from ..core.bai_perron_cpu import (PROGRAMME_CALLS, breaks_of, fit_in_order, fit_residuals, group_partitions,
                                   memo_chunks, minus_2_loglik, outer_products, qr_fit_in_order, recursion_segments,
                                   replay_scratch, same_rows, triangle_memo)
from ..core.inputs import PERFECT_FIT_RTOL
from ..core.rules import MOSUM_PRETEST_H, MOSUM_PRETEST_P, MOSUM_PRETEST_TABLE
from ..core.rules_cpu import OLS_MOSUM, pretest_pvalue
from ..core.series_cpu import compact_valid, cube_bytes, load_tile_bytes
from .plan import SELECTIONS, LitePlan
from .result import empty_lite_outputs
from .status import OVERFLOW_VALUE, BfastLiteStatus

_LWZ, _BIC, _RSS, _ALL, _NUMBER = range(len(SELECTIONS))

#: Pixels per block (fewer where their programmes would pass 32 MiB): the widest group of
#: pixels with the same valid dates that replays one memo at once (its lanes).
_BLOCK = 32


@jit()
def _pretest_pvalue(X, rows, y, n, fraction, Q, R, idx, beta, P, e, table, table_h, table_p):
    """R's OLS-MOSUM pre-test p-value over window floor(n * fraction); NaN when the model
    fits the series exactly (as :func:`tscube.bfast.lite._reference.pretest`)."""
    nk = qr_fit_in_order(X, rows, y, 0, 1, n, Q, R, idx, beta, P)
    fit_residuals(X, rows, y, n, beta, e)
    y_scale = 0.0
    for i in range(n):
        y_scale = max(y_scale, abs(y[i]))
    return pretest_pvalue(e, n, X.shape[1], nk, y_scale, fraction, OLS_MOSUM, table, table_h, table_p)


@jit()
def _overflows(y, n):
    """Whether one of the ``n`` compacted values ``y`` is over ``OVERFLOW_VALUE``."""
    for i in range(n):
        if abs(y[i]) > OVERFLOW_VALUE:
            return True
    return False


@jit()
def _pretest_applies(y, n, k, h_param):
    """Whether R runs the OLS-MOSUM pre-test on a pixel of ``n`` compacted values ``y``, and
    its window's fraction of ``n``: some values, none over ``OVERFLOW_VALUE`` (those pixels
    get their status first, :func:`_prepare_pixel`), ``n > k`` and a window of
    ``1 <= floor(n fraction) < n`` observations (else R fails, and the checks after it flag
    the pixel)."""
    if n == 0 or _overflows(y, n):
        return False, 0.0
    fraction = round(h_param) / n if h_param > 1 else h_param  # as lite.pretest_bandwidth
    nh = int(math.floor(n * fraction))
    return n > k and 1 <= nh < n, fraction


@jit(nogil=True)
def pretest_pixels(c, n_chunks, raw, itemsize, nodata, has_nodata, X, h_param, table, table_h, table_p, p0, count,
                   pretest_p, tested):
    """R's OLS-MOSUM pre-test p-value (:func:`_pretest_pvalue`) of pixels ``p0 + q``, ``q``
    in this task's share (``c`` of ``n_chunks``) of ``0..count-1``, into ``pretest_p`` and
    ``tested`` where R runs it (:func:`_pretest_applies`). A kernel of its own, run before
    the programmes: calls without a pre-test (the default) never compile it, and the
    programmes' kernel is the same with or without one."""
    T = raw.shape[0]
    k = X.shape[1]
    w, Q, R, idx, beta, Pinv = _fit_scratch(T, k)
    rows = np.empty(T, dtype=np.int64)
    y = np.empty(T)
    tile = np.empty((_BLOCK, T))
    first, end = c * count // n_chunks, (c + 1) * count // n_chunks
    for q0 in range(first, end, _BLOCK):
        for g in range(_load_share(raw, itemsize, p0, q0, end, tile)):
            p = p0 + q0 + g
            n = compact_valid(tile[g], T, nodata, has_nodata, rows, y)
            applies, fraction = _pretest_applies(y, n, k, h_param)
            if applies:
                pretest_p[p] = _pretest_pvalue(X, rows, y, n, fraction, Q, R, idx, beta, Pinv, w, table, table_h,
                                               table_p)
                tested[p] = True


@jit()
def _load_share(raw, itemsize, p0, q0, end, tile):
    """Load pixels ``p0 + q0 ..`` of a task's share (up to ``p0 + end``, at most
    ``_BLOCK``) into ``tile``; returns how many."""
    width = min(end, q0 + _BLOCK) - q0
    load_tile_bytes(raw, itemsize, p0 + q0, width, raw.shape[0], tile)
    return width


def pretest(raw, itemsize, nodata, has_nodata, X, h_param, p0, count, pretest_p) -> np.ndarray:
    """:func:`pretest_pixels` of pixels ``p0 .. p0 + count - 1`` on numba's threads: their
    p-values into ``pretest_p``; returns ``tested`` (all pixels, bool)."""
    tested = np.zeros(pretest_p.shape[0], dtype=np.bool_)
    run_tasks(pretest_pixels, task_count(-(-count // _BLOCK)), raw, itemsize, nodata, has_nodata, X, float(h_param),
              MOSUM_PRETEST_TABLE, MOSUM_PRETEST_H, MOSUM_PRETEST_P, p0, count, pretest_p, tested)
    return tested


@jit()
def _prepare_pixel(tile_row, T, nodata, has_nodata, X, h_param, selection, n_asked, max_cap, level, tested, p, rows,
                   y, status, n_obs, h_obs, max_breaks, pretest_p):
    """Compaction, the pre-test's verdict (``level > 0``: the p-values of
    :func:`pretest_pixels`, where ``tested``) and the checks of pixel ``p`` before its
    programme: returns the number of breaks to consider (``M``), or -1 with the pixel's
    status set when it gets none."""
    k = X.shape[1]
    n = compact_valid(tile_row, T, nodata, has_nodata, rows, y)
    n_obs[p] = n
    if n == 0:
        status[p] = BfastLiteStatus.ALL_MISSING
        return -1
    if _overflows(y, n):
        status[p] = BfastLiteStatus.OVERFLOW
        return -1
    if level > 0.0 and tested[p]:
        pv = pretest_p[p]
        if math.isnan(pv):  # an exact fit: the test is undefined
            status[p] = BfastLiteStatus.PERFECT_FIT
            return -1
        if pv > level:
            status[p] = BfastLiteStatus.STABLE_BY_PRETEST
            return -1
    h = int(math.floor(n * h_param)) if h_param < 1 else int(h_param)
    h_obs[p] = h
    if h <= k:
        status[p] = BfastLiteStatus.SEGMENT_TOO_SHORT
        return -1
    if h > n // 2:
        status[p] = BfastLiteStatus.TOO_FEW_OBSERVATIONS
        return -1
    M = (n + h - 1) // h - 2
    if M == 0:
        status[p] = BfastLiteStatus.NO_ROOM_FOR_BREAK
        return -1
    if selection == _NUMBER:
        M = min(M, n_asked)
    if max_cap > 0:
        M = min(M, max_cap)
    max_breaks[p] = M
    return M


@jit()
def partitions_of(best, arg, M, n, lane, totals, parts):
    """From a programme (lane ``lane`` of ``best``/``arg``): ``totals[m]``, the RSS of
    the best m-break partition, and ``parts[m, :m]`` its breakpoints, ``m = 0..M``."""
    for m in range(M + 1):
        totals[m] = best[m, n - 1, lane]
        if abs(totals[m]) < np.inf:
            breaks_of(arg, m, n, parts[m], lane)


@jit()
def _finish_pixel(X, XX, trend_raw, time, trend_col, selection, interval, p, rows, y, n, M, totals, parts, Q, R, idx,
                  beta, Pinv, breaks, status, n_breaks, break_index, break_time, magnitudes, coefficients, rss_out,
                  bic_out, lwz_out, trend_centre, trend_scale):
    """Pixel ``p`` from its programme (``totals[m]``: the RSS of its best m-break
    partition, ``parts[m, :m]`` its breakpoints; :func:`partitions_of`): the criteria and
    the choice, the exact-fit check, the segment coefficients and the magnitudes."""
    k = X.shape[1]
    pick = M
    pick_value = np.inf
    lwz_penalty = LWZ_FACTOR * math.log(n) ** LWZ_POWER
    for m in range(M + 1):
        total = totals[m]  # the segments' RSS summed in order, as R re-sums them
        ll = minus_2_loglik(total, n) if total > 0 else -np.inf
        bic = ll + math.log(n) * (k + 1) * (m + 1)
        lwz = ll + lwz_penalty * (k + 1) * (m + 1)
        if m < rss_out.shape[0]:
            rss_out[m, p] = total
            bic_out[m, p] = bic
            lwz_out[m, p] = lwz
        value = lwz if selection == _LWZ else (bic if selection == _BIC else total)
        if selection <= _RSS and value < pick_value:
            pick_value = value
            pick = m
    if not (abs(totals[0]) < np.inf and abs(totals[pick]) < np.inf):
        status[p] = BfastLiteStatus.OVERFLOW  # not expected below OVERFLOW_VALUE; no partition to follow
        return
    y_scale = 0.0
    for i in range(n):
        y_scale = max(y_scale, abs(y[i]))
    if not math.sqrt(max(totals[0], 0.0) / (n - k)) > PERFECT_FIT_RTOL * y_scale:
        status[p] = BfastLiteStatus.PERFECT_FIT
        return
    m = pick
    for l in range(m):
        breaks[l] = parts[m, l]
    n_breaks[p] = m
    for l in range(m):
        break_index[l, p] = rows[breaks[l]]
        break_time[l, p] = time[rows[breaks[l]]]
    start = 0
    for s in range(m + 1):
        end = breaks[s] if s < m else n - 1
        nk = fit_in_order(X, XX, rows, y, start, end - start + 1, Q, R, idx, beta, Pinv)
        kept = np.zeros(k, dtype=np.bool_)
        for a in range(nk):
            kept[idx[a]] = True
        slope = beta[trend_col] if trend_col >= 0 and kept[trend_col] else 0.0
        for a in range(k):
            coefficients[s, p, a] = beta[a] if kept[a] else np.nan
        if trend_col >= 0:  # R's parametrisation: the raw trend, 1-based
            coefficients[s, p, 0] = beta[0] - slope / trend_scale * trend_centre
            if kept[trend_col]:
                coefficients[s, p, trend_col] = slope / trend_scale
        start = end + 1
    if trend_col < 0:
        return
    wdw = int(math.floor(n * interval)) if interval < 1 else int(interval)
    for l in range(m):
        b = breaks[l]
        a0 = coefficients[l, p, 0]
        b0 = coefficients[l, p, trend_col]
        a1 = coefficients[l + 1, p, 0]
        b1 = coefficients[l + 1, p, trend_col]
        before = a0 + b0 * trend_raw[rows[b]]
        after = a1 + b1 * trend_raw[rows[b + 1]]
        lo = max(b - wdw, 0)
        hi = min(b + wdw, n - 1)
        s2 = 0.0
        sa = 0.0
        s1 = 0.0
        for r in range(lo, hi + 1):
            tr = trend_raw[rows[r]]
            d = (a1 + b1 * tr) - (a0 + b0 * tr)
            s2 += d * d
            sa += abs(d)
            s1 += d
        cnt = hi - lo + 1
        magnitudes[l, p, 0] = before
        magnitudes[l, p, 1] = after
        magnitudes[l, p, 2] = after - before
        magnitudes[l, p, 3] = math.sqrt(s2 / cnt)
        magnitudes[l, p, 4] = sa / cnt
        magnitudes[l, p, 5] = s1 / cnt



@jit(nogil=True)
def _lite_kernel(c, n_chunks, raw, itemsize, nodata, has_nodata, X, XX, trend_raw, time, trend_col, h_param, selection,
                 n_asked, max_cap, level, tested, interval, block, max_m,
                 status, n_obs, h_obs, max_breaks, n_breaks, pretest_p, break_index, break_time,
                 magnitudes, coefficients, rss_out, bic_out, lwz_out, trend_centre, trend_scale, calls):
    """Blocks of pixels: each pixel's preparation; then, pixels in a row with the same
    valid dates (and so ``n`` and ``h``) as one group that records the rows-only part of
    the segments' RSS once and replays it for all at once (:func:`replay_partitions`),
    the group's programmes, and each pixel's outputs.

    Parameters
    ----------
    raw, itemsize
        The cube (T, P), pixels flattened, as :func:`~tscube.bfast.core.series_cpu.cube_bytes`
        (one kernel for every dtype).
    nodata : float; has_nodata : bool
        The value marking missing data (:func:`~tscube.bfast.core.inputs.kernel_nodata`).
    X : float64 (T, k)
        The design (trend column centred and scaled: ``trend_centre``, ``trend_scale``).
    XX : float64 (T, k²)
        Each date's outer product ``x x'`` (:func:`~tscube.bfast.core.bai_perron_cpu.outer_products`).
    trend_raw, time : float64 (T,)
        R's 1-based trend regressor and the decimal-year time of each date.
    trend_col : int
        Column of the trend in ``X`` (-1: none).
    h_param : float
        Minimum segment size: a fraction of ``n`` (< 1) or a number of observations.
    selection, n_asked, max_cap : int
        How the number of breaks is chosen (an index of ``SELECTIONS``), the number asked
        for (``"number"``), the cap on the breaks considered (0: none).
    level : float; tested : bool (P,) or (0,)
        Pre-test level (0: no pre-test) and the pixels it tested (:func:`pretest_pixels`,
        their p-values in ``pretest_p``).
    interval : float
        Window of the RMSD/MAD/MD magnitudes (a fraction of ``n``, or observations).
    block : int
        Pixels per block (the widest group that replays one memo).
    max_m : int
        The most breaks any pixel can consider (the programmes' first dimension).
    status, n_obs, h_obs, max_breaks, n_breaks, pretest_p : arrays (P,)
        Per-pixel outputs.
    break_index, break_time : (B, P); magnitudes : (B, P, 6); coefficients : (B + 1, P, k)
        Per-break and per-segment outputs.
    rss_out, bic_out, lwz_out : (M + 1, P)
        The criteria of the best model with m breaks.
    trend_centre, trend_scale : float
        How the trend column of ``X`` was centred and scaled (back to R's parametrisation).
    calls : :data:`LITE_CALLS`
        The callees by address.
    n_chunks : int
        Chunks of consecutive blocks (one triangle memo each); this call runs chunk ``c``
        (a task of :func:`tscube._threads.run_tasks`).
    """
    T = raw.shape[0]
    P = raw.shape[1] // itemsize
    k = X.shape[1]
    n_blocks = (P + block - 1) // block
    # consecutive blocks per chunk: one triangle memo for all its pixels
    w, Q, R, idx, beta, Pinv = _fit_scratch(T, k)  # Q: Gram–Schmidt columns
    Px = np.empty(k)
    S = np.empty((T + 1, k, k))
    U = np.empty((T + 1, k))
    YY = np.empty(T + 1)
    scratch = replay_scratch(T, k, block)
    breaks = np.empty(T, dtype=np.int64)
    rows = np.empty((block, T), dtype=np.int64)
    y = np.empty((block, T))
    best = np.empty((max_m + 1, T, block))
    arg = np.empty((max_m + 1, T, block), dtype=np.int64)
    totals = np.empty(max_m + 1)
    parts = np.empty((max_m + 1, max(max_m, 1)), dtype=np.int64)
    counts = np.empty(block, dtype=np.int64)
    M = np.empty(block, dtype=np.int64)
    group = np.empty(block, dtype=np.int64)
    memo = triangle_memo(T, k)
    tile = np.empty((block, T))
    for ib in range(c * n_blocks // n_chunks, (c + 1) * n_blocks // n_chunks):
        p0 = ib * block
        width = min(P, p0 + block) - p0
        load_tile_bytes(raw, itemsize, p0, width, T, tile)
        for q in range(width):
            M[q] = _prepare_pixel(tile[q], T, nodata, has_nodata, X, h_param, selection, n_asked, max_cap,
                                  level, tested, p0 + q, rows[q], y[q], status, n_obs, h_obs, max_breaks, pretest_p)
            counts[q] = n_obs[p0 + q]
        q = 0
        while q < width:
            if M[q] < 0:
                q += 1
                continue
            n = counts[q]
            h = np.int64(h_obs[p0 + q])  # the programme's callees take the types of every other kernel's call
            size = 0  # the group: pixels from q on with the same rows (others between skipped)
            e = q
            while e < width:
                if M[e] >= 0:
                    if counts[e] != n or h_obs[p0 + e] != h or not same_rows(rows[q], rows[e], n):
                        break
                    group[size] = e
                    size += 1
                e += 1
            group_partitions(X, rows, y, group[:size], n, h, M[q], best, arg, memo, scratch, w, Q, R, idx, beta, Pinv,
                             Px, S, U, YY, calls)
            for g in range(size):
                r = group[g]
                partitions_of(best, arg, M[r], n, g, totals, parts)
                calls[_FINISH](X, XX, trend_raw, time, trend_col, selection, interval, p0 + r, rows[r], y[r], n,
                               M[r], totals, parts, Q, R, idx, beta, Pinv, breaks, status, n_breaks, break_index,
                               break_time, magnitudes, coefficients, rss_out, bic_out, lwz_out, trend_centre,
                               trend_scale)
            q = e


# The cuda engine's host parts (tscube.bfast.lite._cuda): tasks of run_tasks over pixels.


@jit()
def _fit_scratch(T, k):
    """A thread's scratch for one pixel's fits at a time (:func:`_prepare_pixel`,
    :func:`_finish_pixel`, R's refits): ``w`` ``(T,)``, ``Q`` ``(k, T)``, ``R`` and ``P``
    ``(k, k)``, ``idx`` (int) and ``beta`` ``(k,)``."""
    return np.empty(T), np.empty((k, T)), np.empty((k, k)), np.empty(k, dtype=np.int64), np.empty(k), np.empty((k, k))


@jit(nogil=True)
def prepare_pixels(c, n_chunks, raw, itemsize, nodata, has_nodata, X, h_param, selection, n_asked, max_cap, level,
                   tested, p0, count, status, n_obs, h_obs, max_breaks, pretest_p, M_out, rows, y):
    """:func:`_prepare_pixel` of pixels ``p0 + q``, ``q`` in this task's share (``c`` of
    ``n_chunks``) of ``0..count-1``: their compacted rows and values to ``rows[q]``,
    ``y[q]``, the breaks to consider to ``M_out[q]`` (-1 with the status set: no
    programme). Arguments as :func:`_lite_kernel`."""
    T = raw.shape[0]
    tile = np.empty((_BLOCK, T))
    first, end = c * count // n_chunks, (c + 1) * count // n_chunks
    for q0 in range(first, end, _BLOCK):
        for g in range(_load_share(raw, itemsize, p0, q0, end, tile)):
            q = q0 + g
            M_out[q] = _prepare_pixel(tile[g], T, nodata, has_nodata, X, h_param, selection, n_asked, max_cap, level,
                                      tested, p0 + q, rows[q], y[q], status, n_obs, h_obs, max_breaks, pretest_p)


@jit(nogil=True)
def recursion_rows(c, n_chunks, X, rows, y, n_of, pixel, offsets, starts, out):
    """The recursion starts of pixels ``pixel[g]`` (rows of ``rows``, ``y``; ``n_of``),
    ``starts[offsets[g]:offsets[g + 1]]``, in this task's share of ``g``: ``out[s, e]`` =
    R's RSS of rows ``starts[s]..e`` (:func:`recursion_segments`)."""
    T = rows.shape[1]
    k = X.shape[1]
    w, Q, R, idx, beta, P = _fit_scratch(T, k)
    Px = np.empty(k)
    S = np.empty((T + 1, k, k))
    U = np.empty((T + 1, k))
    YY = np.empty(T + 1)
    steps = np.empty((1, k + 1))
    G = pixel.shape[0]
    for g in range(c * G // n_chunks, (c + 1) * G // n_chunks):
        q = pixel[g]
        recursion_segments(X, rows[q], y[q], n_of[q], starts[offsets[g]:offsets[g + 1]],
                           out[offsets[g]:offsets[g + 1]], w, Q, R, idx, beta, P, Px, S, U, YY, steps)


@jit(nogil=True)
def finish_pixels(c, n_chunks, X, XX, trend_raw, time, trend_col, selection, interval, p0, active, rows, y, n_of, M_of,
                  totals, parts, status, n_breaks, break_index, break_time, magnitudes, coefficients, rss_out, bic_out,
                  lwz_out, trend_centre, trend_scale):
    """:func:`_finish_pixel` of pixels ``p0 + active[a]`` (``a`` in this task's share;
    rows of ``rows``, ``y``, ``n_of``, ``M_of`` by ``active[a]``) from their programmes'
    ``totals[a]`` and ``parts[a]``. Arguments as :func:`_lite_kernel`."""
    T = rows.shape[1]
    _, Q, R, idx, beta, Pinv = _fit_scratch(T, X.shape[1])
    breaks = np.empty(T, dtype=np.int64)
    A = active.shape[0]
    for a in range(c * A // n_chunks, (c + 1) * A // n_chunks):
        q = active[a]
        _finish_pixel(X, XX, trend_raw, time, trend_col, selection, interval, p0 + q, rows[q], y[q], n_of[q], M_of[q],
                      totals[a], parts[a], Q, R, idx, beta, Pinv, breaks, status, n_breaks, break_index, break_time,
                      magnitudes, coefficients, rss_out, bic_out, lwz_out, trend_centre, trend_scale)


#: :func:`_lite_kernel`'s callees by address (:class:`tscube._jit.Callees`): the
#: programme's, then the pixel's fits and outputs (:func:`_finish_pixel`, at ``_FINISH``).
LITE_CALLS = PROGRAMME_CALLS + Callees(
    (_finish_pixel, function_type("f8[:, ::1], f8[:, ::1], f8[::1], f8[::1], i8, i8, f8, i8, i8[::1], f8[::1], i8, i8, "
                                  "f8[::1], i8[:, ::1], f8[:, ::1], f8[:, ::1], i8[::1], f8[::1], f8[:, ::1], i8[::1], "
                                  "i1[::1], i4[::1], i8[:, ::1], f8[:, ::1], f8[:, :, ::1], f8[:, :, ::1], f8[:, ::1], "
                                  "f8[:, ::1], f8[:, ::1], f8, f8"), 5.2),
)
_FINISH = len(PROGRAMME_CALLS)


def run(values: np.ndarray, plan: LitePlan) -> dict[str, np.ndarray]:
    """Engine entry point: ``values`` (T, P) -> the outputs of :func:`empty_lite_outputs`."""
    _, n_pixels = values.shape
    design = plan.design
    out = empty_lite_outputs(n_pixels, plan.break_slots, design.k, plan.n_models)
    raw, itemsize, nodata, has_nodata = cube_bytes(values, plan.nodata)  # one kernel for every dtype
    trend_col = design.names.index("trend") if "trend" in design.names else -1
    n_times = values.shape[0]
    most_breaks = plan.break_slots  # the largest M of any pixel
    # the programmes of a block: (most_breaks + 1, T) floats and ints per pixel, 32 MiB at most
    block = max(1, min(_BLOCK, (32 << 20) // (16 * (most_breaks + 1) * n_times + 1)))
    n_chunks = memo_chunks(n_pixels, block)
    tested = (pretest(raw, itemsize, nodata, has_nodata, design.matrix, plan.h, 0, n_pixels, out["pretest_p"])
              if plan.level > 0 else np.zeros(0, dtype=np.bool_))
    args = (
        raw, itemsize, nodata, has_nodata, design.matrix, outer_products(design.matrix), plan.axis.trend,
        plan.axis.time, trend_col, plan.h,
        plan.selection, plan.n_breaks_asked, plan.max_breaks, float(plan.level), tested, plan.interval, block,
        most_breaks,
        out["status"], out["n_obs"], out["h_obs"], out["max_breaks"], out["n_breaks"], out["pretest_p"],
        out["break_index"], out["break_time"], out["magnitudes"], out["coefficients"],
        out["rss"], out["bic"], out["lwz"], design.trend_centre, design.trend_scale, LITE_CALLS,
    )
    # a first call: other processes compile the callees while this one compiles the kernel
    compile_elsewhere(compile_jobs(_lite_kernel, (0, n_chunks, *args)))
    run_tasks(_lite_kernel, n_chunks, *args)
    return out
