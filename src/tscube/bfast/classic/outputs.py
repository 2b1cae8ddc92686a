"""The named outputs of classic BFAST: the engines' dict as flat, per-pixel variables
(xarray variables, CLI bands) with their attributes. :mod:`.result` keeps the engines'
own layout (confidence intervals and magnitudes as trailing columns) for the NumPy result;
files and Datasets need one plain variable per quantity instead, which this table names."""

from __future__ import annotations

from typing import Any

import numpy as np

from .plan import ClassicPlan
from .result import COMPONENTS, MAGNITUDE_COLUMNS, break_times

#: The two break sets of classic BFAST, as the engines name them.
PARTS = ("trend", "season")

#: Named per-pixel outputs of classic BFAST: dtype and the extra dimensions ("break": one
#: per break slot, 1..``plan.break_slots``; "time": the input's time dimension).
CLASSIC_OUTPUTS: dict[str, tuple[Any, tuple[str, ...]]] = {
    "status": (np.int8, ()),
    "n_obs": (np.int32, ()),
    "n_iter": (np.int32, ()),
    "n_trend_breaks": (np.int32, ()),
    "n_season_breaks": (np.int32, ()),
    "magnitude": (np.float64, ()),
    "magnitude_time": (np.float64, ()),
    "trend_pretest_p": (np.float64, ()),
    "season_pretest_p": (np.float64, ()),
    **{f"{part}_break_{what}": (dtype, ("break",)) for part in PARTS
       for what, dtype in (("index", np.int64), ("time", np.float64))},
    **{f"{part}_ci_{bound}": (np.float64, ("break",)) for part in PARTS for bound in ("lower", "upper")},
    **{f"magnitude_{column}": (np.float64, ("break",)) for column in MAGNITUDE_COLUMNS},
    **{name: (np.float64, ("time",)) for name in COMPONENTS},
}
#: Every iteration's break sets (``iterations=True``), over ("iteration", "break").
ITERATION_OUTPUTS = {f"iter_{part}_break_index": (np.int64, ("iteration", "break")) for part in PARTS}


def named_outputs(raw: dict, plan: ClassicPlan, iterations: bool = False) -> dict[str, np.ndarray]:
    """Engine outputs -> the arrays of :data:`CLASSIC_OUTPUTS` (pixels last, the full
    ``plan.break_slots`` break axis), plus every iteration's break sets on request."""
    time = plan.axis.time
    out = {name: raw[name] for name in ("status", "n_obs", "n_iter", "n_trend_breaks", "n_season_breaks", "magnitude",
                                        "trend_pretest_p", "season_pretest_p", *COMPONENTS)}
    out["magnitude_time"] = break_times(raw["magnitude_index"], time)
    for part in PARTS:
        index = raw[f"{part}_break_index"]
        out[f"{part}_break_index"] = index
        out[f"{part}_break_time"] = break_times(index, time)
        out[f"{part}_ci_lower"] = raw[f"{part}_confint"][..., 0]
        out[f"{part}_ci_upper"] = raw[f"{part}_confint"][..., 1]
    for i, column in enumerate(MAGNITUDE_COLUMNS):
        out[f"magnitude_{column}"] = raw["magnitudes"][..., i]
    if iterations:
        out.update({name: raw[name] for name in ITERATION_OUTPUTS})
    return out


#: CF-style attributes of the classic BFAST output variables.
VARIABLE_ATTRS = {
    "n_obs": dict(long_name="valid observations"),
    "n_iter": dict(long_name="iterations run"),
    "n_trend_breaks": dict(long_name="number of trend breaks"),
    "n_season_breaks": dict(long_name="number of seasonal breaks"),
    "magnitude": dict(long_name="trend jump (after - before) of the trend break with the largest |jump| "
                                "(0: no trend break)", units="data units"),
    "magnitude_time": dict(long_name="time of the last observation before the trend break with the largest |jump|",
                           units="decimal year"),
    "trend_pretest_p": dict(long_name="p-value of the last iteration's pre-test of the trend", units="1"),
    "season_pretest_p": dict(long_name="p-value of the last iteration's pre-test of the seasonal model", units="1"),
    **{f"{part}_break_index": dict(long_name=f"time index of the last observation before each {label} break "
                                             "(-1: none)")
       for part, label in zip(PARTS, ("trend", "seasonal"))},
    **{f"{part}_break_time": dict(long_name=f"time of the last observation before each {label} break",
                                  units="decimal year")
       for part, label in zip(PARTS, ("trend", "seasonal"))},
    **{f"{part}_ci_{bound}": dict(long_name=f"{bound} bound of the 95 % confidence interval of each {label} "
                                            "breakpoint (may lie outside the series)", units="time index")
       for part, label in zip(PARTS, ("trend", "seasonal")) for bound in ("lower", "upper")},
    "magnitude_before": dict(long_name="trend of the segment before each trend break, at the break",
                             units="data units"),
    "magnitude_after": dict(long_name="trend of the segment after each trend break, at the next observation",
                            units="data units"),
    "magnitude_jump": dict(long_name="after - before", units="data units"),
    "trend": dict(long_name="trend component Tt of the last iteration", units="data units"),
    "seasonal": dict(long_name="seasonal component St of the last iteration", units="data units"),
    "remainder": dict(long_name="remainder Nt = Yt - Tt - St", units="data units"),
    "iter_trend_break_index": dict(long_name="trend breakpoints of each iteration (-1: none)"),
    "iter_season_break_index": dict(long_name="seasonal breakpoints of each iteration (-1: none)"),
}
