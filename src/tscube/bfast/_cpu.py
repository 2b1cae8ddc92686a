"""Multi-core CPU engine of BFAST Monitor: numba kernels, parallel over pixel blocks.

Same outputs and status codes as :mod:`tscube.bfast._reference`, organised for speed:

* The cube is read once, time-major as it is stored: each thread takes a block of
  ``config.CPU_BLOCK_PIXELS`` pixels and transposes it into a private buffer, compacting
  every pixel's valid observations (FILTERMISSING with prefix-sum indices).
* Per pixel (Algorithm 1): masked Gram ``X'X`` and ``X'y`` of the history, an equilibrated
  Cholesky solve (singular designs flagged), residuals of the valid observations, sigma,
  the OLS-MOSUM process by a running window sum, boundary, first crossing, the median
  monitoring residual by selection (not a full sort), the mean of the process.
* Two ways to get the masked Gram matrices (``gram=``): ``"fused"`` accumulates them in the
  per-pixel loop; ``"blas"`` computes all of a chunk's at once as one matrix product of the
  0/1 validity mask with a precomputed table of the outer products ``x_t x_t'`` (BLAS).
  The benchmark records both; :data:`DEFAULT_GRAM` is the faster on our machines.

Everything that decides a break (Gram, X'y, residual sums of squares, MOSUM sums) is
accumulated in float64, whatever the input dtype. Threads follow numba's settings
(``NUMBA_NUM_THREADS`` / ``numba.set_num_threads``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from .. import config
from .plan import PERFECT_FIT_RTOL, SINGULAR_PIVOT_TOL, MonitorPlan
from .result import BfastStatus, empty_outputs

#: Gram formulation used unless ``config.CPU_BFAST_GRAM`` says otherwise.
DEFAULT_GRAM = "fused"

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
    y, rows, nv, X, time, first_hist, begin, h, critval, use_gram, Gpre, bpre,
    G, xy, beta, work, resid, sel, out_s, p, process, boundary, want_process, s,
):
    """BFAST Monitor of one compacted pixel series for one monitoring start.

    ``y[:nv]`` are the valid values at time indices ``rows[:nv]``. Writes the outputs of
    pixel ``p`` into the arrays of ``out_s`` (status, break_index, ...).
    """
    (status, break_index, break_time, magnitude, mosum_mean, statistic, sigma_out,
     history_start, n_history_out, n_monitor_out) = out_s
    k = X.shape[1]
    # history rows: [lo, mid) of the compacted series; monitoring rows: [mid, nv)
    lo = 0
    while lo < nv and rows[lo] < first_hist:
        lo += 1
    mid = lo
    while mid < nv and rows[mid] < begin:
        mid += 1
    n = mid - lo
    n_history_out[p] = n
    n_monitor_out[p] = nv - mid
    if n > 0:
        history_start[p] = time[rows[lo]]
    window = int(math.floor(h * n))
    if n <= k or window <= 1:
        status[p] = _TOO_FEW
        return
    if nv == mid:
        status[p] = _NO_MONITORING
        return

    if use_gram:
        for a in range(k):
            xy[a] = bpre[a, p]
            for c in range(k):
                G[a, c] = Gpre[a * k + c, p]
    else:
        for a in range(k):
            xy[a] = 0.0
            for c in range(k):
                G[a, c] = 0.0
        for j in range(lo, mid):
            x = X[rows[j]]
            v = y[j]
            for a in range(k):
                xa = x[a]
                xy[a] += xa * v
                for c in range(a + 1):
                    G[a, c] += xa * x[c]
        for a in range(k):
            for c in range(a + 1, k):
                G[a, c] = G[c, a]
    if not _solve_equilibrated(G, xy, k, beta, work):
        status[p] = _SINGULAR
        return

    rss = 0.0
    ymax = 0.0
    for j in range(lo, nv):
        x = X[rows[j]]
        fit = 0.0
        for a in range(k):
            fit += x[a] * beta[a]
        e = y[j] - fit
        resid[j] = e
        if j < mid:
            rss += e * e
            if abs(y[j]) > ymax:
                ymax = abs(y[j])
    sigma = math.sqrt(rss / (n - k))
    sigma_out[p] = sigma
    m = nv - mid
    for j in range(m):
        sel[j] = resid[mid + j]
    magnitude[p] = _median(sel, m)
    if sigma <= PERFECT_FIT_RTOL * ymax:
        status[p] = _PERFECT_FIT
        return

    scale = 1.0 / (sigma * math.sqrt(n))
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
        bound = critval * math.sqrt(2.0 * (math.log(ratio) if ratio > math.e else 1.0))
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
    statistic[p] = biggest
    mosum_mean[p] = total / m
    if first >= 0 and finite:
        break_index[p] = rows[first]
        break_time[p] = time[rows[first]]


@njit(parallel=True, cache=True)
def _monitor_kernel(
    values, nodata, has_nodata, X, time, first_hist, monitor_begin, h, critval,
    use_gram, Gpre, bpre, block,
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
            for t in range(T):
                v = buf[q, t]
                if math.isinf(v):
                    ninf += 1
                elif v == v and not (has_nodata and v == nodata):
                    y[nv] = v
                    rows[nv] = t
                    nv += 1
            for s in range(S):
                n_valid[s, p] = nv
                n_inf[s, p] = ninf
                if nv == 0:
                    status[s, p] = _ALL_MISSING
                    continue
                out_s = (status[s], break_index[s], break_time[s], magnitude[s], mosum_mean[s],
                         statistic[s], sigma[s], history_start[s], n_history[s], n_monitor[s])
                status[s, p] = _OK
                _monitor_one(
                    y, rows, nv, X, time, first_hist[s, p], monitor_begin[s], h, critval,
                    use_gram, Gpre[s], bpre[s], G, xy, beta, work, resid, sel, out_s, p,
                    process, boundary, want_process, s,
                )


def masked_gram_blas(values: np.ndarray, nodata, X: np.ndarray, first: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
    """Masked Gram matrices and X'y of all pixels over dates ``[first, stop)`` by BLAS.

    ``G[:, p] = sum_t m[t, p] vec(x_t x_t')`` is the product of the table of outer
    products ``(k*k, n)`` with the 0/1 validity mask ``(n, P)``; ``X'y`` likewise with the
    zero-filled values. Returns ``(k*k, P)`` and ``(k, P)`` float64 arrays.
    """
    k = X.shape[1]
    Xh = X[first:stop]
    table = (Xh[:, :, None] * Xh[:, None, :]).reshape(stop - first, k * k)
    block = values[first:stop].astype(np.float64)
    invalid = ~np.isfinite(block)
    if nodata is not None:
        invalid |= block == nodata
    block[invalid] = 0.0
    mask = (~invalid).astype(np.float64)
    return table.T @ mask, Xh.T @ block


def run(values: np.ndarray, plan: MonitorPlan, *, gram: str | None = None) -> dict[str, np.ndarray]:
    """Run BFAST Monitor on ``values`` of shape ``(T, P)``; outputs are ``(S, P)``."""
    from . import _cpu_history

    gram = gram or config.CPU_BFAST_GRAM or DEFAULT_GRAM
    if gram not in ("fused", "blas"):
        raise ValueError(f"gram must be 'fused' or 'blas', got {gram!r}")
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
    use_gram = gram == "blas" and plan.history in ("all", "fixed")
    if use_gram:
        Gpre = np.empty((S, k * k, n_pixels))
        bpre = np.empty((S, k, n_pixels))
        for s in range(S):
            Gpre[s], bpre[s] = masked_gram_blas(values, plan.nodata, X, plan.history_begin, int(plan.monitor_begin[s]))
    else:
        Gpre = np.empty((S, 1, 1))
        bpre = np.empty((S, 1, 1))

    _monitor_kernel(
        values, 0.0 if plan.nodata is None else float(plan.nodata), plan.nodata is not None,
        X, plan.axis.time, first_hist, plan.monitor_begin.astype(np.int64), plan.h, plan.critval,
        use_gram, Gpre, bpre, int(config.CPU_BLOCK_PIXELS),
        out["status"], out["break_index"], out["break_time"], out["magnitude"], out["mosum_mean"],
        out["statistic"], out["sigma"], out["history_start"], out["n_valid"], out["n_history"],
        out["n_monitor"], out["n_inf"], process, boundary, plan.return_process,
    )
    if flagged is not None:
        out["status"][(out["status"] == _OK) & flagged] = np.int8(BfastStatus.ROC_NO_CROSSING)
    if plan.return_process:
        out["process"], out["boundary"] = process, boundary
    return out
