"""Bai–Perron breakpoints for the cpu engines (numba), one pixel per call.

Same rules as :mod:`tscube.bfast.bai_perron` (the reference), organised for speed:

* the segment RSS triangle row by row: for each segment start, the recursive residuals
  of the rows after it by rank-one (Sherman–Morrison) updates of ``(X'X)^{-1}`` and the
  coefficients, ``RSS(i, j)`` their running sum of squares. While the first rows of a
  segment are rank deficient, each step is a full fit by modified Gram–Schmidt QR that
  drops aliased columns by R's ``lm.fit`` rule (a column's orthogonal part below 1e-7 of
  its norm), as strucchange's ``recresid`` does; two exact refits after the first
  full-rank one keep the updates' rounding below what could move a breakpoint;
* the dynamic programme over segment ends, ties to the earliest break.

Shared by ``bfast_monitor(history="BP")`` (:mod:`tscube.bfast._cpu_history`) and BFAST
Lite (:mod:`tscube.bfast._lite_cpu`).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .ols import LM_FIT_TOL

#: Exact refits after the first full-rank fit, every k rows.
_REFITS = 2


@njit(cache=True)
def qr_fit_in_order(X, rows, y, first, step, count, Q, R, idx, beta, P):
    """OLS of ``count`` compacted rows (positions ``first + step * i``) with R's in-order
    aliasing. Writes the coefficients (0 where aliased) to ``beta`` and ``(X_K'X_K)^{-1}``
    of the kept columns K (zero elsewhere) to ``P``; returns the number of kept columns."""
    k = X.shape[1]
    nk = 0
    for j in range(k):
        norm = 0.0
        for i in range(count):
            v = X[rows[first + step * i], j]
            Q[i, nk] = v
            norm += v * v
        norm = math.sqrt(norm)
        if norm == 0.0:
            continue
        for c in range(nk):
            R[c, nk] = 0.0
        for _ in range(2):  # Gram–Schmidt twice: orthogonal to working precision
            for c in range(nk):
                dot = 0.0
                for i in range(count):
                    dot += Q[i, c] * Q[i, nk]
                R[c, nk] += dot
                for i in range(count):
                    Q[i, nk] -= dot * Q[i, c]
        rest = 0.0
        for i in range(count):
            rest += Q[i, nk] * Q[i, nk]
        rest = math.sqrt(rest)
        if rest < LM_FIT_TOL * norm:
            continue
        for i in range(count):
            Q[i, nk] /= rest
        R[nk, nk] = rest
        idx[nk] = j
        nk += 1
    for a in range(k):
        beta[a] = 0.0
        for b in range(k):
            P[a, b] = 0.0
    # R^{-1} in place of the upper triangle's columns (back substitution), then
    # beta = R^{-1} Q'y and P = R^{-1} R^{-T}
    Rinv = np.zeros((nk, nk))
    for c in range(nk):
        Rinv[c, c] = 1.0 / R[c, c]
        for a in range(c - 1, -1, -1):
            s = 0.0
            for m in range(a + 1, c + 1):
                s += R[a, m] * Rinv[m, c]
            Rinv[a, c] = -s / R[a, a]
    for c in range(nk):
        qy = 0.0
        for i in range(count):
            qy += Q[i, c] * y[first + step * i]
        for a in range(c + 1):
            beta[idx[a]] += Rinv[a, c] * qy
    for a in range(nk):
        for b in range(nk):
            s = 0.0
            for m in range(max(a, b), nk):
                s += Rinv[a, m] * Rinv[b, m]
            P[idx[a], idx[b]] = s
    return nk


@njit(cache=True)
def recursive_residuals(X, rows, y, first, step, count, out, Q, R, idx, beta, P, Px):
    """Recursive residuals (strucchange ``recresid``) of ``count`` compacted rows from
    position ``first`` by ``step`` (+1 forward, -1 reversed): ``count - k`` values to
    ``out``. Returns the number of rows of the first full-rank fit (``count + 1`` if none)."""
    k = X.shape[1]
    full_at = count + 1
    for i in range(k, count):
        pos = first + step * i
        r = rows[pos]
        refit = full_at > count or (i - full_at) % k == 0 and i - full_at <= _REFITS * k
        if refit:
            nk = qr_fit_in_order(X, rows, y, first, step, i, Q, R, idx, beta, P)
            if nk == k and full_at > count:
                full_at = i
        f = 1.0
        pred = 0.0
        for a in range(k):
            s = 0.0
            for b in range(k):
                s += P[a, b] * X[r, b]
            Px[a] = s
            f += X[r, a] * s
            pred += X[r, a] * beta[a]
        err = y[pos] - pred
        out[i - k] = err / math.sqrt(f)
        if full_at <= count:  # Sherman–Morrison update of the inverse and the coefficients
            for a in range(k):
                beta[a] += Px[a] * err / f
            for a in range(k):
                for b in range(k):
                    P[a, b] -= Px[a] * Px[b] / f
    return full_at


@njit(cache=True)
def rss_triangle(X, rows, y, n, h, rss, w, Q, R, idx, beta, P, Px):
    """``rss[i, j]`` = R's RSS of compacted rows ``i..j`` for every segment start the
    programme can use (0 and ``h..n-h``) and end ``j >= i + h - 1``."""
    k = X.shape[1]
    for i in range(n - h + 1):
        if 0 < i < h:
            continue  # no segment but the first starts before row h
        count = n - i
        recursive_residuals(X, rows, y, i, 1, count, w, Q, R, idx, beta, P, Px)
        total = 0.0
        for j in range(k, count):
            total += w[j - k] * w[j - k]
            rss[i, i + j] = total


@njit(cache=True)
def optimal_partition(rss, n, h, max_breaks, best, arg):
    """Bai–Perron dynamic programme: ``best[m, i]`` the least RSS of rows ``0..i`` in
    ``m + 1`` segments of at least ``h`` rows, ``arg[m, i]`` the last row of its m-th
    segment (the earliest on ties). Rows ``0..max_breaks`` of ``best``/``arg`` are set."""
    for m in range(max_breaks + 1):
        for i in range(n):
            best[m, i] = np.inf
            arg[m, i] = -1
    for i in range(h - 1, n):
        best[0, i] = rss[0, i]
    for m in range(1, max_breaks + 1):
        for i in range((m + 1) * h - 1, n):
            for j in range(m * h - 1, i - h + 1):
                total = best[m - 1, j] + rss[j + 1, i]
                if total < best[m, i]:
                    best[m, i] = total
                    arg[m, i] = j
    return 0


@njit(cache=True)
def breaks_of(arg, m, n, out):
    """The ``m`` breakpoints of the best ``m``-break partition into ``out[:m]``."""
    if m == 0:
        return
    out[m - 1] = arg[m, n - 1]
    for level in range(m - 1, 0, -1):
        out[level - 1] = arg[level, out[level]]


@njit(cache=True)
def partition_rss(rss, breaks, m, n):
    """RSS of the partition with ``breaks[:m]``, re-summed from the triangle as R does."""
    total = 0.0
    start = 0
    for l in range(m):
        total += rss[start, breaks[l]]
        start = breaks[l] + 1
    return total + rss[start, n - 1]


@njit(cache=True)
def minus_2_loglik(rss_m, n):
    return n * (math.log(rss_m) + 1.0 - math.log(n) + math.log(2.0 * math.pi))
