"""Quick-look maps of a BFAST Lite result: number of breaks, the year and the magnitude of
the largest break (on the primitives of :mod:`tscube.figures`)."""

from __future__ import annotations

import numpy as np

from ...figures import (FLAGGED_GREY, NO_BREAK_GREY, grey_layer, grey_legend, label_axes, new_figure, pyplot,
                        result_map, status_map, symmetric_limit, year_image)


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

    plt = pyplot()
    status = status_map(result, 0)
    ok = status == 0
    n_breaks = np.where(ok, result_map(result, "n_breaks", 0).astype(np.float64), np.nan)
    magnitude = np.where(ok, result_map(result, "magnitude", 0).astype(np.float64), np.nan)
    diff = _break_stack(result, "magnitude_diff")
    times = _break_stack(result, "break_time")
    largest_time = np.full(status.shape, np.nan)
    has = ok & np.any(np.isfinite(diff), axis=0) if diff.size else np.zeros_like(ok)
    if has.any():
        pick = np.argmax(np.where(np.isfinite(diff), np.abs(diff), -1.0), axis=0)
        largest_time = np.where(has, np.take_along_axis(times, pick[None], axis=0)[0], np.nan)

    fig, (ax_n, ax_time, ax_mag) = new_figure(3, figsize)
    grey_layer(ax_n, ~ok)
    most = int(np.nanmax(n_breaks)) if np.isfinite(n_breaks).any() else 0
    cmap = plt.get_cmap("viridis", most + 1)
    image = ax_n.imshow(np.ma.masked_invalid(n_breaks), cmap=cmap, norm=BoundaryNorm(np.arange(-0.5, most + 1), cmap.N),
                        interpolation="nearest", zorder=1)
    fig.colorbar(image, ax=ax_n, shrink=0.85, ticks=np.arange(most + 1), label="breaks")
    ax_n.set_title("number of breaks")

    grey_layer(ax_time, ~ok, ok & ~np.isfinite(largest_time))
    year_image(fig, ax_time, largest_time, "year of the largest break")
    ax_time.set_title("year of the largest break")
    grey_legend(ax_time, [("no break", NO_BREAK_GREY), ("missing / flagged", FLAGGED_GREY)])

    grey_layer(ax_mag, ~ok, ok & ~np.isfinite(magnitude))
    limit = symmetric_limit(magnitude)
    image = ax_mag.imshow(np.ma.masked_invalid(magnitude), cmap="RdBu", vmin=-limit, vmax=limit,
                          interpolation="nearest", zorder=1)
    fig.colorbar(image, ax=ax_mag, shrink=0.85, extend="both", label="trend change at the break (data units)")
    ax_mag.set_title("magnitude of the largest break")
    grey_legend(ax_mag, [("no break", NO_BREAK_GREY), ("missing / flagged", FLAGGED_GREY)])
    for ax in (ax_n, ax_time, ax_mag):
        label_axes(ax)
    fig.suptitle(f"{title}: {int(np.nansum(n_breaks)):,} breaks in {int(np.sum(n_breaks > 0)):,} pixels")
    return fig
