"""The public BFAST Monitor function: validate inputs, build the design once, dispatch."""

from __future__ import annotations

import importlib
from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..timeaxis import TIME_TOL, build_time_axis, format_when, to_decimal_year
from .critval import check_process_type, critical_value
from .design import build_design
from .history import HISTORY_METHODS, ROC_LAMBDA_05
from .plan import MonitorPlan, check_numeric_dtype
from .result import BfastMonitorResult

#: Most regressors a model may have (every engine: the cuda solve keeps k x k in shared
#: memory, the cpu engines' Gram k (k + 1) / 2 sums per pixel; season levels as a 64-bit mask).
MAX_REGRESSORS = 64

#: Engine name -> module implementing ``run(values, plan)``.
ENGINES = {
    "reference": "tscube.bfast._reference",
    "cpu": "tscube.bfast._cpu",
    "cuda": "tscube.bfast._cuda",
}


def _resolve_engine(engine: str, n_values: int) -> str:
    if engine == "auto":
        from ..engines import auto_engine

        return auto_engine(n_values)
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of 'auto', {', '.join(map(repr, ENGINES))}; got {engine!r}")
    return engine


def _as_data(data) -> np.ndarray:
    values = np.asarray(data)
    check_numeric_dtype(values)
    if values.ndim == 0:
        raise ValueError("data must have a time axis first: shape (T, ...), got a scalar")
    return values


def _as_levels(level) -> tuple[float, float]:
    if isinstance(level, (Sequence, np.ndarray)) and not isinstance(level, str):
        levels = [float(v) for v in np.asarray(level, dtype=float).reshape(-1)]
        if len(levels) == 1:
            levels *= 2
        if len(levels) != 2:
            raise ValueError(f"level must be a number or a pair (monitoring, ROC), got {level!r}")
    else:
        levels = [float(level)] * 2
    if not 0 < levels[1] < 1:
        raise ValueError(f"ROC level must be in (0, 1), got {levels[1]}")
    return levels[0], levels[1]


def _as_starts(start, axis) -> tuple[np.ndarray, bool]:
    """Monitoring starts as decimal years; ``True`` when ``start`` was a list of starts."""
    is_list = isinstance(start, (list, np.ndarray, pd.Index))
    values = list(start) if is_list else [start]
    if not values:
        raise ValueError("start is an empty list")
    starts = np.array([to_decimal_year(v, axis, "start") for v in values])
    first, last = axis.time[0], axis.time[-1]
    for value, t in zip(values, starts):
        if t <= first + TIME_TOL:
            raise ValueError(
                f"start {format_when(value)} (= {t:.6f}) is at or before the first date ({first:.6f}): "
                "there is no history period to fit the model on"
            )
        if t > last + TIME_TOL:
            raise ValueError(
                f"start {format_when(value)} (= {t:.6f}) is after the last date ({last:.6f}): "
                "there is nothing to monitor"
            )
    return starts, is_list


def bfast_monitor(
    data,
    dates=None,
    start=None,
    *,
    order: int = 3,
    trend: bool = True,
    season: bool = False,
    type: str = "OLS-MOSUM",
    h: float = 0.25,
    level=0.05,
    end: float = 10,
    history="ROC",
    freq=None,
    nodata=None,
    return_process: bool = False,
    engine: str = "auto",
    **xarray_options,
) -> BfastMonitorResult:
    """Detect the first structural break in each pixel's time series (R ``bfastmonitor``).

    Per pixel, fits the season-trend model ``response ~ trend + harmon`` (OLS; or
    ``+ season`` dummies) on a stable history period before ``start``, then runs the
    OLS-MOSUM (or OLS-CUSUM) monitoring test over every observation from ``start`` on,
    reporting the first boundary crossing and the median residual. Results equal R's
    ``bfast::bfastmonitor`` (bfast 1.7.2). Missing values are dropped per pixel, like R's
    ``na.omit``.

    Parameters
    ----------
    data : array_like, shape (T, ...)
        Time first, any trailing pixel shape; float or integer. NaN, inf and ``nodata``
        are missing.
    dates : array_like, length T
        Acquisition dates, strictly increasing: datetimes (``datetime64``, ``datetime``,
        ``pandas.DatetimeIndex``, ISO strings) or decimal years (then ``freq`` is
        required). See :mod:`tscube.timeaxis` for how dates map onto R's time grid.
    start : date, decimal year, ``(year, cycle)`` tuple, or a list of those
        First date of the monitoring period. Must lie after the first and not after the
        last date. A tuple ``(year, cycle)`` is R's ``c(year, cycle)``; a *list* (or array)
        computes every start in one call (results gain a leading axis).
    order : int
        Harmonic order of the seasonal model (R: ``min(freq, order)``; 0 = no harmonics).
    trend : bool
        Include the linear trend (``response ~ trend + harmon``; False: ``~ harmon``).
    season : bool
        Seasonal dummies (R's ``response ~ trend + season``: an ordered factor of the
        cycle, ``freq - 1`` polynomial-contrast columns; for crops and irregular
        phenology). Needs ``order=0`` (dummies and harmonics are collinear). A pixel whose
        history misses some cycle positions cannot fit them: SINGULAR_DESIGN.
    type : {"OLS-MOSUM", "OLS-CUSUM"}
        Monitoring process (R's ``type``): moving sums of ``floor(h * n)`` residuals, or
        the cumulative sum of all residuals from the history start, each against its
        boundary (docs/bfast_monitor.md).
    h : float in (0, 1]
        MOSUM bandwidth as a fraction of the history size ``n``: window ``floor(h * n)``
        observations (OLS-CUSUM: only the "too few observations" check uses it).
    level : float or (float, float)
        Significance of the monitoring test, or a pair (monitoring, ROC) as R's ``level``.
        OLS-MOSUM: interpolated in R's table for 0.001-0.05; any other level in (0, 1)
        is simulated (see ``end``). OLS-CUSUM: any level in (0, 1), R's formula.
    end : float
        Monitoring horizon of the OLS-MOSUM critical value, in history sizes (does not
        truncate monitoring, as R). R's table has 2, 4, 6, 8, 10 (with h = 0.25, 0.5, 1);
        any other ``h``/``end``/``level`` gets a critical value simulated once and cached
        on disk (:mod:`tscube.bfast.critval`, seconds per new ``(h, end)``).
    history : "ROC" (default, as R), "BP", "all", date or decimal year
        Stable history, selected per pixel among the valid observations before ``start``:
        by the reverse-ordered CUSUM test ("ROC", at the second ``level``), after the last
        Bai–Perron breakpoint ("BP", minimum segment 6k observations, breaks by BIC), all
        of them ("all"), or those from a given date on.
    freq : int, optional
        Observations per year of the regular grid (23 for MODIS 16-day, 12 for monthly).
        Required for decimal-year dates; datetimes default to R's daily grid (365).
    nodata : number, optional
        Value marking missing observations (e.g. -3000 in int16 MODIS NDVI).
    return_process : bool
        Also return the monitoring process and its boundary, shaped like ``data``.
    engine : {"auto", "reference", "cpu", "cuda"}
        Implementation; all give the same results. "auto" picks the fastest available.
    **xarray_options
        Only for an ``xarray.DataArray`` ``data`` (dates from its ``time`` coordinate,
        ``dates=None``; returns an ``xarray.Dataset``, lazily for dask input):
        ``client``, ``memory``, ``time_dim``; see :func:`tscube.xr.bfast_monitor_xarray`.

    Returns
    -------
    BfastMonitorResult
        Per-pixel break time/index, status code, magnitude, MOSUM mean, ...; see its
        docstring for the exact meaning of each output and :class:`BfastStatus` for codes.

    Raises
    ------
    ValueError, TypeError
        For caller errors: shapes, dtypes, unsorted/duplicate dates, start outside the
        dates, unsupported ``h``/``end``/``level``/``history``/``engine``.
    """
    from ..xarray_blocks import is_xarray

    if is_xarray(data):
        from ._xarray import bfast_monitor_xarray

        if start is None:
            raise TypeError("bfast_monitor() missing the monitoring start: call bfast_monitor(da, start=...)")
        return bfast_monitor_xarray(
            data, start, dates=dates, order=order, trend=trend, season=season, type=type, h=h, level=level,
            end=end, history=history,
            freq=freq, nodata=nodata, return_process=return_process, engine=engine, **xarray_options)
    if xarray_options:
        raise TypeError(f"bfast_monitor() got options only valid for xarray input: {', '.join(xarray_options)}")
    if dates is None or start is None:
        raise TypeError("bfast_monitor() needs dates and start for NumPy data (only an xarray.DataArray carries its dates)")
    values = _as_data(data)
    axis = build_time_axis(dates, freq)
    if values.shape[0] != len(axis):
        raise ValueError(f"data has {values.shape[0]} dates on its first axis but dates has {len(axis)}")
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or order < 0:
        raise ValueError(f"order must be a non-negative integer, got {order!r}")
    if nodata is not None:
        if isinstance(nodata, bool) or not isinstance(nodata, (int, float, np.integer, np.floating)):
            raise TypeError(f"nodata must be a number, got {nodata!r}")
        nodata = float(nodata)
    check_process_type(type)
    level_monitor, level_roc = _as_levels(level)
    critval = critical_value(h, end, level_monitor, type)
    starts, many_starts = _as_starts(start, axis)

    if isinstance(history, str):
        if history not in HISTORY_METHODS:
            raise ValueError(f"history must be one of {HISTORY_METHODS} or a date, got {history!r}")
        method, history_time = history, None
    else:
        method = "fixed"
        history_time = to_decimal_year(history, axis, "history")
        if np.any(history_time >= starts - TIME_TOL):
            raise ValueError(f"history {format_when(history)} must lie before every monitoring start")
    history_begin = 0 if history_time is None else int(np.searchsorted(axis.time, history_time - TIME_TOL))

    design = build_design(axis, order, bool(trend), bool(season))
    if design.k > MAX_REGRESSORS:
        raise ValueError(
            f"the model has {design.k} regressors ({'season dummies' if season else 'harmonics'} at freq = {axis.freq}); "
            f"at most {MAX_REGRESSORS} are supported: aggregate the series to a coarser grid"
        )
    plan = MonitorPlan(
        axis=axis,
        design=design,
        process_type=type,
        starts=starts,
        monitor_begin=np.searchsorted(axis.time, starts - TIME_TOL).astype(np.int64),
        history=method,
        history_begin=history_begin,
        h=float(h),
        critval=critval,
        level_roc=level_roc,
        roc_lambda=ROC_LAMBDA_05,
        nodata=nodata,
        return_process=bool(return_process),
    )

    pixel_shape = values.shape[1:]
    # Engines get one C-contiguous (T, P) layout: a view for contiguous input, one copy
    # for a strided slice (which the kernels would read slowly, and numba would compile
    # a second time for its 'A' layout).
    flat = np.ascontiguousarray(values.reshape(values.shape[0], -1))
    engine = _resolve_engine(engine, flat.size)
    outputs = importlib.import_module(ENGINES[engine]).run(flat, plan)

    lead = (plan.n_starts,) if many_starts else ()
    shaped = {}
    for name, array in outputs.items():
        array = array if many_starts else array[0]
        if name in ("process", "boundary"):
            shaped[name] = array.reshape(lead + values.shape)
        else:
            shaped[name] = array.reshape(lead + pixel_shape)
    attrs = dict(
        start=starts if many_starts else float(starts[0]),
        order=plan.design.order,
        trend=bool(trend),
        season=bool(season),
        type=type,
        regressors=list(plan.design.names),
        h=float(h),
        level=(level_monitor, level_roc),
        end=end,
        critval=critval,
        history=history if isinstance(history, str) else float(history_time),
        freq=axis.freq,
        engine=engine,
    )
    return BfastMonitorResult(**shaped, attrs=attrs)
