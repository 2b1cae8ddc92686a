"""Which observations form the stable history period (R ``bfastmonitor(history=...)``).

``"all"`` and a fixed start need no per-pixel work beyond the missing-value mask. The
per-pixel tests are implemented here in plain NumPy for the reference engine; the cpu
engine (:mod:`tscube.bfast._cpu_history`) implements the same rules in numba kernels.

* ``"ROC"`` (R's default): reverse-ordered CUSUM. The history candidates are reversed,
  their recursive residuals form a Rec-CUSUM process; if its test rejects stability at
  ``level[2]``, the history starts one observation after the (forward) position of the
  first crossing of the alpha = 0.05 boundary.
* ``"BP"``: Bai–Perron breakpoints (minimum segment ``6 k`` observations, number of breaks
  by BIC); the history starts after the last breakpoint.
"""

from __future__ import annotations

import math

import numpy as np

from .plan import PERFECT_FIT_RTOL

HISTORY_METHODS = ("all", "ROC", "BP")

#: Boundary level of the ROC test: strucchange's ``boundary(efp)`` always uses its
#: default alpha = 0.05, and R's ``uniroot`` returns this value.
ROC_LAMBDA_05 = 0.947898101732124

#: Equilibrated Gram pivot below which a column counts as aliased in the recursive
#: residuals. R's QR (``lm.fit``) uses 1e-7 on |r_jj| / ||x_j||, i.e. 1e-14 on this squared
#: scale, but pivots computed from a Gram matrix carry rounding errors of that size on
#: exactly singular starts (two dates a whole number of years apart), so engines could
#: disagree; 1e-10 (as the monitoring fit's SINGULAR_PIVOT_TOL) decides robustly.
ALIAS_PIVOT_TOL = 1e-10


def solve_in_order(gram: np.ndarray, rhs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares coefficients from normal equations, dropping aliased columns like R.

    Columns are taken in order; a column whose equilibrated Cholesky pivot (``1 - R^2`` on
    the columns kept before it) is below :data:`ALIAS_PIVOT_TOL` is aliased: coefficient 0
    and zero rows/columns in the returned inverse (R ``lm.fit`` with LINPACK pivoting,
    as strucchange's ``recresid`` uses on rank-deficient starts).

    Returns ``(beta, inverse)``.
    """
    k = gram.shape[0]
    d = np.sqrt(np.abs(np.diag(gram)))
    if np.all(d > 0):  # the common full-rank case: one factorisation
        try:
            chol = np.linalg.cholesky(gram / np.outer(d, d))
            if np.min(np.diag(chol)) ** 2 >= ALIAS_PIVOT_TOL:
                inverse = np.linalg.inv(gram)
                return inverse @ rhs, inverse
        except np.linalg.LinAlgError:
            pass
    keep: list[int] = []
    for j in range(k):
        if gram[j, j] <= 0:
            continue
        cols = keep + [j]
        d = np.sqrt(np.diag(gram)[cols])
        corr = gram[np.ix_(cols, cols)] / np.outer(d, d)
        try:
            chol = np.linalg.cholesky(corr)
        except np.linalg.LinAlgError:
            continue
        if chol[-1, -1] ** 2 >= ALIAS_PIVOT_TOL:
            keep.append(j)
    inverse = np.zeros((k, k))
    beta = np.zeros(k)
    if keep:
        sub = np.linalg.inv(gram[np.ix_(keep, keep)])
        inverse[np.ix_(keep, keep)] = sub
        beta[keep] = sub @ rhs[keep]
    return beta, inverse


def recursive_residuals(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Recursive residuals ``w_r`` for r = k+1..n: the standardised one-step-ahead
    prediction errors of OLS fits on the first r-1 rows (strucchange ``recresid``)."""
    n, k = X.shape
    out = np.empty(max(n - k, 0))
    gram = X[:k].T @ X[:k]
    rhs = X[:k].T @ y[:k]
    for r in range(k, n):
        beta, inverse = solve_in_order(gram, rhs)
        x = X[r]
        out[r - k] = (y[r] - x @ beta) / np.sqrt(1.0 + x @ inverse @ x)
        gram += np.outer(x, x)
        rhs += x * y[r]
    return out


def _phi(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def rec_cusum_pvalue(statistic: float) -> float:
    """p-value of the Rec-CUSUM max test (strucchange ``pvalue.efp``, Brownian motion)."""
    s = statistic
    if s < 0.3:
        return 1.0 - 0.1465 * s
    return 2.0 * (
        1.0 - _phi(3.0 * s) + math.exp(-4.0 * s * s) * (_phi(s) + _phi(5.0 * s) - 1.0)
        - math.exp(-16.0 * s * s) * (1.0 - _phi(s))
    )


def roc_history_start(X: np.ndarray, y: np.ndarray, level: float) -> tuple[int, bool]:
    """ROC stable-history start among the candidates ``X``, ``y`` (forward order).

    Returns the index of the first history row and whether the test rejected stability
    without any boundary crossing (possible only for ``level > 0.05``; R then fails, tscube
    keeps all candidates and flags the pixel).
    """
    n, k = X.shape
    w = recursive_residuals(X[::-1], y[::-1])
    m = w.size
    if m < 2:
        return 0, False
    # an exact fit of all candidates (e.g. a constant series) leaves nothing to test; it is
    # judged on the full fit, whose residuals are exact, not on the recursive residuals,
    # whose first values carry the rounding of nearly singular k-observation fits
    fit = np.linalg.lstsq(X, y, rcond=None)[0]
    fit_sigma = np.sqrt(np.sum((y - X @ fit) ** 2) / (n - k))
    if not fit_sigma > PERFECT_FIT_RTOL * np.max(np.abs(y)):
        return 0, False
    sigma = np.std(w, ddof=1)
    process = np.concatenate([[0.0], np.cumsum(w)]) / (sigma * np.sqrt(m))
    j = np.arange(1, m + 1)
    statistic = np.max(np.abs(process[1:]) / (1.0 + 2.0 * j / m))
    if not rec_cusum_pvalue(statistic) < level:
        return 0, False
    boundary = ROC_LAMBDA_05 * (1.0 + 2.0 * j / m)
    crossing = np.flatnonzero(np.abs(process[1:]) > boundary)
    if crossing.size == 0:
        return 0, True
    first = crossing[0] + 1  # j*
    return m + 1 - first, False  # forward 0-based row one after the crossing


def segment_rss_table(X: np.ndarray, y: np.ndarray, h: int) -> np.ndarray:
    """``rss[i, j]``: OLS residual sum of squares of rows ``i..j`` (inclusive, 0-based), for
    segments of at least ``h`` rows (NaN elsewhere), from prefix sums of X'X, X'y, y'y.

    A singular segment's RSS uses the pseudo-inverse (the projection, hence the RSS, is
    unique whatever the aliasing).
    """
    n, k = X.shape
    yc = y - y.mean()  # centring keeps y'y - b'X'y free of cancellation
    cxx = np.concatenate([np.zeros((1, k, k)), np.cumsum(X[:, :, None] * X[:, None, :], axis=0)])
    cxy = np.concatenate([np.zeros((1, k)), np.cumsum(X * yc[:, None], axis=0)])
    cyy = np.concatenate([[0.0], np.cumsum(yc * yc)])
    i, j = np.triu_indices(n, k=h - 1)
    gram = cxx[j + 1] - cxx[i]
    xy = cxy[j + 1] - cxy[i]
    beta = np.einsum("sab,sb->sa", np.linalg.pinv(gram, hermitian=True), xy)
    rss = np.full((n, n), np.nan)
    rss[i, j] = np.maximum(cyy[j + 1] - cyy[i] - np.einsum("sa,sa->s", beta, xy), 0.0)
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


def bp_history_start(X: np.ndarray, y: np.ndarray) -> tuple[int, bool]:
    """BP stable-history start: one row after the last breakpoint chosen by BIC, and
    whether Bai–Perron could not run.

    With fewer than ``2 * 6k`` candidates Bai–Perron cannot run (R stops): all candidates
    are kept and the pixel is flagged (BP_TOO_SHORT).
    """
    n, k = X.shape
    h = 6 * k
    if h > n // 2:
        return 0, True
    max_breaks = math.ceil(n / h) - 2
    rss = segment_rss_table(X, y, h)
    solutions = optimal_breakpoints(rss, n, h, max(max_breaks, 0))
    best_bic, best_breaks = np.inf, []
    for m, breaks in enumerate(solutions):
        bounds = [-1] + breaks + [n - 1]
        total = sum(rss[a + 1, b] for a, b in zip(bounds[:-1], bounds[1:]))
        bic = n * (math.log(total) + 1.0 - math.log(n) + math.log(2.0 * math.pi)) + math.log(n) * (k + 1) * (m + 1)
        if bic < best_bic:
            best_bic, best_breaks = bic, breaks
    return (best_breaks[-1] + 1 if best_breaks else 0), False


def select(method: str, X: np.ndarray, y: np.ndarray, plan) -> tuple[int, bool]:
    """First row of the stable history among the history candidates ``X``, ``y``, and
    whether the pixel is flagged (ROC_NO_CROSSING for "ROC", BP_TOO_SHORT for "BP")."""
    if X.shape[0] <= X.shape[1]:
        return 0, False  # too few candidates for any test: TOO_FEW_HISTORY follows
    if method == "ROC":
        return roc_history_start(X, y, plan.level_roc)
    if method == "BP":
        return bp_history_start(X, y)
    raise ValueError(f"unknown history method {method!r}")
