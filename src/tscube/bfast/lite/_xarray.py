"""BFAST Lite over an xarray.DataArray, lazily with dask (on :mod:`tscube.xarray_blocks`)."""

from __future__ import annotations

import numpy as np

from ...engines import resolve
from ...timeaxis import build_time_axis
from ...xarray_blocks import (OutputSpec, apply_time_series, describe_variables, largest_chunk_values, partial_block,
                              serialisable_attrs, with_dates)
from ._array import make_lite_plan, run_engine
from .result import CRITERIA_OUTPUTS, LITE_OUTPUTS, VARIABLE_ATTRS, lite_attrs, named_outputs
from .status import BfastLiteStatus


def _lite_block(series, *, plan, engine, criteria):
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
    da, axis_dates = with_dates(da, dates, time_dim)
    plan = make_lite_plan(build_time_axis(axis_dates, freq), **kwargs)
    engine = resolve("bfast_lite", engine, largest_chunk_values(da, time_dim))
    attrs = lite_attrs(plan, engine)
    outputs = dict(LITE_OUTPUTS, **(CRITERIA_OUTPUTS if criteria else {}))
    specs = [OutputSpec(name, dtype, dims) for name, (dtype, dims) in outputs.items()]
    B = plan.break_slots
    sizes = {"break": B, "segment": B + 1, **({"model": B + 1} if criteria else {})}
    coords = {"break": np.arange(1, B + 1), "segment": np.arange(1, B + 2), **({"model": np.arange(B + 1)} if criteria else {})}
    ds = apply_time_series(
        da, partial_block(_lite_block, plan=plan, engine=engine, criteria=bool(criteria)), specs,
        time_dim=time_dim, sizes=sizes, coords=coords, memory=memory,
        bytes_per_value=40.0, client=client, serialize=attrs["engine"] in ("cpu", "cuda"),
    )
    describe_variables(ds, VARIABLE_ATTRS, BfastLiteStatus, "pixel status (tscube.BfastLiteStatus)")
    ds.attrs.update(serialisable_attrs(dict(tscube_function="bfast_lite", **attrs)))
    return ds
