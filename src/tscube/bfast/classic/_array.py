"""Classic BFAST on NumPy arrays: the plan, an engine, the result."""

from __future__ import annotations

import numpy as np

from ...engines import load, register, resolve
from ...timeaxis import build_time_axis
from ..core.inputs import as_time_first
from .plan import ClassicPlan, make_classic_plan
from .result import BfastClassicResult, shape_result

#: The engines of ``bfast_classic``: each module implements ``run(values, plan, iterations)``.
ENGINES = register("bfast_classic", {
    "reference": f"{__package__}._reference",
    "cpu": f"{__package__}._cpu",
}).modules


def classic_attrs(plan: ClassicPlan, engine: str) -> dict:
    """The parameters of the call, as stored with the result (and in files)."""
    return {
        "algorithm": "bfast_classic", "h": plan.h, "season": plan.season, "max_iter": plan.max_iter,
        "breaks_trend": "BIC" if plan.breaks[0] is None else plan.breaks[0],
        "breaks_season": "BIC" if plan.breaks[1] is None else plan.breaks[1],
        "level_trend": plan.level[0], "level_season": plan.level[1], "type": plan.test, "freq": plan.freq,
        "nodata": plan.nodata, "engine": engine,
    }


def run_engine(flat: np.ndarray, plan: ClassicPlan, engine: str, iterations: bool = False) -> dict:
    """Run one engine (resolved) on ``flat`` (T, P)."""
    return load("bfast_classic", engine).run(flat, plan, iterations)


def bfast_classic_array(data, dates, *, h: float = 0.15, season: str = "dummy", max_iter: int = 10, breaks=None,
                        level=0.05, type: str = "OLS-MOSUM", freq=None, nodata=None, iterations: bool = False,
                        engine: str = "auto") -> BfastClassicResult:
    """:func:`tscube.bfast_classic` of a NumPy ``data`` ``(T, ...)`` (same parameters)."""
    engine = resolve("bfast_classic", engine)
    values = as_time_first(data)
    axis = build_time_axis(dates, freq)
    if values.shape[0] != len(axis):
        raise ValueError(f"data has {values.shape[0]} dates on its first axis but dates has {len(axis)}")
    plan = make_classic_plan(axis, h=h, season=season, max_iter=max_iter, breaks=breaks, level=level, type=type,
                             nodata=nodata)
    flat = np.ascontiguousarray(values.reshape(values.shape[0], -1))
    outputs = run_engine(flat, plan, engine, bool(iterations))
    return shape_result(outputs, values.shape[1:], axis.time, classic_attrs(plan, engine))
