"""One pixel of a classic BFAST result plotted as R's ``plot.bfast`` does: the data and its
three components over a shared time axis, the breaks and their confidence intervals (on
the primitives of :mod:`tscube.figures`)."""

from __future__ import annotations

import numpy as np

from ...figures import BREAK_RED, new_figure
from ...timeaxis import build_time_axis
from ...xarray_blocks import is_xarray, time_coordinate
from .status import HAS_RESULT, BfastClassicStatus

#: Height of the confidence-interval bars, as a fraction of their panel (near the bottom,
#: where strucchange's ``lines(confint(...))`` draws them).
CONFINT_HEIGHT = 0.06


def _pixel_index(pixel, shape: tuple) -> tuple[int, ...]:
    """``pixel`` (None, an int or a tuple) as an index tuple into ``shape``, checked."""
    if pixel is None:
        index = ()
    elif isinstance(pixel, (int, np.integer)):
        index = (int(pixel),)
    else:
        index = tuple(int(i) for i in pixel)
    if len(index) != len(shape):
        need = "None (a single series)" if not shape else f"{len(shape)} ind{'ex' if len(shape) == 1 else 'ices'}"
        raise ValueError(f"pixel {pixel!r} does not index the result's pixel shape {shape}: give {need}")
    for i, n in zip(index, shape):
        if not -n <= i < n:
            raise ValueError(f"pixel {pixel!r} lies outside the result's pixel shape {shape}")
    return tuple(i % n for i, n in zip(index, shape))


def _one_pixel(result, pixel, time_dim: str) -> tuple[tuple[int, ...], dict]:
    """The index of ``pixel`` and its outputs as NumPy: the per-pixel numbers, each
    component's breaks (index, time, interval ``(B, 2)``), the components and the
    decimal-year time of the dates, from a result in memory or a Dataset."""
    if not hasattr(result, "data_vars"):
        index = _pixel_index(pixel, np.shape(result.status))
        along = (slice(None),) + index
        one = {name: getattr(result, name)[index] for name in (
            "status", "n_iter", "n_trend_breaks", "n_season_breaks", "magnitude")}
        for part in ("trend", "season"):
            one[f"{part}_break_time"] = getattr(result, f"{part}_break_time")[along]
            one[f"{part}_confint"] = getattr(result, f"{part}_confint")[along]
        one.update({name: getattr(result, name)[along] for name in ("trend", "seasonal", "remainder")})
        return index, dict(one, time=np.asarray(result.attrs["time"], dtype=np.float64))
    if "trend" not in result:
        raise ValueError("the result has no components (a GeoTIFF holds maps only): plot the result in memory, "
                         "or one read back from .nc or .zarr")
    dims = result["status"].dims
    index = _pixel_index(pixel, tuple(result.sizes[d] for d in dims))
    ds = result.isel(dict(zip(dims, index)))
    one = {name: np.asarray(ds[name].values) for name in (
        "status", "n_iter", "n_trend_breaks", "n_season_breaks", "magnitude", "trend", "seasonal", "remainder")}
    for part in ("trend", "season"):
        one[f"{part}_break_time"] = np.asarray(ds[f"{part}_break_time"].values)
        one[f"{part}_confint"] = np.stack([ds[f"{part}_ci_lower"].values, ds[f"{part}_ci_upper"].values], axis=-1)
    dates = time_coordinate(result["trend"], time_dim)
    axis = build_time_axis(dates.to_numpy() if hasattr(dates, "to_numpy") else dates, int(result.attrs["freq"]))
    return index, dict(one, time=axis.time)


def _series(data, index: tuple[int, ...], n_times: int, time_dim: str) -> np.ndarray:
    """The pixel's observations from ``data``: the cube the result was computed from, shaped
    ``(T, *pixels)`` (NumPy, or xarray with ``time_dim``), or the pixel's own series."""
    if is_xarray(data):
        data = data.transpose(time_dim, ...).values if time_dim in data.dims else data.values
    values = np.asarray(data, dtype=np.float64)
    if values.ndim != 1:
        if values.ndim != 1 + len(index):
            raise ValueError(f"data must be the input cube (T, *pixels) or one series (T,), got shape {values.shape}")
        values = values[(slice(None),) + index]
    if values.shape[0] != n_times:
        raise ValueError(f"data has {values.shape[0]} dates but the result {n_times}")
    return values


def _mark_breaks(ax, times: np.ndarray, confint: np.ndarray, n: int, time: np.ndarray, label: str) -> None:
    """Each of the ``n`` breaks: a dashed vertical line at the last observation before it
    (gid ``"break"``) and its confidence interval as a bar near the panel's bottom (gid
    ``"confint"``; the interval's time indices are on the regular grid, inside or not)."""
    from matplotlib.transforms import blended_transform_factory

    bottom = blended_transform_factory(ax.transData, ax.transAxes)
    step = (time[-1] - time[0]) / (len(time) - 1) if len(time) > 1 else 0.0
    for b in range(n):
        line = ax.axvline(times[b], color=BREAK_RED, ls="--", lw=1.4, label=label if b == 0 else None)
        line.set_gid("break")
        lower, upper = confint[b]
        if np.isfinite(lower) and np.isfinite(upper):
            (bar,) = ax.plot(time[0] + np.array([lower, upper]) * step, [CONFINT_HEIGHT] * 2, color=BREAK_RED, lw=2,
                             marker="|", ms=8, transform=bottom, label="95 % interval" if b == 0 else None)
            bar.set_gid("confint")


def plot_classic_pixel(result, data, pixel=None, *, nodata=None, time_dim: str = "time", title: str | None = None,
                       figsize=(10, 8)):
    """R's ``plot.bfast`` of one pixel: the data ``Yt``, the seasonal ``St``, the trend
    ``Tt`` and the remainder ``Nt`` of the last iteration in four panels over one time
    axis, with the trend breaks in the trend panel and the seasonal breaks in the seasonal
    panel.

    Parameters
    ----------
    result : BfastClassicResult or xarray.Dataset
        In memory, or a Dataset of :func:`tscube.xr.bfast_classic_xarray` (computed, or
        read back from .nc / .zarr: a GeoTIFF holds no components).
    data : array_like or xarray.DataArray
        The cube the result was computed from, ``(T, *pixels)``, or the pixel's series.
    pixel : None, int or tuple of int
        Index into the result's pixel shape (None for a single series).
    nodata : number, optional
        The value that marked missing observations, for a pixel without a result (the
        components mark them otherwise); default: the one the run recorded.
    time_dim : str
        Name of the time dimension of xarray ``data`` and ``result``.
    title : str, optional
        Figure title (default: the status, iterations, breaks and magnitude).
    figsize : (float, float)
        Figure size in inches.

    Returns
    -------
    matplotlib.figure.Figure
        Four axes sharing the time axis (decimal years): observations (black), the
        seasonal component, the trend (the seasonal and trend panels mark each break with
        a red dashed line, gid ``"break"``, and its 95 % confidence interval with a red
        bar near the panel's bottom, gid ``"confint"``), and the remainder around 0.
    """
    index, one = _one_pixel(result, pixel, time_dim)
    time = one["time"]
    values = _series(data, index, len(time), time_dim)
    status = int(one["status"])
    if nodata is None:
        nodata = (getattr(result, "attrs", None) or {}).get("nodata")
    valid = np.isfinite(values) if nodata is None else np.isfinite(values) & (values != nodata)
    if status in HAS_RESULT:  # the components are NaN exactly at the missing observations
        valid &= np.isfinite(one["trend"])

    fig, (ax_y, ax_s, ax_t, ax_n) = new_figure(4, figsize, rows=4, sharex=True)
    ax_y.plot(time[valid], values[valid], color="black", lw=0.8)
    for ax, name, colour in ((ax_s, "seasonal", "#1b7837"), (ax_t, "trend", "#2166ac"), (ax_n, "remainder", "0.35")):
        shown = np.isfinite(one[name])
        ax.plot(time[shown], one[name][shown], color=colour, lw=1.0 if name != "trend" else 1.6)
    ax_n.axhline(0.0, color="0.6", lw=0.6)
    n_trend, n_season = int(one["n_trend_breaks"]), int(one["n_season_breaks"])
    _mark_breaks(ax_t, one["trend_break_time"], one["trend_confint"], n_trend, time, "trend break")
    _mark_breaks(ax_s, one["season_break_time"], one["season_confint"], n_season, time, "seasonal break")
    for ax, label in ((ax_y, "Yt (data)"), (ax_s, "St (seasonal)"), (ax_t, "Tt (trend)"), (ax_n, "Nt (remainder)")):
        ax.set_ylabel(label)
    for ax in (ax_s, ax_t):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
    ax_n.set_xlabel("time (decimal year)")
    if title is None:
        where = f"pixel {index if len(index) != 1 else index[0]}" if index else "series"
        title = f"classic BFAST, {where}: {BfastClassicStatus(status).name}"
        if status in HAS_RESULT:
            iterations = int(one["n_iter"])
            title += (f", {iterations} iteration{'s' if iterations != 1 else ''}, {n_trend} trend and {n_season} "
                      f"seasonal break{'s' if n_season != 1 else ''}, magnitude {float(one['magnitude']):.4g}")
    fig.suptitle(title)
    return fig
