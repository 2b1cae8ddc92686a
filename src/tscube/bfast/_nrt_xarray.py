"""Near-real-time BFAST Monitor over xarray, chunk by chunk, and its resumable file runs.

:func:`nrt_fit_xarray` and :func:`nrt_update_xarray` define the state dataset of
:mod:`tscube.bfast.nrt` lazily over the pixel chunks of a cube; :func:`run_nrt` computes
them into a Zarr store with :func:`tscube.runs.run_chunked` (``tscube monitor --update``):

* no store yet: the fit is run into it (resumable like any run);
* a complete store: only the input's dates after its last date are monitored. The
  updated state goes, chunk by chunk and resumably, to the sidecar store
  ``.OUT.update.zarr``; when complete it replaces ``OUT`` by two renames
  (``OUT -> .OUT.previous``, sidecar ``-> OUT``), then ``.OUT.previous`` is removed. A
  run killed at any point leaves ``OUT`` or ``.OUT.previous`` whole, and the next run
  first finishes or undoes the swap (:func:`_recover`), so the previous state is never
  corrupted and the rerun finishes the same update with the same bytes.
"""

from __future__ import annotations

from os import replace as _rename  # (a name of this module: tests interrupt the swap through it)
from pathlib import Path

import numpy as np

from . import nrt
from .result import BfastStatus

#: ``run_chunked`` commands of the two kinds of run (part of the run record's identity).
FIT_COMMAND = "monitor-nrt-fit"
UPDATE_COMMAND = "monitor-nrt-update"
#: Model entries that must match between a stored state and the options of an update.
_CHECKED = ("start", "order", "trend", "season", "type", "h", "level", "end", "history", "freq", "nodata")
#: Memory per input value while a chunk is fitted or updated (bytes; residuals, state).
_BYTES_PER_VALUE = 64.0


def _probe(dates, start, engine, params) -> tuple[dict, dict]:
    """The state of one all-missing pixel and the model of these options on these dates
    (cheap; validates every option), with the engine that ``engine`` resolves to."""
    state, model = nrt.fit_state(np.full((len(dates), 1), np.nan), dates, start, engine="reference", **params)
    if engine == "auto":
        from ..engines import auto_engine

        engine = auto_engine(0)
    model["engine"] = engine
    return state, model


def _fit_block(series, *, dates, start, engine, params):
    state, model = nrt.fit_state(series, dates, start, engine=engine, **params)
    alert = state["break_index"] >= 0
    return {name: array for name, (_, array) in nrt.state_variables(state, model, dates, alert).items()}


def nrt_fit_xarray(da, start, *, time_dim: str = "time", memory=None, engine: str = "auto", **params):
    """The state dataset of :meth:`tscube.bfast.nrt.BfastMonitor.to_dataset` for the cube
    ``da``, lazily over its pixel chunks (``params``: those of :class:`BfastMonitor`)."""
    from ..xarray_blocks import (OutputSpec, apply_time_series, describe_variables, partial_block,
                                 time_coordinate)

    dates = nrt._normalise_dates(time_coordinate(da, time_dim))
    probe_state, model = _probe(dates, start, engine, params)
    variables = nrt.state_variables(probe_state, model, dates, np.zeros(1, dtype=bool))
    specs = [OutputSpec(name, array.dtype, lead) for name, (lead, array) in variables.items()]
    sizes = {dim: probe_state[name].shape[0] for name, dim in nrt._STATE_DIMS.items()}
    begin = len(dates) - sizes["monitor_time"]
    ds = apply_time_series(
        da, partial_block(_fit_block, dates=dates, start=start, engine=engine, params=params), specs,
        time_dim=time_dim, sizes=sizes, coords={"date": dates, "monitor_time": dates[begin:]}, memory=memory,
        bytes_per_value=_BYTES_PER_VALUE, serialize=model["engine"] in ("cpu", "cuda"))
    for name in ds.data_vars:
        ds[name].attrs.update(nrt.variable_attrs(name))
    describe_variables(ds, {}, BfastStatus, "pixel status (tscube.BfastStatus)")
    ds.attrs.update(nrt.state_attrs(model))
    return nrt.store_state_uncompressed(ds)


def _update_block(chunk, *, dates, new_dates, pixel_dims, variable_attrs, attrs):
    """One pixel chunk of the stored state and the new images -> its updated state dataset."""
    import xarray as xr

    model = nrt.model_from_attrs(attrs)
    state = nrt.state_arrays(chunk, pixel_dims)
    values = np.asarray(chunk["new_values"].transpose("new_time", *pixel_dims).values)
    values = values.reshape(values.shape[0], -1)
    new = nrt.update_state(state, model, dates, values, new_dates)
    alert = new["break_index"] >= len(dates)
    all_dates = nrt._join_dates(dates, new_dates)
    shape = tuple(chunk.sizes[d] for d in pixel_dims)
    variables = {}
    for name, (lead, array) in nrt.state_variables(new, model, all_dates, alert).items():
        variables[name] = (lead + pixel_dims, array.reshape(array.shape[:len(lead)] + shape), variable_attrs[name])
    coords = {name: coord for name, coord in chunk.coords.items()}
    begin = len(all_dates) - new["residuals"].shape[0]
    coords.update(date=all_dates, monitor_time=all_dates[begin:])
    return xr.Dataset(variables, coords=coords, attrs=attrs)


def nrt_update_xarray(state_ds, da_new, *, time_dim: str = "time"):
    """The updated state dataset: ``state_ds`` (a stored state, dask-backed over its pixel
    chunks) after the new images ``da_new`` (dates after the state's last one), lazily."""
    import dask.array as dsa
    import xarray as xr

    from ..xarray_blocks import time_coordinate

    dates = nrt._normalise_dates(state_ds["date"].values)
    new_dates = nrt._normalise_dates(time_coordinate(da_new, time_dim))
    all_dates = nrt._join_dates(dates, new_dates)  # refuses dates that are not later
    pixel_dims = tuple(state_ds["status"].dims)
    new_values = da_new.transpose(time_dim, *pixel_dims)
    grid = tuple(state_ds.sizes[d] for d in pixel_dims)
    if new_values.shape[1:] != grid:
        raise ValueError(f"the input's grid {new_values.shape[1:]} is not the state's {grid} ({', '.join(pixel_dims)})")
    pixel_chunks = {d: state_ds.chunksizes[d] for d in pixel_dims} if state_ds.chunks else {}
    data = new_values.data
    if hasattr(data, "rechunk"):
        data = data.rechunk(((len(new_dates),),) + tuple(pixel_chunks.get(d, (n,)) for d, n in zip(pixel_dims, grid)))
    names = [name for name in state_ds.data_vars if name.startswith(nrt.STATE_PREFIX)]
    inputs = state_ds[names]
    inputs = inputs.drop_vars([c for c in ("date", "monitor_time") if c in inputs.coords])
    inputs["new_values"] = (("new_time",) + pixel_dims, data)

    grown = {"monitor_time": state_ds.sizes["monitor_time"] + len(new_dates)}
    template_vars = {}
    for name, variable in state_ds.data_vars.items():
        shape = tuple(grown.get(d, state_ds.sizes[d]) for d in variable.dims)
        chunks = tuple(pixel_chunks.get(d, (size,)) for d, size in zip(variable.dims, shape))
        template_vars[name] = (variable.dims, dsa.empty(shape, chunks=chunks, dtype=variable.dtype), variable.attrs)
    coords = {name: coord for name, coord in state_ds.coords.items() if name not in ("date", "monitor_time")}
    begin = len(all_dates) - grown["monitor_time"]
    coords.update(date=all_dates, monitor_time=all_dates[begin:])
    template = xr.Dataset(template_vars, coords=coords, attrs=dict(state_ds.attrs))
    kwargs = dict(dates=dates, new_dates=new_dates, pixel_dims=pixel_dims, attrs=dict(state_ds.attrs),
                  variable_attrs={name: dict(v.attrs) for name, v in state_ds.data_vars.items()})
    return nrt.store_state_uncompressed(xr.map_blocks(_update_block, inputs, kwargs=kwargs, template=template))


# --------------------------------------------------------------------------------------
# the file run


def sidecar_paths(output: Path) -> tuple[Path, Path]:
    """``(update store, previous state)`` next to ``output``."""
    return output.with_name(f".{output.name}.update.zarr"), output.with_name(f".{output.name}.previous")


def _recover(output: Path, echo) -> None:
    """Finish (or undo) a swap interrupted between its renames; drop a leftover previous state."""
    from ..runs import RECORD_NAME, _read_json, _remove

    pending, previous = sidecar_paths(output)
    if previous.exists() and not output.exists():
        record = _read_json(pending / RECORD_NAME) if pending.is_dir() else None
        if record and record.get("complete"):
            _rename(pending, output)
            echo(f"finished the interrupted replacement of {output.name} by its update")
        else:
            _rename(previous, output)
            echo(f"restored {output.name} (an update was interrupted while replacing it)")
    if previous.exists():
        _remove(previous)


def _model_differences(stored: dict, wanted: dict) -> list[str]:
    from ..timeaxis import TIME_TOL

    out = []
    for key in _CHECKED:
        a, b = stored.get(key), wanted.get(key)
        same = (abs(a - b) <= TIME_TOL) if key == "start" and a is not None and b is not None else a == b
        if not same:
            out.append(f"{key} ({a!r} -> {b!r})")
    return out


def run_nrt(template_args: dict, da, output, *, params: dict, input_id: dict, overwrite: bool, progress: bool,
            client, echo, open_dates=None):
    """``tscube monitor --update``: fit into ``output`` (a ``.zarr``) when it holds no state
    yet, else monitor the dates of ``da`` after its last date. ``template_args``: ``start``,
    ``memory``, ``engine`` and the model options of :class:`BfastMonitor`. ``open_dates``
    (positions -> DataArray) opens only the new dates of the input (default: select them
    in ``da``, which may read every date of a time-chunked input). Returns the
    :class:`~tscube.runs.RunSummary`, or None when there was no new date."""
    import xarray as xr

    from ..runs import RECORD_NAME, _exclusive, _quiet_zarr, _read_json, run_chunked

    output = Path(output)
    run_args = dict(input_id=input_id, status_enum=BfastStatus, progress=progress, client=client, echo=echo)
    template_args = dict(template_args)
    start, memory, engine = (template_args.pop(key) for key in ("start", "memory", "engine"))
    with _exclusive(output.with_name(f"{output.name}.nrt")):  # run_chunked locks OUT itself
        _recover(output, echo)
        record = _read_json(output / RECORD_NAME) if output.is_dir() else None
        if overwrite or not output.exists() or (record and record.get("command") == FIT_COMMAND
                                                and not record.get("complete")):
            template = nrt_fit_xarray(da, start, memory=memory, engine=engine, **template_args)
            return run_chunked(template, output, command=FIT_COMMAND, params=params, overwrite=overwrite, **run_args)
        if record is None or not record.get("complete"):
            raise ValueError(f"{output.name} holds no complete monitoring state (it was not made by "
                             "tscube monitor --update); pass --overwrite to fit a new one")
        with _quiet_zarr():
            stored = xr.open_zarr(output, consolidated=False, decode_coords="all")
        model, dates = nrt.model_from_attrs(stored.attrs), nrt._normalise_dates(stored["date"].values)
        _, wanted = _probe(dates, start, engine, template_args)
        differences = _model_differences(model, wanted)
        if differences:
            raise ValueError(f"{output.name} was fitted with other parameters: {'; '.join(differences)}. A changed "
                             "model needs a new fit: write to another output or pass --overwrite")
        input_dates = nrt._normalise_dates(da["time"].values)
        newer = input_dates > dates[-1]
        unknown = np.setdiff1d(input_dates[~newer], dates)
        if unknown.size:
            raise ValueError(f"the input has {unknown.size} date(s) not in {output.name} and before its last date "
                             f"{str(dates[-1])[:10]} (first: {str(unknown[0])[:10]}): a state only takes newer images")
        if not newer.any():
            echo(f"{output.name} is up to date: no date after {str(dates[-1])[:10]} in the input")
            return None
        echo(f"updating {output.name}: {int(newer.sum())} new date(s) after {str(dates[-1])[:10]}")
        positions = np.flatnonzero(newer)
        new_da = open_dates(positions) if open_dates is not None else da.isel(time=positions)
        template = nrt_update_xarray(stored, new_da)
        pending, previous = sidecar_paths(output)
        update_params = dict(params, state_last_date=str(dates[-1]), state_dates=len(dates))
        summary = run_chunked(template, pending, command=UPDATE_COMMAND, params=update_params, overwrite=True,
                              **run_args)
        _rename(output, previous)
        _rename(pending, output)
        _recover(output, echo)
        summary.output = str(output)
        return summary
