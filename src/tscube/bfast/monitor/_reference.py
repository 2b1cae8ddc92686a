"""Reference engine of BFAST Monitor: plain NumPy, one pixel at a time, written for clarity.

Every other engine is tested against this one, and this one against R. It follows
Algorithm 1 of the BFAST GPU paper with R's exact semantics (SPEC-bfastmonitor):

1. drop missing observations (R's ``na.omit``);
2. select the stable history among the valid observations before ``start``;
3. OLS fit of the season-trend model on the history (float64, least squares);
4. residuals of every observation from the history start on; ``sigma`` of the history;
5. OLS-MOSUM (or OLS-CUSUM) process over the monitoring observations, its boundary, the
   first crossing;
6. magnitude = median monitoring residual.
"""

from __future__ import annotations

import numpy as np

from ..core.inputs import PERFECT_FIT_RTOL, SINGULAR_PIVOT_TOL, invalid_mask
from .history import select as select_history
from .plan import MonitorPlan
from .result import empty_outputs
from .status import BfastStatus, flag_status


def is_singular(gram: np.ndarray) -> bool:
    """True if the (history) Gram matrix ``X'X`` is numerically rank deficient.

    Columns are equilibrated to unit norm; the squared Cholesky pivots of the result are
    ``1 - R^2`` of each column regressed on the previous ones.
    """
    d = np.sqrt(np.diag(gram))
    if np.any(d == 0):
        return True
    corr = gram / np.outer(d, d)
    try:
        chol = np.linalg.cholesky(corr)
    except np.linalg.LinAlgError:
        return True
    return bool(np.min(np.diag(chol)) ** 2 < SINGULAR_PIVOT_TOL)


def log_plus(x: np.ndarray) -> np.ndarray:
    """strucchange's ``logPlus``: ``log(x)`` for ``x > e``, else 1."""
    return np.where(x > np.e, np.log(np.maximum(x, np.e)), 1.0)


def monitoring_process(residuals: np.ndarray, n: int, sigma: float, plan: MonitorPlan,
                       critval: float) -> tuple[np.ndarray, np.ndarray]:
    """The monitoring process and its boundary at each monitoring observation, from the
    residuals of every observation from the history start on (the ``n`` history ones first)
    and the pixel's critical value.

    OLS-MOSUM: sums of the last ``floor(h n)`` residuals, boundary
    ``critval sqrt(2 logPlus(t / n))``. OLS-CUSUM: sums of all residuals from the history
    start, boundary ``sqrt(x (x - 1) (critval^2 + log(x / (x - 1))))`` with ``x = t / n``.
    Both scaled by ``1 / (sigma sqrt(n))``; ``t`` counts observations from the history start.
    """
    x = np.arange(n + 1, residuals.size + 1) / n
    if plan.cusum:
        sums = np.cumsum(residuals)[n:]
        boundary = np.sqrt(x * (x - 1.0) * (critval**2 + np.log(x / (x - 1.0))))
    else:
        window = int(np.floor(plan.h * n))
        sums = np.lib.stride_tricks.sliding_window_view(residuals, window).sum(axis=1)[n - window + 1 :]
        boundary = critval * np.sqrt(2.0 * log_plus(x))
    return sums / (sigma * np.sqrt(n)), boundary


def monitor_pixel(y: np.ndarray, valid: np.ndarray, plan: MonitorPlan, s: int, critval: float) -> dict:
    """BFAST Monitor of one pixel series ``y`` (length T) for monitoring start ``s`` with
    critical value ``critval``.

    Returns the per-pixel outputs (see :class:`~tscube.bfast.monitor.result.BfastMonitorResult`)
    and, under ``"process"``/``"boundary"``, the MOSUM values and boundary with their
    time indices under ``"monitor_rows"``.
    """
    X = plan.design.matrix
    k = X.shape[1]
    rows = np.flatnonzero(valid)  # FILTERMISSING: indices of the valid observations
    out: dict = {"n_valid": rows.size}
    if rows.size == 0:
        out["status"] = BfastStatus.ALL_MISSING
        return out

    begin = plan.monitor_begin[s]
    candidates = rows[rows < begin]
    monitor = rows[rows >= begin]

    # Stable history: candidates from the selected history start on.
    status = BfastStatus.OK
    if plan.history == "fixed":
        history = candidates[candidates >= plan.history_begin]
    elif plan.history == "all":
        history = candidates
    else:
        first, flagged = select_history(plan.history, X[candidates], y[candidates], plan)
        history = candidates[first:]
        if flagged:
            status = flag_status(plan.history)
    n = history.size
    out["n_history"] = n
    out["n_monitor"] = monitor.size
    if n > 0:
        out["history_start"] = plan.axis.time[history[0]]

    window = int(np.floor(plan.h * n))
    if n <= k or window <= 1:
        out["status"] = BfastStatus.TOO_FEW_HISTORY
        return out
    if monitor.size == 0:
        out["status"] = BfastStatus.NO_MONITORING_DATA
        return out

    # History OLS fit (least squares in float64); season dummies need every season level.
    X_hist, y_hist = X[history], y[history]
    levels = plan.design.season_level
    if levels is not None and np.unique(levels[history]).size < plan.design.n_season_levels:
        out["status"] = BfastStatus.SINGULAR_DESIGN
        return out
    if is_singular(X_hist.T @ X_hist):
        out["status"] = BfastStatus.SINGULAR_DESIGN
        return out
    beta = np.linalg.lstsq(X_hist, y_hist, rcond=None)[0]

    # Residuals of every observation from the history start on (history, then monitoring).
    used = np.concatenate([history, monitor])
    residuals = y[used] - X[used] @ beta
    rss = np.sum(residuals[:n] ** 2)
    sigma = np.sqrt(rss / (n - k))
    out["sigma"] = sigma
    out["rmse"] = np.sqrt(rss / n)
    out["magnitude"] = np.median(residuals[n:])
    expected = np.mean(X[monitor] @ beta)
    out["relative_magnitude"] = out["magnitude"] / expected if expected != 0 else np.nan
    if sigma <= PERFECT_FIT_RTOL * np.max(np.abs(y_hist)):
        out["status"] = BfastStatus.PERFECT_FIT
        return out

    process, boundary = monitoring_process(residuals, n, sigma, plan, critval)

    out["status"] = status
    out["statistic"] = np.max(np.abs(process))
    out["mosum_mean"] = np.mean(process)
    crossing = np.flatnonzero(np.abs(process) > boundary)
    if crossing.size and np.all(np.isfinite(process)):
        out["break_index"] = monitor[crossing[0]]
        out["break_time"] = plan.axis.time[monitor[crossing[0]]]
    if plan.return_process:
        out["monitor_rows"] = monitor
        out["process"] = process
        out["boundary"] = boundary
    return out


def run(values: np.ndarray, plan: MonitorPlan) -> dict[str, np.ndarray]:
    """Run BFAST Monitor on ``values`` of shape ``(T, P)``; outputs are ``(S, P)``."""
    n_dates, n_pixels = values.shape
    missing, is_inf = invalid_mask(values, plan.nodata)
    data = values.astype(np.float64)
    outputs = empty_outputs(plan.n_starts, n_pixels)
    if plan.return_process:
        outputs["process"] = np.full((plan.n_starts, n_dates, n_pixels), np.nan)
        outputs["boundary"] = np.full((plan.n_starts, n_dates, n_pixels), np.nan)
    n_inf = is_inf.sum(axis=0)
    critvals = plan.pixel_critvals(n_pixels)
    outputs["critval"][...] = critvals
    for p in range(n_pixels):
        valid = ~missing[:, p]
        for s in range(plan.n_starts):
            result = monitor_pixel(data[:, p], valid, plan, s, critvals[s, p])
            result["n_inf"] = n_inf[p]
            rows = result.pop("monitor_rows", None)
            for name in ("process", "boundary"):
                series = result.pop(name, None)
                if series is not None:
                    outputs[name][s, rows, p] = series
            for name, value in result.items():
                outputs[name][s, p] = value
    return outputs
