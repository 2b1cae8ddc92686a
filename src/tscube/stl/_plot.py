"""Quick looks of STL: trend-slope and seasonal-amplitude maps (on :mod:`tscube.figures`)."""

from __future__ import annotations

import numpy as np

from ..figures import (FLAGGED_GREY, new_figure, grey_layer, grey_legend, label_axes, result_map, status_map,
                       symmetric_limit)

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
    status = status_map(result, 0)
    slope = result_map(result, "trend_slope", 0).astype(np.float64)
    amplitude = result_map(result, "seasonal_amplitude", 0).astype(np.float64)
    ok = status == 0

    fig, (ax_slope, ax_amp) = new_figure(2, figsize)
    shown = np.where(ok, slope, np.nan)
    grey_layer(ax_slope, ~np.isfinite(shown))
    limit = symmetric_limit(shown)
    image = ax_slope.imshow(np.ma.masked_invalid(shown), cmap="BrBG", vmin=-limit, vmax=limit,
                            interpolation="nearest", zorder=1)
    per = "per year" if hasattr(result, "data_vars") else "per year; per time step without dates"
    fig.colorbar(image, ax=ax_slope, shrink=0.85, extend="both", label=f"trend slope (data units {per})")
    ax_slope.set_title(f"{title}: trend slope")

    shown = np.where(ok, amplitude, np.nan)
    grey_layer(ax_amp, ~np.isfinite(shown))
    finite = shown[np.isfinite(shown)]
    top = float(np.percentile(finite, 98)) if finite.size else 1.0
    image = ax_amp.imshow(np.ma.masked_invalid(shown), cmap="viridis", vmin=0, vmax=top or 1.0,
                          interpolation="nearest", zorder=1)
    fig.colorbar(image, ax=ax_amp, shrink=0.85, extend="max", label="seasonal amplitude (data units)")
    ax_amp.set_title(f"{title}: seasonal amplitude")
    for ax in (ax_slope, ax_amp):
        grey_legend(ax, [("missing / flagged", FLAGGED_GREY)])
        label_axes(ax)
    return fig

