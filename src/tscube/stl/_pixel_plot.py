"""One series' STL plotted: data, seasonal, trend and remainder in four panels (on the
primitives of :mod:`tscube.figures`)."""

from __future__ import annotations

import numpy as np

from ..figures import new_figure
from ._status import StlStatus
from .api import stl


def plot_stl_pixel(series, dates=None, *, title: str | None = None, figsize=(10, 7), engine: str = "reference",
                   **params):
    """STL of one series in four panels over one time axis: the data, the seasonal, the
    trend and the remainder (like R's ``plot.stl``).

    Parameters
    ----------
    series : array_like, shape (T,)
        The observations (NaN, inf or ``nodata`` missing).
    dates : array_like, optional
        Their dates (the x axis; time steps without them).
    engine : str
        Engine of :func:`tscube.stl` (one series: "reference" starts fastest).
    **params
        Arguments of :func:`tscube.stl` (``period`` required, ``seasonal``, ``robust``,
        ``flavor``, ``nodata``, ...).

    Returns
    -------
    matplotlib.figure.Figure
        Four axes sharing the time axis; the STL result is ``fig.tscube_result``.
    """
    values = np.asarray(series, dtype=np.float64)
    result = stl(values[:, None], dates=dates, engine=engine, **params)
    x = np.asarray(dates) if dates is not None else np.arange(values.size)
    nodata = params.get("nodata")
    valid = np.isfinite(values) if nodata is None else np.isfinite(values) & (values != nodata)
    fig, axes = new_figure(4, figsize, rows=4, sharex=True)
    fig.tscube_result = result
    axes[0].plot(x[valid], values[valid], "-o", ms=2.5, lw=0.6, color="black")
    for ax, name, colour in zip(axes[1:], ("seasonal", "trend", "remainder"), ("#1b7837", "#2166ac", "0.35")):
        component = np.asarray(getattr(result, name))[:, 0]
        shown = np.isfinite(component)
        ax.plot(x[shown], component[shown], color=colour, lw=1.2)
        ax.set_ylabel(name)
    axes[0].set_ylabel("data")
    axes[3].axhline(0.0, color="0.6", lw=0.6)
    status = StlStatus(int(result.status[0]))
    if title is None:
        title = f"STL (period {params.get('period')}): {status.name}"
        if status == StlStatus.OK:
            title += (f", trend slope {float(result.trend_slope[0]):.4g}, seasonal amplitude "
                      f"{float(result.seasonal_amplitude[0]):.4g}")
    fig.suptitle(title)
    return fig
