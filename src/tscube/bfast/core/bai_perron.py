"""Bai–Perron breakpoints (strucchange ``breakpoints``), the NumPy reference.

Shared by ``bfast_monitor(history="BP")`` and :func:`tscube.bfast_lite`; the cpu engines
implement the same rules in :mod:`tscube.bfast.core.bai_perron_cpu`.

1. The segment RSS triangle ``RSS(i, j)``: the sum of squared recursive residuals of rows
   ``i..j`` started at row ``i``. Where the first ``k`` rows of a segment have full rank
   that is the least-squares RSS of the segment; where they do not (a season level or an
   annual repeat missing among them), R's residuals use the columns kept by its in-order
   pivoting until the prefix reaches full rank, and the RSS exceeds least squares
   (SPEC-bfastlite §3.2). Computed here in closed form: least squares from prefix sums,
   plus that rank-deficient correction per start.
2. The dynamic programme over segment ends (minimum segment ``h`` rows, ties to the
   earliest break).
3. The information criteria of each number of breaks (BIC, LWZ).
"""

from __future__ import annotations

import math

import numpy as np

from .ols import deficient_prefix_residuals

#: LWZ penalty: 0.299 * log(n) ** 2.1 per parameter (strucchange ``summary.breakpointsfull``).
LWZ_FACTOR, LWZ_POWER = 0.299, 2.1


def segment_rss_triangle(X: np.ndarray, y: np.ndarray, h: int) -> np.ndarray:
    """``rss[i, j]``: R's RSS of rows ``i..j`` (0-based, inclusive) for every segment of
    at least ``h > k`` rows (NaN elsewhere)."""
    n, k = X.shape
    # centring keeps y'y - b'X'y free of cancellation; it leaves the fits as they are only
    # where the design holds the constant (an intercept first)
    yc = y - y.mean() if X[0, 0] != 0 and np.all(X[:, 0] == X[0, 0]) else y
    cxx = np.concatenate([np.zeros((1, k, k)), np.cumsum(X[:, :, None] * X[:, None, :], axis=0)])
    cxy = np.concatenate([np.zeros((1, k)), np.cumsum(X * yc[:, None], axis=0)])
    cyy = np.concatenate([[0.0], np.cumsum(yc * yc)])

    def least_squares_rss(i, j):
        gram, xy = cxx[j + 1] - cxx[i], cxy[j + 1] - cxy[i]
        try:
            beta = np.linalg.solve(gram, xy[..., None])[..., 0]
        except np.linalg.LinAlgError:  # a singular segment: its projection is still unique
            beta = np.einsum("sab,sb->sa", np.linalg.pinv(gram, hermitian=True), xy)
        return np.maximum(cyy[j + 1] - cyy[i] - np.einsum("sa,sa->s", beta, xy), 0.0)

    rss = np.full((n, n), np.nan)
    i, j = np.triu_indices(n, k=h - 1)
    rss[i, j] = least_squares_rss(i, j)
    for start in range(n - h + 1):
        p, residuals = deficient_prefix_residuals(X[start:], y[start:])
        if p == k:
            continue  # the common case: least squares from the first k rows on
        ends = np.arange(start + h - 1, n)
        short = ends < start + p - 1  # segments that end before their first full-rank prefix
        partial = np.cumsum(residuals**2)
        rss[start, ends[short]] = partial[ends[short] - start - k]
        if not np.all(short):
            base = least_squares_rss(np.array([start]), np.array([start + p - 1]))[0]
            rss[start, ends[~short]] += partial[-1] - base if partial.size else -base
    return rss


def optimal_breakpoints(rss: np.ndarray, n: int, h: int, max_breaks: int) -> list[list[int]]:
    """Bai–Perron dynamic programme: for m = 0..max_breaks, the breakpoints (index of the
    last row of each segment but the last) minimising the total segment RSS
    (strucchange ``breakpoints`` / ``extract.breaks``; ties go to the earliest)."""
    # best[m][i]: minimal RSS of rows 0..i split into m+1 segments; arg[m][i]: last break
    best = np.full((max_breaks + 1, n), np.inf)
    arg = np.full((max_breaks + 1, n), -1, dtype=np.int64)
    best[0, h - 1 :] = rss[0, h - 1 :]
    for m in range(1, max_breaks + 1):
        for i in range((m + 1) * h - 1, n):
            candidates = np.arange(m * h - 1, i - h + 1)  # last row of the m-th segment
            totals = best[m - 1, candidates] + rss[candidates + 1, i]
            pick = int(np.argmin(totals))
            best[m, i], arg[m, i] = totals[pick], candidates[pick]
    solutions = [[]]
    for m in range(1, max_breaks + 1):
        if not np.isfinite(best[m, n - 1]):
            break
        breaks = [int(arg[m, n - 1])]
        for level in range(m - 1, 0, -1):
            breaks.insert(0, int(arg[level, breaks[0]]))
        solutions.append(breaks)
    return solutions


def total_rss(rss: np.ndarray, breaks: list[int], n: int) -> float:
    """RSS of the model with these breakpoints: the segments' RSS re-summed from the triangle."""
    bounds = [-1, *breaks, n - 1]
    return float(sum(rss[a + 1, b] for a, b in zip(bounds[:-1], bounds[1:])))


def information_criteria(rss_by_m: np.ndarray, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """BIC and LWZ of the models with m = 0, 1, ... breaks (``k`` coefficients and one
    variance per segment; the break dates are not counted, as strucchange)."""
    m = np.arange(rss_by_m.size)
    with np.errstate(divide="ignore"):
        minus_2_loglik = n * (np.log(rss_by_m) + 1.0 - math.log(n) + math.log(2.0 * math.pi))
    df = (k + 1) * (m + 1)
    bic = minus_2_loglik + math.log(n) * df
    lwz = minus_2_loglik + LWZ_FACTOR * math.log(n) ** LWZ_POWER * df
    return bic, lwz
