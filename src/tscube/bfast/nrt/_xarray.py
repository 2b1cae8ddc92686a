"""Near-real-time BFAST Monitor over xarray, and ``tscube monitor --update``.

:func:`nrt_fit_xarray` defines the state dataset of :mod:`tscube.bfast.nrt` lazily over
the pixel chunks of a cube; :func:`run_nrt` runs it into a Zarr store:

* no store yet: the fit is run into it with :func:`tscube.runs.run_chunked` (chunked and
  resumable like any run), then its state arrays move to the store's state directory
  (:func:`tscube.bfast.nrt._store.adopt_dataset_state`);
* a complete store: only the input's dates after its last date are monitored, in place
  (:func:`tscube.bfast.nrt._store.update_files`, which also rewrites the result): one
  new image costs O(1) per pixel, and a killed update leaves the previous state whole
  and is finished, with the same bytes, by the same command.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ...engines import resolve
from ...io import SCENE_TYPE_ATTR, check_scene_type, scene_type_of
from ..monitor import BfastStatus
from . import _store as store
from .dataset import (STATE_DIMS, model_from_attrs, normalise_dates, state_attrs, state_variables, store_uncompressed,
                      variable_attrs)
from .state import fit_state

#: ``run_chunked`` command of the fit (part of the run record's identity).
FIT_COMMAND = "monitor-nrt-fit"
#: Model entries that must match between a stored state and the options of an update.
_CHECKED = ("start", "order", "trend", "season", "type", "h", "level", "end", "history", "freq", "nodata",
            "calibrate")
#: Memory per input value while a chunk is fitted or updated (bytes; residuals, state).
_BYTES_PER_VALUE = 64.0


def _probe(dates, start, engine, params) -> tuple[dict, dict]:
    """The state of one all-missing pixel and the model of these options on these dates
    (cheap; validates every option), with the engine that ``engine`` resolves to."""
    state, model = fit_state(np.full((len(dates), 1), np.nan), dates, start, engine="reference", **params)
    model["engine"] = resolve("bfast_monitor", engine)
    return state, model


def _fit_block(series, *, dates, start, engine, params):
    state, model = fit_state(series, dates, start, engine=engine, **params)
    alert = state["break_index"] >= 0
    return {name: array for name, (_, array) in state_variables(state, model, dates, alert).items()}


def nrt_fit_xarray(da, start, *, time_dim: str = "time", memory=None, engine: str = "auto", **params):
    """The state dataset of :meth:`tscube.bfast.nrt.BfastMonitor.to_dataset` for the cube
    ``da``, lazily over its pixel chunks (``params``: those of :class:`BfastMonitor`)."""
    from ...xarray_blocks import (OutputSpec, apply_time_series, describe_variables, partial_block,
                                 time_coordinate)

    dates = normalise_dates(time_coordinate(da, time_dim))
    probe_state, model = _probe(dates, start, engine, params)
    variables = state_variables(probe_state, model, dates, np.zeros(1, dtype=bool))
    specs = [OutputSpec(name, array.dtype, lead) for name, (lead, array) in variables.items()]
    sizes = {dim: probe_state[name].shape[0] for name, dim in STATE_DIMS.items()}
    begin = len(dates) - sizes["monitor_time"]
    ds = apply_time_series(
        da, partial_block(_fit_block, dates=dates, start=start, engine=engine, params=params), specs,
        time_dim=time_dim, sizes=sizes, coords={"date": dates, "monitor_time": dates[begin:]}, memory=memory,
        bytes_per_value=_BYTES_PER_VALUE, serialize=model["engine"] in ("cpu", "cuda"))
    for name in ds.data_vars:
        ds[name].attrs.update(variable_attrs(name))
    describe_variables(ds, {}, BfastStatus, "pixel status (tscube.BfastStatus)")
    ds.attrs.update(state_attrs(model))
    if SCENE_TYPE_ATTR in da.attrs:  # what later scenes must be (tscube.io.check_scene_type)
        ds.attrs[SCENE_TYPE_ATTR] = da.attrs[SCENE_TYPE_ATTR]
    return store_uncompressed(ds)


# --------------------------------------------------------------------------------------
# the file run


def _model_differences(stored: dict, wanted: dict) -> list[str]:
    from ...timeaxis import TIME_TOL

    out = []
    for key in _CHECKED:
        a, b = stored.get(key), wanted.get(key)
        if key == "calibrate":  # (states before it: not calibrated)
            a, b = bool(a), bool(b)
        same = (abs(a - b) <= TIME_TOL) if key == "start" and a is not None and b is not None else a == b
        if not same:
            out.append(f"{key} ({a!r} -> {b!r})")
    return out


def _check_same_georeference(new_da, output: Path, pixel_dims) -> None:
    """Refuse new images whose pixel coordinates or CRS differ from the state's (a scene
    reprocessed onto a shifted grid would be monitored as if aligned)."""
    import xarray as xr

    from ...runs import quiet_zarr

    try:
        import rioxarray  # noqa: F401  (the .rio accessor, for the CRS)
    except ImportError:  # pragma: no cover - a dependency
        pass
    with quiet_zarr(), xr.open_zarr(output, consolidated=False) as stored:
        for dim in pixel_dims:
            if dim in new_da.coords and dim in stored.coords:
                a, b = np.asarray(new_da[dim].values), np.asarray(stored[dim].values)
                numeric = np.issubdtype(a.dtype, np.number) and np.issubdtype(b.dtype, np.number)
                step = float(np.ptp(b)) / max(len(b) - 1, 1) if numeric and b.size else 0.0
                same = a.shape == b.shape and (np.allclose(a, b, rtol=0, atol=1e-6 * step) if numeric
                                               else np.array_equal(a, b))
                if not same:
                    raise ValueError(f"the new images' {dim} coordinates are not those of {output.name} (first "
                                     f"{a[0]!r} against {b[0]!r}): a state only takes images on its own grid")
        crs_new = new_da.rio.crs if hasattr(new_da, "rio") else None
        crs_stored = stored.rio.crs if hasattr(stored, "rio") else None
        if crs_new is not None and crs_stored is not None and crs_new != crs_stored:
            raise ValueError(f"the new images' CRS ({crs_new}) is not that of {output.name} ({crs_stored})")


def holds_state(output) -> bool:
    """Whether ``output`` holds a complete monitoring state (what :func:`run_nrt` updates)."""
    from ...runs import RECORD_NAME, read_json

    output = Path(output)
    record = read_json(output / RECORD_NAME) if output.is_dir() else None
    return bool(record and record.get("complete") and record.get("command") == FIT_COMMAND)


def run_nrt(template_args: dict, da, output, *, params: dict, input_id: dict | None, overwrite: bool,
            progress: bool, client, echo, open_dates=None, input_dates=None):
    """``tscube monitor --update``: fit into ``output`` (a ``.zarr``) when it holds no state
    yet, else monitor the dates of ``da`` after its last date. ``template_args``: ``start``,
    ``memory``, ``engine`` and the model options of :class:`BfastMonitor`. ``open_dates``
    (positions -> DataArray) opens only the new dates of the input (default: select them
    in ``da``, which may read every date of a time-chunked input). An update needs no
    ``da`` (None) when given the input's sorted ``input_dates`` and ``open_dates``.
    Returns the :class:`~tscube.runs.RunSummary`, or None when there was no new date."""
    import time

    from ...runs import RECORD_NAME, RunSummary, exclusive_lock, quiet_zarr, read_json, run_chunked

    output = Path(output)
    run_args = dict(input_id=input_id, status_enum=BfastStatus, progress=progress, client=client, echo=echo)
    template_args = dict(template_args)
    start, memory, engine = (template_args.pop(key) for key in ("start", "memory", "engine"))
    with exclusive_lock(output):  # the lock of every writer of OUT (run_chunked takes it again)
        record = read_json(output / RECORD_NAME) if output.is_dir() else None
        if overwrite or not output.exists() or (record and record.get("command") == FIT_COMMAND
                                                and not record.get("complete")):
            if da is None:
                raise ValueError(f"{output.name} holds no complete monitoring state to update: the input must be "
                                 "opened to fit one")
            template = nrt_fit_xarray(da, start, memory=memory, engine=engine, **template_args)
            summary = run_chunked(template, output, command=FIT_COMMAND, params=params, overwrite=overwrite,
                                  **run_args)
            store.adopt_dataset_state(output)
            return summary
        if record is None or not record.get("complete") or record.get("command") != FIT_COMMAND:
            raise ValueError(f"{output.name} holds no complete monitoring state (it was not made by "
                             "tscube monitor --update); pass --overwrite to fit a new one")
        if not store.has_state(output):  # the fit was killed while its state was moved
            store.adopt_dataset_state(output)
        group = store.open_result(output)
        with quiet_zarr():
            model = model_from_attrs(group.attrs)
            grid = tuple(group["status"].shape)
        if store.repair_result(output, model, group):
            echo(f"rewrote the result of {output.name} (an update was interrupted while writing it)")
        dates = store.state_dates(output)
        _, wanted = _probe(dates, start, engine, template_args)
        differences = _model_differences(model, wanted)
        if differences:
            raise ValueError(f"{output.name} was fitted with other parameters: {'; '.join(differences)}. A changed "
                             "model needs a new fit: write to another output or pass --overwrite")
        input_dates = normalise_dates(da["time"].values if input_dates is None else input_dates)
        newer = input_dates > dates[-1]
        unknown = np.setdiff1d(input_dates[~newer], dates)
        if unknown.size:
            raise ValueError(f"the input has {unknown.size} date(s) not in {output.name} and before its last date "
                             f"{str(dates[-1])[:10]} (first: {str(unknown[0])[:10]}): a state only takes newer images")
        if not newer.any():
            echo(f"{output.name} is up to date: no date after {str(dates[-1])[:10]} in the input")
            return None
        echo(f"updating {output.name}: {int(newer.sum())} new date(s) after {str(dates[-1])[:10]}")
        began = time.perf_counter()
        positions = np.flatnonzero(newer)
        new_da = open_dates(positions) if open_dates is not None else da.isel(time=positions)
        pixel_dims = tuple(d for d in new_da.dims if d != "time")
        if tuple(new_da.sizes[d] for d in pixel_dims) != grid:
            raise ValueError(f"the input's grid {tuple(new_da.sizes[d] for d in pixel_dims)} is not the state's {grid}")
        _check_same_georeference(new_da, output, pixel_dims)
        fitted_kind, new_kind = group.attrs.get(SCENE_TYPE_ATTR), scene_type_of(new_da)
        if fitted_kind is not None and new_kind is not None:
            check_scene_type(new_kind, json.loads(fitted_kind), "the new scenes", f"while {output.name} was fitted on")
        values = np.asarray(new_da.transpose("time", *pixel_dims).values).reshape(len(positions), -1)
        _, counts = store.update_files(output, model, values, input_dates[positions], group)
        return RunSummary(pixels=int(np.prod(grid, dtype=np.int64)), status_counts=counts["status_counts"],
                          breaks=counts["breaks"], seconds=time.perf_counter() - began, chunks=1, chunks_computed=1,
                          sessions=1, output=str(output))
