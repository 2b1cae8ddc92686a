"""Quick-look maps of tscube results (matplotlib, no screen needed)."""

from __future__ import annotations

import numpy as np


def _figure(n_panels: int, figsize):
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, n_panels, figsize=figsize, constrained_layout=True)
    return fig, np.atleast_1d(axes)


def break_maps(result, *, title: str = "BFAST Monitor", figsize=(11, 4.5)):
    """Figure with the break-date map and the magnitude map of a 2-D ``BfastMonitorResult``.

    Pixels without a break are light grey; pixels whose status is not OK are dark grey.
    Returns the matplotlib figure (save it with ``fig.savefig(path)``).
    """
    import matplotlib.pyplot as plt

    if result.status.ndim != 2:
        raise ValueError(f"break_maps needs a 2-D pixel grid, got result shape {result.status.shape}")
    fig, (ax_time, ax_mag) = _figure(2, figsize)
    ok = (result.status == 0) | (result.status == 6)
    flagged = np.ma.masked_where(ok, np.ones(result.status.shape))

    times = np.ma.masked_invalid(np.where(result.has_break, result.break_time, np.nan))
    ax_time.set_facecolor("0.88")
    cmap = plt.get_cmap("viridis").copy()
    image = ax_time.imshow(times, cmap=cmap, interpolation="nearest")
    ax_time.imshow(flagged, cmap="Greys", vmin=0, vmax=1.6, interpolation="nearest")
    fig.colorbar(image, ax=ax_time, shrink=0.8, label="break date (decimal year)")
    ax_time.set_title(f"{title}: date of first break")

    magnitude = np.ma.masked_invalid(np.where(ok, result.magnitude, np.nan))
    limit = float(np.nanpercentile(np.abs(magnitude.compressed()), 98)) if magnitude.count() else 1.0
    ax_mag.set_facecolor("0.5")
    image = ax_mag.imshow(magnitude, cmap="RdBu", vmin=-limit, vmax=limit, interpolation="nearest")
    fig.colorbar(image, ax=ax_mag, shrink=0.8, label="magnitude (median monitoring residual)")
    ax_mag.set_title(f"{title}: magnitude")
    for ax in (ax_time, ax_mag):
        ax.set_xlabel("column")
        ax.set_ylabel("row")
    return fig
