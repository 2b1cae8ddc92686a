"""Multi-core CPU engine of BFAST Monitor: numba kernels, parallel over pixel blocks.

Same outputs and status codes as :mod:`tscube.bfast._reference`, organised for speed:

* The cube is read once, time-major as it is stored: each thread takes a block of
  ``config.CPU_BLOCK_PIXELS`` pixels and transposes it into a private buffer, compacting
  every pixel's valid observations (FILTERMISSING with prefix-sum indices).
* Per pixel (Algorithm 1): masked Gram ``X'X`` and ``X'y`` of the history, an equilibrated
  Cholesky solve (singular designs flagged), residuals of the valid observations, sigma,
  the OLS-MOSUM process by a running window sum, boundary, first crossing, the median
  monitoring residual by selection (not a full sort), the mean of the process.
* Three formulations (``config.CPU_BFAST_GRAM``), recorded side by side by the benchmark;
  :data:`DEFAULT_GRAM` is the fastest on our machines:

  - ``"fused"``: one pixel at a time, everything in one loop over its compacted series;
  - ``"simd"``: blocks of pixels processed date by date with the pixels as SIMD lanes
    (masked Gram as ``G[:, q] += m[t, q] vec(x_t x_t')``, residuals likewise), each pixel's
    valid residuals compacted into a private buffer for the sequential MOSUM tail;
  - ``"blas"``: as "simd", but the masked Gram of all pixels is one matrix product of the
    table of outer products ``x_t x_t'`` with the 0/1 validity mask (BLAS GEMM).

Everything that decides a break (Gram, X'y, residual sums of squares, MOSUM sums) is
accumulated in float64, whatever the input dtype. Threads follow numba's settings
(``NUMBA_NUM_THREADS`` / ``numba.set_num_threads``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from .. import config
from .plan import PERFECT_FIT_RTOL, SINGULAR_PIVOT_TOL, MonitorPlan, kernel_nodata
from .result import BfastStatus, empty_outputs

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


@njit(cache=True)
def _select_kth(buf, n, kth):
    """Rearrange ``buf[:n]`` so that ``buf[kth]`` is the kth smallest (Wirth's selection)."""
    lo, hi = 0, n - 1
    while lo < hi:
        pivot = buf[kth]
        i, j = lo, hi
        while True:
            while buf[i] < pivot:
                i += 1
            while pivot < buf[j]:
                j -= 1
            if i <= j:
                buf[i], buf[j] = buf[j], buf[i]
                i += 1
                j -= 1
            if i > j:
                break
        if j < kth:
            lo = i
        if kth < i:
            hi = j
    return buf[kth]


@njit(cache=True)
def _median(buf, n):
    """Median of ``buf[:n]`` (mean of the two middle values for even ``n``); reorders buf."""
    upper = _select_kth(buf, n, n // 2)
    if n % 2 == 1:
        return upper
    lower = buf[0]
    for i in range(1, n // 2):  # after selection, buf[:n//2] holds the smaller half
        if buf[i] > lower:
            lower = buf[i]
    return 0.5 * (lower + upper)


@njit(cache=True)
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


@njit(cache=True)
def _monitor_one(
    y, rows, nv, X, time, first_hist, begin, h, critval,
    G, xy, beta, work, resid, sel, p, s,
    status, break_index, break_time, magnitude, mosum_mean, statistic, sigma_out,
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
        r = rows[j]
        v = y[j]
        for a in range(k):
            xa = X[r, a]
            xy[a] += xa * v
            for c in range(a + 1):
                G[a, c] += xa * X[r, c]
    for a in range(k):
        for c in range(a + 1, k):
            G[a, c] = G[c, a]
    if not _solve_equilibrated(G, xy, k, beta, work):
        status[s, p] = _SINGULAR
        return

    rss = 0.0
    ymax = 0.0
    for j in range(lo, nv):
        r = rows[j]
        fit = 0.0
        for a in range(k):
            fit += X[r, a] * beta[a]
        e = y[j] - fit
        resid[j] = e
        if j < mid:
            rss += e * e
            if abs(y[j]) > ymax:
                ymax = abs(y[j])
    _mosum_tail(
        resid, rows, lo, mid, nv, rss, ymax, k, time, h, critval, sel, p, s,
        status, break_index, break_time, magnitude, mosum_mean, statistic, sigma_out,
        process, boundary, want_process,
    )


@njit(cache=True)
def _mosum_tail(
    resid, rows, lo, mid, nv, rss, ymax, k, time, h, critval, sel, p, s,
    status, break_index, break_time, magnitude, mosum_mean, statistic, sigma_out,
    process, boundary, want_process,
):
    """From the residuals ``resid[lo:nv]`` (history ``[lo, mid)``, monitoring ``[mid, nv)``)
    to sigma, magnitude, the MOSUM process, its boundary and the first crossing."""
    n = mid - lo
    window = int(math.floor(h * n))
    sigma = math.sqrt(rss / (n - k))
    sigma_out[s, p] = sigma
    m = nv - mid
    for j in range(m):
        sel[j] = resid[mid + j]
    magnitude[s, p] = _median(sel, m)
    if sigma <= PERFECT_FIT_RTOL * ymax:
        status[s, p] = _PERFECT_FIT
        return

    scale = 1.0 / (sigma * math.sqrt(n))
    flat_bound = critval * math.sqrt(2.0)  # logPlus(t / n) = 1 while t / n <= e
    wsum = 0.0
    for j in range(mid - window + 1, mid + 1):
        wsum += resid[j]
    first = -1
    total = 0.0
    biggest = 0.0
    finite = True
    for j in range(mid, nv):
        if j > mid:
            wsum += resid[j] - resid[j - window]
        value = wsum * scale
        ratio = (j - lo + 1) / n
        bound = critval * math.sqrt(2.0 * math.log(ratio)) if ratio > math.e else flat_bound
        if not math.isfinite(value):
            finite = False
        total += value
        if abs(value) > biggest:
            biggest = abs(value)
        if first < 0 and abs(value) > bound:
            first = j
        if want_process:
            process[s, rows[j], p] = value
            boundary[s, rows[j], p] = bound
    statistic[s, p] = biggest
    mosum_mean[s, p] = total / m
    if first >= 0 and finite:
        break_index[s, p] = rows[first]
        break_time[s, p] = time[rows[first]]


@njit(parallel=True, cache=True, fastmath={"contract"})
def _monitor_kernel(
    values, nodata, has_nodata, X, time, first_hist, monitor_begin, h, critval, block,
    status, break_index, break_time, magnitude, mosum_mean, statistic, sigma,
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
        sel = np.empty(T)
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
                    y, rows, nv, X, time, first_hist[s, p], monitor_begin[s], h, critval,
                    G, xy, beta, work, resid, sel, p, s,
                    status, break_index, break_time, magnitude, mosum_mean, statistic, sigma,
                    history_start, n_history, n_monitor, process, boundary, want_process,
                )


@njit(parallel=True, cache=True, fastmath={"contract"})
def _monitor_simd_kernel(
    values, nodata, has_nodata, X, XX, time, first_hist, monitor_begin, h, critval, block,
    use_pre, Gpre, bpre,
    status, break_index, break_time, magnitude, mosum_mean, statistic, sigma,
    history_start, n_valid, n_history, n_monitor, n_inf,
    process, boundary, want_process,
):
    """Pixel-vectorised formulation: the inner loops run over the pixels of a block (SIMD
    lanes), the cube is read date by date as it is stored, and each pixel's valid
    residuals are compacted into a private buffer for the sequential MOSUM tail.

    ``XX[t]`` holds the lower triangle of ``x_t x_t'`` (``k (k+1) / 2`` values). With
    ``use_pre``, the history Gram matrices and X'y come precomputed (``Gpre[s, :, p]``,
    ``bpre[s, :, p]``, by BLAS) and pass 1 only counts.
    """
    T, P = values.shape
    k = X.shape[1]
    kk = XX.shape[1]
    S = monitor_begin.shape[0]
    n_blocks = (P + block - 1) // block
    for ib in prange(n_blocks):
        p0 = ib * block
        B = min(P, p0 + block) - p0
        w = np.empty(B)  # 1.0 where the observation counts, else 0.0
        yv = np.empty(B)  # the value where it counts, else 0.0
        e = np.empty(B)
        G = np.empty((kk, B))
        xy = np.empty((k, B))
        beta = np.empty((k, B))
        rss = np.empty(B)
        ymax = np.empty(B)
        count = np.empty(B, dtype=np.int64)
        nhist = np.empty(B, dtype=np.int64)
        nvalid = np.zeros(B, dtype=np.int64)
        ninf = np.zeros(B, dtype=np.int64)
        resid = np.empty((B, T))
        rows = np.empty((B, T), dtype=np.int64)
        Gp = np.empty((k, k))
        bp = np.empty(k)
        betap = np.empty(k)
        work = np.empty((k + 1, k))
        sel = np.empty(T)
        ok = np.empty(B, dtype=np.bool_)

        for t in range(T):  # counts over the whole series (branch-free: masks are random)
            for q in range(B):
                v = np.float64(values[t, p0 + q])
                inf = math.isinf(v)
                ninf[q] += inf
                nvalid[q] += (v == v) & (not inf) & ((not has_nodata) | (v != nodata))

        for s in range(S):
            begin = monitor_begin[s]
            t_first = T
            for q in range(B):
                t_first = min(t_first, first_hist[s, p0 + q])
            if use_pre:
                for ab in range(kk):
                    for q in range(B):
                        G[ab, q] = Gpre[s, ab, p0 + q]
                for a in range(k):
                    for q in range(B):
                        xy[a, q] = bpre[s, a, p0 + q]
            else:
                G[:, :] = 0.0
                xy[:, :] = 0.0
            nhist[:] = 0
            ymax[:] = 0.0
            # pass 1: masked Gram and X'y of the history, SIMD over pixels
            for t in range(t_first, begin):
                for q in range(B):
                    v = np.float64(values[t, p0 + q])
                    good = (v == v) & (not math.isinf(v)) & ((not has_nodata) | (v != nodata)) & (t >= first_hist[s, p0 + q])
                    w[q] = 1.0 if good else 0.0
                    yv[q] = v if good else 0.0
                for q in range(B):
                    nhist[q] += int(w[q])
                    ymax[q] = max(ymax[q], abs(yv[q]))
                if use_pre:
                    continue
                for ab in range(kk):
                    xx = XX[t, ab]
                    g = G[ab]
                    for q in range(B):
                        g[q] += w[q] * xx
                for a in range(k):
                    xa = X[t, a]
                    g = xy[a]
                    for q in range(B):
                        g[q] += yv[q] * xa
            # per pixel: status checks and the small solve
            for q in range(B):
                p = p0 + q
                n = nhist[q]
                n_valid[s, p] = nvalid[q]
                n_inf[s, p] = ninf[q]
                n_history[s, p] = n
                ok[q] = False
                for a in range(k):
                    beta[a, q] = 0.0
                if nvalid[q] == 0:
                    status[s, p] = _ALL_MISSING
                    continue
                status[s, p] = _OK
                if n <= k or int(math.floor(h * n)) <= 1:
                    status[s, p] = _TOO_FEW
                    continue
                ab = 0
                for a in range(k):
                    bp[a] = xy[a, q]
                    for c in range(a + 1):
                        Gp[a, c] = G[ab, q]
                        Gp[c, a] = G[ab, q]
                        ab += 1
                if not _solve_equilibrated(Gp, bp, k, betap, work):
                    status[s, p] = _SINGULAR  # unless NO_MONITORING_DATA, fixed below
                    continue
                ok[q] = True
                for a in range(k):
                    beta[a, q] = betap[a]
            # pass 2: residuals of every counted observation, compacted per pixel
            count[:] = 0
            rss[:] = 0.0
            for t in range(t_first, T):
                history = t < begin
                for q in range(B):
                    v = np.float64(values[t, p0 + q])
                    good = (v == v) & (not math.isinf(v)) & ((not has_nodata) | (v != nodata)) & (t >= first_hist[s, p0 + q])
                    w[q] = 1.0 if good else 0.0
                    yv[q] = v if good else 0.0
                for q in range(B):
                    e[q] = yv[q]
                for a in range(k):
                    xa = X[t, a]
                    b = beta[a]
                    for q in range(B):
                        e[q] -= xa * b[q]
                for q in range(B):  # branch-free compaction: write, advance when valid
                    c = count[q]
                    resid[q, c] = e[q]
                    rows[q, c] = t
                    count[q] = c + int(w[q])
                    if history:
                        rss[q] += w[q] * e[q] * e[q]
            # per pixel: the sequential tail
            for q in range(B):
                p = p0 + q
                n = nhist[q]
                n_monitor[s, p] = count[q] - n
                if n > 0:
                    history_start[s, p] = time[rows[q, 0]]
                if status[s, p] == _ALL_MISSING or status[s, p] == _TOO_FEW:
                    continue
                if count[q] == n:
                    status[s, p] = _NO_MONITORING
                    continue
                if not ok[q]:
                    continue
                _mosum_tail(
                    resid[q], rows[q], 0, n, count[q], rss[q], ymax[q], k, time, h, critval, sel, p, s,
                    status, break_index, break_time, magnitude, mosum_mean, statistic, sigma,
                    process, boundary, want_process,
                )


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
    nodata, has_nodata = kernel_nodata(values, plan.nodata)
    monitor_begin = plan.monitor_begin.astype(np.int64)
    outputs = (
        out["status"], out["break_index"], out["break_time"], out["magnitude"], out["mosum_mean"],
        out["statistic"], out["sigma"], out["history_start"], out["n_valid"], out["n_history"],
        out["n_monitor"], out["n_inf"], process, boundary, plan.return_process,
    )
    if gram == "fused":
        _monitor_kernel(
            values, nodata, has_nodata, X, plan.axis.time, first_hist, monitor_begin,
            plan.h, plan.critval, int(config.CPU_BLOCK_PIXELS), *outputs,
        )
    else:
        low = np.tril_indices(k)
        XX = np.ascontiguousarray((X[:, :, None] * X[:, None, :])[:, low[0], low[1]])
        use_pre = gram == "blas" and plan.history in ("all", "fixed")
        if use_pre:
            Gpre = np.empty((S, XX.shape[1], n_pixels))
            bpre = np.empty((S, k, n_pixels))
            for s in range(S):
                Gpre[s], bpre[s] = masked_gram_blas(values, plan.nodata, X, XX, plan.history_begin, int(monitor_begin[s]))
        else:
            Gpre = bpre = np.empty((S, 1, 1))
        _monitor_simd_kernel(
            values, nodata, has_nodata, X, XX, plan.axis.time, first_hist,
            monitor_begin, plan.h, plan.critval, int(config.CPU_BLOCK_PIXELS), use_pre, Gpre, bpre,
            *outputs,
        )
    if flagged is not None:
        out["status"][(out["status"] == _OK) & flagged] = np.int8(BfastStatus.ROC_NO_CROSSING)
    if plan.return_process:
        out["process"], out["boundary"] = process, boundary
    return out
