"""BFAST Lite on NumPy arrays: the plan, an engine, the result."""

from __future__ import annotations

import numpy as np

from ...engines import load, register, resolve
from ...timeaxis import build_time_axis
from ..core.inputs import as_time_first
from .plan import LitePlan, make_lite_plan
from .result import CRITERIA_OUTPUTS, BfastLiteResult, largest_magnitude, lite_attrs

#: The engines of ``bfast_lite``: each module implements ``run(values, plan)``.
ENGINES = register("bfast_lite", {
    "reference": f"{__package__}._reference",
    "cpu": f"{__package__}._cpu",
    "cuda": f"{__package__}._cuda",
}).modules


def run_engine(flat: np.ndarray, plan: LitePlan, engine: str) -> dict:
    """Run one engine (resolved) on ``flat`` (T, P)."""
    return load("bfast_lite", engine).run(flat, plan)


def bfast_lite_array(data, dates, *, order: int = 3, trend: bool = True, season: bool = False, h: float = 0.15,
                     breaks="LWZ", max_breaks: int | None = None, level: float = 0.0, magnitude_interval: float = 0.1,
                     criteria: bool = False, freq=None, nodata=None, engine: str = "auto") -> BfastLiteResult:
    """:func:`tscube.bfast_lite` of a NumPy ``data`` ``(T, ...)`` (same parameters)."""
    values = as_time_first(data)
    engine = resolve("bfast_lite", engine, values.size)
    axis = build_time_axis(dates, freq)
    if values.shape[0] != len(axis):
        raise ValueError(f"data has {values.shape[0]} dates on its first axis but dates has {len(axis)}")
    plan = make_lite_plan(axis, order=order, trend=trend, season=season, h=h, breaks=breaks, max_breaks=max_breaks,
                          level=level, magnitude_interval=magnitude_interval, nodata=nodata)
    flat = np.ascontiguousarray(values.reshape(values.shape[0], -1))
    outputs = run_engine(flat, plan, engine)
    return shape_result(outputs, plan, values.shape[1:], criteria=bool(criteria), engine=engine)


def shape_result(outputs: dict, plan: LitePlan, pixel_shape: tuple, *, criteria: bool, engine: str) -> BfastLiteResult:
    """Engine outputs (pixels flattened, break axis of ``plan.break_slots``) -> result
    shaped like the pixels, the break axis cut to the most breaks found (or max_breaks)."""
    n_found = int(outputs["n_breaks"].max(initial=0))
    B = min(plan.max_breaks or n_found, plan.break_slots)

    def pixels(array, lead=0):
        return array.reshape(array.shape[:lead] + pixel_shape + array.shape[lead + 1:])

    result = BfastLiteResult(
        n_breaks=pixels(outputs["n_breaks"]),
        break_index=pixels(outputs["break_index"][:B], 1),
        break_time=pixels(outputs["break_time"][:B], 1),
        magnitudes=pixels(outputs["magnitudes"][:B], 1),
        magnitude=pixels(largest_magnitude(outputs["magnitudes"], outputs["n_breaks"])),
        coefficients=pixels(outputs["coefficients"][: B + 1], 1),
        status=pixels(outputs["status"]),
        n_obs=pixels(outputs["n_obs"]),
        h_obs=pixels(outputs["h_obs"]),
        max_breaks=pixels(outputs["max_breaks"]),
        pretest_p=pixels(outputs["pretest_p"]),
        attrs=lite_attrs(plan, engine),
    )
    if criteria:
        M = int(outputs["max_breaks"].max(initial=0))
        for name in CRITERIA_OUTPUTS:
            setattr(result, name, pixels(outputs[name][: M + 1], 1))
    return result
