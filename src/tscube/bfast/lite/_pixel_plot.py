"""One pixel's BFAST Lite plotted: its series, each segment's fit and trend, the breaks
(on the primitives of :mod:`tscube.figures`)."""

from __future__ import annotations

import numpy as np

from ...figures import BREAK_RED, new_figure, pixel_series
from ...timeaxis import build_time_axis
from ..core.design import build_design
from ._array import bfast_lite_array
from .status import BfastLiteStatus


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

    series, dates, label = pixel_series(data, dates, x, y, coords)
    result = bfast_lite_array(series[:, None], dates, engine=engine, **kwargs)
    axis = build_time_axis(dates, kwargs.get("freq"))
    t = axis.time
    values = series.astype(np.float64)
    nodata = kwargs.get("nodata")
    valid = np.isfinite(values) if nodata is None else np.isfinite(values) & (values != nodata)
    fig, (ax,) = new_figure(1, figsize)
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
            (line,) = ax.plot([when, when], [0, 1], color=BREAK_RED, ls="--", lw=1.6,
                              transform=blended_transform_factory(ax.transData, ax.transAxes),
                              label="break" if l == 0 else None)
            line.set_gid("break")
    ax.set_xlabel("time (decimal year)")
    ax.set_ylabel("value")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
    if title is None:
        title = f"BFAST Lite, pixel {label}: {m} break{'s' if m != 1 else ''}"
        if status:
            title += f" (status {BfastLiteStatus(status).name})"
        elif m:
            title += f", largest change {float(result.magnitude[0]):.4g}"
    fig.suptitle(title)
    return fig
