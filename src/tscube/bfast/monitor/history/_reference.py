"""Which observations form the stable history period (R ``bfastmonitor(history=...)``).

``"all"`` and a fixed start need no per-pixel work beyond the missing-value mask. The
per-pixel tests are implemented here in plain NumPy for the reference engine; the cpu
engine (:mod:`tscube.bfast.monitor.history._cpu`) implements the same rules in numba kernels.

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

from ...core import bai_perron
from ...core.inputs import PERFECT_FIT_RTOL
from ...core.ols import deficient_prefix_residuals, solve_in_order

HISTORY_METHODS = ("all", "ROC", "BP")

#: Boundary level of the ROC test: strucchange's ``boundary(efp)`` always uses its
#: default alpha = 0.05, and R's ``uniroot`` returns this value.
ROC_LAMBDA_05 = 0.947898101732124

def recursive_residuals(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Recursive residuals ``w_r`` for r = k+1..n: the standardised one-step-ahead
    prediction errors of OLS fits on the first r-1 rows (strucchange ``recresid``); on
    rank-deficient first rows, those of R's restricted fits (:func:`deficient_prefix_residuals`)."""
    n, k = X.shape
    out = np.empty(max(n - k, 0))
    p, restricted = deficient_prefix_residuals(X, y)
    out[: restricted.size] = restricted
    gram = X[:p].T @ X[:p]
    rhs = X[:p].T @ y[:p]
    for r in range(p, n):
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
    max_breaks = max(math.ceil(n / h) - 2, 0)
    rss = bai_perron.segment_rss_triangle(X, y, h)
    solutions = bai_perron.optimal_breakpoints(rss, n, h, max_breaks)
    totals = np.array([bai_perron.total_rss(rss, breaks, n) for breaks in solutions])
    bic, _ = bai_perron.information_criteria(totals, n, k)
    best_breaks = solutions[int(np.argmin(bic))]
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
