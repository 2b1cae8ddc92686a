"""Stable-history selection for the fast engines: numba kernels, parallel over pixels.

Same rules as :mod:`tscube.bfast.monitor.history._reference` (the reference), organised for speed:

* ROC: recursive residuals of the reversed candidates by rank-one (Sherman–Morrison)
  updates of ``(X'X)^{-1}`` and the coefficients, not a refit per step. Designs of up
  to eight regressors (the usual trend and three harmonics) run with the pixels as SIMD
  lanes (:func:`_roc_lanes_kernel`: compaction of each pixel's candidates, then the
  recursion, fit and Rec-CUSUM scan in lockstep over blocks of pixels); larger designs
  (season dummies), and pixels whose first rows are rank deficient (after the lanes, in
  a kernel of their own: most calls never compile it), one pixel at a time. There, while
  the first rows are rank deficient, the fit drops aliased columns in order as R's
  ``recresid`` does, each row rotated into the QR factor of the rows before it
  (:func:`~tscube.bfast.core.bai_perron_cpu.givens_residuals`; R's refit of every
  prefix where a column sits too close to R's aliasing bound for that to tell,
  :func:`~tscube.bfast.core.bai_perron_cpu.recursive_residuals`).
* BP: the Bai–Perron segments' RSS and dynamic programme of :mod:`tscube.bfast.core.bai_perron_cpu`
  (shared with BFAST Lite), then the BIC choice of the number of breaks.

:func:`history_first` returns, per start and pixel, the time index where the stable
history begins; the cpu and cuda engines then monitor from there.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ...._jit import CONTRACT, compile_jobs, jit
from ...._threads import run_tasks
from ...core.bai_perron_cpu import (PROGRAMME_CALLS, breaks_of, givens_residuals, memo_chunks, minus_2_loglik,
                                    optimal_partitions, qr_fit_in_order, recursive_residuals, triangle_memo)
from ...core.inputs import PERFECT_FIT_RTOL
from ...core.series_cpu import compact_valid, cube_bytes, load_tile_bytes, tile_buffer
from ..plan import MonitorPlan
from ._cpu_lane_inverse import inverse_lanes
from ._cpu_lanes import (LANE_REGRESSORS, LANES, PACKED, S_ALONE, S_BETA, S_BNEW, S_BOUND, S_COUNT, S_CUM, S_FIRST,
                         S_FULL, S_G, S_GAIN, S_MEAN, S_OK, S_P, S_PNEW, S_PRED, S_RHS, S_ROWS, S_RSS, S_SCALE, S_SLOPE,
                         S_STAT, S_STEP, S_TAKE, S_U, S_YMAX, U)
from ._reference import ROC_LAMBDA_05


#: Exact refits of the ROC recursive residuals after the first full-rank fit: one, k rows
#: later, is enough for the known near-tie (tests/test_bfast_history.py); Bai–Perron's
#: shorter segments take two.
_ROC_REFITS = 1


@jit(error_model="numpy")
def _fit_sigma(X, rows, y, n, full, Q, R, P, beta, idx):
    """Residual standard deviation of the OLS fit of all ``n`` compacted rows, after
    :func:`recursive_residuals` over them (``full``: one of their prefixes had full rank):
    the Sherman–Morrison coefficients are that fit; a fit rank-deficient to the end is
    refitted with R's in-order aliasing."""
    k = X.shape[1]
    if not full:
        qr_fit_in_order(X, rows, y, 0, 1, n, Q, R, idx, beta, P)
    rss = 0.0
    for j in range(n):
        e = y[j]
        for a in range(k):
            e -= X[rows[j], a] * beta[a]
        rss += e * e
    return math.sqrt(rss / max(n - k, 1))


@jit(error_model="numpy")
def _phi(x):
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


@jit(error_model="numpy", plain_args=True)
def _roc_verdict(stat, first, m, level):
    """Rows to drop from the front (forward order) and the no-crossing flag, from the
    Rec-CUSUM statistic ``stat`` of ``m`` recursive residuals and the first (1-based)
    boundary crossing ``first`` of the reversed process (-1: none)."""
    if stat < 0.3:
        pvalue = 1.0 - 0.1465 * stat
    else:
        pvalue = 2.0 * (1.0 - _phi(3.0 * stat) + math.exp(-4.0 * stat * stat) * (_phi(stat) + _phi(5.0 * stat) - 1.0)
                        - math.exp(-16.0 * stat * stat) * (1.0 - _phi(stat)))
    if not pvalue < level:
        return 0, False
    if first < 0:
        return 0, True
    return m + 1 - first, False


@jit(error_model="numpy")
def _roc_start(w, m, level, exact_fit):
    """Rows to drop from the front (forward order) and the no-crossing flag."""
    if m < 2 or exact_fit:
        return 0, False  # exact_fit: e.g. a constant series, nothing to test
    mean = 0.0
    for j in range(m):
        mean += w[j]
    mean /= m
    ss = 0.0
    for j in range(m):
        ss += (w[j] - mean) ** 2
    sigma = math.sqrt(ss / (m - 1))
    scale = 1.0 / (sigma * math.sqrt(m))
    cum = 0.0
    stat = 0.0
    first = -1
    for j in range(1, m + 1):
        cum += w[j - 1]
        value = abs(cum * scale)
        stat = max(stat, value / (1.0 + 2.0 * j / m))
        if first < 0 and value > ROC_LAMBDA_05 * (1.0 + 2.0 * j / m):
            first = j
    return _roc_verdict(stat, first, m, level)


@jit(error_model="numpy")
def _roc_pixel(X, rows, y, n, level, w, Q, R, P, beta, Px, idx, givens):
    """ROC of one pixel's ``n > k`` compacted candidates (forward order): rows to drop
    from the front and the no-crossing flag. The recursive residuals by the
    Givens-updated factor (``givens``: its scratch), or by R's refits where a column is
    too close to R's aliasing bound for it to tell."""
    k = X.shape[1]
    G, u, kept, order, pos, old_pos, norm2 = givens
    full_at = givens_residuals(X, rows, y, n - 1, -1, n, w, _ROC_REFITS, P, Px, G, R, u, kept, order, pos, old_pos,
                               norm2, beta)
    if full_at < 0:
        full_at = recursive_residuals(X, rows, y, n - 1, -1, n, w, Q, R, idx, beta, P, Px, _ROC_REFITS)
    y_scale = 0.0
    for j in range(n):
        y_scale = max(y_scale, abs(y[j]))
    sigma = _fit_sigma(X, rows, y, n, full_at <= n, Q, R, P, beta, idx)
    return _roc_start(w, n - k, level, not sigma > PERFECT_FIT_RTOL * y_scale)


@jit(inline="always")  # one call site: compiled in the kernel only (docs/performance.md)
def _bp_start(X, rows, y, n, w, Q, R, idx, beta, P, Px, S, U, YY, memo, calls):
    """Rows to drop from the front: one after the last BIC-selected Bai–Perron break
    (``calls``: :data:`~tscube.bfast.core.bai_perron_cpu.PROGRAMME_CALLS`)."""
    k = X.shape[1]
    h = 6 * k
    if h > n // 2:
        return -1  # Bai–Perron cannot run: all rows kept, the pixel flagged
    max_breaks = max(0, (n + h - 1) // h - 2)
    best = np.empty((max_breaks + 1, n, 1))
    arg = np.empty((max_breaks + 1, n, 1), dtype=np.int64)
    optimal_partitions(X, rows, y, n, h, max_breaks, best, arg, 0, w, Q, R, idx, beta, P, Px, S, U, YY, memo, calls)
    breaks = np.empty(max(max_breaks, 1), dtype=np.int64)
    best_bic = np.inf
    start = 0
    for mb in range(max_breaks + 1):
        bic = minus_2_loglik(best[mb, n - 1, 0], n) + math.log(n) * (k + 1) * (mb + 1)
        if bic < best_bic:
            best_bic = bic
            if mb > 0:
                breaks_of(arg, mb, n, breaks)
            start = breaks[mb - 1] + 1 if mb > 0 else 0
    return start


# ROC with the pixels as SIMD lanes -------------------------------------------------------
#
# The data-parallel form of the per-pixel loop above (same rules, same schedule of exact
# solves): each lane's history candidates are compacted in reversed order (a branch-free
# filter) and their design rows gathered, so that step ``i`` of the recursion is row ``i``
# of every lane at once; the exact solves (the first fit, on k rows, and its refresh at
# 2k), the rank-one updates, the fit of all candidates and the Rec-CUSUM scan then run
# over all lanes of a block, lanes past their own length masked. A lane whose rows are
# rank deficient at an exact solve (rare: e.g. dates a whole number of years apart) is
# left to the per-pixel loop, which drops aliased columns in order as R does.
#
# Layout: :mod:`tscube.bfast.monitor.history._cpu_lanes`; the exact solve is written out for eight
# regressors in :mod:`tscube.bfast.monitor.history._cpu_lane_inverse`.



@jit(error_model="numpy")
def _compact_reversed(tile, width, stop, nodata, has_nodata, rows, yc, S):
    """Lane ``q``'s valid candidates among dates ``[0, stop)`` (``tile[q]``), latest first:
    dates in ``rows[i * LANES + q]`` (int32), values in ``yc[i * LANES + q]``; their
    number into ``S`` (their max |y|: :func:`_fit_rss`). Branch-free: every date is
    written at the lane's next free row, which advances only when the value is valid (not
    NaN, inf or ``nodata``). Flat arrays and unsigned indices: no wraparound checks in the
    loop."""
    W = LANES
    row = tile.shape[1]
    flat = tile.reshape(tile.size)
    for q in range(W):
        S[U(S_COUNT * W + q)] = 0.0
    for q in range(width):
        base = U(q * row)
        if has_nodata:
            at = _compact_lane(flat, base, stop, q, rows, yc, nodata, True)
        else:  # one comparison per value: |v| < inf is false for NaN and inf alike
            at = _compact_lane(flat, base, stop, q, rows, yc, nodata, False)
        if at < U(yc.shape[0]):
            yc[at] = 0.0  # the row after the last valid one may hold a missing value: rows past
            #               a lane's count are read (times a zero weight), so they stay finite
        S[U(S_COUNT * W + q)] = (at - U(q)) // U(W)


@jit(error_model="numpy", inline="always")
def _compact_lane(flat, base, stop, q, rows, yc, nodata, check_nodata):
    """The loop of :func:`_compact_reversed` for lane ``q`` (its values from
    ``flat[base]``); ``check_nodata`` a constant at each call, so that each copy tests
    only what it must. Returns the flat index of the lane's first free row."""
    W = LANES
    at = U(q)  # flat index of the lane's next free row
    # every value is stored at the next free row, which advances only past a valid one (a
    # missing value is overwritten by the next): no select on ``good`` but the step, where
    # a select per store made LLVM branch on it without AVX-512's mask registers, a
    # mispredicted branch per missing value (4x slower on AVX2)
    for u in range(stop):
        t = U(stop - 1 - u)
        v = flat[base + t]
        good = abs(v) < np.inf
        if check_nodata:
            good = good & (v != nodata)
        rows[at] = np.int32(t)
        yc[at] = v
        at += U(W) * U(good)
    return at


@jit(error_model="numpy", plain_args=True)
def _gather_design(X8, rows, n_rows, Xc):
    """``Xc[(i * 8 + b) * LANES + q] = X8[rows[i * LANES + q], b]``: the design rows of
    every lane's compacted candidates (an indexed load, kept out of the vectorised loops)."""
    W = LANES
    K = LANE_REGRESSORS
    flat = X8.reshape(X8.size)
    for i in range(n_rows):
        for q in range(W):
            r = U(rows[U(i * W + q)]) * U(K)
            x = U(i * K * W + q)
            for b in range(K):
                Xc[x + U(b * W)] = flat[r + U(b)]


@jit(error_model="numpy")
def _exact_solves(S, i, k):
    """The exact solves of step ``i`` (the first fit, on ``k`` rows, and its refresh at
    2k), lane-parallel, taken by every lane that has row ``i``; a lane where a pivot says
    a column is aliased leaves the lanes for the per-pixel loop (R's in-order aliasing).
    Selects over all lanes (lanes past ``width`` have no rows): no branch per lane."""
    W = LANES
    inverse_lanes(S, k)
    for q in range(W):
        take = (i < S[U(S_COUNT * W + q)]) & (S[U(S_ALONE * W + q)] == 0.0)  # & not and: no branch
        ok = S[U(S_OK * W + q)] != 0.0
        S[U(S_FULL * W + q)] = (1.0 if ok else 0.0) if take else S[U(S_FULL * W + q)]
        S[U(S_ALONE * W + q)] = 1.0 if take & (not ok) else S[U(S_ALONE * W + q)]
        S[U(S_OK * W + q)] = 1.0 if take & ok else 0.0  # now: the lane takes the new fit
    for ab in range(PACKED):
        for q in range(W):
            new = S[U(S_OK * W + q)] != 0.0
            S[U((S_P + ab) * W + q)] = S[U((S_PNEW + ab) * W + q)] if new else S[U((S_P + ab) * W + q)]
    for a in range(LANE_REGRESSORS):
        for q in range(W):
            new = S[U(S_OK * W + q)] != 0.0
            S[U((S_BETA + a) * W + q)] = S[U((S_BNEW + a) * W + q)] if new else S[U((S_BETA + a) * W + q)]


@jit(fastmath=CONTRACT, error_model="numpy", plain_args=True)
def _add_eight_rows(S, Xc, yc, lo, hi, k):
    """Gram and X'y of the exact solves: add rows ``lo .. hi - 1`` (at most eight) of every
    lane that has them, eight rows per pass over the Gram (the sums in the order of the
    rows)."""
    W = LANES
    R = LANE_REGRESSORS * W  # from one row's design values to the next row's
    for j in range(LANE_REGRESSORS):
        for q in range(W):
            S[U((S_TAKE + j) * W + q)] = 1.0 if lo + j < hi and lo + j < S[U(S_COUNT * W + q)] else 0.0
    t0 = S_TAKE * W
    for a in range(k):
        for b in range(a + 2):
            g = (S_G + a * (a + 1) // 2 + b) * W if b <= a else (S_RHS + a) * W
            x = lo * R + a * W
            v = lo * R + b * W  # the other factor: column b, or (b = a + 1) the values
            for q in range(W):
                acc = S[U(g + q)]
                acc += Xc[U(x + q)] * (Xc[U(v + q)] if b <= a else yc[U(lo * W + q)]) * S[U(t0 + q)]
                acc += Xc[U(x + R + q)] * (Xc[U(v + R + q)] if b <= a else yc[U((lo + 1) * W + q)]) * S[U(t0 + W + q)]
                acc += Xc[U(x + 2 * R + q)] * (Xc[U(v + 2 * R + q)] if b <= a else yc[U((lo + 2) * W + q)]) * S[U(t0 + 2 * W + q)]
                acc += Xc[U(x + 3 * R + q)] * (Xc[U(v + 3 * R + q)] if b <= a else yc[U((lo + 3) * W + q)]) * S[U(t0 + 3 * W + q)]
                acc += Xc[U(x + 4 * R + q)] * (Xc[U(v + 4 * R + q)] if b <= a else yc[U((lo + 4) * W + q)]) * S[U(t0 + 4 * W + q)]
                acc += Xc[U(x + 5 * R + q)] * (Xc[U(v + 5 * R + q)] if b <= a else yc[U((lo + 5) * W + q)]) * S[U(t0 + 5 * W + q)]
                acc += Xc[U(x + 6 * R + q)] * (Xc[U(v + 6 * R + q)] if b <= a else yc[U((lo + 6) * W + q)]) * S[U(t0 + 6 * W + q)]
                acc += Xc[U(x + 7 * R + q)] * (Xc[U(v + 7 * R + q)] if b <= a else yc[U((lo + 7) * W + q)]) * S[U(t0 + 7 * W + q)]
                S[U(g + q)] = acc


# The Sherman–Morrison steps, three passes over the lanes per row, each bound by one
# thing: :func:`_prime_step` (``u = (X'X)^{-1} x`` and ``x' beta``: 72 independent
# multiply-adds per lane), :func:`_residual_step` (a short chain through a square root and
# a division) and :func:`_update_step` (``(X'X)^{-1}`` and ``beta`` read and written once:
# 44 stores per lane). One pass doing all three kept 52 values per lane live, which spilled
# from AVX2's 16 registers, and each lane's chain through the division waited on its
# products with nothing else to do; apart, the steps took 23.5 instead of 28-30 ms on D2,
# single thread, AVX2 (benchmarks/README.md, issue 45). Also tried: the next row's ``u`` accumulated inside
# the update (no second read of ``(X'X)^{-1}``, but 24 live values: more spills, slower),
# and two rows per pass (a rank-two update: no faster). The sums are the one-pass
# kernel's, in its order, bit for bit.


@jit(fastmath=CONTRACT, error_model="numpy", plain_args=True)
def _prime_step(S, Xc, i):
    """``u = (X'X)^{-1} x`` and ``x' beta`` of row ``i`` of every lane, into ``S_U`` and
    ``S_PRED`` (the first pass of a step)."""
    W = LANES
    x = i * LANE_REGRESSORS * W
    for q in range(W):
        x0, x1, x2, x3 = Xc[U(x + q)], Xc[U(x + W + q)], Xc[U(x + 2 * W + q)], Xc[U(x + 3 * W + q)]
        x4, x5, x6, x7 = Xc[U(x + 4 * W + q)], Xc[U(x + 5 * W + q)], Xc[U(x + 6 * W + q)], Xc[U(x + 7 * W + q)]
        S[U((S_U + 0) * W + q)] = (S[U(0 * W + q)] * x0 + S[U(1 * W + q)] * x1 + S[U(3 * W + q)] * x2 + S[U(6 * W + q)] * x3
              + S[U(10 * W + q)] * x4 + S[U(15 * W + q)] * x5 + S[U(21 * W + q)] * x6 + S[U(28 * W + q)] * x7)
        S[U((S_U + 1) * W + q)] = (S[U(1 * W + q)] * x0 + S[U(2 * W + q)] * x1 + S[U(4 * W + q)] * x2 + S[U(7 * W + q)] * x3
              + S[U(11 * W + q)] * x4 + S[U(16 * W + q)] * x5 + S[U(22 * W + q)] * x6 + S[U(29 * W + q)] * x7)
        S[U((S_U + 2) * W + q)] = (S[U(3 * W + q)] * x0 + S[U(4 * W + q)] * x1 + S[U(5 * W + q)] * x2 + S[U(8 * W + q)] * x3
              + S[U(12 * W + q)] * x4 + S[U(17 * W + q)] * x5 + S[U(23 * W + q)] * x6 + S[U(30 * W + q)] * x7)
        S[U((S_U + 3) * W + q)] = (S[U(6 * W + q)] * x0 + S[U(7 * W + q)] * x1 + S[U(8 * W + q)] * x2 + S[U(9 * W + q)] * x3
              + S[U(13 * W + q)] * x4 + S[U(18 * W + q)] * x5 + S[U(24 * W + q)] * x6 + S[U(31 * W + q)] * x7)
        S[U((S_U + 4) * W + q)] = (S[U(10 * W + q)] * x0 + S[U(11 * W + q)] * x1 + S[U(12 * W + q)] * x2 + S[U(13 * W + q)] * x3
              + S[U(14 * W + q)] * x4 + S[U(19 * W + q)] * x5 + S[U(25 * W + q)] * x6 + S[U(32 * W + q)] * x7)
        S[U((S_U + 5) * W + q)] = (S[U(15 * W + q)] * x0 + S[U(16 * W + q)] * x1 + S[U(17 * W + q)] * x2 + S[U(18 * W + q)] * x3
              + S[U(19 * W + q)] * x4 + S[U(20 * W + q)] * x5 + S[U(26 * W + q)] * x6 + S[U(33 * W + q)] * x7)
        S[U((S_U + 6) * W + q)] = (S[U(21 * W + q)] * x0 + S[U(22 * W + q)] * x1 + S[U(23 * W + q)] * x2 + S[U(24 * W + q)] * x3
              + S[U(25 * W + q)] * x4 + S[U(26 * W + q)] * x5 + S[U(27 * W + q)] * x6 + S[U(34 * W + q)] * x7)
        S[U((S_U + 7) * W + q)] = (S[U(28 * W + q)] * x0 + S[U(29 * W + q)] * x1 + S[U(30 * W + q)] * x2 + S[U(31 * W + q)] * x3
              + S[U(32 * W + q)] * x4 + S[U(33 * W + q)] * x5 + S[U(34 * W + q)] * x6 + S[U(35 * W + q)] * x7)
        S[U(S_PRED * W + q)] = (x0 * S[U(36 * W + q)] + x1 * S[U(37 * W + q)] + x2 * S[U(38 * W + q)] + x3 * S[U(39 * W + q)]
                + x4 * S[U(40 * W + q)] + x5 * S[U(41 * W + q)] + x6 * S[U(42 * W + q)] + x7 * S[U(43 * W + q)])


@jit(fastmath=CONTRACT, error_model="numpy", plain_args=True)
def _residual_step(S, Xc, yc, w, i, k):
    """Recursive residual of row ``i`` of every lane into ``w[(i - k) * LANES + q]`` (and,
    if the lane has that row, into its sum in ``S_MEAN``, the Rec-CUSUM's mean), from
    ``S_U`` and ``S_PRED``; the gain and coefficient step of its update into ``S_GAIN``,
    ``S_STEP`` (0.0 where the lane is past its rows or has no full-rank fit)."""
    W = LANES
    x = i * LANE_REGRESSORS * W
    for q in range(W):
        f = 1.0 + (Xc[U(x + q)] * S[U(S_U * W + q)] + Xc[U(x + W + q)] * S[U((S_U + 1) * W + q)]
                   + Xc[U(x + 2 * W + q)] * S[U((S_U + 2) * W + q)] + Xc[U(x + 3 * W + q)] * S[U((S_U + 3) * W + q)]
                   + Xc[U(x + 4 * W + q)] * S[U((S_U + 4) * W + q)] + Xc[U(x + 5 * W + q)] * S[U((S_U + 5) * W + q)]
                   + Xc[U(x + 6 * W + q)] * S[U((S_U + 6) * W + q)] + Xc[U(x + 7 * W + q)] * S[U((S_U + 7) * W + q)])
        err = yc[U(i * W + q)] - S[U(S_PRED * W + q)]
        root = 1.0 / math.sqrt(f)  # one square root and one division per lane and step
        wi = err * root
        w[U((i - k) * W + q)] = wi
        live = i < S[U(S_COUNT * W + q)]
        S[U(S_MEAN * W + q)] += wi if live else 0.0  # in the order the Rec-CUSUM sums them
        g = root * root if live & (S[U(S_FULL * W + q)] != 0.0) else 0.0
        S[U(S_GAIN * W + q)] = g
        S[U(S_STEP * W + q)] = err * g


@jit(fastmath=CONTRACT, error_model="numpy", plain_args=True)
def _update_step(S):
    """The update of :func:`_residual_step`'s row: ``beta += u c`` and
    ``(X'X)^{-1} -= u u' g``, each lane's values in registers."""
    W = LANES
    for q in range(W):
        u0, u1, u2, u3 = S[U((S_U + 0) * W + q)], S[U((S_U + 1) * W + q)], S[U((S_U + 2) * W + q)], S[U((S_U + 3) * W + q)]
        u4, u5, u6, u7 = S[U((S_U + 4) * W + q)], S[U((S_U + 5) * W + q)], S[U((S_U + 6) * W + q)], S[U((S_U + 7) * W + q)]
        g = S[U(S_GAIN * W + q)]
        c = S[U(S_STEP * W + q)]
        S[U(36 * W + q)] += u0 * c
        S[U(37 * W + q)] += u1 * c
        S[U(38 * W + q)] += u2 * c
        S[U(39 * W + q)] += u3 * c
        S[U(40 * W + q)] += u4 * c
        S[U(41 * W + q)] += u5 * c
        S[U(42 * W + q)] += u6 * c
        S[U(43 * W + q)] += u7 * c
        v = u0 * g
        S[U(0 * W + q)] -= v * u0
        v = u1 * g
        S[U(1 * W + q)] -= v * u0
        S[U(2 * W + q)] -= v * u1
        v = u2 * g
        S[U(3 * W + q)] -= v * u0
        S[U(4 * W + q)] -= v * u1
        S[U(5 * W + q)] -= v * u2
        v = u3 * g
        S[U(6 * W + q)] -= v * u0
        S[U(7 * W + q)] -= v * u1
        S[U(8 * W + q)] -= v * u2
        S[U(9 * W + q)] -= v * u3
        v = u4 * g
        S[U(10 * W + q)] -= v * u0
        S[U(11 * W + q)] -= v * u1
        S[U(12 * W + q)] -= v * u2
        S[U(13 * W + q)] -= v * u3
        S[U(14 * W + q)] -= v * u4
        v = u5 * g
        S[U(15 * W + q)] -= v * u0
        S[U(16 * W + q)] -= v * u1
        S[U(17 * W + q)] -= v * u2
        S[U(18 * W + q)] -= v * u3
        S[U(19 * W + q)] -= v * u4
        S[U(20 * W + q)] -= v * u5
        v = u6 * g
        S[U(21 * W + q)] -= v * u0
        S[U(22 * W + q)] -= v * u1
        S[U(23 * W + q)] -= v * u2
        S[U(24 * W + q)] -= v * u3
        S[U(25 * W + q)] -= v * u4
        S[U(26 * W + q)] -= v * u5
        S[U(27 * W + q)] -= v * u6
        v = u7 * g
        S[U(28 * W + q)] -= v * u0
        S[U(29 * W + q)] -= v * u1
        S[U(30 * W + q)] -= v * u2
        S[U(31 * W + q)] -= v * u3
        S[U(32 * W + q)] -= v * u4
        S[U(33 * W + q)] -= v * u5
        S[U(34 * W + q)] -= v * u6
        S[U(35 * W + q)] -= v * u7


@jit(fastmath=CONTRACT, error_model="numpy", plain_args=True)
def _fit_rss(S, Xc, yc, n_rows):
    """Residual sum of squares of each lane's candidates under its final coefficients, and
    their max |y|, for the perfect-fit check. (Not the sum of the squared recursive residuals, equal in exact
    arithmetic: the first solves on unevenly spaced rows carry rounding far above the
    check's threshold, and exact fits with gaps would be tested.)"""
    W = LANES
    K = LANE_REGRESSORS
    for q in range(W):
        S[U(S_RSS * W + q)] = 0.0
        S[U(S_YMAX * W + q)] = 0.0
    for i in range(n_rows):
        x = i * K * W
        for q in range(W):
            fit = (Xc[U(x + q)] * S[U(36 * W + q)] + Xc[U(x + W + q)] * S[U(37 * W + q)]
                   + Xc[U(x + 2 * W + q)] * S[U(38 * W + q)] + Xc[U(x + 3 * W + q)] * S[U(39 * W + q)]
                   + Xc[U(x + 4 * W + q)] * S[U(40 * W + q)] + Xc[U(x + 5 * W + q)] * S[U(41 * W + q)]
                   + Xc[U(x + 6 * W + q)] * S[U(42 * W + q)] + Xc[U(x + 7 * W + q)] * S[U(43 * W + q)])
            live = i < S[U(S_COUNT * W + q)]
            e = yc[U(i * W + q)] - fit
            S[U(S_RSS * W + q)] += e * e if live else 0.0
            size = abs(yc[U(i * W + q)]) if live else 0.0
            top = S[U(S_YMAX * W + q)]
            S[U(S_YMAX * W + q)] = size if size > top else top


@jit(fastmath=CONTRACT, error_model="numpy")
def _rec_cusum_lanes(S, w, k):
    """Rec-CUSUM of each lane's ``m = count - k`` recursive residuals (their sum already
    in ``S_MEAN``, added up by :func:`_residual_step`): its max statistic and first
    (1-based) crossing of the alpha = 0.05 boundary (-1: none), the arithmetic of
    :func:`_roc_start` over all lanes but for the scan's two divisions per residual: the
    boundary's ``2 j / m`` is ``j`` times ``2 / m``, and the max of ``value / bound`` is
    found by cross-multiplied comparisons (its value, one quotient, taken at the end).
    Both can move the statistic by an ulp, never by more."""
    W = LANES
    m_max = 0.0
    for q in range(W):
        m_max = max(m_max, S[U(S_COUNT * W + q)] - k)
        S[U(S_MEAN * W + q)] /= max(S[U(S_COUNT * W + q)] - k, 1.0)
        S[U(S_SCALE * W + q)] = 0.0  # the sum of squares first
        S[U(S_CUM * W + q)] = 0.0
        S[U(S_STAT * W + q)] = 0.0  # the best value / bound so far as value (here) ...
        S[U(S_BOUND * W + q)] = 1.0  # ... and bound
        S[U(S_FIRST * W + q)] = -1.0
    for j in range(int(m_max)):
        for q in range(W):
            e = w[U(j * W + q)] - S[U(S_MEAN * W + q)]
            S[U(S_SCALE * W + q)] += e * e if j < S[U(S_COUNT * W + q)] - k else 0.0
    for q in range(W):
        m = max(S[U(S_COUNT * W + q)] - k, 2.0)
        S[U(S_SCALE * W + q)] = 1.0 / (math.sqrt(S[U(S_SCALE * W + q)] / (m - 1.0)) * math.sqrt(m))
        S[U(S_SLOPE * W + q)] = 2.0 / max(S[U(S_COUNT * W + q)] - k, 1.0)
    for j in range(1, int(m_max) + 1):
        for q in range(W):
            live = j <= S[U(S_COUNT * W + q)] - k
            cum = S[U(S_CUM * W + q)] + (w[U((j - 1) * W + q)] if live else 0.0)
            S[U(S_CUM * W + q)] = cum
            value = abs(cum * S[U(S_SCALE * W + q)])
            bound = 1.0 + j * S[U(S_SLOPE * W + q)]
            best = S[U(S_STAT * W + q)]
            best_bound = S[U(S_BOUND * W + q)]
            better = live & (value * best_bound > best * bound)  # & not and: no branch per lane
            S[U(S_STAT * W + q)] = value if better else best
            S[U(S_BOUND * W + q)] = bound if better else best_bound
            first = S[U(S_FIRST * W + q)]
            S[U(S_FIRST * W + q)] = j if live & (first < 0.0) & (value > ROC_LAMBDA_05 * bound) else first
    for q in range(W):
        S[U(S_STAT * W + q)] /= S[U(S_BOUND * W + q)]


@jit(error_model="numpy")
def _roc_block(tile, p0, width, s, stop, nodata, has_nodata, X, X8, level, rows, S, Xc, yc, w, first_hist, flagged,
               deferred):
    """ROC history start of pixels ``[p0, p0 + width)`` (``tile``: their series) for the
    start ``s`` (candidates before date ``stop``), with the pixels as lanes; lanes rank
    deficient at an exact solve are marked ``deferred``, for the per-pixel loop."""
    W = LANES
    k = X.shape[1]
    _compact_reversed(tile, width, stop, nodata, has_nodata, rows, yc, S)
    n_max = 0
    for q in range(W):
        n_max = max(n_max, int(S[U(S_COUNT * W + q)]))
    for q in range(width):
        first_hist[s, p0 + q] = 0
        flagged[s, p0 + q] = False
    if n_max <= k:
        return
    _gather_design(X8, rows, n_max, Xc)
    S[: S_COUNT * W] = 0.0  # P, beta, the Gram, flags
    S[S_MEAN * W:(S_MEAN + 1) * W] = 0.0  # the recursive residuals' sum
    _add_eight_rows(S, Xc, yc, 0, k, k)
    for i in range(k, n_max):
        if i == k or i == 2 * k:  # the first fit and its refresh (the per-pixel loop's schedule)
            _exact_solves(S, i, k)
            if i == k:  # the rows the refresh needs
                _add_eight_rows(S, Xc, yc, k, 2 * k, k)
        _prime_step(S, Xc, i)
        _residual_step(S, Xc, yc, w, i, k)
        _update_step(S)
    _fit_rss(S, Xc, yc, n_max)
    _rec_cusum_lanes(S, w, k)
    for q in range(width):
        n = int(S[U(S_COUNT * W + q)])
        m = n - k
        if S[U(S_ALONE * W + q)] != 0.0:  # the per-pixel loop's (history_first)
            deferred[s, p0 + q] = True
            continue
        if m < 2:
            continue
        sigma = math.sqrt(S[U(S_RSS * W + q)] / m)
        if not sigma > PERFECT_FIT_RTOL * S[U(S_YMAX * W + q)]:
            continue  # e.g. a constant series: nothing to test
        drop, flag = _roc_verdict(S[U(S_STAT * W + q)], int(S[U(S_FIRST * W + q)]), m, level)
        flagged[s, p0 + q] = flag
        if drop > 0:
            first_hist[s, p0 + q] = rows[U((n - 1 - drop) * W + q)]


@jit(nogil=True)
def _roc_lanes_kernel(c, n_chunks, raw, itemsize, nodata, has_nodata, X, X8, monitor_begin, level, first_hist, flagged,
                      deferred):
    """ROC history selection, chunk ``c`` of ``n_chunks`` (a task of
    :func:`~tscube._threads.run_tasks`): its range of blocks of ``LANES`` pixels streamed
    through private buffers; the cube as :func:`~tscube.bfast.core.series_cpu.cube_bytes`
    (``raw``, ``itemsize``: one kernel for every dtype). Pixels whose first rows are rank
    deficient are left to the per-pixel loop (``deferred``): its code, R's in-order
    aliasing by QR, is not compiled into this kernel, which most calls never need."""
    T = raw.shape[0]
    n_pixels = raw.shape[1] // itemsize
    W = LANES
    S_count = monitor_begin.shape[0]
    stop = 0
    for s in range(S_count):
        stop = max(stop, monitor_begin[s])
    n_blocks = (n_pixels + W - 1) // W
    tile = tile_buffer(W, stop)
    rows = np.zeros(T * W, dtype=np.int32)  # rows past a lane's count: any date
    S = np.zeros(S_ROWS * W)
    Xc = np.zeros((T + LANE_REGRESSORS) * LANE_REGRESSORS * W)  # room for eight rows past the last
    yc = np.zeros((T + LANE_REGRESSORS) * W)
    w = np.empty(T * W)
    for ib in range(c * n_blocks // n_chunks, (c + 1) * n_blocks // n_chunks):
        p0 = ib * W
        width = min(n_pixels, p0 + W) - p0
        load_tile_bytes(raw, itemsize, p0, width, stop, tile)
        for s in range(S_count):
            _roc_block(tile, p0, width, s, monitor_begin[s], nodata, has_nodata, X, X8, level, rows, S, Xc, yc, w,
                       first_hist, flagged, deferred)


@jit(nogil=True)
def _history_kernel(c, n_chunks, raw, itemsize, nodata, has_nodata, X, monitor_begin, roc_level, bai_perron, block,
                    first_hist, flagged):
    """History selection one pixel at a time, chunk ``c`` of ``n_chunks``: ROC at level
    ``roc_level`` (designs too wide for the lanes of :func:`_roc_lanes_kernel`, and
    pixels whose first rows are rank deficient) with ``bai_perron`` None, or Bai–Perron
    with ``roc_level`` None and ``bai_perron`` the programme's callees by address
    (:data:`~tscube.bfast.core.bai_perron_cpu.PROGRAMME_CALLS`). numba compiles one kernel per pair
    of types and prunes the branch that an argument's ``is not None`` decides, but only
    where that argument is None (a float's ``is None`` stays a test at run time): hence
    one argument per method, so that BP's kernel holds no ROC code and ROC's no
    Bai–Perron programme (which it held until 2026-11-29: docs/performance.md). The cube
    as :func:`~tscube.bfast.core.series_cpu.cube_bytes` (one kernel for every dtype)."""
    T = raw.shape[0]
    P = raw.shape[1] // itemsize
    k = X.shape[1]
    S = monitor_begin.shape[0]
    n_blocks = (P + block - 1) // block
    # per-thread buffers, reused for the pixels of the chunk's blocks
    rows = np.empty(T, dtype=np.int64)
    y = np.empty(T)
    w = np.empty(T)
    Pinv = np.empty((k, k))
    beta = np.empty(k)
    Px = np.empty(k)
    R = np.empty((k, k))
    idx = np.empty(k, dtype=np.int64)
    Q = np.empty((k, T))  # Gram–Schmidt columns
    givens = (np.empty((k, k + 1)), np.empty(k + 1), np.empty(k, dtype=np.bool_), np.empty(k, dtype=np.int64),
              np.empty(k, dtype=np.int64), np.empty(k, dtype=np.int64), np.empty(k))
    bp_steps = 1 if roc_level is not None else T + 1
    sum_xx = np.empty((bp_steps, k, k))
    sum_xy = np.empty((bp_steps, k))
    sum_yy = np.empty(bp_steps)
    memo = triangle_memo(bp_steps - 1, k)  # pixels with the same valid dates share it
    stop = 0
    for s in range(S):
        stop = max(stop, monitor_begin[s])
    tile = tile_buffer(block, stop)
    for ib in range(c * n_blocks // n_chunks, (c + 1) * n_blocks // n_chunks):
        p0 = ib * block
        width = min(P, p0 + block) - p0
        load_tile_bytes(raw, itemsize, p0, width, stop, tile)
        for s in range(S):  # pixel after pixel for one start: alike rows, one memo
            for q in range(width):
                p = p0 + q
                n = compact_valid(tile[q], monitor_begin[s], nodata, has_nodata, rows, y)
                first_hist[s, p] = 0
                if n <= k:
                    continue
                drop = 0
                if roc_level is not None:
                    drop, flag = _roc_pixel(X, rows, y, n, roc_level, w, Q, R, Pinv, beta, Px, idx, givens)
                    flagged[s, p] = flag
                if bai_perron is not None:
                    drop = _bp_start(X, rows, y, n, w, Q, R, idx, beta, Pinv, Px, sum_xx, sum_xy, sum_yy, memo,
                                     bai_perron)
                    flagged[s, p] = drop < 0
                    drop = max(drop, 0)
                first_hist[s, p] = rows[drop] if drop > 0 else 0  # 0: every candidate, as "all"


def history_first(values: np.ndarray, plan: MonitorPlan) -> tuple[np.ndarray, np.ndarray | None]:
    """First time index of each pixel's stable history, ``(S, P)`` int64, and the flags
    ``(S, P)`` bool (ROC_NO_CROSSING for "ROC", BP_TOO_SHORT for "BP"; ``None`` when no
    pixel can be flagged)."""
    n_pixels = values.shape[1]
    first = np.full((plan.n_starts, n_pixels), plan.history_begin, dtype=np.int64)
    if plan.history in ("all", "fixed"):
        return first, None
    # only the dates before the last monitoring start are read
    values = values[: int(plan.monitor_begin.max(initial=0))]
    X = plan.design.matrix
    k = X.shape[1]
    if plan.history == "ROC" and k <= LANE_REGRESSORS and n_pixels:
        # one kernel for every dtype (a view of float data, the only part converted of integer data)
        raw, itemsize, nodata, has_nodata = cube_bytes(values, plan.nodata)
        flagged = np.zeros((plan.n_starts, n_pixels), dtype=np.bool_)
        X8 = np.zeros((X.shape[0], LANE_REGRESSORS))
        X8[:, :k] = X
        n_blocks = -(-n_pixels // LANES)
        n_chunks = max(1, min(n_blocks, 4 * numba.get_num_threads()))
        deferred = np.zeros((plan.n_starts, n_pixels), dtype=np.bool_)
        run_tasks(_roc_lanes_kernel, n_chunks, raw, itemsize, nodata, has_nodata, X, X8,
                  plan.monitor_begin.astype(np.int64), plan.level_roc, first, flagged, deferred)
        alone = np.flatnonzero(deferred.any(axis=0))
        if alone.size:  # first rows rank deficient: the per-pixel loop, on those pixels' columns
            alone_first, alone_flagged = _per_pixel(values[:, alone], plan, first[:, alone].copy())
            first[:, alone] = np.where(deferred[:, alone], alone_first, first[:, alone])
            flagged[:, alone] = np.where(deferred[:, alone], alone_flagged, flagged[:, alone])
        return first, flagged
    return _per_pixel(values, plan, first)


def _per_pixel(values: np.ndarray, plan: MonitorPlan, first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`history_first` one pixel at a time (:func:`_history_kernel`), into ``first``."""
    flagged = np.zeros((plan.n_starts, values.shape[1]), dtype=np.bool_)
    run_tasks(_history_kernel, *_per_pixel_arguments(values, plan, first, flagged))
    return first, flagged


def _per_pixel_arguments(values: np.ndarray, plan: MonitorPlan, first: np.ndarray, flagged: np.ndarray) -> tuple:
    """``n_tasks, *args`` of :func:`_history_kernel` over ``values``."""
    raw, itemsize, nodata, has_nodata = cube_bytes(values, plan.nodata)
    block = 16
    return (memo_chunks(values.shape[1], block), raw, itemsize, nodata, has_nodata, plan.design.matrix,
            plan.monitor_begin.astype(np.int64), plan.level_roc if plan.history == "ROC" else None,
            None if plan.history == "ROC" else PROGRAMME_CALLS, block, first, flagged)


def history_compile_jobs(values: np.ndarray, plan: MonitorPlan) -> list:
    """What another process can compile ahead of :func:`history_first` on ``values``
    (:func:`tscube._jit.compile_jobs`): for ``"BP"``, the Bai–Perron programme's callees
    by address (:data:`PROGRAMME_CALLS`) that numba's cache lacks (this process compiles
    the kernel meanwhile); nothing for the other histories."""
    if plan.history != "BP" or not values.shape[1]:
        return []
    one = values[:, :1]  # the argument types, not the sizes
    n_tasks, *args = _per_pixel_arguments(one, plan, np.zeros((plan.n_starts, 1), dtype=np.int64),
                                          np.zeros((plan.n_starts, 1), dtype=np.bool_))
    return compile_jobs(_history_kernel, (0, n_tasks, *args))
