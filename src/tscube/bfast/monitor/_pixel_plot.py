"""One pixel's BFAST Monitor plotted: its series, the stable history, the fit, the
monitoring process and its boundary (on the primitives of :mod:`tscube.figures`)."""

from __future__ import annotations

import numpy as np

from ...figures import BREAK_RED, new_figure, pixel_series
from ...timeaxis import TIME_TOL, build_time_axis
from ..core.design import build_design
from ._array import bfast_monitor_array
from .status import MONITORED, BfastStatus


def plot_pixel(data, dates=None, start=None, *, x=None, y=None, coords: str = "auto", engine: str = "reference",
               title: str | None = None, figsize=(10, 6.5), **kwargs):
    """BFAST Monitor of one pixel, plotted like R's ``plot.bfastmonitor`` plus its MOSUM process.

    Parameters
    ----------
    data : array_like or xarray.DataArray
        ``(T,)`` series, ``(T, rows, cols)`` cube, or a DataArray with a ``time``
        dimension (dates from its coordinate).
    dates : array_like, optional
        Dates of the time axis (required for NumPy data).
    start : date, decimal year or (year, cycle)
        Start of monitoring.
    x, y : number
        The pixel: column and row indices, or map coordinates (see ``coords``).
    coords : {"auto", "pixel", "map"}
        How to read ``x``/``y`` (see :func:`locate_pixel`).
    engine : str
        Engine of :func:`tscube.bfast_monitor` (one pixel: "reference" is fastest to start).
    **kwargs
        Other arguments of :func:`tscube.bfast_monitor` (``freq``, ``order``, ``trend``,
        ``season``, ``type``, ``h``, ``level``, ``end``, ``history``, ``nodata``), with its
        defaults.
    title : str, optional
        Figure title (default: pixel, status, break date, magnitude).
    figsize : (float, float)
        Figure size in inches.

    Returns
    -------
    matplotlib.figure.Figure
        Top axes: observations of the unused history (light grey), the stable history
        (green) and the monitoring period (black); missing dates as grey ticks at the
        bottom; the season-trend model fitted on the stable history (blue; dashed where
        it predicts the monitoring period); the start of monitoring (black dashed) and
        the detected break (red dashed). Bottom axes: the monitoring process (MOSUM or
        CUSUM) and its +-boundary. Lines carry gids ``"fit"``, ``"start"``, ``"break"``, ``"process"``,
        ``"boundary"``; the BFAST Monitor result is ``fig.tscube_result``.
    """
    from matplotlib.transforms import blended_transform_factory

    if start is None:
        raise TypeError("plot_pixel() needs the monitoring start: plot_pixel(data, dates, start, x=..., y=...)")
    series, dates, label = pixel_series(data, dates, x, y, coords)
    if "return_process" in kwargs:
        raise TypeError("plot_pixel() computes the MOSUM process itself: do not pass return_process")
    result = bfast_monitor_array(series[:, None], dates, start, return_process=True, engine=engine, **kwargs)
    nodata = kwargs.get("nodata")
    axis = build_time_axis(dates, kwargs.get("freq"))
    t = axis.time
    values = series.astype(np.float64)
    valid = np.isfinite(values) if nodata is None else np.isfinite(values) & (values != nodata)
    begin = int(np.searchsorted(t, float(result.attrs["start"]) - TIME_TOL))
    status = BfastStatus(int(result.status[0]))
    history_start = float(result.history_start[0])
    in_history = valid & (np.arange(t.size) < begin)
    stable = in_history & (t >= history_start - TIME_TOL) if np.isfinite(history_start) else np.zeros_like(valid)
    monitoring = valid & (np.arange(t.size) >= begin)

    fig, (ax, ax_mosum) = new_figure(1, figsize, rows=2, sharex=True, gridspec_kw={"height_ratios": [2.2, 1]})
    fig.tscube_result = result
    ax.plot(t[valid], values[valid], color="0.75", lw=0.8, zorder=1)
    unused = in_history & ~stable
    ax.plot(t[unused], values[unused], "o", ms=3.5, color="0.65",
            label="history (not used)" if unused.any() else None, zorder=2)
    ax.plot(t[stable], values[stable], "o", ms=3.5, color="#1b7837", label="stable history", zorder=2)
    ax.plot(t[monitoring], values[monitoring], "o", ms=3.5, color="black", label="monitoring", zorder=2)
    missing = ~valid
    if missing.any():
        ax.plot(t[missing], np.full(int(missing.sum()), 0.03), "|", ms=9, color="0.55",
                transform=blended_transform_factory(ax.transData, ax.transAxes),
                label=f"missing ({int(missing.sum())})", zorder=2)

    if status in MONITORED or status == BfastStatus.PERFECT_FIT:
        design = build_design(axis, int(result.attrs["order"]), bool(result.attrs["trend"]), bool(result.attrs["season"]))
        X = design.matrix
        beta = np.linalg.lstsq(X[stable], values[stable], rcond=None)[0]
        first = int(np.flatnonzero(stable)[0])
        fitted = X @ beta
        (fit_line,) = ax.plot(t[first:begin], fitted[first:begin], color="#2166ac", lw=1.8,
                              label="season-trend fit", zorder=3)
        fit_line.set_gid("fit")
        ax.plot(t[max(begin - 1, first):], fitted[max(begin - 1, first):], color="#2166ac", lw=1.5, ls="--",
                label="prediction", zorder=3)

    start_time = float(result.attrs["start"])
    break_time = float(result.break_time[0])
    for axes in (ax, ax_mosum):
        (line,) = axes.plot([start_time, start_time], [0, 1], color="black", ls="--", lw=1.2,
                            transform=blended_transform_factory(axes.transData, axes.transAxes),
                            label="start of monitoring" if axes is ax else None)
        line.set_gid("start")
        if np.isfinite(break_time):
            (line,) = axes.plot([break_time, break_time], [0, 1], color=BREAK_RED, ls="--", lw=1.8,
                                transform=blended_transform_factory(axes.transData, axes.transAxes),
                                label=f"break ({break_time:.3f})" if axes is ax else None)
            line.set_gid("break")
    ax.set_ylabel("value")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)

    process = result.process[:, 0]
    boundary = result.boundary[:, 0]
    shown = np.isfinite(process)
    kind = result.attrs["type"]
    if shown.any():
        (line,) = ax_mosum.plot(t[shown], process[shown], "-o", ms=2.5, color="black", lw=1, label=f"{kind[4:]} process")
        line.set_gid("process")
        (line,) = ax_mosum.plot(t[shown], boundary[shown], color=BREAK_RED, lw=1.2, label="boundary")
        line.set_gid("boundary")
        ax_mosum.plot(t[shown], -boundary[shown], color=BREAK_RED, lw=1.2)
        ax_mosum.axhline(0, color="0.6", lw=0.8)
    else:
        ax_mosum.text(0.5, 0.5, f"no {kind[4:]} process (status {status.name})", ha="center", va="center",
                      transform=ax_mosum.transAxes, color="0.4")
    ax_mosum.set_ylabel(kind)
    ax_mosum.set_xlabel("time (decimal year)")
    ax_mosum.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
    if title is None:
        title = f"BFAST Monitor, pixel {label}: status {status.name}"
        if np.isfinite(break_time):
            title += f", break at {break_time:.3f}"
        if np.isfinite(result.magnitude[0]):
            title += f", magnitude {float(result.magnitude[0]):.4g}"
    fig.suptitle(title)
    return fig
