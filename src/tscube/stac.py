"""Cloud-masked spectral-index cubes from STAC items (Sentinel-2 L2A, Landsat C2 L2).

:func:`open_stac` is the glue users otherwise write by hand before every BFAST run: it
reads the items (a ``pystac`` item collection, or a static catalog, collection or
item-collection JSON on disk or over http(s)), loads the bands an index needs on one
grid with ``odc-stac`` (lazily, with dask), applies each item's ``raster:bands``
scale and offset, masks clouds and shadows with Sentinel-2's scene classification
(``SCL``) or Landsat's ``QA_PIXEL`` bits, computes the index and merges the scenes of
one day (overlapping tiles, several orbits). The result is a ``(time, y, x)`` float32
cube with NaN where masked or missing, ready for :func:`tscube.bfast_monitor`,
:func:`tscube.stl` and the ``tscube`` commands.

STAC parsing is ``pystac``'s, grids, reprojection and reading are ``odc-stac``/``odc-geo``
and rasterio's: this module only decides which assets to load and combines them. Needs
the ``stac`` extra: ``pip install tscube[stac]``.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import re
import warnings
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["INDICES", "BAND_ASSETS", "MASK_ASSETS", "MERGES", "QA_PIXEL_MASKED_BITS", "SCL_MASKED_CLASSES",
           "StacError", "describe_stac", "is_stac_source", "naming_failed_reads", "open_stac", "read_items"]


class StacError(ValueError):
    """STAC items cannot give the cube asked for (missing assets, CRSs, no item in the bbox, ...)."""


#: Asset names (or ``eo:bands`` common names) tried for each band an index needs, in
#: this order: the common names of Earth Search and USGS, then the band names of the
#: Planetary Computer's Sentinel-2 (``B04``) and of Landsat Collection 2 files (``SR_B4``).
BAND_ASSETS = {
    "blue": ("blue", "B02", "SR_B2"),
    "red": ("red", "B04", "SR_B4"),
    "nir": ("nir", "B08", "nir08", "B8A", "SR_B5"),
    "swir16": ("swir16", "B11", "SR_B6"),
    "swir22": ("swir22", "B12", "SR_B7"),
}

#: Spectral indices: the bands they need and their formula (on reflectances, float64).
INDICES: dict[str, tuple[tuple[str, ...], Callable]] = {
    "NDVI": (("nir", "red"), lambda nir, red: (nir - red) / (nir + red)),
    "NBR": (("nir", "swir22"), lambda nir, swir22: (nir - swir22) / (nir + swir22)),
    "NDMI": (("nir", "swir16"), lambda nir, swir16: (nir - swir16) / (nir + swir16)),
    "EVI": (("nir", "red", "blue"), lambda nir, red, blue: 2.5 * (nir - red) / (nir + 6 * red - 7.5 * blue + 1)),
}

#: Mask assets by kind: Sentinel-2 L2A scene classification, Landsat C2 pixel quality.
MASK_ASSETS = {"scl": ("scl", "SCL"), "qa_pixel": ("qa_pixel", "QA_PIXEL")}
#: SCL classes masked by default: 0 no data, 1 saturated or defective, 3 cloud shadow,
#: 8 cloud medium probability, 9 cloud high probability, 10 thin cirrus (``+snow``: 11).
SCL_MASKED_CLASSES = (0, 1, 3, 8, 9, 10)
SCL_SNOW = 11
#: QA_PIXEL bits masked by default: 0 fill, 1 dilated cloud, 2 cirrus, 3 cloud,
#: 4 cloud shadow (``+snow``: bit 5).
QA_PIXEL_MASKED_BITS = (0, 1, 2, 3, 4)
QA_PIXEL_SNOW_BIT = 5

#: How the scenes of one group (day) are combined: ``first`` valid pixel in the order
#: of acquisition time then item id (``last``: the reverse), or a NaN-skipping reduction.
MERGES = ("first", "last", "median", "mean", "min", "max")
GROUPBYS = ("solar_day", "time")


# --------------------------------------------------------------------------------------
# items


def is_stac_source(source) -> bool:
    """True for what :func:`open_stac` reads and :func:`tscube.io.open_cube` does not: an
    http(s) URL, a ``.json`` path, or ``pystac`` objects."""
    if isinstance(source, (str, Path)):
        text = str(source)
        return bool(re.match(r"https?://", text)) or text.lower().endswith(".json")
    return type(source).__module__.split(".")[0] in ("pystac", "pystac_client") or (
        isinstance(source, (list, tuple)) and bool(source) and type(source[0]).__module__.startswith("pystac"))


def _is_web(href: str) -> bool:
    return bool(re.match(r"https?://", str(href)))


def _stac_io(web: bool, timeout: float | None = None):
    """pystac's reader of STAC documents, with ``timeout`` seconds (default
    ``config.HTTP_TIMEOUT``) to connect and for every read of an http(s) document; for the
    documents of a catalog from the web (``web``), local files are refused unless
    ``config.STAC_LOCAL_HREFS_FROM_WEB``."""
    from urllib.request import Request, urlopen

    import pystac
    from pystac.stac_io import DefaultStacIO

    from . import config

    seconds = float(config.HTTP_TIMEOUT if timeout is None else timeout)

    class TimedStacIO(DefaultStacIO):
        def read_text_from_href(self, href: str) -> str:
            if _is_web(href):
                request = Request(href, headers={"User-Agent": f"pystac/{pystac.__version__}", **self.headers})
                with urlopen(request, timeout=seconds) as response:  # noqa: S310 - http(s) only
                    return response.read().decode("utf-8")
            if web:
                _refuse_local(href, "document")
            return super().read_text_from_href(href)

    return TimedStacIO()


def _refuse_local(href: str, what: str) -> None:
    from . import config

    if not config.STAC_LOCAL_HREFS_FROM_WEB:
        raise StacError(f"the STAC catalog was read over http(s) but names the local {what} {href}: a catalog from "
                        "the web does not read local files (set tscube.config.STAC_LOCAL_HREFS_FROM_WEB = True to "
                        "allow it for a catalog you trust)")


def read_json(href: str, timeout: float | None = None) -> dict:
    try:
        return _stac_io(_is_web(href), timeout).read_json(href)
    except FileNotFoundError:
        raise FileNotFoundError(f"input {href!r} does not exist") from None
    except json.JSONDecodeError as exc:
        raise StacError(f"{href} is not JSON ({exc})") from None
    except StacError:
        raise
    except Exception as exc:  # noqa: BLE001 - pystac wraps urllib's errors in a bare Exception
        cause = exc.__cause__ or exc
        raise StacError(f"cannot read {href} ({getattr(cause, 'reason', None) or cause})") from None


def _read_document(href: str, timeout: float | None = None) -> list:
    """The items of the STAC JSON at ``href`` (a path or an http(s) URL)."""
    import pystac

    if not _is_web(href):
        href = str(Path(href).resolve())
    data = read_json(href, timeout)
    if data.get("type") == "FeatureCollection":
        items = list(pystac.ItemCollection.from_dict(data))
        for item in items:
            if item.get_self_href() is None:
                item.set_self_href(href)  # relative asset hrefs resolve against the file
        return items
    try:
        return _items_of(pystac.read_dict(data, href=href, stac_io=_stac_io(_is_web(href), timeout)))
    except StacError:
        raise
    except (pystac.STACTypeError, KeyError, TypeError, ValueError) as exc:
        raise StacError(f"{href} is not a STAC catalog, collection, item collection or item ({exc})") from None


def _items_of(source) -> list:
    """The items of a pystac object: an item, a catalog or collection (walked
    recursively), a ``pystac_client`` search, or an iterable of items."""
    import pystac

    if isinstance(source, pystac.Item):
        return [source]
    if isinstance(source, pystac.Catalog):  # collections are catalogs too
        return list(source.get_items(recursive=True))
    if hasattr(source, "items") and callable(source.items):  # pystac_client.ItemSearch
        return list(source.items())
    return list(source)


def read_items(source, timeout: float | None = None) -> list:
    """The ``pystac.Item`` objects of ``source``, with absolute asset hrefs.

    ``source``: a ``pystac.ItemCollection``, a list of items, a catalog or collection
    object, or the path or http(s) URL of a static catalog, collection, item collection
    (GeoJSON ``FeatureCollection``) or item JSON. Catalogs are walked recursively;
    relative hrefs resolve against the document they are in, as STAC says. Documents read
    over http(s) get ``timeout`` seconds (default ``config.HTTP_TIMEOUT``) to connect and
    for every read; their local hrefs (``file://`` or paths) are refused.
    """
    import pystac

    is_document = isinstance(source, (str, Path))
    items = _read_document(str(source), timeout) if is_document else _items_of(source)
    wrong = [type(i).__name__ for i in items if not isinstance(i, pystac.Item)]
    if wrong:
        raise StacError(f"expected STAC items, got {wrong[0]}")
    if not items:
        raise StacError(f"{source if is_document else 'the source'} holds no STAC item")
    items = [item.clone() for item in items]
    for item in items:
        item.make_asset_hrefs_absolute()
    if is_document and _is_web(str(source)):
        for item in items:
            for asset in item.assets.values():
                if not re.match(r"[a-z][a-z0-9+.-]*://", asset.href) or asset.href.startswith("file://"):
                    _refuse_local(asset.href, f"asset of item {item.id}")
    return items


def _items_sha256(items) -> str:
    """Hash of the items' metadata: what a resumed run must find unchanged."""
    digest = hashlib.sha256()
    for item in items:
        record = item.to_dict(include_self_link=False, transform_hrefs=False)
        digest.update(json.dumps(record, sort_keys=True, default=str).encode())
    return digest.hexdigest()


# --------------------------------------------------------------------------------------
# what to load


@dataclass(frozen=True)
class Mask:
    """A parsed ``mask=``: the kind of mask asset (``scl``/``qa_pixel``, or None) and what it masks."""

    kind: str | None
    classes: tuple[int, ...] = ()
    bits: tuple[int, ...] = ()

    def describe(self) -> str:
        if self.kind is None:
            return "none"
        return f"{self.kind} {'classes' if self.kind == 'scl' else 'bits'} " + ",".join(
            map(str, self.classes or self.bits))


def parse_mask(mask) -> tuple[str | None, tuple[int, ...] | None, bool]:
    """``mask=`` as (kind, values or None for the defaults, with snow).

    ``"auto"`` (SCL or QA_PIXEL, whichever the items have), ``"scl"``, ``"qa_pixel"``,
    ``None``/``"none"``; a ``+snow`` suffix also masks snow; ``"scl:3,8,9"`` or
    ``"qa_pixel:1,3,4"`` names the SCL classes or QA_PIXEL bits to mask.
    """
    if mask is None or (isinstance(mask, str) and mask.strip().lower() == "none"):
        return None, None, False
    if not isinstance(mask, str):
        raise StacError(f"mask must be 'auto', 'scl', 'qa_pixel', None or e.g. 'scl:3,8,9', got {mask!r}")
    text = mask.strip().lower()
    snow = text.endswith("+snow")
    text = text.removesuffix("+snow")
    kind, _, values = text.partition(":")
    if kind not in ("auto", *MASK_ASSETS) or (values and kind == "auto"):
        raise StacError(f"mask {mask!r}: use auto, scl, qa_pixel or none (optionally +snow), or scl:CLASSES / "
                        "qa_pixel:BITS (comma-separated integers)")
    if not values:
        return kind, None, snow
    try:
        numbers = tuple(int(v) for v in values.split(","))
    except ValueError:
        raise StacError(f"mask {mask!r}: {values!r} is not a comma-separated list of integers") from None
    limit = 16 if kind == "qa_pixel" else 256
    if any(not 0 <= n < limit for n in numbers):
        raise StacError(f"mask {mask!r}: {'bits' if kind == 'qa_pixel' else 'classes'} must be in 0..{limit - 1}")
    return kind, numbers, snow


def _index_recipe(index, parsed) -> tuple[str, tuple[str, ...], Callable]:
    """(name, bands, formula) of ``index``: a named index, a band name or a callable."""
    if callable(index):
        bands = tuple(inspect.signature(index).parameters)
        if not bands:
            raise StacError("an index function must name the bands it takes as its parameters, e.g. "
                            "lambda nir, swir16: ...")
        name = getattr(index, "__name__", "<lambda>")
        return ("index" if name == "<lambda>" else name), bands, index
    if not isinstance(index, str):
        raise StacError(f"index must be a name (NDVI, NBR, NDMI, EVI), a band or a callable, got {index!r}")
    if index.upper() in INDICES:
        return index.upper(), *INDICES[index.upper()]
    if index in BAND_ASSETS or any(index in p for p in parsed):
        return index, (index,), lambda band: band  # the band's reflectance
    assets = sorted({str(k[0]) for p in parsed[:1] for k in p.bands})
    raise StacError(f"unknown index {index!r}: use {', '.join(INDICES)}, a band ({', '.join(assets)}) or a function")


def _asset_key(parsed, candidates: Sequence[str]) -> str | None:
    """The asset key of the first of ``candidates`` (asset keys or common names) a parsed item has."""
    for candidate in candidates:
        if candidate in parsed:
            return str(parsed.collection.band_key(candidate)[0])
    return None


def _resolve(parsed, name: str, candidates: Sequence[str]) -> str:
    """The one asset key every item uses for band ``name`` (found under one of ``candidates``)."""
    keys = [_asset_key(p, candidates) for p in parsed]
    for p, key in zip(parsed, keys):
        if key is None:
            have = ", ".join(sorted(str(k[0]) for k in p.bands))
            raise StacError(f"item {p.id} has no asset for {name!r} (looked for {', '.join(candidates)}; "
                            f"it has {have})")
    if len(set(keys)) > 1:
        other = next(i for i, k in enumerate(keys) if k != keys[0])
        raise StacError(f"items use different assets for {name!r}: {keys[0]} ({parsed[0].id}) and {keys[other]} "
                        f"({parsed[other].id}); open them separately")
    return keys[0]


def _resolve_mask(parsed, mask) -> tuple[Mask, str | None]:
    kind, values, snow = parse_mask(mask)
    if kind is None:
        return Mask(None), None
    if kind == "auto":
        found = [k for k, names in MASK_ASSETS.items() if all(_asset_key(p, names) for p in parsed)]
        if not found:
            raise StacError("mask='auto' found no SCL or QA_PIXEL asset in every item; name the mask "
                            "(--mask scl / qa_pixel) or pass --mask none to skip masking")
        kind = found[0]
    key = _resolve(parsed, kind, MASK_ASSETS[kind])
    if kind == "scl":
        classes = values if values is not None else SCL_MASKED_CLASSES + ((SCL_SNOW,) if snow else ())
        return Mask("scl", classes=tuple(classes)), key
    bits = values if values is not None else QA_PIXEL_MASKED_BITS + ((QA_PIXEL_SNOW_BIT,) if snow else ())
    return Mask("qa_pixel", bits=tuple(bits)), key


def _scale_offset(items, key: str) -> tuple[np.ndarray, np.ndarray]:
    """Per item, the ``raster:bands`` scale and offset of asset ``key`` (1 and 0 where not declared)."""
    from pystac.extensions.raster import RasterExtension

    scales, offsets = np.ones(len(items)), np.zeros(len(items))
    for i, item in enumerate(items):
        asset = item.assets[key]
        if not RasterExtension.has_extension(item) or not RasterExtension.ext(asset).bands:
            continue
        band = RasterExtension.ext(asset).bands[0]
        scales[i] = 1.0 if band.scale is None else band.scale
        offsets[i] = 0.0 if band.offset is None else band.offset
    return scales, offsets


def _check_grid(parsed, keys, crs, resolution, bbox):
    """The output GeoBox (odc-stac's rules), after the checks that give clear errors."""
    import odc.stac

    native = {}
    for p in parsed:
        native.setdefault(str(p.crs(keys)), p.id)
    if crs is None and len(native) > 1:
        (a, first), (b, second) = list(native.items())[:2]
        raise StacError(f"items are in different CRSs ({a} in {first}, {b} in {second}); choose the output "
                        "grid with crs= and resolution= (--crs, --resolution)")
    if crs is not None and resolution is None and (len(native) != 1 or next(iter(native)) != _crs_name(crs)):
        raise StacError(f"crs {crs!r} differs from the items' CRS: give the resolution in its units "
                        "(resolution=, --resolution)")
    try:
        geobox = odc.stac.output_geobox(parsed, bands=keys, crs=crs, resolution=resolution, bbox=bbox)
    except ValueError as exc:
        raise StacError(f"cannot build the output grid ({exc})") from None
    if geobox is None:
        raise StacError("the items carry no grid (proj:* metadata): give crs= and resolution=")
    return geobox


def _crs_name(crs) -> str:
    from odc.geo import CRS

    try:
        return str(CRS(crs))
    except Exception as exc:  # noqa: BLE001 - pyproj's errors of a bad CRS string
        raise StacError(f"crs {crs!r} is not a CRS ({exc})") from None


def _in_bbox(items, parsed, bbox):
    """The items whose footprint meets the lon/lat ``bbox``; an error when none does."""
    from odc.geo.geom import box

    west, south, east, north = bbox
    if not (west < east and south < north and -180 <= west and east <= 180 and -90 <= south and north <= 90):
        raise StacError(f"bbox {list(bbox)} is not west,south,east,north in degrees (lon/lat)")
    area = box(west, south, east, north, "EPSG:4326")
    keep = [i for i, p in enumerate(parsed) if p.geometry is not None and p.geometry.to_crs("EPSG:4326").intersects(area)]
    if not keep:
        footprints = [p.geometry.to_crs("EPSG:4326").boundingbox for p in parsed if p.geometry is not None]
        lon = (min(b.left for b in footprints), max(b.right for b in footprints)) if footprints else (np.nan, np.nan)
        lat = (min(b.bottom for b in footprints), max(b.top for b in footprints)) if footprints else (np.nan, np.nan)
        raise StacError(f"no item intersects bbox {list(bbox)} (the {len(parsed)} items cover lon "
                        f"{lon[0]:.4f}..{lon[1]:.4f}, lat {lat[0]:.4f}..{lat[1]:.4f})")
    return [items[i] for i in keep], [parsed[i] for i in keep]


# --------------------------------------------------------------------------------------
# the cube


@dataclass(frozen=True)
class _Recipe:
    """What the block functions need to make the index of every item and merge the groups
    (plain values and functions, so that dask can send it to workers)."""

    formula: Callable
    band_slots: tuple[int, ...]      # for each band the formula takes, its position in the blocks
    nodata: tuple[float, ...]        # per band; the raw value that is missing
    scales: np.ndarray               # (bands, items), from raster:bands
    offsets: np.ndarray              # (bands, items)
    mask: Mask
    mask_slot: int | None
    mask_nodata: float | None
    groups: tuple[tuple[int, ...], ...]
    merge: str

    def item(self, blocks, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Item ``i``'s index (float32, NaN where masked or missing), mask and has-data planes."""
        reflectances, has_data = [], True
        for b, slot in enumerate(self.band_slots):
            raw = blocks[slot][i]
            valid = raw != self.nodata[b]
            reflectances.append(np.where(valid, raw.astype(np.float64) * self.scales[b, i] + self.offsets[b, i], np.nan))
            has_data = has_data & valid
        masked = np.zeros(blocks[0][i].shape, bool) if self.mask_slot is None else self._rejected(blocks[self.mask_slot][i])
        with np.errstate(divide="ignore", invalid="ignore"):
            values = np.asarray(self.formula(*reflectances), dtype=np.float64)
        keep = has_data & ~masked & np.isfinite(values)
        return np.where(keep, values, np.nan).astype(np.float32), masked, has_data

    def _rejected(self, flags: np.ndarray) -> np.ndarray:
        if self.mask.kind == "scl":
            rejected = np.isin(flags, self.mask.classes)
        else:
            rejected = (flags & sum(1 << b for b in self.mask.bits)) != 0
        if self.mask_nodata is not None:
            rejected |= flags == self.mask_nodata
        return rejected


def _cube_block(*blocks, recipe: _Recipe) -> np.ndarray:
    """One chunk of the cube, ``(groups, rows, cols)`` float32, from the raw blocks
    ``(items, rows, cols)`` of every asset: each item's index, merged by group."""
    planes = []
    for group in recipe.groups:
        if recipe.merge in ("first", "last"):
            ordered = group if recipe.merge == "first" else group[::-1]
            plane = recipe.item(blocks, ordered[0])[0]
            for i in ordered[1:]:
                missing = np.isnan(plane)
                if missing.any():
                    plane = np.where(missing, recipe.item(blocks, i)[0], plane)
        else:
            stack = np.stack([recipe.item(blocks, i)[0] for i in group])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN pixels
                plane = getattr(np, f"nan{recipe.merge}")(stack, axis=0).astype(np.float32)
        planes.append(plane)
    return np.stack(planes)


def _mask_counts_block(*blocks, recipe: _Recipe) -> np.ndarray:
    """Per pixel of a chunk, ``(2, rows, cols)``: items with data the mask rejects, items with data."""
    counts = np.zeros((2,) + blocks[0].shape[1:], np.int64)
    for i in range(blocks[0].shape[0]):
        _, masked, has_data = recipe.item(blocks, i)
        counts[0] += masked & has_data
        counts[1] += has_data
    return counts


@dataclass
class _Loaded:
    """The raw assets (lazy) of a STAC cube and how to make the cube of them."""

    blocks: list            # dask arrays (items, y, x) of the raw assets, one chunk per item and pixel block
    recipe: _Recipe
    times: pd.DatetimeIndex
    coords: dict            # y and x of the grid
    items: list
    name: str
    geobox: object
    groupby: str

    def blockwise(self, func, out_ind: str, new_axes: dict, dtype):
        """``func`` over every pixel block, the item blocks of every asset concatenated."""
        import dask.array

        args = [arg for block in self.blocks for arg in (block, "iyx")]
        return dask.array.blockwise(func, out_ind, *args, new_axes=new_axes, concatenate=True, dtype=dtype,
                                    recipe=self.recipe)


def _group(parsed, groupby, geobox) -> tuple[list[list[int]], pd.DatetimeIndex]:
    """Items by group, each in (datetime, id) order, and each group's time (its first item's)."""
    ((mid_lon, _),) = geobox.extent.centroid.to_crs("epsg:4326").points  # as odc-stac's solar day
    utc = [pd.Timestamp(p.nominal_datetime).tz_convert(None) if pd.Timestamp(p.nominal_datetime).tzinfo
           else pd.Timestamp(p.nominal_datetime) for p in parsed]
    keys = [p.solar_date_at(mid_lon).date() if groupby == "solar_day" else utc[i] for i, p in enumerate(parsed)]
    order = sorted(range(len(parsed)), key=lambda i: (keys[i], utc[i], parsed[i].id))
    groups: list[list[int]] = []
    for i in order:
        if groups and keys[groups[-1][0]] == keys[i]:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups, pd.DatetimeIndex([utc[g[0]] for g in groups]).as_unit("ns")


def _nodata(value, default=None):
    return default if value is None or np.isnan(value) else value


def _load(source, *, index, mask, bbox, crs, resolution, groupby, merge, block_shape, patch_url, timeout) -> _Loaded:
    import odc.stac

    from . import config

    if groupby not in GROUPBYS:
        raise StacError(f"groupby must be one of {', '.join(GROUPBYS)}, got {groupby!r}")
    if merge not in MERGES:
        raise StacError(f"merge must be one of {', '.join(MERGES)}, got {merge!r}")
    parse_mask(mask)  # its errors before any item is read
    items = read_items(source, timeout)
    if crs is not None:
        _crs_name(crs)
    parsed = list(odc.stac.parse_items(items))
    if bbox is not None:
        items, parsed = _in_bbox(items, parsed, tuple(float(v) for v in bbox))
    name, bands, formula = _index_recipe(index, parsed)
    keys = [_resolve(parsed, band, BAND_ASSETS.get(band, (band,))) for band in bands]
    mask_spec, mask_key = _resolve_mask(parsed, mask)
    geobox = _check_grid(parsed, keys, crs, resolution, bbox)
    groups, times = _group(parsed, groupby, geobox)
    order = [i for group in groups for i in group]
    items, parsed = [items[i] for i in order], [parsed[i] for i in order]
    position = {item: place for place, item in enumerate(order)}
    groups = [[position[i] for i in group] for group in groups]
    rows, cols = block_shape(len(groups), geobox.shape[0], geobox.shape[1])

    seconds = str(int(max(1, round(float(config.HTTP_TIMEOUT if timeout is None else timeout)))))
    # GDAL's reads of the assets: the same timeout to connect and for a request, a stalled
    # transfer (under 1 byte/s) given up after it too, and a bounded number of retries
    # (odc-stac's cloud defaults retry 10 times with a doubling delay: minutes per read of
    # a frozen server), so that a frozen server ends the run
    odc.stac.configure_rio(cloud_defaults=True, GDAL_HTTP_TIMEOUT=seconds, GDAL_HTTP_CONNECTTIMEOUT=seconds,
                           GDAL_HTTP_LOW_SPEED_TIME=seconds, GDAL_HTTP_LOW_SPEED_LIMIT="1",
                           GDAL_HTTP_MAX_RETRY=str(int(config.HTTP_RETRIES)), GDAL_HTTP_RETRY_DELAY="0.5")
    to_load = list(dict.fromkeys(keys + ([mask_key] if mask_key else [])))
    ds = odc.stac.load(items, bands=to_load, geobox=geobox, groupby="id", preserve_original_order=True,
                       chunks={"y": rows, "x": cols}, patch_url=patch_url)
    scale_offset = [_scale_offset(items, key) for key in keys]
    recipe = _Recipe(
        formula=formula, band_slots=tuple(to_load.index(key) for key in keys),
        nodata=tuple(_nodata(ds[key].attrs.get("nodata"), 0) for key in keys),
        scales=np.array([s for s, _ in scale_offset]), offsets=np.array([o for _, o in scale_offset]),
        mask=mask_spec, mask_slot=to_load.index(mask_key) if mask_key else None,
        mask_nodata=_nodata(ds[mask_key].attrs.get("nodata")) if mask_key else None,
        groups=tuple(tuple(g) for g in groups), merge=merge)
    return _Loaded([ds[key].data for key in to_load], recipe, times, {"y": ds.y, "x": ds.x}, items, name, geobox,
                   groupby)


def open_stac(source, *, index="NDVI", mask="auto", bbox=None, crs=None, resolution=None, groupby: str = "solar_day",
              merge: str = "first", memory=None, patch_url=None, timeout: float | None = None):
    """A lazy, cloud-masked ``(time, y, x)`` float32 index cube from STAC items.

    Parameters
    ----------
    source : pystac.ItemCollection, list of pystac.Item, path or URL
        The items: a ``pystac``/``pystac-client`` item collection or list, or the path or
        http(s) URL of a static catalog, collection, item-collection or item JSON
        (catalogs walked recursively; relative hrefs resolved as STAC says).
    index : str or callable
        ``"NDVI"``, ``"NBR"``, ``"NDMI"``, ``"EVI"`` (:data:`INDICES`), a band (``"nir"``,
        ``"B8A"``, ...: its reflectance), or a function whose parameter names are the
        bands it takes, e.g. ``lambda nir, swir16: nir / swir16`` (called with one
        item's float64 NumPy reflectances at a time). Bands are found by the names in
        :data:`BAND_ASSETS` (asset keys or ``eo:bands`` common names).
    mask : str or None
        ``"auto"`` (``SCL`` when the items have it, else ``QA_PIXEL``), ``"scl"``,
        ``"qa_pixel"``, with ``+snow`` to mask snow too, or explicit classes / bits
        (``"scl:3,8,9"``, ``"qa_pixel:1,3,4"``); None or ``"none"``: no mask. Defaults:
        :data:`SCL_MASKED_CLASSES`, :data:`QA_PIXEL_MASKED_BITS`.
    bbox : (west, south, east, north), optional
        Area in lon/lat degrees; items not meeting it are skipped.
    crs, resolution : optional
        Output grid (``resolution`` in the CRS's units). Default: the items' own CRS
        and resolution (an error when the items are in several CRSs).
    groupby : {"solar_day", "time"}
        Which items form one date: same solar day (UTC shifted by the grid centre's
        longitude, as odc-stac) or same timestamp. A date's time is its first item's.
    merge : {"first", "last", "median", "mean", "min", "max"}
        How a group's items combine, pixel by pixel, after masking: ``"first"`` takes
        the first valid value in the order of acquisition time then item id.
    memory : int or str, optional
        Bytes an algorithm may use per chunk (``"2GB"``): sets the pixel chunks, read
        by odc-stac tile by tile (time in one chunk).
    patch_url : callable, optional
        Passed to ``odc.stac.load`` (e.g. ``planetary_computer.sign``).
    timeout : float, optional
        Seconds to connect to a server and to wait for data (catalog documents and
        assets over http(s)) before the read fails with an error naming the URL; default
        ``tscube.config.HTTP_TIMEOUT`` (60). A catalog read over http(s) may not name local
        files (``config.STAC_LOCAL_HREFS_FROM_WEB``).

    Returns
    -------
    xarray.DataArray
        Dask-backed float32, dims ``("time", "y", "x")``, the groups' times on
        ``time`` (sorted, UTC), NaN where masked, missing or the index is not finite;
        CRS and transform through rioxarray; ``attrs`` name the index, mask and items.
        Nothing is read before it is computed.

    Raises
    ------
    FileNotFoundError
        ``source`` is a path that does not exist.
    StacError
        An item lacks an asset the index needs, the items are in several CRSs and no
        ``crs`` is given, no item meets ``bbox``, an unknown index, mask or merge, ...
    """
    return describe_stac(source, index=index, mask=mask, bbox=bbox, crs=crs, resolution=resolution, groupby=groupby,
                         merge=merge, memory=memory, patch_url=patch_url, timeout=timeout)["cube"]


def _as_cube(loaded: _Loaded):
    import rioxarray  # noqa: F401 - the .rio accessor
    import xarray as xr

    data = loaded.blockwise(_cube_block, "tyx", {"t": len(loaded.recipe.groups)}, np.float32)
    da = xr.DataArray(data, dims=("time", "y", "x"), coords={"time": loaded.times, **loaded.coords}, name=loaded.name)
    da = da.rio.write_crs(loaded.geobox.crs.to_wkt()).rio.write_transform(loaded.geobox.affine)
    da.attrs.update(long_name=loaded.name, stac_index=loaded.name, stac_mask=loaded.recipe.mask.describe(),
                    stac_items=len(loaded.items), stac_merge=loaded.recipe.merge, stac_groupby=loaded.groupby,
                    stac_items_sha256=_items_sha256(loaded.items))
    return da


def describe_stac(source, *, index="NDVI", mask="auto", bbox=None, crs=None, resolution=None,
                  groupby: str = "solar_day", merge: str = "first", memory=None, patch_url=None,
                  timeout: float | None = None) -> dict:
    """:func:`open_stac` with what ``tscube info`` shows: ``{"cube": the lazy cube,
    "items": how many, "mask": its description, "masked_fraction": the fraction of the
    items' pixels with data that the mask rejects (a lazy dask scalar)}``."""
    from .xarray_blocks import pixel_block_shape

    loaded = _load(source, index=index, mask=mask, bbox=bbox, crs=crs, resolution=resolution, groupby=groupby,
                   merge=merge, block_shape=lambda n, rows, cols: pixel_block_shape(n, rows, cols, memory),
                   patch_url=patch_url, timeout=timeout)
    cube = _as_cube(loaded)
    counts = loaded.blockwise(_mask_counts_block, "kyx", {"k": 2}, np.int64).sum(axis=(1, 2))
    return {"cube": cube, "items": len(loaded.items), "mask": loaded.recipe.mask.describe(),
            "masked_fraction": counts[0] / np.maximum(counts[1], 1)}


class _FailedReads(logging.Handler):
    """Collects the hrefs odc-stac logs when a read fails (rasterio's errors of http reads do not name them)."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.hrefs: list[str] = []

    def emit(self, record):
        if record.args:
            self.hrefs.append(str(record.args[0]))


@contextmanager
def naming_failed_reads():
    """Within it, an asset that cannot be read (while a cube is computed in this process)
    raises a :class:`StacError` naming it, instead of rasterio's bare ``HTTP response code:
    404``; odc-stac's own log line of the failure is kept for this error."""
    logger = logging.getLogger("odc.loader._rio")
    handler, propagate = _FailedReads(), logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield
    except Exception as exc:
        if not handler.hrefs:
            raise
        first_line = (str(exc).splitlines() or [type(exc).__name__])[0]
        href = handler.hrefs[0]
        hint = ("; over http(s) this is also what GDAL says of a server that sent nothing readable in the time "
                "allowed (--timeout, tscube.config.HTTP_TIMEOUT)") if _is_web(href) and "not recognized" in first_line else ""
        raise StacError(f"cannot read asset {href} ({first_line}{hint})") from None
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate
