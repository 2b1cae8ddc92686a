"""The public BFAST Monitor function: NumPy data to :func:`bfast_monitor_array`, an
``xarray.DataArray`` to :func:`bfast_monitor_xarray`."""

from __future__ import annotations

from ...xarray_blocks import is_xarray
from ._array import bfast_monitor_array
from ._xarray import bfast_monitor_xarray
from .result import BfastMonitorResult


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
    calibrate: bool = False,
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
        on disk (:mod:`tscube.bfast.monitor.critval`, seconds per new ``(h, end)``).
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
    calibrate : bool
        Give each pixel the critical value whose false-alarm probability is ``level`` for
        its own design (its history and monitoring dates, the model, ``h``, the process;
        Gaussian i.i.d. errors), instead of R's limit-theory value, which flags far more
        stable pixels than ``level`` when the model has a trend. The boundary's shape is
        R's; the ``critval`` output holds each pixel's value. ROC/BP histories are
        calibrated on the selected history. Default False: R's results
        (docs/bfast_monitor.md, "Calibrated monitoring").
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
    if is_xarray(data):
        if start is None:
            raise TypeError("bfast_monitor() missing the monitoring start: call bfast_monitor(da, start=...)")
        return bfast_monitor_xarray(
            data, start, dates=dates, order=order, trend=trend, season=season, type=type, h=h, level=level,
            end=end, history=history, freq=freq, nodata=nodata, return_process=return_process,
            calibrate=calibrate, engine=engine, **xarray_options)
    if xarray_options:
        raise TypeError(f"bfast_monitor() got options only valid for xarray input: {', '.join(xarray_options)}")
    if dates is None or start is None:
        raise TypeError("bfast_monitor() needs dates and start for NumPy data (only an xarray.DataArray carries its dates)")
    return bfast_monitor_array(
        data, dates, start, order=order, trend=trend, season=season, type=type, h=h, level=level, end=end,
        history=history, freq=freq, nodata=nodata, return_process=return_process, calibrate=calibrate,
        engine=engine)
