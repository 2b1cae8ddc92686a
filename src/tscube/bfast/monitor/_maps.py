"""Quick-look maps of a BFAST Monitor result: break date and magnitude (on the primitives
of :mod:`tscube.figures`)."""

from __future__ import annotations

import numpy as np

from ...figures import (FLAGGED_GREY, NO_BREAK_GREY, grey_layer, grey_legend, label_axes, new_figure, pyplot,
                        result_map, status_map, symmetric_limit, year_colours)
from .status import MONITORED


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

    plt = pyplot()
    status = status_map(result, start_index)
    break_time = result_map(result, "break_time", start_index).astype(np.float64)
    magnitude = result_map(result, "magnitude", start_index).astype(np.float64)
    ok = np.isin(status, [int(s) for s in MONITORED])
    has_break = ok & np.isfinite(break_time)

    fig, (ax_time, ax_mag) = new_figure(2, figsize)
    grey_layer(ax_time, ~ok, ok & ~has_break)
    if has_break.any():
        years = np.floor(break_time[has_break] + 1e-9).astype(int)
        first, last = int(years.min()), int(years.max())
        n_years = last - first + 1
        cmap = year_colours(n_years)
        norm = BoundaryNorm(np.arange(first, last + 2), cmap.N)
        image = ax_time.imshow(np.ma.masked_where(~has_break, np.floor(break_time + 1e-9)), cmap=cmap, norm=norm,
                               interpolation="nearest", zorder=1)
        colorbar = fig.colorbar(image, ax=ax_time, shrink=0.85)
        step = max(1, int(np.ceil(n_years / 12)))
        colorbar.set_ticks(np.arange(first, last + 1, step) + 0.5)
        colorbar.set_ticklabels([str(y) for y in range(first, last + 1, step)])
        colorbar.set_label("year of the first break")
    else:
        empty = plt.cm.ScalarMappable(cmap=year_colours(1))
        fig.colorbar(empty, ax=ax_time, shrink=0.85, label="year of the first break (none found)")
    n_break = int(has_break.sum())
    ax_time.set_title(f"{title}: year of first break ({n_break:,} pixels)")
    grey_legend(ax_time, [("no break", NO_BREAK_GREY), ("missing / flagged", FLAGGED_GREY)])

    grey_layer(ax_mag, ~ok | ~np.isfinite(magnitude))
    shown = np.where(ok, magnitude, np.nan)
    limit = symmetric_limit(shown)
    image = ax_mag.imshow(np.ma.masked_invalid(shown), cmap="RdBu", vmin=-limit, vmax=limit,
                          interpolation="nearest", zorder=1)
    fig.colorbar(image, ax=ax_mag, shrink=0.85, extend="both",
                 label="magnitude (median monitoring residual, data units)")
    ax_mag.set_title(f"{title}: magnitude")
    grey_legend(ax_mag, [("missing / flagged", FLAGGED_GREY)])
    for ax in (ax_time, ax_mag):
        label_axes(ax)
    return fig
