"""The near-real-time state of BFAST Monitor in memory: fit it, update it with new images,
read its result (see :mod:`tscube.bfast.nrt` for what it holds)."""

from __future__ import annotations

import math

import numpy as np

from ..._threads import run_tasks, task_count
from ...timeaxis import TIME_TOL, build_time_axis
from ..core.design import build_design
from ..core.inputs import check_numeric_dtype, invalid_mask
from ..monitor import OUTPUT_DTYPES, BfastStatus, bfast_monitor_array, empty_outputs
from ..monitor.calibration import calibrated_critvals, drift_coefficients, model_of, pixel_features
from ..monitor.history import ROC_LAMBDA_05, history_first
from ..monitor.plan import MonitorPlan
from ._cpu import (BLOCK, CODE_KINDS, FITTED_CODES, HOT, HOT_WIDTH, RESULT_OUTPUTS, advance, empty_record,
                   fit_history, record_views, result_lanes)

#: Version of the state layout (saved with the state; a version not in
#: :data:`READABLE_VERSIONS` is not loaded). 6: the per-pixel ``critval``.
STATE_VERSION = 6
#: Layouts this tscube reads: a version 5 state has no ``critval`` (R's for every pixel).
READABLE_VERSIONS = (5, 6)

#: Per-pixel state arrays (name -> dtype). ``coefficients`` is ``(k, P)``, ``tail``
#: ``(W, P)``, ``median_window`` ``(MEDIAN_WINDOW, P)`` and ``residuals`` ``(M, P)`` (M
#: monitoring dates); ``critval`` ``(P,)`` when calibrated, else ``(0,)`` (the model's
#: critical value for every pixel); the others ``(P,)``.
STATE_FIELDS = {
    "fitted_status": np.int8,
    "history_begin": np.int64,
    "n_history": np.int32,
    "n_valid": np.int32,
    "n_monitor": np.int32,
    "n_inf": np.int32,
    "coefficients": np.float64,
    "sigma": np.float64,
    "tail": np.float64,
    "leaving": np.int32,
    "window_sum": np.float64,
    "residual_sum": np.float64,
    "fitted_sum": np.float64,
    "process_sum": np.float64,
    "statistic": np.float64,
    "break_index": np.int32,
    "leaving_value": np.float64,
    "median_window": np.float64,
    "median_count": np.int32,
    "median_below": np.int32,
    "median_above": np.int32,
    "residuals": np.float64,
    "critval": np.float64,
}

#: The state's arrays that the fit sets and updates only read.
STATIC = tuple(name for name in STATE_FIELDS if name not in HOT and name != "residuals")
#: ``inf_added`` of :func:`advance` when no infinite value came.
_NO_INF = np.zeros(0, dtype=np.int32)
#: Parameters of :func:`tscube.bfast_monitor` that define the model (saved with the state).
MODEL_PARAMS = ("order", "trend", "h", "level", "end", "history", "freq", "nodata", "calibrate")
#: State arrays that may be empty (size 0): ``critval`` of an uncalibrated state.
OPTIONAL = ("critval",)



def design_rows(axis, rows, model: dict) -> np.ndarray:
    """Design rows of the time indices ``rows`` of ``axis``, in the parametrisation of the
    fit (the trend column centred and scaled as at fit time, whatever the dates now)."""
    design = build_design(axis, model["order"], bool(model["trend"]), **_season(model))
    X = np.array(design.matrix[rows], dtype=np.float64)
    if "trend" in design.names:
        X[:, design.names.index("trend")] = (axis.trend[rows] - model["trend_centre"]) / model["trend_scale"]
    return np.ascontiguousarray(X)


def _season(model: dict) -> dict:
    return {"season": True} if model.get("season") else {}


def _as_lanes(values: np.ndarray, nodata) -> tuple[np.ndarray, np.ndarray]:
    """``(T, P)`` float64 with NaN for every missing value, and the infinite values per
    lane (:data:`_NO_INF` for none)."""
    missing, is_inf = invalid_mask(values, nodata)
    Y = values.astype(np.float64)
    Y[missing] = np.nan
    return Y, is_inf.sum(axis=0, dtype=np.int32) if is_inf.any() else _NO_INF


def _empty_state(n_pixels: int, k: int, window: int, n_monitor_dates: int, calibrated: bool) -> dict[str, np.ndarray]:
    shapes = {"coefficients": (k, n_pixels), "tail": (window, n_pixels), "residuals": (n_monitor_dates, n_pixels),
              "critval": (n_pixels if calibrated else 0,)}
    state = {}
    for name in STATIC + ("residuals",):
        dtype = STATE_FIELDS[name]
        fill = -1 if name == "history_begin" else (0 if np.issubdtype(dtype, np.integer) else np.nan)
        state[name] = np.full(shapes.get(name, (n_pixels,)), fill, dtype=dtype)
    return with_hot(state, empty_record(n_pixels))


def with_hot(state: dict, hot: np.ndarray) -> dict[str, np.ndarray]:
    """``state`` (its arrays but those of the record) with the record ``hot`` and its views."""
    state = {name: array for name, array in state.items() if name not in HOT}
    state["hot"] = hot
    state.update(record_views(hot))
    return state


def hot_record(get, n_pixels: int, out: np.ndarray | None = None) -> np.ndarray:
    """The record of the arrays ``get(name)`` of :data:`HOT` (into ``out`` when given)."""
    hot = np.zeros((n_pixels, HOT_WIDTH)) if out is None else out
    for name, view in record_views(hot).items():
        view[...] = get(name)
    return hot


def state_part(state: dict, pixels: slice) -> dict[str, np.ndarray]:
    """The state of the pixels ``pixels`` (views), without the residuals."""
    return with_hot({name: state[name] if is_absent(state[name]) else state[name][..., pixels] for name in STATIC},
                    state["hot"][pixels])


def is_absent(array: np.ndarray) -> bool:
    """Whether an :data:`OPTIONAL` state array is empty (the model's value for every pixel)."""
    return array.ndim == 1 and array.size == 0


def absent(name: str) -> np.ndarray:
    """The empty array of an :data:`OPTIONAL` state array that a state does not hold."""
    return np.zeros(0, dtype=STATE_FIELDS[name])


def fit_state(values: np.ndarray, dates, start, *, engine: str = "auto", **params) -> tuple[dict, dict]:
    """The monitoring state of the pixels ``values`` ``(T, P)`` after the dates ``dates``.

    Runs :func:`tscube.bfast_monitor` (any engine) for the per-pixel history selection,
    refits each selected history (float64 normal equations, the engines' equilibrated
    Cholesky) and monitors the dates from ``start`` on with the update kernel. Returns
    ``(state, model)``: the arrays of :data:`STATE_FIELDS` and the shared parameters.
    """
    if isinstance(start, (list, np.ndarray)) and not isinstance(start, str):
        raise ValueError("a monitoring state holds one start: pass a single start (not a list)")
    if params.get("return_process"):
        raise ValueError("return_process is not available for a monitoring state")
    params.pop("return_process", None)
    calibrate = bool(params.pop("calibrate", False))
    first = bfast_monitor_array(values, dates, start, engine=engine, **params)
    attrs = first.attrs
    freq = params.get("freq")
    axis = build_time_axis(dates, freq)
    design = build_design(axis, attrs["order"], attrs["trend"], **_season(attrs))
    start_time = float(attrs["start"])
    begin = int(np.searchsorted(axis.time, start_time - TIME_TOL))
    h = float(attrs["h"])
    model = {
        "start": start_time, "order": int(attrs["order"]), "trend": bool(attrs["trend"]),
        "season": bool(attrs.get("season", False)), "type": attrs.get("type", "OLS-MOSUM"), "h": h,
        "level": list(attrs["level"]), "end": attrs["end"],
        "critval": float(attrs["critval"]), "calibrate": calibrate, "history": attrs["history"], "freq": freq,
        "nodata": params.get("nodata"), "engine": attrs["engine"], "regressors": list(design.names),
        "trend_centre": float(design.trend_centre), "trend_scale": float(design.trend_scale),
        "window_slots": max(int(math.floor(h * begin)), 1), "input_dtype": str(values.dtype),
    }
    options = sorted(key for key in params if key not in MODEL_PARAMS)
    model.update({key: params[key] for key in options}, options=options)
    Y, _ = _as_lanes(values, model["nodata"])
    n_pixels = Y.shape[1]
    k = design.k
    state = _empty_state(n_pixels, k, model["window_slots"], Y.shape[0] - begin, calibrate)

    status = first.status
    for name in ("n_history", "n_valid", "n_inf"):
        state[name][:] = getattr(first, name)
    has_history = np.isfinite(first.history_start)
    state["history_begin"][has_history] = np.searchsorted(axis.time, first.history_start[has_history] - TIME_TOL)
    fitted = status.copy()
    fitted[status == BfastStatus.ALL_MISSING] = BfastStatus.TOO_FEW_HISTORY  # what later data would make it
    unmonitored = status == BfastStatus.NO_MONITORING_DATA
    fitted[unmonitored] = BfastStatus.OK
    fit = np.isin(fitted, FITTED_CODES)

    singular = np.zeros(n_pixels, dtype=np.bool_)
    perfect = np.zeros(n_pixels, dtype=np.bool_)
    levels, all_levels = design.kernel_levels()
    run_tasks(fit_history, task_count(n_pixels), Y, design.matrix, levels, all_levels,
              np.maximum(state["history_begin"], 0), begin, fit, h, state["coefficients"], state["sigma"], state["tail"],
              state["hot"], singular, perfect)
    # pixels without monitoring data: the engine stopped before the checks a fit makes
    fitted[unmonitored & singular] = BfastStatus.SINGULAR_DESIGN
    fitted[unmonitored & perfect & ~singular] = BfastStatus.PERFECT_FIT
    flag_pixels = np.flatnonzero(unmonitored & (fitted == BfastStatus.OK))
    if flag_pixels.size and attrs["history"] in ("ROC", "BP"):
        fitted[flag_pixels[_history_flags(values[:, flag_pixels], axis, design, begin, model)]] = (
            BfastStatus.BP_TOO_SHORT if attrs["history"] == "BP" else BfastStatus.ROC_NO_CROSSING)
    state["fitted_status"][:] = fitted
    if calibrate:
        state["critval"][:] = horizon_critvals(values, axis, design, state["history_begin"], begin, model)
    rows = np.arange(begin, Y.shape[0])
    _advance_state(state, Y[begin:], rows, design.matrix[begin:], model)
    return state, model


def _fit_plan(axis, design, begin: int, model: dict) -> MonitorPlan:
    """The :class:`~tscube.bfast.monitor.plan.MonitorPlan` of the fit's model, monitoring
    from date index ``begin``."""
    return MonitorPlan(axis=axis, design=design, starts=np.array([model["start"]]),
                       monitor_begin=np.array([begin], dtype=np.int64), history=model["history"], history_begin=0,
                       process_type=model["type"], h=model["h"], critval=model["critval"],
                       level_roc=float(model["level"][1]), roc_lambda=ROC_LAMBDA_05, nodata=model["nodata"],
                       return_process=False)


def horizon_critvals(values: np.ndarray, axis, design, history_begin: np.ndarray, begin: int,
                     model: dict) -> np.ndarray:
    """Each pixel's critical value calibrated for monitoring until the horizon ``end`` (R's
    ``end``: ``end`` history sizes from the history start), its observations as frequent
    and as gappy as in its history (the dates to come are not known; the monitoring so far
    counts where it is longer): :mod:`tscube.bfast.monitor.calibration`."""
    plan = _fit_plan(axis, design, begin, model)
    first = np.maximum(history_begin, 0)[None, :]
    n, m, _, spacing = pixel_features(values, model["nodata"], first, plan.monitor_begin, axis.slot, plan.h, plan.cusum)
    n, m, spacing = n[0], m[0], spacing[0]
    m = np.maximum(m, np.rint((float(model["end"]) - 1.0) * n).astype(np.int64))
    a, b = drift_coefficients(n, m, np.floor(plan.h * n), 1.0, plan.cusum)
    return calibrated_critvals(model_of(plan), float(model["level"][0]), n, m, a + b, spacing)  # stretch 1


def _history_flags(values, axis, design, begin, model) -> np.ndarray:
    """Whether the history selection of these pixels (all without monitoring data) is
    flagged (ROC_NO_CROSSING, BP_TOO_SHORT): the engines report it only for monitored
    pixels, so the cpu history kernel selects their histories once more."""
    _, flagged = history_first(np.ascontiguousarray(values), _fit_plan(axis, design, begin, model))
    return flagged[0]


def _advance_state(state: dict, Y: np.ndarray, rows: np.ndarray, X: np.ndarray, model: dict, pixel0: int = 0,
                   count_valid: bool = False, inf_added: np.ndarray = _NO_INF, result: tuple = (),
                   serial: bool = False, fresh: np.ndarray | None = None) -> None:
    """Monitor the new rows ``Y`` (time indices ``rows``, design ``X``) into ``state``, in
    place; their residuals go to the last ``len(Y)`` rows of ``state["residuals"]`` (NaN),
    or to ``fresh`` (``len(Y)`` rows of NaN, a column per lane) when given, after all the
    rows of ``state["residuals"]``. The fit's arrays of ``state`` and its residual rows
    may cover more pixels than ``Y``: their columns from ``pixel0`` on are the lanes of
    ``Y`` (a band of a saved state, with ``fresh``), the others are left alone; its
    records ``hot`` have a row per lane, updated in place; ``count_valid``,
    ``inf_added``: see :func:`advance`; ``result``: ``(time, alert_from, out)``, the
    lanes' result computed on the way (``out``: a dict of :func:`result_buffers`);
    ``serial``: on the calling thread alone, else on every core."""
    residuals = state["residuals"]
    if fresh is None:
        fresh = residuals[residuals.shape[0] - Y.shape[0]:]
        residuals = residuals[:residuals.shape[0] - Y.shape[0]]
    time, alert_from, out = result if result else (_NO_TIME, 0, None)
    run_tasks(advance, 1 if serial else task_count(-(-Y.shape[1] // BLOCK)), Y, X, rows.astype(np.int64), residuals.shape[0], pixel0, fit_arrays(state),
              CODE_KINDS, monitoring_test(model), residuals, fresh, count_valid, inf_added, state["hot"], time,
              alert_from, _NO_RESULT if out is None else tuple(out[name] for name in RESULT_OUTPUTS))


def fit_arrays(state: dict) -> tuple:
    """The fit's per-pixel arrays as the kernels take them (their ``fit``):
    ``(fitted_status as uint8, coefficients, sigma, n_history, history_begin, tail, critval)``
    (``critval`` empty: the model's for every pixel)."""
    return (state["fitted_status"].view(np.uint8), state["coefficients"], state["sigma"], state["n_history"],
            state["history_begin"], state["tail"], np.ascontiguousarray(state.get("critval", absent("critval"))))


def monitoring_test(model: dict) -> tuple:
    """The monitoring test as the kernels take it (their ``test``): ``(h, critval, cusum)``."""
    return float(model["h"]), float(model["critval"]), model["type"] == "OLS-CUSUM"


def _more_rows(rows: np.ndarray, extra: int) -> np.ndarray:
    """``rows`` ``(M, P)`` followed by ``extra`` rows of NaN. The rows live at the start of
    a buffer with spare capacity (it doubles when full), so an update does not copy the
    residuals of every earlier date: the result is a longer view of the same buffer when
    it has room."""
    M, P = rows.shape
    base = rows.base
    if (isinstance(base, np.ndarray) and base.ndim == 2 and base.shape[1] == P and base.shape[0] >= M + extra
            and base.flags.c_contiguous and rows.__array_interface__["data"][0] == base.__array_interface__["data"][0]):
        grown = base[:M + extra]
    else:  # NaN-filled now: the pages of the spare rows are touched once, not by each update
        buffer = np.full((max(2 * M, M + extra, 16), P), np.nan, dtype=rows.dtype)
        buffer[:M] = rows
        grown = buffer[:M + extra]
    grown[M:] = np.nan
    return grown


def update_state(state: dict, model: dict, dates, values: np.ndarray, new_dates) -> dict:
    """The state after the new images ``values`` ``(T_new, P)`` at ``new_dates``.

    ``dates`` are all the dates the state has seen; ``new_dates`` must all be later.
    The per-pixel arrays of ``state`` are updated in place (no copy of the state); the
    residual store grows (into its buffer's spare rows), so the returned state holds a new
    ``residuals`` array.
    """
    check_image_dtype(model, values)  # before the residual rows grow
    n_new = len(join_dates(dates, new_dates)) - len(dates)  # refuses dates that are not later
    new = dict(state, residuals=_more_rows(state["residuals"], n_new))
    monitor_new_dates(new, model, dates, values, new_dates)
    return new


def check_image_dtype(model: dict, values: np.ndarray) -> None:
    """Refuse new images whose numbers are of another kind than those the state was fitted
    on (model's ``input_dtype``): integers of another type, or integers where floats were
    (a scaled int16 NDVI after float NDVI would be monitored as a change of 10000x); floats
    of any precision are taken for floats. States saved before this rule are not checked."""
    check_numeric_dtype(values, "images")
    fitted = model.get("input_dtype")
    if fitted is None:
        return
    fitted, new = np.dtype(fitted), np.dtype(values.dtype)
    if new != fitted and not (fitted.kind == "f" and new.kind == "f"):
        raise TypeError(f"the new images are {new}, the state was fitted on {fitted} images: images of one series "
                        f"must share their type and scale; convert them to {fitted}")


def monitor_new_dates(state: dict, model: dict, dates, values: np.ndarray, new_dates) -> None:
    """Monitor the new images ``values`` ``(T_new, P)`` at ``new_dates`` into ``state``, in
    place; ``state["residuals"]`` already ends with ``T_new`` rows of NaN for them."""
    check_image_dtype(model, values)
    _, _, rows, X = new_design(model, dates, new_dates)
    Y, inf_added = _as_lanes(values, model["nodata"])
    _advance_state(state, Y, rows, X, model, count_valid=True, inf_added=inf_added)


def new_design(model: dict, dates, new_dates) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(all_dates, time, rows, X)`` of new dates: all the dates (refused unless the new
    ones are later, :func:`join_dates`), their time axis, the new dates' time indices and
    design rows (in the fit's parametrisation)."""
    all_dates = join_dates(dates, new_dates)
    axis = build_time_axis(all_dates, model["freq"])
    rows = np.arange(len(dates), len(all_dates))
    return all_dates, axis.time, rows, design_rows(axis, rows, model)


def join_dates(dates, new_dates):
    """``dates`` followed by ``new_dates``, refused unless every new date is later than the last one."""
    dates = np.asarray(dates)
    new_dates = np.asarray(new_dates)
    if len(new_dates) == 0:
        return dates
    datetime_old = np.issubdtype(dates.dtype, np.datetime64)
    if datetime_old:
        import pandas as pd

        new_dates = np.asarray(pd.to_datetime(new_dates), dtype=dates.dtype)
    elif not np.issubdtype(new_dates.dtype, np.number):
        raise TypeError("the state was fitted on decimal years: new dates must be decimal years too")
    if not np.all(new_dates[1:] > new_dates[:-1]):
        raise ValueError("new dates must be strictly increasing")
    if not new_dates[0] > dates[-1]:
        raise ValueError(f"new date {new_dates[0]} is not after the last monitored date {dates[-1]}: "
                         "a state only takes images newer than the last one")
    return np.concatenate([dates, new_dates])


def state_result(state: dict, model: dict, dates, out: dict | None = None,
                 time: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The outputs of :func:`tscube.bfast_monitor` (flat, by name) that the state stands for
    (into the arrays of ``out`` when given: one per output, shaped as the state's lanes,
    ``n_history`` and ``critval`` optional; ``time``: the time axis of ``dates``, when the caller has it).

    Every output of ``OUTPUT_DTYPES`` needs a line in :func:`_result_block` (one added
    there stays NaN until it has one; the equality tests compare every output with the
    full run)."""
    time = build_time_axis(dates, model["freq"]).time if time is None else time
    fitted_status = state["fitted_status"]
    if out is None:
        out = {name: array[0] for name, array in empty_outputs(1, fitted_status.shape[0]).items()}
    if "n_history" in out:
        out["n_history"][...] = state["n_history"]
    if "critval" in out:
        critval = state.get("critval", absent("critval"))
        out["critval"][...] = model["critval"] if is_absent(critval) else critval
    lanes = tuple(out[name] for name in RESULT_OUTPUTS[:13]) + _NO_RESULT[13:]
    run_tasks(result_lanes, task_count(-(-state["hot"].shape[0] // BLOCK)), fit_arrays(state), CODE_KINDS, state["hot"], time, lanes)
    return out


def result_buffers(n_pixels: int) -> dict[str, np.ndarray]:
    """Arrays for the result of ``n_pixels`` lanes, by the names of :data:`RESULT_OUTPUTS`."""
    dtypes = dict(OUTPUT_DTYPES, alert=np.bool_, changes=np.uint8)
    return {name: np.empty(n_pixels, dtype=dtypes[name]) for name in RESULT_OUTPUTS}


#: ``out`` and ``time`` of :func:`advance` for no result.
_NO_RESULT = tuple(result_buffers(0).values())
_NO_TIME = np.zeros(0)
