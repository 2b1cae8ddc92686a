"""The public face of the near-real-time state: :class:`BfastMonitor` (fit, update,
result, save, load) and :func:`update_saved`, the in-place update of a saved state."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from ..core.inputs import as_numbers
from ..monitor import BfastMonitorResult
from .dataset import (LAST_UPDATE_ATTR, STATE_PREFIX, model_from_attrs, normalise_dates, state_dataset,
                      state_from_dataset, store_uncompressed, strip_chunks)
from .state import HOT, MODEL_PARAMS, fit_state, join_dates, state_result, update_state, with_hot

def _as_input(data, dates, time_dim: str):
    """``(values (T, P), dates, pixel dims, pixel coords, pixel shape)`` of NumPy or xarray input."""
    from ...xarray_blocks import is_xarray, time_coordinate

    if is_xarray(data):
        if dates is not None:
            raise TypeError("dates come from the DataArray's time coordinate: do not pass dates")
        dates = time_coordinate(data, time_dim)
        data = data.transpose(time_dim, ...)
        pixel_dims = tuple(d for d in data.dims if d != time_dim)
        coords = {d: data[d].values for d in pixel_dims if d in data.coords}
        values = np.asarray(data.values)
    else:
        if dates is None:
            raise TypeError("dates are required for NumPy data")
        values = np.asarray(data)
        pixel_dims = tuple(f"dim_{i}" for i in range(1, values.ndim))
        coords = None
    if values.ndim == 0:
        raise ValueError("data must have a time axis first: shape (T, ...)")
    values = as_numbers(values, "images")
    dates = normalise_dates(dates)
    if dates.ndim != 1 or dates.size != values.shape[0]:
        raise ValueError(f"{values.shape[0]} images on the time axis but {dates.size} dates: give one date per image")
    pixel_shape = values.shape[1:]
    return values.reshape(values.shape[0], int(np.prod(pixel_shape))), dates, pixel_dims, coords, pixel_shape


class BfastMonitor:
    """Near-real-time BFAST Monitor: fit once, then update with each new image.

    ``fit`` runs :func:`tscube.bfast_monitor` on the cube so far and keeps a per-pixel
    monitoring state (see :mod:`tscube.bfast.nrt`); ``update`` monitors only the new
    images, without refitting any history; ``result`` is then what
    :func:`tscube.bfast_monitor` would return over all the dates. ``save``/``load`` keep
    the state between runs (Zarr or NetCDF), like nrt's ``to_netcdf``/``from_netcdf``.

    Parameters
    ----------
    start
        First date of the monitoring period (one start; see :func:`tscube.bfast_monitor`).
    order, trend, h, level, end, history, freq, nodata, engine
        As in :func:`tscube.bfast_monitor`; ``engine`` makes the fit, updates run on the cpu.
    calibrate : bool
        Each pixel's critical value calibrated to its design (as ``bfast_monitor``'s
        ``calibrate``), for monitoring until the horizon ``end`` (history sizes from the
        history start, R's ``end``) with observations as frequent as in its history: the
        dates to come are not known at the fit. The false-alarm rate holds until the
        horizon (it is below ``level`` before); docs/bfast_monitor.md.
    **options
        Further model options of :func:`tscube.bfast_monitor` (``season``, ``type``), saved
        with the state.

    Attributes
    ----------
    state_ : dict of ndarray
        Per-pixel state arrays over flat pixel lanes (:data:`STATE_FIELDS`); those that an
        update changes are float64 views of the records ``state_["hot"]``.
    dates_ : ndarray
        Every date monitored so far (``datetime64[ns]`` or decimal years).
    alert_ : ndarray of bool
        Pixels whose first break lies among the dates of the last ``fit``/``update``.
    last_update_dates_ : int
        How many dates that last ``fit``/``update`` brought.

    Examples
    --------
    >>> monitor = BfastMonitor(start="2019-01-01", freq=23).fit(cube, dates)  # doctest: +SKIP
    >>> alerts = monitor.update(new_image[None], [new_date])                  # doctest: +SKIP
    >>> monitor.save("alerts.zarr")                                           # doctest: +SKIP
    """

    def __init__(self, start, *, order: int = 3, trend: bool = True, h: float = 0.25, level=0.05, end: float = 10,
                 history="ROC", freq=None, nodata=None, calibrate: bool = False, engine: str = "auto", **options):
        self.start = start
        self.params = dict(order=order, trend=trend, h=h, level=level, end=end, history=history, freq=freq,
                           nodata=nodata, calibrate=bool(calibrate), **options)
        self.engine = engine

    def fit(self, data, dates=None, *, time_dim: str = "time") -> "BfastMonitor":
        """Fit every pixel's history and monitor the dates of ``data`` from ``start`` on."""
        values, dates, self.pixel_dims_, self.pixel_coords_, self.pixel_shape_ = _as_input(data, dates, time_dim)
        self.state_, self.model_ = fit_state(values, dates, self.start, engine=self.engine, **self.params)
        self.dates_ = dates
        self.alert_ = (self.state_["break_index"] >= 0).reshape(self.pixel_shape_)
        self.last_update_dates_ = len(dates)
        return self

    def _check_fitted(self, method: str) -> None:
        if not hasattr(self, "state_"):
            raise RuntimeError(f"call fit() before {method}(): this BfastMonitor holds no state yet")

    def update(self, data, dates=None, *, time_dim: str = "time") -> np.ndarray:
        """Monitor new images (dates after the last one seen); returns the ``alert_`` map."""
        self._check_fitted("update")
        values, new_dates, pixel_dims, _, pixel_shape = _as_input(data, dates, time_dim)
        if pixel_shape != self.pixel_shape_:
            raise ValueError(f"new images are shaped {pixel_shape}, the state {self.pixel_shape_}")
        n_old = len(self.dates_)
        self.state_ = update_state(self.state_, self.model_, self.dates_, values, new_dates)
        self.dates_ = join_dates(self.dates_, new_dates)
        self.alert_ = (self.state_["break_index"] >= n_old).reshape(self.pixel_shape_)
        self.last_update_dates_ = len(self.dates_) - n_old
        return self.alert_

    def result(self) -> BfastMonitorResult:
        """The :class:`BfastMonitorResult` over every date seen (equal to ``bfast_monitor`` on them)."""
        self._check_fitted("result")
        outputs = state_result(self.state_, self.model_, self.dates_)
        attrs = {key: self.model_[key] for key in ("start", "order", "trend", "regressors", "h", "end", "critval",
                                                   "history", "freq", "engine")}
        attrs["calibrate"] = bool(self.model_.get("calibrate", False))
        attrs["level"] = tuple(self.model_["level"])
        shaped = {name: array.reshape(self.pixel_shape_) for name, array in outputs.items()}
        return BfastMonitorResult(**shaped, attrs=attrs)

    def to_dataset(self):
        """The result, ``alert`` and the state (``state_*`` variables) as an :class:`xarray.Dataset`."""
        self._check_fitted("to_dataset")
        coords = {d: np.arange(n) for d, n in zip(self.pixel_dims_, self.pixel_shape_)}
        coords.update(self.pixel_coords_ or {})
        ds = state_dataset(self.state_, self.model_, self.dates_, self.alert_, self.pixel_dims_, coords)
        ds.attrs[LAST_UPDATE_ATTR] = self.last_update_dates_
        return ds

    def __getstate__(self) -> dict:
        """Pickled without the views of the records (a copy would detach them from it)."""
        attributes = dict(self.__dict__)
        if "state_" in attributes:
            attributes["state_"] = {name: array for name, array in self.state_.items() if name not in HOT}
        return attributes

    def __setstate__(self, attributes: dict) -> None:
        self.__dict__.update(attributes)
        if "state_" in attributes:
            self.state_ = with_hot(self.state_, self.state_["hot"])

    @classmethod
    def from_dataset(cls, ds) -> "BfastMonitor":
        """The monitor of a dataset written by :meth:`to_dataset`."""
        state, model, dates = state_from_dataset(ds)
        return cls._from_parts(state, model, dates, ds)

    @classmethod
    def _from_parts(cls, state: dict, model: dict, dates, ds) -> "BfastMonitor":
        """The monitor of a state, its model and dates, with the pixel grid and ``alert`` of ``ds``."""
        options = {key: model[key] for key in model.get("options", ())}
        monitor = cls(model["start"], **{key: model[key] for key in MODEL_PARAMS if key != "level" and key in model},
                      level=tuple(model["level"]), engine=model["engine"], **options)
        monitor.state_, monitor.model_, monitor.dates_ = state, model, dates
        monitor.pixel_dims_ = tuple(ds["status"].dims)
        monitor.pixel_shape_ = tuple(ds.sizes[d] for d in monitor.pixel_dims_)
        monitor.pixel_coords_ = {d: ds[d].values for d in monitor.pixel_dims_ if d in ds.coords}
        monitor.alert_ = np.asarray(ds["alert"].values, dtype=bool)
        monitor.last_update_dates_ = int(ds.attrs.get(LAST_UPDATE_ATTR, len(dates)))
        return monitor

    def save(self, path) -> None:
        """Write the monitor to ``path``, atomically. ``.zarr``: the result and ``alert`` as a
        Zarr store, the state in its directory ``.tscube-state`` (see
        :mod:`tscube.bfast.nrt._store`), which :func:`update_saved` and ``tscube monitor
        --update`` update in place; ``.nc``: the dataset of :meth:`to_dataset`."""
        from ...io import replace_atomically, temporary_path, write_result
        from ...runs import exclusive_lock, quiet_zarr
        from ._store import GENERATION_ATTR, write_state

        self._check_fitted("save")
        path = Path(path)
        with exclusive_lock(path):  # the one lock of every writer of the output
            if path.suffix.lower() != ".zarr":
                write_result(self.to_dataset(), path)
                return
            ds = self.to_dataset()
            result = ds.drop_vars([n for n in ds.data_vars if n.startswith(STATE_PREFIX)] + ["date", "monitor_time"])
            result.attrs.update({GENERATION_ATTR: 0, "tscube_last_date": str(self.dates_[-1])})
            tmp = temporary_path(path)
            shutil.rmtree(tmp, ignore_errors=True)
            with quiet_zarr():
                strip_chunks(store_uncompressed(result)).to_zarr(tmp, mode="w")
            write_state(tmp, self.state_.__getitem__, self.dates_, int(np.prod(self.pixel_shape_, dtype=np.int64)),
                        last_update_dates=self.last_update_dates_)
            replace_atomically(tmp, path)

    @classmethod
    def load(cls, path) -> "BfastMonitor":
        """The monitor saved at ``path`` (its state in memory)."""
        import xarray as xr

        from ...runs import quiet_zarr
        from ._store import has_state, load_state, read_manifest

        path = str(path)
        if path.rstrip("/").endswith(".zarr"):
            with quiet_zarr(), xr.open_zarr(path, consolidated=False) as ds:
                if has_state(path):
                    state, dates, _ = load_state(path)
                    monitor = cls._from_parts(state, model_from_attrs(ds.attrs), dates, ds.load())
                    monitor.last_update_dates_ = int(read_manifest(path)["last_update_dates"])
                    # from the committed state, not the stored result (which an update
                    # rewrites before its commit: a killed one leaves it half new)
                    alert = state["break_index"] >= len(dates) - monitor.last_update_dates_
                    monitor.alert_ = alert.reshape(monitor.pixel_shape_)
                    return monitor
                return cls.from_dataset(ds.load())
        with xr.open_dataset(path) as ds:
            return cls.from_dataset(ds.load())


def update_saved(path, data, dates=None, *, time_dim: str = "time") -> np.ndarray:
    """Update a monitor saved to ``.zarr`` in place with new images; returns its ``alert`` map.

    The operational path (``tscube monitor --update`` takes it): only the new images, the
    fit and what an update changes are read, only that and the new residuals written
    (:mod:`tscube.bfast.nrt._store`), so one new image costs O(1) per pixel whatever the
    number of dates so far. Killed at any point, the saved state is the previous one or
    the new one, and the same call again finishes the same update with the same bytes.
    """
    from ...runs import exclusive_lock, quiet_zarr
    from . import _store as store

    path = Path(path)
    if not store.has_state(path):
        raise ValueError(f"{path.name} holds no monitoring state (save a BfastMonitor to .zarr, or run "
                         "tscube monitor --update)")
    with exclusive_lock(path):  # the one lock of every writer of the output
        group = store.open_result(path)
        with quiet_zarr():
            model = model_from_attrs(group.attrs)
            pixel_shape = tuple(group["status"].shape)
        store.repair_result(path, model, group)
        values, new_dates, _, _, shape = _as_input(data, dates, time_dim)
        if shape != pixel_shape:
            raise ValueError(f"new images are shaped {shape}, the state {pixel_shape}")
        store.update_files(path, model, values, new_dates, group)
        with quiet_zarr():
            return np.asarray(group["alert"][...], dtype=bool)
