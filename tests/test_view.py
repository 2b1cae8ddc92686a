"""``tscube view``: the layers and tiles of every kind of result, the pixel inspector
against the stored result and the planted truth, the server's refusals, and the page in
a real headless Chromium (clicks, layer switches, messages, shared URLs, screenshots).

The browser tests need Debian's ``chromium`` and ``chromium-driver`` (``.ci/run``
installs them where missing) and Selenium (the ``test`` extra); without them they are
skipped, unless ``TSCUBE_REQUIRE_BROWSER=1`` (set by ``.ci/run``) makes that a failure.
``TSCUBE_VIEW_SCREENSHOTS=FOLDER`` keeps the screenshots docs/view.md shows.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import socket
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

xr = pytest.importorskip("xarray")
pytest.importorskip("rioxarray")
pytest.importorskip("zarr")

from PIL import Image  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from tscube import view  # noqa: E402
from tscube.cli import app  # noqa: E402
from tscube.datasets import make_cube  # noqa: E402
from tscube.figures import FLAGGED_GREY, NO_BREAK_GREY  # noqa: E402
from tscube.viewer.layers import TILE, native_zoom  # noqa: E402
from tscube.viewer.pixel import decimal_year_to_date, status_descriptions  # noqa: E402

runner = CliRunner()
ROWS, COLS = 24, 40


@pytest.fixture(autouse=True)
def overview_cache(tmp_path, monkeypatch):
    """Each test its own overview cache (never the user's ~/.cache)."""
    folder = tmp_path / "overview-cache"
    monkeypatch.setenv("TSCUBE_VIEW_CACHE", str(folder))
    return folder


def tscube(*args):
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture(scope="session")  # session: xdist may interleave other modules' tests with these
def made(tmp_path_factory):
    """A cloudy cube with planted clearings as a georeferenced Zarr, and the results of
    monitor, breaks and stl on it (reference engine: nothing to compile)."""
    import rioxarray  # noqa: F401

    folder = tmp_path_factory.mktemp("view")
    cube = make_cube("demo", shape=(ROWS, COLS), n_dates=138, n_history=92, nan_fraction=0.2, change_fraction=0.3,
                     seed=3)
    data = xr.DataArray(cube.data, dims=("time", "y", "x"), name="ndvi",
                        coords={"time": pd.DatetimeIndex(cube.dates), "y": 4_000_000.0 - 30 * np.arange(ROWS) - 15,
                                "x": 500_000.0 + 30 * np.arange(COLS) + 15}).rio.write_crs("EPSG:32633")
    data.to_dataset().to_zarr(folder / "cube.zarr")
    start = str(cube.start.astype("datetime64[D]"))
    tscube("monitor", folder / "cube.zarr", "-o", folder / "monitor.zarr", "--start", start, "--freq", 23,
           "--engine", "reference", "--no-progress")
    tscube("monitor", folder / "cube.zarr", "-o", folder / "monitor.tif", "--start", start, "--freq", 23,
           "--engine", "reference", "--no-progress")
    stored = xr.open_zarr(folder / "monitor.zarr").load()
    has_break = np.isfinite(stored["break_time"].values)
    planted = np.argwhere(cube.changed & has_break & (stored["break_time"].values >= cube.change_time))
    stable = np.argwhere(~cube.changed & ~has_break & (stored["status"].values == 0))
    return dict(folder=folder, cube=cube, stored=stored, planted=tuple(planted[len(planted) // 2]),
                stable=tuple(stable[len(stable) // 2]))


def get(viewer, path, host=None):
    request = urllib.request.Request(viewer.url.rstrip("/") + path)
    if host:
        request.add_header("Host", host)
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.status, response.headers.get("Content-Type"), response.read()


def get_json(viewer, path):
    return json.loads(get(viewer, path)[2])


def tile_image(viewer, layer, z, x, y) -> np.ndarray:
    status, kind, body = get(viewer, f"/api/tile/{layer}/{z}/{x}/{y}.png")
    assert status == 200 and kind == "image/png"
    return np.asarray(Image.open(io.BytesIO(body)).convert("RGBA"))


def grey(name) -> np.ndarray:
    from matplotlib.colors import to_rgba

    return np.round(np.asarray(to_rgba(name)) * 255).astype(np.uint8)


# --------------------------------------------------------------------------------------
# layers, tiles, pyramid


def test_monitor_layers_tiles_and_legends(made):
    stored = made["stored"]
    with view(made["folder"] / "monitor.zarr", open_browser=False) as viewer:
        info = get_json(viewer, "/api/info")
        assert info["kind"] == "bfast_monitor"
        assert info["shape"] == [ROWS, COLS] and info["zoom"] == 0
        assert [layer["name"] for layer in info["layers"]][:3] == ["break_time", "magnitude", "status"]
        assert info["crs"] == "EPSG:32633"
        assert info["summary"]["pixels"] == ROWS * COLS
        assert info["params"]["engine"] == "reference" and info["cube"].endswith("cube.zarr")
        assert info["cube_problem"] is None

        legend = get_json(viewer, "/api/legend/break_time")
        years = np.floor(stored["break_time"].values[np.isfinite(stored["break_time"].values)])
        assert [int(e["label"]) for e in legend["entries"]] == list(range(int(years.min()), int(years.max()) + 1))
        assert {g["label"] for g in legend["greys"]} == {"no break", "status not OK"}

        image = tile_image(viewer, "break_time", 0, 0, 0)
        assert image.shape == (TILE, TILE, 4)
        assert (image[ROWS:, :, 3] == 0).all() and (image[:, COLS:, 3] == 0).all()  # nothing past the raster
        row, col = made["stable"]
        np.testing.assert_array_equal(image[row, col], grey(NO_BREAK_GREY))
        row, col = made["planted"]
        year = int(np.floor(stored["break_time"].values[row, col]))
        colour = next(e["colour"] for e in legend["entries"] if int(e["label"]) == year)
        np.testing.assert_array_equal(image[row, col, :3], [int(colour[i:i + 2], 16) for i in (1, 3, 5)])
        # pixels with the same break year share the colour; those with other years do not
        same = np.floor(stored["break_time"].values + 1e-9) == year
        assert (np.all(image[:ROWS, :COLS][same] == image[row, col], axis=-1)).all()
        assert not np.all(image[:ROWS, :COLS][~same] == image[row, col], axis=-1).any()

        magnitude = get_json(viewer, "/api/legend/magnitude")
        assert magnitude["kind"] == "continuous" and magnitude["min"] == -magnitude["max"] > -np.inf
        status = get_json(viewer, "/api/legend/status")
        assert [e["label"] for e in status["entries"]][:2] == ["OK", "ALL_MISSING"]

        for path in ("/api/tile/break_time/1/0/0.png", "/api/tile/break_time/0/1/0.png", "/api/tile/nope/0/0/0.png",
                     "/api/legend/nope"):
            with pytest.raises(urllib.error.HTTPError) as error:
                get(viewer, path)
            assert error.value.code == 404


def test_flagged_pixels_are_dark_grey(tmp_path):
    """A pixel that is all clouds: status ALL_MISSING, dark grey in every layer but status."""
    import rioxarray  # noqa: F401

    cube = make_cube("demo", shape=(6, 7), n_dates=92, n_history=46, seed=1)
    cube.data[:, 2, 3] = np.nan
    data = xr.DataArray(cube.data, dims=("time", "y", "x"), name="ndvi",
                        coords={"time": pd.DatetimeIndex(cube.dates), "y": np.arange(6.0), "x": np.arange(7.0)})
    data.to_dataset().to_zarr(tmp_path / "cube.zarr")
    tscube("breaks", tmp_path / "cube.zarr", "-o", tmp_path / "breaks.zarr", "--freq", 23, "--engine", "reference",
           "--no-progress")
    with view(tmp_path / "breaks.zarr", open_browser=False) as viewer:
        info = get_json(viewer, "/api/info")
        assert [layer["name"] for layer in info["layers"]] == ["n_breaks", "break_time", "magnitude", "status"]
        for layer in ("n_breaks", "break_time", "magnitude"):
            image = tile_image(viewer, layer, 0, 0, 0)
            np.testing.assert_array_equal(image[2, 3], grey(FLAGGED_GREY), err_msg=layer)
        image = tile_image(viewer, "status", 0, 0, 0)
        assert not np.array_equal(image[2, 3], image[0, 0])  # ALL_MISSING vs OK
        details = get_json(viewer, "/api/pixel?row=2&col=3")
        assert details["status"]["name"] == "ALL_MISSING" and "No valid observation" in details["status"]["text"]
        assert details["breaks"] == []


def test_pyramid_of_a_large_raster(tmp_path):
    """A 700 x 1100 map: three zoom levels; each tile is every 2**k-th pixel of its block."""
    values = np.arange(700 * 1100, dtype=np.float64).reshape(700, 1100) / 1e4
    ds = xr.Dataset({"trend_slope": (("y", "x"), values), "seasonal_amplitude": (("y", "x"), values + 1),
                     "status": (("y", "x"), np.zeros((700, 1100), np.int8))}, attrs={"tscube_function": "stl"})
    ds.to_netcdf(tmp_path / "stl.nc")
    assert native_zoom((700, 1100)) == 3
    with view(tmp_path / "stl.nc", open_browser=False) as viewer:
        assert get_json(viewer, "/api/info")["zoom"] == 3
        layer = viewer.app.by_name["trend_slope"]
        full = tile_image(viewer, "trend_slope", 3, 2, 1)  # rows 256..511, cols 512..767
        np.testing.assert_array_equal(full, layer.colour(values[256:512, 512:768].astype(np.float32),
                                                         np.zeros((256, 256), np.float32)))
        top = tile_image(viewer, "trend_slope", 0, 0, 0)  # every 8th pixel
        expected = layer.colour(values[::8, ::8].astype(np.float32), np.zeros((88, 138), np.float32))
        np.testing.assert_array_equal(top[:88, :138], expected)
        assert (top[88:, :, 3] == 0).all()
        edge = tile_image(viewer, "trend_slope", 3, 4, 2)  # the last column of tiles: 76 columns wide
        assert (edge[:, 76:, 3] == 0).all() and (edge[:188, :76, 3] == 255).all()


def test_overviews_are_cached_and_a_result_written_again_gets_new_ones(tmp_path, overview_cache):
    from tscube.viewer import ViewApp

    values = np.random.default_rng(0).normal(size=(600, 900))
    ds = xr.Dataset({"trend_slope": (("y", "x"), values), "seasonal_amplitude": (("y", "x"), np.abs(values)),
                     "status": (("y", "x"), np.zeros((600, 900), np.int8))}, attrs={"tscube_function": "stl"})
    ds.to_netcdf(tmp_path / "stl.nc")
    first = ViewApp(tmp_path / "stl.nc")
    first.warm()
    first.overviews.wait()  # written behind the first view
    layer = first.layers[0]
    assert layer._full is not None  # the first opening reads the whole layer ...
    steps = sorted(int(path.name.split(".")[1]) for path in first.overviews.folder.glob("trend_slope.[0-9]*.npy"))
    assert steps == [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]  # ... and caches every level
    again = ViewApp(tmp_path / "stl.nc")
    again.warm()
    assert again.layers[0]._full is None and again.layers[0].status._full is None  # the overviews suffice
    np.testing.assert_array_equal(again.layers[0].level(4), values[::4, ::4].astype(np.float32))
    assert again.layers[0].tile(0, 0, 0, again.zoom) == layer.tile(0, 0, 0, first.zoom)
    assert again.layers[0].legend() == layer.legend()
    # written again: other overviews (the old ones are never shown for the new result)
    ds.assign(trend_slope=-ds.trend_slope).to_netcdf(tmp_path / "new.nc")
    os.utime(tmp_path / "new.nc", ns=(1, 1))
    os.replace(tmp_path / "new.nc", tmp_path / "stl.nc")  # as tscube's commands write: whole, then renamed
    newer = ViewApp(tmp_path / "stl.nc")
    assert newer.overviews.folder != first.overviews.folder
    np.testing.assert_array_equal(newer.layers[0].level(4), -values[::4, ::4].astype(np.float32))


def test_legends_know_the_rare_values_a_sample_misses(tmp_path):
    """Years, counts and labels take their legend and colours from the whole layer (its
    range is cached with the overviews): one pixel off the sampled grid still gets its own."""
    from tscube.viewer import ViewApp

    shape = (600, 900)  # the legend's sample is every 2nd pixel: (1, 1) is not in it
    n_breaks = np.zeros(shape, np.int32)
    times = np.full((1,) + shape, np.nan)
    n_breaks[0, 0], times[0, 0, 0] = 1, 2010.2
    n_breaks[1, 1], times[0, 1, 1] = 1, 2013.7
    n_breaks[3, 5] = 7
    ds = xr.Dataset({"n_breaks": (("y", "x"), n_breaks), "break_time": (("break", "y", "x"), times),
                     "magnitude": (("y", "x"), np.zeros(shape)), "status": (("y", "x"), np.zeros(shape, np.int8))},
                    attrs={"tscube_function": "bfast_lite"})
    ds.to_netcdf(tmp_path / "lite.nc")
    for opening in ("first", "again"):  # the second reads the range from the overview cache
        app = ViewApp(tmp_path / "lite.nc")
        app.warm()
        app.overviews.wait()
        years = app.by_name["break_time"].legend()["entries"]
        assert [e["label"] for e in years] == ["2010", "2011", "2012", "2013"], opening
        counts = app.by_name["n_breaks"].legend()["entries"]
        assert [e["label"] for e in counts] == [str(i) for i in range(8)], opening
        layer = app.by_name["n_breaks"]
        if opening == "again":  # neither the legends nor the first view read the layer whole
            assert layer._full is None and app.by_name["break_time"]._full is None
        tile = layer.tile(app.zoom, 0, 0, app.zoom)  # the native zoom: the whole layer
        image = np.asarray(Image.open(io.BytesIO(tile)).convert("RGBA"))
        seven = counts[7]["colour"]
        np.testing.assert_array_equal(image[3, 5, :3], [int(seven[i:i + 2], 16) for i in (1, 3, 5)])
        assert not np.array_equal(image[3, 5], image[0, 0])
        app.overviews.wait()  # every layer's overviews written before the next opening


def test_a_cache_that_cannot_be_written_is_only_not_used(tmp_path, monkeypatch):
    from tscube.viewer import ViewApp

    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder would be")
    monkeypatch.setenv("TSCUBE_VIEW_CACHE", str(blocked))
    values = np.arange(300 * 400, dtype=np.float64).reshape(300, 400)
    xr.Dataset({"trend_slope": (("y", "x"), values), "seasonal_amplitude": (("y", "x"), values),
                "status": (("y", "x"), np.zeros((300, 400), np.int8))},
               attrs={"tscube_function": "stl"}).to_netcdf(tmp_path / "stl.nc")
    app = ViewApp(tmp_path / "stl.nc")
    app.warm()
    np.testing.assert_array_equal(app.layers[0].level(2), values[::2, ::2].astype(np.float32))


# --------------------------------------------------------------------------------------
# pixels


def test_planted_break_pixel_matches_the_stored_result_and_the_truth(made):
    cube, stored = made["cube"], made["stored"]
    row, col = made["planted"]
    with view(made["folder"] / "monitor.zarr", open_browser=False) as viewer:
        details = get_json(viewer, f"/api/pixel?row={row}&col={col}")
    assert details["status"]["name"] == "OK" and details["status"]["text"].startswith("Model fitted")
    stored_time = float(stored["break_time"].values[row, col])
    assert details["breaks"][0]["time"] == pytest.approx(stored_time, abs=1e-9)
    assert details["recomputed"]["breaks"][0]["time"] == pytest.approx(stored_time, abs=1e-9)
    assert cube.change_time[row, col] <= details["breaks"][0]["time"] < cube.change_time[row, col] + 0.5
    assert details["breaks"][0]["date"] == decimal_year_to_date(stored_time)
    assert details["figure"].startswith("data:image/png;base64,")
    assert details["x"] == 500_000.0 + 30 * col + 15 and details["y"] == 4_000_000.0 - 30 * row - 15
    assert details["values"]["magnitude"] == pytest.approx(float(stored["magnitude"].values[row, col]), rel=1e-6)


def test_stable_pixel_has_no_break(made):
    row, col = made["stable"]
    with view(made["folder"] / "monitor.tif", open_browser=False) as viewer:
        details = get_json(viewer, f"/api/pixel?row={row}&col={col}")
    assert details["breaks"] == [] and details["recomputed"]["breaks"] == []
    assert details["status"]["name"] == "OK" and "figure" in details


@pytest.fixture(scope="session")
def small(tmp_path_factory):
    """A small cube (the reference engines of BFAST Lite and STL take ~25 and ~80 ms a
    pixel) with its breaks and stl results, and a pixel with a planted break."""
    folder = tmp_path_factory.mktemp("view-small")
    cube = make_cube("demo", shape=(5, 6), n_dates=138, n_history=92, nan_fraction=0.2, change_fraction=0.5, seed=4)
    data = xr.DataArray(cube.data, dims=("time", "y", "x"), name="ndvi",
                        coords={"time": pd.DatetimeIndex(cube.dates), "y": np.arange(5.0), "x": np.arange(6.0)})
    data.to_dataset().to_zarr(folder / "cube.zarr")
    tscube("breaks", folder / "cube.zarr", "-o", folder / "breaks.zarr", "--freq", 23, "--engine", "reference",
           "--no-progress")
    tscube("stl", folder / "cube.zarr", "-o", folder / "stl.nc", "--period", 23, "--engine", "reference",
           "--no-progress")
    planted = tuple(np.argwhere(cube.changed)[0])
    return dict(folder=folder, cube=cube, planted=planted)


@pytest.mark.parametrize("name, kind", [("breaks.zarr", "bfast_lite"), ("stl.nc", "stl")])
def test_other_results_show_their_pixel(small, name, kind):
    made = small
    row, col = made["planted"]
    with view(made["folder"] / name, open_browser=False) as viewer:
        info = get_json(viewer, "/api/info")
        assert info["kind"] == kind
        for layer in info["layers"]:
            tile_image(viewer, layer["name"], 0, 0, 0)
            assert get_json(viewer, f"/api/legend/{layer['name']}")["name"] == layer["name"]
        details = get_json(viewer, f"/api/pixel?row={row}&col={col}")
    assert "figure" in details and details["status"]["name"] == "OK"
    if kind == "bfast_lite":
        stored = xr.open_zarr(made["folder"] / name)
        n = int(stored["n_breaks"].values[row, col])
        times = stored["break_time"].values[:n, row, col]
        assert [b["time"] for b in details["breaks"]] == pytest.approx(list(times))
        assert [b["time"] for b in details["recomputed"]["breaks"]] == pytest.approx(list(times))
        assert any(abs(t - made["cube"].change_time[row, col]) < 0.25 for t in times)


def test_without_the_cube_the_pixel_says_why(made, tmp_path, capfd):
    moved = tmp_path / "monitor.zarr"
    shutil.copytree(made["folder"] / "monitor.zarr", moved)
    record = json.loads((moved / "_tscube_run.json").read_text())
    record["input"]["path"] = str(tmp_path / "gone.zarr")
    (moved / "_tscube_run.json").write_text(json.dumps(record))
    with view(moved, open_browser=False) as viewer:
        info = get_json(viewer, "/api/info")
        assert "gone.zarr" in info["cube_problem"] and "--cube" in info["cube_problem"]
        details = get_json(viewer, "/api/pixel?row=1&col=1")
        assert "gone.zarr" in details["figure_error"] and "figure" not in details
        assert details["status"]["name"] == "OK"  # the stored outputs are still there
    assert "gone.zarr" in capfd.readouterr().err
    with view(moved, made["folder"] / "cube.zarr", open_browser=False) as viewer:  # --cube mends it
        assert "figure" in get_json(viewer, "/api/pixel?row=1&col=1")
    small = tmp_path / "small.zarr"
    xr.open_zarr(made["folder"] / "cube.zarr").isel(x=slice(0, 5)).to_zarr(small)
    with view(moved, small, open_browser=False) as viewer:
        assert "not the cube of this result" in get_json(viewer, "/api/pixel?row=1&col=1")["figure_error"]


def test_a_result_from_a_stac_catalog_asks_for_a_local_cube(made, tmp_path):
    result = tmp_path / "monitor.zarr"
    shutil.copytree(made["folder"] / "monitor.zarr", result)
    record = json.loads((result / "_tscube_run.json").read_text())
    record["input"]["path"] = "https://example.com/catalog/collection.json"
    (result / "_tscube_run.json").write_text(json.dumps(record))
    with view(result, open_browser=False) as viewer:
        assert "STAC catalog" in get_json(viewer, "/api/info")["cube_problem"]
        details = get_json(viewer, "/api/pixel?row=0&col=0")
        assert "STAC catalog" in details["figure_error"] and "--cube" in details["figure_error"]


def test_every_status_is_explained():
    from tscube.bfast import BfastClassicStatus, BfastLiteStatus, BfastStatus
    from tscube.stl import StlStatus

    for enum in (BfastStatus, BfastLiteStatus, BfastClassicStatus, StlStatus):
        texts = status_descriptions(enum)
        assert set(texts) == {int(member) for member in enum}, enum.__name__
        assert all(len(text) > 10 and "``" not in text for text in texts.values()), enum.__name__


def test_decimal_year_to_date():
    assert decimal_year_to_date(2001.0) == "2001-01-01"
    assert decimal_year_to_date(2001.5) == "2001-07-02"
    assert decimal_year_to_date(2000 + 59 / 366) == "2000-02-29"
    assert decimal_year_to_date(float("nan")) is None


# --------------------------------------------------------------------------------------
# what the server refuses


def test_server_serves_no_paths_and_loopback_hosts_only(made):
    with view(made["folder"] / "monitor.zarr", open_browser=False) as viewer:
        assert viewer.url.startswith("http://127.0.0.1:")
        for path in ("/static/../../server.py", "/static/%2e%2e/layers.py", "/etc/passwd", "/api/tile/../x",
                     "/static/leaflet/../../pixel.py"):
            with pytest.raises(urllib.error.HTTPError) as error:
                get(viewer, path)
            assert error.value.code == 404, path
        with pytest.raises(urllib.error.HTTPError) as error:
            get(viewer, "/api/info", host="attacker.example")
        assert error.value.code == 403
        assert get(viewer, "/api/info", host="localhost")[0] == 200
        with pytest.raises(urllib.error.HTTPError) as error:
            get(viewer, "/api/pixel?row=99&col=0")
        assert error.value.code == 400
        with pytest.raises(urllib.error.HTTPError) as error:
            get(viewer, "/api/pixel?row=a&col=0")
        assert error.value.code == 500 and b"integer" in error.value.read()
        assert get(viewer, "/static/leaflet/leaflet.js")[1].startswith("text/javascript")


def test_bad_result_paths_are_clear_errors(tmp_path, made):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        view(tmp_path / "missing.zarr", open_browser=False)
    (tmp_path / "plain.nc").write_bytes(b"")
    xr.Dataset({"a": (("y", "x"), np.zeros((2, 2)))}).to_netcdf(tmp_path / "plain.nc")
    with pytest.raises(ValueError, match="not a tscube result"):
        view(tmp_path / "plain.nc", open_browser=False)
    result = runner.invoke(app, ["view", str(tmp_path / "missing.zarr"), "--no-browser"])
    assert result.exit_code == 1 and "does not exist" in result.output


# --------------------------------------------------------------------------------------
# the page, in headless Chromium


def _browser_or_skip():
    from tscube.viewer.browser import find_chromium

    problem = None
    try:
        import selenium  # noqa: F401
    except ImportError:
        problem = "selenium is not installed (pip install -e '.[test]')"
    if problem is None and None in find_chromium():
        problem = "Chromium and ChromeDriver are not installed (Debian: apt-get install chromium chromium-driver)"
    if problem:
        if os.environ.get("TSCUBE_REQUIRE_BROWSER") == "1":
            pytest.fail(f"TSCUBE_REQUIRE_BROWSER=1 but {problem}")
        pytest.skip(problem)


@pytest.fixture(scope="session")
def driver():
    _browser_or_skip()
    from tscube.viewer.browser import chromium

    with chromium(width=1300, height=900) as driver:
        yield driver


def _screenshot(driver, name):
    folder = os.environ.get("TSCUBE_VIEW_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(folder) / name))


def _open(driver, url):
    from tscube.viewer.browser import console_messages, wait_for

    driver.get(url)
    wait_for(driver, "return window.tscubeView && window.tscubeView.info && window.tscubeView.tilesLoaded()")
    console_messages(driver)  # start each check with an empty console


def _click_pixel(driver, row, col):
    from selenium.webdriver.common.actions.action_builder import ActionBuilder

    from tscube.viewer.browser import wait_for

    driver.execute_script(f"window.tscubeView.centreOn({row}, {col})")
    wait_for(driver, "return window.tscubeView.tilesLoaded()")
    x, y = driver.execute_script(f"return window.tscubeView.pixelToScreen({row}, {col})")
    actions = ActionBuilder(driver)
    actions.pointer_action.move_to_location(int(round(x)), int(round(y))).click()
    actions.perform()
    wait_for(driver, f"return window.tscubeView.pixelShown({row}, {col})", timeout=60)


def test_page_layers_clicks_and_shared_url(made, driver):
    from tscube.viewer.browser import console_messages, wait_for

    cube, stored = made["cube"], made["stored"]
    with view(made["folder"] / "monitor.zarr", open_browser=False) as viewer:
        _open(driver, viewer.url)
        labels = driver.execute_script("return [...document.querySelectorAll('#layers label')].map(l => l.innerText)")
        assert labels[0].strip() == "Break date (year)" and len(labels) == 5
        assert driver.execute_script("return document.querySelector('#legend').dataset.layer") == "break_time"
        assert "bfast monitor" in driver.find_element("id", "kind").text and "EPSG:32633" in driver.find_element(
            "id", "kind").text

        # switch layers: the legend and the tiles follow, the URL says so
        driver.find_element("css selector", "#layers input[value='magnitude']").click()
        wait_for(driver, "return document.querySelector('#legend').dataset.layer === 'magnitude' && "
                         "window.tscubeView.tilesLoaded()")
        assert "layer=magnitude" in driver.current_url
        assert driver.execute_script("return document.querySelector('.ramp') !== null")
        tiles = driver.execute_script("return [...document.querySelectorAll('.leaflet-tile')].map(t => t.src)")
        assert tiles and all("/api/tile/magnitude/" in src for src in tiles)

        # a real click on a pixel with a planted break: its series, the break at the planted date
        row, col = made["planted"]
        _click_pixel(driver, row, col)
        breaks = driver.execute_script(
            "return [...document.querySelectorAll('#pixel-breaks li.break')].map(li => +li.dataset.time)")
        assert breaks == [pytest.approx(float(stored["break_time"].values[row, col]), abs=1e-9)]
        assert cube.change_time[row, col] <= breaks[0] < cube.change_time[row, col] + 0.5
        text = driver.find_element("id", "pixel").text
        assert f"Pixel row {row}, col {col}" in text and "Status OK" in text
        assert driver.execute_script("const i = document.getElementById('pixel-figure'); "
                                     "return !i.hidden && i.complete && i.naturalWidth > 600")
        assert f"pixel={row},{col}" in driver.current_url
        _screenshot(driver, "view-monitor.png")
        shared = driver.current_url

        # a stable pixel: no break
        row_s, col_s = made["stable"]
        _click_pixel(driver, row_s, col_s)
        assert driver.execute_script("return document.querySelectorAll('#pixel-breaks li.break').length") == 0
        assert driver.find_element("css selector", "#pixel-breaks li.no-break").text == "no break"

        # hover: every layer's value under the pointer
        wait_for(driver, "const h = document.getElementById('hover'); return !h.hidden && "
                         f"h.innerText.includes('row {row_s}, col {col_s}')")
        assert "Magnitude" in driver.find_element("id", "hover").text

        # the shared URL reopens the same layer, view and pixel
        driver.get("about:blank")
        _open(driver, shared)
        wait_for(driver, f"return window.tscubeView.pixelShown({row}, {col})", timeout=60)
        assert driver.execute_script("return window.tscubeView.layer") == "magnitude"
        assert driver.execute_script("return document.querySelector(\"#layers input[value='magnitude']\").checked")
        assert not [m for m in console_messages(driver) if "SEVERE" in m or "tscube view" in m]


@pytest.mark.parametrize("case", ["recorded input moved", "bad --cube path"])
def test_page_without_the_cube_says_so_in_page_and_console(made, driver, tmp_path, capfd, case):
    from tscube.viewer.browser import console_messages, wait_for

    if case == "recorded input moved":
        result, cube = tmp_path / "monitor.zarr", None
        shutil.copytree(made["folder"] / "monitor.zarr", result)
        record = json.loads((result / "_tscube_run.json").read_text())
        record["input"]["path"] = str(tmp_path / "gone.zarr")
        (result / "_tscube_run.json").write_text(json.dumps(record))
    else:
        result, cube = made["folder"] / "monitor.zarr", tmp_path / "gone.zarr"
    with view(result, cube, open_browser=False) as viewer:
        driver.get(viewer.url)
        wait_for(driver, "return !document.getElementById('message').hidden")
        banner = driver.find_element("id", "message").text
        assert "gone.zarr" in banner and "--cube" in banner
        row, col = made["planted"]
        _click_pixel(driver, row, col)
        error = driver.find_element("id", "pixel-error")
        assert error.is_displayed() and "gone.zarr" in error.text
        assert not driver.find_element("id", "pixel-figure").is_displayed()
        assert "break at" in driver.find_element("id", "pixel-breaks").text  # the stored break is still listed
        console = console_messages(driver)
        assert any("tscube view:" in m and "gone.zarr" in m for m in console), console
        if cube is None:
            _screenshot(driver, "view-no-cube.png")
    assert "gone.zarr" in capfd.readouterr().err  # the server's console


def test_page_of_a_breaks_result(small, driver):
    from tscube.viewer.browser import wait_for

    with view(small["folder"] / "breaks.zarr", open_browser=False) as viewer:
        _open(driver, viewer.url + "#layer=break_time")
        assert driver.execute_script("return window.tscubeView.layer") == "break_time"
        row, col = small["planted"]
        _click_pixel(driver, row, col)
        wait_for(driver, "return document.querySelectorAll('#pixel-breaks li.break').length > 0")
        _screenshot(driver, "view-breaks.png")


@pytest.mark.parametrize("stop", ["SIGINT", "SIGTERM"])
def test_the_command_serves_until_interrupted(made, stop):
    """``tscube view`` as a user runs it: the URL on stdout, the page served, Ctrl-C (or a
    service manager's SIGTERM) ends it."""
    import signal
    import subprocess
    import sys
    import time

    process = subprocess.Popen([sys.executable, "-m", "tscube.cli", "view", str(made["folder"] / "monitor.zarr"),
                                "--port", "0", "--no-browser"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        lines = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            lines.append(line)
            if line.startswith("tscube view: http://127.0.0.1:") or (not line and process.poll() is not None):
                break
        url = lines[-1].split()[2]
        assert "bfast monitor result monitor.zarr: 24 x 40 pixels" in "".join(lines)
        with urllib.request.urlopen(url + "api/info", timeout=30) as response:
            assert json.loads(response.read())["kind"] == "bfast_monitor"
        with urllib.request.urlopen(url, timeout=30) as response:
            assert b"/static/leaflet/leaflet.js" in response.read()
        process.send_signal(getattr(signal, stop))  # SIGINT also where it was ignored (a background job)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_free_port_and_loopback_default(made):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        with view(made["folder"] / "monitor.zarr", open_browser=False) as viewer:
            assert viewer.url != f"http://127.0.0.1:{busy.getsockname()[1]}/"
            assert "<iframe" in viewer._repr_html_()
