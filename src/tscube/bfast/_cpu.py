"""Multi-core CPU engine of BFAST Monitor: numba kernels, parallel over pixel blocks.

Same outputs and status codes as :mod:`tscube.bfast._reference`, organised for speed.
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
from numba import prange

from .. import config
from .._jit import CONTRACT, jit
from .._prefetch import prefetch_row
from .plan import PERFECT_FIT_RTOL, SINGULAR_PIVOT_TOL, MonitorPlan, kernel_nodata
from .result import BfastStatus, empty_outputs, flag_status

#: The kernel formulations (see the module docstring), and the default one, used unless
#: ``config.CPU_BFAST_GRAM`` says otherwise.
FORMULATIONS = ("fused", "simd", "blas")
DEFAULT_GRAM = "simd"

_OK = np.int8(BfastStatus.OK)
_ALL_MISSING = np.int8(BfastStatus.ALL_MISSING)
_TOO_FEW = np.int8(BfastStatus.TOO_FEW_HISTORY)
_NO_MONITORING = np.int8(BfastStatus.NO_MONITORING_DATA)
_SINGULAR = np.int8(BfastStatus.SINGULAR_DESIGN)
_PERFECT_FIT = np.int8(BfastStatus.PERFECT_FIT)


_SMALL_SELECT = np.uint64(16)  # below this many candidates, selection by partial sorting
_U = np.uint64  # unsigned indices: numba adds a negative-index wraparound to signed ones


@jit(fastmath=CONTRACT)
def _split(source, first, lo, hi, scratch, dst, pivot, inclusive):
    """Out-of-place partition of ``source[first + lo:first + hi]`` into
    ``scratch[dst + lo:dst + hi]``: the values below ``pivot`` (``<=`` if ``inclusive``)
    first. Every value is written to both ends and one end advances, so the loop has no
    branch for random data to mispredict. Returns the rank where the upper part starts."""
    i = dst + lo
    j = dst + hi - _U(1)
    for u in range(first + lo, first + hi):
        x = source[u]
        scratch[i] = x
        scratch[j] = x
        below = _U(x <= pivot) if inclusive else _U(x < pivot)
        i += below
        j -= _U(1) - below
    return i - dst


@jit(fastmath=CONTRACT)
def _median(data, start, n, scratch):
    """Median of ``data[start:start + n]`` (mean of the two middle values for even ``n``), like
    ``np.median``; ``data`` is left unchanged, ``scratch`` holds ``>= 2 n`` values.

    Quickselect narrowing on both middle ranks at once, by branch-free out-of-place
    partitions (:func:`_split`) between the halves of ``scratch``, the first one straight
    from ``data`` (no copy). A pivot that falls between the two middle ranks ends it: they
    are the largest value left of it and the smallest right.
    """
    half = _U(scratch.shape[0] // 2)
    count = _U(n)
    k1 = (count - _U(1)) // _U(2)  # the middle ranks (equal for odd n)
    k2 = count // _U(2)
    source = data  # the first partition reads the data, the later ones a scratch half
    first = _U(start)  # where the candidates start in ``source``
    dst = _U(0)  # the scratch half the next partition writes to
    lo = _U(0)
    hi = count
    if count <= _SMALL_SELECT:
        for u in range(count):
            scratch[u] = data[first + u]
        source = scratch
        first = _U(0)
    while hi - lo > _SMALL_SELECT:
        width = hi - lo
        x0 = source[first + lo + width // _U(4)]
        x1 = source[first + lo + width // _U(2)]
        x2 = source[first + lo + _U(3) * width // _U(4)]
        pivot = max(min(x0, x1), min(max(x0, x1), x2))  # median of three
        i = _split(source, first, lo, hi, scratch, dst, pivot, False)
        lower = pivot
        if i == lo:  # the pivot is the minimum: split off the values equal to it
            i = _split(source, first, lo, hi, scratch, dst, pivot, True)
            if k2 < i:
                return pivot
        elif k1 < i <= k2:  # even n, split between the middle ranks
            lower = scratch[dst + lo]
            for u in range(dst + lo, dst + i):
                lower = max(lower, scratch[u])
        if k1 < i <= k2:
            upper = scratch[dst + i]
            for u in range(dst + i, dst + hi):
                upper = min(upper, scratch[u])
            return 0.5 * (lower + upper)
        if k2 < i:
            hi = i
        else:
            lo = i
        source = scratch
        first = dst
        dst = half - dst
    for u in range(first + lo, first + k2 + _U(1)):  # partial selection sort up to the upper rank
        best = u
        for w in range(u + _U(1), first + hi):
            if scratch[w] < scratch[best]:
                best = w
        scratch[u], scratch[best] = scratch[best], scratch[u]
    if k1 == k2:
        return scratch[first + k2]
    return 0.5 * (scratch[first + k1] + scratch[first + k2])


@jit()
def _solve_equilibrated(G, b, k, beta, work):
    """Solve ``G beta = b`` (G symmetric positive semi-definite, k x k) by an equilibrated
    Cholesky factorisation; return False if G is numerically singular.

    The squared pivots of the unit-diagonal scaled matrix are ``1 - R^2`` of each column on
    the previous ones; a pivot below ``SINGULAR_PIVOT_TOL`` means an aliased regressor.
    """
    d = work[0]
    L = work[1:]
    for a in range(k):
        if G[a, a] <= 0.0:
            return False
        d[a] = math.sqrt(G[a, a])
    for a in range(k):
        for c in range(a + 1):
            s = G[a, c] / (d[a] * d[c])
            for m in range(c):
                s -= L[a, m] * L[c, m]
            if a == c:
                if s < SINGULAR_PIVOT_TOL:
                    return False
                L[a, a] = math.sqrt(s)
            else:
                L[a, c] = s / L[c, c]
    # forward then backward substitution on the scaled system
    for a in range(k):
        s = b[a] / d[a]
        for m in range(a):
            s -= L[a, m] * beta[m]
        beta[a] = s / L[a, a]
    for a in range(k - 1, -1, -1):
        s = beta[a]
        for m in range(a + 1, k):
            s -= L[m, a] * beta[m]
        beta[a] = s / L[a, a]
    for a in range(k):
        beta[a] /= d[a]
    return True


@jit()
def add_normal_row(G, xy, X, r, v):
    """Add row ``r`` of ``X`` (observed ``v``) to the normal equations: the lower triangle
    of ``G = X'X`` and ``xy = X'y``."""
    for a in range(X.shape[1]):
        xa = X[r, a]
        xy[a] += xa * v
        for c in range(a + 1):
            G[a, c] += xa * X[r, c]


@jit()
def mirror_lower(G):
    """Copy the lower triangle of ``G`` to the upper one."""
    for a in range(G.shape[0]):
        for c in range(a + 1, G.shape[0]):
            G[a, c] = G[c, a]


@jit(inline="always", error_model="numpy")
def process_bound(ratio, critval, cusum):
    """Boundary of the monitoring process at ``ratio`` = t / n (t: 1-based position from
    the history start, n: history size), as R's ``boundary``: OLS-CUSUM
    ``sqrt(x (x - 1) (critval^2 + log(x / (x - 1))))``, OLS-MOSUM
    ``critval sqrt(2 logPlus(x))`` (logPlus = 1 while x <= e)."""
    if cusum:
        return math.sqrt(ratio * (ratio - 1.0) * (critval * critval + math.log(ratio / (ratio - 1.0))))
    return critval * math.sqrt(2.0 * math.log(ratio)) if ratio > math.e else critval * math.sqrt(2.0)


@jit(fastmath=CONTRACT)
def _monitor_one(
    y, rows, nv, X, levels, all_levels, time, first_hist, begin, h, critval, cusum,
    G, xy, beta, work, resid, sel, p, s,
    status, break_index, break_time, magnitude, relative, mosum_mean, statistic, sigma_out, rmse,
    history_start, n_history_out, n_monitor_out, process, boundary, want_process,
):
    """BFAST Monitor of one compacted pixel series for one monitoring start.

    ``y[:nv]`` are the valid values at time indices ``rows[:nv]``. Writes the outputs of
    pixel ``p`` and start ``s`` into the ``(S, P)`` output arrays. (Indexing only, no array
    views in the loops: views cost atomic reference counts shared between threads.)
    """
    k = X.shape[1]
    # history rows: [lo, mid) of the compacted series; monitoring rows: [mid, nv)
    lo = 0
    while lo < nv and rows[lo] < first_hist:
        lo += 1
    mid = lo
    while mid < nv and rows[mid] < begin:
        mid += 1
    n = mid - lo
    n_history_out[s, p] = n
    n_monitor_out[s, p] = nv - mid
    if n > 0:
        history_start[s, p] = time[rows[lo]]
    window = int(math.floor(h * n))
    if n <= k or window <= 1:
        status[s, p] = _TOO_FEW
        return
    if nv == mid:
        status[s, p] = _NO_MONITORING
        return

    for a in range(k):
        xy[a] = 0.0
        for c in range(k):
            G[a, c] = 0.0
    for j in range(lo, mid):
        add_normal_row(G, xy, X, rows[j], y[j])
    mirror_lower(G)
    seen = 0
    for j in range(lo, mid):
        seen |= np.int64(1) << levels[rows[j]]
    if (all_levels != 0 and seen != all_levels) or not _solve_equilibrated(G, xy, k, beta, work):
        status[s, p] = _SINGULAR
        return

    rss = 0.0
    ymax = 0.0
    esum = 0.0
    ysum = 0.0
    for j in range(lo, nv):
        r = rows[j]
        fit = 0.0
        for a in range(k):
            fit += X[r, a] * beta[a]
        e = y[j] - fit
        resid[j] = e
        if j < mid:
            rss += e * e
            esum += e
            if abs(y[j]) > ymax:
                ymax = abs(y[j])
        else:
            ysum += y[j]
    m = nv - mid
    first = _mosum_tail(
        resid, mid, m, n, rss, esum, ysum, ymax, k, h, critval, cusum, sel, p, s,
        status, magnitude, relative, mosum_mean, statistic, sigma_out, rmse, want_process,
    )
    if want_process and status[s, p] != _PERFECT_FIT:
        for j in range(m):
            process[s, rows[mid + j], p] = sel[j]
            boundary[s, rows[mid + j], p] = sel[m + j]
    if first >= 0:
        break_index[s, p] = rows[mid + first]
        break_time[s, p] = time[rows[mid + first]]


@jit(fastmath=CONTRACT)
def _mosum_tail(
    buf, offset, m, n, rss, esum, ysum, ymax, k, h, critval, cusum, sel, p, s,
    status, magnitude, relative, mosum_mean, statistic, sigma_out, rmse, want_process,
):
    """One pixel after its fit, from its compacted residuals ``buf``: the ``m`` monitoring
    ones from ``offset`` on, the history's last ``window - 1`` just before (OLS-MOSUM; the
    OLS-CUSUM process starts from ``esum``, the sum of all history residuals). ``ysum`` is
    the sum of the monitoring values. Writes sigma, rmse, magnitude (absolute and
    relative), the process statistics (and PERFECT_FIT) of pixel ``p``, start ``s``; with
    ``want_process`` the process values go to ``sel[:m]`` and their boundary to
    ``sel[m:2m]``. Returns ``j``, the first monitoring value over the boundary, or -1
    (none, a non-finite process, or a perfect fit). Shared by both cpu formulations."""
    window = int(math.floor(h * n))
    sigma = math.sqrt(rss / (n - k))
    sigma_out[s, p] = sigma
    rmse[s, p] = math.sqrt(rss / n)
    middle = _median(buf, offset, m, sel)
    magnitude[s, p] = middle
    expected = ysum  # the mean prediction over the monitoring values, times m
    for i in range(offset, offset + m):
        expected -= buf[i]
    relative[s, p] = middle / (expected / m) if expected != 0.0 else np.nan
    if sigma <= PERFECT_FIT_RTOL * ymax:
        status[s, p] = _PERFECT_FIT
        return -1
    scale = 1.0 / (sigma * math.sqrt(n))
    flat_bound = critval * math.sqrt(2.0)  # MOSUM: logPlus(t / n) = 1 while t / n <= e
    wsum = esum
    if not cusum:
        wsum = 0.0
        for i in range(offset + 1 - window, offset):
            wsum += buf[i]
    first = -1
    total = 0.0
    biggest = 0.0
    finite = True
    for j in range(m):
        i = offset + j
        if cusum or j == 0:
            wsum += buf[i]
        else:
            wsum += buf[i] - buf[i - window]
        value = wsum * scale
        if not math.isfinite(value):
            finite = False
        total += value
        size = abs(value)
        if size > biggest:
            biggest = size
        if want_process or (first < 0 and (cusum or size > flat_bound)):  # the log only when needed
            bound = process_bound((n + j + 1) / n, critval, cusum)
            if first < 0 and size > bound:
                first = j
            if want_process:
                sel[j] = value
                sel[m + j] = bound
    statistic[s, p] = biggest
    mosum_mean[s, p] = total / m
    return first if finite else -1


@jit(parallel=True, fastmath=CONTRACT)
def _monitor_kernel(
    values, nodata, has_nodata, X, levels, all_levels, time, first_hist, monitor_begin, h, critval, cusum, block,
    status, break_index, break_time, magnitude, relative, mosum_mean, statistic, sigma, rmse,
    history_start, n_valid, n_history, n_monitor, n_inf,
    process, boundary, want_process,
):
    T, P = values.shape
    k = X.shape[1]
    S = monitor_begin.shape[0]
    n_blocks = (P + block - 1) // block
    for ib in prange(n_blocks):
        p0 = ib * block
        p1 = min(P, p0 + block)
        width = p1 - p0
        # transpose the block once (contiguous reads of each date's row of pixels)
        buf = np.empty((width, T))
        for t in range(T):
            for q in range(width):
                buf[q, t] = values[t, p0 + q]
        y = np.empty(T)
        rows = np.empty(T, dtype=np.int64)
        resid = np.empty(T)
        sel = np.empty(2 * T)
        G = np.empty((k, k))
        xy = np.empty(k)
        beta = np.empty(k)
        work = np.empty((k + 1, k))
        for q in range(width):
            p = p0 + q
            # FILTERMISSING: compact the valid observations, count infs
            nv = 0
            ninf = 0
            for t in range(T):  # branch-free: always write, advance only when valid
                v = buf[q, t]
                inf = math.isinf(v)
                ninf += inf
                y[nv] = v
                rows[nv] = t
                nv += (v == v) & (not inf) & ((not has_nodata) | (v != nodata))
            for s in range(S):
                n_valid[s, p] = nv
                n_inf[s, p] = ninf
                if nv == 0:
                    status[s, p] = _ALL_MISSING
                    continue
                status[s, p] = _OK
                _monitor_one(
                    y, rows, nv, X, levels, all_levels, time, first_hist[s, p], monitor_begin[s], h, critval, cusum,
                    G, xy, beta, work, resid, sel, p, s,
                    status, break_index, break_time, magnitude, relative, mosum_mean, statistic, sigma, rmse,
                    history_start, n_history, n_monitor, process, boundary, want_process,
                )


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


@jit(fastmath=CONTRACT)
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


@jit(fastmath=CONTRACT)
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


@jit(fastmath=CONTRACT)
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


@jit(fastmath=CONTRACT)
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


@jit(fastmath=CONTRACT)
def _pixel_tail(
    buf, offset, q, p, s, W, begin, n, m, rss, esum, ysum, ymax, k, time, h, critval, cusum, sel,
    status, break_index, break_time, magnitude, relative, mosum_mean, statistic, sigma_out, rmse,
    process, boundary, want_process,
):
    """:func:`_mosum_tail` of lane ``q`` of a block; the dates of its monitoring values are
    found by walking the lane's validity mask ``W`` from ``begin``."""
    first = _mosum_tail(
        buf, offset, m, n, rss, esum, ysum, ymax, k, h, critval, cusum, sel, p, s,
        status, magnitude, relative, mosum_mean, statistic, sigma_out, rmse, want_process,
    )
    if want_process and status[s, p] != _PERFECT_FIT:
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
    critval, cusum,
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
    function is compiled once whatever the input dtype.
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
            Gf[:, :] = Gacc
            xy[:, :] = xyacc
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
                status[s, p] = _ALL_MISSING
                continue
            status[s, p] = _OK
            if n <= k or int(math.floor(h * n)) <= 1:
                status[s, p] = _TOO_FEW
                continue
            if m == 0:
                status[s, p] = _NO_MONITORING
                continue
            if ok[q] == 0.0 or seen[q] != all_levels:
                status[s, p] = _SINGULAR
                continue
            active[q] = 1
            window[q] = 1 if cusum else int(math.floor(h * n))
        _compact_history_tail(E, Mh, begin, t0, window, width, offset, C, pos)
        for q in range(width):
            if active[q]:
                _pixel_tail(
                    C[q], offset, q, p0 + q, s, W, begin, int(nh[q]), int(mcount[q]), rss[q], esum[q], ysum[q],
                    ymax[q], k, time, h, critval, cusum, sel,
                    status, break_index, break_time, magnitude, relative, mosum_mean, statistic, sigma, rmse,
                    process, boundary, want_process,
                )


@jit(parallel=True)
def _monitor_simd_kernel(
    values, nodata, has_nodata, X, Xr, F, ptr, index, value, levels, all_levels, time, first_hist, order,
    monitor_begin, h, critval, cusum, block, n_chunks, per_pixel_history, use_pre, Gpre, bpre,
    status, break_index, break_time, magnitude, relative, mosum_mean, statistic, sigma, rmse,
    history_start, n_valid, n_history, n_monitor, n_inf,
    process, boundary, want_process,
):
    """Pixel-vectorised formulation: ``n_chunks`` parallel workers, each streaming its
    contiguous range of pixel blocks through private buffers allocated once."""
    T, P = values.shape
    k = X.shape[1]
    kk = ptr.shape[0] - 1
    nf = F.shape[1]
    n_blocks = (P + block - 1) // block
    for c in prange(n_chunks):
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
        for ib in range(c * n_blocks // n_chunks, (c + 1) * n_blocks // n_chunks):
            p0 = ib * block
            width = min(P, p0 + block) - p0
            _load_block(values, p0, width, nodata, has_nodata, W, Y, vec[0], vec[1])
            _monitor_block(
                T, p0, width, X, Xr, F, ptr, index, value, levels, all_levels, time, first_hist, order,
                monitor_begin, h, critval, cusum, use_pre, Gpre, bpre,
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


def run(values: np.ndarray, plan: MonitorPlan, *, gram: str | None = None) -> dict[str, np.ndarray]:
    """Run BFAST Monitor on ``values`` of shape ``(T, P)``; outputs are ``(S, P)``.

    ``gram`` picks the formulation (:data:`FORMULATIONS`; default ``config.CPU_BFAST_GRAM``
    or :data:`DEFAULT_GRAM`). "blas" needs one history start for all pixels and falls back
    to "simd" under per-pixel history selection (ROC, BP).
    """
    from . import _cpu_history

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
    first_hist, flagged = _cpu_history.history_first(values, plan)
    X = plan.design.matrix
    k = X.shape[1]
    levels, all_levels = plan.design.kernel_levels()
    nodata, has_nodata = kernel_nodata(values, plan.nodata)
    monitor_begin = plan.monitor_begin.astype(np.int64)
    outputs = (
        out["status"], out["break_index"], out["break_time"], out["magnitude"], out["relative_magnitude"],
        out["mosum_mean"], out["statistic"], out["sigma"], out["rmse"], out["history_start"], out["n_valid"],
        out["n_history"], out["n_monitor"], out["n_inf"], process, boundary, plan.return_process,
    )
    if gram == "fused":
        _monitor_kernel(
            values, nodata, has_nodata, X, levels, all_levels, plan.axis.time, first_hist, monitor_begin,
            plan.h, plan.critval, plan.cusum, int(config.CPU_BLOCK_PIXELS), *outputs,
        )
    else:
        low = np.tril_indices(k)
        XX = np.ascontiguousarray((X[:, :, None] * X[:, None, :])[:, low[0], low[1]])
        basis, ptr, index, value = cached_gram_basis(XX)
        F = np.ascontiguousarray(XX[:, basis])
        Xr = np.zeros((n_dates, -(-k // 8) * 8))  # the design padded for _residuals
        Xr[:, :k] = X
        per_pixel_history = bool(np.any(first_hist != first_hist[:, :1])) if n_pixels else False
        use_pre = gram == "blas" and plan.history in ("all", "fixed")
        if use_pre:
            Gpre = np.empty((S, XX.shape[1], n_pixels))
            bpre = np.empty((S, k, n_pixels))
            for s in range(S):
                Gpre[s], bpre[s] = masked_gram_blas(values, nodata if has_nodata else None, X, XX, plan.history_begin, int(monitor_begin[s]))
        else:
            Gpre = bpre = np.empty((S, 1, 1))
        block = max(1, int(config.CPU_BLOCK_PIXELS))
        n_blocks = -(-n_pixels // block)
        n_chunks = max(1, min(n_blocks, 4 * numba.get_num_threads()))
        order = np.argsort(monitor_begin, kind="stable").astype(np.int64)
        _monitor_simd_kernel(
            values, nodata, has_nodata, X, Xr, F, ptr, index, value, levels, all_levels, plan.axis.time, first_hist, order,
            monitor_begin, plan.h, plan.critval, plan.cusum, block, n_chunks, per_pixel_history, use_pre, Gpre, bpre,
            *outputs,
        )
    if flagged is not None:
        out["status"][(out["status"] == _OK) & flagged] = np.int8(flag_status(plan.history))
    if plan.return_process:
        out["process"], out["boundary"] = process, boundary
    return out
