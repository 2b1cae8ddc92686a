"""The xarray/dask block runner under every algorithm's xarray wrapper (knows no algorithm).

Every algorithm of tscube works on NumPy arrays shaped ``(T, pixels...)``. This module
maps them over an :class:`xarray.DataArray` with a ``time`` dimension (dates from its
coordinate, every other dimension is pixels) with :func:`xarray.apply_ufunc`:

* NumPy-backed input runs at once; dask-backed input stays lazy and runs per chunk
  (``dask="parallelized"``). The time axis must be one chunk: it is rechunked, with a
  ``UserWarning``, when it is not.
* ``memory`` bounds the bytes one chunk may use while it is processed (input, working
  copy and outputs), which sets the number of pixels per chunk.
* ``client`` (a ``dask.distributed.Client``) computes the result on that cluster. The
  library never starts a cluster itself; the ``tscube`` CLI does for ``--workers``.
* Results are :class:`xarray.Dataset` objects: one variable per output, the input's
  pixel dimensions and coordinates, parameters in ``attrs`` (netCDF-serialisable) and
  the CRS/transform of rioxarray kept.

xarray is an optional dependency (``pip install tscube[geo]``): it is imported inside
the functions, so ``is_xarray`` is cheap to call from the NumPy entry points.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .timeaxis import is_datetime_like

__all__ = ["OutputSpec", "apply_time_series", "chunks_fit", "describe_variables", "is_xarray",
           "largest_chunk_values", "parse_memory", "partial_block", "pixel_block_shape", "pixel_chunks",
           "serialisable_attrs", "time_coordinate", "with_dates"]

#: Serialises the calls of multi-threaded engines (the cpu engines' threads, CUDA) made by
#: concurrent dask threads of one process: each call already uses every core, and
#: concurrent launches only oversubscribe them. NumPy ("reference") calls run freely.
_ENGINE_LOCK = threading.Lock()

#: Bytes one input value costs while an algorithm processes it (float64 copy, engine
#: work arrays, outputs); divides a ``memory`` budget into pixels per chunk when reading.
BYTES_PER_VALUE = 48

def is_xarray(obj) -> bool:
    """True for xarray objects, without importing xarray."""
    return type(obj).__module__.split(".")[0] == "xarray"

def parse_memory(memory) -> int | None:
    """Bytes from ``memory``: an int, or a string such as ``"2GB"``, ``"512 MiB"``."""
    if memory is None:
        return None
    if isinstance(memory, bool):
        raise TypeError(f"memory must be a number of bytes or a string like '2GB', got {memory!r}")
    if isinstance(memory, (int, np.integer, float, np.floating)):
        value = int(memory)
    elif isinstance(memory, str):
        from dask.utils import parse_bytes

        try:
            value = int(parse_bytes(memory))
        except (ValueError, TypeError):
            raise ValueError(f"memory must be a size like '2GB' or '512MiB', got {memory!r}") from None
    else:
        raise TypeError(f"memory must be a number of bytes or a string like '2GB', got {memory!r}")
    if value <= 0:
        raise ValueError(f"memory must be positive, got {memory!r}")
    return value

def time_coordinate(da, time_dim: str = "time"):
    """The dates of ``da`` along ``time_dim``: a DatetimeIndex or decimal years (floats).

    Raises ``ValueError`` when there is no such dimension or coordinate, or when the
    dates are missing, unsorted or duplicated.
    """
    import xarray as xr

    if not isinstance(da, xr.DataArray):
        raise TypeError(f"data must be an xarray.DataArray, got {type(da).__name__}")
    if time_dim not in da.dims:
        raise ValueError(
            f"data has no {time_dim!r} dimension (dims: {', '.join(map(str, da.dims)) or 'none'}); "
            f"name the time dimension {time_dim!r} (da.rename(band={time_dim!r})) or pass time_dim="
        )
    if time_dim not in da.coords:
        raise ValueError(f"data has a {time_dim!r} dimension but no {time_dim!r} coordinate with the dates")
    index = da.indexes[time_dim] if time_dim in da.indexes else pd.Index(da[time_dim].values)
    if hasattr(index, "to_datetimeindex"):  # cftime calendars of NetCDF files
        index = index.to_datetimeindex()
    values = np.asarray(index)
    if np.issubdtype(values.dtype, np.datetime64):
        dates = pd.DatetimeIndex(values)
        if dates.hasnans:
            raise ValueError(f"{time_dim} coordinate: missing date (NaT) at position {int(np.flatnonzero(dates.isna())[0])}")
        labels = [str(d.date()) if d == d.normalize() else str(d) for d in dates]
    elif values.dtype.kind in "iuf":
        dates = values.astype(np.float64)
        if not np.all(np.isfinite(dates)):
            raise ValueError(f"{time_dim} coordinate: non-finite decimal year")
        labels = [repr(float(v)) for v in dates]
    else:
        raise ValueError(
            f"{time_dim} coordinate must hold dates (datetime64) or decimal years, got dtype {values.dtype}"
        )
    order = np.asarray(dates if isinstance(dates, np.ndarray) else dates.asi8)
    step = np.diff(order)
    bad = np.flatnonzero(step <= 0)
    if bad.size:
        i = int(bad[0])
        kind = "duplicate" if step[i] == 0 else "unsorted"
        raise ValueError(
            f"{time_dim} coordinate: {kind} dates at positions {i} and {i + 1} "
            f"({labels[i]} and {labels[i + 1]}); dates must be strictly increasing "
            f"(da.sortby({time_dim!r}) sorts them)"
        )
    return dates

@dataclass(frozen=True)
class OutputSpec:
    """One output of a per-pixel function: its name, dtype and core dims.

    ``dims`` are the output's dimensions besides the pixel dims, in order, e.g. ``()``
    for a per-pixel map, ``("time",)`` for a series like the input, ``("start",)``.
    The function returns it shaped ``(*sizes of dims, n_pixels)``.
    """

    name: str
    dtype: Any
    dims: tuple[str, ...] = ()

def with_dates(da, dates, time_dim: str = "time"):
    """``(da, dates)``: ``da`` with ``dates`` as its time coordinate (where given: they
    replace its own, e.g. for a GeoTIFF whose bands are not dated), and its dates as NumPy
    (``datetime64`` or decimal years)."""
    if dates is not None:
        if time_dim not in da.dims:
            raise ValueError(f"data has no {time_dim!r} dimension (dims: {', '.join(map(str, da.dims))})")
        if len(dates) != da.sizes[time_dim]:
            raise ValueError(f"dates has {len(dates)} entries but data has {da.sizes[time_dim]} along {time_dim!r}")
        da = da.assign_coords({time_dim: pd.DatetimeIndex(pd.to_datetime(dates)) if is_datetime_like(dates)
                               else np.asarray(dates, dtype=float)})
    axis_dates = time_coordinate(da, time_dim)
    if isinstance(axis_dates, pd.DatetimeIndex):
        axis_dates = axis_dates.to_numpy()
    return da, axis_dates


def _run_block(block: np.ndarray, *, func, specs, sizes, serialize) -> tuple[np.ndarray, ...]:
    """apply_ufunc kernel: ``block`` is ``(*pixels, T)``; outputs ``(*pixels, *dims)``."""
    pixel_shape, n_times = block.shape[:-1], block.shape[-1]
    n_pixels = int(np.prod(pixel_shape, dtype=np.int64))
    if n_pixels == 0:
        return tuple(
            np.empty(pixel_shape + tuple(sizes[d] for d in spec.dims), dtype=spec.dtype) for spec in specs
        )
    series = np.ascontiguousarray(block.reshape(n_pixels, n_times).T)
    if serialize:
        with _ENGINE_LOCK:
            outputs = func(series)
    else:
        outputs = func(series)
    shaped = []
    for spec in specs:
        array = np.asarray(outputs[spec.name]).astype(spec.dtype, copy=False)
        array = np.moveaxis(array, -1, 0)  # pixels first, then the spec's dims
        shaped.append(array.reshape(pixel_shape + array.shape[1:]))
    return tuple(shaped)

def pixel_chunks(da, time_dim: str, budget: int | None, bytes_per_value: float):
    """``da`` with the time axis in one chunk and pixel chunks sized by ``budget`` bytes.

    ``bytes_per_value`` is the memory one input value costs while processed (its
    float64 copy, the engine's work arrays, the outputs).
    """
    import dask

    pixel_dims = [d for d in da.dims if d != time_dim]
    if budget is None:
        automatic = da.chunk({time_dim: -1, **{d: "auto" for d in pixel_dims}})
    else:
        n_times = da.sizes[time_dim]
        max_pixels = max(1, int(budget // (n_times * bytes_per_value)))
        # dask's "auto" chunking aims at a byte size of the *input* array.
        target = max(1, max_pixels * n_times * da.dtype.itemsize)
        with dask.config.set({"array.chunk-size": target}):
            automatic = da.chunk({time_dim: -1, **{d: "auto" for d in pixel_dims}})
    # "auto" may give uneven chunks (e.g. 294 + 306 rows); make them regular (all equal
    # but a smaller last one), as Zarr stores need and resumable runs write chunk by chunk.
    sizes = automatic.chunksizes
    if all(_is_regular(sizes[d]) for d in pixel_dims):
        return automatic
    return da.chunk({time_dim: -1, **{d: max(sizes[d]) for d in pixel_dims}})

def pixel_block_shape(n_times: int, rows: int, cols: int, memory, bytes_per_value: float = BYTES_PER_VALUE) -> tuple[int, int]:
    """Rows and columns of the pixel chunks of a float32 ``(n_times, rows, cols)`` cube read
    by blocks, so that processing one chunk fits ``memory`` at ``bytes_per_value`` bytes
    per input value (default: dask's ``array.chunk-size`` of input)."""
    import dask
    from dask.array.core import normalize_chunks

    budget = parse_memory(memory)
    if budget is None:
        limit = dask.utils.parse_bytes(dask.config.get("array.chunk-size"))
    else:
        limit = max(1, int(budget // bytes_per_value)) * 4  # in float32 input bytes
    chunks = normalize_chunks((n_times, "auto", "auto"), shape=(n_times, rows, cols), dtype=np.float32,
                              limit=limit)
    return max(chunks[1]), max(chunks[2])

def chunks_fit(da, time_dim: str, budget: int | None, bytes_per_value: float) -> bool:
    """True when ``da`` is dask-backed with time in one chunk, regular pixel chunks, each within ``budget``.

    Such an array is used as it is: rechunking it would only cost reads (and, in
    chunk-by-chunk runs, misalign the result's chunks with the input's).
    """
    if da.chunks is None:
        return False
    sizes = da.chunksizes
    if len(sizes[time_dim]) != 1:
        return False
    pixel_dims = [d for d in da.dims if d != time_dim]
    if not all(_is_regular(sizes[d]) for d in pixel_dims):
        return False
    if budget is None:
        return True
    pixels = int(np.prod([max(sizes[d]) for d in pixel_dims], dtype=np.int64))
    return pixels * da.sizes[time_dim] * bytes_per_value <= budget

def _is_regular(chunks) -> bool:
    """True for chunk sizes that are all equal except a last one that is not larger."""
    return len(set(chunks[:-1])) <= 1 and (len(chunks) < 2 or chunks[-1] <= chunks[0])

def apply_time_series(
    da,
    func: Callable[[np.ndarray], Mapping[str, np.ndarray]],
    outputs: list[OutputSpec],
    *,
    time_dim: str = "time",
    sizes: Mapping[str, int] | None = None,
    coords: Mapping[str, Any] | None = None,
    memory=None,
    bytes_per_value: float = 48.0,
    client=None,
    serialize: bool = False,
):
    """Apply a NumPy ``(T, P) -> {name: array}`` function to every pixel of ``da``.

    Parameters
    ----------
    da : xarray.DataArray
        With a ``time_dim`` dimension; all other dimensions are pixels.
    func : callable
        Takes a ``(T, P)`` array of ``P`` pixel series and returns a mapping from each
        output name to an array shaped ``(*sizes of its dims, P)``. Called once per chunk.
    outputs : list of OutputSpec
        Names, dtypes and extra dims of what ``func`` returns.
    time_dim : str
        Name of the time dimension.
    sizes : mapping, optional
        Sizes of the extra output dims other than ``time_dim`` (e.g. ``{"start": 3}``).
    coords : mapping, optional
        Coordinates of those extra dims.
    memory : int or str, optional
        Bytes one chunk may use while processed; rechunks the pixels accordingly.
    bytes_per_value : float
        Memory cost of one input value during processing, used with ``memory``.
    client : dask.distributed.Client, optional
        Compute on this cluster and return computed results (NumPy input is chunked first).
    serialize : bool
        Run ``func`` under a process-wide lock (for engines that use every core per call).

    Returns
    -------
    xarray.Dataset
        Lazy when ``da`` is dask-backed and no ``client`` is given, computed otherwise.
        Variables are ordered ``(*extra dims, *pixel dims)``.
    """
    import xarray as xr

    sizes = dict(sizes or {})
    sizes[time_dim] = da.sizes[time_dim]
    budget = parse_memory(memory)
    if da.chunks is not None:
        time_chunks = da.chunksizes[time_dim]
        if len(time_chunks) > 1:
            warnings.warn(
                f"the {time_dim!r} dimension is split into {len(time_chunks)} chunks; rechunking it "
                f"into one (open the data with chunks={{{time_dim!r}: -1}} to avoid this copy)",
                UserWarning,
                stacklevel=3,
            )
            da = pixel_chunks(da, time_dim, budget, bytes_per_value)
        elif budget is not None and not chunks_fit(da, time_dim, budget, bytes_per_value):
            da = pixel_chunks(da, time_dim, budget, bytes_per_value)
    elif budget is not None or client is not None:
        da = pixel_chunks(da, time_dim, budget, bytes_per_value)

    new_sizes = {d: n for d, n in sizes.items() if d != time_dim}
    result = xr.apply_ufunc(
        _run_block,
        da,
        input_core_dims=[[time_dim]],
        output_core_dims=[list(spec.dims) for spec in outputs],
        dask="parallelized",
        output_dtypes=[np.dtype(spec.dtype) for spec in outputs],
        dask_gufunc_kwargs={"output_sizes": new_sizes} if new_sizes else None,
        kwargs=dict(func=func, specs=tuple(outputs), sizes=sizes, serialize=serialize),
        keep_attrs=False,
    )
    if len(outputs) == 1:
        result = (result,)
    pixel_dims = [d for d in da.dims if d != time_dim]
    variables = {}
    for spec, array in zip(outputs, result):
        variables[spec.name] = array.transpose(*spec.dims, *pixel_dims)
    ds = xr.Dataset(variables)
    if coords:
        ds = ds.assign_coords(coords)
    ds = _keep_georeference(ds, da)
    if client is not None:
        ds = ds.compute(scheduler=client)
    return ds

def _keep_georeference(ds, da):
    """Copy the CRS / transform of rioxarray from ``da`` to ``ds`` (when rioxarray is there)."""
    try:
        import rioxarray  # noqa: F401  (registers the .rio accessor)
    except ImportError:  # pragma: no cover - geo extra not installed
        return ds
    try:
        crs = da.rio.crs
    except Exception:  # noqa: BLE001 - dims rioxarray cannot interpret: nothing to keep
        return ds
    if crs is not None:
        grid_mapping = da.rio.grid_mapping
        ds = ds.rio.write_crs(crs, grid_mapping_name=grid_mapping)
        if grid_mapping in da.coords and "GeoTransform" in da[grid_mapping].attrs:
            ds[grid_mapping].attrs["GeoTransform"] = da[grid_mapping].attrs["GeoTransform"]
    return ds

def serialisable_attrs(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """``attrs`` with values every netCDF format can store: strings, numbers, lists of numbers.

    Lists of strings become one comma-separated string (NetCDF3 has no string arrays).
    """

    def convert(value):
        if value is None:
            return "None"
        if isinstance(value, (bool, np.bool_)):
            return int(value)
        if isinstance(value, (np.integer,)):
            return int(value)
        if isinstance(value, (np.floating,)):
            return float(value)
        if isinstance(value, (int, float, str)):
            return value
        if isinstance(value, (list, tuple, np.ndarray, pd.Index)):
            items = [convert(v) for v in list(value)]
            if items and all(isinstance(v, (int, float)) for v in items):
                return items
            return ", ".join(str(v) for v in items)
        return str(value)

    return {str(key): convert(value) for key, value in attrs.items()}

class partial_block:
    """A picklable ``functools.partial`` for block functions (keyword arguments only)."""

    def __init__(self, func, **kwargs):
        self.func, self.kwargs = func, kwargs

    def __call__(self, series):
        return self.func(series, **self.kwargs)

def largest_chunk_values(da, time_dim: str) -> int:
    """Values (dates x pixels) of the largest block an engine will get: the whole array
    when it is not chunked; ``engine="auto"`` decides on it."""
    if da.chunks is None:
        return int(da.size)
    pixels = np.prod([max(c) for d, c in da.chunksizes.items() if d != time_dim], dtype=np.int64)
    return int(da.sizes[time_dim] * max(int(pixels), 1))


def describe_variables(ds, variable_attrs: dict, status_enum, status_long_name: str) -> None:
    """Set the CF attributes of ``ds``'s variables (``variable_attrs``: name -> attrs)
    and the flag attributes of its ``status`` variable, coded by ``status_enum``."""
    for name, attrs in variable_attrs.items():
        if name in ds:
            ds[name].attrs.update(attrs)
    ds["status"].attrs.update(
        long_name=status_long_name,
        flag_values=[int(s) for s in status_enum],
        flag_meanings=" ".join(s.name for s in status_enum),
    )
