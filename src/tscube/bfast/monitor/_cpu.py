"""Multi-core CPU engine of BFAST Monitor: numba kernels, parallel over pixel blocks.

Same outputs and status codes as :mod:`tscube.bfast.monitor._reference`, organised for speed.
Per pixel the work is Algorithm 1 of the BFAST GPU paper: masked Gram ``X'X`` and ``X'y``
of the history, an equilibrated Cholesky solve (singular designs flagged), residuals,
sigma, the OLS-MOSUM process by a running window sum over the valid observations
(OLS-CUSUM: a running sum from the history start), its boundary, the first crossing, the
median monitoring residual (selection, not a sort) and the mean of the process. With
season dummies a history must also hold every cycle position (a bit mask per pixel).
Three formulations (``config.CPU_BFAST_GRAM``), recorded side by side by
``benchmarks/bfast_monitor.py``; :data:`DEFAULT_GRAM` is the fastest there:

- ``"simd"`` (default): each worker streams blocks of ``config.CPU_BLOCK_PIXELS`` pixels
  with the pixels as SIMD lanes. The block is read once, date by date as the cube is
  stored, into float64 buffers (value and 0/1 validity, branch-free: cloud masks are
  random), with software prefetches a few dates ahead (a block's row of a date is a
  few cache lines, a page away from the next date's: no hardware prefetcher sees
  them). The masked Gram comes from masked sums of the 21 functions of time that span
  the 36 products ``x_t x_t'`` (trigonometric product identities; :func:`gram_basis`),
  accumulated in register tiles of four dates; the solves run over all lanes at once;
  residuals likewise, four dates per pass (the history's with their sums of squares).
  The monitoring residuals go straight from a four-row buffer to each pixel's row of
  valid values (compaction by the 0/1 mask); one backward pass puts the last
  ``window - 1`` valid history residuals before them, and each pixel runs its
  sequential MOSUM tail on its compacted row. With several monitoring starts
  the block is read once and, when every pixel shares the history start ("all",
  "fixed"), the Gram tiles of the earlier start are extended rather than recomputed
  (same sums in the same order, so each start's result equals a call with that start).
- ``"blas"``: as "simd", but the masked Gram matrices of all pixels come from BLAS
  (``table of x_t x_t'`` times the 0/1 validity mask, NumPy ``matmul`` over chunks of
  pixels, outside the numba kernels so that BLAS threads and numba threads never nest).
- ``"fused"``: one pixel at a time, everything in one loop over its compacted series.

Everything that decides a break (Gram, X'y, residual sums of squares, MOSUM sums) is
accumulated in float64, whatever the input dtype. Threads follow numba's settings
(``NUMBA_NUM_THREADS`` / ``numba.set_num_threads``).
"""

from __future__ import annotations

import functools
import math

import numba
import numpy as np

from ... import config
from ..._jit import CONTRACT, compile_elsewhere, compile_jobs, jit
from ..._prefetch import prefetch_row
from ..._threads import run_tasks, task_count
from ..core.inputs import SINGULAR_PIVOT_TOL, kernel_nodata
from ._cpu_pixel import (STATUS_ALL_MISSING, STATUS_NO_MONITORING, STATUS_OK, STATUS_PERFECT_FIT, STATUS_SINGULAR,
                         STATUS_TOO_FEW, mosum_tail)
from .history import history_compile_jobs, history_first
from .plan import MonitorPlan
from .result import empty_outputs
from .status import flag_status

#: The kernel formulations (see the module docstring), and the default one, used unless
#: ``config.CPU_BFAST_GRAM`` says otherwise.
FORMULATIONS = ("fused", "simd", "blas")
DEFAULT_GRAM = "simd"

_U = np.uint64  # unsigned indices: numba adds a negative-index wraparound to signed ones

_TILE = 4  # dates per register tile of the Gram accumulation
_PREFETCH_DATES = 8  # dates ahead whose block rows _load_block asks the cache for


@jit(fastmath=CONTRACT)
def _load_block(values, p0, width, nodata, has_nodata, W, Y, nvalid, ninf):
    """Read pixels ``[p0, p0 + width)`` of every date once, as stored (time-major), into
    the float64 block buffers: ``W`` = 1.0 where the observation counts, else 0.0, and
    ``Y`` = the value there, else 0.0. Lanes past ``width`` (last block) are zero."""
    T = values.shape[0]
    lanes = W.shape[1]
    base = np.uint64(p0)  # unsigned indices: no negative-index wraparound, so no gathers
    for q in range(lanes):
        nvalid[q] = 0.0
        ninf[q] = 0.0
    line = max(1, 64 // values.itemsize)  # elements per cache line
    for t in range(T):
        if t + _PREFETCH_DATES < T:  # the rows ahead are a page apart: no prefetcher sees them
            ahead = t + _PREFETCH_DATES
            for q in range(0, width, line):
                prefetch_row(values, ahead, base + np.uint64(q))
            prefetch_row(values, ahead, base + np.uint64(width - 1))
        for q in range(width):  # branch-free: cloud masks are random
            v = np.float64(values[t, base + np.uint64(q)])
            inf = abs(v) == np.inf
            good = (v == v) & (not inf) & ((v != nodata) | (not has_nodata))
            W[t, q] = 1.0 if good else 0.0
            Y[t, q] = v if good else 0.0
            nvalid[q] += 1.0 if good else 0.0
            ninf[q] += 1.0 if inf else 0.0
        for q in range(width, lanes):
            W[t, q] = 0.0
            Y[t, q] = 0.0


@jit(fastmath=CONTRACT)
def _gram_tiles(G, xy, M, Ym, F, X, t, stop):
    """Add the dates ``t, t+1, ...`` to the masked sums ``G`` of the Gram basis functions
    ``F`` (:func:`gram_basis`; one column per pixel) and to ``X'y``, in whole tiles of
    ``_TILE`` dates, up to ``stop``; return the first date not added. Four dates per pass
    keep the accumulators' loads and stores (the bottleneck of a date-by-date update) to
    a quarter."""
    kk = F.shape[1]
    k = X.shape[1]
    lanes = M.shape[1]
    while t + _TILE <= stop:
        for ab in range(kk):
            x0 = F[t, ab]
            x1 = F[t + 1, ab]
            x2 = F[t + 2, ab]
            x3 = F[t + 3, ab]
            for q in range(lanes):
                G[ab, q] += M[t, q] * x0 + M[t + 1, q] * x1 + M[t + 2, q] * x2 + M[t + 3, q] * x3
        for a in range(k):
            x0 = X[t, a]
            x1 = X[t + 1, a]
            x2 = X[t + 2, a]
            x3 = X[t + 3, a]
            for q in range(lanes):
                xy[a, q] += Ym[t, q] * x0 + Ym[t + 1, q] * x1 + Ym[t + 2, q] * x2 + Ym[t + 3, q] * x3
        t += _TILE
    return t


@jit(fastmath=CONTRACT)
def _gram_singles(G, xy, M, Ym, F, X, t, stop):
    """Add the dates ``[t, stop)`` one by one (the remainder after :func:`_gram_tiles`)."""
    kk = F.shape[1]
    k = X.shape[1]
    lanes = M.shape[1]
    for u in range(t, stop):
        for ab in range(kk):
            x0 = F[u, ab]
            for q in range(lanes):
                G[ab, q] += M[u, q] * x0
        for a in range(k):
            x0 = X[u, a]
            for q in range(lanes):
                xy[a, q] += Ym[u, q] * x0


@jit(fastmath=CONTRACT)
def _expand_gram(G, Gf, ptr, index, value, width):
    """The masked Gram matrices (lower triangles) from the masked sums of the basis
    functions: ``G[ab] = sum_i value[i] Gf[index[i]]`` over ``ptr[ab] <= i < ptr[ab + 1]``."""
    for ab in range(G.shape[0]):
        for q in range(width):
            G[ab, q] = 0.0
        for i in range(ptr[ab], ptr[ab + 1]):
            f = index[i]
            c = value[i]
            for q in range(width):
                G[ab, q] += c * Gf[f, q]


@jit(fastmath=CONTRACT)
def _solve_lanes(G, xy, k, D, L, tmp, beta, ok):
    """Equilibrated Cholesky solves of all pixels of a block at once (pixels as SIMD lanes).

    Same arithmetic as :func:`_solve_equilibrated`, lane by lane; ``ok[q]`` = 0.0 marks a
    singular design (the failing lane continues on harmless values and is ignored).
    """
    lanes = G.shape[1]
    for q in range(lanes):
        ok[q] = 1.0
    for a in range(k):
        aa = a * (a + 1) // 2 + a
        for q in range(lanes):
            g = G[aa, q]
            bad = g <= 0.0
            ok[q] = 0.0 if bad else ok[q]
            D[a, q] = 1.0 if bad else math.sqrt(g)
    for a in range(k):
        ia = a * (a + 1) // 2
        for c in range(a + 1):
            ic = c * (c + 1) // 2
            for q in range(lanes):
                tmp[q] = G[ia + c, q] / (D[a, q] * D[c, q])
            for m in range(c):
                for q in range(lanes):
                    tmp[q] -= L[ia + m, q] * L[ic + m, q]
            if a == c:
                for q in range(lanes):
                    s = tmp[q]
                    bad = s < SINGULAR_PIVOT_TOL
                    ok[q] = 0.0 if bad else ok[q]
                    L[ia + a, q] = 1.0 if bad else math.sqrt(s)
            else:
                for q in range(lanes):
                    L[ia + c, q] = tmp[q] / L[ic + c, q]
    for a in range(k):  # forward substitution on the scaled system
        ia = a * (a + 1) // 2
        for q in range(lanes):
            tmp[q] = xy[a, q] / D[a, q]
        for m in range(a):
            for q in range(lanes):
                tmp[q] -= L[ia + m, q] * beta[m, q]
        for q in range(lanes):
            beta[a, q] = tmp[q] / L[ia + a, q]
    for a in range(k - 1, -1, -1):  # backward substitution
        ia = a * (a + 1) // 2
        for q in range(lanes):
            tmp[q] = beta[a, q]
        for m in range(a + 1, k):
            im = m * (m + 1) // 2
            for q in range(lanes):
                tmp[q] -= L[im + a, q] * beta[m, q]
        for q in range(lanes):
            beta[a, q] = tmp[q] / L[ia + a, q]
    for a in range(k):
        for q in range(lanes):
            beta[a, q] /= D[a, q]


@jit(fastmath=CONTRACT, plain_args=True)  # one version for every caller's constants
def _residuals(E, e, Y, Xr, beta, t):
    """``E[e] = Y[t] - Xr[t] beta`` for one date ``t`` (all lanes; masked later).

    ``Xr`` is the design padded with zero columns to a multiple of 8 (and ``beta`` with
    zero rows): eight regressors per pass, so that the usual designs (k <= 8) store each
    residual once instead of once per group of regressors."""
    lanes = E.shape[1]
    for a in range(0, Xr.shape[1], 8):
        x0 = Xr[t, a]
        x1 = Xr[t, a + 1]
        x2 = Xr[t, a + 2]
        x3 = Xr[t, a + 3]
        x4 = Xr[t, a + 4]
        x5 = Xr[t, a + 5]
        x6 = Xr[t, a + 6]
        x7 = Xr[t, a + 7]
        src, i = (Y, t) if a == 0 else (E, e)
        for q in range(lanes):
            fit = (x0 * beta[a, q] + x1 * beta[a + 1, q] + x2 * beta[a + 2, q] + x3 * beta[a + 3, q]
                   + x4 * beta[a + 4, q] + x5 * beta[a + 5, q] + x6 * beta[a + 6, q] + x7 * beta[a + 7, q])
            E[e, q] = src[i, q] - fit


@jit(fastmath=CONTRACT, plain_args=True)  # one version for every caller's constants
def _residual_quad(E, e, Y, Xr, beta, t):
    """:func:`_residuals` of the four dates ``t .. t + 3`` into rows ``e .. e + 3`` in one
    pass: each coefficient of ``beta`` loaded once serves four dates (one date per pass
    is load-bound). The design values are read before the lane loop (stores to ``E``
    could alias them)."""
    lanes = E.shape[1]
    t1 = t + 1
    t2 = t + 2
    t3 = t + 3
    for a in range(0, Xr.shape[1], 8):
        src, i = (Y, t) if a == 0 else (E, e)  # one source: a select per value defeats vectorization
        x00, x01, x02, x03 = Xr[t, a], Xr[t, a + 1], Xr[t, a + 2], Xr[t, a + 3]
        x04, x05, x06, x07 = Xr[t, a + 4], Xr[t, a + 5], Xr[t, a + 6], Xr[t, a + 7]
        x10, x11, x12, x13 = Xr[t1, a], Xr[t1, a + 1], Xr[t1, a + 2], Xr[t1, a + 3]
        x14, x15, x16, x17 = Xr[t1, a + 4], Xr[t1, a + 5], Xr[t1, a + 6], Xr[t1, a + 7]
        x20, x21, x22, x23 = Xr[t2, a], Xr[t2, a + 1], Xr[t2, a + 2], Xr[t2, a + 3]
        x24, x25, x26, x27 = Xr[t2, a + 4], Xr[t2, a + 5], Xr[t2, a + 6], Xr[t2, a + 7]
        x30, x31, x32, x33 = Xr[t3, a], Xr[t3, a + 1], Xr[t3, a + 2], Xr[t3, a + 3]
        x34, x35, x36, x37 = Xr[t3, a + 4], Xr[t3, a + 5], Xr[t3, a + 6], Xr[t3, a + 7]
        for q in range(lanes):
            b0, b1, b2, b3 = beta[a, q], beta[a + 1, q], beta[a + 2, q], beta[a + 3, q]
            b4, b5, b6, b7 = beta[a + 4, q], beta[a + 5, q], beta[a + 6, q], beta[a + 7, q]
            f0 = (x00 * b0 + x01 * b1 + x02 * b2 + x03 * b3
                  + x04 * b4 + x05 * b5 + x06 * b6 + x07 * b7)
            f1 = (x10 * b0 + x11 * b1 + x12 * b2 + x13 * b3
                  + x14 * b4 + x15 * b5 + x16 * b6 + x17 * b7)
            f2 = (x20 * b0 + x21 * b1 + x22 * b2 + x23 * b3
                  + x24 * b4 + x25 * b5 + x26 * b6 + x27 * b7)
            f3 = (x30 * b0 + x31 * b1 + x32 * b2 + x33 * b3
                  + x34 * b4 + x35 * b5 + x36 * b6 + x37 * b7)
            E[e + 0, q] = src[i + 0, q] - f0
            E[e + 1, q] = src[i + 1, q] - f1
            E[e + 2, q] = src[i + 2, q] - f2
            E[e + 3, q] = src[i + 3, q] - f3


@jit(fastmath=CONTRACT)
def _history_residual_sums(E, Y, Xr, beta, M, Ym, t0, begin, nh, ymax, rss, esum):
    """Residuals of the dates ``[t0, begin)`` (all lanes) and, while each row is in cache,
    per lane: history size, max |y|, residual sum of squares and sum (mask ``M``)."""
    lanes = E.shape[1]
    for q in range(lanes):
        nh[q] = 0.0
        ymax[q] = 0.0
        rss[q] = 0.0
        esum[q] = 0.0
    t = t0
    while t < begin:
        step = 4 if t + 4 <= begin else 1
        if step == 4:
            _residual_quad(E, t, Y, Xr, beta, t)
        else:
            _residuals(E, t, Y, Xr, beta, t)
        for u in range(t, t + step):
            for q in range(lanes):
                m = M[u, q]
                e = E[u, q]
                y = abs(Ym[u, q])
                nh[q] += m
                ymax[q] = y if y > ymax[q] else ymax[q]
                rss[q] += e * e if m != 0.0 else 0.0
                esum[q] += e if m != 0.0 else 0.0
        t += step


@jit(fastmath=CONTRACT, plain_args=True)  # one version for every caller's constants
def _monitor_residuals_compacted(R, Y, Xr, beta, W, begin, width, offset, C, pos, mcount):
    """Residuals of the monitoring dates ``[begin, T)``, four dates at a time into the
    small buffer ``R`` (``(4, lanes)``, in cache), each lane's valid ones appended to its
    row of ``C`` from ``C[q, offset]`` on; ``mcount`` = how many. Writes are branch-free
    (every value is written, the position advances by the 0/1 mask) with unsigned flat
    indices (no wraparound checks)."""
    T = Y.shape[0]
    row = C.shape[1]
    flat = C.reshape(C.size)
    for q in range(width):
        pos[q] = q * row + offset
    t = begin
    while t + 4 <= T:
        _residual_quad(R, 0, Y, Xr, beta, t)
        for q in range(width):
            at = pos[q]
            flat[_U(at)] = R[0, q]
            at += int(W[t, q])
            flat[_U(at)] = R[1, q]
            at += int(W[t + 1, q])
            flat[_U(at)] = R[2, q]
            at += int(W[t + 2, q])
            flat[_U(at)] = R[3, q]
            pos[q] = at + int(W[t + 3, q])
        t += 4
    while t < T:
        _residuals(R, 0, Y, Xr, beta, t)
        for q in range(width):
            at = pos[q]
            flat[_U(at)] = R[0, q]
            pos[q] = at + int(W[t, q])
        t += 1
    for q in range(width):
        mcount[q] = pos[q] - (q * row + offset)


@jit(fastmath=CONTRACT, plain_args=True)  # one version for every caller's constants
def _compact_history_tail(E, M, begin, t0, window, width, offset, C, pos):
    """Put each lane's last ``window[q] - 1`` valid history residuals (rows of ``E``,
    mask ``M``) just before its monitoring residuals, which start at ``C[q, offset]``.
    One backward pass over the dates for all lanes, stopping when every lane has its
    values; branch-free writes (finished lanes write to the spare last column). Lanes
    with ``window[q] <= 1`` get none."""
    row = C.shape[1]
    flat = C.reshape(C.size)
    spare = row - 1
    remaining = 0
    for q in range(width):
        pos[q] = offset - 1
        remaining += window[q] > 1
    t = begin - 1
    while remaining > 0 and t >= t0:
        for q in range(width):
            at = pos[q]
            limit = offset + 1 - window[q]
            open_ = at >= limit
            flat[_U(q * row + (at if open_ else spare))] = E[t, q]
            step = int(M[t, q]) if open_ else 0
            pos[q] = at - step
            remaining -= 1 if (step == 1 and at == limit) else 0
        t -= 1


@jit(fastmath=CONTRACT)
def _monitor_date(W, q, begin, j):
    """Date index of the ``j``-th (0-based) valid monitoring observation of lane ``q``."""
    t = begin
    seen = int(W[t, q])
    while seen <= j:
        t += 1
        seen += int(W[t, q])
    return t


@jit(fastmath=CONTRACT, plain_args=True)  # one version for every caller's constants
def _pixel_tail(
    buf, offset, q, p, s, W, begin, n, m, rss, esum, ysum, ymax, k, time, h, critval, cusum, sel,
    status, break_index, break_time, magnitude, relative, mosum_mean, statistic, sigma_out, rmse,
    process, boundary, want_process,
):
    """:func:`mosum_tail` of lane ``q`` of a block; the dates of its monitoring values are
    found by walking the lane's validity mask ``W`` from ``begin``."""
    first = mosum_tail(
        buf, offset, m, n, rss, esum, ysum, ymax, k, h, critval, cusum, sel, p, s,
        status, magnitude, relative, mosum_mean, statistic, sigma_out, rmse, want_process,
    )
    if want_process and status[s, p] != STATUS_PERFECT_FIT:
        t = begin - 1
        for j in range(m):
            t += 1
            while W[t, q] == 0.0:
                t += 1
            process[s, t, p] = sel[j]
            boundary[s, t, p] = sel[m + j]
    if first >= 0:
        t = _monitor_date(W, q, begin, first)
        break_index[s, p] = t
        break_time[s, p] = time[t]


@jit(fastmath=CONTRACT)
def _monitor_block(
    T, p0, width, X, Xr, F, ptr, index, value, levels, all_levels, time, first_hist, order, monitor_begin, h,
    critvals, cusum,
    use_pre, Gpre, bpre,
    W, Y, M, Ym, E, R, Gacc, xyacc, Gf, G, xy, D, L, beta, vec, ivec, C, sel,
    status, break_index, break_time, magnitude, relative, mosum_mean, statistic, sigma, rmse,
    history_start, n_valid, n_history, n_monitor, n_inf, process, boundary, want_process,
):
    """BFAST Monitor of the pixels ``[p0, p0 + width)`` for every monitoring start.

    The block is read once; per start (in increasing order), the masked Gram is extended
    from the previous start's tiles when the history start is shared, the solves run
    over all lanes at once, then each pixel runs its sequential MOSUM tail. The block
    comes loaded (:func:`_load_block`, counts in ``vec[0]``, ``vec[1]``), so that this
    function is compiled once whatever the input dtype. Arrays "over lanes" have one
    column per pixel of the block (``lanes >= width`` columns).

    Parameters
    ----------
    T : int
        Dates of the cube.
    p0, width : int
        First pixel of the block and its number of pixels.
    X : float64 (T, k)
        The design (``plan.design.matrix``).
    Xr : float64 (T, k rounded up to 8)
        The design padded with zero columns, for the residual loops (:func:`_residuals`).
    F, ptr, index, value
        The Gram basis of :func:`gram_basis`: ``F`` (T, nf) the basis functions of time,
        ``ptr``/``index``/``value`` each lower-triangle Gram entry as a sparse combination
        of their masked sums.
    levels : int64 (T,); all_levels : int64
        Season level of each date and the bit mask of all levels (0: no season dummies);
        a history must hold every level.
    time : float64 (T,)
        Decimal-year time of each date.
    first_hist : int64 (S, P)
        First date of each pixel's eligible history, per start (ROC/BP selection).
    order : int64 (S,)
        The starts by increasing ``monitor_begin``.
    monitor_begin : int64 (S,)
        First date index of each start's monitoring period.
    h : float; critvals : float64 (S, P); cusum : bool
        MOSUM bandwidth, each pixel's critical value per start; OLS-CUSUM instead of OLS-MOSUM.
    use_pre : bool; Gpre, bpre : float64 (S, kk, P), (S, k, P)
        Take each start's Gram and X'y from ``Gpre``/``bpre`` (the "blas" formulation).
    W, Y : float64 (T, lanes)
        The block: validity (1.0/0.0) and values (0.0 where missing).
    M, Ym : float64 (T or 1, lanes)
        The history's validity and values when lanes start their histories at different
        dates and there are several starts (else unused: ``W``, ``Y`` are cleared in place).
    E : float64 (T, lanes)
        History residuals.
    R : float64 (4, lanes)
        Four dates of monitoring residuals on their way to ``C``.
    Gacc, xyacc : float64 (nf, lanes), (k, lanes)
        Masked sums of the basis functions and X'y over whole tiles of four dates, kept
        from one start to the next.
    Gf, G, xy : float64 (nf, lanes), (kk, lanes), (k, lanes)
        The sums up to the start, the expanded Gram (packed lower triangle), X'y.
    D, L, beta : float64 (k, lanes), (kk, lanes), (k rounded up to 8, lanes)
        Equilibration, Cholesky factor and coefficients of the lane solves.
    vec : float64 (10, lanes)
        Per-lane scalars: valid and infinite counts, history size, max |y|, RSS, monitoring
        count, solve ok, scratch, history residual sum, monitoring value sum.
    ivec : int64 (4, lanes)
        Per-lane integers: MOSUM window, compaction position, active flag, season levels seen.
    C : float64 (lanes, T + 1)
        Each lane's compacted residuals: the last history ones, then the monitoring ones.
    sel : float64 (2 T,)
        Scratch of the median selection, and the process and boundary of one pixel.
    status ... n_inf : arrays (S, P)
        The outputs of :data:`~tscube.bfast.monitor.result.OUTPUT_DTYPES`, by pixel and start.
    process, boundary : float64 (S, T, P) or (1, 1, 1); want_process : bool
        The monitoring process and its boundary, when asked for.
    """
    k = X.shape[1]
    kk = G.shape[0]
    lanes = W.shape[1]
    nvalid = vec[0]
    ninf = vec[1]
    nh = vec[2]
    ymax = vec[3]
    rss = vec[4]
    mcount = vec[5]
    ok = vec[6]
    tmp = vec[7]
    esum = vec[8]
    ysum = vec[9]
    shared_from = -1  # history start shared by every lane of the previous start, if any
    t_tiles = 0
    for i in range(order.shape[0]):
        s = order[i]
        begin = monitor_begin[s]
        # this start's history mask: W itself when every lane starts its history at t0
        t0 = T
        t_last = 0
        for q in range(width):
            t0 = min(t0, first_hist[s, p0 + q])
            t_last = max(t_last, first_hist[s, p0 + q])
        t0 = min(t0, begin)
        uniform = t0 == t_last
        if uniform:
            Mh, Yh = W, Y
        elif order.shape[0] == 1:  # one start: clear each late lane's prefix in the block itself
            for q in range(width):
                for t in range(t0, first_hist[s, p0 + q]):
                    W[t, q] = 0.0
                    Y[t, q] = 0.0
            Mh, Yh = W, Y
        else:
            for t in range(t0, begin):
                for q in range(width):
                    keep = t >= first_hist[s, p0 + q]
                    M[t, q] = W[t, q] if keep else 0.0
                    Ym[t, q] = Y[t, q] if keep else 0.0
                for q in range(width, lanes):
                    M[t, q] = 0.0
                    Ym[t, q] = 0.0
            Mh, Yh = M, Ym
        if use_pre:
            for ab in range(kk):
                for q in range(width):
                    G[ab, q] = Gpre[s, ab, p0 + q]
            for a in range(k):
                for q in range(width):
                    xy[a, q] = bpre[s, a, p0 + q]
        else:
            if not (uniform and shared_from == t0 and t_tiles <= begin):
                Gacc[:, :] = 0.0
                xyacc[:, :] = 0.0
                t_tiles = t0
            t_tiles = _gram_tiles(Gacc, xyacc, Mh, Yh, F, X, t_tiles, begin)
            for ab in range(Gacc.shape[0]):  # element loops: an array-to-slice copy compiles numba's
                for q in range(Gacc.shape[1]):  # shape-mismatch error formatting (seconds of compile)
                    Gf[ab, q] = Gacc[ab, q]
            for a in range(xyacc.shape[0]):
                for q in range(xyacc.shape[1]):
                    xy[a, q] = xyacc[a, q]
            _gram_singles(Gf, xy, Mh, Yh, F, X, t_tiles, begin)
            _expand_gram(G, Gf, ptr, index, value, width)
        shared_from = t0 if uniform else -1
        _solve_lanes(G, xy, k, D, L, tmp, beta, ok)
        _history_residual_sums(E, Y, Xr, beta, Mh, Yh, t0, begin, nh, ymax, rss, esum)
        for q in range(width):
            ysum[q] = 0.0
        for t in range(begin, T):  # Y is 0 where not valid
            for q in range(width):
                ysum[q] += Y[t, q]
        window = ivec[0]
        pos = ivec[1]
        active = ivec[2]
        seen = ivec[3]  # the season levels in each lane's history, as bits
        for q in range(width):
            seen[q] = all_levels
        if all_levels != 0:
            for q in range(width):
                seen[q] = 0
            for t in range(t0, begin):
                bit = np.int64(1) << levels[t]
                for q in range(width):
                    seen[q] |= bit if Mh[t, q] != 0.0 else 0
        offset = 0  # room for the longest MOSUM window (n <= begin - t0, so offset + m < T)
        for q in range(width):
            offset = max(offset, int(math.floor(h * nh[q])) - 1)
        _monitor_residuals_compacted(R, Y, Xr, beta, W, begin, width, offset, C, pos, mcount)
        for q in range(width):
            p = p0 + q
            n = int(nh[q])
            m = int(mcount[q])
            n_valid[s, p] = int(nvalid[q])
            n_inf[s, p] = int(ninf[q])
            n_history[s, p] = n
            n_monitor[s, p] = m
            window[q] = 1  # no history residuals before the monitoring ones
            active[q] = 0  # no tail
            if n > 0:
                t = first_hist[s, p]
                while Mh[t, q] == 0.0:
                    t += 1
                history_start[s, p] = time[t]
            if nvalid[q] == 0.0:
                status[s, p] = STATUS_ALL_MISSING
                continue
            status[s, p] = STATUS_OK
            if n <= k or int(math.floor(h * n)) <= 1:
                status[s, p] = STATUS_TOO_FEW
                continue
            if m == 0:
                status[s, p] = STATUS_NO_MONITORING
                continue
            if ok[q] == 0.0 or seen[q] != all_levels:
                status[s, p] = STATUS_SINGULAR
                continue
            active[q] = 1
            window[q] = 1 if cusum else int(math.floor(h * n))
        _compact_history_tail(E, Mh, begin, t0, window, width, offset, C, pos)
        for q in range(width):
            if active[q]:
                _pixel_tail(
                    C[q], offset, q, p0 + q, s, W, begin, int(nh[q]), int(mcount[q]), rss[q], esum[q], ysum[q],
                    ymax[q], k, time, h, critvals[s, p0 + q], cusum, sel,
                    status, break_index, break_time, magnitude, relative, mosum_mean, statistic, sigma, rmse,
                    process, boundary, want_process,
                )


@jit(nogil=True)
def _monitor_simd_kernel(
    chunk, n_chunks, values, nodata, has_nodata, X, Xr, F, ptr, index, value, levels, all_levels, time, first_hist,
    order, monitor_begin, h, critvals, cusum, block, per_pixel_history, use_pre, Gpre, bpre,
    status, break_index, break_time, magnitude, relative, mosum_mean, statistic, sigma, rmse,
    history_start, n_valid, n_history, n_monitor, n_inf,
    process, boundary, want_process,
):
    """Pixel-vectorised formulation: chunk ``chunk`` of ``n_chunks`` (one task of
    :func:`~tscube._threads.run_tasks`), streaming its contiguous range of pixel blocks
    through private buffers allocated once (the scratch arrays of :func:`_monitor_block`).

    Parameters
    ----------
    values : (T, P), any numeric dtype
        The cube, pixels flattened.
    nodata : float; has_nodata : bool
        The value marking missing data (:func:`~tscube.bfast.core.inputs.kernel_nodata`).
    X, Xr, F, ptr, index, value, levels, all_levels, time, first_hist, order, monitor_begin, h, critvals, cusum
        As in :func:`_monitor_block`.
    block : int
        Pixels per block (``config.CPU_BLOCK_PIXELS``).
    chunk, n_chunks : int
        This task's chunk and the number of chunks, each a contiguous range of blocks.
    per_pixel_history : bool
        The pixels' histories start at different dates (ROC, BP): keep masked copies.
    use_pre, Gpre, bpre, status ... want_process
        As in :func:`_monitor_block`.
    """
    T, P = values.shape
    k = X.shape[1]
    kk = ptr.shape[0] - 1
    nf = F.shape[1]
    n_blocks = (P + block - 1) // block
    W = np.empty((T, block))
    Y = np.empty((T, block))
    E = np.empty((T, block))
    R = np.empty((4, block))
    masked_copy = per_pixel_history and order.shape[0] > 1  # one start: cleared in place
    M = np.empty((T if masked_copy else 1, block))
    Ym = np.empty((T if masked_copy else 1, block))
    Gacc = np.empty((nf, block))
    xyacc = np.empty((k, block))
    Gf = np.empty((nf, block))
    G = np.empty((kk, block))
    xy = np.empty((k, block))
    D = np.empty((k, block))
    L = np.empty((kk, block))
    beta = np.zeros((Xr.shape[1], block))  # rows past k stay zero (padding of Xr)
    vec = np.empty((10, block))
    ivec = np.empty((4, block), dtype=np.int64)
    C = np.empty((block, T + 1))
    sel = np.empty(2 * T)
    for ib in range(chunk * n_blocks // n_chunks, (chunk + 1) * n_blocks // n_chunks):
        p0 = ib * block
        width = min(P, p0 + block) - p0
        _load_block(values, p0, width, nodata, has_nodata, W, Y, vec[0], vec[1])
        _monitor_block(
            T, p0, width, X, Xr, F, ptr, index, value, levels, all_levels, time, first_hist, order,
            monitor_begin, h, critvals, cusum, use_pre, Gpre, bpre,
            W, Y, M, Ym, E, R, Gacc, xyacc, Gf, G, xy, D, L, beta, vec, ivec, C, sel,
            status, break_index, break_time, magnitude, relative, mosum_mean, statistic, sigma, rmse,
            history_start, n_valid, n_history, n_monitor, n_inf, process, boundary, want_process,
        )


def gram_basis(products: np.ndarray, rtol: float = 1e-13):
    """A subset of the columns of ``products`` (``(T, kk)``, the lower triangles of the
    outer products ``x_t x_t'``) that spans all of them, and every column as a sparse
    combination of that subset: ``products ~= products[:, basis] @ coef``.

    The 36 products of BFAST's intercept, trend and three harmonics span only 21
    functions of time (``cos a cos b = (cos(a - b) + cos(a + b)) / 2``, ...), so the masked
    Gram matrix of a pixel follows from 21 masked sums instead of 36. The subset is found
    by Gram-Schmidt with column pivoting; coefficients within 1e-9 of a multiple of 1/8
    (the identities' 1, 1/2, ...) are snapped to it. Falls back to all columns (identity
    coefficients) unless the combination reproduces every product to ``rtol`` (relative
    to the largest product) with coefficients of modest size, so that the Gram matrices
    differ from direct sums by rounding only (the design's harmonics are computed from
    the fractional year so that the identities hold to ~1e-15; see ``design.py``).
    Products over the dates use ``einsum``, not BLAS: a threaded BLAS call here would
    leave its threads spinning on the cores the numba kernel is about to use.

    Returns ``(basis, ptr, index, value)``: column ``ab`` is
    ``sum(value[i] * products[:, basis[index[i]]] for i in range(ptr[ab], ptr[ab + 1]))``.
    """
    products = np.ascontiguousarray(products, dtype=np.float64)  # same pivots for any layout
    T, kk = products.shape
    identity = (np.arange(kk), np.arange(kk + 1), np.arange(kk), np.ones(kk))
    scale = float(np.abs(products).max()) if products.size else 0.0
    if scale == 0.0 or not np.isfinite(scale):
        return identity
    norms = np.linalg.norm(products, axis=0)
    rest = products / np.where(norms > 0, norms, 1.0)
    basis: list[int] = []
    for _ in range(min(T, kk)):
        size = np.linalg.norm(rest, axis=0)
        j = int(np.argmax(size))
        if size[j] <= 1e-9:
            break
        direction = rest[:, j] / size[j]
        rest = rest - np.outer(direction, np.einsum("t,tj->j", direction, rest))
        basis.append(j)
    basis_arr = np.array(sorted(basis), dtype=np.int64)
    F = products[:, basis_arr]
    normal = np.einsum("ti,tj->ij", F, F)
    coef = np.linalg.solve(normal, np.einsum("ti,tj->ij", F, products))  # 21 x 21: no threads
    snapped = np.round(coef * 8.0) / 8.0
    coef = np.where(np.abs(coef - snapped) <= 1e-9, snapped, coef)
    error = np.abs(np.einsum("ti,ij->tj", F, coef) - products).max()
    if error > rtol * scale or np.abs(coef).max() > 8.0:
        return identity
    ptr = np.zeros(kk + 1, dtype=np.int64)
    index, value = [], []
    for ab in range(kk):
        nonzero = np.flatnonzero(coef[:, ab])
        index.extend(nonzero.tolist())
        value.extend(coef[nonzero, ab].tolist())
        ptr[ab + 1] = len(index)
    return basis_arr, ptr, np.array(index, dtype=np.int64), np.array(value, dtype=np.float64)


def cached_gram_basis(products: np.ndarray):
    """:func:`gram_basis` of ``products``, remembered (read-only arrays): it costs
    milliseconds, and a chunked run (dask, resumable runs) calls the engine with the same
    design for every chunk."""
    products = np.asarray(products, dtype=np.float64)
    return _gram_basis_of(products.shape, products.tobytes())  # C-order bytes for any layout


@functools.lru_cache(maxsize=16)
def _gram_basis_of(shape, data: bytes):
    found = gram_basis(np.frombuffer(data, dtype=np.float64).reshape(shape))
    for array in found:
        array.setflags(write=False)
    return found


def masked_gram_blas(values, nodata, X, XX, first: int, stop: int, chunk: int = 8192):
    """Masked Gram matrices and X'y of all pixels over dates ``[first, stop)`` by BLAS.

    ``G[:, p] = sum_t m[t, p] XX[t]`` is the product of the table of outer products
    ``XX`` (lower triangles, ``(n, k(k+1)/2)``) with the 0/1 validity mask ``(n, P)``; X'y
    likewise with the zero-filled values. Streams ``chunk`` pixels at a time so the float64
    temporaries stay small. Returns ``(k(k+1)/2, P)`` and ``(k, P)`` float64 arrays.
    """
    table_t = np.ascontiguousarray(XX[first:stop].T)
    x_t = np.ascontiguousarray(X[first:stop].T)
    n_pixels = values.shape[1]
    G = np.empty((XX.shape[1], n_pixels))
    b = np.empty((X.shape[1], n_pixels))
    for p0 in range(0, n_pixels, chunk):
        block = values[first:stop, p0 : p0 + chunk].astype(np.float64)
        invalid = ~np.isfinite(block)
        if nodata is not None:
            invalid |= block == nodata
        block[invalid] = 0.0
        np.matmul(table_t, (~invalid).astype(np.float64), out=G[:, p0 : p0 + chunk])
        np.matmul(x_t, block, out=b[:, p0 : p0 + chunk])
    return G, b


def _product_table(X: np.ndarray) -> np.ndarray:
    """The lower triangles of the outer products ``x_t x_t'`` of the design's rows,
    ``(T, k(k+1)/2)``: what a masked Gram matrix sums."""
    low = np.tril_indices(X.shape[1])
    return np.ascontiguousarray((X[:, :, None] * X[:, None, :])[:, low[0], low[1]])


def _simd_arguments(values, plan: MonitorPlan, first_hist, critvals, outputs, Gpre=None,
                    bpre=None) -> tuple[int, tuple]:
    """The number of tasks (chunks of pixel blocks) and the arguments after the task's
    two of :func:`_monitor_simd_kernel` (``Gpre``, ``bpre``: the "blas" formulation's
    Gram matrices, else none)."""
    n_dates, n_pixels = values.shape
    S = plan.n_starts
    X = plan.design.matrix
    k = X.shape[1]
    levels, all_levels = plan.design.kernel_levels()
    nodata, has_nodata = kernel_nodata(values, plan.nodata)
    monitor_begin = plan.monitor_begin.astype(np.int64)
    XX = _product_table(X)
    basis, ptr, index, value = cached_gram_basis(XX)
    F = np.ascontiguousarray(XX[:, basis])
    Xr = np.zeros((n_dates, -(-k // 8) * 8))  # the design padded for _residuals
    Xr[:, :k] = X
    per_pixel_history = bool(np.any(first_hist != first_hist[:, :1])) if n_pixels else False
    use_pre = Gpre is not None
    if not use_pre:
        Gpre = bpre = np.empty((S, 1, 1))
    block = max(1, int(config.CPU_BLOCK_PIXELS))
    n_blocks = -(-n_pixels // block)
    n_chunks = max(1, min(n_blocks, 4 * numba.get_num_threads()))
    order = np.argsort(monitor_begin, kind="stable").astype(np.int64)
    return n_chunks, (values, nodata, has_nodata, X, Xr, F, ptr, index, value, levels, all_levels, plan.axis.time,
                       first_hist, order, monitor_begin, plan.h, critvals, plan.cusum, block, per_pixel_history,
                       use_pre, Gpre, bpre, *outputs)


def _output_arguments(out: dict, process, boundary, want_process: bool) -> tuple:
    return (out["status"], out["break_index"], out["break_time"], out["magnitude"], out["relative_magnitude"],
            out["mosum_mean"], out["statistic"], out["sigma"], out["rmse"], out["history_start"], out["n_valid"],
            out["n_history"], out["n_monitor"], out["n_inf"], process, boundary, want_process)


def compile_ahead(values: np.ndarray, plan: MonitorPlan) -> bool:
    """Have other processes compile the monitoring kernel for ``values`` while this one
    selects the histories (ROC, BP) and calibrates, when neither this process nor numba's
    cache has it (:func:`tscube._jit.compile_elsewhere`): a first call then compiles the
    two large kernels on two cores. For ``"BP"`` they also compile the Bai–Perron
    programme's callees by address not cached yet, while this process compiles the
    history kernel. Returns whether a process was started."""
    jobs = []
    if (config.CPU_BFAST_GRAM or DEFAULT_GRAM) != "fused" and values.shape[1]:
        data_type = _monitor_simd_kernel.typeof_pyval(values)
        # the cube's type decides the kernel's: compiled here already, or not yet
        if not any(signature[2] == data_type for signature in _monitor_simd_kernel.signatures):
            jobs += compile_jobs(_monitor_simd_kernel, _probe_arguments(values, plan))
    programme = history_compile_jobs(values, plan)
    # in decreasing order of compile time, as compile_elsewhere deals them to its processes:
    # the monitoring kernel after BP's largest callee (lane_starts) and before the others
    # (docs/performance.md)
    return compile_elsewhere(programme[:1] + jobs + programme[1:])


def _probe_arguments(values: np.ndarray, plan: MonitorPlan) -> tuple:
    """Arguments of :func:`_monitor_simd_kernel` of the types a call on ``values`` passes
    (its outputs and history starts for one pixel: the types, not the sizes), without
    selecting the histories."""
    tiny = empty_outputs(plan.n_starts, 1)
    placeholder = np.empty((1, 1, 1))
    first = np.zeros((plan.n_starts, 1), dtype=np.int64)
    n_chunks, arguments = _simd_arguments(values[:, :1], plan, first, plan.pixel_critvals(1),
                                          _output_arguments(tiny, placeholder, placeholder, plan.return_process))
    return (0, n_chunks, values, *arguments[1:])


def run(values: np.ndarray, plan: MonitorPlan, *, gram: str | None = None) -> dict[str, np.ndarray]:
    """Run BFAST Monitor on ``values`` of shape ``(T, P)``; outputs are ``(S, P)``.

    ``gram`` picks the formulation (:data:`FORMULATIONS`; default ``config.CPU_BFAST_GRAM``
    or :data:`DEFAULT_GRAM`). "blas" needs one history start for all pixels and falls back
    to "simd" under per-pixel history selection (ROC, BP).
    """
    gram = gram or config.CPU_BFAST_GRAM or DEFAULT_GRAM
    if gram not in FORMULATIONS:
        raise ValueError(f"gram must be one of {FORMULATIONS}, got {gram!r}")
    n_dates, n_pixels = values.shape
    S = plan.n_starts
    out = empty_outputs(S, n_pixels)
    if plan.return_process:
        process = np.full((S, n_dates, n_pixels), np.nan)
        boundary = np.full((S, n_dates, n_pixels), np.nan)
    else:
        process = boundary = np.empty((1, 1, 1))
    first_hist, flagged = plan.history_first or history_first(values, plan)
    critvals = plan.pixel_critvals(n_pixels)
    out["critval"][...] = critvals
    outputs = _output_arguments(out, process, boundary, plan.return_process)
    if gram == "fused":
        from ._cpu_fused import monitor_kernel

        levels, all_levels = plan.design.kernel_levels()
        nodata, has_nodata = kernel_nodata(values, plan.nodata)
        block = int(config.CPU_BLOCK_PIXELS)
        run_tasks(
            monitor_kernel, task_count(-(-n_pixels // block)),
            values, nodata, has_nodata, plan.design.matrix, levels, all_levels, plan.axis.time, first_hist,
            plan.monitor_begin.astype(np.int64), plan.h, critvals, plan.cusum, block, *outputs,
        )
    else:
        Gpre = bpre = None
        if gram == "blas" and plan.history in ("all", "fixed"):
            X = plan.design.matrix
            k = X.shape[1]
            XX = _product_table(X)
            nodata, has_nodata = kernel_nodata(values, plan.nodata)
            Gpre = np.empty((S, XX.shape[1], n_pixels))
            bpre = np.empty((S, k, n_pixels))
            for s in range(S):
                Gpre[s], bpre[s] = masked_gram_blas(values, nodata if has_nodata else None, X, XX, plan.history_begin,
                                                    int(plan.monitor_begin[s]))
        n_chunks, arguments = _simd_arguments(values, plan, first_hist, critvals, outputs, Gpre, bpre)
        run_tasks(_monitor_simd_kernel, n_chunks, *arguments)
    if flagged is not None:
        out["status"][(out["status"] == STATUS_OK) & flagged] = np.int8(flag_status(plan.history))
    if plan.return_process:
        out["process"], out["boundary"] = process, boundary
    return out
