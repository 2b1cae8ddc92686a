"""A small static STAC catalog of synthetic Sentinel-2 L2A or Landsat C2 L2 scenes.

What a user gets from Earth Search or the Planetary Computer, on disk and without a
network: items with Cloud-Optimized GeoTIFF assets (one file per band), ``proj:*``
metadata, ``raster:bands`` (nodata, data type, scale/offset), ``eo:bands`` common names,
two overlapping tiles acquired on the same day, planted clouds, shadows, cirrus, snow
and nodata in the scene classification (``SCL``) or the ``QA_PIXEL`` bits, a change of
the processing offset in the middle of the series (Sentinel-2's baseline 04.00), and a
planted break (vegetation loss) in one block of pixels.

Needs ``rasterio`` and ``pystac`` (``pip install tscube[geo,stac]``).
"""

from __future__ import annotations

import datetime as dt
import re
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: Asset names per sensor: (common-name style of Earth Search / USGS, band style of the
#: Planetary Computer / the product files), for blue, red, nir, swir16, swir22, mask.
SENSOR_ASSETS = {
    "sentinel-2": {"common": ("blue", "red", "nir", "swir16", "swir22", "scl"),
                   "band": ("B02", "B04", "B08", "B11", "B12", "SCL")},
    "landsat": {"common": ("blue", "red", "nir08", "swir16", "swir22", "qa_pixel"),
                "band": ("SR_B2", "SR_B4", "SR_B5", "SR_B6", "SR_B7", "QA_PIXEL")},
}
_COMMON_NAMES = ("blue", "red", "nir", "swir16", "swir22")
#: Digital number = (reflectance - offset) / scale, per sensor; Sentinel-2's offset
#: changes from 0 to -0.1 on 2022-01-25 (processing baseline 04.00).
_SCALE = {"sentinel-2": 1e-4, "landsat": 2.75e-5}
_OFFSET = {"sentinel-2": (0.0, -0.1), "landsat": (-0.2, -0.2)}
BASELINE_CHANGE = dt.datetime(2022, 1, 25, tzinfo=dt.timezone.utc)
#: QA_PIXEL bits set for each planted scene class (Landsat): fill, dilated cloud,
#: cirrus, cloud, cloud shadow, snow, clear.
_QA_OF_CLASS = {0: 1 << 0, 8: 1 << 1, 9: (1 << 3) | (1 << 1), 3: 1 << 4, 10: 1 << 2, 11: 1 << 5}
_QA_CLEAR = 1 << 6

CRS = "EPSG:32633"
PIXEL = 30.0
ORIGIN = (499_980.0, 4_000_020.0)  # multiples of the pixel size, as real tiles


@dataclass
class StacCatalog:
    """A synthetic catalog on disk: its ``catalog.json``, the items' ids and the planted break."""

    path: Path
    item_ids: list[str]
    #: (rows, cols) of the union of the tiles on the common grid
    shape: tuple[int, int]
    #: True where the planted break happens (on the union grid)
    changed: np.ndarray
    break_date: dt.datetime


def _surface(doy: np.ndarray, rng, shape, broken: np.ndarray) -> dict[str, np.ndarray]:
    """Reflectances of the five bands on a day of year: a seasonal vegetation signal plus noise."""
    season = np.sin(2 * np.pi * doy / 365.25)
    noise = lambda s: rng.normal(0, s, size=shape)  # noqa: E731
    bands = {"blue": 0.04 + noise(0.004), "red": 0.06 - 0.02 * season + noise(0.006),
             "nir": 0.30 + 0.08 * season + noise(0.01), "swir16": 0.20 - 0.03 * season + noise(0.008),
             "swir22": 0.10 - 0.02 * season + noise(0.006)}
    bands["nir"][broken] = 0.15 + noise(0.01)[broken]
    bands["red"][broken] = 0.12 + noise(0.006)[broken]
    bands["swir22"][broken] = 0.25 + noise(0.006)[broken]
    return bands


def _plant_conditions(rng, shape) -> np.ndarray:
    """Scene classes (Sentinel-2 SCL codes) of one item: clear (4), clouds, shadow, cirrus, snow, nodata."""
    scl = np.full(shape, 4, np.uint8)
    rows, cols = np.indices(shape)
    if rng.random() < 0.45:  # a cloud with a medium-probability rim and its shadow
        r0, c0, radius = rng.integers(0, shape[0]), rng.integers(0, shape[1]), rng.integers(3, 7)
        distance = np.hypot(rows - r0, cols - c0)
        shadow = np.hypot(rows - r0 - 3, cols - c0 + 4) < radius
        scl[shadow] = 3
        scl[distance < radius + 1.5] = 8
        scl[distance < radius] = 9
    scl[(rng.random(shape) < 0.02) & (scl == 4)] = 10
    scl[(rng.random(shape) < 0.01) & (scl == 4)] = 11
    scl[(rng.random(shape) < 0.005) & (scl == 4)] = 1
    if rng.random() < 0.15:  # a nodata strip along the tile's edge
        scl[:, : rng.integers(1, 5)] = 0
    return scl


def _observed(bands: dict[str, np.ndarray], scl: np.ndarray) -> dict[str, np.ndarray]:
    """What the sensor sees under the planted conditions (bright clouds, dark shadows, ...)."""
    out = {name: band.copy() for name, band in bands.items()}
    for name in out:
        out[name][np.isin(scl, (8, 9))] = {"blue": 0.45, "red": 0.48, "nir": 0.52}.get(name, 0.4)
        out[name][scl == 3] *= 0.3
        out[name][scl == 10] += 0.05
        out[name][scl == 11] = {"blue": 0.85, "red": 0.8, "nir": 0.75}.get(name, 0.1)
    return out


def _write_cog(path: Path, array: np.ndarray, transform, nodata) -> None:
    import rasterio

    with rasterio.open(path, "w", driver="COG", width=array.shape[1], height=array.shape[0], count=1,
                       dtype=array.dtype, crs=CRS, transform=transform, nodata=nodata, compress="deflate") as dst:
        dst.write(array, 1)


def _footprint(transform, shape) -> tuple[dict, list[float]]:
    """The tile's footprint in lon/lat (GeoJSON polygon) and its bbox."""
    from rasterio.warp import transform_geom

    (x0, y0), (x1, y1) = transform * (0, 0), transform * (shape[1], shape[0])
    polygon = {"type": "Polygon", "coordinates": [[(x0, y0), (x1, y0), (x1, y1), (x0, y1), (x0, y0)]]}
    geometry = transform_geom(CRS, "EPSG:4326", polygon)
    lons, lats = zip(*geometry["coordinates"][0])
    return geometry, [min(lons), min(lats), max(lons), max(lats)]


def make_stac_catalog(folder, *, sensor: str = "sentinel-2", asset_names: str = "common", n_dates: int = 40,
                      tile_shape: tuple[int, int] = (24, 24), overlap: int = 12, step_days: int = 16,
                      first_date: str = "2021-03-01", break_date: str = "2022-06-01", seed: int = 0) -> StacCatalog:
    """Write a static, self-contained STAC catalog of synthetic scenes into ``folder``.

    Two tiles of ``tile_shape`` pixels (30 m, EPSG:32633), side by side and sharing
    ``overlap`` columns, are acquired every ``step_days`` days from ``first_date`` (tile B
    five seconds after tile A, and missing on every seventh date). Each item has one
    uint16 COG per band (``sensor`` "sentinel-2" or "landsat"; ``asset_names`` "common"
    for ``red``/``nir``/``scl`` or "band" for ``B04``/``B08``/``SCL`` style keys) and its
    mask band (``SCL`` or ``QA_PIXEL``). From ``break_date`` on, a block of pixels loses
    its vegetation (NIR down, red and SWIR up).

    Returns
    -------
    StacCatalog
        ``path`` of ``catalog.json``, the item ids, the union grid's shape and the
        planted change.
    """
    import pystac
    from pystac.extensions.eo import Band, EOExtension
    from pystac.extensions.projection import ProjectionExtension
    from pystac.extensions.raster import DataType, RasterBand, RasterExtension
    from rasterio.transform import from_origin

    if sensor not in SENSOR_ASSETS or asset_names not in SENSOR_ASSETS[sensor]:
        raise ValueError(f"sensor must be one of {list(SENSOR_ASSETS)} and asset_names 'common' or 'band'")
    folder = Path(folder)
    rng = np.random.default_rng(seed)
    keys = SENSOR_ASSETS[sensor][asset_names]
    mask_key = keys[-1]
    rows, cols = tile_shape
    width = 2 * cols - overlap
    changed = np.zeros((rows, width), bool)
    changed[rows // 4: 3 * rows // 4, cols // 3: cols + overlap // 2] = True
    tiles = {"A": 0, "B": cols - overlap}
    first = dt.datetime.fromisoformat(first_date).replace(hour=10, tzinfo=dt.timezone.utc)
    broken_from = dt.datetime.fromisoformat(break_date).replace(tzinfo=dt.timezone.utc)

    collection = pystac.Collection(
        id=f"synthetic-{sensor}", description=f"Synthetic {sensor} scenes written by tscube.datasets",
        extent=pystac.Extent(pystac.SpatialExtent([[-180, -90, 180, 90]]), pystac.TemporalExtent([[first, None]])))
    items = []
    for t in range(n_dates):
        day = first + dt.timedelta(days=step_days * t)
        doy = np.full((rows, width), day.timetuple().tm_yday, float)
        surface = _surface(doy, rng, (rows, width), changed & (day >= broken_from))
        offset = _OFFSET[sensor][int(day >= BASELINE_CHANGE)]
        for tile, col0 in tiles.items():
            if tile == "B" and t % 7 == 3:
                continue
            when = day + dt.timedelta(seconds=5 if tile == "B" else 0)
            item_id = f"{sensor}_{tile}_{when:%Y%m%dT%H%M%S}"
            transform = from_origin(ORIGIN[0] + col0 * PIXEL, ORIGIN[1], PIXEL, PIXEL)
            geometry, bbox = _footprint(transform, tile_shape)
            item = pystac.Item(item_id, geometry=geometry, bbox=bbox, datetime=when,
                               properties={"platform": sensor}, collection=collection.id)
            projection = ProjectionExtension.ext(item, add_if_missing=True)
            projection.code, projection.shape = CRS, [rows, cols]
            projection.transform = list(transform)[:6]
            item_dir = folder / collection.id / item_id
            item_dir.mkdir(parents=True, exist_ok=True)
            scl = _plant_conditions(rng, tile_shape)
            seen = _observed({k: v[:, col0:col0 + cols] for k, v in surface.items()}, scl)
            for common, key in zip(_COMMON_NAMES, keys):
                digital = np.rint((seen[common] - offset) / _SCALE[sensor]).clip(1, 65534).astype(np.uint16)
                digital[scl == 0] = 0
                digital[scl == 1] = 65534  # saturated
                _write_cog(item_dir / f"{key}.tif", digital, transform, 0)
                asset = pystac.Asset(str(item_dir / f"{key}.tif"), media_type=pystac.MediaType.COG, roles=["data"])
                item.add_asset(key, asset)
                RasterExtension.ext(asset, add_if_missing=True).bands = [
                    RasterBand.create(nodata=0, data_type=DataType.UINT16, scale=_SCALE[sensor], offset=offset)]
                EOExtension.ext(asset, add_if_missing=True).bands = [Band.create(name=key, common_name=common)]
            if sensor == "sentinel-2":
                mask, nodata, dtype = scl, 0, DataType.UINT8
            else:
                mask = np.full(tile_shape, _QA_CLEAR, np.uint16)
                for code, bits in _QA_OF_CLASS.items():
                    mask[scl == code] = bits
                nodata, dtype = 1, DataType.UINT16
            _write_cog(item_dir / f"{mask_key}.tif", mask, transform, nodata)
            asset = pystac.Asset(str(item_dir / f"{mask_key}.tif"), media_type=pystac.MediaType.COG, roles=["data"])
            item.add_asset(mask_key, asset)
            RasterExtension.ext(asset, add_if_missing=True).bands = [RasterBand.create(nodata=nodata, data_type=dtype)]
            items.append(item)
    collection.add_items(items)
    collection.update_extent_from_items()
    catalog = pystac.Catalog(id="tscube-synthetic", description="Synthetic scenes for tscube's STAC reader")
    catalog.add_child(collection)
    catalog.normalize_hrefs(str(folder))
    catalog.make_all_asset_hrefs_relative()
    catalog.save(pystac.CatalogType.SELF_CONTAINED)
    return StacCatalog(folder / "catalog.json", [item.id for item in items], (rows, width), changed,
                       broken_from.replace(tzinfo=None))


@contextmanager
def serve_folder(folder, stall=None):
    """Serve ``folder`` over HTTP on the loopback interface while the context is open.

    Yields ``(base_url, requests)``: the URL of the folder (``http://127.0.0.1:PORT``)
    and the list of the paths requested so far. Answers byte-range requests, as object
    stores do, so that GDAL reads COGs by their tiles. For tests and benchmarks: the
    same catalog local and "remote", without a network. ``stall``: a function of a
    request's path; where it is true the server accepts the request and never answers
    (a frozen server), until the context closes.
    """
    import threading
    from functools import partial
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    requests: list[str] = []
    closing = threading.Event()

    class Handler(SimpleHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def do_GET(self):  # noqa: N802 - http.server's name
            requests.append(self.path)
            if stall is not None and stall(self.path):
                closing.wait()
                return None
            path = Path(self.translate_path(self.path))
            match = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
            if match is None or not path.is_file():
                return super().do_GET()
            size = path.stat().st_size
            begin = int(match[1])
            end = min(int(match[2]) if match[2] else size - 1, size - 1)
            if begin >= size:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.end_headers()
                return None
            with open(path, "rb") as file:
                file.seek(begin)
                data = file.read(end - begin + 1)
            self.send_response(206)
            self.send_header("Content-Type", self.guess_type(str(path)))
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("Content-Range", f"bytes {begin}-{end}/{size}")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, name="tscube-serve-folder", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", requests
    finally:
        closing.set()
        server.shutdown()
        server.server_close()
        thread.join()
