"""BFAST Lite: every break of every pixel (R ``bfast::bfastlite``), the public function.

Per pixel: the season-trend model of ``bfastpp`` on the valid observations, Bai–Perron
breakpoints over the whole series with minimum segment ``h``, the number of breaks chosen
by LWZ (default) or BIC, R's ``magnitude()`` and the segment coefficients. Semantics:
SPEC-bfastlite (R 4.2.2, bfast 1.7.2, strucchangeRcpp).
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..timeaxis import TimeAxis, build_time_axis
from .design import Design, build_design
from .lite_result import MAGNITUDE_STATS, BfastLiteResult
from .monitor import _as_data

#: Engine name -> module implementing ``run(values, plan)``.
LITE_ENGINES = {
    "reference": "tscube.bfast._lite_reference",
    "cpu": "tscube.bfast._lite_cpu",
}

#: How the number of breaks is chosen (``LitePlan.selection``).
SELECTIONS = ("LWZ", "BIC", "RSS", "all", "number")

#: strucchange's ``sc.me`` rows for one process column (k = 1): critical values of the
#: OLS-MOSUM test at p = 0.10, 0.05, 0.025, 0.01 for h = 0.05, 0.10, ..., 0.50.
MOSUM_PRETEST_TABLE = np.array([
    [0.7552, 0.8017, 0.8444, 0.8977],
    [0.9809, 1.0483, 1.1119, 1.1888],
    [1.1211, 1.2059, 1.2845, 1.3767],
    [1.2170, 1.3158, 1.4053, 1.5131],
    [1.2811, 1.3920, 1.4917, 1.6118],
    [1.3258, 1.4448, 1.5548, 1.6863],
    [1.3514, 1.4789, 1.5946, 1.7339],
    [1.3628, 1.4956, 1.6152, 1.7572],
    [1.3610, 1.4976, 1.6210, 1.7676],
    [1.3751, 1.5115, 1.6341, 1.7808],
])
MOSUM_PRETEST_H = np.arange(1, 11) * 0.05
MOSUM_PRETEST_P = np.array([0.10, 0.05, 0.025, 0.01])


@dataclass(frozen=True)
class LitePlan:
    """Validated parameters of one ``bfast_lite`` call, shared by all pixels.

    ``h`` is a fraction of ``n`` (``h < 1``) or a number of observations; ``selection``
    indexes :data:`SELECTIONS`, ``n_breaks_asked`` is the number for ``"number"``;
    ``max_breaks`` caps the number of breaks considered (0 = no cap). ``break_slots`` is
    the most breaks any pixel can get (the engines' output size).
    """

    axis: TimeAxis
    design: Design
    h: float
    selection: int
    n_breaks_asked: int
    max_breaks: int
    level: float
    interval: float
    nodata: float | None
    break_slots: int

    @property
    def n_models(self) -> int:
        return self.break_slots + 1


def segment_size(n: int, h: float) -> int:
    """R's minimum segment size in observations: ``floor(n * h)`` for a fraction."""
    return int(math.floor(n * h)) if h < 1 else int(h)


def largest_number_of_breaks(n: int, h_obs: int) -> int:
    """R's ``ceiling(n / h) - 2``."""
    return -(-n // h_obs) - 2


def pretest_pvalue(statistic: float, h: float) -> float:
    """strucchange's ``pvalue.efp`` of an OLS-MOSUM statistic (one process column)."""
    h = min(max(h, MOSUM_PRETEST_H[0]), MOSUM_PRETEST_H[-1])
    crit = [np.interp(h, MOSUM_PRETEST_H, MOSUM_PRETEST_TABLE[:, c]) for c in range(4)]
    return float(np.interp(statistic, np.r_[0.0, crit], np.r_[1.0, MOSUM_PRETEST_P]))


def pretest_bandwidth(n: int, h: float) -> tuple[int, float]:
    """Window and bandwidth of R's pre-test ``efp(h = h)``: an ``h > 1`` becomes the
    fraction ``round(h) / n``; the window is ``floor(n * fraction)`` in IEEE arithmetic."""
    fraction = round(h) / n if h > 1 else h
    return int(math.floor(n * fraction)), fraction


def _break_slots(n_dates: int, h: float, k: int, plan_cap: int) -> int:
    """The most breaks any pixel of up to ``n_dates`` observations can get."""
    most = 0
    for n in range(1, n_dates + 1):
        h_obs = segment_size(n, h)
        if h_obs > k and h_obs <= n // 2:
            most = max(most, largest_number_of_breaks(n, h_obs))
    return min(most, plan_cap) if plan_cap > 0 else most


def _check_h(h) -> float:
    if isinstance(h, bool) or not isinstance(h, (int, float, np.integer, np.floating)) or not h > 0:
        raise ValueError(f"h must be a fraction in (0, 1) or a whole number of observations, got {h!r}")
    if h >= 1 and float(h) != int(h):
        raise ValueError(f"h >= 1 is a number of observations and must be whole, got {h!r}")
    return float(h)


def _check_breaks(breaks) -> tuple[int, int]:
    if isinstance(breaks, str):
        if breaks not in SELECTIONS[:4]:
            raise ValueError(f"breaks must be 'LWZ', 'BIC', 'RSS', 'all' or a whole number, got {breaks!r}")
        return SELECTIONS.index(breaks), 0
    if isinstance(breaks, bool) or not isinstance(breaks, (int, np.integer, float, np.floating)) or float(breaks) != int(breaks):
        raise ValueError(f"breaks must be 'LWZ', 'BIC', 'RSS', 'all' or a whole number, got {breaks!r}")
    return SELECTIONS.index("number"), max(int(breaks), 1)  # R: below 1 becomes 1


def bfast_lite(
    data,
    dates=None,
    *,
    order: int = 3,
    trend: bool = True,
    season: bool = False,
    h: float = 0.15,
    breaks="LWZ",
    max_breaks: int | None = None,
    level: float = 0.0,
    magnitude_interval: float = 0.1,
    criteria: bool = False,
    freq=None,
    nodata=None,
    engine: str = "auto",
    **xarray_options,
) -> BfastLiteResult:
    """Find every structural break in each pixel's whole time series (R ``bfastlite``).

    Per pixel: missing values dropped (R's ``na.omit``), the season-trend model
    ``response ~ trend + harmon`` (or ``+ season`` dummies), Bai–Perron breakpoints with
    at least ``h`` observations per segment, the number of breaks chosen by ``breaks``,
    and per break R's ``magnitude()``; equal to R ``bfast::bfastlite`` (bfast 1.7.2).

    Parameters
    ----------
    data : array_like, shape (T, ...)
        Time first, any pixel shape; float or integer. NaN, inf and ``nodata`` are missing.
    dates : array_like, length T
        Datetimes or decimal years (then ``freq`` is required), strictly increasing.
    order : int
        Harmonic order (R: ``min(freq, order)``); 0 = no harmonics.
    trend : bool
        Include the linear trend.
    season : bool
        Seasonal dummies (R's ``response ~ trend + season``, an ordered factor of the cycle:
        ``freq - 1`` columns) instead of harmonics; requires ``order=0``.
    h : float or int
        Minimum segment size: a fraction of the valid observations (``floor(n * h)``) or,
        if ``>= 1``, a whole number of observations.
    breaks : "LWZ" (default), "BIC", "RSS", "all", or int
        How many breaks: the minimum of the LWZ or BIC criterion, the smallest RSS, the
        most possible, or a fixed number (clamped to 1..M as R does).
    max_breaks : int, optional
        Consider at most this many breaks (caps R's ``ceiling(n / h) - 2``); the output's
        break axis then has this length.
    level : float
        If > 0, R's OLS-MOSUM pre-test: pixels whose p-value exceeds ``level`` get no
        breaks (status ``STABLE_BY_PRETEST``) and no Bai–Perron run.
    magnitude_interval : float
        Window of the RMSD/MAD/MD magnitudes: a fraction of ``n`` observations either side
        of the break, or a number of observations if ``>= 1`` (R's ``interval``).
    criteria : bool
        Also return the RSS, BIC and LWZ of the best model for every number of breaks.
    freq : int, optional
        Observations per year of the regular grid (required for decimal-year dates).
    nodata : number, optional
        Value marking missing observations.
    engine : {"auto", "reference", "cpu"}
        Implementation; all give the same results ("auto" = "cpu").
    **xarray_options
        Only for an ``xarray.DataArray`` ``data``: ``client``, ``memory``, ``time_dim``
        (see :func:`tscube.xr.bfast_lite_xarray`); returns an ``xarray.Dataset``.

    Returns
    -------
    BfastLiteResult
        Breaks, their times and magnitudes, segment coefficients and per-pixel status
        (:class:`BfastLiteStatus`).
    """
    from ..xarray_blocks import is_xarray

    options = dict(order=order, trend=trend, season=season, h=h, breaks=breaks, max_breaks=max_breaks,
                   level=level, magnitude_interval=magnitude_interval, criteria=criteria, freq=freq,
                   nodata=nodata, engine=engine)
    if is_xarray(data):
        from ._xarray import bfast_lite_xarray

        return bfast_lite_xarray(data, dates=dates, **options, **xarray_options)
    engine = resolve_engine(engine)
    if xarray_options:
        raise TypeError(f"bfast_lite() got options only valid for xarray input: {', '.join(xarray_options)}")
    if dates is None:
        raise TypeError("bfast_lite() needs dates for NumPy data (only an xarray.DataArray carries its dates)")
    values = _as_data(data)
    axis = build_time_axis(dates, freq)
    if values.shape[0] != len(axis):
        raise ValueError(f"data has {values.shape[0]} dates on its first axis but dates has {len(axis)}")
    plan = make_lite_plan(axis, **{key: options[key] for key in options if key not in ("freq", "engine", "criteria")})
    flat = np.ascontiguousarray(values.reshape(values.shape[0], -1))
    outputs = run_engine(flat, plan, engine)
    return shape_result(outputs, plan, values.shape[1:], criteria=bool(criteria), engine=engine)


def make_lite_plan(axis: TimeAxis, *, order, trend, season, h, breaks, max_breaks, level,
                   magnitude_interval, nodata) -> LitePlan:
    """Validate the parameters and build the design once."""
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or order < 0:
        raise ValueError(f"order must be a non-negative integer, got {order!r}")
    h = _check_h(h)
    selection, n_breaks_asked = _check_breaks(breaks)
    if max_breaks is not None and (isinstance(max_breaks, bool) or not isinstance(max_breaks, (int, np.integer)) or max_breaks < 1):
        raise ValueError(f"max_breaks must be a positive integer, got {max_breaks!r}")
    if not (isinstance(level, (int, float, np.integer, np.floating)) and 0 <= level < 1):
        raise ValueError(f"level must be in [0, 1) (0 = no pre-test), got {level!r}")
    if not (isinstance(magnitude_interval, (int, float, np.integer, np.floating)) and magnitude_interval > 0):
        raise ValueError(f"magnitude_interval must be positive, got {magnitude_interval!r}")
    if nodata is not None:
        if isinstance(nodata, bool) or not isinstance(nodata, (int, float, np.integer, np.floating)):
            raise TypeError(f"nodata must be a number, got {nodata!r}")
        nodata = float(nodata)
    design = build_design(axis, int(order), bool(trend), bool(season))
    cap = int(max_breaks or 0)
    if selection == SELECTIONS.index("number"):
        cap = min(cap, n_breaks_asked) if cap else n_breaks_asked
    return LitePlan(
        axis=axis, design=design, h=h, selection=selection, n_breaks_asked=n_breaks_asked,
        max_breaks=int(max_breaks or 0), level=float(level), interval=float(magnitude_interval),
        nodata=nodata, break_slots=_break_slots(len(axis), h, design.k, cap),
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


def resolve_engine(engine: str) -> str:
    """The engine to run: ``"auto"`` is ``"cpu"``; an unknown name is refused."""
    if engine == "auto":
        return "cpu"
    if engine not in LITE_ENGINES:
        raise ValueError(f"engine must be one of 'auto', {', '.join(map(repr, LITE_ENGINES))}; got {engine!r}")
    return engine


def run_engine(flat: np.ndarray, plan: LitePlan, engine: str) -> dict:
    """Run one engine on ``flat`` (T, P)."""
    return importlib.import_module(LITE_ENGINES[resolve_engine(engine)]).run(flat, plan)


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


def shape_result(outputs: dict, plan: LitePlan, pixel_shape: tuple, *, criteria: bool, engine: str) -> BfastLiteResult:
    """Engine outputs (pixels flattened, break axis of ``plan.break_slots``) -> result
    shaped like the pixels, the break axis cut to the most breaks found (or max_breaks)."""
    n_found = int(outputs["n_breaks"].max(initial=0))
    B = min(plan.max_breaks or n_found, plan.break_slots)

    def pixels(array, lead=0):
        return array.reshape(array.shape[:lead] + pixel_shape + array.shape[lead + 1:])

    result = BfastLiteResult(
        n_breaks=pixels(outputs["n_breaks"]),
        break_index=pixels(outputs["break_index"][:B], 1),
        break_time=pixels(outputs["break_time"][:B], 1),
        magnitudes=pixels(outputs["magnitudes"][:B], 1),
        magnitude=pixels(largest_magnitude(outputs["magnitudes"], outputs["n_breaks"])),
        coefficients=pixels(outputs["coefficients"][: B + 1], 1),
        status=pixels(outputs["status"]),
        n_obs=pixels(outputs["n_obs"]),
        h_obs=pixels(outputs["h_obs"]),
        max_breaks=pixels(outputs["max_breaks"]),
        pretest_p=pixels(outputs["pretest_p"]),
        attrs=lite_attrs(plan, engine),
    )
    if criteria:
        M = int(outputs["max_breaks"].max(initial=0))
        for name in CRITERIA_OUTPUTS:
            setattr(result, name, pixels(outputs[name][: M + 1], 1))
    return result
