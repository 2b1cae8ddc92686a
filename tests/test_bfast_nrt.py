"""Near-real-time BFAST Monitor: fit up to a date, update with the rest = the full run."""

from __future__ import annotations

import numpy as np
import pytest

from tscube import bfast_monitor
from tscube.bfast.nrt import BfastMonitor
from tscube.bfast.monitor import OUTPUT_DTYPES, BfastStatus
from tscube.datasets import make_cube
from tscube.timeaxis import build_time_axis

from conftest import GAP_PATTERNS, gappy_modis

#: Float outputs and what their tolerance scales with (data units, process units, 1 for ratios).
_SCALES = {"magnitude": "data", "sigma": "data", "rmse": "data", "statistic": "process", "mosum_mean": "process",
           "relative_magnitude": "ratio"}


def assert_equal_to_full_run(result, full, data, rtol):
    """Integer outputs, break and history times identical; floats within ``rtol`` relative
    to their scale (the data for ``magnitude`` and ``sigma``, the process for the MOSUM statistics:
    median residuals and mean processes cross zero, where a relative error means nothing)."""
    for name in OUTPUT_DTYPES:
        x, y = getattr(result, name), getattr(full, name)
        assert x.shape == y.shape and x.dtype == y.dtype, name
        if name not in _SCALES:
            np.testing.assert_array_equal(x, y, err_msg=name)
            continue
        np.testing.assert_array_equal(np.isnan(x), np.isnan(y), err_msg=name)
        scale = {"data": np.nanmax(np.abs(data.astype(float))), "process": np.nanmax(full.statistic, initial=1.0),
                 "ratio": 1.0}[_SCALES[name]]
        np.testing.assert_allclose(x, y, rtol=rtol, atol=rtol * scale, equal_nan=True, err_msg=name)


def _split_runs(values, dates, start, fit_until, steps, **kwargs):
    """Fit on ``values[:fit_until]``, then update with the rest in ``steps`` pieces."""
    monitor = BfastMonitor(start, **kwargs).fit(values[:fit_until], dates[:fit_until])
    bounds = np.linspace(fit_until, len(dates), steps + 1).round().astype(int)
    alerts = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        before = monitor.result().break_index.copy()
        alert = monitor.update(values[a:b], dates[a:b])
        after = monitor.result()
        np.testing.assert_array_equal(alert, (after.break_index >= a) & (before < 0))
        alerts.append(alert)
    return monitor, alerts


def _cube(nan_fraction, dtype=np.float32, seed=3, shape=(6, 9), n_dates=120, n_history=70):
    return make_cube("demo", shape=shape, n_dates=n_dates, n_history=n_history, nan_fraction=nan_fraction,
                     dtype=dtype, seed=seed)


@pytest.mark.parametrize("steps", [1, 2, 7])
@pytest.mark.parametrize("nan_fraction", [0.0, 0.5, 0.9])
@pytest.mark.parametrize("history", ["all", "ROC", "BP"])
def test_updates_equal_full_run_decimal_years(steps, nan_fraction, history):
    """Decimal-year dates (times independent of the series length): floats to 1e-12."""
    cube = _cube(nan_fraction)
    dates = build_time_axis(cube.dates, 23).time
    start = float(dates[70])
    full = bfast_monitor(cube.data, dates, start, freq=23, history=history, engine="cpu")
    monitor, _ = _split_runs(cube.data, dates, start, 85, steps, freq=23, history=history, engine="cpu")
    assert_equal_to_full_run(monitor.result(), full, cube.data, rtol=1e-12)
    assert np.count_nonzero(full.has_break) > 0


def test_updates_over_many_blocks_and_bands(tmp_path, monkeypatch):
    """A cube of several kernel blocks (:data:`tscube.bfast.nrt._cpu.BLOCK` lanes, the last one
    ragged), updated in memory (blocks on every core) and saved (bands of two grid rows,
    each band on a thread of its own, its blocks in turn): the same bits both ways, and
    the full run's result. Its floats agree with the full run to 1e-9, not 1e-12: on
    this many pixels some histories have 11-12 observations for 8 regressors and
    extrapolate rounding (the cpu engine accumulates its Gram sums in another order than
    the state's fit, whose trend column is centred on the fit's dates) into magnitudes
    up to ~2e-10 apart; the reference and cpu engines differ by ~2e-11 there."""
    from tscube.bfast import nrt
    from tscube.bfast.nrt import _cpu as nrt_kernels
    from tscube.bfast.nrt import _store as _nrt_store

    cube = _cube(0.3, seed=13, shape=(50, 53), n_dates=100, n_history=60)
    assert cube.data[0].size > 2 * nrt_kernels.BLOCK
    dates = build_time_axis(cube.dates, 23).time
    start = float(dates[60])
    kwargs = dict(freq=23, history="ROC", engine="cpu")
    monitor, _ = _split_runs(cube.data, dates, start, 75, 2, **kwargs)
    BfastMonitor(start, **kwargs).fit(cube.data[:75], dates[:75]).save(tmp_path / "s.zarr")
    monkeypatch.setattr(_nrt_store, "BAND_PIXELS", 106)
    nrt.update_saved(tmp_path / "s.zarr", cube.data[75:90], dates[75:90])
    nrt.update_saved(tmp_path / "s.zarr", cube.data[90:], dates[90:])
    in_memory, saved = monitor.result(), BfastMonitor.load(tmp_path / "s.zarr").result()
    for name in OUTPUT_DTYPES:
        np.testing.assert_array_equal(getattr(saved, name), getattr(in_memory, name), err_msg=name)
    full = bfast_monitor(cube.data, dates, start, **kwargs)
    assert_equal_to_full_run(in_memory, full, cube.data, rtol=1e-9)
    assert np.count_nonzero(full.has_break) > 100


@pytest.mark.parametrize("fit_until", [71, 90, 119])
@pytest.mark.parametrize("start_index", [50, 70])
def test_updates_equal_full_run_int16_nodata_datetimes(fit_until, start_index):
    """int16 with a nodata value, datetimes (R's daily-grid / 16-day time values move by an
    ulp when the series grows, so the full run's harmonics differ from the fit's by
    ~3e-12: floats agree to 1e-10 there), several starts and fit dates."""
    cube = _cube(0.3, seed=5)
    data = np.where(np.isnan(cube.data), -3000, np.round(cube.data * 10000)).astype(np.int16)
    start = cube.dates[start_index]
    kwargs = dict(freq=23, nodata=-3000, engine="cpu")
    full = bfast_monitor(data, cube.dates, start, **kwargs)
    monitor, _ = _split_runs(data, cube.dates, start, max(fit_until, start_index + 1), 3, **kwargs)
    assert_equal_to_full_run(monitor.result(), full, data, rtol=1e-10)


def test_fit_without_monitoring_data_becomes_monitored():
    """Pixels missing at every monitoring date of the fit (NO_MONITORING_DATA), all-missing
    pixels and constant pixels (PERFECT_FIT) get the full run's statuses after updates."""
    cube = _cube(0.5, seed=7)
    dates = build_time_axis(cube.dates, 23).time
    data = cube.data.copy()
    data[70:80, 0, :] = np.nan  # no monitoring data in the fit
    data[:, 1, 0] = np.nan  # all missing, ever
    data[:80, 1, 1] = np.nan  # all missing in the fit, then data: TOO_FEW_HISTORY
    data[:, 2, 0] = 0.5  # constant: PERFECT_FIT
    data[70:80, 2, 1] = np.nan
    data[:, 2, 1] = np.where(np.isnan(data[:, 2, 1]), np.nan, 0.25)  # constant, monitoring data later
    start = float(dates[70])
    for history in ("all", "ROC"):
        fitted = BfastMonitor(start, freq=23, history=history, engine="cpu").fit(data[:80], dates[:80])
        assert fitted.result().status[0, 3] == BfastStatus.NO_MONITORING_DATA or np.isnan(data[70:80, 0, 3]).all()
        full = bfast_monitor(data, dates, start, freq=23, history=history, engine="cpu")
        fitted.update(data[80:], dates[80:])
        assert_equal_to_full_run(fitted.result(), full, data, rtol=1e-12)
        counts = full.status_counts()
        assert counts["ALL_MISSING"] == 1 and counts["PERFECT_FIT"] == 2 and counts.get("TOO_FEW_HISTORY", 0) == 1


@pytest.mark.parametrize("process", ["OLS-MOSUM", "OLS-CUSUM"])
def test_season_dummies_updates_equal_full_run(process):
    """Season dummies (k = 24) with either process, fitted before any monitoring data: a
    history that misses a cycle position stays SINGULAR_DESIGN, the others equal the full run."""
    cube = _cube(0.2, seed=11, n_dates=160, n_history=110)
    dates = build_time_axis(cube.dates, 23).time
    data = cube.data.copy()
    data[[5, 28, 51, 74, 97], 0, 0] = np.nan  # pixel (0, 0) never sees the sixth cycle position
    data[110, 0, :] = np.nan  # row 0: no monitoring data in the fit
    start = float(dates[110])
    kwargs = dict(freq=23, order=0, season=True, type=process, history="all", engine="cpu")
    full = bfast_monitor(data, dates, start, **kwargs)
    monitor, _ = _split_runs(data, dates, start, 111, 3, **kwargs)
    assert_equal_to_full_run(monitor.result(), full, data, rtol=1e-12)
    assert full.status[0, 0] == BfastStatus.SINGULAR_DESIGN
    assert np.count_nonzero(full.status == BfastStatus.OK) > 20


@pytest.mark.parametrize("pattern", GAP_PATTERNS)
def test_season_dummies_on_gappy_roc_histories_updates_equal_full_run(pattern):
    """Season dummies and ROC on gappy MODIS pixels (reversed candidates starting rank
    deficient, some histories missing a cycle position): the state's fit and updates
    equal the full run."""
    data, dates = gappy_modis(pattern, seed=1)
    kwargs = dict(freq=23, order=0, season=True, history="ROC", engine="cpu")
    full = bfast_monitor(data, dates, 2009.0, **kwargs)
    fit_until = int(np.searchsorted(dates, 2009.5))
    monitor, _ = _split_runs(data, dates, 2009.0, fit_until, 3, **kwargs)
    assert_equal_to_full_run(monitor.result(), full, data, rtol=1e-12)
    assert np.count_nonzero(full.has_break) >= 10


def test_flagged_history_without_monitoring_data():
    """ROC at a level above 0.05 flags some histories (ROC_NO_CROSSING); pixels without
    monitoring data in the fit get their flag once monitored."""
    cube = _cube(0.2, seed=11, shape=(12, 12))
    dates = build_time_axis(cube.dates, 23).time
    data = cube.data.copy()
    data[70:75] = np.nan
    start = float(dates[70])
    kwargs = dict(freq=23, history="ROC", level=(0.05, 0.5), engine="cpu")
    full = bfast_monitor(data, dates, start, **kwargs)
    assert full.status_counts().get("ROC_NO_CROSSING", 0) > 0
    monitor = BfastMonitor(start, **kwargs).fit(data[:75], dates[:75])
    assert set(monitor.result().status_counts()) == {"NO_MONITORING_DATA"}
    monitor.update(data[75:], dates[75:])
    assert_equal_to_full_run(monitor.result(), full, data, rtol=1e-12)


@pytest.mark.parametrize("engine", ["reference", "cpu"])
def test_fit_from_any_engine(engine):
    cube = _cube(0.5, shape=(3, 4))
    dates = build_time_axis(cube.dates, 23).time
    start = float(dates[70])
    full = bfast_monitor(cube.data, dates, start, freq=23, engine="reference")
    monitor, _ = _split_runs(cube.data, dates, start, 80, 2, freq=23, engine=engine)
    assert_equal_to_full_run(monitor.result(), full, cube.data, rtol=1e-12)


def test_state_keeps_window_and_residual_sum():
    """The state's window (the history tail from slot m on, then the monitoring residuals
    from row ``leaving`` on, the first of them kept with it) holds the last floor(h n)
    residuals, its sum their sum, and the residual sum is the sum of all residuals from the
    history start (the OLS-CUSUM's input); the median window holds consecutive ranks around
    the median: checked against residuals recomputed in NumPy from the state's fit."""
    cube = _cube(0.3, shape=(2, 3))
    dates = build_time_axis(cube.dates, 23).time
    monitor = BfastMonitor(float(dates[70]), freq=23, history="all", engine="cpu").fit(cube.data, dates)
    state, model = monitor.state_, monitor.model_
    from tscube.bfast.nrt.state import design_rows as _design_rows

    X = _design_rows(build_time_axis(dates, 23), np.arange(len(dates)), model)
    for p in range(6):
        y = cube.data.reshape(len(dates), -1)[:, p].astype(float)
        rows = np.flatnonzero(~np.isnan(y))
        r = y[rows] - X[rows] @ state["coefficients"][:, p]
        n = state["n_history"][p]
        w = int(np.floor(model["h"] * n))
        m = r.size - n
        monitoring = state["residuals"][:, p]
        if m < w:
            window = np.concatenate([state["tail"][m:w, p], monitoring[~np.isnan(monitoring)]])
        else:
            window = monitoring[int(state["leaving"][p]):]  # the record holds integers as float64
            window = window[~np.isnan(window)]
        np.testing.assert_allclose(window, r[-w:], rtol=0, atol=1e-15)
        below, count = int(state["median_below"][p]), int(state["median_count"][p])
        assert below + count + state["median_above"][p] == m
        kept = np.sort(monitoring[~np.isnan(monitoring)])
        np.testing.assert_array_equal(state["median_window"][:count, p], kept[below:below + count])
        np.testing.assert_allclose(state["window_sum"][p], r[-w:].sum(), rtol=0, atol=1e-13)
        np.testing.assert_allclose(state["residual_sum"][p], r.sum(), rtol=0, atol=1e-13)
        if m >= w and w > 0:  # the next residual to leave the window, kept with its row
            assert state["leaving_value"][p] == window[0]
        np.testing.assert_allclose(np.nanmedian(state["residuals"][:, p]), monitor.result().magnitude.ravel()[p],
                                   rtol=0, atol=0)


def test_pickled_monitor_updates_as_the_original():
    """A pickled (or deep-copied) monitor keeps its state's views on its records: it
    updates, and saves, what the original does."""
    import copy
    import pickle

    cube = _cube(0.5)
    monitor = BfastMonitor(cube.dates[70], freq=23, engine="cpu").fit(cube.data[:90], cube.dates[:90])
    twins = [pickle.loads(pickle.dumps(monitor)), copy.deepcopy(monitor)]
    alert = monitor.update(cube.data[90:], cube.dates[90:])
    assert alert.any()
    for twin in twins:
        np.testing.assert_array_equal(twin.update(cube.data[90:], cube.dates[90:]), alert)
        for name in ("break_index", "n_monitor", "leaving_value", "median_window"):
            np.testing.assert_array_equal(twin.state_[name], monitor.state_[name], err_msg=name)
            assert np.shares_memory(twin.state_[name], twin.state_["hot"]), name


def test_load_takes_alerts_from_the_committed_state(tmp_path, monkeypatch):
    """An update killed before its commit leaves a result half rewritten (marked -1);
    loading the monitor then gives the committed state's alerts, not the stored ones."""
    from tscube.bfast.nrt import _store as _nrt_store
    from tscube.bfast.nrt import update_saved

    cube = _cube(0.5)
    monitor = BfastMonitor(cube.dates[70], freq=23, engine="cpu").fit(cube.data[:90], cube.dates[:90])
    monitor.save(tmp_path / "a.zarr")

    def killed(*args, **kwargs):
        raise SystemExit("killed")

    monkeypatch.setattr(_nrt_store, "_write_json_atomic", killed)  # the commit
    with pytest.raises(SystemExit):
        update_saved(tmp_path / "a.zarr", cube.data[90:], cube.dates[90:])
    assert _nrt_store.result_generation(tmp_path / "a.zarr") == -1
    loaded = BfastMonitor.load(tmp_path / "a.zarr")
    np.testing.assert_array_equal(loaded.alert_, monitor.alert_)
    np.testing.assert_array_equal(loaded.dates_, monitor.dates_)


@pytest.mark.parametrize("suffix", [".zarr", ".nc"])
def test_save_load_update(tmp_path, suffix):
    """A saved and loaded state updates to the same result as the one kept in memory."""
    cube = _cube(0.5)
    monitor = BfastMonitor(cube.dates[70], freq=23, engine="cpu").fit(cube.data[:90], cube.dates[:90])
    monitor.save(tmp_path / f"state{suffix}")
    loaded = BfastMonitor.load(tmp_path / f"state{suffix}")
    for name, array in monitor.state_.items():
        np.testing.assert_array_equal(loaded.state_[name], array, err_msg=name)
    np.testing.assert_array_equal(loaded.dates_, monitor.dates_)
    alert = monitor.update(cube.data[90:], cube.dates[90:])
    np.testing.assert_array_equal(loaded.update(cube.data[90:], cube.dates[90:]), alert)
    for name in OUTPUT_DTYPES:
        np.testing.assert_array_equal(getattr(loaded.result(), name), getattr(monitor.result(), name), err_msg=name)


def test_xarray_input_keeps_coordinates():
    xr = pytest.importorskip("xarray")
    cube = _cube(0.5)
    da = xr.DataArray(cube.data, dims=("time", "y", "x"),
                      coords={"time": cube.dates, "y": np.arange(6) * 30.0, "x": np.arange(9) * 30.0})
    monitor = BfastMonitor(cube.dates[70], freq=23, engine="cpu").fit(da.isel(time=slice(0, 90)))
    monitor.update(da.isel(time=slice(90, None)))
    full = bfast_monitor(cube.data, cube.dates, cube.dates[70], freq=23, engine="cpu")
    assert_equal_to_full_run(monitor.result(), full, cube.data, rtol=1e-10)
    ds = monitor.to_dataset()
    np.testing.assert_array_equal(ds["x"].values, da["x"].values)
    np.testing.assert_array_equal(ds["break_index"].values, full.break_index)
    assert ds["state_residuals"].dims == ("monitor_time", "y", "x")


def test_caller_errors():
    cube = _cube(0.5, shape=(2, 2))
    monitor = BfastMonitor(cube.dates[70], freq=23, engine="cpu")
    with pytest.raises(RuntimeError, match="fit"):
        monitor.update(cube.data[90:], cube.dates[90:])
    monitor.fit(cube.data[:90], cube.dates[:90])
    with pytest.raises(ValueError, match="not after the last monitored date"):
        monitor.update(cube.data[85:], cube.dates[85:])
    with pytest.raises(ValueError, match="shaped"):
        monitor.update(cube.data[90:, :1], cube.dates[90:])
    with pytest.raises(ValueError, match="one start"):
        BfastMonitor([cube.dates[70], cube.dates[80]], freq=23).fit(cube.data, cube.dates)
    with pytest.raises(TypeError, match="decimal years"):
        BfastMonitor(2003.5, freq=23).fit(cube.data[:90], build_time_axis(cube.dates, 23).time[:90]).update(
            cube.data[90:], cube.dates[90:])


def test_saved_state_errors(tmp_path):
    """A saved state refuses images that are not numbers and states of another layout
    version (to be fitted again), naming the reason, and stays as it was."""
    import json

    from tscube.bfast.nrt import _store as _nrt_store
    from tscube.bfast.nrt import update_saved
    from tscube.bfast.nrt.dataset import model_from_attrs

    cube = _cube(0.5, shape=(2, 3))
    path = tmp_path / "a.zarr"
    BfastMonitor(cube.dates[70], freq=23, engine="cpu").fit(cube.data[:90], cube.dates[:90]).save(path)
    before = _nrt_store.read_manifest(path)
    for call in (lambda: update_saved(path, cube.data[90:91].astype(bool), cube.dates[90:91]),
                 lambda: _nrt_store.update_files(path, model_from_attrs(BfastMonitor.load(path).to_dataset().attrs),
                                                 cube.data[90:91].reshape(1, -1).astype(complex), cube.dates[90:91]),
                 lambda: BfastMonitor.load(path).update(cube.data[90:91].astype(object), cube.dates[90:91])):
        with pytest.raises(TypeError, match="float or integer"):
            call()
    assert _nrt_store.read_manifest(path) == before
    manifest = _nrt_store.state_dir(path) / _nrt_store.MANIFEST
    manifest.write_text(json.dumps(dict(before, version=min(_nrt_store.READABLE_VERSIONS) - 1)))
    for call in (lambda: update_saved(path, cube.data[90:91], cube.dates[90:91]), lambda: BfastMonitor.load(path)):
        with pytest.raises(ValueError, match="fit again"):
            call()


def test_version_5_states_load_and_update(tmp_path):
    """A state saved before per-pixel critical values (layout 5: no ``critval`` array)
    loads, updates and gives the results of the current layout."""
    import json

    from tscube.bfast.nrt import _store as _nrt_store
    from tscube.bfast.nrt import update_saved

    cube = _cube(0.4, shape=(3, 4))
    path = tmp_path / "old.zarr"
    BfastMonitor(cube.dates[70], freq=23, engine="cpu").fit(cube.data[:90], cube.dates[:90]).save(path)
    directory = _nrt_store.state_dir(path)
    (directory / "static" / "critval.npy").unlink()
    manifest = directory / _nrt_store.MANIFEST
    manifest.write_text(json.dumps(dict(json.loads(manifest.read_text()), version=5)))
    update_saved(path, cube.data[90:], cube.dates[90:])
    expected = BfastMonitor(cube.dates[70], freq=23, engine="cpu").fit(cube.data, cube.dates).result()
    got = BfastMonitor.load(path).result()
    np.testing.assert_array_equal(got.break_index, expected.break_index)
    np.testing.assert_array_equal(got.critval, expected.critval)


def test_cusum_process_from_the_state():
    """The kernel's OLS-CUSUM (a type of newer results): the cumulative residual sum from the
    history start over sigma sqrt(n), its boundary sqrt(x (x - 1) (c^2 + log(x / (x - 1)))),
    x = t / n; checked against NumPy on residuals recomputed from the state's fit."""
    from tscube.bfast.nrt import state as nrt

    cube = _cube(0.3, shape=(3, 4))
    dates = build_time_axis(cube.dates, 23).time
    monitor = BfastMonitor(float(dates[70]), freq=23, history="all", engine="cpu").fit(cube.data[:90], dates[:90])
    monitor.model_["type"] = "OLS-CUSUM"
    for name in ("process_sum", "statistic", "fitted_sum"):
        monitor.state_[name][:] = 0.0
    monitor.state_["break_index"][:] = -1
    state, model = monitor.state_, monitor.model_
    fitted_residual_sum = state["residual_sum"].copy()
    n_before = state["n_monitor"].copy()
    state["residual_sum"][:] -= np.nansum(state["residuals"], axis=0)  # back to the history's sum
    state["n_monitor"][:] = 0
    state["residuals"][:] = np.nan
    state["leaving"][:] = -1
    for name in ("median_count", "median_below", "median_above"):
        state[name][:] = 0
    nrt._advance_state(state, np.where(np.isnan(cube.data[70:90]), np.nan, cube.data[70:90]).reshape(20, -1)
                       .astype(float), np.arange(70, 90), nrt.design_rows(build_time_axis(dates[:90], 23),
                                                                              np.arange(70, 90), model), model)
    np.testing.assert_allclose(state["residual_sum"], fitted_residual_sum, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(state["n_monitor"], n_before)
    X = nrt.design_rows(build_time_axis(dates[:90], 23), np.arange(90), model)
    for p in range(12):
        y = cube.data[:90].reshape(90, -1)[:, p].astype(float)
        rows = np.flatnonzero(~np.isnan(y))
        r = y[rows] - X[rows] @ state["coefficients"][:, p]
        n, sigma = state["n_history"][p], state["sigma"][p]
        process = np.cumsum(r)[n:] / (sigma * np.sqrt(n))
        x = np.arange(n + 1, r.size + 1) / n
        boundary = np.sqrt(x * (x - 1) * (model["critval"] ** 2 + np.log(x / (x - 1))))
        crossing = np.flatnonzero(np.abs(process) > boundary)
        expected = rows[n + crossing[0]] if crossing.size else -1
        assert state["break_index"][p] == expected
        np.testing.assert_allclose(state["statistic"][p], np.max(np.abs(process)), rtol=1e-12)
        np.testing.assert_allclose(state["process_sum"][p], np.sum(process), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(state["fitted_sum"][p], np.sum(y[rows][n:] - r[n:]), rtol=1e-13)


@pytest.mark.parametrize("size", [2, 3, 4])
def test_median_window_is_exact(size):
    """The median window (any size) gives np.median of all values after every insertion:
    values with ties, a drift that walks the median out of the window (rebuilds), and
    values that alternate around it; the window always holds consecutive ranks."""
    from tscube.bfast.nrt import _cpu as nrt

    rng = np.random.default_rng(size)
    rebuilt = []
    for series in (rng.integers(0, 6, 60).astype(float), np.cumsum(rng.normal(-0.3, 1.0, 80)),
                   np.concatenate([rng.normal(0, 1, 30), rng.normal(-5, 1, 50)]),
                   np.arange(40.0) * (-1.0) ** np.arange(40)):
        residuals = np.full((series.size, 1), np.nan)
        record = np.full((1, nrt._WINDOW + size), np.nan)  # a pixel's record with a window of ``size``
        window = record[:, nrt._WINDOW:].T
        count = below = above = 0
        rebuilds = 0
        for i, v in enumerate(series):
            residuals[i, 0] = v
            count, below, above = nrt._window_insert(v, record, 0, count, below, above, size)
            if not nrt._holds_median(count, below, above):
                old = (i + 1) // 2  # the committed rows, then the new ones
                count, below, above = nrt._rebuild_window(record, 0, count + below + above, residuals, 0, old,
                                                          residuals[old:i + 1], size)
                rebuilds += 1
            assert below + count + above == i + 1
            np.testing.assert_array_equal(window[:count, 0], np.sort(series[:i + 1])[below:below + count])
            assert nrt._window_median(record, 0, count, below, above) == np.median(series[:i + 1])
        rebuilt.append(rebuilds)
    assert 0 < rebuilt[2] < 80 // size  # the shift after the break: a rebuild every ~size values


def test_update_touches_no_earlier_residual():
    """An update grows the residual store in the spare rows of its buffer: the earlier
    rows are not copied (the same memory), and the new rows hold the new residuals."""
    cube = _cube(0.3, shape=(2, 3))
    monitor = BfastMonitor(cube.dates[70], freq=23, engine="cpu").fit(cube.data[:80], cube.dates[:80])
    monitor.update(cube.data[80:81], cube.dates[80:81])
    before = monitor.state_["residuals"]
    monitor.update(cube.data[81:83], cube.dates[81:83])
    after = monitor.state_["residuals"]
    assert after.shape[0] == before.shape[0] + 2 and np.shares_memory(after, before)
    np.testing.assert_array_equal(after[:before.shape[0]], before)
    assert np.array_equal(np.isnan(after[-2:]), np.isnan(cube.data[81:83].reshape(2, -1)))


def test_update_saved_in_place_equals_the_full_run(tmp_path):
    """A monitor saved to .zarr and updated there (update_saved: the on-disk state, in
    place) in 1 and 3 steps equals the in-memory updates and the full run; a refused
    update leaves the saved state alone."""
    from tscube.bfast.nrt import _store as _nrt_store
    from tscube.bfast.nrt import update_saved

    cube = _cube(0.5)
    full = bfast_monitor(cube.data, cube.dates, cube.dates[70], freq=23, engine="cpu")
    for steps in ([120], [95, 96, 120]):
        path = tmp_path / f"state{len(steps)}.zarr"
        monitor = BfastMonitor(cube.dates[70], freq=23, engine="cpu").fit(cube.data[:90], cube.dates[:90])
        monitor.save(path)
        done = 90
        for until in steps:
            alert = update_saved(path, cube.data[done:until], cube.dates[done:until])
            np.testing.assert_array_equal(alert, monitor.update(cube.data[done:until], cube.dates[done:until]))
            done = until
        loaded = BfastMonitor.load(path)
        for name, array in monitor.state_.items():
            np.testing.assert_array_equal(loaded.state_[name], array, err_msg=name)
        assert_equal_to_full_run(loaded.result(), full, cube.data, rtol=1e-10)
        with pytest.importorskip("xarray").open_zarr(path) as ds:
            np.testing.assert_array_equal(ds["break_index"].values, full.break_index)
            assert ds.attrs[_nrt_store.GENERATION_ATTR] == len(steps)
    before = _nrt_store.load_state(path)
    with pytest.raises(ValueError, match="not after the last monitored date"):
        update_saved(path, cube.data[100:101], cube.dates[100:101])
    with pytest.raises(ValueError, match="shaped"):
        update_saved(path, cube.data[100:101, :2], cube.dates[100:101])
    after = _nrt_store.load_state(path)
    np.testing.assert_array_equal(after[1], before[1])
    assert after[2] == before[2]
    for name in before[0]:
        np.testing.assert_array_equal(after[0][name], before[0][name])


def test_update_saved_writes_what_a_whole_rewrite_writes(tmp_path):
    """An update rewrites only the result chunks that can change (statuses where the first
    valid or monitoring value came, breaks where they moved, ``n_inf`` where it grew, ...):
    after each of 5 one-date updates of a cloudy cube with infs and a pixel that gets its
    first value, the store's bytes equal a whole rewrite's, and the result the full run's."""
    import shutil

    import zarr

    from tscube.bfast.nrt import _store as _nrt_store
    from tscube.bfast.nrt import update_saved
    from tscube.bfast.nrt.dataset import model_from_attrs

    from test_runs import tree_bytes

    cube = _cube(0.9, n_dates=100)
    data = cube.data.copy()
    data[:, 0, 0] = np.nan
    data[97, 0, 0] = 0.5  # first valid value of the pixel
    data[96, 1, :3] = np.inf
    full = bfast_monitor(data, cube.dates, cube.dates[70], freq=23, engine="cpu")
    path = tmp_path / "state.zarr"
    BfastMonitor(cube.dates[70], freq=23, engine="cpu").fit(data[:95], cube.dates[:95]).save(path)
    model = model_from_attrs(zarr.open_group(str(path), mode="r").attrs)
    statuses = []
    for t in range(95, 100):
        update_saved(path, data[t:t + 1], cube.dates[t:t + 1])
        whole = tmp_path / f"whole{t}.zarr"
        shutil.copytree(path, whole)
        _nrt_store.write_result(whole, model)
        assert tree_bytes(whole) == tree_bytes(path), t
        statuses.append(zarr.open_array(str(path / "status"), mode="r")[...])
    assert any((a != b).any() for a, b in zip(statuses, statuses[1:]))  # statuses did change on the way
    with pytest.importorskip("xarray").open_zarr(path) as ds:
        stored = type("Stored", (), {name: ds[name].values for name in OUTPUT_DTYPES})
        assert_equal_to_full_run(stored, full, data[np.isfinite(data)], rtol=1e-10)
    assert full.n_inf.sum() > 0 and full.status[0, 0] != BfastStatus.ALL_MISSING


def test_update_saved_chunk_by_chunk_writes_the_same_bytes(tmp_path, monkeypatch):
    """An update of a saved state in bands of one grid row (9 pixels: the records read,
    updated and written band by band; the result's bands, rows of one chunk file, written
    by parallel threads) writes the same files as in one band."""
    import shutil

    from tscube.bfast.nrt import _store as _nrt_store
    from tscube.bfast.nrt import update_saved

    from test_runs import tree_bytes

    cube = _cube(0.5)
    BfastMonitor(cube.dates[70], freq=23, engine="cpu").fit(cube.data[:90], cube.dates[:90]).save(tmp_path / "a.zarr")
    shutil.copytree(tmp_path / "a.zarr", tmp_path / "b.zarr")
    whole = update_saved(tmp_path / "a.zarr", cube.data[90:100], cube.dates[90:100])
    monkeypatch.setattr(_nrt_store, "BAND_PIXELS", 9)  # 9 pixels a row: one row per band, of one chunk file
    rows = update_saved(tmp_path / "b.zarr", cube.data[90:100], cube.dates[90:100])
    np.testing.assert_array_equal(rows, whole)
    assert tree_bytes(tmp_path / "b.zarr") == tree_bytes(tmp_path / "a.zarr")


@pytest.mark.parametrize("dtype, fill", [(np.float64, np.nan), (np.int64, -1), (np.bool_, False)])
def test_result_written_in_place_equals_zarr(tmp_path, dtype, fill):
    """The result's in-place writer (bands of rows into raw chunk files) gives what zarr
    gives: the same values, the same bytes in every chunk file zarr wrote, edge chunks
    padded with the fill value, missing chunk files (all fill) made; other layouts refused."""
    zarr = pytest.importorskip("zarr")
    from tscube.bfast.nrt._store import _ChunkFiles

    rng = np.random.default_rng(3)
    arrays = []
    for name in ("in_place", "by_zarr"):
        array = zarr.create_array(str(tmp_path / name), shape=(7, 9), chunks=(3, 4), dtype=dtype, fill_value=fill,
                                  compressors=None)
        first = np.full((7, 9), fill, dtype=dtype)
        first[:3] = rng.integers(0, 2, (3, 9)) if dtype is np.bool_ else rng.integers(-5, 5, (3, 9))
        array[...] = first  # rows 3-6: all fill, no chunk file
        arrays.append(array)
    writer = _ChunkFiles.of(arrays[0])
    assert writer is not None
    scratch = np.empty(3 * 4 * 8, dtype=np.uint8)  # a band's part of a chunk, copied (or new memory)
    for band, copies in ((slice(0, 3), scratch), (slice(3, 6), None), (slice(6, 7), scratch)):
        values = rng.integers(0, 2, (band.stop - band.start, 9)).astype(dtype)
        writer.write_rows(values, band, scratch=copies)
        arrays[1][band] = values
    writer.close()
    np.testing.assert_array_equal(arrays[0][...], arrays[1][...])
    zarr_files = {p.relative_to(tmp_path / "by_zarr"): p.read_bytes() for p in (tmp_path / "by_zarr").rglob("c/*/*")}
    assert zarr_files and {p.relative_to(tmp_path / "in_place") for p in (tmp_path / "in_place").rglob("c/*/*")} \
        == set(zarr_files)
    for path, data in zarr_files.items():
        assert (tmp_path / "in_place" / path).read_bytes() == data, path
    compressed = zarr.create_array(str(tmp_path / "compressed"), shape=(7, 9), chunks=(3, 4), dtype=dtype)
    assert _ChunkFiles.of(compressed) is None
