"""BFAST Monitor over an xarray.DataArray, lazily with dask (on :mod:`tscube.xarray_blocks`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...engines import resolve
from ...xarray_blocks import (OutputSpec, apply_time_series, describe_variables, largest_chunk_values, partial_block,
                              serialisable_attrs, with_dates)
from ._array import bfast_monitor_array
from .result import OUTPUT_DTYPES, VARIABLE_ATTRS
from .status import BfastStatus


def _bfast_block(series, *, dates, start, kwargs):
    return bfast_monitor_array(series, dates, start, **kwargs).to_dict()


def bfast_monitor_xarray(da, start, *, dates=None, time_dim: str = "time", client=None, memory=None, **kwargs):
    """:func:`tscube.bfast_monitor` over an :class:`xarray.DataArray`, lazily with dask.

    Parameters
    ----------
    da : xarray.DataArray
        Time series cube with a ``time_dim`` dimension; dates come from its coordinate
        (datetimes, or decimal years with ``freq``). Other dims are pixels.
    start : date, decimal year, (year, cycle) or a list of those
        As in :func:`tscube.bfast_monitor`; a list adds a ``start`` dimension.
    dates : array_like, optional
        Dates replacing the time coordinate (e.g. for a GeoTIFF whose bands are not dated).
    time_dim : str
        Name of the time dimension.
    client : dask.distributed.Client, optional
        Compute on this cluster (the result is returned computed).
    memory : int or str, optional
        Bytes one chunk may use while processed, e.g. ``"1GB"``.
    **kwargs
        Other arguments of :func:`tscube.bfast_monitor` (``order``, ``h``, ``level``,
        ``history``, ``freq``, ``nodata``, ``return_process``, ``engine``, ...).

    Returns
    -------
    xarray.Dataset
        One variable per output (``break_time``, ``break_index``, ``status``,
        ``magnitude``, ...) over the pixel dims (plus ``start`` for a list of starts);
        ``process``/``boundary`` over ``time`` too with ``return_process=True``. Pixel
        coordinates, CRS and transform are kept; ``attrs`` hold the parameters.
    """
    da, axis_dates = with_dates(da, dates, time_dim)
    kwargs = dict(kwargs)
    engine = kwargs.pop("engine", "auto")

    # Validate every parameter now (not inside a dask task), and learn the attrs, on
    # one all-missing pixel: cheap whatever the engine.
    probe = bfast_monitor_array(np.full((len(axis_dates), 1), np.nan), axis_dates, start, engine="reference",
                                **kwargs)
    attrs = dict(probe.attrs)
    attrs["engine"] = resolve("bfast_monitor", engine, largest_chunk_values(da, time_dim))
    many = isinstance(start, (list, np.ndarray, pd.Index))
    lead = ("start",) if many else ()
    specs = [OutputSpec(name, dtype, lead) for name, dtype in OUTPUT_DTYPES.items()]
    if kwargs.get("return_process"):
        specs += [OutputSpec(name, np.float64, lead + (time_dim,)) for name in ("process", "boundary")]
    sizes = {"start": len(attrs["start"])} if many else {}
    coords = {"start": np.asarray(attrs["start"], dtype=float)} if many else None

    ds = apply_time_series(
        da, partial_block(_bfast_block, dates=axis_dates, start=start, kwargs=dict(kwargs, engine=engine)),
        specs, time_dim=time_dim, sizes=sizes, coords=coords, memory=memory,
        bytes_per_value=64.0 if kwargs.get("return_process") else 40.0, client=client,
        serialize=attrs["engine"] in ("cpu", "cuda"),
    )
    describe_variables(ds, VARIABLE_ATTRS, BfastStatus, "pixel status (tscube.BfastStatus)")
    attrs["start_input"] = [str(s) for s in start] if many else str(start)
    ds.attrs.update(serialisable_attrs(dict(tscube_function="bfast_monitor", **attrs)))
    return ds
