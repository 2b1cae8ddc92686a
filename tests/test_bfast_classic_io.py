"""Classic BFAST beyond NumPy: the xarray/dask result equals the NumPy one, ``tscube bfast``
writes (and resumes) the same breaks into GeoTIFF, NetCDF and Zarr files, and the maps and
the pixel plot show them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

xr = pytest.importorskip("xarray")
pytest.importorskip("dask")
rioxarray = pytest.importorskip("rioxarray")

import matplotlib  # noqa: E402

matplotlib.use("Agg")

from tscube import BfastClassicStatus, bfast_classic  # noqa: E402
from tscube.bfast.classic import classic_maps, plot_classic_pixel  # noqa: E402
from tscube.io import netcdf_engine  # noqa: E402
from tscube.xr import bfast_classic_xarray  # noqa: E402

from test_bfast_classic import planted_cube  # noqa: E402
from test_cli import CRS, NODATA, TRANSFORM, assert_geotiff_equals, tscube, write_tif  # noqa: E402

FREQ = 23
ROWS, COLS = 3, 4
#: The pre-test of the seasonal model barely reacts to a change of amplitude (its moving
#: sums run over whole cycles): a lenient seasonal level gives the plots seasonal breaks.
SEASON_BREAKS = dict(level=(0.05, 0.99))


def modis_dates(n: int) -> pd.DatetimeIndex:
    """The 16-day grid of MODIS composites: 23 dates a year from 1 January, a regular series
    at freq 23."""
    return pd.DatetimeIndex([pd.Timestamp(2001 + i // FREQ, 1, 1) + pd.Timedelta(days=16 * (i % FREQ))
                             for i in range(n)])


def planted_grid(missing: float, seed: int) -> tuple[np.ndarray, pd.DatetimeIndex]:
    """:func:`planted_cube` on a 3 x 4 grid: eight years of 16-day dates."""
    data, t = planted_cube(FREQ, 8, ROWS * COLS, missing, seed=seed)
    return data.reshape(len(t), ROWS, COLS), modis_dates(len(t))


def as_dataarray(cube: np.ndarray, dates) -> "xr.DataArray":
    return xr.DataArray(cube, dims=("time", "y", "x"), coords={
        "time": dates, "y": 4_000_000.0 - 30.0 * np.arange(ROWS), "x": 500_000.0 + 30.0 * np.arange(COLS)})


def padded(array: np.ndarray, slots: int, fill) -> np.ndarray:
    """A per-break array of the NumPy result (cut to the most breaks found) padded to the
    ``slots`` breaks of the xarray result."""
    pad = np.full((slots - array.shape[0],) + array.shape[1:], fill, dtype=array.dtype)
    return np.concatenate([array, pad])


def assert_dataset_equals(ds, expected) -> None:
    """Every variable of a classic Dataset equals the NumPy result's."""
    for name in ("status", "n_obs", "n_iter", "n_trend_breaks", "n_season_breaks"):
        np.testing.assert_array_equal(ds[name].values, getattr(expected, name), err_msg=name)
    for name in ("magnitude", "magnitude_time", "trend_pretest_p", "season_pretest_p", "trend", "seasonal",
                 "remainder"):
        np.testing.assert_array_equal(ds[name].values, getattr(expected, name), err_msg=name)
    slots = ds.sizes["break"]
    for part in ("trend", "season"):
        np.testing.assert_array_equal(ds[f"{part}_break_index"].values,
                                      padded(getattr(expected, f"{part}_break_index"), slots, -1))
        np.testing.assert_array_equal(ds[f"{part}_break_time"].values,
                                      padded(getattr(expected, f"{part}_break_time"), slots, np.nan))
        confint = padded(getattr(expected, f"{part}_confint"), slots, np.nan)
        np.testing.assert_array_equal(ds[f"{part}_ci_lower"].values, confint[..., 0])
        np.testing.assert_array_equal(ds[f"{part}_ci_upper"].values, confint[..., 1])
    magnitudes = padded(expected.magnitudes, slots, np.nan)
    for i, column in enumerate(("before", "after", "jump")):
        np.testing.assert_array_equal(ds[f"magnitude_{column}"].values, magnitudes[..., i], err_msg=column)


# ---------------------------------------------------------------- xarray = NumPy


@pytest.mark.parametrize("missing", [0.0, 0.3])
def test_xarray_equals_numpy(missing):
    cube, dates = planted_grid(missing, seed=11)
    da = as_dataarray(cube, dates).chunk({"x": 2})  # two chunks of 3 x 2 pixels
    ds = bfast_classic(da, freq=FREQ, iterations=True)
    assert ds["status"].chunks == ((ROWS,), (2, 2))  # lazy, per chunk
    assert ds["trend_break_time"].dims == ("break", "y", "x") and ds["trend"].dims == ("time", "y", "x")
    assert ds["iter_trend_break_index"].dims == ("iteration", "break", "y", "x") and ds.sizes["iteration"] == 10
    assert ds.attrs["tscube_function"] == "bfast_classic" and ds.attrs["season"] == "dummy"
    assert ds["trend_break_time"].attrs["units"] == "decimal year"
    assert ds["status"].attrs["flag_meanings"].split()[:2] == ["OK", "MAX_ITER"]
    ds = ds.compute()

    expected = bfast_classic(cube, dates, freq=FREQ, iterations=True)
    assert np.all(expected.status == BfastClassicStatus.OK) and np.all(expected.n_trend_breaks >= 1)
    if missing:
        assert np.all(expected.n_obs < len(dates)) and np.isnan(expected.trend).any()
    assert_dataset_equals(ds, expected)
    slots = ds.sizes["break"]
    for part in ("trend", "season"):
        np.testing.assert_array_equal(ds[f"iter_{part}_break_index"].values.transpose(1, 0, 2, 3),
                                      padded(getattr(expected, f"iter_{part}_break_index").transpose(1, 0, 2, 3),
                                             slots, -1))
    np.testing.assert_array_equal(ds["time"].values, dates.to_numpy())
    np.testing.assert_array_equal(ds["x"].values, da["x"].values)


def test_xarray_facade_takes_the_options_and_decimal_years():
    """The wrapper of tscube.xr with decimal-year dates and non-default options equals NumPy."""
    cube, _ = planted_grid(0.1, seed=3)
    t = 2001 + np.arange(cube.shape[0]) / FREQ
    da = xr.DataArray(cube, dims=("time", "y", "x"), coords={"time": t}).chunk({"y": 2})
    options = dict(season="harmonic", h=0.2, max_iter=3, breaks=(1, None), level=(0.05, 0.99), type="OLS-CUSUM",
                   engine="reference")
    ds = bfast_classic_xarray(da, freq=FREQ, **options).compute()
    expected = bfast_classic(cube, t, freq=FREQ, **options)
    assert np.all(expected.n_trend_breaks[expected.status < 2] == 1)
    assert_dataset_equals(ds, expected)
    assert ds.attrs["breaks_trend"] == 1 and ds.attrs["breaks_season"] == "BIC" and ds.attrs["engine"] == "reference"


# ---------------------------------------------------------------- the command line


@pytest.fixture(scope="module")
def scaled_cube():
    """int16 x 10000 with NODATA gaps (10 %): the planted breaks as a sensor writes them."""
    cube, dates = planted_grid(0.1, seed=7)
    raw = np.where(np.isnan(cube), NODATA, np.rint(cube * 10_000)).astype(np.int16)
    return raw, dates


def expected_bands(result, slots: int) -> dict:
    """The GeoTIFF bands of `tscube bfast` that a NumPy result determines."""
    bands = {name: getattr(result, name) for name in ("status", "n_obs", "n_iter", "n_trend_breaks",
                                                       "n_season_breaks", "magnitude", "magnitude_time")}
    for part in ("trend", "season"):
        index = padded(getattr(result, f"{part}_break_index"), slots, -1)
        times = padded(getattr(result, f"{part}_break_time"), slots, np.nan)
        confint = padded(getattr(result, f"{part}_confint"), slots, np.nan)
        for b in range(slots):
            bands[f"{part}_break_index_{b + 1}"] = index[b]
            bands[f"{part}_break_time_{b + 1}"] = times[b]
            bands[f"{part}_ci_lower_{b + 1}"] = confint[b, ..., 0]
    jump = padded(result.magnitudes, slots, np.nan)[..., 2]
    for b in range(slots):
        bands[f"magnitude_jump_{b + 1}"] = jump[b]
    return bands


def test_bfast_geotiff_to_geotiff_and_plot(tmp_path, scaled_cube):
    raw, dates = scaled_cube
    stack = write_tif(tmp_path / "stack.tif", raw)
    dates_file = tmp_path / "dates.txt"
    dates_file.write_text("\n".join(f"{d:%Y-%m-%d}" for d in dates))
    out = tmp_path / "classic.tif"
    result = tscube("bfast", stack, "--dates", dates_file, "--freq", FREQ, "-o", out, "--engine", "reference",
                    "--memory", "40kB", "--no-progress")
    assert result.exit_code == 0, result.output
    assert "classic BFAST (reference engine)" in result.output and "written" in result.output
    assert "in 1 chunks" not in result.output  # --memory split the grid
    expected = bfast_classic(raw, dates, freq=FREQ, nodata=NODATA, engine="reference")
    assert np.all(expected.status == BfastClassicStatus.OK) and np.all(expected.n_trend_breaks >= 1)
    names = list(rioxarray.open_rasterio(out).attrs["long_name"])
    slots = sum(name.startswith("trend_break_index_") for name in names)
    assert slots >= expected.trend_break_index.shape[0]
    assert not {"trend", "seasonal", "remainder"} & set(names)  # the series stay out of a map file
    assert_geotiff_equals(out, expected_bands(expected, slots), CRS, TRANSFORM)

    figure = tmp_path / "classic.png"
    shown = tscube("plot", out, "-o", figure, "--height", 800)
    assert shown.exit_code == 0, shown.output
    assert figure.stat().st_size > 10_000


@pytest.mark.parametrize("suffix", [".zarr", ".nc"])
def test_bfast_netcdf_options_components_and_resume(tmp_path, scaled_cube, suffix):
    raw, dates = scaled_cube
    source = tmp_path / "cube.nc"
    xr.Dataset({"ndvi": as_dataarray(raw, dates)}).to_netcdf(source, engine=netcdf_engine())
    out = tmp_path / f"classic{suffix}"
    args = ("bfast", source, "--freq", FREQ, "--season", "harmonic", "--h", 0.2, "--max-iter", 4, "--breaks", 1,
            "--level", 0.5, "--type", "OLS-CUSUM", "--nodata", NODATA, "-o", out, "--engine", "reference",
            "--memory", "40kB", "--no-progress")
    result = tscube(*args)
    assert result.exit_code == 0, result.output
    expected = bfast_classic(raw, dates, freq=FREQ, season="harmonic", h=0.2, max_iter=4, breaks=1, level=0.5,
                             type="OLS-CUSUM", nodata=NODATA, engine="reference")
    assert np.all(expected.n_trend_breaks == 1) and expected.n_season_breaks.any()
    back = xr.open_zarr(out) if suffix == ".zarr" else xr.open_dataset(out)
    with back:
        assert_dataset_equals(back, expected)
        assert back.attrs["tscube_function"] == "bfast_classic" and back.attrs["type"] == "OLS-CUSUM"
        assert back.attrs["max_iter"] == 4 and back.attrs["breaks_trend"] == 1
    again = tscube(*args)
    assert again.exit_code == 0 and "nothing to compute" in again.output, again.output
    other = tscube(*args, "--breaks", 2)  # the same output with other breaks
    assert other.exit_code == 1 and "--overwrite" in other.output


@pytest.mark.parametrize("args, message", [
    (("--season", "harmon"), "season must be"),
    (("--breaks", "AIC"), "breaks must be"),
    (("--h", "0.5"), "h must be"),
    (("--type", "Rec-CUSUM"), "type must be"),
])
def test_bfast_bad_options_fail_cleanly(tmp_path, scaled_cube, args, message):
    raw, dates = scaled_cube
    source = tmp_path / "cube.nc"
    xr.Dataset({"ndvi": as_dataarray(raw, dates)}).to_netcdf(source, engine=netcdf_engine())
    out = tmp_path / "classic.tif"
    result = tscube("bfast", source, "--freq", FREQ, "-o", out, *args)
    assert result.exit_code == 1
    assert message in result.output and "Traceback" not in result.output
    assert not out.exists()


# ---------------------------------------------------------------- plots


def lines_by_gid(ax, gid):
    return [line for line in ax.lines if line.get_gid() == gid]


@pytest.fixture(scope="module")
def plotted():
    """A result with trend and seasonal breaks, in memory and as a Dataset."""
    cube, dates = planted_grid(0.1, seed=7)
    result = bfast_classic(cube, dates, freq=FREQ, **SEASON_BREAKS)
    ds = bfast_classic(as_dataarray(cube, dates).chunk({"x": 2}), freq=FREQ, **SEASON_BREAKS).compute()
    assert np.all(result.status == BfastClassicStatus.OK)
    assert np.all(result.n_trend_breaks >= 1) and np.all(result.n_season_breaks >= 1)
    return cube, dates, result, ds


def test_maps_show_both_break_sets(plotted):
    cube, dates, result, ds = plotted
    for source in (result, ds):
        fig = result.plot() if source is result else classic_maps(ds)
        assert len(fig.axes) == 12  # six maps and their colour bars
        titles = [ax.get_title() for ax in fig.axes[:6]]
        assert titles == ["trend breaks", "year of the largest trend break", "largest trend jump",
                          "seasonal breaks", "year of the first seasonal break", "status"]
        n_trend, year, magnitude, n_season, season_year, status = (ax.images[-1].get_array() for ax in fig.axes[:6])
        np.testing.assert_array_equal(n_trend, result.n_trend_breaks)
        np.testing.assert_array_equal(year, np.floor(result.magnitude_time + 1e-9))
        np.testing.assert_array_equal(magnitude, result.magnitude)
        np.testing.assert_array_equal(n_season, result.n_season_breaks)
        np.testing.assert_array_equal(season_year, np.floor(result.season_break_time[0] + 1e-9))
        np.testing.assert_array_equal(status, result.status)
        matplotlib.pyplot.close(fig)


def test_maps_grey_out_pixels_without_a_result():
    cube, dates = planted_grid(0.0, seed=2)
    cube[:, 0, 0] = np.nan
    cube[:, 1, 1] = 0.7  # constant: R stops (perfect fit)
    result = bfast_classic(cube, dates, freq=FREQ)
    fig = result.plot()
    n_trend = fig.axes[0].images[-1].get_array()
    assert n_trend.mask[0, 0] and n_trend.mask[1, 1] and int(n_trend[0, 1]) == result.n_trend_breaks[0, 1]
    assert result.n_season_breaks.max() == 0  # (the seasonal pre-test is not significant anywhere)
    assert len(fig.axes) == 12 and not fig.axes[10].get_visible()  # no seasonal year: its colour bar hidden
    status = fig.axes[5].images[-1].get_array()
    assert status[0, 0] == BfastClassicStatus.ALL_MISSING and status[1, 1] == BfastClassicStatus.PERFECT_FIT
    assert "trend breaks in 10 pixels" in fig.get_suptitle()
    matplotlib.pyplot.close(fig)


def test_pixel_plot_draws_components_and_breaks(plotted):
    cube, dates, result, ds = plotted
    row, col = 1, 2
    fig = result.plot_pixel(cube, (row, col))
    assert len(fig.axes) == 4
    ax_y, ax_s, ax_t, ax_n = fig.axes
    assert [ax.get_ylabel() for ax in fig.axes] == ["Yt (data)", "St (seasonal)", "Tt (trend)", "Nt (remainder)"]
    time = result.attrs["time"]
    valid = np.isfinite(cube[:, row, col])
    np.testing.assert_array_equal(ax_y.lines[0].get_xdata(), time[valid])
    np.testing.assert_array_equal(ax_y.lines[0].get_ydata(), cube[valid, row, col])
    np.testing.assert_array_equal(ax_t.lines[0].get_ydata(), result.trend[valid, row, col])
    np.testing.assert_array_equal(ax_s.lines[0].get_ydata(), result.seasonal[valid, row, col])
    for ax, part in ((ax_t, "trend"), (ax_s, "season")):
        n = int(getattr(result, f"n_{part}_breaks")[row, col])
        breaks = lines_by_gid(ax, "break")
        assert len(breaks) == n >= 1  # one vertical line per break
        for line, when in zip(breaks, getattr(result, f"{part}_break_time")[:n, row, col]):
            np.testing.assert_array_equal(line.get_xdata(), [when, when])
        bars = lines_by_gid(ax, "confint")
        lower, upper = getattr(result, f"{part}_confint")[0, row, col]
        assert len(bars) == n and lower <= getattr(result, f"{part}_break_index")[0, row, col] <= upper
        np.testing.assert_allclose(bars[0].get_xdata(), time[0] + np.array([lower, upper]) / FREQ, rtol=0, atol=1e-9)
    assert not lines_by_gid(ax_n, "break") and not lines_by_gid(ax_y, "break")
    title = fig.get_suptitle()
    assert "OK" in title and f"{int(result.n_iter[row, col])} iterations" in title
    assert f"magnitude {float(result.magnitude[row, col]):.4g}" in title
    matplotlib.pyplot.close(fig)

    from_dataset = plot_classic_pixel(ds, as_dataarray(cube, dates), (row, col))
    for mine, theirs in zip(from_dataset.axes, fig.axes):
        assert [line.get_gid() for line in mine.lines] == [line.get_gid() for line in theirs.lines]
        np.testing.assert_array_equal(mine.lines[0].get_ydata(), theirs.lines[0].get_ydata())
    matplotlib.pyplot.close(from_dataset)


def test_pixel_plot_of_a_series_and_of_a_row_of_pixels():
    cube, dates = planted_grid(0.0, seed=2)
    series = cube[:, 0, 0]
    single = bfast_classic(series, dates, freq=FREQ)
    fig = single.plot_pixel(series, None)
    assert len(lines_by_gid(fig.axes[2], "break")) == int(single.n_trend_breaks) >= 1
    assert fig.get_suptitle().startswith("classic BFAST, series: OK")
    matplotlib.pyplot.close(fig)
    row = bfast_classic(cube[:, 0], dates, freq=FREQ)
    fig = row.plot_pixel(cube[:, 0], 3)
    assert len(lines_by_gid(fig.axes[2], "break")) == int(row.n_trend_breaks[3])
    assert "pixel 3:" in fig.get_suptitle()
    matplotlib.pyplot.close(fig)
    with pytest.raises(ValueError, match="give 1 index"):
        row.plot_pixel(cube[:, 0], (0, 1))
    with pytest.raises(ValueError, match="outside"):
        row.plot_pixel(cube[:, 0], COLS)
    with pytest.raises(ValueError, match="dates"):
        row.plot_pixel(cube[1:, 0], 0)


def test_pixel_plot_without_a_result_shows_the_data():
    cube, dates = planted_grid(0.0, seed=2)
    series = np.full(len(dates), 0.7)
    series[:5] = -1.0  # nodata
    result = bfast_classic(series, dates, freq=FREQ, nodata=-1.0)
    assert result.status == BfastClassicStatus.PERFECT_FIT
    fig = result.plot_pixel(series, None, nodata=-1.0)
    assert len(fig.axes[0].lines[0].get_xdata()) == len(dates) - 5
    assert not lines_by_gid(fig.axes[2], "break") and fig.get_suptitle().endswith("PERFECT_FIT")
    matplotlib.pyplot.close(fig)
