"""BFAST Monitor over an xarray.DataArray, lazily with dask (on :mod:`tscube.xarray_blocks`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..xarray_blocks import (describe_variables, OutputSpec, _datetime_like, apply_time_series, largest_chunk_values,
                             partial_block, serialisable_attrs, time_coordinate)

#: CF-style attributes of the BFAST Monitor output variables.
_BFAST_VARIABLE_ATTRS = {
    "break_time": dict(long_name="time of the first break", units="decimal year"),
    "break_index": dict(long_name="index of the first break on the time axis (-1: no break)"),
    "magnitude": dict(long_name="median residual of the monitoring period"),
    "relative_magnitude": dict(long_name="magnitude over the mean model prediction of the monitoring period"),
    "mosum_mean": dict(long_name="mean of the monitoring process (OLS-MOSUM or OLS-CUSUM) over the monitoring period"),
    "statistic": dict(long_name="max |process| over the monitoring period"),
    "sigma": dict(long_name="residual standard error of the history fit"),
    "rmse": dict(long_name="root mean squared residual of the history fit"),
    "history_start": dict(long_name="start of the stable history", units="decimal year"),
    "n_valid": dict(long_name="valid observations"),
    "n_history": dict(long_name="valid observations in the stable history"),
    "n_monitor": dict(long_name="valid observations in the monitoring period"),
    "n_inf": dict(long_name="infinite values (treated as missing)"),
    "process": dict(long_name="monitoring process (OLS-MOSUM or OLS-CUSUM, attrs type)"),
    "boundary": dict(long_name="boundary of the monitoring process"),
}

def _with_dates(da, dates, time_dim):
    """``da`` with ``dates`` as its time coordinate (if given), and the dates as NumPy."""
    if dates is not None:
        if time_dim not in da.dims:
            raise ValueError(f"data has no {time_dim!r} dimension (dims: {', '.join(map(str, da.dims))})")
        if len(dates) != da.sizes[time_dim]:
            raise ValueError(f"dates has {len(dates)} entries but data has {da.sizes[time_dim]} along {time_dim!r}")
        da = da.assign_coords({time_dim: pd.DatetimeIndex(pd.to_datetime(dates)) if _datetime_like(dates) else np.asarray(dates, dtype=float)})
    axis_dates = time_coordinate(da, time_dim)
    if isinstance(axis_dates, pd.DatetimeIndex):
        axis_dates = axis_dates.to_numpy()
    return da, axis_dates


def _bfast_block(series, *, dates, start, kwargs):
    from .monitor import bfast_monitor

    return bfast_monitor(series, dates, start, **kwargs).to_dict()

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
    from .monitor import bfast_monitor
    from .result import OUTPUT_DTYPES, BfastStatus

    da, axis_dates = _with_dates(da, dates, time_dim)
    kwargs = dict(kwargs)
    engine = kwargs.pop("engine", "auto")

    # Validate every parameter now (not inside a dask task), and learn the attrs, on
    # one all-missing pixel: cheap whatever the engine.
    probe = bfast_monitor(np.full((len(axis_dates), 1), np.nan), axis_dates, start, engine="reference", **kwargs)
    attrs = dict(probe.attrs)
    if engine == "auto":
        from ..engines import auto_engine

        attrs["engine"] = auto_engine(largest_chunk_values(da, time_dim))
    else:
        from .monitor import ENGINES

        if engine not in ENGINES:
            raise ValueError(f"engine must be one of 'auto', {', '.join(map(repr, ENGINES))}; got {engine!r}")
        attrs["engine"] = engine
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
    describe_variables(ds, _BFAST_VARIABLE_ATTRS, BfastStatus, "pixel status (tscube.BfastStatus)")
    attrs["start_input"] = [str(s) for s in start] if many else str(start)
    ds.attrs.update(serialisable_attrs(dict(tscube_function="bfast_monitor", **attrs)))
    return ds


#: CF-style attributes of the BFAST Lite output variables.
_LITE_VARIABLE_ATTRS = {
    "n_breaks": dict(long_name="number of breaks"),
    "magnitude": dict(long_name="trend change (after - before) of the break with the largest |change|"),
    "break_time": dict(long_name="time of the last observation before each break", units="decimal year"),
    "break_index": dict(long_name="time index of the last observation before each break (-1: none)"),
    "magnitude_before": dict(long_name="trend of the segment before the break, at the break"),
    "magnitude_after": dict(long_name="trend of the segment after the break, at the next observation"),
    "magnitude_diff": dict(long_name="after - before"),
    "magnitude_rmsd": dict(long_name="RMS difference of the two trend lines around the break"),
    "magnitude_mad": dict(long_name="mean absolute difference of the two trend lines around the break"),
    "magnitude_md": dict(long_name="mean difference of the two trend lines around the break"),
    "intercept": dict(long_name="intercept of each segment (R's parametrisation)"),
    "slope": dict(long_name="trend slope of each segment", units="per time-grid step"),
    "n_obs": dict(long_name="valid observations"),
    "h_obs": dict(long_name="minimum segment size", units="observations"),
    "max_breaks": dict(long_name="largest number of breaks considered"),
    "pretest_p": dict(long_name="p-value of the OLS-MOSUM pre-test"),
    "rss": dict(long_name="RSS of the best model with m breaks"),
    "bic": dict(long_name="BIC of the best model with m breaks"),
    "lwz": dict(long_name="LWZ of the best model with m breaks"),
}


def _lite_block(series, *, plan, engine, criteria):
    from .lite import named_outputs, run_engine

    return named_outputs(run_engine(series, plan, engine), plan, criteria)


def bfast_lite_xarray(da, *, dates=None, time_dim: str = "time", client=None, memory=None, criteria: bool = False,
                      engine: str = "auto", freq=None, **kwargs):
    """:func:`tscube.bfast_lite` over an :class:`xarray.DataArray`, lazily with dask.

    Parameters are those of :func:`bfast_monitor_xarray` (``dates``, ``time_dim``,
    ``client``, ``memory``) and of :func:`tscube.bfast_lite` (``order``, ``season``, ``h``,
    ``breaks``, ``max_breaks``, ``level``, ``criteria``, ``freq``, ``nodata``, ``engine``).

    Returns
    -------
    xarray.Dataset
        Per pixel ``n_breaks``, ``status``, ``magnitude``, ``n_obs``, ``h_obs``,
        ``max_breaks``, ``pretest_p``; over a ``break`` dimension (1..B, B the most breaks
        any pixel can get, or ``max_breaks``) ``break_time``, ``break_index`` and the six
        ``magnitude_*`` statistics; over ``segment`` (1..B+1) ``intercept`` and ``slope``;
        with ``criteria=True`` over ``model`` (m = 0..B) ``rss``, ``bic``, ``lwz``.
    """
    from ..timeaxis import build_time_axis
    from .lite import CRITERIA_OUTPUTS, LITE_OUTPUTS, lite_attrs, make_lite_plan, resolve_engine
    from .lite_result import BfastLiteStatus

    da, axis_dates = _with_dates(da, dates, time_dim)
    plan = make_lite_plan(build_time_axis(axis_dates, freq), **kwargs)
    engine = resolve_engine(engine)
    attrs = lite_attrs(plan, engine)
    outputs = dict(LITE_OUTPUTS, **(CRITERIA_OUTPUTS if criteria else {}))
    specs = [OutputSpec(name, dtype, dims) for name, (dtype, dims) in outputs.items()]
    B = plan.break_slots
    sizes = {"break": B, "segment": B + 1, **({"model": B + 1} if criteria else {})}
    coords = {"break": np.arange(1, B + 1), "segment": np.arange(1, B + 2), **({"model": np.arange(B + 1)} if criteria else {})}
    ds = apply_time_series(
        da, partial_block(_lite_block, plan=plan, engine=engine, criteria=bool(criteria)), specs,
        time_dim=time_dim, sizes=sizes, coords=coords, memory=memory,
        bytes_per_value=40.0, client=client, serialize=attrs["engine"] == "cpu",
    )
    describe_variables(ds, _LITE_VARIABLE_ATTRS, BfastLiteStatus, "pixel status (tscube.BfastLiteStatus)")
    ds.attrs.update(serialisable_attrs(dict(tscube_function="bfast_lite", **attrs)))
    return ds
