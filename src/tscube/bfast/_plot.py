"""Quick looks of BFAST Monitor: break-date and magnitude maps, and one pixel's series,
fit and MOSUM process (on the primitives of :mod:`tscube.figures`)."""

from __future__ import annotations

import numpy as np

from ..figures import (FLAGGED_GREY, NO_BREAK_GREY, _figure, _grey_layer, _grey_legend, _label_axes, _map,
                       _pixel_series, _pyplot, _status_map, _symmetric_limit, _year_colours)
from ..timeaxis import TIME_TOL, build_time_axis
from .design import build_design
from .monitor import bfast_monitor
from .result import MONITORED, BfastStatus


def break_maps(result, *, title: str = "BFAST Monitor", start_index: int = 0, figsize=(11, 4.5)):
    """Break-date map and magnitude map of a BFAST Monitor result over a 2-D pixel grid.

    Parameters
    ----------
    result : BfastMonitorResult or xarray.Dataset
        In memory, or read back from a result file (:func:`read_result`).
    title : str
        Prefix of the panel titles.
    start_index : int
        Which start of a multi-start result to map.
    figsize : (float, float)
        Figure size in inches.

    Returns
    -------
    matplotlib.figure.Figure
        Two axes: the year of the first break (one discrete colour per year; light grey:
        no break, dark grey: status not OK) and the magnitude (median monitoring
        residual; diverging colours centred on 0, dark grey: status not OK). Each has a
        colour bar and a title.
    """
    from matplotlib.colors import BoundaryNorm

    plt = _pyplot()
    status = _status_map(result, start_index)
    break_time = _map(result, "break_time", start_index).astype(np.float64)
    magnitude = _map(result, "magnitude", start_index).astype(np.float64)
    ok = np.isin(status, [int(s) for s in MONITORED])
    has_break = ok & np.isfinite(break_time)

    fig, (ax_time, ax_mag) = _figure(2, figsize)
    _grey_layer(ax_time, ~ok, ok & ~has_break)
    if has_break.any():
        years = np.floor(break_time[has_break] + 1e-9).astype(int)
        first, last = int(years.min()), int(years.max())
        n_years = last - first + 1
        cmap = _year_colours(n_years)
        norm = BoundaryNorm(np.arange(first, last + 2), cmap.N)
        image = ax_time.imshow(np.ma.masked_where(~has_break, np.floor(break_time + 1e-9)), cmap=cmap, norm=norm,
                               interpolation="nearest", zorder=1)
        colorbar = fig.colorbar(image, ax=ax_time, shrink=0.85)
        step = max(1, int(np.ceil(n_years / 12)))
        colorbar.set_ticks(np.arange(first, last + 1, step) + 0.5)
        colorbar.set_ticklabels([str(y) for y in range(first, last + 1, step)])
        colorbar.set_label("year of the first break")
    else:
        empty = plt.cm.ScalarMappable(cmap=_year_colours(1))
        fig.colorbar(empty, ax=ax_time, shrink=0.85, label="year of the first break (none found)")
    n_break = int(has_break.sum())
    ax_time.set_title(f"{title}: year of first break ({n_break:,} pixels)")
    _grey_legend(ax_time, [("no break", NO_BREAK_GREY), ("missing / flagged", FLAGGED_GREY)])

    _grey_layer(ax_mag, ~ok | ~np.isfinite(magnitude))
    shown = np.where(ok, magnitude, np.nan)
    limit = _symmetric_limit(shown)
    image = ax_mag.imshow(np.ma.masked_invalid(shown), cmap="RdBu", vmin=-limit, vmax=limit,
                          interpolation="nearest", zorder=1)
    fig.colorbar(image, ax=ax_mag, shrink=0.85, extend="both",
                 label="magnitude (median monitoring residual, data units)")
    ax_mag.set_title(f"{title}: magnitude")
    _grey_legend(ax_mag, [("missing / flagged", FLAGGED_GREY)])
    for ax in (ax_time, ax_mag):
        _label_axes(ax)
    return fig


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
    series, dates, label = _pixel_series(data, dates, x, y, coords)
    if "return_process" in kwargs:
        raise TypeError("plot_pixel() computes the MOSUM process itself: do not pass return_process")
    result = bfast_monitor(series[:, None], dates, start, return_process=True, engine=engine, **kwargs)
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

    fig, (ax, ax_mosum) = _figure(1, figsize, rows=2, sharex=True, gridspec_kw={"height_ratios": [2.2, 1]})
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
            (line,) = axes.plot([break_time, break_time], [0, 1], color="#d7301f", ls="--", lw=1.8,
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
        (line,) = ax_mosum.plot(t[shown], boundary[shown], color="#d7301f", lw=1.2, label="boundary")
        line.set_gid("boundary")
        ax_mosum.plot(t[shown], -boundary[shown], color="#d7301f", lw=1.2)
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


def _break_stack(result, name: str) -> np.ndarray:
    """A per-break output ``(B, rows, cols)`` of a BFAST Lite result (in memory or a Dataset)."""
    if hasattr(result, "data_vars"):
        if name in result:
            return np.asarray(result[name].transpose("break", ...).values, dtype=np.float64)
        bands = []  # read back from a GeoTIFF: one band per break, NAME_1, NAME_2, ...
        while f"{name}_{len(bands) + 1}" in result:
            bands.append(np.asarray(result[f"{name}_{len(bands) + 1}"].values, dtype=np.float64))
        return np.stack(bands) if bands else np.empty((0,) + np.shape(result["status"]))
    if name.startswith("magnitude_"):
        return np.asarray(result.magnitude_of(name[len("magnitude_"):]), dtype=np.float64)
    return np.asarray(getattr(result, name), dtype=np.float64)


def lite_maps(result, *, title: str = "BFAST Lite", figsize=(15, 4.5)):
    """Maps of a BFAST Lite result over a 2-D pixel grid: number of breaks, year of the
    largest break, and its magnitude.

    Parameters
    ----------
    result : BfastLiteResult or xarray.Dataset
        In memory, or read back from a result file (:func:`read_result`).
    title : str
        Prefix of the panel titles.
    figsize : (float, float)
        Figure size in inches.

    Returns
    -------
    matplotlib.figure.Figure
        Three axes: the number of breaks (discrete colours), the year of the break with
        the largest trend change (light grey: no break), and that change (R's
        ``$Magnitude``, diverging colours centred on 0); dark grey: status not OK.
    """
    from matplotlib.colors import BoundaryNorm

    plt = _pyplot()
    status = _status_map(result, 0)
    ok = status == 0
    n_breaks = np.where(ok, _map(result, "n_breaks", 0).astype(np.float64), np.nan)
    magnitude = np.where(ok, _map(result, "magnitude", 0).astype(np.float64), np.nan)
    diff = _break_stack(result, "magnitude_diff")
    times = _break_stack(result, "break_time")
    largest_time = np.full(status.shape, np.nan)
    has = ok & np.any(np.isfinite(diff), axis=0) if diff.size else np.zeros_like(ok)
    if has.any():
        pick = np.argmax(np.where(np.isfinite(diff), np.abs(diff), -1.0), axis=0)
        largest_time = np.where(has, np.take_along_axis(times, pick[None], axis=0)[0], np.nan)

    fig, (ax_n, ax_time, ax_mag) = _figure(3, figsize)
    _grey_layer(ax_n, ~ok)
    most = int(np.nanmax(n_breaks)) if np.isfinite(n_breaks).any() else 0
    cmap = plt.get_cmap("viridis", most + 1)
    image = ax_n.imshow(np.ma.masked_invalid(n_breaks), cmap=cmap, norm=BoundaryNorm(np.arange(-0.5, most + 1), cmap.N),
                        interpolation="nearest", zorder=1)
    fig.colorbar(image, ax=ax_n, shrink=0.85, ticks=np.arange(most + 1), label="breaks")
    ax_n.set_title("number of breaks")

    _grey_layer(ax_time, ~ok, ok & ~np.isfinite(largest_time))
    if np.isfinite(largest_time).any():
        years = np.floor(largest_time + 1e-9)
        first, last = int(np.nanmin(years)), int(np.nanmax(years))
        cmap = _year_colours(last - first + 1)
        image = ax_time.imshow(np.ma.masked_invalid(years), cmap=cmap, norm=BoundaryNorm(np.arange(first, last + 2), cmap.N),
                               interpolation="nearest", zorder=1)
        colorbar = fig.colorbar(image, ax=ax_time, shrink=0.85)
        step = max(1, int(np.ceil((last - first + 1) / 12)))
        colorbar.set_ticks(np.arange(first, last + 1, step) + 0.5)
        colorbar.set_ticklabels([str(y) for y in range(first, last + 1, step)])
        colorbar.set_label("year of the largest break")
    ax_time.set_title("year of the largest break")
    _grey_legend(ax_time, [("no break", NO_BREAK_GREY), ("missing / flagged", FLAGGED_GREY)])

    _grey_layer(ax_mag, ~ok, ok & ~np.isfinite(magnitude))
    limit = _symmetric_limit(magnitude)
    image = ax_mag.imshow(np.ma.masked_invalid(magnitude), cmap="RdBu", vmin=-limit, vmax=limit,
                          interpolation="nearest", zorder=1)
    fig.colorbar(image, ax=ax_mag, shrink=0.85, extend="both", label="trend change at the break (data units)")
    ax_mag.set_title("magnitude of the largest break")
    _grey_legend(ax_mag, [("no break", NO_BREAK_GREY), ("missing / flagged", FLAGGED_GREY)])
    for ax in (ax_n, ax_time, ax_mag):
        _label_axes(ax)
    fig.suptitle(f"{title}: {int(np.nansum(n_breaks)):,} breaks in {int(np.sum(n_breaks > 0)):,} pixels")
    return fig


def plot_lite_pixel(data, dates=None, *, x=None, y=None, coords: str = "auto", engine: str = "reference",
                    title: str | None = None, figsize=(10, 4.5), **kwargs):
    """BFAST Lite of one pixel: its series, the season-trend model of every segment, the
    trend lines and the breaks (like R's ``plot.bfastlite``).

    Parameters are those of :func:`plot_pixel` (no ``start``); ``**kwargs`` go to
    :func:`tscube.bfast_lite` (``freq``, ``order``, ``season``, ``h``, ``breaks``, ...).

    Returns
    -------
    matplotlib.figure.Figure
        Observations (black), missing dates as grey ticks, each segment's fitted model
        (blue, gid ``"fit"``) and trend line (dashed, gid ``"trend"``), and each break
        (red dashed at the last observation before it, gid ``"break"``). The BFAST Lite
        result is ``fig.tscube_result``.
    """
    from matplotlib.transforms import blended_transform_factory

    from .lite import bfast_lite

    series, dates, label = _pixel_series(data, dates, x, y, coords)
    result = bfast_lite(series[:, None], dates, engine=engine, **kwargs)
    axis = build_time_axis(dates, kwargs.get("freq"))
    t = axis.time
    values = series.astype(np.float64)
    nodata = kwargs.get("nodata")
    valid = np.isfinite(values) if nodata is None else np.isfinite(values) & (values != nodata)
    fig, (ax,) = _figure(1, figsize)
    fig.tscube_result = result
    ax.plot(t[valid], values[valid], "-o", ms=3, lw=0.6, color="black", label="observations", zorder=2)
    if (~valid).any():
        ax.plot(t[~valid], np.full(int((~valid).sum()), 0.03), "|", ms=9, color="0.55",
                transform=blended_transform_factory(ax.transData, ax.transAxes),
                label=f"missing ({int((~valid).sum())})", zorder=2)
    m = int(result.n_breaks[0])
    status = int(result.status[0])
    if status == 0:
        design = build_design(axis, int(result.attrs["order"]), bool(result.attrs["trend"]),
                              bool(result.attrs["season"])).matrix
        rows = np.flatnonzero(valid)
        breaks = [int(np.searchsorted(rows, b)) for b in result.break_index[:m, 0]]
        bounds = [-1, *breaks, rows.size - 1]
        slope = result.slope[:, 0]
        for s, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
            seg = rows[a + 1 : b + 1]
            beta = np.linalg.lstsq(design[seg], values[seg], rcond=None)[0]
            (line,) = ax.plot(t[seg], design[seg] @ beta, color="#2166ac", lw=1.6,
                              label="season-trend fit" if s == 0 else None, zorder=3)
            line.set_gid("fit")
            if np.isfinite(slope[s]):
                trend = result.intercept[s, 0] + slope[s] * axis.trend[seg]
                (line,) = ax.plot(t[seg], trend, color="#2166ac", lw=1.2, ls="--",
                                  label="trend" if s == 0 else None, zorder=3)
                line.set_gid("trend")
        for l, when in enumerate(result.break_time[:m, 0]):
            (line,) = ax.plot([when, when], [0, 1], color="#d7301f", ls="--", lw=1.6,
                              transform=blended_transform_factory(ax.transData, ax.transAxes),
                              label="break" if l == 0 else None)
            line.set_gid("break")
    ax.set_xlabel("time (decimal year)")
    ax.set_ylabel("value")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
    if title is None:
        from .lite_result import BfastLiteStatus

        title = f"BFAST Lite, pixel {label}: {m} break{'s' if m != 1 else ''}"
        if status:
            title += f" (status {BfastLiteStatus(status).name})"
        elif m:
            title += f", largest change {float(result.magnitude[0]):.4g}"
    fig.suptitle(title)
    return fig
