"""BFAST Monitor on NumPy arrays: validate the parameters, build the design and the plan
once, run an engine, shape its outputs into the result."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ...engines import load, register, resolve
from ...timeaxis import TIME_TOL, build_time_axis, format_when, to_decimal_year
from ..core.design import build_design, n_regressors
from ..core.inputs import as_time_first, check_nodata, check_order
from .calibration import calibrate_plan
from .critval import check_process_type, critical_value
from .history import HISTORY_METHODS, ROC_LAMBDA_05
from .plan import MAX_REGRESSORS, MonitorPlan
from .result import BfastMonitorResult

#: The engines of ``bfast_monitor``: each module implements ``run(values, plan)``.
ENGINES = register("bfast_monitor", {
    "reference": f"{__package__}._reference",
    "cpu": f"{__package__}._cpu",
    "cuda": f"{__package__}._cuda",
}).modules


def _as_levels(level) -> tuple[float, float]:
    if isinstance(level, (Sequence, np.ndarray)) and not isinstance(level, str):
        levels = [float(v) for v in np.asarray(level, dtype=float).reshape(-1)]
        if len(levels) == 1:
            levels *= 2
        if len(levels) != 2:
            raise ValueError(f"level must be a number or a pair (monitoring, ROC), got {level!r}")
    else:
        levels = [float(level)] * 2
    if not 0 < levels[1] < 1:
        raise ValueError(f"ROC level must be in (0, 1), got {levels[1]}")
    return levels[0], levels[1]


def _as_starts(start, axis) -> tuple[np.ndarray, bool]:
    """Monitoring starts as decimal years; ``True`` when ``start`` was a list of starts."""
    is_list = isinstance(start, (list, np.ndarray, pd.Index))
    values = list(start) if is_list else [start]
    if not values:
        raise ValueError("start is an empty list")
    starts = np.array([to_decimal_year(v, axis, "start") for v in values])
    first, last = axis.time[0], axis.time[-1]
    for value, t in zip(values, starts):
        if t <= first + TIME_TOL:
            raise ValueError(
                f"start {format_when(value)} (= {t:.6f}) is at or before the first date ({first:.6f}): "
                "there is no history period to fit the model on"
            )
        if t > last + TIME_TOL:
            raise ValueError(
                f"start {format_when(value)} (= {t:.6f}) is after the last date ({last:.6f}): "
                "there is nothing to monitor"
            )
    return starts, is_list


def monitor_plan(n_dates: int, dates, start, *, order: int = 3, trend: bool = True, season: bool = False,
                 type: str = "OLS-MOSUM", h: float = 0.25, level=0.05, end: float = 10, history="ROC", freq=None,
                 nodata=None, return_process: bool = False) -> tuple[MonitorPlan, bool, float, float | None]:
    """The checked parameters of a :func:`tscube.bfast_monitor` call on ``n_dates`` dates, as
    the engines take them: ``(plan, many_starts, level_monitor, history_time)``
    (``history_time``: the decimal year of a fixed history's start, else None)."""
    axis = build_time_axis(dates, freq)
    if n_dates != len(axis):
        raise ValueError(f"data has {n_dates} dates on its first axis but dates has {len(axis)}")
    order = check_order(order)
    nodata = check_nodata(nodata)
    check_process_type(type)
    level_monitor, level_roc = _as_levels(level)
    critval = critical_value(h, end, level_monitor, type)
    starts, many_starts = _as_starts(start, axis)

    if isinstance(history, str):
        if history not in HISTORY_METHODS:
            raise ValueError(f"history must be one of {HISTORY_METHODS} or a date, got {history!r}")
        method, history_time = history, None
    else:
        method = "fixed"
        history_time = to_decimal_year(history, axis, "history")
        if np.any(history_time >= starts - TIME_TOL):
            raise ValueError(f"history {format_when(history)} must lie before every monitoring start")
    history_begin = 0 if history_time is None else int(np.searchsorted(axis.time, history_time - TIME_TOL))

    k = n_regressors(axis.freq, order, bool(trend), bool(season))
    if k > MAX_REGRESSORS:
        raise ValueError(
            f"the model has {k} regressors ({'season dummies' if season else 'harmonics'} at freq = {axis.freq}); "
            f"at most {MAX_REGRESSORS} are supported: aggregate the series to a coarser grid"
        )
    design = build_design(axis, order, bool(trend), bool(season))
    plan = MonitorPlan(
        axis=axis,
        design=design,
        process_type=type,
        starts=starts,
        monitor_begin=np.searchsorted(axis.time, starts - TIME_TOL).astype(np.int64),
        history=method,
        history_begin=history_begin,
        h=float(h),
        critval=critval,
        level_roc=level_roc,
        roc_lambda=ROC_LAMBDA_05,
        nodata=nodata,
        return_process=bool(return_process),
    )
    return plan, many_starts, level_monitor, history_time


def bfast_monitor_array(data, dates, start, *, order: int = 3, trend: bool = True, season: bool = False,
                        type: str = "OLS-MOSUM", h: float = 0.25, level=0.05, end: float = 10, history="ROC",
                        freq=None, nodata=None, return_process: bool = False, calibrate: bool = False,
                        engine: str = "auto") -> BfastMonitorResult:
    """:func:`tscube.bfast_monitor` of a NumPy ``data`` ``(T, ...)`` (same parameters)."""
    values = as_time_first(data)
    plan, many_starts, level_monitor, history_time = monitor_plan(
        values.shape[0], dates, start, order=order, trend=trend, season=season, type=type, h=h, level=level, end=end,
        history=history, freq=freq, nodata=nodata, return_process=return_process)
    critval = plan.critval

    pixel_shape = values.shape[1:]
    # Engines get one C-contiguous (T, P) layout: a view for contiguous input, one copy
    # for a strided slice (which the kernels would read slowly, and numba would compile
    # a second time for its 'A' layout).
    flat = np.ascontiguousarray(values.reshape(values.shape[0], -1))
    engine = resolve("bfast_monitor", engine, flat.size)
    engine_module = load("bfast_monitor", engine)
    if (calibrate or plan.history in ("ROC", "BP")) and hasattr(engine_module, "compile_ahead"):
        # the history selection and the calibration compile kernels of their own first: on
        # a first call, another process compiles the engine's meanwhile
        engine_module.compile_ahead(flat, plan)
    if calibrate:
        plan = calibrate_plan(flat, plan, level_monitor)
    outputs = engine_module.run(flat, plan)

    lead = (plan.n_starts,) if many_starts else ()
    shaped = {}
    for name, array in outputs.items():
        array = array if many_starts else array[0]
        if name in ("process", "boundary"):
            shaped[name] = array.reshape(lead + values.shape)
        else:
            shaped[name] = array.reshape(lead + pixel_shape)
    attrs = dict(
        start=plan.starts if many_starts else float(plan.starts[0]),
        order=plan.design.order,
        trend=bool(trend),
        season=bool(season),
        type=type,
        regressors=list(plan.design.names),
        h=float(h),
        level=(level_monitor, plan.level_roc),
        end=end,
        critval=critval,
        calibrate=bool(calibrate),
        history=history if isinstance(history, str) else float(history_time),
        freq=plan.axis.freq,
        engine=engine,
    )
    return BfastMonitorResult(**shaped, attrs=attrs)
