"""STL over an xarray.DataArray, lazily with dask (on :mod:`tscube.xarray_blocks`)."""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
import pandas as pd

from ..engines import resolve
from ..xarray_blocks import (OutputSpec, apply_time_series, describe_variables, largest_chunk_values, partial_block,
                             serialisable_attrs, time_coordinate)
from ._array import stl_array
from ._status import StlStatus

_STL_VARIABLE_ATTRS = {
    "seasonal": dict(long_name="seasonal component"),
    "trend": dict(long_name="trend component"),
    "remainder": dict(long_name="remainder component"),
    "weights": dict(long_name="robustness weights"),
    "trend_slope": dict(long_name="OLS slope of the trend"),
    "seasonal_amplitude": dict(long_name="peak-to-trough range of the mean seasonal cycle"),
}

def _stl_block(series, *, period, kwargs, components):
    result = stl_array(series, period, **kwargs)
    out = dict(trend_slope=result.trend_slope, seasonal_amplitude=result.seasonal_amplitude, status=result.status)
    if components:
        out.update(seasonal=result.seasonal, trend=result.trend, remainder=result.remainder, weights=result.weights)
    return out

def stl_xarray(da, period, *, time_dim: str = "time", components: bool = True, client=None, memory=None, **kwargs):
    """:func:`tscube.stl` over an :class:`xarray.DataArray`, lazily with dask.

    Parameters
    ----------
    da : xarray.DataArray
        Time series cube with a ``time_dim`` dimension; other dims are pixels. Its
        dates (datetimes or decimal years) are passed as ``dates`` unless given.
    period : int
        Length of the seasonal cycle in time steps.
    time_dim : str
        Name of the time dimension.
    components : bool
        Also return ``seasonal``, ``trend``, ``remainder``, ``weights`` over time
        (False: only the per-pixel ``trend_slope``, ``seasonal_amplitude``, ``status``).
    client, memory
        As in :func:`bfast_monitor_xarray`.
    **kwargs
        Other arguments of :func:`tscube.stl` (``seasonal``, ``robust``, ``flavor``,
        ``nodata``, ``engine``, ...).

    Returns
    -------
    xarray.Dataset
    """
    kwargs = dict(kwargs)
    if kwargs.get("dates") is None:
        dates = time_coordinate(da, time_dim)
        kwargs["dates"] = dates.to_numpy() if isinstance(dates, pd.DatetimeIndex) else dates
    elif time_dim not in da.dims:
        raise ValueError(f"data has no {time_dim!r} dimension (dims: {', '.join(map(str, da.dims))})")
    n_times = da.sizes[time_dim]
    probe = stl_array(np.full((n_times, 1), np.nan), period, **dict(kwargs, engine="reference"))
    # one engine for every chunk, recorded in the attrs
    kwargs["engine"] = resolved = resolve("stl", kwargs.get("engine", "auto"), largest_chunk_values(da, time_dim))
    out_dtype = np.float32 if da.dtype == np.float32 else np.float64
    specs = [OutputSpec("trend_slope", out_dtype), OutputSpec("seasonal_amplitude", out_dtype),
             OutputSpec("status", np.int8)]
    if components:
        specs += [OutputSpec(name, out_dtype, (time_dim,)) for name in ("seasonal", "trend", "remainder", "weights")]
    ds = apply_time_series(
        da, partial_block(_stl_block, period=period, kwargs=kwargs, components=components), specs,
        time_dim=time_dim, memory=memory, bytes_per_value=80.0 if components else 48.0, client=client,
        serialize=True,  # numba-parallel layout copies for every engine; cuda has one device
    )
    describe_variables(ds, _STL_VARIABLE_ATTRS, StlStatus, "series status (tscube.stl.StlStatus)")
    attrs = dict(tscube_function="stl", **asdict(probe.params), engine=resolved)
    ds.attrs.update(serialisable_attrs(attrs))
    return ds
