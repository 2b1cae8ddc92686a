"""Figure and map primitives of tscube's quick looks (matplotlib, no screen needed), shared by
the algorithms' plots: the pyplot backend, figure layout, 2-D maps of a result with its
flagged pixels in grey, reading result files back, and finding one pixel of a cube.
Knows no algorithm: the maps and pixel plots live with their algorithm
(:mod:`tscube.bfast.monitor`, :mod:`tscube.bfast.lite`, :mod:`tscube.stl`), gathered in
:mod:`tscube.plot`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .io import check_complete

#: Colour of pixels whose status is not OK (missing, flagged) and of pixels without a break.
FLAGGED_GREY = "0.45"

NO_BREAK_GREY = "0.86"

#: Colour of breaks, their confidence intervals and monitoring boundaries in pixel plots.
BREAK_RED = "#d7301f"

def pyplot():
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

def new_figure(n_panels: int, figsize, *, rows: int = 1, **kwargs):
    plt = pyplot()
    if rows == 1:
        fig, axes = plt.subplots(1, n_panels, figsize=figsize, constrained_layout=True, **kwargs)
    else:
        fig, axes = plt.subplots(rows, 1, figsize=figsize, constrained_layout=True, **kwargs)
    return fig, np.atleast_1d(axes)

def read_result(path, *, load: bool = True):
    """A result file (``.tif``, ``.nc``, ``.zarr``) as an :class:`xarray.Dataset` of maps.

    GeoTIFF bands become variables named by their band descriptions; the ``tscube_*``
    tags become attrs (``tscube_function`` tells BFAST Monitor from STL results).
    ``load=False``: opened lazily, each variable (or window of it) read when used, as
    ``tscube view`` reads a large result.
    """
    import xarray as xr

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"result {str(path)!r} does not exist")
    suffix = path.suffix.lower()
    if suffix == ".zarr" or path.is_dir():
        check_complete(path)
        if not load:  # cache=False: a variable read whole is not kept a second time inside the Dataset
            return xr.open_dataset(path, engine="zarr", chunks=None, cache=False, decode_coords="all")
        return xr.open_zarr(path, decode_coords="all").load()
    if suffix in (".nc", ".nc4", ".netcdf"):
        if not load:
            return xr.open_dataset(path, decode_coords="all", cache=False)
        with xr.open_dataset(path, decode_coords="all") as ds:
            return ds.load()
    if suffix in (".tif", ".tiff"):
        import rioxarray

        bands = rioxarray.open_rasterio(path, masked=True, cache=load)
        if load:
            bands = bands.load()
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

def function_of(result) -> str:
    """``"bfast_monitor"``, ``"bfast_lite"``, ``"bfast_classic"`` or ``"stl"``: which algorithm made ``result``."""
    attrs = getattr(result, "attrs", {}) or {}
    name = attrs.get("tscube_function") or attrs.get("tscube_tscube_function")
    if name in ("bfast_monitor", "bfast_lite", "bfast_classic", "stl"):
        return name
    names = set(getattr(result, "data_vars", {}) or {}) or set(vars(result) if hasattr(result, "__dict__") else ())
    if type(result).__name__ == "StlResult" or {"trend_slope", "seasonal_amplitude"} <= names:
        return "stl"
    if type(result).__name__ == "BfastClassicResult" or "n_trend_breaks" in names:
        return "bfast_classic"
    if type(result).__name__ == "BfastLiteResult" or "n_breaks" in names:
        return "bfast_lite"
    if type(result).__name__ == "BfastMonitorResult" or "break_time" in names:
        return "bfast_monitor"
    raise ValueError("result is neither a BFAST Monitor nor an STL result (no break_time or trend_slope variable)")

def n_starts(result) -> int:
    """How many monitoring starts a result holds (1 for a single start): its ``start`` dim,
    or, read back from a GeoTIFF, its ``status_start0``, ``status_start1``, ... bands."""
    if hasattr(result, "data_vars"):
        if "start" in result.dims:
            return int(result.sizes["start"])
        if "status" not in result and "status_start0" in result:
            return sum(1 for name in result.data_vars if str(name).startswith("status_start"))
        return 1
    status = np.asarray(getattr(result, "status"))
    return int(status.shape[0]) if status.ndim == 3 else 1


def result_map(result, name: str, start_index: int) -> np.ndarray:
    """The 2-D map ``name`` of ``result`` (first/selected start of a multi-start result; a
    start that the result does not hold is refused)."""
    count = n_starts(result)
    if not 0 <= start_index < count:
        raise ValueError(f"start index {start_index} is not in the result, which holds "
                         f"{'one monitoring start (index 0)' if count == 1 else f'{count} starts (0 to {count - 1})'}")
    if hasattr(result, "data_vars") and name not in result and f"{name}_start{start_index}" in result:
        name = f"{name}_start{start_index}"  # a multi-start result read back from a GeoTIFF
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

def status_map(result, start_index: int) -> np.ndarray:
    status = result_map(result, "status", start_index)
    if np.issubdtype(status.dtype, np.floating):  # read back from a float GeoTIFF
        status = np.where(np.isfinite(status), status, 1).astype(np.int64)
    return status

def grey_layer(ax, flagged: np.ndarray, no_break: np.ndarray | None = None) -> None:
    """Paint ``flagged`` pixels dark grey and ``no_break`` pixels light grey, under the data."""
    from matplotlib.colors import to_rgba

    layer = np.zeros(flagged.shape + (4,))
    if no_break is not None:
        layer[no_break] = to_rgba(NO_BREAK_GREY)
    layer[flagged] = to_rgba(FLAGGED_GREY)
    ax.imshow(layer, interpolation="nearest", zorder=0)

def grey_legend(ax, entries: list[tuple[str, str]]) -> None:
    from matplotlib.patches import Patch

    ax.legend(handles=[Patch(facecolor=c, edgecolor="0.2", label=label) for label, c in entries],
              loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=len(entries), fontsize="small", frameon=False)

def year_colours(n: int):
    """``n`` distinct, legible colours (qualitative up to 20, else sampled from a rainbow map)."""
    plt = pyplot()
    from matplotlib.colors import ListedColormap

    if n <= 10:
        return ListedColormap(plt.get_cmap("tab10").colors[:n])
    if n <= 20:
        return ListedColormap(plt.get_cmap("tab20").colors[:n])
    return ListedColormap(plt.get_cmap("turbo")(np.linspace(0.05, 0.95, n)))

def year_image(fig, ax, times: np.ndarray, label: str):
    """The year (floor of the decimal-year ``times``, NaN: nothing) of every pixel, one
    discrete colour per year, with a colour bar of at most a dozen year ticks labelled
    ``label``; returns the colour bar (None where no pixel has a time)."""
    from matplotlib.colors import BoundaryNorm

    if not np.isfinite(times).any():
        return None
    years = np.floor(times + 1e-9)
    first, last = int(np.nanmin(years)), int(np.nanmax(years))
    cmap = year_colours(last - first + 1)
    image = ax.imshow(np.ma.masked_invalid(years), cmap=cmap, norm=BoundaryNorm(np.arange(first, last + 2), cmap.N),
                      interpolation="nearest", zorder=1)
    colorbar = fig.colorbar(image, ax=ax, shrink=0.85)
    step = max(1, int(np.ceil((last - first + 1) / 12)))
    colorbar.set_ticks(np.arange(first, last + 1, step) + 0.5)
    colorbar.set_ticklabels([str(y) for y in range(first, last + 1, step)])
    colorbar.set_label(label)
    return colorbar

def symmetric_limit(values: np.ndarray) -> float:
    finite = np.abs(values[np.isfinite(values)])
    if not finite.size:
        return 1.0
    limit = float(np.percentile(finite, 98))
    return limit if limit > 0 else float(finite.max()) or 1.0

def label_axes(ax) -> None:
    ax.set_xlabel("column")
    ax.set_ylabel("row")

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

def pixel_series(data, dates, x, y, coords):
    """``(series, dates, label)`` of one pixel of ``data`` (NumPy or xarray)."""
    from .xarray_blocks import is_xarray, time_coordinate

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
