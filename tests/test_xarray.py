"""xarray / dask front end: DataArray results equal the NumPy functions, lazily and on a cluster."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

xr = pytest.importorskip("xarray")
pytest.importorskip("dask")
rioxarray = pytest.importorskip("rioxarray")

import dask  # noqa: E402

from tscube.bfast import BfastStatus, bfast_monitor  # noqa: E402
from tscube.bfast.monitor import OUTPUT_DTYPES  # noqa: E402
from tscube.datasets import make_cube  # noqa: E402
from tscube.stl import stl  # noqa: E402
from tscube.xr import (  # noqa: E402
    OutputSpec,
    apply_time_series,
    bfast_monitor_xarray,
    parse_memory,
    stl_xarray,
)

ENGINE = "reference"


@pytest.fixture(scope="module")
def cube():
    return make_cube("demo", shape=(4, 5), seed=3)


@pytest.fixture(scope="module")
def cube_da(cube):
    da = xr.DataArray(
        cube.data,
        dims=("time", "y", "x"),
        coords=dict(time=cube.dates, y=4_000_000.0 - 30 * np.arange(4), x=500_000.0 + 30 * np.arange(5)),
        name="ndvi",
    )
    return da.rio.write_crs("EPSG:32633")


@pytest.fixture(scope="module")
def numpy_result(cube):
    return bfast_monitor(cube.data, cube.dates, cube.start, freq=23, engine=ENGINE)


def assert_equal_result(ds, result):
    for name, array in result.to_dict().items():
        np.testing.assert_array_equal(ds[name].values, array, err_msg=name)
        assert ds[name].dtype == array.dtype, name


def test_numpy_backed_equals_numpy_and_keeps_georeference(cube_da, numpy_result):
    ds = bfast_monitor_xarray(cube_da, cube_da.time.values[138], freq=23, engine=ENGINE)
    assert not dask.is_dask_collection(ds)
    assert_equal_result(ds, numpy_result)
    assert set(ds.data_vars) == set(OUTPUT_DTYPES)
    assert ds["break_time"].dims == ("y", "x")
    np.testing.assert_array_equal(ds.x.values, cube_da.x.values)
    np.testing.assert_array_equal(ds.y.values, cube_da.y.values)
    assert ds.rio.crs == cube_da.rio.crs
    assert ds.rio.transform() == cube_da.rio.transform()
    assert ds.attrs["freq"] == 23 and ds.attrs["engine"] == ENGINE
    assert ds.attrs["critval"] == numpy_result.attrs["critval"]
    assert ds["status"].attrs["flag_meanings"].split()[0] == BfastStatus(0).name


def test_attrs_are_netcdf_serialisable(cube_da):
    ds = bfast_monitor_xarray(cube_da, [cube_da.time.values[138], cube_da.time.values[180]], freq=23,
                              history=cube_da.time.values[20], level=(0.05, 0.05), engine=ENGINE)
    for value in ds.attrs.values():
        assert isinstance(value, (str, int, float)) or (
            isinstance(value, list) and all(isinstance(v, (int, float)) for v in value)), value


def test_dispatch_from_bfast_monitor(cube_da, numpy_result):
    ds = bfast_monitor(cube_da, start=cube_da.time.values[138], freq=23, engine=ENGINE)
    assert isinstance(ds, xr.Dataset)
    assert_equal_result(ds, numpy_result)


def test_dispatch_errors(cube, cube_da):
    with pytest.raises(TypeError, match="dates and start"):
        bfast_monitor(cube.data, start=cube.start, freq=23)
    with pytest.raises(TypeError, match="only valid for xarray"):
        bfast_monitor(cube.data, cube.dates, cube.start, freq=23, memory="1GB")
    with pytest.raises(TypeError, match="start"):
        bfast_monitor(cube_da, cube.start, freq=23)  # the start given as dates by mistake


def test_dask_chunks_equal_numpy_and_stay_lazy(cube_da, numpy_result):
    chunked = cube_da.chunk(dict(time=50, y=2, x=3))
    with pytest.warns(UserWarning, match="rechunking"):
        ds = bfast_monitor_xarray(chunked, cube_da.time.values[138], freq=23, engine=ENGINE, memory=230 * 6 * 40)
    assert dask.is_dask_collection(ds)
    assert ds["magnitude"].data.npartitions > 1
    assert_equal_result(ds.compute(), numpy_result)


def test_memory_budget_sets_pixel_chunks(cube_da):
    budget = 230 * 40 * 4  # four pixels' worth
    ds = bfast_monitor_xarray(cube_da.chunk(), cube_da.time.values[138], freq=23, engine=ENGINE, memory=budget)
    largest = max(np.prod(block) for block in zip(*(ds["status"].chunks)))
    assert 1 <= largest <= 4


def test_start_list_and_process(cube, cube_da):
    starts = [cube_da.time.values[138], cube_da.time.values[180]]
    expected = bfast_monitor(cube.data, cube.dates, starts, freq=23, return_process=True, engine=ENGINE)
    ds = bfast_monitor_xarray(cube_da.chunk(dict(y=2)), starts, freq=23, return_process=True, engine=ENGINE)
    assert ds["status"].dims == ("start", "y", "x")
    assert ds["process"].dims == ("start", "time", "y", "x")
    np.testing.assert_allclose(ds["start"].values, expected.attrs["start"])
    np.testing.assert_array_equal(ds["time"].values, cube_da.time.values)
    assert_equal_result(ds.compute(), expected)


def test_decimal_year_time_coordinate(cube, numpy_result):
    da = xr.DataArray(cube.data, dims=("time", "y", "x"), coords=dict(time=cube.time))
    ds = bfast_monitor_xarray(da, float(cube.time[138]), freq=23, engine=ENGINE)
    expected = bfast_monitor(cube.data, cube.time, float(cube.time[138]), freq=23, engine=ENGINE)
    assert_equal_result(ds, expected)


def test_other_pixel_dims(cube, numpy_result):
    """Any non-time dims are pixels: here one flat ``pixel`` dim, time last."""
    flat = cube.data.reshape(cube.data.shape[0], -1).T
    da = xr.DataArray(flat, dims=("pixel", "time"), coords=dict(time=cube.dates, pixel=np.arange(flat.shape[0])))
    ds = bfast_monitor_xarray(da, cube.start, freq=23, engine=ENGINE)
    assert ds["break_time"].dims == ("pixel",)
    np.testing.assert_array_equal(ds["break_time"].values, numpy_result.break_time.reshape(-1))


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda da: da.rename(time="band"), "no 'time' dimension"),
        (lambda da: da.drop_vars("time"), "no 'time' coordinate"),
        (lambda da: da.assign_coords(time=np.r_[da.time.values[:1], da.time.values[:-1]]), "duplicate dates"),
        (lambda da: da.assign_coords(time=da.time.values[::-1]), "unsorted dates"),
    ],
)
def test_time_coordinate_errors(cube_da, make, message):
    with pytest.raises(ValueError, match=message):
        bfast_monitor_xarray(make(cube_da), cube_da.time.values[138], freq=23, engine=ENGINE)


def test_parameter_errors_are_raised_before_computing(cube_da):
    lazy = cube_da.chunk()
    with pytest.raises(ValueError, match="after the last date"):
        bfast_monitor_xarray(lazy, "2030-01-01", freq=23)
    with pytest.raises(ValueError, match="h"):
        bfast_monitor_xarray(lazy, cube_da.time.values[138], freq=23, h=1.3)
    with pytest.raises(ValueError, match="type"):
        bfast_monitor_xarray(lazy, cube_da.time.values[138], freq=23, type="ME")
    with pytest.raises(ValueError, match="engine"):
        bfast_monitor_xarray(lazy, cube_da.time.values[138], freq=23, engine="gpu")


def test_parse_memory():
    assert parse_memory("2GB") == 2_000_000_000
    assert parse_memory("512MiB") == 512 * 2**20
    assert parse_memory(1000) == 1000
    with pytest.raises(ValueError, match="memory"):
        parse_memory("lots")
    with pytest.raises(ValueError, match="positive"):
        parse_memory(0)


def test_apply_time_series_generic():
    """The generic helper: per-pixel and per-date outputs of any (T, P) function."""
    rng = np.random.default_rng(0)
    values = rng.normal(size=(12, 3, 4))
    values[rng.random(values.shape) < 0.2] = np.nan
    da = xr.DataArray(values, dims=("time", "y", "x"), coords=dict(time=pd.date_range("2000", periods=12, freq="MS")))

    def summary(series):
        return dict(mean=np.nanmean(series, axis=0), filled=np.nan_to_num(series, nan=-1.0),
                    quantiles=np.nanquantile(series, [0.25, 0.75], axis=0))

    specs = [OutputSpec("mean", np.float64), OutputSpec("filled", np.float64, ("time",)),
             OutputSpec("quantiles", np.float64, ("q",))]
    for data in (da, da.chunk(dict(y=1, x=3))):
        ds = apply_time_series(data, summary, specs, sizes={"q": 2}, coords={"q": [0.25, 0.75]}).compute()
        np.testing.assert_array_equal(ds["mean"].values, np.nanmean(values, axis=0))
        np.testing.assert_array_equal(ds["filled"].values, np.nan_to_num(values, nan=-1.0))
        np.testing.assert_array_equal(ds["quantiles"].values, np.nanquantile(values, [0.25, 0.75], axis=0))
        assert ds["quantiles"].dims == ("q", "y", "x")


def test_stl_xarray_equals_numpy():
    rng = np.random.default_rng(1)
    n_times, period = 24, 4
    t = np.arange(n_times)
    values = (np.sin(2 * np.pi * t / period)[:, None, None] + 0.05 * t[:, None, None]
              + 0.1 * rng.normal(size=(n_times, 2, 3)))
    values[3, 0, 0] = np.nan
    dates = pd.date_range("2001-01-01", periods=n_times, freq="QS")
    da = xr.DataArray(values, dims=("time", "y", "x"), coords=dict(time=dates))
    expected = stl(values, period, dates=dates.to_numpy(), engine=ENGINE)
    ds = stl_xarray(da.chunk(dict(x=2)), period, engine=ENGINE).compute()
    for name in ("seasonal", "trend", "remainder", "weights", "seasonal_amplitude", "status"):
        np.testing.assert_array_equal(ds[name].values, getattr(expected, name), err_msg=name)
    # a matrix product over the batch: BLAS rounding depends on the chunk's size
    np.testing.assert_allclose(ds["trend_slope"].values, expected.trend_slope, rtol=1e-12)
    assert ds["trend"].dims == ("time", "y", "x")
    assert ds.attrs["period"] == period and ds.attrs["tscube_function"] == "stl"
    only_maps = stl_xarray(da, period, components=False, engine=ENGINE)
    assert set(only_maps.data_vars) == {"trend_slope", "seasonal_amplitude", "status"}
    with pytest.raises(ValueError, match="period"):
        stl_xarray(da, 1, engine=ENGINE)


@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        yield client


def test_local_cluster_equals_in_process(dask_client, cube_da, numpy_result):
    start = cube_da.time.values[138]
    in_process = bfast_monitor_xarray(cube_da.chunk(dict(y=2)), start, freq=23, engine=ENGINE).compute(
        scheduler="synchronous")
    on_cluster = bfast_monitor_xarray(cube_da.chunk(dict(y=2)), start, freq=23, engine=ENGINE,
                                      client=dask_client)
    assert not dask.is_dask_collection(on_cluster)
    for name in OUTPUT_DTYPES:
        np.testing.assert_array_equal(on_cluster[name].values, in_process[name].values, err_msg=name)
    assert on_cluster.rio.crs == cube_da.rio.crs
    # NumPy-backed input is chunked and sent to the cluster too.
    assert_equal_result(bfast_monitor_xarray(cube_da, start, freq=23, engine=ENGINE, client=dask_client,
                                             memory=230 * 40 * 10), numpy_result)


def test_cpu_engine_under_dask_threads(cube, cube_da):
    """numba's parallel engine called from several dask threads at once: same result."""
    expected = bfast_monitor(cube.data, cube.dates, cube.start, freq=23, engine="cpu")
    ds = bfast_monitor_xarray(cube_da.chunk(dict(y=1)), cube.start, freq=23, engine="auto")
    assert ds.attrs["engine"] == "cpu"
    assert_equal_result(ds.compute(scheduler="threads", num_workers=4), expected)
