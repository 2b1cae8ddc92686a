"""Reference engine of BFAST Lite: plain NumPy, one pixel at a time, written for clarity.

The steps of SPEC-bfastlite: drop missing values; the optional OLS-MOSUM pre-test; the
minimum segment size and R's checks; the segment RSS triangle and the Bai–Perron
dynamic programme (:mod:`tscube.bfast.core.bai_perron`); the number of breaks by criterion;
the segment coefficients and ``magnitude()``.
"""

from __future__ import annotations

import math

import numpy as np

from ..core import bai_perron
from ..core.inputs import PERFECT_FIT_RTOL, invalid_mask
from ..core.ols import fit_in_order_qr
from ..core.rules import largest_number_of_breaks, pretest_bandwidth, pretest_pvalue, segment_size
from .plan import SELECTIONS, LitePlan
from .result import empty_lite_outputs
from .status import OVERFLOW_VALUE, BfastLiteStatus


def pretest(X: np.ndarray, y: np.ndarray, h: float) -> float:
    """p-value of R's OLS-MOSUM pre-test ``sctest(efp(..., type = "OLS-MOSUM"))``; NaN when
    the model fits the series exactly (its residuals are rounding noise, and so would the
    process and the p-value be: a perfect fit, decided before the test)."""
    n = y.size
    beta, _, kept = fit_in_order_qr(X, y)
    e = y - X @ beta
    if not math.sqrt(np.sum(e * e) / (n - X.shape[1])) > PERFECT_FIT_RTOL * np.max(np.abs(y)):
        return math.nan
    sigma = np.std(e, ddof=1) * math.sqrt((n - 1) / (n - int(kept.sum())))
    nh, fraction = pretest_bandwidth(n, h)
    cum = np.concatenate([[0.0], np.cumsum(e)])
    process = (cum[nh:] - cum[: n - nh + 1]) / (sigma * math.sqrt(n))
    return pretest_pvalue(float(np.max(np.abs(process))), fraction)


def r_coefficients(plan: LitePlan, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """OLS coefficients of one segment in R's parametrisation, NaN where aliased."""
    beta, _, kept = fit_in_order_qr(X, y)
    names = plan.design.names
    if "trend" in names and not kept[names.index("trend")]:
        beta[names.index("trend")] = 0.0  # no trend in the fit: the intercept stays as is
    beta = plan.design.r_coefficients(beta)
    beta[~kept] = np.nan
    return beta


def magnitudes(plan: LitePlan, coefs: np.ndarray, breaks: list[int], trend: np.ndarray) -> np.ndarray:
    """R's ``magnitude(component = "trend")``: (before, after, diff, RMSD, MAD, MD) per break."""
    n = trend.size
    names = plan.design.names
    out = np.full((len(breaks), 6), np.nan)
    if "trend" not in names:
        return out
    j = names.index("trend")
    w = int(math.floor(n * plan.interval)) if plan.interval < 1 else int(plan.interval)
    for l, b in enumerate(breaks):
        (a0, b0), (a1, b1) = coefs[l, [0, j]], coefs[l + 1, [0, j]]
        before, after = a0 + b0 * trend[b], a1 + b1 * trend[b + 1]
        rows = slice(max(b - w, 0), min(b + w, n - 1) + 1)
        d = (a1 + b1 * trend[rows]) - (a0 + b0 * trend[rows])
        out[l] = before, after, after - before, np.sqrt(np.mean(d * d)), np.mean(np.abs(d)), np.mean(d)
    return out


def lite_pixel(y_all: np.ndarray, valid: np.ndarray, plan: LitePlan) -> dict:
    """BFAST Lite of one pixel series (length T); returns the per-pixel outputs."""
    rows = np.flatnonzero(valid)
    n = rows.size
    out: dict = {"n_obs": n, "status": BfastLiteStatus.OK, "n_breaks": 0}
    if n == 0:
        out["status"] = BfastLiteStatus.ALL_MISSING
        return out
    X = plan.design.matrix[rows]
    y = y_all[rows].astype(np.float64)
    k = X.shape[1]
    if np.max(np.abs(y)) > OVERFLOW_VALUE:
        out["status"] = BfastLiteStatus.OVERFLOW
        return out
    if plan.level > 0 and n > k and 1 <= pretest_bandwidth(n, plan.h)[0] < n:  # else R fails; the checks below flag it
        out["pretest_p"] = pretest(X, y, plan.h)
        if math.isnan(out["pretest_p"]):
            out["status"] = BfastLiteStatus.PERFECT_FIT
            return out
        if out["pretest_p"] > plan.level:
            out["status"] = BfastLiteStatus.STABLE_BY_PRETEST
            return out
    h = out["h_obs"] = segment_size(n, plan.h)
    if h <= k:
        out["status"] = BfastLiteStatus.SEGMENT_TOO_SHORT
        return out
    if h > n // 2:
        out["status"] = BfastLiteStatus.TOO_FEW_OBSERVATIONS
        return out
    M = largest_number_of_breaks(n, h)
    if M == 0:
        out["status"] = BfastLiteStatus.NO_ROOM_FOR_BREAK
        return out
    if SELECTIONS[plan.selection] == "number":
        M = min(plan.n_breaks_asked, M)
    if plan.max_breaks:
        M = min(M, plan.max_breaks)
    out["max_breaks"] = M

    rss = bai_perron.segment_rss_triangle(X, y, h)
    solutions = bai_perron.optimal_breakpoints(rss, n, h, M)
    totals = np.array([bai_perron.total_rss(rss, s, n) for s in solutions])
    bic, lwz = bai_perron.information_criteria(totals, n, k)
    out["rss"], out["bic"], out["lwz"] = totals, bic, lwz
    if not np.isfinite(totals[0]):
        out["status"] = BfastLiteStatus.OVERFLOW
        return out
    if not math.sqrt(totals[0] / (n - k)) > PERFECT_FIT_RTOL * np.max(np.abs(y)):
        out["status"] = BfastLiteStatus.PERFECT_FIT
        return out
    selection = SELECTIONS[plan.selection]
    m = {"LWZ": lambda: np.argmin(lwz), "BIC": lambda: np.argmin(bic), "RSS": lambda: np.argmin(totals)}.get(
        selection, lambda: M)()
    if not np.isfinite(totals[int(m)]):
        out["status"] = BfastLiteStatus.OVERFLOW
        return out
    breaks = solutions[int(m)]
    out["n_breaks"] = len(breaks)
    out["break_index"] = rows[breaks]
    out["break_time"] = plan.axis.time[rows[breaks]]
    bounds = [-1, *breaks, n - 1]
    coefs = np.array([r_coefficients(plan, X[a + 1 : b + 1], y[a + 1 : b + 1]) for a, b in zip(bounds[:-1], bounds[1:])])
    out["coefficients"] = coefs
    out["magnitudes"] = magnitudes(plan, coefs, breaks, plan.axis.trend[rows])
    return out


def run(values: np.ndarray, plan: LitePlan) -> dict[str, np.ndarray]:
    """Engine entry point: ``values`` (T, P) -> the outputs of :func:`empty_lite_outputs`."""
    _, n_pixels = values.shape
    out = empty_lite_outputs(n_pixels, plan.break_slots, plan.design.k, plan.n_models)
    invalid, _ = invalid_mask(values, plan.nodata)
    for p in range(n_pixels):
        pixel = lite_pixel(values[:, p], ~invalid[:, p], plan)
        for name, value in pixel.items():
            value = np.asarray(value)
            if value.ndim == 0:
                out[name][p] = value
            else:
                out[name][: value.shape[0], p] = value
    return out
