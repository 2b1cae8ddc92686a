"""The result of :func:`tscube.bfast_lite`: the engines' outputs, their named form (xarray
variables, CLI bands) and the result object."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .plan import SELECTIONS, LitePlan
from .status import BfastLiteStatus

#: ``magnitude()``'s statistics of each break, in R's column order.
MAGNITUDE_STATS = ("before", "after", "diff", "rmsd", "mad", "md")


def empty_lite_outputs(n_pixels: int, n_breaks: int, k: int, n_models: int) -> dict[str, np.ndarray]:
    """The engines' output arrays, pixels last, filled with 'nothing found'."""
    nan = np.nan
    return {
        "status": np.zeros(n_pixels, np.int8),
        "n_obs": np.zeros(n_pixels, np.int32),
        "h_obs": np.zeros(n_pixels, np.int32),
        "max_breaks": np.zeros(n_pixels, np.int32),
        "n_breaks": np.zeros(n_pixels, np.int32),
        "pretest_p": np.full(n_pixels, nan),
        "break_index": np.full((n_breaks, n_pixels), -1, np.int64),
        "break_time": np.full((n_breaks, n_pixels), nan),
        "magnitudes": np.full((n_breaks, n_pixels, len(MAGNITUDE_STATS)), nan),
        "coefficients": np.full((n_breaks + 1, n_pixels, k), nan),
        "rss": np.full((n_models, n_pixels), nan),
        "bic": np.full((n_models, n_pixels), nan),
        "lwz": np.full((n_models, n_pixels), nan),
    }


@dataclass
class BfastLiteResult:
    """Result of :func:`tscube.bfast_lite`: every break of every pixel.

    ``B`` below is the largest number of breaks found in any pixel (or ``max_breaks``);
    pixels with fewer breaks are padded with NaN / -1. Arrays are shaped like the pixel
    dimensions, per-break arrays with a leading break axis.

    Attributes
    ----------
    n_breaks : int32, pixels
        Number of breaks chosen (by LWZ, BIC, or the number asked for).
    break_index : int64, (B, pixels)
        Time index of each breakpoint: the **last observation before the break**, as R's
        ``breakpoints`` (the first observation after it is the next valid date). -1 = none.
    break_time : float64, (B, pixels)
        Decimal-year time of that observation (R's ``data_pp$time[breakpoints]``).
    magnitudes : float64, (B, pixels, 6)
        R's ``magnitude(component = "trend")`` per break: the trend line of the segment
        before and after at the break (``before`` at the breakpoint, ``after`` at the next
        observation), ``diff = after - before``, and the RMSD, MAD and MD of the
        difference of the two trend lines over ``interval`` observations either side
        (:data:`MAGNITUDE_STATS` order; see :meth:`magnitude_of`). NaN without a trend.
    magnitude : float64, pixels
        The ``diff`` of the break with the largest ``|diff|`` (R's ``$Magnitude``).
    coefficients : float64, (B + 1, pixels, k)
        OLS coefficients of each segment in R's parametrisation (raw ``trend`` = position
        on the full time grid, 1-based); NaN for aliased columns and missing segments.
        :attr:`intercept` and :attr:`slope` are its first two columns.
    status : int8, pixels
        :class:`BfastLiteStatus` code.
    n_obs, h_obs, max_breaks : int32, pixels
        Valid observations ``n``, minimum segment size in observations ``h``, and the
        largest number of breaks considered (R's ``ceiling(n / h) - 2``, or ``breaks``).
    pretest_p : float64, pixels
        p-value of the OLS-MOSUM pre-test (``level > 0`` only, else NaN).
    rss, bic, lwz : float64, (M + 1, pixels), or None
        RSS and criteria of the best model with m = 0..M breaks (``criteria=True``).
    attrs : dict
        Parameters of the call (``regressors``, ``h``, ``breaks``, ``freq``, ...).
    """

    n_breaks: np.ndarray
    break_index: np.ndarray
    break_time: np.ndarray
    magnitudes: np.ndarray
    magnitude: np.ndarray
    coefficients: np.ndarray
    status: np.ndarray
    n_obs: np.ndarray
    h_obs: np.ndarray
    max_breaks: np.ndarray
    pretest_p: np.ndarray
    rss: np.ndarray | None = None
    bic: np.ndarray | None = None
    lwz: np.ndarray | None = None
    attrs: dict[str, Any] = field(default_factory=dict)

    def magnitude_of(self, stat: str) -> np.ndarray:
        """One magnitude statistic of every break, ``(B, pixels)``: one of
        ``"before", "after", "diff", "rmsd", "mad", "md"``."""
        if stat not in MAGNITUDE_STATS:
            raise ValueError(f"stat must be one of {MAGNITUDE_STATS}, got {stat!r}")
        return self.magnitudes[..., MAGNITUDE_STATS.index(stat)]

    @property
    def intercept(self) -> np.ndarray:
        """Intercept of each segment, ``(B + 1, pixels)``."""
        return self.coefficients[..., 0]

    @property
    def slope(self) -> np.ndarray:
        """Trend slope of each segment per time-grid step, ``(B + 1, pixels)`` (NaN
        without a trend)."""
        names = self.attrs.get("regressors", [])
        if "trend" not in names:
            return np.full(self.coefficients.shape[:-1], np.nan)
        return self.coefficients[..., names.index("trend")]

    @property
    def has_break(self) -> np.ndarray:
        return self.n_breaks > 0

    def status_counts(self) -> dict[str, int]:
        codes, counts = np.unique(self.status, return_counts=True)
        return {BfastLiteStatus(int(c)).name: int(n) for c, n in zip(codes, counts)}

    def plot(self, **kwargs):
        """Quick-look maps (number of breaks, first break time, largest magnitude)."""
        from ._maps import lite_maps

        return lite_maps(self, **kwargs)

    def __repr__(self) -> str:
        shape = self.n_breaks.shape
        return (
            f"BfastLiteResult(pixels={shape}, breaks up to {self.break_index.shape[0]}, "
            f"with a break: {int(np.sum(self.n_breaks > 0))}, status={self.status_counts()})"
        )


def largest_magnitude(magnitudes: np.ndarray, n_breaks: np.ndarray) -> np.ndarray:
    """R's ``$Magnitude``: the ``diff`` of the break with the largest ``|diff|`` (the
    first on ties), per pixel; NaN without breaks. ``magnitudes`` is ``(B, P, 6)``."""
    diff = magnitudes[..., MAGNITUDE_STATS.index("diff")]
    largest = np.full(diff.shape[1], np.nan)
    has = (n_breaks > 0) & np.any(np.isfinite(diff), axis=0)
    if np.any(has):
        pick = np.argmax(np.where(np.isnan(diff[:, has]), -np.inf, np.abs(diff[:, has])), axis=0)
        largest[has] = diff[:, has][pick, np.arange(pick.size)]
    return largest


#: Named per-pixel outputs of BFAST Lite (xarray variables, CLI bands): dtype and the
#: extra dimension ("break": one per break, "segment": one more, "model": m = 0..B).
LITE_OUTPUTS: dict[str, tuple[Any, tuple[str, ...]]] = {
    "n_breaks": (np.int32, ()),
    "status": (np.int8, ()),
    "magnitude": (np.float64, ()),
    "break_time": (np.float64, ("break",)),
    "break_index": (np.int64, ("break",)),
    **{f"magnitude_{stat}": (np.float64, ("break",)) for stat in MAGNITUDE_STATS},
    "intercept": (np.float64, ("segment",)),
    "slope": (np.float64, ("segment",)),
    "n_obs": (np.int32, ()),
    "h_obs": (np.int32, ()),
    "max_breaks": (np.int32, ()),
    "pretest_p": (np.float64, ()),
}
CRITERIA_OUTPUTS = {name: (np.float64, ("model",)) for name in ("rss", "bic", "lwz")}


def named_outputs(raw: dict, plan: LitePlan, criteria: bool = False) -> dict[str, np.ndarray]:
    """Engine outputs -> the arrays of :data:`LITE_OUTPUTS` (pixels last, the full
    ``plan.break_slots`` break axis), plus the criteria on request."""
    out = {name: raw[name] for name in ("n_breaks", "status", "break_time", "break_index", "n_obs", "h_obs",
                                        "max_breaks", "pretest_p")}
    out["magnitude"] = largest_magnitude(raw["magnitudes"], raw["n_breaks"])
    for i, stat in enumerate(MAGNITUDE_STATS):
        out[f"magnitude_{stat}"] = raw["magnitudes"][..., i]
    names = plan.design.names
    out["intercept"] = raw["coefficients"][..., 0]
    out["slope"] = (raw["coefficients"][..., names.index("trend")] if "trend" in names
                    else np.full(raw["coefficients"].shape[:-1], np.nan))
    if criteria:
        out.update({name: raw[name] for name in CRITERIA_OUTPUTS})
    return out


#: CF-style attributes of the BFAST Lite output variables.
VARIABLE_ATTRS = {
    "n_breaks": dict(long_name="number of breaks"),
    "magnitude": dict(long_name="trend change (after - before) of the break with the largest |change|"),
    "break_time": dict(long_name="time of the last observation before each break", units="decimal year"),
    "break_index": dict(long_name="time index of the last observation before each break (-1: none)"),
    "magnitude_before": dict(long_name="trend of the segment before the break, at the break"),
    "magnitude_after": dict(long_name="trend of the segment after the break, at the next observation"),
    "magnitude_diff": dict(long_name="after - before"),
    "magnitude_rmsd": dict(long_name="RMS difference of the two trend lines around the break"),
    "magnitude_mad": dict(long_name="mean absolute difference of the two trend lines around the break"),
    "magnitude_md": dict(long_name="mean difference of the two trend lines around the break"),
    "intercept": dict(long_name="intercept of each segment (R's parametrisation)"),
    "slope": dict(long_name="trend slope of each segment", units="per time-grid step"),
    "n_obs": dict(long_name="valid observations"),
    "h_obs": dict(long_name="minimum segment size", units="observations"),
    "max_breaks": dict(long_name="largest number of breaks considered"),
    "pretest_p": dict(long_name="p-value of the OLS-MOSUM pre-test"),
    "rss": dict(long_name="RSS of the best model with m breaks"),
    "bic": dict(long_name="BIC of the best model with m breaks"),
    "lwz": dict(long_name="LWZ of the best model with m breaks"),
}


def lite_attrs(plan: LitePlan, engine: str) -> dict:
    """The parameters of a call (``engine`` resolved), as the result's ``attrs``."""
    names = plan.design.names
    return dict(
        order=plan.design.order, trend="trend" in names, season=any(n.startswith("season") for n in names),
        regressors=list(names), h=plan.h,
        breaks=SELECTIONS[plan.selection] if SELECTIONS[plan.selection] != "number" else plan.n_breaks_asked,
        max_breaks=plan.max_breaks or None, level=plan.level, magnitude_interval=plan.interval,
        freq=plan.axis.freq, engine=engine,
    )
