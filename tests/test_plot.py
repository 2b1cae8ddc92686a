"""Quick-look plots: result maps, the pixel plot, and the plot commands (checked through the figure objects)."""

from __future__ import annotations

import struct

import numpy as np
import pandas as pd
import pytest

import matplotlib

matplotlib.use("Agg")

from matplotlib.colors import BoundaryNorm, to_rgba  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from tscube.bfast import bfast_monitor  # noqa: E402
from tscube.bfast.core.design import build_design  # noqa: E402
from tscube.plot import FLAGGED_GREY, break_maps, locate_pixel, plot_pixel, result_maps, stl_maps  # noqa: E402
from tscube.stl import stl  # noqa: E402
from tscube.timeaxis import build_time_axis  # noqa: E402

NODATA = -3000
START_INDEX = 46


@pytest.fixture(scope="module")
def cube():
    """NDVI-like (T, 4, 5) cube, 16-day dates, gaps, drops in 2001 and 2002, one all-missing pixel."""
    rng = np.random.default_rng(3)
    n_dates = 80
    dates = pd.DatetimeIndex([pd.Timestamp(1999 + i // 23, 1, 1) + pd.Timedelta(days=16 * (i % 23))
                              for i in range(n_dates)])
    t = np.arange(n_dates)
    values = 0.6 + 0.2 * np.sin(2 * np.pi * t / 23)[:, None, None] + rng.normal(0, 0.02, (n_dates, 4, 5))
    values[50:, :2, :2] -= 0.3  # break in 2001
    values[70:, 2:, :2] -= 0.3  # break in 2002
    values[rng.random(values.shape) < 0.1] = np.nan
    values[:, 3, 4] = np.nan
    return values, dates


def png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def lines_by_gid(ax, gid):
    return [line for line in ax.lines if line.get_gid() == gid]


def test_plot_pixel_marks_the_detected_break_and_start(cube):
    values, dates = cube
    fig = plot_pixel(values, dates, dates[START_INDEX], x=1, y=0, freq=23, history="all")
    expected = bfast_monitor(values[:, 0, 1], dates, dates[START_INDEX], freq=23, history="all",
                             return_process=True, engine="reference")
    assert expected.has_break
    ax, ax_mosum = fig.axes[:2]
    for axes in (ax, ax_mosum):
        (line,) = lines_by_gid(axes, "break")
        assert line.get_xdata()[0] == pytest.approx(float(expected.break_time), abs=1e-12)
        (line,) = lines_by_gid(axes, "start")
        assert line.get_xdata()[0] == pytest.approx(expected.attrs["start"], abs=1e-12)
    assert f"break at {float(expected.break_time):.3f}" in fig._suptitle.get_text()

    # the fitted model is the history fit of BFAST Monitor: its residuals give the result's sigma
    (fit,) = lines_by_gid(ax, "fit")
    axis = build_time_axis(dates, 23)
    fit_x, fit_y = fit.get_xdata(), fit.get_ydata()
    observed = values[:, 0, 1][np.isin(axis.time, fit_x)]
    residuals = observed - fit_y
    residuals = residuals[np.isfinite(residuals)]
    k = build_design(axis, 3, True).k
    assert np.sqrt(np.sum(residuals**2) / (residuals.size - k)) == pytest.approx(float(expected.sigma), rel=1e-9)

    # the MOSUM panel shows the process and its boundary at the monitoring observations
    (process,) = lines_by_gid(ax_mosum, "process")
    (boundary,) = lines_by_gid(ax_mosum, "boundary")
    finite = np.isfinite(expected.process)
    np.testing.assert_allclose(process.get_ydata(), expected.process[finite], rtol=1e-12)
    np.testing.assert_allclose(boundary.get_ydata(), expected.boundary[finite], rtol=1e-12)
    np.testing.assert_allclose(process.get_xdata(), axis.time[finite])
    # missing dates are shown
    labels = [line.get_label() for line in ax.lines]
    assert f"missing ({int(np.isnan(values[:, 0, 1]).sum())})" in labels


def test_plot_pixel_with_season_dummies_and_cusum(cube):
    """The fitted line is the seasonal-dummy model's, the lower panel the CUSUM process."""
    values, dates = cube
    kwargs = dict(freq=23, history="all", order=0, season=True, type="OLS-CUSUM")
    fig = plot_pixel(values, dates, dates[START_INDEX], x=1, y=0, **kwargs)
    expected = bfast_monitor(values[:, 0, 1], dates, dates[START_INDEX], return_process=True, engine="reference",
                             **kwargs)
    assert expected.status == 0
    ax, ax_process = fig.axes[:2]
    (fit,) = lines_by_gid(ax, "fit")
    axis = build_time_axis(dates, 23)
    residuals = values[:, 0, 1][np.isin(axis.time, fit.get_xdata())] - fit.get_ydata()
    residuals = residuals[np.isfinite(residuals)]
    k = build_design(axis, 0, True, True).k
    assert k == 24
    assert np.sqrt(np.sum(residuals**2) / (residuals.size - k)) == pytest.approx(float(expected.sigma), rel=1e-9)
    (process,) = lines_by_gid(ax_process, "process")
    np.testing.assert_allclose(process.get_ydata(), expected.process[np.isfinite(expected.process)])
    assert ax_process.get_ylabel() == "OLS-CUSUM" and process.get_label() == "CUSUM process"


def test_plot_pixel_without_a_break_or_a_fit(cube):
    values, dates = cube
    quiet = plot_pixel(values, dates, dates[START_INDEX], x=4, y=0, freq=23, history="all")
    assert not quiet.tscube_result.has_break[0]
    assert not lines_by_gid(quiet.axes[0], "break") and lines_by_gid(quiet.axes[0], "start")
    empty = plot_pixel(values, dates, dates[START_INDEX], x=4, y=3, freq=23)
    assert empty.tscube_result.status[0] == 1  # ALL_MISSING: no fit, no process, still a figure
    assert not lines_by_gid(empty.axes[0], "fit") and not lines_by_gid(empty.axes[1], "process")
    with pytest.raises(ValueError, match="outside"):
        plot_pixel(values, dates, dates[START_INDEX], x=5, y=0, freq=23)


def test_pixel_by_map_coordinates(cube):
    xr = pytest.importorskip("xarray")
    values, dates = cube
    da = xr.DataArray(values, dims=("time", "y", "x"),
                      coords={"time": dates, "y": 4_000_000.0 - 30 * np.arange(4) - 15,
                              "x": 500_000.0 + 30 * np.arange(5) + 15})
    assert locate_pixel(da, 2, 1) == (1, 2, "pixel")
    assert locate_pixel(da, 500_070.0, 3_999_950.0) == (1, 2, "map")
    with pytest.raises(ValueError, match="outside the grid"):
        locate_pixel(da, 400_000.0, 3_999_950.0, coords="map")
    by_index = plot_pixel(da, start=dates[START_INDEX], x=1, y=0, freq=23).tscube_result
    by_map = plot_pixel(da, start=dates[START_INDEX], x=500_045.0, y=3_999_985.0, freq=23).tscube_result
    assert by_map.break_time == by_index.break_time and by_map.magnitude == by_index.magnitude
    direct = bfast_monitor(values[:, 0, 1], dates, dates[START_INDEX], freq=23, engine="reference")
    assert by_index.break_time == direct.break_time


def test_break_maps_years_magnitude_and_grey(cube):
    values, dates = cube
    result = bfast_monitor(values, dates, dates[START_INDEX], freq=23, history="all", engine="reference")
    years = np.floor(result.break_time[result.has_break]).astype(int)
    assert set(years) >= {2001, 2002}
    fig = result.plot()
    ax_time, ax_mag = fig.axes[:2]
    assert len(fig.axes) == 4  # each map has its colour bar
    assert "year of first break" in ax_time.get_title() and "magnitude" in ax_mag.get_title()
    grey, image = ax_time.images
    assert isinstance(image.norm, BoundaryNorm)
    np.testing.assert_array_equal(image.norm.boundaries, np.arange(years.min(), years.max() + 2))
    colorbar = image.colorbar
    ticks = [t.get_text() for t in colorbar.ax.get_yticklabels()]
    assert ticks == [str(y) for y in range(years.min(), years.max() + 1)]
    # a discrete colour per year: pixels breaking in different years get different colours
    rgba = image.to_rgba(image.get_array())
    early, late = (0, 0), (2, 0)
    assert int(result.break_time[early]) == 2001 and int(result.break_time[late]) == 2002
    assert not np.allclose(rgba[early], rgba[late])
    # the all-missing pixel is dark grey, pixels without a break light grey
    assert tuple(grey.get_array()[3, 4]) == to_rgba(FLAGGED_GREY)
    assert np.ma.is_masked(image.get_array()[3, 4])
    # magnitude: diverging colours centred on 0
    (magnitude,) = ax_mag.images[1:]
    assert magnitude.norm.vmin == -magnitude.norm.vmax > -np.inf
    assert magnitude.get_cmap().name.startswith("RdBu")


def test_stl_maps(cube):
    values, dates = cube
    result = stl(values, 23, dates=dates.to_numpy(), engine="reference")
    for source in (result, {"trend_slope": result.trend_slope}):
        if isinstance(source, dict):
            xr = pytest.importorskip("xarray")
            source = xr.Dataset({name: (("y", "x"), getattr(result, name))
                                 for name in ("trend_slope", "seasonal_amplitude", "status")},
                                attrs={"tscube_function": "stl"})
        fig = result_maps(source)
        ax_slope, ax_amp = fig.axes[:2]
        assert "trend slope" in ax_slope.get_title() and "seasonal amplitude" in ax_amp.get_title()
        slope = ax_slope.images[1]
        assert slope.norm.vmin == -slope.norm.vmax
        np.testing.assert_allclose(np.ma.filled(ax_amp.images[1].get_array(), np.nan)[:3],
                                   result.seasonal_amplitude[:3])
    with pytest.raises(ValueError, match="2-D"):
        stl_maps(stl(values[:, 0, 0], 23, engine="reference"))
    with pytest.raises(ValueError, match="2-D"):
        break_maps(bfast_monitor(values[:, 0, 0], dates, dates[START_INDEX], freq=23, engine="reference"))


def test_plot_stl_pixel_draws_the_components_of_stl(cube):
    from tscube.plot import plot_stl_pixel

    values, dates = cube
    series = values[:, 1, 2]
    expected = stl(series[:, None], 23, dates=dates.to_numpy(), engine="reference")
    fig = plot_stl_pixel(series, dates.to_numpy(), period=23)
    assert len(fig.axes) == 4 and "OK" in fig._suptitle.get_text()
    for ax, name in zip(fig.axes[1:], ("seasonal", "trend", "remainder")):
        assert ax.get_ylabel() == name
        component = getattr(expected, name)[:, 0]
        np.testing.assert_array_equal(ax.lines[0].get_ydata(), component[np.isfinite(component)])
    data = fig.axes[0].lines[0]
    np.testing.assert_array_equal(data.get_ydata(), series[np.isfinite(series)])
    missing = plot_stl_pixel(values[:, 3, 4], dates.to_numpy(), period=23)  # all missing: a status, no component
    assert "ALL_MISSING" in missing._suptitle.get_text() and len(missing.axes[2].lines[0].get_ydata()) == 0


def test_plot_commands_write_pngs_of_the_requested_size(cube, tmp_path):
    xr = pytest.importorskip("xarray")
    rasterio = pytest.importorskip("rasterio")
    pytest.importorskip("rioxarray")
    from rasterio.transform import from_origin

    from tscube.cli import app
    from tscube.io import write_result
    from tscube.xr import bfast_monitor_xarray, stl_xarray

    values, dates = cube
    transform = from_origin(500_000.0, 4_000_000.0, 30.0, 30.0)
    stack = tmp_path / "stack.tif"
    raw = np.where(np.isnan(values), NODATA, np.rint(values * 10000)).astype(np.int16)
    with rasterio.open(stack, "w", driver="GTiff", width=5, height=4, count=len(dates), dtype="int16",
                       crs="EPSG:32633", transform=transform, nodata=NODATA) as dst:
        dst.write(raw)
        for i, date in enumerate(dates):
            dst.set_band_description(i + 1, f"{date:%Y-%m-%d}")
    from tscube.io import open_cube

    da = open_cube(stack)
    write_result(bfast_monitor_xarray(da, dates[START_INDEX], freq=23, engine="reference").compute(),
                 tmp_path / "breaks.tif")
    write_result(stl_xarray(da, 23, components=False, engine="reference").compute(), tmp_path / "stl.nc")

    runner = CliRunner()
    for result_file, width, height in (("breaks.tif", 900, 400), ("stl.nc", 700, 300)):
        png = tmp_path / f"{result_file}.png"
        out = runner.invoke(app, ["plot", str(tmp_path / result_file), "-o", str(png), "--width", str(width),
                                  "--height", str(height)])
        assert out.exit_code == 0, out.output
        assert png_size(png) == (width, height)

    png = tmp_path / "pixel.png"
    out = runner.invoke(app, ["plot-pixel", str(stack), "--x", "500045", "--y", "3999985", "--start",
                              f"{dates[START_INDEX]:%Y-%m-%d}", "--freq", "23", "--history", "all", "-o", str(png)])
    assert out.exit_code == 0, out.output
    assert png_size(png) == (1000, 650)
    expected = bfast_monitor(raw[:, 0, 1], dates, dates[START_INDEX], freq=23, history="all", nodata=NODATA,
                             engine="reference")
    assert "row 0, col 1" in out.output and f"break at {float(expected.break_time):.3f}" in out.output

    bad = runner.invoke(app, ["plot", str(tmp_path / "breaks.tif"), "-o", str(tmp_path / "map.gif")])
    assert bad.exit_code != 0 and "unsupported suffix" in bad.output
