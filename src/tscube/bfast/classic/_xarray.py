"""Classic BFAST over an xarray.DataArray, lazily with dask (on :mod:`tscube.xarray_blocks`)."""

from __future__ import annotations

import numpy as np

from ...engines import resolve
from ...timeaxis import build_time_axis
from ...xarray_blocks import (OutputSpec, apply_time_series, describe_variables, partial_block, serialisable_attrs,
                              with_dates)
from ._array import classic_attrs, run_engine
from .outputs import CLASSIC_OUTPUTS, ITERATION_OUTPUTS, VARIABLE_ATTRS, named_outputs
from .plan import make_classic_plan
from .status import BfastClassicStatus


def _classic_block(series, *, plan, engine, iterations):
    return named_outputs(run_engine(series, plan, engine, iterations), plan, iterations)


def bfast_classic_xarray(da, *, dates=None, time_dim: str = "time", client=None, memory=None, h: float = 0.15,
                         season: str = "dummy", max_iter: int = 10, breaks=None, level=0.05, type: str = "OLS-MOSUM",
                         freq=None, nodata=None, iterations: bool = False, engine: str = "auto"):
    """:func:`tscube.bfast_classic` over an :class:`xarray.DataArray`, lazily with dask.

    Parameters are those of :func:`bfast_monitor_xarray` (``dates``, ``time_dim``,
    ``client``, ``memory``) and of :func:`tscube.bfast_classic` (``h``, ``season``,
    ``max_iter``, ``breaks``, ``level``, ``type``, ``freq``, ``nodata``, ``iterations``,
    ``engine``). The dates must be a regular series of ``freq`` per year (R's ``ts``).

    Returns
    -------
    xarray.Dataset
        Per pixel ``status``, ``n_obs``, ``n_iter``, ``n_trend_breaks``,
        ``n_season_breaks``, ``magnitude``, ``magnitude_time``, ``trend_pretest_p``,
        ``season_pretest_p``; over a ``break`` dimension (1..B, B the most breaks any pixel
        can get: the same for every chunk, so that chunks fit one store)
        ``trend_break_index``, ``trend_break_time``, ``season_break_index``,
        ``season_break_time``, the confidence intervals ``trend_ci_lower``, ...,
        ``season_ci_upper`` (time indices) and ``magnitude_before``, ``magnitude_after``,
        ``magnitude_jump`` of each trend break; over ``time_dim`` the components
        ``trend``, ``seasonal``, ``remainder``; with ``iterations=True`` over
        (``iteration``, ``break``) ``iter_trend_break_index`` and ``iter_season_break_index``.
    """
    da, axis_dates = with_dates(da, dates, time_dim)
    plan = make_classic_plan(build_time_axis(axis_dates, freq), h=h, season=season, max_iter=max_iter, breaks=breaks,
                             level=level, type=type, nodata=nodata)
    engine = resolve("bfast_classic", engine)
    attrs = classic_attrs(plan, engine)
    outputs = dict(CLASSIC_OUTPUTS, **(ITERATION_OUTPUTS if iterations else {}))
    specs = [OutputSpec(name, dtype, tuple(time_dim if d == "time" else d for d in dims))
             for name, (dtype, dims) in outputs.items()]
    B = plan.break_slots
    sizes = {"break": B, **({"iteration": plan.max_iter} if iterations else {})}
    coords = {"break": np.arange(1, B + 1), **({"iteration": np.arange(1, plan.max_iter + 1)} if iterations else {})}
    ds = apply_time_series(
        da, partial_block(_classic_block, plan=plan, engine=engine, iterations=bool(iterations)), specs,
        time_dim=time_dim, sizes=sizes, coords=coords, memory=memory,
        bytes_per_value=80.0,  # the components are three float64 series as long as the input
        client=client, serialize=engine == "cpu",
    )
    describe_variables(ds, VARIABLE_ATTRS, BfastClassicStatus, "pixel status (tscube.BfastClassicStatus)")
    ds.attrs.update(serialisable_attrs(dict(tscube_function="bfast_classic", **attrs)))
    return ds
