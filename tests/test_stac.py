"""STAC catalogs to index cubes (tscube.io.open_stac) and to change maps (the CLI).

Every catalog is built here (tscube.datasets.make_stac_catalog: COGs for 40 dates, two
overlapping tiles, planted clouds, a processing-offset change, a planted break); the
cube is compared with an independent NumPy computation from the same files (item JSON
read with ``json``, pixels with rasterio). "Remote" catalogs are the same folders served
on 127.0.0.1 by a thread of the test: no network.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

xr = pytest.importorskip("xarray")
rasterio = pytest.importorskip("rasterio")
pytest.importorskip("dask")
pytest.importorskip("odc.stac")
pystac = pytest.importorskip("pystac")

from typer.testing import CliRunner  # noqa: E402

from tscube.cli import app  # noqa: E402
from tscube.datasets import make_stac_catalog, serve_folder  # noqa: E402
from tscube.datasets._stac import SENSOR_ASSETS  # noqa: E402
from tscube.io import open_stac  # noqa: E402
from tscube.stac import StacError, describe_stac, parse_mask  # noqa: E402

ENGINE = "reference"
runner = CliRunner()
# one year of history: a trend would be extrapolated from too little, so none
MONITOR = ["--start", "2022-03-01", "--freq", "23", "--order", "1", "--history", "all", "--no-trend",
           "--engine", ENGINE, "--no-progress"]


def tscube(*args):
    return runner.invoke(app, [str(a) for a in args])


# --------------------------------------------------------------------------------------
# the independent NumPy computation


ROLE = {"blue": 0, "red": 1, "nir": 2, "swir16": 3, "swir22": 4}
FORMULAS = {
    "NDVI": lambda b: (b["nir"] - b["red"]) / (b["nir"] + b["red"]),
    "NBR": lambda b: (b["nir"] - b["swir22"]) / (b["nir"] + b["swir22"]),
    "NDMI": lambda b: (b["nir"] - b["swir16"]) / (b["nir"] + b["swir16"]),
    "EVI": lambda b: 2.5 * (b["nir"] - b["red"]) / (b["nir"] + 6 * b["red"] - 7.5 * b["blue"] + 1),
}
SCL_DEFAULT = (0, 1, 3, 8, 9, 10)
QA_DEFAULT = (0, 1, 2, 3, 4)


def read_catalog_items(folder: Path) -> list[tuple[dict, Path]]:
    """Every item JSON under ``folder`` with its directory, sorted by (datetime, id)."""
    items = []
    for path in folder.rglob("*.json"):
        record = json.loads(path.read_text())
        if record.get("type") == "Feature":
            items.append((record, path.parent))
    return sorted(items, key=lambda item: (item[0]["properties"]["datetime"], item[0]["id"]))


def reference_cube(folder, sensor, names, *, index="NDVI", mask=("default",), merge="first", use_offset=True,
                   group=True):
    """The cube, computed with NumPy from the files: (values (T, rows, cols), dates, x0, y0)."""
    items = read_catalog_items(Path(folder))
    keys = SENSOR_ASSETS[sensor][names]
    transforms = [item["properties"]["proj:transform"] for item, _ in items]
    shapes = [item["properties"]["proj:shape"] for item, _ in items]
    x0, y0 = min(t[2] for t in transforms), max(t[5] for t in transforms)
    width = int(max((t[2] - x0) / 30 + s[1] for t, s in zip(transforms, shapes)))
    height = int(max((y0 - t[5]) / 30 + s[0] for t, s in zip(transforms, shapes)))
    dates = pd.DatetimeIndex([pd.Timestamp(item["properties"]["datetime"]).tz_convert(None) for item, _ in items])
    group_of = dates.normalize() if group else dates  # solar day: 10:00 UTC at 15 degrees east is the same day
    planes, times = [], []
    for key in dict.fromkeys(group_of):
        members = [i for i in range(len(items)) if group_of[i] == key]
        stack = np.full((len(members), height, width), np.nan, np.float32)
        for slot, i in enumerate(members):
            item, where = items[i]
            bands = {}
            for role, position in ROLE.items():
                asset = item["assets"][keys[position]]
                with rasterio.open(where / asset["href"]) as src:
                    raw = src.read(1)
                raster = asset["raster:bands"][0]
                value = raw.astype(np.float64) * raster["scale"] + (raster["offset"] if use_offset else 0.0)
                bands[role] = np.where(raw == raster["nodata"], np.nan, value)
            values = FORMULAS[index](bands) if index in FORMULAS else (
                index(**{k: bands[k] for k in ("nir", "swir16")}) if callable(index) else bands[index])
            with rasterio.open(where / item["assets"][keys[-1]]["href"]) as src:
                flags = src.read(1)
            if mask is None:
                rejected = np.zeros(flags.shape, bool)
            elif sensor == "sentinel-2":
                rejected = np.isin(flags, SCL_DEFAULT if mask == ("default",) else mask) | (flags == 0)
            else:
                bits = QA_DEFAULT if mask == ("default",) else mask
                rejected = (flags & sum(1 << b for b in bits)) != 0
            values = np.where(rejected | ~np.isfinite(values), np.nan, values).astype(np.float32)
            t = transforms[i]
            row, col = int((y0 - t[5]) / 30), int((t[2] - x0) / 30)
            stack[slot, row:row + values.shape[0], col:col + values.shape[1]] = values
        if merge in ("first", "last"):
            ordered = stack if merge == "first" else stack[::-1]
            plane = ordered[0].copy()
            for layer in ordered[1:]:
                plane = np.where(np.isnan(plane), layer, plane)
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN pixels
                plane = getattr(np, f"nan{merge}")(stack, axis=0)
        planes.append(plane)
        times.append(dates[members[0]])
    return np.stack(planes), pd.DatetimeIndex(times), x0, y0


def assert_cube_equals(da, expected, folder=None):
    values, dates, x0, y0 = expected
    assert da.dtype == np.float32 and da.dims == ("time", "y", "x")
    assert (pd.DatetimeIndex(da.time.values) == dates).all()
    np.testing.assert_array_equal(da.x.values, x0 + 30 * (np.arange(values.shape[2]) + 0.5))
    np.testing.assert_array_equal(da.y.values, y0 - 30 * (np.arange(values.shape[1]) + 0.5))
    assert da.rio.crs == "EPSG:32633"
    assert da.rio.transform() == rasterio.transform.from_origin(x0, y0, 30, 30)
    np.testing.assert_array_equal(da.values, values)


# --------------------------------------------------------------------------------------
# catalogs


@pytest.fixture(scope="module")
def catalogs(tmp_path_factory):
    """Built on demand, once per module: {(sensor, asset_names): StacCatalog}."""
    built = {}

    def get(sensor="sentinel-2", names="common"):
        if (sensor, names) not in built:
            folder = tmp_path_factory.mktemp(f"{sensor}-{names}")
            built[sensor, names] = make_stac_catalog(folder, sensor=sensor, asset_names=names,
                                                     seed=len(built))
        return built[sensor, names]

    return get


@pytest.fixture(scope="module")
def s2(catalogs):
    return catalogs("sentinel-2", "common")


@pytest.fixture(scope="module")
def served(s2):
    """The Sentinel-2 catalog over HTTP on the loopback interface: (catalog URL, requested paths)."""
    with serve_folder(s2.path.parent) as (url, requests):
        yield f"{url}/catalog.json", requests


# --------------------------------------------------------------------------------------
# the cube equals NumPy


@pytest.mark.parametrize("sensor, names, index", [
    ("sentinel-2", "common", "NDVI"), ("sentinel-2", "band", "NBR"), ("landsat", "common", "EVI"),
    ("landsat", "band", "NDMI"),
])
def test_cube_equals_numpy_from_the_files(catalogs, sensor, names, index):
    catalog = catalogs(sensor, names)
    da = open_stac(catalog.path, index=index)
    expected = reference_cube(catalog.path.parent, sensor, names, index=index)
    assert_cube_equals(da, expected)
    assert da.attrs["stac_items"] == len(catalog.item_ids) and da.sizes["time"] == 40
    kind = "scl classes 0,1,3,8,9,10" if sensor == "sentinel-2" else "qa_pixel bits 0,1,2,3,4"
    assert da.attrs["stac_mask"] == kind
    assert 0.05 < float(np.isnan(da.values).mean()) < 0.5  # clouds masked, but not everything


def test_scale_and_offset_of_each_item_are_applied(s2):
    """The offset changes (0 -> -0.1) in the middle of the series: forgetting it changes the cube."""
    da = open_stac(s2.path)
    without = reference_cube(s2.path.parent, "sentinel-2", "common", use_offset=False)[0]
    after = pd.DatetimeIndex(da.time.values) >= pd.Timestamp("2022-01-25")
    assert after.any() and (~after).any()
    np.testing.assert_array_equal(da.values[~after], without[~after])  # offset 0 before the change
    assert not np.allclose(da.values[after], without[after], equal_nan=True)


@pytest.mark.parametrize("merge", ["last", "median", "max"])
def test_same_day_scenes_merged_as_asked(s2, merge):
    da = open_stac(s2.path, merge=merge)
    assert_cube_equals(da, reference_cube(s2.path.parent, "sentinel-2", "common", merge=merge))
    assert da.attrs["stac_merge"] == merge


def test_first_valid_pixel_takes_the_earlier_tile(s2):
    """Where both tiles see a pixel, the earlier item (tile A, 5 s before B) wins."""
    first, last = open_stac(s2.path).values, open_stac(s2.path, merge="last").values
    both = ~np.isnan(first) & ~np.isnan(last) & (first != last)
    assert both.any()  # the overlap differs between the tiles (noise of each acquisition)
    assert both[:, :, :12].sum() == 0 and both[:, :, 24:].sum() == 0  # only in the 12 shared columns


@pytest.mark.parametrize("mask, expected_mask", [
    ("scl:9", (9,)), (None, None), ("auto+snow", SCL_DEFAULT + (11,)), ("none", None),
])
def test_mask_overrides(s2, mask, expected_mask):
    da = open_stac(s2.path, mask=mask)
    assert_cube_equals(da, reference_cube(s2.path.parent, "sentinel-2", "common", mask=expected_mask))


def test_qa_pixel_bits_override(catalogs):
    catalog = catalogs("landsat", "common")
    da = open_stac(catalog.path, mask="qa_pixel:3")
    assert_cube_equals(da, reference_cube(catalog.path.parent, "landsat", "common", mask=(3,)))


def test_band_and_callable_indices(s2):
    assert_cube_equals(open_stac(s2.path, index="swir16"),
                       reference_cube(s2.path.parent, "sentinel-2", "common", index="swir16"))
    ratio = lambda nir, swir16: nir / swir16  # noqa: E731
    da = open_stac(s2.path, index=ratio)
    assert_cube_equals(da, reference_cube(s2.path.parent, "sentinel-2", "common", index=ratio))


def test_groupby_time_keeps_every_item(s2):
    da = open_stac(s2.path, groupby="time")
    assert da.sizes["time"] == len(s2.item_ids)
    assert_cube_equals(da, reference_cube(s2.path.parent, "sentinel-2", "common", group=False))


def test_bbox_selects_items_and_pixels(s2):
    from rasterio.warp import transform_bounds

    full = open_stac(s2.path)
    x0, y0 = float(full.x[0]) - 15, float(full.y[0]) + 15
    # the left ten columns and rows 5..15, shrunk by a quarter pixel so as not to touch neighbours
    west, south, east, north = transform_bounds("EPSG:32633", "EPSG:4326", x0 + 7.5, y0 - 16 * 30 + 7.5,
                                                x0 + 10 * 30 - 7.5, y0 - 5 * 30 - 7.5)
    da = open_stac(s2.path, bbox=(west, south, east, north))
    assert da.attrs["stac_items"] == 40  # tile B does not reach the left ten columns
    assert da.sizes["x"] <= 11 and da.sizes["y"] <= 12
    np.testing.assert_array_equal(da.values, full.sel(x=da.x, y=da.y).values)


def test_item_collection_file_and_pystac_items_give_the_same_cube(s2, tmp_path):
    """Relative asset hrefs of a FeatureCollection resolve against its own location."""
    base = open_stac(s2.path)
    features = []
    for record, where in read_catalog_items(s2.path.parent):
        for asset in record["assets"].values():
            asset["href"] = str((where / asset["href"]).relative_to(s2.path.parent))
        record["links"] = []
        features.append(record)
    collection = s2.path.parent / "items.json"
    collection.write_text(json.dumps({"type": "FeatureCollection", "features": features}))
    np.testing.assert_array_equal(open_stac(collection).values, base.values)
    items = list(pystac.Catalog.from_file(str(s2.path)).get_items(recursive=True))
    np.testing.assert_array_equal(open_stac(pystac.ItemCollection(items)).values, base.values)
    np.testing.assert_array_equal(open_stac(items[::-1]).values, base.values)  # order of the items is irrelevant


def test_memory_sets_the_chunks(s2):
    da = open_stac(s2.path, memory="600kB")
    assert len(da.chunks[0]) == 1 and len(da.chunks[1]) * len(da.chunks[2]) > 1
    assert max(da.chunks[1]) * max(da.chunks[2]) * 40 * 48 <= 600_000
    np.testing.assert_array_equal(da.values, open_stac(s2.path).values)


def test_nothing_is_read_before_compute(served, s2):
    url, requests = served
    before = len(requests)
    da = open_stac(url, index="NBR")
    opened = requests[before:]
    assert opened and all(path.endswith(".json") for path in opened)  # metadata only
    values = da.values
    assert any(path.endswith(".tif") for path in requests[before:])
    assert_cube_equals(da, reference_cube(s2.path.parent, "sentinel-2", "common", index="NBR"))
    assert values.dtype == np.float32


def test_describe_gives_the_masked_fraction(s2):
    described = describe_stac(s2.path)
    fraction = float(described["masked_fraction"].compute())
    flags, has_data = [], []
    for record, where in read_catalog_items(s2.path.parent):
        with rasterio.open(where / record["assets"]["scl"]["href"]) as src:
            scl = src.read(1)
        with rasterio.open(where / record["assets"]["red"]["href"]) as src:
            data = src.read(1) != 0
        flags.append(np.isin(scl, SCL_DEFAULT)[data])
        has_data.append(data.sum())
    assert fraction == pytest.approx(sum(f.sum() for f in flags) / sum(has_data), rel=1e-12)


def test_output_grid_from_crs_and_resolution(s2):
    coarse = open_stac(s2.path, crs="EPSG:32633", resolution=60)
    assert coarse.shape == (40, 12, 18) and coarse.rio.resolution() == (60, -60)
    web = open_stac(s2.path, crs="EPSG:3857", resolution=30)
    assert web.rio.crs == "EPSG:3857" and web.dtype == np.float32
    native = open_stac(s2.path)
    # the same scenes on another grid: about the same share of masked or missing pixels
    inside = ~np.isnan(web.values).all(axis=0)
    assert abs(np.isnan(web.values[:, inside]).mean() - np.isnan(native.values).mean()) < 0.05
    with pytest.raises(StacError, match="give the resolution"):
        open_stac(s2.path, crs="EPSG:4326")
    with pytest.raises(StacError, match="is not a CRS"):
        open_stac(s2.path, crs="EPSG:nope", resolution=1)


@pytest.mark.parametrize("options, message", [
    (dict(merge="mode"), "merge must be one of"), (dict(groupby="month"), "groupby must be one of"),
    (dict(index=3), "index must be"), (dict(index=lambda: 1), "must name the bands"),
    (dict(mask="qa_pixel"), "has no asset for 'qa_pixel'"),
])
def test_bad_options_are_refused(s2, options, message):
    with pytest.raises(StacError, match=message):
        open_stac(s2.path, **options)


@pytest.mark.parametrize("mask", ["cloudy", "scl:x", "auto:3", "qa_pixel:16", 3])
def test_bad_masks_are_refused(mask):
    with pytest.raises(StacError, match="mask"):
        parse_mask(mask)


# --------------------------------------------------------------------------------------
# the command line


def write_folder(folder: Path, da) -> Path:
    """The cube as a folder of single-date GeoTIFFs (the equivalent file input)."""
    folder.mkdir()
    values = da.values
    for t, when in enumerate(pd.DatetimeIndex(da.time.values)):
        with rasterio.open(folder / f"ndvi_{when:%Y%m%d}.tif", "w", driver="GTiff", width=da.sizes["x"],
                           height=da.sizes["y"], count=1, dtype="float32", crs="EPSG:32633",
                           transform=da.rio.transform(), nodata=np.nan) as dst:
            dst.write(values[t], 1)
    return folder


def read_bands(path) -> dict[str, np.ndarray]:
    with rasterio.open(path) as src:
        return {name: src.read(i + 1) for i, name in enumerate(src.descriptions)}


def test_monitor_from_url_equals_local_catalog_and_geotiff_folder(served, s2, tmp_path):
    url, _ = served
    outputs = {}
    for name, source in (("url", url), ("local", s2.path),
                         ("folder", write_folder(tmp_path / "scenes", open_stac(s2.path, mask="auto+snow")))):
        out = tmp_path / f"{name}.tif"
        extra = ["--index", "NDVI", "--mask", "scl+snow"] if name != "folder" else []
        result = tscube("monitor", source, *extra, *MONITOR, "-o", out)
        assert result.exit_code == 0, result.output
        outputs[name] = read_bands(out)
    for name in ("local", "folder"):
        for band, values in outputs["url"].items():
            np.testing.assert_array_equal(outputs[name][band], values, err_msg=f"{name}: {band}")
    breaks = outputs["url"]["break_index"] >= 0
    assert breaks[s2.changed].mean() > 0.95 and breaks[~s2.changed].mean() < 0.15  # the planted break is found


def test_monitor_from_stac_resumes_and_refuses_other_options(served, tmp_path):
    url, _ = served
    out = tmp_path / "breaks.zarr"
    assert tscube("monitor", url, *MONITOR, "-o", out).exit_code == 0
    again = tscube("monitor", url, *MONITOR, "-o", out)
    assert again.exit_code == 0 and "nothing to compute" in again.output
    other = tscube("monitor", url, "--index", "NBR", *MONITOR, "-o", out)
    assert other.exit_code == 1 and "stac_index" in other.output


def test_stl_and_info_read_stac(served, tmp_path):
    url, _ = served
    info = tscube("info", url, "--mask", "scl+snow")
    assert info.exit_code == 0, info.output
    assert "items:    74 STAC items, NDVI masked by scl classes 0,1,3,8,9,10,11" in info.output
    assert "dates:    40, 2021-03-01 to 2022-11-15 (median step 16 days)" in info.output
    assert "shape:    time 40 x y 24 x x 36" in info.output and "crs:      EPSG:32633" in info.output
    assert "masked:" in info.output
    out = tmp_path / "stl.tif"
    bbox = "15.0005,36.1385,15.0025,36.1440"  # a few columns of tile A
    result = tscube("stl", url, "--period", "12", "--index", "NDMI", "--bbox", bbox, "-o", out, "--engine", ENGINE,
                    "--no-progress")
    assert result.exit_code == 0, result.output
    assert "40 dates" in result.output
    with rasterio.open(out) as src:
        assert "trend_slope" in src.descriptions and src.width < 10 and src.crs == "EPSG:32633"
    pixel = tscube("plot-pixel", url, "--x", 14, "--y", 12, *MONITOR[:-3], "-o", tmp_path / "pixel.png")
    assert pixel.exit_code == 0, pixel.output
    assert "pixel row 12, col 14: status OK, break at 2022." in pixel.output  # inside the planted change


@pytest.fixture(scope="module")
def broken(tmp_path_factory, s2):
    """Copies of the catalog with one item edited: an asset removed, another CRS, an unreachable asset."""
    root = tmp_path_factory.mktemp("broken")
    with serve_folder(root) as (url, _):
        made = {}
        for case in ("no-asset", "other-crs", "unreachable"):
            folder = root / case
            shutil.copytree(s2.path.parent, folder)
            record_path = next(p for p in folder.rglob("*.json") if json.loads(p.read_text()).get("type") == "Feature")
            record = json.loads(record_path.read_text())
            if case == "no-asset":
                del record["assets"]["swir22"]
            elif case == "other-crs":
                record["properties"]["proj:code"] = "EPSG:32634"
            else:
                record["assets"]["red"]["href"] = f"{url}/nowhere/red.tif"
            record_path.write_text(json.dumps(record))
            made[case] = folder / "catalog.json"
        yield made


BAD_STAC = {
    "item without the index's assets": (["--index", "NBR"], "no-asset", "has no asset for 'swir22'"),
    "items in different CRSs": ([], "other-crs", "items are in different CRSs"),
    "no item in the bbox": (["--bbox", "0,0,1,1"], "good", "no item intersects bbox"),
    "unreachable asset": ([], "unreachable", "nowhere/red.tif"),
    "unknown index": (["--index", "NDXI"], "good", "unknown index 'NDXI'"),
    "bbox not four numbers": (["--bbox", "1,2,3"], "good", "--bbox '1,2,3' is not WEST,SOUTH,EAST,NORTH"),
    "STAC options on a file input": (["--index", "NBR"], "file", "for STAC inputs only"),
    "catalog URL not found": ([], "absent-url", "cannot read http://127.0.0.1"),
    "not a STAC document": ([], "not-stac", "is not a STAC catalog"),
}


@pytest.mark.parametrize("case", list(BAD_STAC))
def test_bad_stac_input_one_error_line_and_no_output(s2, broken, served, tmp_path, case):
    options, which, message = BAD_STAC[case]
    (tmp_path / "other.json").write_text('{"type": "Something"}')
    (tmp_path / "scenes").mkdir()
    sources = {"good": s2.path, "file": tmp_path / "scenes", "absent-url": served[0].replace("catalog.json", "absent.json"),
               "not-stac": tmp_path / "other.json"}
    source = sources.get(which) or broken[which]
    out = tmp_path / "out.tif"
    result = tscube("monitor", source, *options, *MONITOR, "-o", out)
    assert result.exit_code == 1, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and message in errors[0], result.output
    assert not out.exists()


def test_killed_stac_run_resumes_to_the_same_output(served, tmp_path):
    """Resumable as for files: killed after a chunk, run again, the output of an uninterrupted run."""
    import os

    from test_runs import _run_and_kill  # the kill-after-a-chunk helper of the runs tests

    from tscube.runs import RECORD_NAME, chunk_store_path

    args = ["monitor", served[0], *MONITOR, "--memory", "600kB"]
    whole, out = tmp_path / "whole.tif", tmp_path / "resumed.tif"
    assert tscube(*args, "-o", whole).exit_code == 0
    finished = _run_and_kill([*args, "-o", out], chunk_store_path(out) / RECORD_NAME,
                             dict(os.environ, TSCUBE_TEST_CHUNK_DELAY="0.4"))
    assert finished >= 1 and not out.exists()
    result = tscube(*args, "-o", out)
    assert result.exit_code == 0 and "resuming" in result.output, result.output
    assert out.read_bytes() == whole.read_bytes()


def test_breaks_read_stac(served, s2, tmp_path):
    """`tscube breaks` (BFAST Lite) on a catalog URL equals bfast_lite on the cube."""
    from tscube import bfast_lite

    url, _ = served
    out = tmp_path / "lite.zarr"
    result = tscube("breaks", url, "--index", "NDVI", "--freq", 23, "--h", 0.25, "--order", 1, "-o", out,
                    "--no-progress")
    assert result.exit_code == 0, result.output
    da = open_stac(s2.path)
    expected = bfast_lite(da.values, da.time.values, freq=23, h=0.25, order=1)
    back = xr.open_zarr(out)
    np.testing.assert_array_equal(back["n_breaks"].values, expected.n_breaks)
    np.testing.assert_array_equal(back["status"].values, expected.status)
