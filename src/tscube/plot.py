"""Quick-look plots of tscube results (matplotlib, no screen needed).

* :func:`break_maps`: BFAST Monitor break-date map (one discrete colour per year) and
  magnitude map (diverging colours centred on 0);
* :func:`stl_maps`: STL trend-slope and seasonal-amplitude maps;
* :func:`result_maps`: whichever of the two fits a result;
* :func:`plot_pixel`: one pixel's series, fitted season-trend model, monitoring start,
  break, and the MOSUM process with its boundary (like R's ``plot.bfastmonitor``).

Maps take in-memory results (:class:`~tscube.bfast.BfastMonitorResult`,
:class:`~tscube.stl.StlResult`) and :class:`xarray.Dataset` results, also those read
back from result files with :func:`read_result`. Pixels whose status is not OK
(missing, too few observations, ...) are dark grey; pixels without a break light grey.
Every function returns the matplotlib figure; save it with ``fig.savefig(path)``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["break_maps", "plot_pixel", "read_result", "result_maps", "stl_maps"]

#: Colour of pixels whose status is not OK (missing, flagged) and of pixels without a break.
FLAGGED_GREY = "0.45"
NO_BREAK_GREY = "0.86"


def _pyplot():
    """matplotlib.pyplot, on the Agg backend unless pyplot is already in use or the session is interactive."""
    import sys

    import matplotlib

    if "matplotlib.pyplot" not in sys.modules and not _interactive():
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _interactive() -> bool:
    import sys

    return "ipykernel" in sys.modules or hasattr(sys, "ps1")


def _figure(n_panels: int, figsize, *, rows: int = 1, **kwargs):
    plt = _pyplot()
    if rows == 1:
        fig, axes = plt.subplots(1, n_panels, figsize=figsize, constrained_layout=True, **kwargs)
    else:
        fig, axes = plt.subplots(rows, 1, figsize=figsize, constrained_layout=True, **kwargs)
    return fig, np.atleast_1d(axes)


# --------------------------------------------------------------------------------------
# result maps


def read_result(path):
    """A result file (``.tif``, ``.nc``, ``.zarr``) as an :class:`xarray.Dataset` of maps.

    GeoTIFF bands become variables named by their band descriptions; the ``tscube_*``
    tags become attrs (``tscube_function`` tells BFAST Monitor from STL results).
    """
    import xarray as xr

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"result {str(path)!r} does not exist")
    suffix = path.suffix.lower()
    if suffix == ".zarr" or path.is_dir():
        return xr.open_zarr(path, decode_coords="all").load()
    if suffix in (".nc", ".nc4", ".netcdf"):
        with xr.open_dataset(path, decode_coords="all") as ds:
            return ds.load()
    if suffix in (".tif", ".tiff"):
        import rioxarray

        bands = rioxarray.open_rasterio(path, masked=True).load()
        names = bands.attrs.get("long_name")
        names = [names] if isinstance(names, str) else list(names or [])
        if len(names) != bands.sizes["band"]:
            names = [f"band{i + 1}" for i in range(bands.sizes["band"])]
        attrs = {k: v for k, v in bands.attrs.items() if k not in ("long_name", "_FillValue", "scale_factor",
                                                                     "add_offset")}
        variables = {name: bands.isel(band=i, drop=True) for i, name in enumerate(names)}
        for variable in variables.values():
            variable.attrs = {}
        return xr.Dataset(variables, attrs=attrs)
    raise ValueError(f"result {path.name}: unsupported file type {suffix!r} (use .tif, .nc or .zarr)")


def _function_of(result) -> str:
    """``"bfast_monitor"`` or ``"stl"``: which algorithm made ``result``."""
    attrs = getattr(result, "attrs", {}) or {}
    name = attrs.get("tscube_function") or attrs.get("tscube_tscube_function")
    if name in ("bfast_monitor", "stl"):
        return name
    names = set(getattr(result, "data_vars", {}) or {}) or set(vars(result) if hasattr(result, "__dict__") else ())
    if type(result).__name__ == "StlResult" or {"trend_slope", "seasonal_amplitude"} <= names:
        return "stl"
    if type(result).__name__ == "BfastMonitorResult" or "break_time" in names:
        return "bfast_monitor"
    raise ValueError("result is neither a BFAST Monitor nor an STL result (no break_time or trend_slope variable)")


def _map(result, name: str, start_index: int) -> np.ndarray:
    """The 2-D map ``name`` of ``result`` (first/selected start of a multi-start result)."""
    value = result[name] if hasattr(result, "data_vars") else getattr(result, name)
    if hasattr(value, "dims"):
        if "start" in value.dims:
            value = value.isel(start=start_index)
        extra = [d for d in value.dims if d not in (value.dims[-2:])]
        if extra:
            raise ValueError(f"{name} has dims {value.dims}: expected a 2-D pixel grid")
        array = np.asarray(value.values)
    else:
        array = np.asarray(value)
        if array.ndim == 3:
            array = array[start_index]
    if array.ndim != 2:
        raise ValueError(f"maps need a 2-D pixel grid, got {name} of shape {array.shape}")
    return array


def _status_map(result, start_index: int) -> np.ndarray:
    status = _map(result, "status", start_index)
    if np.issubdtype(status.dtype, np.floating):  # read back from a float GeoTIFF
        status = np.where(np.isfinite(status), status, 1).astype(np.int64)
    return status


def _grey_layer(ax, flagged: np.ndarray, no_break: np.ndarray | None = None) -> None:
    """Paint ``flagged`` pixels dark grey and ``no_break`` pixels light grey, under the data."""
    from matplotlib.colors import to_rgba

    layer = np.zeros(flagged.shape + (4,))
    if no_break is not None:
        layer[no_break] = to_rgba(NO_BREAK_GREY)
    layer[flagged] = to_rgba(FLAGGED_GREY)
    ax.imshow(layer, interpolation="nearest", zorder=0)


def _grey_legend(ax, entries: list[tuple[str, str]]) -> None:
    from matplotlib.patches import Patch

    ax.legend(handles=[Patch(facecolor=c, edgecolor="0.2", label=label) for label, c in entries],
              loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=len(entries), fontsize="small", frameon=False)


def _year_colours(n: int):
    """``n`` distinct, legible colours (qualitative up to 20, else sampled from a rainbow map)."""
    plt = _pyplot()
    from matplotlib.colors import ListedColormap

    if n <= 10:
        return ListedColormap(plt.get_cmap("tab10").colors[:n])
    if n <= 20:
        return ListedColormap(plt.get_cmap("tab20").colors[:n])
    return ListedColormap(plt.get_cmap("turbo")(np.linspace(0.05, 0.95, n)))


def _symmetric_limit(values: np.ndarray) -> float:
    finite = np.abs(values[np.isfinite(values)])
    if not finite.size:
        return 1.0
    limit = float(np.percentile(finite, 98))
    return limit if limit > 0 else float(finite.max()) or 1.0


def _label_axes(ax) -> None:
    ax.set_xlabel("column")
    ax.set_ylabel("row")


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
    ok = (status == 0) | (status == 6)
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


def stl_maps(result, *, title: str = "STL", figsize=(11, 4.5)):
    """Trend-slope and seasonal-amplitude maps of an STL result over a 2-D pixel grid.

    Parameters
    ----------
    result : StlResult or xarray.Dataset
        In memory (pixel shape 2-D), or read back from a result file (:func:`read_result`).
    title : str
        Prefix of the panel titles.
    figsize : (float, float)
        Figure size in inches.

    Returns
    -------
    matplotlib.figure.Figure
        Two axes: the OLS slope of the trend (diverging colours centred on 0; per year
        when dates were given) and the seasonal amplitude (peak-to-trough range of the
        mean cycle); series whose status is not OK are dark grey. Each has a colour bar.
    """
    status = _status_map(result, 0)
    slope = _map(result, "trend_slope", 0).astype(np.float64)
    amplitude = _map(result, "seasonal_amplitude", 0).astype(np.float64)
    ok = status == 0

    fig, (ax_slope, ax_amp) = _figure(2, figsize)
    shown = np.where(ok, slope, np.nan)
    _grey_layer(ax_slope, ~np.isfinite(shown))
    limit = _symmetric_limit(shown)
    image = ax_slope.imshow(np.ma.masked_invalid(shown), cmap="BrBG", vmin=-limit, vmax=limit,
                            interpolation="nearest", zorder=1)
    per = "per year" if hasattr(result, "data_vars") else "per year; per time step without dates"
    fig.colorbar(image, ax=ax_slope, shrink=0.85, extend="both", label=f"trend slope (data units {per})")
    ax_slope.set_title(f"{title}: trend slope")

    shown = np.where(ok, amplitude, np.nan)
    _grey_layer(ax_amp, ~np.isfinite(shown))
    finite = shown[np.isfinite(shown)]
    top = float(np.percentile(finite, 98)) if finite.size else 1.0
    image = ax_amp.imshow(np.ma.masked_invalid(shown), cmap="viridis", vmin=0, vmax=top or 1.0,
                          interpolation="nearest", zorder=1)
    fig.colorbar(image, ax=ax_amp, shrink=0.85, extend="max", label="seasonal amplitude (data units)")
    ax_amp.set_title(f"{title}: seasonal amplitude")
    for ax in (ax_slope, ax_amp):
        _grey_legend(ax, [("missing / flagged", FLAGGED_GREY)])
        _label_axes(ax)
    return fig


def result_maps(result, **kwargs):
    """:func:`break_maps` or :func:`stl_maps`, whichever fits ``result``."""
    if _function_of(result) == "stl":
        kwargs.setdefault("title", "STL")
        kwargs.pop("start_index", None)
        return stl_maps(result, **kwargs)
    return break_maps(result, **kwargs)


# --------------------------------------------------------------------------------------
# one pixel


def _is_integral(value) -> bool:
    try:
        return float(value) == int(float(value))
    except (TypeError, ValueError, OverflowError):
        return False


def locate_pixel(da, x, y, coords: str = "auto") -> tuple[int, int, str]:
    """Row and column of the pixel at ``x``, ``y`` of a ``(time, y, x)`` DataArray.

    ``coords="pixel"``: ``x`` is the column and ``y`` the row index. ``"map"``: map
    coordinates of the grid (the nearest pixel; must lie inside the grid). ``"auto"``:
    pixel indices when both are integers inside the grid, otherwise map coordinates.
    Returns ``(row, col, how)`` with ``how`` the interpretation used.
    """
    if coords not in ("auto", "pixel", "map"):
        raise ValueError(f"coords must be 'auto', 'pixel' or 'map', got {coords!r}")
    y_dim, x_dim = da.dims[-2], da.dims[-1]
    n_rows, n_cols = da.sizes[y_dim], da.sizes[x_dim]
    as_pixels = coords == "pixel" or (
        coords == "auto" and _is_integral(x) and _is_integral(y) and 0 <= float(x) < n_cols and 0 <= float(y) < n_rows)
    if as_pixels:
        if not (_is_integral(x) and _is_integral(y)):
            raise ValueError(f"pixel indices must be integers, got x={x!r}, y={y!r}")
        col, row = int(float(x)), int(float(y))
        if not (0 <= col < n_cols and 0 <= row < n_rows):
            raise ValueError(f"pixel x={col}, y={row} is outside the {n_rows} x {n_cols} grid "
                             f"(x: 0..{n_cols - 1}, y: 0..{n_rows - 1})")
        return row, col, "pixel"
    if x_dim not in da.coords or y_dim not in da.coords:
        raise ValueError("map coordinates need x/y coordinates on the data; give pixel indices (coords='pixel')")
    rows = np.asarray(da[y_dim].values, dtype=float)
    cols = np.asarray(da[x_dim].values, dtype=float)
    row, col = int(np.argmin(np.abs(rows - float(y)))), int(np.argmin(np.abs(cols - float(x))))
    half_y = abs(rows[1] - rows[0]) / 2 if rows.size > 1 else np.inf
    half_x = abs(cols[1] - cols[0]) / 2 if cols.size > 1 else np.inf
    if abs(rows[row] - float(y)) > half_y * 1.000001 or abs(cols[col] - float(x)) > half_x * 1.000001:
        raise ValueError(f"map coordinates x={x!r}, y={y!r} lie outside the grid "
                         f"(x {cols.min():g}..{cols.max():g}, y {rows.min():g}..{rows.max():g})")
    return row, col, "map"


def _pixel_series(data, dates, x, y, coords):
    """``(series, dates, label)`` of one pixel of ``data`` (NumPy or xarray)."""
    from .xr import is_xarray, time_coordinate

    if is_xarray(data):
        if dates is None:
            dates = time_coordinate(data)
            dates = dates.to_numpy() if hasattr(dates, "to_numpy") else dates
        data = data.transpose("time", ...) if "time" in data.dims else data
        if data.ndim == 1:
            return np.asarray(data.values), dates, "series"
        row, col, how = locate_pixel(data, x, y, coords)
        label = f"row {row}, col {col}"
        if how == "map":
            label += f" (x={float(data[data.dims[-1]][col]):.10g}, y={float(data[data.dims[-2]][row]):.10g})"
        return np.asarray(data.isel({data.dims[-2]: row, data.dims[-1]: col}).values), dates, label
    values = np.asarray(data)
    if dates is None:
        raise TypeError("plot_pixel needs dates for NumPy data")
    if values.ndim == 1:
        return values, dates, "series"
    if values.ndim != 3:
        raise ValueError(f"data must be (T,) or (T, rows, cols), got shape {values.shape}")
    if coords == "map":
        raise ValueError("map coordinates need an xarray.DataArray with x/y coordinates")
    if not (_is_integral(x) and _is_integral(y)):
        raise ValueError(f"pixel indices must be integers, got x={x!r}, y={y!r}")
    row, col = int(y), int(x)
    if not (0 <= row < values.shape[1] and 0 <= col < values.shape[2]):
        raise ValueError(f"pixel x={col}, y={row} is outside the {values.shape[1]} x {values.shape[2]} grid")
    return values[:, row, col], dates, f"row {row}, col {col}"


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
        ``h``, ``level``, ``end``, ``history``, ``nodata``), with its defaults.
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
        the detected break (red dashed). Bottom axes: the MOSUM process and its
        +-boundary. Lines carry gids ``"fit"``, ``"start"``, ``"break"``, ``"process"``,
        ``"boundary"``; the BFAST Monitor result is ``fig.tscube_result``.
    """
    from matplotlib.transforms import blended_transform_factory

    from .bfast import BfastStatus, bfast_monitor
    from .bfast.design import build_design
    from .timeaxis import TIME_TOL, build_time_axis

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

    if status in (BfastStatus.OK, BfastStatus.ROC_NO_CROSSING, BfastStatus.PERFECT_FIT):
        design = build_design(axis, int(result.attrs["order"]), bool(result.attrs["trend"]))
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
    if shown.any():
        (line,) = ax_mosum.plot(t[shown], process[shown], "-o", ms=2.5, color="black", lw=1, label="MOSUM process")
        line.set_gid("process")
        (line,) = ax_mosum.plot(t[shown], boundary[shown], color="#d7301f", lw=1.2, label="boundary")
        line.set_gid("boundary")
        ax_mosum.plot(t[shown], -boundary[shown], color="#d7301f", lw=1.2)
        ax_mosum.axhline(0, color="0.6", lw=0.8)
    else:
        ax_mosum.text(0.5, 0.5, f"no MOSUM process (status {status.name})", ha="center", va="center",
                      transform=ax_mosum.transAxes, color="0.4")
    ax_mosum.set_ylabel("OLS-MOSUM")
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
