"""STL of NumPy arrays: the parameters, an engine, the result."""

from __future__ import annotations

import numpy as np

from ..engines import load, register, resolve
from ._layout import decompose_via_rows
from ._params import resolve_params
from .result import StlResult

#: The engines of ``stl``: the cpu engine's module implements ``decompose_cube`` (the
#: time-first cube in, the outputs written in place), the others ``decompose`` (rows of
#: series, through :func:`decompose_via_rows`).
ENGINES = register("stl", {
    "reference": f"{__package__}._reference",
    "cpu": f"{__package__}._cpu",
    "cuda": f"{__package__}._cuda",
}).modules
DAYS_PER_YEAR = 365.25


def _decimal_years(dates, n_times: int) -> np.ndarray:
    """Dates as float years: datetime-like as 1970 + days since 1970-01-01 / 365.25."""
    values = np.asarray(dates)
    if values.ndim != 1 or len(values) != n_times:
        raise ValueError(f"dates must be 1-D with length T = {n_times}, got shape {values.shape}")
    if values.dtype.kind == "O":
        try:
            values = values.astype("datetime64[ns]")
        except (TypeError, ValueError) as err:
            raise TypeError("dates must be datetime-like or decimal years (floats)") from err
    if values.dtype.kind == "M":
        if np.isnat(values).any():
            raise ValueError("dates must not contain NaT")
        days = (values - np.datetime64("1970-01-01", "ns")) / np.timedelta64(1, "D")
        years = 1970.0 + days / DAYS_PER_YEAR
    elif values.dtype.kind in "iuf":
        years = values.astype(np.float64)
    else:
        raise TypeError(f"dates must be datetime-like or decimal years, got dtype {values.dtype}")
    if not np.isfinite(years).all():
        raise ValueError("dates must be finite")
    if np.ptp(years) == 0.0:
        raise ValueError("dates must not all be equal")
    return years


def _prepare(data, nodata):
    array = np.asarray(data)
    if array.dtype.kind not in "iufb" or array.dtype.kind == "b":
        raise TypeError(f"data must be numeric, got dtype {array.dtype}")
    if array.ndim < 1:
        raise ValueError("data must have a time axis first: shape (T, ...)")
    out_dtype = np.float32 if array.dtype == np.float32 else np.float64
    return array, out_dtype


def stl_array(data, period, *, seasonal=7, trend=None, low_pass=None, seasonal_deg=1, trend_deg=1,
              low_pass_deg=None, seasonal_jump=None, trend_jump=None, low_pass_jump=None, robust=False,
              inner_iter=None, outer_iter=None, flavor="statsmodels", dates=None, nodata=None,
              engine="auto") -> StlResult:
    """:func:`tscube.stl` of a NumPy ``data`` ``(T, ...)`` (same parameters)."""
    values, out_dtype = _prepare(data, nodata)
    n_times = values.shape[0]
    pixel_shape = values.shape[1:]
    params = resolve_params(n_times, period, seasonal, trend, low_pass, seasonal_deg,
                            trend_deg, low_pass_deg, seasonal_jump, trend_jump, low_pass_jump,
                            robust, inner_iter, outer_iter, flavor)
    times = (np.arange(n_times, dtype=np.float64) if dates is None
             else _decimal_years(dates, n_times))
    values = values.reshape(n_times, -1)
    engine = resolve("stl", engine, values.size)
    module = load("stl", engine)
    if engine == "cpu":  # reads the time-first data and writes the outputs in place
        outputs = module.decompose_cube(values, nodata, params, times, out_dtype)
    else:
        outputs = decompose_via_rows(module.decompose, values, nodata, params, times, out_dtype)
    (seasonal_t, trend_t, remainder_t, weights_t), slope, amplitude, status = outputs

    def to_cube(component):
        return component.reshape((n_times,) + pixel_shape)

    return StlResult(
        seasonal=to_cube(seasonal_t), trend=to_cube(trend_t), remainder=to_cube(remainder_t),
        weights=to_cube(weights_t),
        trend_slope=slope.reshape(pixel_shape).astype(out_dtype, copy=False),
        seasonal_amplitude=amplitude.reshape(pixel_shape).astype(out_dtype, copy=False),
        status=status.astype(np.int8).reshape(pixel_shape), params=params, engine=engine)
