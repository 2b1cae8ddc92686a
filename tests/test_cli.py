"""The ``tscube`` command line end to end: files in, georeferenced results out, clean errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

xr = pytest.importorskip("xarray")
rasterio = pytest.importorskip("rasterio")
rioxarray = pytest.importorskip("rioxarray")
pytest.importorskip("dask")

from rasterio.transform import from_origin  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from tscube.bfast import bfast_monitor  # noqa: E402
from tscube.cli import app  # noqa: E402
from tscube.stl import stl  # noqa: E402

from conftest import FIXTURES  # noqa: E402

MODIS = FIXTURES / "data" / "modisraster.tif"
MODIS_DATES = FIXTURES / "data" / "modisraster_dates.csv"

CRS = "EPSG:32633"
TRANSFORM = from_origin(500_000.0, 4_000_000.0, 30.0, 30.0)
NODATA = -3000
ENGINE = "reference"
runner = CliRunner()


def tscube(*args):
    return runner.invoke(app, [str(a) for a in args])


def write_tif(path, bands, *, transform=TRANSFORM, nodata=NODATA):
    bands = np.asarray(bands)
    with rasterio.open(path, "w", driver="GTiff", width=bands.shape[2], height=bands.shape[1], count=bands.shape[0],
                       dtype=bands.dtype, crs=CRS, transform=transform, nodata=nodata) as dst:
        dst.write(bands)
    return path


@pytest.fixture(scope="module")
def cube():
    """int16 NDVI x 10000, 16-day dates, nodata gaps, a drop in four pixels."""
    rng = np.random.default_rng(5)
    n_dates = 60
    dates = pd.DatetimeIndex([pd.Timestamp(2000 + i // 23, 1, 1) + pd.Timedelta(days=16 * (i % 23))
                              for i in range(n_dates)])
    t = np.arange(n_dates)
    values = 6000 + 1500 * np.sin(2 * np.pi * t / 23)[:, None, None] + rng.normal(0, 150, size=(n_dates, 3, 4))
    values[48:, :2, :2] -= 2500
    raw = np.rint(values).astype(np.int16)
    raw[rng.random(raw.shape) < 0.15] = NODATA
    return raw, dates


@pytest.fixture(scope="module")
def folder(tmp_path_factory, cube):
    raw, dates = cube
    path = tmp_path_factory.mktemp("cli") / "scenes"
    path.mkdir()
    for band, date in zip(raw, dates):
        write_tif(path / f"ndvi_{date:%Y%m%d}.tif", band[None])
    return path


def assert_geotiff_equals(path, expected: dict, crs, transform):
    back = rioxarray.open_rasterio(path)
    assert back.rio.crs == crs
    assert back.rio.transform() == transform
    names = list(back.attrs["long_name"])
    for name, array in expected.items():
        np.testing.assert_array_equal(back.values[names.index(name)], np.asarray(array).astype(np.float32),
                                      err_msg=name)


def test_monitor_modisraster(tmp_path):
    out = tmp_path / "breaks.tif"
    result = tscube("monitor", MODIS, "--start", "2010-01-01", "--freq", 23, "-o", out, "--engine", ENGINE,
                    "--no-progress")
    assert result.exit_code == 0, result.output
    with rasterio.open(MODIS) as src:
        data, crs, transform = src.read(), src.crs, src.transform
    dates = pd.read_csv(MODIS_DATES)["date"].to_numpy()
    expected = bfast_monitor(data, dates, "2010-01-01", freq=23, engine=ENGINE)
    assert expected.has_break.any()
    assert_geotiff_equals(out, expected.to_dict(), crs, transform)
    assert "written" in result.output


def test_monitor_folder_to_geotiff(tmp_path, folder, cube):
    raw, dates = cube
    out = tmp_path / "breaks.tif"
    result = tscube("monitor", folder, "--start", f"{dates[40]:%Y-%m-%d}", "--freq", 23, "-o", out,
                    "--engine", ENGINE, "--memory", "20kB")
    assert result.exit_code == 0, result.output
    assert "chunks: 100%" in result.output  # the progress bar over the chunks (tqdm)
    expected = bfast_monitor(raw, dates, dates[40], freq=23, nodata=NODATA, engine=ENGINE)
    assert expected.has_break[:2, :2].all()
    assert_geotiff_equals(out, expected.to_dict(), CRS, TRANSFORM)


def test_monitor_parameters_reach_the_algorithm(tmp_path, folder, cube):
    raw, dates = cube
    out = tmp_path / "breaks.nc"
    start = 2001.0 + 17 / 23  # a decimal year on the 16-day grid
    result = tscube("monitor", folder, "--start", f"{start!r}", "--freq", 23, "--order", 1, "--h", 0.5,
                    "--level", 0.01, "--history", f"{dates[10]:%Y-%m-%d}", "--process", "--calibrate", "-o", out,
                    "--engine", ENGINE, "--no-progress")
    assert result.exit_code == 0, result.output
    expected = bfast_monitor(raw, dates, start, freq=23, order=1, h=0.5, level=0.01, history=dates[10],
                             nodata=NODATA, return_process=True, calibrate=True, engine=ENGINE)
    assert np.isfinite(expected.critval).any() and (expected.critval != expected.attrs["critval"]).any()
    back = xr.open_dataset(out, decode_coords="all")
    for name, array in expected.to_dict().items():
        np.testing.assert_array_equal(back[name].values, array, err_msg=name)
    assert back.rio.crs == CRS
    assert back.attrs["h"] == 0.5 and back.attrs["order"] == 1 and back.attrs["calibrate"]


@pytest.mark.parametrize("model", [["--order", "0", "--season"], ["--h", "0.3", "--end", "4"]])
def test_monitor_model_options_reach_the_algorithm(tmp_path, folder, cube, model):
    """--season and --type, and h/end outside R's table (simulated critical value)."""
    raw, dates = cube
    out = tmp_path / "breaks.tif"
    result = tscube("monitor", folder, "--start", f"{dates[40]:%Y-%m-%d}", "--freq", 23, *model, "--type",
                    "OLS-CUSUM", "-o", out, "--engine", ENGINE, "--no-progress")
    assert result.exit_code == 0, result.output
    options = dict(order=0, season=True) if "--season" in model else dict(h=0.3, end=4)
    expected = bfast_monitor(raw, dates, dates[40], freq=23, nodata=NODATA, type="OLS-CUSUM", engine=ENGINE, **options)
    assert np.isfinite(expected.rmse).any() and np.isfinite(expected.relative_magnitude).any()
    assert_geotiff_equals(out, expected.to_dict(), CRS, TRANSFORM)


def test_monitor_multiband_with_dates_file_on_workers(tmp_path, cube):
    raw, dates = cube
    stack = write_tif(tmp_path / "stack.tif", raw)
    dates_file = tmp_path / "dates.txt"
    dates_file.write_text("\n".join(f"{d:%Y-%m-%d}" for d in dates))
    out = tmp_path / "breaks.zarr"
    result = tscube("monitor", stack, "--dates", dates_file, "--start", f"{dates[40]:%Y-%m-%d}", "--freq", 23,
                    "-o", out, "--engine", ENGINE, "--workers", 1, "--no-progress")
    assert result.exit_code == 0, result.output
    expected = bfast_monitor(raw, dates, dates[40], freq=23, nodata=NODATA, engine=ENGINE)
    back = xr.open_zarr(out, decode_coords="all")
    for name, array in expected.to_dict().items():
        np.testing.assert_array_equal(back[name].values, array, err_msg=name)
    assert back.rio.crs == CRS


def test_stl_folder(tmp_path, folder, cube):
    raw, dates = cube
    out = tmp_path / "stl.tif"
    result = tscube("stl", folder, "--period", 23, "--seasonal", "periodic", "-o", out, "--engine", ENGINE,
                    "--no-progress")
    assert result.exit_code == 0, result.output
    values = np.where(raw == NODATA, np.nan, raw).astype(np.float32)
    expected = stl(values, 23, seasonal="periodic", dates=dates.to_numpy(), engine=ENGINE)
    back = rioxarray.open_rasterio(out)
    names = list(back.attrs["long_name"])
    np.testing.assert_array_equal(back.values[names.index("status")], expected.status)
    np.testing.assert_array_equal(back.values[names.index("seasonal_amplitude")], expected.seasonal_amplitude)
    np.testing.assert_allclose(back.values[names.index("trend_slope")], expected.trend_slope, rtol=1e-5)
    assert back.rio.crs == CRS and back.rio.transform() == TRANSFORM


def test_info(folder, cube):
    raw, dates = cube
    result = tscube("info", folder)
    assert result.exit_code == 0, result.output
    assert f"60, {dates[0].date()} to {dates[-1].date()}" in result.output
    assert "time 60 x y 3 x x 4" in result.output
    assert "EPSG:32633" in result.output
    assert "on disk" in result.output
    assert f"missing:  {np.mean(raw == NODATA):.1%}" in result.output


def test_cluster_command(tmp_path, folder, cube):
    raw, dates = cube
    maps = tmp_path / "maps.tif"
    assert tscube("stl", folder, "--period", 23, "-o", maps, "--engine", ENGINE, "--no-progress").exit_code == 0
    out = tmp_path / "labels.tif"
    result = tscube("cluster", maps, "-k", 2, "-o", out, "--method", "kmeans", "--engine", ENGINE)
    assert result.exit_code == 0, result.output
    labels = rioxarray.open_rasterio(out)
    assert labels.shape == (1, 3, 4) and labels.rio.crs == CRS
    assert set(np.unique(labels.values)) <= {-1, 0, 1}


@pytest.mark.parametrize("shown", ["calibrated", "r"])
def test_demo_still_runs(tmp_path, shown):
    result = tscube("demo", "--rows", 6, "--cols", 8, "--engine", ENGINE, "-o", tmp_path / "demo.png", "--map", shown)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "demo.png").stat().st_size > 0
    assert "R's boundary: " in result.output and "calibrated  : " in result.output  # both scored
    assert f"({'calibrated' if shown == 'calibrated' else 'R'} boundary)" in result.output


def test_demo_scores_count_false_alarms_on_stable_pixels():
    from tscube.cli.demo import detection_scores

    planted = np.array([True, True, False, False, False, False])
    detected = np.array([True, False, True, False, False, False])
    scores = detection_scores(detected, planted)
    assert scores == dict(detected=2, planted=2, precision=0.5, recall=0.5, stable=4, stable_flagged=0.25)


def test_warns_loudly_when_every_pixel_is_missing(tmp_path, cube):
    raw, dates = cube
    empty = write_tif(tmp_path / "empty.tif", np.full((len(dates), 3, 4), NODATA, dtype=np.int16))
    dates_file = tmp_path / "dates.txt"
    dates_file.write_text("\n".join(f"{d:%Y-%m-%d}" for d in dates))
    out = tmp_path / "breaks.tif"
    result = tscube("monitor", empty, "--dates", dates_file, "--start", f"{dates[40]:%Y-%m-%d}", "--freq", 23,
                    "-o", out, "--engine", ENGINE, "--no-progress")
    assert result.exit_code == 0, result.output
    assert "WARNING: all 12 pixels are missing" in result.output
    assert out.exists()
    info = tscube("info", empty, "--dates", dates_file)
    assert "WARNING" in info.output and "missing:  100.0%" in info.output


@pytest.fixture(scope="module")
def error_inputs(tmp_path_factory, folder, cube):
    """Inputs for every error case."""
    from tscube.io import netcdf_engine

    raw, dates = cube
    tmp_path = tmp_path_factory.mktemp("errors")
    bad = tmp_path / "bad.tif"
    bad.write_bytes(b"this is not a GeoTIFF")
    undated = write_tif(tmp_path / "undated.tif", raw)
    bad_dates = tmp_path / "bad_dates.txt"
    bad_dates.write_text("\n".join(["2000-01-01", "2000-99-01"] + [f"{d:%Y-%m-%d}" for d in dates[2:]]))
    dup_dates = tmp_path / "dup_dates.txt"
    dup_dates.write_text("\n".join(f"{d:%Y-%m-%d}" for d in [dates[0], *dates[:-1]]))
    mismatched = tmp_path / "mismatched"
    mismatched.mkdir()
    write_tif(mismatched / f"a_{dates[0]:%Y%m%d}.tif", raw[:1])
    write_tif(mismatched / f"a_{dates[1]:%Y%m%d}.tif", raw[1:2], transform=from_origin(0.0, 0.0, 30.0, 30.0))
    dup_folder = tmp_path / "dup_folder"
    dup_folder.mkdir()
    write_tif(dup_folder / f"a_{dates[0]:%Y%m%d}.tif", raw[:1])
    write_tif(dup_folder / f"b_{dates[0]:%Y-%m-%d}.tif", raw[1:2])
    no_time = tmp_path / "no_time.nc"
    xr.Dataset({"ndvi": (("band", "y", "x"), raw.astype(np.float32))}).to_netcdf(no_time, engine=netcdf_engine())
    stack = write_tif(tmp_path / "stack.tif", raw)
    stack_dates = tmp_path / "stack_dates.txt"
    stack_dates.write_text("\n".join(f"{d:%Y-%m-%d}" for d in dates))
    return dict(tmp=tmp_path, stack=stack, stack_dates=stack_dates, bad=bad, undated=undated, bad_dates=bad_dates, dup_dates=dup_dates, mismatched=mismatched,
                dup_folder=dup_folder, no_time=no_time, folder=folder, start=f"{dates[40]:%Y-%m-%d}")


STACK = ["{stack}", "--dates", "{stack_dates}"]
ERROR_CASES = {
    "missing file": (["monitor", "{tmp}/absent.tif", "--start", "{start}"], "does not exist"),
    "corrupt file": (["monitor", "{bad}", "--start", "{start}"], "cannot read bad.tif"),
    "no dates in a multi-band file": (["monitor", "{undated}", "--start", "{start}"], "no dates"),
    "no time coordinate": (["monitor", "{no_time}", "--start", "{start}"], "no variable with a time coordinate"),
    "unparseable dates": (["monitor", "{undated}", "--dates", "{bad_dates}", "--start", "{start}"], "cannot parse"),
    "duplicate dates in a file": (["monitor", "{undated}", "--dates", "{dup_dates}", "--start", "{start}"],
                                  "duplicate date"),
    "duplicate dates in a folder": (["monitor", "{dup_folder}", "--start", "{start}"], "duplicate date"),
    "mismatched grids": (["monitor", "{mismatched}", "--start", "{start}"], "mismatched grids"),
    "start after the data": (["monitor", "{folder}", "--start", "2030-01-01"], "after the last date"),
    "start before the data": (["monitor", "{folder}", "--start", "1990-01-01"], "before the first date"),
    "unparseable start": (["monitor", "{folder}", "--start", "soon"], "--start 'soon' is not a date"),
    "ambiguous start": (["monitor", "{folder}", "--start", "01/02/2020"], "--start '01/02/2020' is not a date"),
    "start as a time stamp": (["monitor", "{folder}", "--start", "2030-01-01T00:00"],
                              "start 2030-01-01 (= 2030"),
    "unsupported h": (["monitor", *STACK, "--start", "{start}", "--h", "1.3"], r"h = 1.3 must lie in (0, 1]"),
    "unsupported end": (["monitor", *STACK, "--start", "{start}", "--end", "0.5"], r"end = 0.5 must lie in (1, 100]"),
    "unsupported level": (["monitor", *STACK, "--start", "{start}", "--level", "1.5"], "level"),
    "unsupported type": (["monitor", *STACK, "--start", "{start}", "--type", "RE"], "type must be one of"),
    "season with harmonics": (["monitor", *STACK, "--start", "{start}", "--season"], "season=True with order=0"),
    "unsupported engine": (["monitor", *STACK, "--start", "{start}", "--engine", "gpu"], "engine must be"),
    "unsupported history": (["monitor", *STACK, "--start", "{start}", "--history", "recent"], "--history"),
    "unsupported output": (["monitor", *STACK, "--start", "{start}", "-o", "{tmp}/out.png"], "unsupported suffix"),
    "stl period": (["stl", *STACK, "--period", "1"], "period"),
    "stl seasonal": (["stl", *STACK, "--period", "23", "--seasonal", "wide"], "--seasonal"),
    "workers and scheduler": (["monitor", *STACK, "--start", "{start}", "--workers", "1", "--scheduler",
                               "tcp://localhost:1"], "exclude each other"),
    "info missing file": (["info", "{tmp}/absent"], "does not exist"),
}


@pytest.mark.parametrize("case", list(ERROR_CASES))
def test_errors_exit_non_zero_with_one_line(tmp_path, error_inputs, case):
    args, message = ERROR_CASES[case]
    args = [a.format(**error_inputs) for a in args]
    if args[0] in ("monitor", "stl") and "-o" not in args:
        args += ["-o", str(tmp_path / "out.tif")]
    if args[0] == "monitor":
        args += ["--freq", "23"]
    result = tscube(*args, "--no-progress") if args[0] != "info" else tscube(*args)
    assert result.exit_code != 0, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.output
    assert message in errors[0], result.output
    assert not (tmp_path / "out.tif").exists()


@pytest.mark.parametrize("text, expected", [
    ("2010-03-31", pd.Timestamp("2010-03-31")), ("20100331", pd.Timestamp("2010-03-31")),
    ("2010-03-31T06:00", pd.Timestamp("2010-03-31 06:00")), ("2010.25", 2010.25), ("2010", 2010.0),
    ("2010,4", (2010, 4)), (" 2010/4 ", (2010, 4)),
    ("2020/01/02", pd.Timestamp("2020-01-02")), ("Jan 2 2020", pd.Timestamp("2020-01-02")),  # year first, month named
])
def test_cli_dates_iso_decimal_or_year_cycle(text, expected):
    from tscube.cli.options import parse_when as _parse_when

    assert _parse_when(text, "start") == expected


@pytest.mark.parametrize("text", ["01/02/2020", "02.01.2020", "2020-13-01", "2-1-2020", "soon"])
def test_cli_dates_refuse_ambiguous_or_invalid_forms(text):
    from tscube.cli.options import parse_when as _parse_when

    with pytest.raises(ValueError, match="is not a date \\(YYYY-MM-DD\\), a decimal year or YEAR,CYCLE"):
        _parse_when(text, "start")


def _lite_bands(result, B):
    """bfast_lite outputs as the GeoTIFF bands of `tscube breaks`."""
    bands = {"n_breaks": result.n_breaks, "status": result.status, "magnitude": result.magnitude}
    for b in range(B):
        found = b < result.break_time.shape[0]
        bands[f"break_time_{b + 1}"] = result.break_time[b] if found else np.full(result.n_breaks.shape, np.nan)
        bands[f"magnitude_diff_{b + 1}"] = (result.magnitude_of("diff")[b] if found
                                            else np.full(result.n_breaks.shape, np.nan))
    bands["intercept_1"] = result.intercept[0]
    return bands


def test_breaks_folder_to_geotiff(tmp_path, folder, cube):
    from tscube import bfast_lite

    raw, dates = cube
    out = tmp_path / "lite.tif"
    result = tscube("breaks", folder, "--freq", 23, "--h", 0.25, "-o", out, "--engine", ENGINE, "--memory", "20kB")
    assert result.exit_code == 0, result.output
    assert "BFAST Lite" in result.output and "written" in result.output
    expected = bfast_lite(raw, dates, freq=23, h=0.25, nodata=NODATA, engine=ENGINE)
    assert expected.has_break[:2, :2].all()
    B = len([n for n in rioxarray.open_rasterio(out).attrs["long_name"] if n.startswith("break_time_")])
    assert B >= int(expected.n_breaks.max())
    assert_geotiff_equals(out, _lite_bands(expected, B), CRS, TRANSFORM)
    figure = tmp_path / "lite.png"
    shown = tscube("plot", out, "-o", figure)
    assert shown.exit_code == 0, shown.output
    assert figure.stat().st_size > 10_000


def test_breaks_zarr_options_and_resume(tmp_path, folder, cube):
    from tscube import bfast_lite

    raw, dates = cube
    out = tmp_path / "lite.zarr"
    args = ("breaks", folder, "--freq", 23, "--order", 1, "--h", 12, "--breaks", "BIC", "--level", 0.05,
            "--criteria", "-o", out, "--no-progress")
    result = tscube(*args)
    assert result.exit_code == 0, result.output
    expected = bfast_lite(raw, dates, freq=23, order=1, h=12, breaks="BIC", level=0.05, criteria=True, nodata=NODATA)
    back = xr.open_zarr(out)
    np.testing.assert_array_equal(back["n_breaks"].values, expected.n_breaks)
    m = expected.break_time.shape[0]
    np.testing.assert_array_equal(back["break_time"].values[:m], expected.break_time)
    np.testing.assert_allclose(back["slope"].values[: m + 1], expected.slope, rtol=1e-12)
    np.testing.assert_allclose(back["bic"].values[: expected.bic.shape[0]], expected.bic, rtol=1e-12)
    assert back.attrs["tscube_function"] == "bfast_lite" and back.attrs["breaks"] == "BIC"
    again = tscube(*args)
    assert again.exit_code == 0 and "nothing to compute" in again.output, again.output


@pytest.mark.parametrize("args, message", [
    (("--breaks", "AIC"), "breaks must be"),
    (("--season",), "collinear"),
    (("--h", "1.5"), "whole"),
])
def test_breaks_bad_options_fail_cleanly(tmp_path, folder, args, message):
    out = tmp_path / "lite.tif"
    result = tscube("breaks", folder, "--freq", 23, "-o", out, *args)
    assert result.exit_code == 1
    assert message in result.output and "Traceback" not in result.output
    assert not out.exists()
