"""tscube.io: opening dated cubes (GeoTIFF folders, multi-band GeoTIFFs, NetCDF, Zarr) and writing results."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

xr = pytest.importorskip("xarray")
rasterio = pytest.importorskip("rasterio")
rioxarray = pytest.importorskip("rioxarray")
pytest.importorskip("dask")

from rasterio.transform import from_origin  # noqa: E402

from tscube.bfast import bfast_monitor  # noqa: E402
from tscube.bfast.monitor import OUTPUT_DTYPES  # noqa: E402
from tscube.io import CubeError, date_from_name, open_cube, read_dates, write_result  # noqa: E402
from tscube.xr import bfast_monitor_xarray  # noqa: E402

from conftest import FIXTURES  # noqa: E402

MODIS = FIXTURES / "data" / "modisraster.tif"
MODIS_DATES = FIXTURES / "data" / "modisraster_dates.csv"

CRS = "EPSG:32633"
TRANSFORM = from_origin(500_000.0, 4_000_000.0, 30.0, 30.0)
NODATA = -3000
ENGINE = "reference"


def write_tif(path, bands, *, transform=TRANSFORM, crs=CRS, nodata=NODATA, descriptions=None, tags=None):
    """A GeoTIFF of int16 ``bands`` ``(count, rows, cols)``."""
    bands = np.asarray(bands)
    with rasterio.open(path, "w", driver="GTiff", width=bands.shape[2], height=bands.shape[1],
                       count=bands.shape[0], dtype=bands.dtype, crs=crs, transform=transform,
                       nodata=nodata) as dst:
        dst.write(bands)
        for i, text in enumerate(descriptions or [], start=1):
            dst.set_band_description(i, text)
        if tags:
            dst.update_tags(**tags)
    return path


def synthetic_cube(n_dates=60, rows=3, cols=4, seed=0):
    """int16 NDVI x 10000 with nodata gaps; 16-day dates; the break in the last third."""
    rng = np.random.default_rng(seed)
    dates = pd.DatetimeIndex([pd.Timestamp(2000 + i // 23, 1, 1) + pd.Timedelta(days=16 * (i % 23))
                              for i in range(n_dates)])
    t = np.arange(n_dates)
    season = 1500 * np.sin(2 * np.pi * t / 23)[:, None, None]
    values = 6000 + season + rng.normal(0, 150, size=(n_dates, rows, cols))
    values[int(n_dates * 0.8):, :2, :2] -= 2500
    raw = np.rint(values).astype(np.int16)
    raw[rng.random(raw.shape) < 0.15] = NODATA
    return raw, dates


def write_folder(folder, raw, dates, name="ndvi_{:%Y%m%d}.tif"):
    folder.mkdir(parents=True, exist_ok=True)
    for band, date in zip(raw, dates):
        write_tif(folder / name.format(date), band[None])
    return folder


@pytest.fixture(scope="module")
def cube():
    return synthetic_cube()


def test_folder_of_dated_geotiffs(tmp_path, cube):
    raw, dates = cube
    folder = write_folder(tmp_path / "folder", raw[::-1], dates[::-1])  # written in any order
    da = open_cube(folder)
    assert da.dims == ("time", "y", "x")
    np.testing.assert_array_equal(da.time.values, dates.values)
    expected = np.where(raw == NODATA, np.nan, raw)
    np.testing.assert_array_equal(da.values, expected)
    assert da.rio.crs == CRS and da.rio.transform() == TRANSFORM
    assert da.chunks is not None and len(da.chunks[0]) == 1  # lazy, time in one chunk


def test_folder_dates_from_strftime_pattern_and_tags(tmp_path, cube):
    raw, dates = cube
    folder = write_folder(tmp_path / "julian", raw[:5], dates[:5], name="MOD13.A{:%Y%j}.h12v10.tif")
    da = open_cube(folder, date_pattern="A%Y%j")
    np.testing.assert_array_equal(da.time.values, dates[:5].values)
    tagged = tmp_path / "tagged"
    tagged.mkdir()
    for i, (band, date) in enumerate(zip(raw[:4], dates[:4])):
        write_tif(tagged / f"scene_{i}.tif", band[None], tags={"TIFFTAG_DATETIME": f"{date:%Y:%m:%d} 10:30:00"})
    da = open_cube(tagged, date_pattern=r"nomatch(\d+)")
    np.testing.assert_array_equal(da.time.values.astype("datetime64[D]"), dates[:4].values.astype("datetime64[D]"))


def test_date_from_name():
    assert date_from_name("LC08_20200131_T1") == pd.Timestamp("2020-01-31")
    assert date_from_name("ndvi_2020-01-31.tif") == pd.Timestamp("2020-01-31")
    assert date_from_name("A2020032", "A%Y%j") == pd.Timestamp("2020-02-01")
    assert date_from_name("x_2020-06_b", r"(?P<date>\d{4}-\d{2})") == pd.Timestamp("2020-06-01")
    assert date_from_name("no date here") is None
    with pytest.raises(CubeError, match="cannot parse '2020-13-99' as a date"):
        date_from_name("ndvi_20201399")


def test_multiband_geotiff_with_dates_file(tmp_path, cube):
    raw, dates = cube
    path = write_tif(tmp_path / "stack.tif", raw)
    with pytest.raises(CubeError, match="no dates"):
        open_cube(path)
    dates_file = tmp_path / "dates.txt"
    dates_file.write_text("# acquisition dates\n" + "\n".join(f"{d:%Y-%m-%d}" for d in dates) + "\n")
    da = open_cube(path, dates=dates_file)
    np.testing.assert_array_equal(da.time.values, dates.values)
    np.testing.assert_array_equal(da.values, np.where(raw == NODATA, np.nan, raw))
    with pytest.raises(CubeError, match="60 bands but 59 dates"):
        open_cube(path, dates=list(dates[:-1]))


def test_multiband_dates_from_band_descriptions(tmp_path, cube):
    raw, dates = cube
    path = write_tif(tmp_path / "described.tif", raw, descriptions=[f"X{d:%Y.%m.%d}" for d in dates])
    np.testing.assert_array_equal(open_cube(path).time.values, dates.values)


def test_read_dates(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("band,date,doy\n1,2000-02-18,49\n2,2000-03-05,65\n")
    np.testing.assert_array_equal(read_dates(path), pd.DatetimeIndex(["2000-02-18", "2000-03-05"]))
    path.write_text("2000-01-01\nnot a date\n")
    with pytest.raises(CubeError, match="entry 2"):
        read_dates(path)
    with pytest.raises(FileNotFoundError):
        read_dates(tmp_path / "absent.txt")


@pytest.mark.parametrize("suffix", [".zarr", ".nc"])
def test_netcdf_and_zarr_inputs(tmp_path, cube, suffix):
    raw, dates = cube
    values = np.where(raw == NODATA, np.nan, raw.astype(np.float32))
    da = xr.DataArray(values, dims=("time", "y", "x"), name="ndvi",
                      coords=dict(time=dates, y=4_000_000.0 - 15 - 30 * np.arange(3), x=500_015.0 + 30 * np.arange(4)))
    ds = da.rio.write_crs(CRS).to_dataset()
    path = tmp_path / f"cube{suffix}"
    write_result(ds, path)
    opened = open_cube(path)
    np.testing.assert_array_equal(opened.values, values)
    np.testing.assert_array_equal(opened.time.values, dates.values)
    assert opened.rio.crs == CRS
    no_time = ds.rename(time="band").assign_coords(band=np.arange(len(dates)))
    write_result(no_time, tmp_path / f"bands{suffix}")
    with pytest.raises(CubeError, match="no variable with a time coordinate"):
        open_cube(tmp_path / f"bands{suffix}")


@pytest.mark.parametrize("suffix", [".tif", ".nc", ".zarr"])
def test_write_result_round_trip(tmp_path, cube, suffix):
    raw, dates = cube
    da = open_cube(write_folder(tmp_path / "in", raw, dates))
    expected = bfast_monitor(raw, dates, dates[40], freq=23, nodata=NODATA, engine=ENGINE)
    ds = bfast_monitor_xarray(da, dates[40], freq=23, engine=ENGINE)
    out = write_result(ds, tmp_path / f"result{suffix}")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["in", out.name])  # no temp file left
    if suffix == ".tif":
        back = rioxarray.open_rasterio(out)
        assert back.rio.crs == da.rio.crs and back.rio.transform() == da.rio.transform()
        assert back.dtype == np.float32 and np.isnan(back.rio.nodata)
        names = list(back.attrs["long_name"])
        for name, array in expected.to_dict().items():
            np.testing.assert_array_equal(back.values[names.index(name)], array.astype(np.float32), err_msg=name)
    else:
        back = xr.open_dataset(out, engine="zarr" if suffix == ".zarr" else None, decode_coords="all")
        assert back.rio.crs == da.rio.crs
        for name, array in expected.to_dict().items():
            np.testing.assert_array_equal(back[name].values, array, err_msg=name)
        assert back.attrs["freq"] == 23


def test_write_result_overwrites_atomically_and_rejects_bad_suffix(tmp_path, cube):
    raw, dates = cube
    ds = bfast_monitor_xarray(open_cube(write_tif(tmp_path / "s.tif", raw), dates=list(dates)), dates[40],
                              freq=23, engine=ENGINE)
    for _ in range(2):
        write_result(ds, tmp_path / "r.zarr")
    assert xr.open_zarr(tmp_path / "r.zarr")["status"].shape == (3, 4)
    with pytest.raises(CubeError, match="unsupported suffix"):
        write_result(ds, tmp_path / "r.png")
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir())


def test_geotiff_start_dim_and_skipped_series(tmp_path, cube):
    raw, dates = cube
    da = open_cube(write_tif(tmp_path / "s.tif", raw), dates=list(dates))
    ds = bfast_monitor_xarray(da, [dates[35], dates[45]], freq=23, return_process=True, engine=ENGINE)
    with pytest.warns(UserWarning, match="process, boundary"):
        write_result(ds, tmp_path / "r.tif")
    with rasterio.open(tmp_path / "r.tif") as src:
        assert src.count == 2 * len(OUTPUT_DTYPES)
        assert src.descriptions[:2] == ("break_index_start0", "break_index_start1")


@pytest.mark.parametrize(
    "setup, error, message",
    [
        (lambda d, raw, dates: d / "absent.tif", FileNotFoundError, "does not exist"),
        (lambda d, raw, dates: (d / "bad.tif").write_bytes(b"not a tiff") and d / "bad.tif", CubeError, "cannot read"),
        (lambda d, raw, dates: write_folder(d / "dup", raw[:3], [dates[0], dates[1], dates[1]],
                                            name="a_{:%Y%m%d}.tif") if False else _duplicate_folder(d, raw, dates),
         CubeError, "duplicate date"),
        (lambda d, raw, dates: _mismatched_folder(d, raw, dates), CubeError, "mismatched grids"),
        (lambda d, raw, dates: _undated_folder(d, raw), CubeError, "no date in the file name"),
        (lambda d, raw, dates: (d / "c.xyz").write_text("x") and d / "c.xyz", CubeError, "unsupported file type"),
    ],
)
def test_open_errors(tmp_path, cube, setup, error, message):
    raw, dates = cube
    with pytest.raises(error, match=message):
        open_cube(setup(tmp_path, raw, dates))


def _duplicate_folder(d, raw, dates):
    folder = write_folder(d / "dup", raw[:2], dates[:2])
    write_tif(folder / f"again_{dates[1]:%Y-%m-%d}.tif", raw[2][None])
    return folder


def _mismatched_folder(d, raw, dates):
    folder = write_folder(d / "grids", raw[:2], dates[:2])
    write_tif(folder / f"ndvi_{dates[2]:%Y%m%d}.tif", raw[2][None], transform=from_origin(500_030.0, 4_000_000.0, 30, 30))
    return folder


def _undated_folder(d, raw):
    folder = d / "undated"
    folder.mkdir()
    write_tif(folder / "scene.tif", raw[0][None])
    return folder


def test_modisraster_dates_and_values():
    table = pd.read_csv(MODIS_DATES)
    da = open_cube(MODIS)  # dates from the band names X2000.02.18, ...
    np.testing.assert_array_equal(da.time.values, pd.DatetimeIndex(table["date"]).values)
    assert open_cube(MODIS, dates=MODIS_DATES).time.equals(da.time)
    assert da.shape == (275, 5, 5) and da.rio.crs.to_epsg() == 4267
    assert da.rio.transform() == rasterio.open(MODIS).transform
