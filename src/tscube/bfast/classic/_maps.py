"""Quick-look maps of a classic BFAST result: the trend breaks (number, year, magnitude),
the seasonal breaks (number, year) and the status (on the primitives of
:mod:`tscube.figures`)."""

from __future__ import annotations

import numpy as np

from ...figures import (FLAGGED_GREY, NO_BREAK_GREY, grey_layer, grey_legend, label_axes, pyplot, result_map,
                        status_map, symmetric_limit, year_image)
from .status import HAS_RESULT, BfastClassicStatus


def _break_stack(result, name: str) -> np.ndarray:
    """A per-break output ``(B, rows, cols)`` of a classic result: in memory, a Dataset, or
    a GeoTIFF read back (one band per break, ``NAME_1``, ``NAME_2``, ...)."""
    if not hasattr(result, "data_vars"):
        return np.asarray(getattr(result, name), dtype=np.float64)
    if name in result:
        return np.asarray(result[name].transpose("break", ...).values, dtype=np.float64)
    bands = []
    while f"{name}_{len(bands) + 1}" in result:
        bands.append(np.asarray(result[f"{name}_{len(bands) + 1}"].values, dtype=np.float64))
    return np.stack(bands) if bands else np.empty((0,) + np.shape(result["status"]))


def _first(times: np.ndarray, shape) -> np.ndarray:
    """The first break time of each pixel (breaks are in time order; NaN: none)."""
    return times[0] if times.shape[0] else np.full(shape, np.nan)


def _count_map(fig, ax, counts: np.ndarray, flagged: np.ndarray, title: str) -> None:
    from matplotlib.colors import BoundaryNorm

    grey_layer(ax, flagged)
    most = int(np.nanmax(counts)) if np.isfinite(counts).any() else 0
    cmap = pyplot().get_cmap("viridis", most + 1)
    image = ax.imshow(np.ma.masked_invalid(counts), cmap=cmap, norm=BoundaryNorm(np.arange(-0.5, most + 1), cmap.N),
                      interpolation="nearest", zorder=1)
    fig.colorbar(image, ax=ax, shrink=0.85, ticks=np.arange(most + 1), label="breaks")
    ax.set_title(title)


def _year_map(fig, ax, times: np.ndarray, flagged: np.ndarray, title: str) -> None:
    grey_layer(ax, flagged, ~flagged & ~np.isfinite(times))
    if year_image(fig, ax, times, "year") is None:  # an invisible colour bar keeps the maps aligned
        colorbar = fig.colorbar(ax.imshow(np.ma.masked_all(times.shape), interpolation="nearest", zorder=1), ax=ax,
                                shrink=0.85)
        colorbar.ax.set_visible(False)
    ax.set_title(title)
    grey_legend(ax, [("no break", NO_BREAK_GREY), ("no result", FLAGGED_GREY)])


def classic_maps(result, *, title: str = "classic BFAST", figsize=(15, 8.5)):
    """Maps of a classic BFAST result over a 2-D pixel grid: the trend breaks in the top
    row, the seasonal breaks and the status below.

    Parameters
    ----------
    result : BfastClassicResult or xarray.Dataset
        In memory, or read back from a result file (:func:`read_result`).
    title : str
        Prefix of the figure title.
    figsize : (float, float)
        Figure size in inches.

    Returns
    -------
    matplotlib.figure.Figure
        Six maps, each with its colour bar (hidden on a year map without any break, so
        that the layout stays the same): the number of trend breaks, the year of the trend
        break with the largest jump (R's ``Time``; the first trend break where no jump is
        known), that jump (R's ``Magnitude``, diverging colours centred on 0); the number
        of seasonal breaks, the year of the first seasonal break, and the
        :class:`BfastClassicStatus` of every pixel. Dark grey: no result (the status is an
        error of R's); light grey: no break.
    """
    from matplotlib.colors import BoundaryNorm, ListedColormap

    plt = pyplot()
    status = status_map(result, 0)
    ok = np.isin(status, [int(s) for s in HAS_RESULT])

    def per_pixel(name):
        return np.where(ok, result_map(result, name, 0).astype(np.float64), np.nan)

    n_trend, n_season, magnitude = per_pixel("n_trend_breaks"), per_pixel("n_season_breaks"), per_pixel("magnitude")
    largest = per_pixel("magnitude_time")
    trend_time = np.where(np.isfinite(largest), largest,
                          np.where(ok, _first(_break_stack(result, "trend_break_time"), status.shape), np.nan))
    season_time = np.where(ok, _first(_break_stack(result, "season_break_time"), status.shape), np.nan)

    fig, axes = plt.subplots(2, 3, figsize=figsize, constrained_layout=True)
    (ax_n, ax_time, ax_mag), (ax_ns, ax_stime, ax_status) = axes
    _count_map(fig, ax_n, n_trend, ~ok, "trend breaks")
    _year_map(fig, ax_time, trend_time, ~ok, "year of the largest trend break")

    grey_layer(ax_mag, ~ok, ok & (n_trend == 0))
    shown = np.where(n_trend > 0, magnitude, np.nan)  # R's 0 without a break would read as 'no change'
    limit = symmetric_limit(shown)
    image = ax_mag.imshow(np.ma.masked_invalid(shown), cmap="RdBu", vmin=-limit, vmax=limit, interpolation="nearest",
                          zorder=1)
    fig.colorbar(image, ax=ax_mag, shrink=0.85, extend="both", label="data units")
    ax_mag.set_title("largest trend jump")
    grey_legend(ax_mag, [("no break", NO_BREAK_GREY), ("no result", FLAGGED_GREY)])

    _count_map(fig, ax_ns, n_season, ~ok, "seasonal breaks")
    _year_map(fig, ax_stime, season_time, ~ok, "year of the first seasonal break")

    codes = [int(s) for s in BfastClassicStatus]
    cmap = ListedColormap(plt.get_cmap("tab10").colors[: len(codes)])
    image = ax_status.imshow(status, cmap=cmap, norm=BoundaryNorm(np.arange(-0.5, len(codes)), cmap.N),
                             interpolation="nearest")
    colorbar = fig.colorbar(image, ax=ax_status, shrink=0.85, ticks=codes)
    colorbar.set_ticklabels([s.name for s in BfastClassicStatus])
    ax_status.set_title("status")
    for ax in axes.ravel():
        label_axes(ax)
    fig.suptitle(f"{title}: {int(np.nansum(n_trend)):,} trend breaks in {int(np.sum(n_trend > 0)):,} pixels, "
                 f"{int(np.nansum(n_season)):,} seasonal breaks in {int(np.sum(n_season > 0)):,} pixels")
    return fig
