"""The near-real-time state as an :class:`xarray.Dataset` (what ``BfastMonitor.to_dataset``
and a ``.nc`` save hold, and the variables of a chunked fit), and back."""

from __future__ import annotations

import numpy as np

from ..monitor import VARIABLE_ATTRS
from .state import (HOT, OPTIONAL, READABLE_VERSIONS, STATE_FIELDS, STATE_VERSION, STATIC, absent, hot_record,
                    is_absent, state_result, with_hot)

#: Extra dimension of each multi-row state array.
STATE_DIMS = {"coefficients": "coefficient", "tail": "window_slot", "median_window": "median_slot",
               "residuals": "monitor_time"}
#: Prefix of the state variables in a saved dataset (the others are the result and ``alert``).
STATE_PREFIX = "state_"
#: Dataset attribute: how many dates the last fit or update brought (what ``alert`` is about).
LAST_UPDATE_ATTR = "tscube_last_update_dates"


def normalise_dates(dates) -> np.ndarray:
    """Dates as ``datetime64[ns]`` or float64 decimal years."""
    import pandas as pd

    from ...timeaxis import is_datetime_like

    if is_datetime_like(dates):
        return np.asarray(pd.DatetimeIndex(pd.to_datetime(dates)).values, dtype="datetime64[ns]")
    return np.asarray(dates, dtype=np.float64)


def state_variables(state: dict, model: dict, dates, alert: np.ndarray) -> dict[str, tuple[tuple, np.ndarray]]:
    """Every variable of a saved state over flat pixel lanes: name -> (extra dims, array
    ``(*extra sizes, P)``): the outputs of :func:`state_result`, ``alert`` and the state
    arrays (prefixed :data:`STATE_PREFIX`)."""
    variables = {name: ((), array) for name, array in state_result(state, model, dates).items()}
    variables["alert"] = ((), np.asarray(alert, dtype=np.bool_))
    for name, dtype in STATE_FIELDS.items():  # the record's columns in their own types
        if name in OPTIONAL and is_absent(state.get(name, absent(name))):
            continue
        array = np.ascontiguousarray(state[name], dtype=dtype) if name in HOT else state[name]
        variables[STATE_PREFIX + name] = ((STATE_DIMS[name],) if name in STATE_DIMS else (), array)
    return variables


def state_attrs(model: dict) -> dict:
    """Dataset attributes of a saved state: the model (JSON, read back by
    :func:`state_from_dataset`) and the attributes of a ``bfast_monitor`` result."""
    import json

    from ...xarray_blocks import serialisable_attrs

    attrs = dict(tscube_function="bfast_monitor", tscube_state_version=STATE_VERSION,
                 tscube_state_model=json.dumps(model, sort_keys=True),
                 **{key: model[key] for key in ("start", "order", "trend", "season", "type", "h", "level", "end",
                                                "critval", "history", "freq", "engine", "regressors")},
                 calibrate=bool(model.get("calibrate", False)))
    return serialisable_attrs(attrs)


def variable_attrs(name: str) -> dict:
    """CF-style attributes of a state dataset's variable."""
    if name == "alert":
        return {"long_name": "first break among the dates of the last update (or of the fit)"}
    return dict(VARIABLE_ATTRS.get(name, {}))


def store_uncompressed(ds):
    """Store every variable of ``ds`` without compression (in place): residuals of noisy
    data hardly compress, while compressing them costs several times the write and the
    read (benchmarks/README.md, near-real-time), and an update rewrites the result in
    place."""
    for variable in ds.data_vars.values():
        variable.encoding["compressors"] = ()
    return ds


#: Bytes of a chunk of a saved result (:func:`strip_chunks`).
RESULT_CHUNK_BYTES = 1 << 21


def strip_chunks(ds):
    """Chunk every variable of ``ds`` (in place) in strips of whole rows of the grid, ~2 MiB
    each: an update writes its result band by band of whole rows, and a band's part of a
    strip is contiguous in its chunk file (one write; with narrower chunks each chunk's
    part of a band is gathered first)."""
    for variable in ds.data_vars.values():
        if variable.ndim:
            rest = int(np.prod(variable.shape[1:], dtype=np.int64))
            rows = max(1, RESULT_CHUNK_BYTES // max(rest * variable.dtype.itemsize, 1))
            variable.encoding["chunks"] = (max(1, min(rows, variable.shape[0])),) + tuple(variable.shape[1:])
    return ds


def state_dataset(state: dict, model: dict, dates, alert: np.ndarray, pixel_dims, pixel_coords):
    """The state, its result and the ``alert`` map as one :class:`xarray.Dataset` over the
    pixel dims (``pixel_coords``: a coordinate for each pixel dim)."""
    import xarray as xr

    pixel_dims = tuple(pixel_dims)
    pixel_shape = tuple(len(pixel_coords[d]) for d in pixel_dims)
    dates = normalise_dates(dates)
    variables = {}
    for name, (lead, array) in state_variables(state, model, dates, alert).items():
        variables[name] = (lead + pixel_dims, array.reshape(array.shape[:len(lead)] + pixel_shape), variable_attrs(name))
    begin = len(dates) - state["residuals"].shape[0]
    coords = {"date": dates, "monitor_time": dates[begin:]}  # regressor names: attrs["regressors"]
    coords.update({d: pixel_coords[d] for d in pixel_dims})
    return store_uncompressed(xr.Dataset(variables, coords=coords, attrs=state_attrs(model)))


def model_from_attrs(attrs) -> dict:
    """The model saved in a state dataset's attributes (refused for other layouts)."""
    import json

    version = attrs.get("tscube_state_version")
    if version is None or "tscube_state_model" not in attrs:
        raise ValueError("this dataset holds no BFAST Monitor state (it was not written by a near-real-time "
                         "monitor: tscube monitor --update, BfastMonitor.save)")
    if int(version) not in READABLE_VERSIONS:
        raise ValueError(f"monitoring state version {version} is not this tscube's ({', '.join(map(str, READABLE_VERSIONS))}); "
                         "fit again")
    return json.loads(attrs["tscube_state_model"])


def state_arrays(ds, pixel_dims) -> dict[str, np.ndarray]:
    """The state of a state dataset over flat pixel lanes (``(P,)``, ``(rows, P)``; the
    record ``hot`` and its views)."""
    n_pixels = int(np.prod([ds.sizes[d] for d in pixel_dims], dtype=np.int64))
    arrays = {name: state_lanes(ds, name, pixel_dims) for name in STATIC + ("residuals",)}
    return with_hot(arrays, hot_record(lambda name: state_lanes(ds, name, pixel_dims), n_pixels))


def state_lanes(ds, name: str, pixel_dims) -> np.ndarray:
    """The state array ``name`` of a state dataset over flat pixel lanes, loaded (C order,
    writable); an :data:`~.state.OPTIONAL` one the dataset does not hold: empty."""
    if name in OPTIONAL and STATE_PREFIX + name not in ds:
        return absent(name)
    n_pixels = int(np.prod([ds.sizes[d] for d in pixel_dims], dtype=np.int64))
    variable = ds[STATE_PREFIX + name]
    lead = tuple(d for d in variable.dims if d not in pixel_dims)
    values = np.asarray(variable.transpose(*lead, *pixel_dims).values, dtype=STATE_FIELDS[name])
    return np.require(values.reshape(values.shape[:len(lead)] + (n_pixels,)), requirements=["C", "W"])


def state_from_dataset(ds) -> tuple[dict, dict, np.ndarray]:
    """``(state, model, dates)`` of a dataset written by :func:`state_dataset` (flat pixel lanes)."""
    model = model_from_attrs(ds.attrs)
    return state_arrays(ds, ds["status"].dims), model, normalise_dates(ds["date"].values)
