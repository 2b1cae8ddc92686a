"""The "fused" formulation of the cpu engine of BFAST Monitor (``config.CPU_BFAST_GRAM =
"fused"``): one pixel at a time, everything in one loop over its compacted series. Kept
beside the default "simd" formulation (:mod:`._cpu`) as a second, independent way to the
same results (the tests compare the two) and for ``benchmarks/bfast_monitor.py``."""

from __future__ import annotations

import math

import numpy as np

from ..._jit import CONTRACT, jit
from ..core.ols_cpu import add_normal_row, mirror_lower, solve_equilibrated
from ._cpu_pixel import (STATUS_ALL_MISSING, STATUS_NO_MONITORING, STATUS_OK, STATUS_PERFECT_FIT, STATUS_SINGULAR,
                         STATUS_TOO_FEW, mosum_tail)


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
        status[s, p] = STATUS_TOO_FEW
        return
    if nv == mid:
        status[s, p] = STATUS_NO_MONITORING
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
    if (all_levels != 0 and seen != all_levels) or not solve_equilibrated(G, xy, k, beta, work):
        status[s, p] = STATUS_SINGULAR
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
    first = mosum_tail(
        resid, mid, m, n, rss, esum, ysum, ymax, k, h, critval, cusum, sel, p, s,
        status, magnitude, relative, mosum_mean, statistic, sigma_out, rmse, want_process,
    )
    if want_process and status[s, p] != STATUS_PERFECT_FIT:
        for j in range(m):
            process[s, rows[mid + j], p] = sel[j]
            boundary[s, rows[mid + j], p] = sel[m + j]
    if first >= 0:
        break_index[s, p] = rows[mid + first]
        break_time[s, p] = time[rows[mid + first]]


@jit(nogil=True, fastmath=CONTRACT)
def monitor_kernel(
    task, n_tasks, values, nodata, has_nodata, X, levels, all_levels, time, first_hist, monitor_begin, h, critvals,
    cusum, block,
    status, break_index, break_time, magnitude, relative, mosum_mean, statistic, sigma, rmse,
    history_start, n_valid, n_history, n_monitor, n_inf,
    process, boundary, want_process,
):
    """The "fused" formulation, one pixel at a time: task ``task`` of ``n_tasks`` (a range
    of blocks of ``block`` pixels; :func:`tscube._threads.run_tasks`)."""
    T, P = values.shape
    k = X.shape[1]
    S = monitor_begin.shape[0]
    n_blocks = (P + block - 1) // block
    for ib in range(task * n_blocks // n_tasks, (task + 1) * n_blocks // n_tasks):
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
                    status[s, p] = STATUS_ALL_MISSING
                    continue
                status[s, p] = STATUS_OK
                _monitor_one(
                    y, rows, nv, X, levels, all_levels, time, first_hist[s, p], monitor_begin[s], h, critvals[s, p], cusum,
                    G, xy, beta, work, resid, sel, p, s,
                    status, break_index, break_time, magnitude, relative, mosum_mean, statistic, sigma, rmse,
                    history_start, n_history, n_monitor, process, boundary, want_process,
                )
