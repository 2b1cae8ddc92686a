"""Stable-history selection for the fast engines: numba kernels, parallel over pixels.

Same rules as :mod:`tscube.bfast.history` (the reference), organised for speed:

* ROC: recursive residuals of the reversed candidates by rank-one (Sherman–Morrison)
  updates of ``(X'X)^{-1}`` and the coefficients, not a refit per step. While the first
  rows are rank deficient the step is a QR fit that drops aliased columns in order, as
  R's ``recresid`` does (:func:`~tscube.bfast._cpu_bai_perron.recursive_residuals`, the
  Bai–Perron triangle's).
* BP: the Bai–Perron triangle and dynamic programme of :mod:`tscube.bfast._cpu_bai_perron`
  (shared with BFAST Lite), then the BIC choice of the number of breaks.

:func:`history_first` returns, per start and pixel, the time index where the stable
history begins; the cpu and cuda engines then monitor from there.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ._cpu_bai_perron import (breaks_of, minus_2_loglik, optimal_partition, partition_rss, qr_fit_in_order,
                              recursive_residuals, rss_triangle)
from ._cpu_series import compact_valid, load_tile
from .history import ROC_LAMBDA_05
from .plan import PERFECT_FIT_RTOL, MonitorPlan, kernel_nodata


#: Exact refits of the ROC recursive residuals after the first full-rank fit: one, k rows
#: later, is enough for the known near-tie (tests/test_bfast_history.py); Bai–Perron's
#: shorter segments take two.
_ROC_REFITS = 1


@njit(cache=True)
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


@njit(cache=True)
def _phi(x):
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


@njit(cache=True)
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


@njit(cache=True)
def _bp_start(X, rows, y, n, rss, w, Q, R, idx, beta, P, Px, S, U, YY):
    """Rows to drop from the front: one after the last BIC-selected Bai–Perron break."""
    k = X.shape[1]
    h = 6 * k
    if h > n // 2:
        return -1  # Bai–Perron cannot run: all rows kept, the pixel flagged
    max_breaks = max(0, (n + h - 1) // h - 2)
    rss_triangle(X, rows, y, n, h, rss, w, Q, R, idx, beta, P, Px, S, U, YY)
    best = np.empty((max_breaks + 1, n))
    arg = np.empty((max_breaks + 1, n), dtype=np.int64)
    optimal_partition(rss, n, h, max_breaks, best, arg)
    breaks = np.empty(max(max_breaks, 1), dtype=np.int64)
    best_bic = np.inf
    start = 0
    for mb in range(max_breaks + 1):
        breaks_of(arg, mb, n, breaks)
        bic = minus_2_loglik(partition_rss(rss, breaks, mb, n), n) + math.log(n) * (k + 1) * (mb + 1)
        if bic < best_bic:
            best_bic = bic
            start = breaks[mb - 1] + 1 if mb > 0 else 0
    return start


@njit(parallel=True, cache=True)
def _history_kernel(values, nodata, has_nodata, X, monitor_begin, method_roc, level, block, first_hist, flagged):
    T, P = values.shape
    k = X.shape[1]
    S = monitor_begin.shape[0]
    n_blocks = (P + block - 1) // block
    for ib in prange(n_blocks):
        # per-thread buffers, reused for the pixels of the block
        rows = np.empty(T, dtype=np.int64)
        y = np.empty(T)
        w = np.empty(T)
        Pinv = np.empty((k, k))
        beta = np.empty(k)
        Px = np.empty(k)
        R = np.empty((k, k))
        idx = np.empty(k, dtype=np.int64)
        rss = np.empty((1, 1)) if method_roc else np.empty((T, T))
        Q = np.empty((T, k))
        sum_xx = np.empty((1, 1, 1)) if method_roc else np.empty((T + 1, k, k))
        sum_xy = np.empty((1, 1)) if method_roc else np.empty((T + 1, k))
        sum_yy = np.empty(1) if method_roc else np.empty(T + 1)
        p0 = ib * block
        width = min(P, p0 + block) - p0
        stop = 0
        for s in range(S):
            stop = max(stop, monitor_begin[s])
        tile = np.empty((block, stop))
        load_tile(values, p0, width, stop, tile)
        for q in range(width):
            p = p0 + q
            for s in range(S):
                n = compact_valid(tile[q], monitor_begin[s], nodata, has_nodata, rows, y)
                first_hist[s, p] = 0
                if n <= k:
                    continue
                if method_roc:
                    full_at = recursive_residuals(X, rows, y, n - 1, -1, n, w, Q, R, idx, beta, Pinv, Px, _ROC_REFITS)
                    y_scale = 0.0
                    for j in range(n):
                        y_scale = max(y_scale, abs(y[j]))
                    sigma = _fit_sigma(X, rows, y, n, full_at <= n, Q, R, Pinv, beta, idx)
                    drop, flag = _roc_start(w, n - k, level, not sigma > PERFECT_FIT_RTOL * y_scale)
                    flagged[s, p] = flag
                else:
                    drop = _bp_start(X, rows, y, n, rss, w, Q, R, idx, beta, Pinv, Px, sum_xx, sum_xy, sum_yy)
                    flagged[s, p] = drop < 0
                    drop = max(drop, 0)
                first_hist[s, p] = rows[drop]


def history_first(values: np.ndarray, plan: MonitorPlan) -> tuple[np.ndarray, np.ndarray | None]:
    """First time index of each pixel's stable history, ``(S, P)`` int64, and the flags
    ``(S, P)`` bool (ROC_NO_CROSSING for "ROC", BP_TOO_SHORT for "BP"; ``None`` when no
    pixel can be flagged)."""
    n_pixels = values.shape[1]
    first = np.full((plan.n_starts, n_pixels), plan.history_begin, dtype=np.int64)
    if plan.history in ("all", "fixed"):
        return first, None
    flagged = np.zeros((plan.n_starts, n_pixels), dtype=np.bool_)
    nodata, has_nodata = kernel_nodata(values, plan.nodata)
    _history_kernel(
        values, nodata, has_nodata,
        plan.design.matrix, plan.monitor_begin.astype(np.int64), plan.history == "ROC",
        plan.level_roc, 16, first, flagged,
    )
    return first, flagged
