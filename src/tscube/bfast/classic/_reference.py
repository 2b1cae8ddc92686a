"""Reference engine of classic BFAST: plain NumPy, one pixel at a time, written for
clarity (SPEC-bfast.md; R ``bfast::bfast``).

Per pixel: the periodic STL start (:mod:`.start`, for all pixels at once); then, until
both break sets repeat or ``max_iter``: the trend step (pre-test, Bai–Perron on
``Vt ~ ti``, segment lines), the seasonal step (the same on the seasonal model), and
at the end the magnitudes of the trend breaks. The Bai–Perron triangle, programme and
BIC are :mod:`tscube.bfast.core.bai_perron`'s; the intervals :mod:`.confint`'s.
"""

from __future__ import annotations

import math

import numpy as np

from ..core import bai_perron
from ..core.inputs import invalid_mask
from ..core.ols import fit_in_order_qr
from ..core.rules import MOSUM_PRETEST_H, MOSUM_PRETEST_P, MOSUM_PRETEST_TABLE, largest_number_of_breaks, segment_size
from .confint import break_interval
from .plan import TEST_TYPES, ClassicPlan
from ..core.rules_cpu import pretest_pvalue
from .result import empty_classic_outputs
from .start import start_seasonal
from .status import OVERFLOW_VALUE, BfastClassicStatus


class _Stop(Exception):
    """R stops (an error): the pixel gets this status and no result."""

    def __init__(self, status: BfastClassicStatus):
        self.status = status


def _segments(breaks: list[int], n: int) -> list[slice]:
    bounds = [-1, *breaks, n - 1]
    return [slice(a + 1, b + 1) for a, b in zip(bounds[:-1], bounds[1:])]


def _ols(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    return fit_in_order_qr(X, y)[0]


def _joint_fit(X: np.ndarray, y: np.ndarray, breaks: list[int]) -> np.ndarray:
    """Fitted values of R's ``y ~ (harmonics) %in% breakfactor(bp)``: one intercept for
    the whole series, the harmonic columns per segment."""
    n, k = X.shape
    parts = [np.ones((n, 1))]
    for seg in _segments(breaks, n):
        block = np.zeros((n, k - 1))
        block[seg] = X[seg, 1:]
        parts.append(block)
    design = np.hstack(parts)
    return design @ _ols(design, y)


def component_step(X: np.ndarray, y: np.ndarray, plan: ClassicPlan, which: int) -> dict:
    """One component's step of the iteration (trend ``which=0``, season ``1``): the
    pre-test, the breakpoints if it is significant, the fitted component, the intervals."""
    n, k = X.shape
    beta, _, kept = fit_in_order_qr(X, y)
    p = pretest_pvalue(y - X @ beta, n, k, int(kept.sum()), float(np.max(np.abs(y))), plan.h,
                       TEST_TYPES.index(plan.test), MOSUM_PRETEST_TABLE, MOSUM_PRETEST_H, MOSUM_PRETEST_P)
    if math.isnan(p):
        raise _Stop(BfastClassicStatus.PERFECT_FIT)
    step = {"pretest_p": p, "breaks": [], "confint": np.empty((0, 2))}
    if p <= plan.level[which]:
        h = segment_size(n, plan.h)
        if h <= k:
            raise _Stop(BfastClassicStatus.SEGMENT_TOO_SHORT)
        M = largest_number_of_breaks(n, h)
        asked = plan.breaks[which]
        if asked is not None:
            M = min(asked, M)  # R: "requested number of breaks too large", clamped
        rss = bai_perron.segment_rss_triangle(X, y, h)
        solutions = bai_perron.optimal_breakpoints(rss, n, h, M)
        if asked is not None:
            step["breaks"] = solutions[M]
        else:
            totals = np.array([bai_perron.total_rss(rss, s, n) for s in solutions])
            # R's quirk: where BIC picks no break, bfast() asks breakpoints(bp, breaks = NULL),
            # which takes length(NA) = 1 break, and so do the fit and the intervals
            step["breaks"] = solutions[max(int(np.argmin(bai_perron.information_criteria(totals, n, k)[0])), 1)]
    breaks = step["breaks"]
    if not breaks:
        step["fitted"] = X @ beta
        return step
    segments = _segments(breaks, n)
    betas = [_ols(X[seg], y[seg]) for seg in segments]
    fitted = np.concatenate([X[seg] @ b for seg, b in zip(segments, betas)])
    sigma2 = float(np.sum((y - fitted) ** 2)) / n
    confint = np.empty((len(breaks), 2))
    for r, b in enumerate(breaks):
        before, after = segments[r], segments[r + 1]
        delta = betas[r + 1] - betas[r]
        break_interval(b, sigma2, float(np.mean((X[before] @ delta) ** 2)), float(np.mean((X[after] @ delta) ** 2)),
                       confint[r])
    step["confint"] = confint
    step["fitted"] = _joint_fit(X, y, breaks) if which == 1 and plan.season_intercept else fitted
    return step


def classic_pixel(y_all: np.ndarray, valid: np.ndarray, start: np.ndarray, plan: ClassicPlan) -> dict:
    """Classic BFAST of one pixel series (length T) from its start seasonal ``start``;
    returns the per-pixel outputs (break indices 0-based on the valid observations)."""
    rows = np.flatnonzero(valid)
    y = y_all[rows].astype(np.float64)
    n = rows.size
    if np.max(np.abs(y)) > OVERFLOW_VALUE:
        raise _Stop(BfastClassicStatus.OVERFLOW)
    X_trend = plan.trend_design[rows]
    X_season = None if plan.season_design is None else plan.season_design[rows]
    seasonal = np.zeros(n) if X_season is None else start[rows].astype(np.float64)
    history: list[tuple[list, list]] = []
    trend_step = season_step = None
    previous = ([], [])
    converged = False
    while len(history) < plan.max_iter:
        trend_step = component_step(X_trend, y - seasonal, plan, 0)
        trend = trend_step["fitted"]
        if X_season is not None:
            season_step = component_step(X_season, y - trend, plan, 1)
            seasonal = season_step["fitted"]
        current = (trend_step["breaks"], season_step["breaks"] if season_step else [])
        history.append(current)
        if current == previous:
            converged = True
            break
        previous = current
    out = {"rows": rows, "n_iter": len(history), "history": history, "trend": trend, "seasonal": seasonal,
           "status": BfastClassicStatus.OK if converged else BfastClassicStatus.MAX_ITER, "trend_step": trend_step,
           "season_step": season_step}
    breaks = trend_step["breaks"]
    mags = np.array([(trend[b], trend[b + 1], trend[b + 1] - trend[b]) for b in breaks]).reshape(-1, 3)
    out["magnitudes"] = mags
    out["largest"] = int(np.argmax(np.abs(mags[:, 2]))) if breaks else -1
    return out


def _full_index(index, rows: np.ndarray):
    """0-based positions on the valid observations -> positions on the full series; an
    interval bound beyond the data extends from the first or last valid date."""
    index = np.asarray(index, dtype=np.float64)
    n = rows.size
    inside = np.clip(np.nan_to_num(index, nan=0).astype(np.int64), 0, n - 1)
    full = rows[inside] + (index - inside)
    return np.where(np.isnan(index), np.nan, full)


def run(values: np.ndarray, plan: ClassicPlan, iterations: bool = False) -> dict[str, np.ndarray]:
    """Engine entry point: ``values`` (T, P) -> the outputs of :func:`empty_classic_outputs`."""
    n_times, n_pixels = values.shape
    out = empty_classic_outputs(n_times, n_pixels, plan.break_slots, plan.max_iter if iterations else 0)
    invalid, _ = invalid_mask(values, plan.nodata)
    start, status = start_seasonal(values, invalid, plan.freq, "reference")
    out["status"][:] = status
    out["n_obs"][:] = n_times - invalid.sum(axis=0)
    for p in np.flatnonzero(status == BfastClassicStatus.OK):
        try:
            pixel = classic_pixel(values[:, p], ~invalid[:, p], start[:, p], plan)
        except _Stop as stop:
            out["status"][p] = stop.status
            continue
        rows = pixel["rows"]
        out["status"][p] = pixel["status"]
        out["n_iter"][p] = pixel["n_iter"]
        for name, step in (("trend", pixel["trend_step"]), ("season", pixel["season_step"])):
            if step is None:
                continue
            m = len(step["breaks"])
            out[f"n_{name}_breaks"][p] = m
            out[f"{name}_break_index"][:m, p] = rows[step["breaks"]]
            out[f"{name}_confint"][:m, p] = _full_index(step["confint"], rows)
            out[f"{name}_pretest_p"][p] = step["pretest_p"]
        m = len(pixel["trend_step"]["breaks"])
        out["magnitudes"][:m, p] = pixel["magnitudes"]
        if m:
            out["magnitude"][p] = pixel["magnitudes"][pixel["largest"], 2]
            out["magnitude_index"][p] = rows[pixel["trend_step"]["breaks"][pixel["largest"]]]
        else:
            out["magnitude"][p] = 0.0
        y = values[rows, p].astype(np.float64)
        out["trend"][rows, p] = pixel["trend"]
        out["seasonal"][rows, p] = pixel["seasonal"]
        out["remainder"][rows, p] = y - pixel["trend"] - pixel["seasonal"]
        if iterations:
            for i, (trend_breaks, season_breaks) in enumerate(pixel["history"]):
                out["iter_trend_break_index"][i, : len(trend_breaks), p] = rows[trend_breaks]
                out["iter_season_break_index"][i, : len(season_breaks), p] = rows[season_breaks]
    return out
