"""Reading image cubes and writing georeferenced results (GeoTIFF, NetCDF, Zarr).

:func:`open_cube` turns what users hold on disk into one lazy ``(time, y, x)``
:class:`xarray.DataArray` with dates on its ``time`` coordinate and nodata as NaN:

* a folder of single-date GeoTIFFs (date from the file name, or from a date tag);
* a multi-band GeoTIFF (dates from the band descriptions, or a dates file);
* a NetCDF (``.nc``) or Zarr (``.zarr``) store with a time coordinate.

:func:`open_stac` (from :mod:`tscube.stac`) makes such a cube of a spectral index from
STAC items: Sentinel-2 / Landsat scenes, cloud-masked, merged per day.

:func:`write_result` writes a result :class:`xarray.Dataset` by the output suffix:
``.tif``/``.tiff`` (one band per variable), ``.nc`` (h5netcdf) or ``.zarr``, atomically
(written next to the target, then renamed). All IO goes through rioxarray, rasterio,
xarray and zarr. These need the ``geo`` extra: ``pip install tscube[geo]``.
"""

from __future__ import annotations

import os
import re
import shutil
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from .stac import StacError, is_stac_source, open_stac  # STAC catalogs (tscube[stac]), re-exported here
from .timeaxis import parse_date
from .xarray_blocks import BYTES_PER_VALUE, pixel_block_shape

__all__ = [
    "CubeError",
    "RunIncomplete",
    "check_complete",
    "DEFAULT_DATE_PATTERN",
    "StacError",
    "date_from_name",
    "folder_dates",
    "open_cube",
    "open_stac",
    "read_dates",
    "write_result",
]

GEOTIFF_SUFFIXES = (".tif", ".tiff")
NETCDF_SUFFIXES = (".nc", ".nc4", ".netcdf")
ZARR_SUFFIXES = (".zarr",)

#: Dates in file names: 2020-01-31, 2020_01_31, 2020.01.31 or 20200131 (not inside a
#: longer run of digits).
DEFAULT_DATE_PATTERN = r"(?<!\d)(\d{4})[-_.]?(\d{2})[-_.]?(\d{2})(?!\d)"

#: strftime directives allowed in a ``date_pattern`` and the digits they match.
_STRFTIME_DIGITS = {"%Y": r"\d{4}", "%y": r"\d{2}", "%m": r"\d{2}", "%d": r"\d{2}", "%j": r"\d{3}",
                    "%H": r"\d{2}", "%M": r"\d{2}", "%S": r"\d{2}"}

#: GeoTIFF tags that may hold an acquisition date (first found wins).
_DATE_TAGS = ("TIFFTAG_DATETIME", "ACQUISITION_DATE", "acquisition_date", "DATE", "date", "time", "TIME",
              "DATE_ACQUIRED", "datetime")


class CubeError(ValueError):
    """An input cannot be read as a dated cube (missing dates, mismatched grids, ...)."""


#: Name of the record a resumable run (:func:`tscube.runs.run_chunked`) keeps inside the
#: store it writes.
RECORD_NAME = "_tscube_run.json"
#: Store attribute: 0 while a run is writing the store, 1 once every chunk is in.
COMPLETE_ATTR = "tscube_complete"
#: ``status`` of the pixels of the chunks a run has not written yet: the fill value of the
#: store's ``status`` array, so that readers that look only at the data see them too.
NOT_COMPUTED = -1



class RunIncomplete(ValueError):
    """A result store holds an unfinished run: some of its pixels are not computed."""


def check_complete(path) -> None:
    """Refuse to read a result store (``.zarr``) that a run has not finished: its pixels of
    unwritten chunks hold nothing (``status`` :data:`NOT_COMPUTED`). Files that no tscube
    run wrote, and ``.tif``/``.nc`` outputs (assembled only at the end), pass."""
    path = Path(path)
    if not path.is_dir():
        return
    record = _read_json_file(path / RECORD_NAME)
    done = None
    if isinstance(record, dict) and "finished" in record and not record.get("complete"):
        grid = record.get("grid") or {}
        total = int(np.prod([len(c) for c in grid.get("chunks", [])], dtype=np.int64)) if grid.get("chunks") else None
        done = f"{len(record['finished'])} of {total} chunks written" if total else "not all chunks written"
    elif record is None:
        meta = _read_json_file(path / "zarr.json")
        if isinstance(meta, dict) and (meta.get("attributes") or {}).get(COMPLETE_ATTR) == 0:
            done = "not all chunks written"
    if done is not None:
        raise RunIncomplete(f"{path.name} holds an unfinished run ({done}; the pixels of the others have status "
                            f"{NOT_COMPUTED}): run the same command again to finish it")


def _read_json_file(path: Path):
    import json

    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


# --------------------------------------------------------------------------------------
# dates


def _pattern_regex(date_pattern: str) -> tuple[re.Pattern, str | None]:
    """A regex for ``date_pattern`` and, for strftime patterns, the format to parse with."""
    if "%" in date_pattern:
        regex, i = "", 0
        while i < len(date_pattern):
            token = date_pattern[i:i + 2]
            if token in _STRFTIME_DIGITS:
                regex += _STRFTIME_DIGITS[token]
                i += 2
            elif date_pattern[i] == "%":
                raise CubeError(f"date pattern {date_pattern!r}: unsupported directive {token!r} "
                                f"(use {', '.join(_STRFTIME_DIGITS)})")
            else:
                regex += re.escape(date_pattern[i])
                i += 1
        return re.compile(f"(?<!\\d)({regex})(?!\\d)"), date_pattern
    try:
        return re.compile(date_pattern), None
    except re.error as exc:
        raise CubeError(f"date pattern {date_pattern!r} is not a valid regular expression ({exc})") from None


def date_from_name(name: str, date_pattern: str | None = None) -> pd.Timestamp | None:
    """The date in a file name, or None when ``date_pattern`` does not match.

    ``date_pattern`` is a strftime-like pattern (``"%Y%m%d"``, ``"A%Y%j"``; searched in
    the name) or a regular expression whose groups, joined, parse as a date (a
    ``(?P<date>...)`` group is used alone). Default: :data:`DEFAULT_DATE_PATTERN`.
    """
    regex, fmt = _pattern_regex(date_pattern or DEFAULT_DATE_PATTERN)
    match = regex.search(name)
    if match is None:
        return None
    if fmt is not None:
        return pd.Timestamp(pd.to_datetime(match.group(1), format=fmt))
    if "date" in regex.groupindex:
        text = match.group("date")
    elif regex.groups:
        text = "-".join(g for g in match.groups() if g)
    else:
        text = match.group(0)
    return _parse_date_text(text, f"{name} (matched by the date pattern)")


def _parse_date_text(text: str, where: str) -> pd.Timestamp:
    """:func:`tscube.timeaxis.parse_date` (the one reading of a date every input shares),
    its refusals as :class:`CubeError`."""
    try:
        return parse_date(text, where)
    except ValueError as exc:
        raise CubeError(str(exc)) from None


def read_dates(path) -> pd.DatetimeIndex:
    """Dates from a text file: one ISO date per line (blank lines and ``#`` comments skipped).

    A CSV file with a header containing a ``date`` column is read by that column.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"dates file {str(path)!r} does not exist")
    lines = [line.split("#", 1)[0].strip() for line in path.read_text().splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        raise CubeError(f"dates file {path.name}: no dates in it")
    header = [c.strip().strip('"').lower() for c in lines[0].split(",")]
    if "," in lines[0] and "date" in header:
        column = header.index("date")
        lines = [line.split(",")[column].strip().strip('"') for line in lines[1:]]
    dates = [_parse_date_text(text, f"dates file {path.name}, entry {i + 1}") for i, text in enumerate(lines)]
    return pd.DatetimeIndex(dates)


def _band_dates(descriptions, band_tags) -> pd.DatetimeIndex | None:
    """Dates from band descriptions (``X2000.02.18``, ``2020-01-31``, ...) or band tags."""
    dates = []
    for description, tags in zip(descriptions, band_tags):
        found = date_from_name(description) if description else None
        if found is None:
            for key in _DATE_TAGS:
                if key in tags:
                    found = _parse_date_text(tags[key], f"band tag {key}")
                    break
        if found is None:
            return None
        dates.append(found)
    return pd.DatetimeIndex(dates)


def _check_dates(dates: pd.DatetimeIndex, labels: list[str], what: str) -> None:
    order = np.argsort(dates.asi8, kind="stable")
    sorted_dates = dates.asi8[order]
    same = np.flatnonzero(np.diff(sorted_dates) == 0)
    if same.size:
        a, b = order[same[0]], order[same[0] + 1]
        raise CubeError(f"{what}: duplicate date {dates[a].date()} ({labels[a]} and {labels[b]})")


# --------------------------------------------------------------------------------------
# opening


def failure_cause(exc: BaseException) -> str:
    """What went wrong, in words: the exception's message, or, where a library only says
    "See previous exception" (rasterio, GDAL), the message of the exception it chained."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        text = " ".join(str(exc).split())
        if text and "previous exception" not in text.lower():
            return text
        exc = exc.__cause__ or exc.__context__
    return "unknown error"


def _chunked(da, memory, time_dim="time"):
    """Rechunk ``da``: time in one chunk, pixel chunks sized by the ``memory`` budget."""
    from .xarray_blocks import chunks_fit, parse_memory, pixel_chunks

    budget = parse_memory(memory)
    if chunks_fit(da, time_dim, budget, BYTES_PER_VALUE):
        return da
    return pixel_chunks(da, time_dim, budget, BYTES_PER_VALUE)


def _open_geotiff(path: Path, *, chunks=None, masked=True):
    import rasterio
    import rioxarray

    try:
        return rioxarray.open_rasterio(path, masked=masked, chunks={} if chunks is None else chunks)
    except rasterio.errors.RasterioIOError as exc:
        raise CubeError(f"cannot read {path.name} as a GeoTIFF ({str(exc).splitlines()[0]})") from None


def _masked_dtype(dtype) -> np.dtype:
    """Float type of a band read with nodata as NaN (as rioxarray's ``masked=True``)."""
    dtype = np.dtype(dtype)
    if dtype == np.float64 or (dtype.kind in "iu" and dtype.itemsize >= 4):
        return np.dtype(np.float64)
    return np.dtype(np.float32)


def _read_window(path: str, rows: tuple[int, int], cols: tuple[int, int], nodata, dtype) -> np.ndarray:
    """One pixel block of a single-band GeoTIFF, ``(1, rows, cols)``, nodata as NaN; a file
    that cannot be read (cut short, corrupt, gone) raises a :class:`CubeError` naming it."""
    import rasterio
    from rasterio.windows import Window

    try:
        with rasterio.open(path) as src:
            raw = src.read(1, window=Window.from_slices(rows, cols))
    except (rasterio.errors.RasterioError, OSError) as exc:
        raise CubeError(f"cannot read {Path(path).name} (rows {rows[0]}-{rows[1]}, columns {cols[0]}-{cols[1]}): "
                        f"{failure_cause(exc)}") from None
    block = raw.astype(dtype)
    if nodata is not None and not np.isnan(nodata):
        block[raw == nodata] = np.nan
    return block[None]


def _folder_array(files: list[Path], nodatas, dtype, height: int, width: int, rows: int, cols: int):
    """A dask array ``(T, height, width)`` reading each file by pixel blocks of ``rows x cols``."""
    import dask.array
    from dask.base import tokenize

    row_edges = list(range(0, height, rows)) + [height]
    col_edges = list(range(0, width, cols)) + [width]
    mtimes = [f.stat().st_mtime_ns for f in files]
    name = "read-geotiff-folder-" + tokenize([str(f) for f in files], mtimes, nodatas, str(dtype), rows, cols)
    graph = {
        (name, t, i, j): (_read_window, str(path), (row_edges[i], row_edges[i + 1]),
                          (col_edges[j], col_edges[j + 1]), nodata, dtype)
        for t, (path, nodata) in enumerate(zip(files, nodatas))
        for i in range(len(row_edges) - 1)
        for j in range(len(col_edges) - 1)
    }
    chunks = ((1,) * len(files), tuple(np.diff(row_edges)), tuple(np.diff(col_edges)))
    return dask.array.Array(graph, name, chunks, dtype=dtype)


def folder_dates(folder, date_pattern=None) -> pd.DatetimeIndex | None:
    """The dates of a folder of GeoTIFF scenes, sorted, from the file names alone (no file
    is opened; duplicates refused); None when a name holds no date (its date is then in the
    file's tags, which :func:`open_cube` reads) or ``folder`` is not a folder of scenes."""
    folder = Path(folder)
    if not _is_scene_folder(folder):
        return None
    files, named = _named_files(folder, date_pattern)
    if any(date is None for date in named):
        return None
    return _folder_index(folder, files, named).sort_values()


def _is_scene_folder(path: Path) -> bool:
    """Whether ``path`` is a folder of scenes (a directory that is no Zarr store)."""
    return path.is_dir() and not (path.suffix.lower() in ZARR_SUFFIXES or (path / "zarr.json").exists()
                                  or (path / ".zgroup").exists())


def _folder_index(folder: Path, files: list[Path], dates: list) -> pd.DatetimeIndex:
    """The dates of a folder's ``files`` (in their order), duplicates refused."""
    index = pd.DatetimeIndex(dates)
    _check_dates(index, [p.name for p in files], f"folder {folder.name}")
    return index


def _named_files(folder: Path, date_pattern) -> tuple[list[Path], list]:
    """The GeoTIFF files of ``folder`` (sorted by name) and the date in each name (or None)."""
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in GEOTIFF_SUFFIXES and p.is_file())
    if not files:
        raise CubeError(f"folder {str(folder)!r} holds no GeoTIFF (.tif) files")
    return files, [date_from_name(path.stem, date_pattern) for path in files]


def _open_folder(folder: Path, date_pattern, memory, times=None):
    import xarray as xr

    files, named = _named_files(folder, date_pattern)
    if times is not None and all(date is not None for date in named):
        # the dates of every file from their names: only the selected files are opened
        index = _folder_index(folder, files, named)
        chosen = np.argsort(index.asi8, kind="stable")[np.asarray(times, dtype=np.int64)]
        grids, _, nodatas, dtypes, kind = _scan_files([files[i] for i in chosen], [named[i] for i in chosen],
                                                      date_pattern)
        order = np.arange(len(chosen))
        files, index = [files[i] for i in chosen], index[chosen]
    else:
        grids, dates, nodatas, dtypes, kind = _scan_files(files, named, date_pattern)
        index = _folder_index(folder, files, dates)
        order = np.argsort(index.asi8, kind="stable")
        if times is not None:
            order = order[np.asarray(times, dtype=np.int64)]
    dtype = np.result_type(*[_masked_dtype(d) for d in dtypes])
    # Every file is read by the pixel blocks of the final chunks, so that gathering a
    # block's time series holds only that block of each file in memory.
    height, width = grids[0][3], grids[0][2]
    rows, cols = pixel_block_shape(len(files), height, width, memory)
    data = _folder_array([files[i] for i in order], [nodatas[i] for i in order], dtype, height, width, rows, cols)
    template = _open_geotiff(files[order[0]]).squeeze("band", drop=True)  # coordinates and CRS only
    da = xr.DataArray(data.rechunk({0: -1}), dims=("time", "y", "x"),
                      coords={"time": index[order], **{k: v for k, v in template.coords.items()}},
                      attrs={k: v for k, v in template.attrs.items() if k != "long_name"})
    da.attrs["source_files"] = [files[i].name for i in order]
    da.attrs.update(scene_attrs(kind))
    return _chunked(da, memory)


def scene_type(dtype, scale=1.0, offset=0.0) -> dict:
    """What a scene's numbers mean: its data type and the scale and offset its values
    carry (``value * scale + offset``). Every scene of an input, and every scene added to a
    monitoring state, must have the type of the others (:func:`check_scene_type`)."""
    return {"dtype": str(np.dtype(dtype)), "scale": float(1.0 if scale is None else scale),
            "offset": float(0.0 if offset is None else offset)}


def describe_scene_type(kind: dict) -> str:
    return f"{kind['dtype']}" + (f" x {kind['scale']:g} + {kind['offset']:g}"
                                 if (kind["scale"], kind["offset"]) != (1.0, 0.0) else "")


def check_scene_type(kind: dict, expected: dict, what: str, others: str) -> None:
    """Refuse a scene (``what``) whose :func:`scene_type` differs from the others' (``others``):
    an NDVI stored as int16 x 10000 among float scenes would be read as other numbers."""
    if kind != expected:
        raise CubeError(f"{what}: {describe_scene_type(kind)} values, {others} {describe_scene_type(expected)}: "
                        "scenes of one series must share their data type and scale (a value stored as int16 "
                        "x 10000 among floats reads as another number); convert it, or leave it out")


#: Attribute of an opened cube holding the :func:`scene_type` of its scenes (JSON).
SCENE_TYPE_ATTR = "tscube_scene_type"


def scene_attrs(kind: dict) -> dict:
    """The attributes recording a cube's :func:`scene_type`."""
    import json

    return {SCENE_TYPE_ATTR: json.dumps(kind, sort_keys=True)}


def scene_type_of(da) -> dict | None:
    """The :func:`scene_type` an opened cube records, or None."""
    import json

    text = da.attrs.get(SCENE_TYPE_ATTR)
    return json.loads(text) if text else None


def _scan_files(files: list, named: list, date_pattern):
    """``(grids, dates, nodatas, dtypes)`` of single-band GeoTIFF files, the same grid and the
    same :func:`scene_type` each; a date from ``named`` (the file names) or else from the tags."""
    import rasterio

    grids, dates, nodatas, dtypes, kinds = [], [], [], [], []
    for path, date in zip(files, named):
        try:
            with rasterio.open(path) as src:
                grid = (src.crs, src.transform, src.width, src.height, src.count)
                tags = src.tags()
                nodatas.append(src.nodata)
                dtypes.append(src.dtypes[0])
                kinds.append(scene_type(src.dtypes[0], src.scales[0], src.offsets[0]))
        except rasterio.errors.RasterioIOError as exc:
            raise CubeError(f"cannot read {path.name} as a GeoTIFF ({str(exc).splitlines()[0]})") from None
        if kinds[-1] != kinds[0]:
            check_scene_type(kinds[-1], kinds[0], f"scene {path.name}", f"while {files[0].name} holds")
        if date is None:
            for key in _DATE_TAGS:
                if key in tags:
                    date = _parse_date_text(tags[key], f"{path.name}, tag {key}")
                    break
        if date is None:
            pattern = date_pattern or DEFAULT_DATE_PATTERN
            raise CubeError(f"{path.name}: no date in the file name (pattern {pattern!r}) nor in its tags; "
                            "pass --date-pattern (e.g. '%Y%m%d')")
        if grid[4] != 1:
            raise CubeError(f"{path.name} has {grid[4]} bands; a folder must hold single-band GeoTIFFs, one per date")
        if grids and grid[:4] != grids[0][:4]:
            first = grids[0]
            raise CubeError(
                f"folder files on mismatched grids: {path.name} ({grid[3]}x{grid[2]} pixels, {grid[0]}, "
                f"origin {grid[1].c}, {grid[1].f}) differs from {files[0].name} ({first[3]}x{first[2]} pixels, "
                f"{first[0]}, origin {first[1].c}, {first[1].f})"
            )
        grids.append(grid)
        dates.append(date)
    return grids, dates, nodatas, dtypes, kinds[0]


def _open_multiband(path: Path, dates, memory):
    import rasterio

    try:
        with rasterio.open(path) as src:
            descriptions = list(src.descriptions)
            band_tags = [src.tags(i + 1) for i in range(src.count)]
            n_bands, height, width = src.count, src.height, src.width
            kinds = [scene_type(dtype, scale, offset) for dtype, scale, offset in zip(src.dtypes, src.scales,
                                                                                       src.offsets)]
    except rasterio.errors.RasterioIOError as exc:
        raise CubeError(f"cannot read {path.name} as a GeoTIFF ({str(exc).splitlines()[0]})") from None
    # read by the pixel blocks of the final chunks (all bands each), never the whole file at once
    rows, cols = pixel_block_shape(n_bands, height, width, memory)
    da = _open_geotiff(path, chunks={"band": -1, "y": rows, "x": cols})
    if dates is None:
        dates = _band_dates(descriptions, band_tags)
        if dates is None:
            raise CubeError(
                f"{path.name}: no dates in its band descriptions or tags; pass a dates file "
                "(--dates FILE, one ISO date per line)"
            )
        labels = [d or f"band {i + 1}" for i, d in enumerate(descriptions)]
    else:
        labels = [f"band {i + 1}" for i in range(len(dates))]
    if len(dates) != da.sizes["band"]:
        raise CubeError(f"{path.name} has {da.sizes['band']} bands but {len(dates)} dates were given")
    _check_dates(dates, labels, path.name)
    for i, kind in enumerate(kinds):
        check_scene_type(kind, kinds[0], f"band {i + 1} of {path.name}", "while band 1 holds")
    da = da.rename(band="time").assign_coords(time=dates)
    da.attrs.pop("long_name", None)
    da.attrs.update(scene_attrs(kinds[0]))
    if not dates.is_monotonic_increasing:
        da = da.sortby("time")
    return _chunked(da, memory)


def _time_dim_of(ds_or_da) -> str | None:
    if "time" in ds_or_da.dims:
        return "time"
    for dim in ds_or_da.dims:
        if dim in ds_or_da.coords and np.issubdtype(ds_or_da[dim].dtype, np.datetime64):
            return dim
    return None


def _open_store(path: Path, suffix: str, variable, dates, memory):
    import xarray as xr

    if suffix in ZARR_SUFFIXES:
        check_complete(path)  # a result of an unfinished run is no input
    try:
        if suffix in ZARR_SUFFIXES:
            ds = xr.open_zarr(path, chunks={}, decode_coords="all")
        else:
            ds = xr.open_dataset(path, chunks={}, decode_coords="all")
    except (OSError, ValueError, KeyError) as exc:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise CubeError(f"cannot read {path.name} ({message})") from None
    candidates = [name for name, v in ds.data_vars.items() if _time_dim_of(v) is not None]
    if variable is not None:
        if variable not in ds.data_vars:
            raise CubeError(f"{path.name} has no variable {variable!r} (variables: {', '.join(map(str, ds.data_vars))})")
        da = ds[variable]
    elif len(candidates) == 1:
        da = ds[candidates[0]]
    elif not candidates and dates is not None and len(ds.data_vars) == 1:
        da = next(iter(ds.data_vars.values()))
    elif not candidates:
        raise CubeError(f"{path.name}: no variable with a time coordinate (variables: "
                        f"{', '.join(map(str, ds.data_vars)) or 'none'})")
    else:
        raise CubeError(f"{path.name} has several variables with a time coordinate ({', '.join(candidates)}); "
                        "choose one with --variable")
    time_dim = _time_dim_of(da)
    if dates is not None:
        if time_dim is None:
            raise CubeError(f"{path.name}: no time dimension to put the dates on (dims: {', '.join(map(str, da.dims))})")
        if len(dates) != da.sizes[time_dim]:
            raise CubeError(f"{path.name} has {da.sizes[time_dim]} dates but {len(dates)} were given")
        da = da.assign_coords({time_dim: dates})
    if time_dim is None:
        raise CubeError(f"{path.name}: variable {da.name!r} has no time coordinate (dims: {', '.join(map(str, da.dims))})")
    if time_dim != "time":
        da = da.rename({time_dim: "time"})
    if "time" not in da.coords:
        raise CubeError(f"{path.name}: variable {da.name!r} has a time dimension but no time coordinate")
    kind = scene_type(da.encoding.get("dtype", da.dtype), da.encoding.get("scale_factor"),
                      da.encoding.get("add_offset"))
    if np.issubdtype(da.dtype, np.integer) and "_FillValue" in da.encoding:
        da = da.astype(np.float64).where(da != da.encoding["_FillValue"])
    da.attrs.update(scene_attrs(kind))
    try:
        import rioxarray  # noqa: F401

        crs = ds.rio.crs
        if crs is not None and da.rio.crs is None:
            da = da.rio.write_crs(crs)
    except Exception:  # noqa: BLE001 - no usable georeference: keep the array as it is
        pass
    da = da.transpose("time", ...)
    return _chunked(da, memory)


def open_cube(path, *, dates=None, date_pattern: str | None = None, variable: str | None = None, memory=None,
              times=None):
    """Open a dated image cube lazily as a ``(time, y, x)`` DataArray, nodata as NaN.

    Parameters
    ----------
    path : path
        A folder of single-date GeoTIFFs, a multi-band GeoTIFF, a NetCDF (``.nc``) file
        or a Zarr (``.zarr``) store.
    dates : path or sequence of dates, optional
        Dates of the time steps when the input does not carry them: a file with one ISO
        date per line (or a CSV with a ``date`` column), or the dates themselves. For a
        multi-band GeoTIFF they override the band descriptions.
    date_pattern : str, optional
        How to find the date in the names of a folder's files: a strftime-like pattern
        (``"%Y%m%d"``, ``"A%Y%j"``) or a regular expression (see :func:`date_from_name`).
        Without a match the file's date tag (e.g. ``TIFFTAG_DATETIME``) is used.
    variable : str, optional
        The NetCDF/Zarr variable (default: the only one with a time coordinate).
    memory : int or str, optional
        Bytes an algorithm may use per chunk (e.g. ``"2GB"``); sets the dask chunks
        (time in one chunk). Default: dask's automatic chunk size.
    times : array_like of int, optional
        Positions (in date order) of the only dates to keep. A folder then reads only
        those files (what a near-real-time update needs); other inputs are selected
        after opening.

    Returns
    -------
    xarray.DataArray
        Dask-backed, dims ``("time", ...)`` with the dates on ``time``, the CRS and
        transform (rioxarray) when the input has them.

    Raises
    ------
    FileNotFoundError
        ``path`` (or the dates file) does not exist.
    CubeError
        The input cannot be read as a dated cube: corrupt file, no time coordinate,
        unparseable or duplicate dates, folder files on mismatched grids, ...
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"input {str(path)!r} does not exist")
    if dates is not None:
        dates = read_dates(dates) if isinstance(dates, (str, os.PathLike)) else _as_dates(dates)
    suffix = path.suffix.lower()
    if _is_scene_folder(path):
        if dates is not None:
            raise CubeError("--dates is for inputs without dates; a folder's dates come from its file names")
        return _open_folder(path, date_pattern, memory, times)
    da = _open_dated(path, suffix, dates, variable, memory)
    return da if times is None else da.isel(time=np.asarray(times, dtype=np.int64))


def _open_dated(path: Path, suffix: str, dates, variable, memory):
    if suffix in ZARR_SUFFIXES or path.is_dir():
        return _open_store(path, ".zarr", variable, dates, memory)
    if suffix in GEOTIFF_SUFFIXES or suffix == ".vrt":
        return _open_multiband(path, dates, memory)
    if suffix in NETCDF_SUFFIXES:
        return _open_store(path, suffix, variable, dates, memory)
    raise CubeError(f"input {path.name}: unsupported file type {suffix!r} (use .tif, .nc, .zarr or a folder of .tif)")


def _as_dates(values) -> pd.DatetimeIndex:
    try:
        return pd.DatetimeIndex(pd.to_datetime(list(values)))
    except (ValueError, TypeError) as exc:
        raise CubeError(f"dates: cannot parse as dates ({exc})") from None


# --------------------------------------------------------------------------------------
# writing


def temporary_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def replace_atomically(tmp: Path, path: Path) -> None:
    """Move ``tmp`` over ``path`` (a directory for Zarr)."""
    if path.is_dir() and not path.is_symlink():
        old = path.with_name(f".{path.name}.old-{os.getpid()}")
        os.replace(path, old)
        os.replace(tmp, path)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, path)


def _remove(tmp: Path) -> None:
    if tmp.is_dir():
        shutil.rmtree(tmp, ignore_errors=True)
    elif tmp.exists():
        tmp.unlink()


def _geotiff_bands(ds):
    """The per-pixel variables of ``ds`` as bands: a ``start`` dim gives one band per start
    (``NAME_start0``, ...), another single extra dim one band per coordinate value
    (``break_time_1``, ...)."""
    spatial = (ds.rio.y_dim, ds.rio.x_dim)
    bands, names, skipped = [], [], []
    for name, variable in ds.data_vars.items():
        extra = [d for d in variable.dims if d not in spatial]
        if not extra:
            bands.append(variable)
            names.append(str(name))
        elif "time" in extra:  # per-date series (a process, STL components): not maps
            skipped.append(str(name))
        elif extra == ["start"]:
            for i in range(variable.sizes["start"]):
                bands.append(variable.isel(start=i, drop=True))
                names.append(f"{name}_start{i}")
        elif len(extra) == 1 and extra[0] in ds.coords:
            for i, label in enumerate(np.asarray(ds[extra[0]].values)):
                bands.append(variable.isel({extra[0]: i}, drop=True))
                names.append(f"{name}_{label}")
        else:
            skipped.append(str(name))
    if skipped:
        warnings.warn(
            f"GeoTIFF holds per-pixel maps only: {', '.join(skipped)} not written; write .nc or .zarr to keep them",
            UserWarning,
            stacklevel=3,
        )
    return bands, names


def _write_geotiff(ds, tmp: Path) -> None:
    import rasterio
    import rioxarray  # noqa: F401
    import xarray as xr

    bands, names = _geotiff_bands(ds)
    if not bands:
        raise CubeError("nothing to write as GeoTIFF: the result has no per-pixel map")
    is_float = any(np.issubdtype(b.dtype, np.floating) for b in bands)
    dtype, nodata = (np.float32, np.nan) if is_float else (np.int32, np.iinfo(np.int32).min)
    stack = xr.concat([b.astype(dtype) for b in bands], dim="band", coords="minimal", compat="override",
                      join="override")
    stack = stack.assign_coords(band=np.arange(1, len(bands) + 1))
    stack.attrs = {}
    crs = ds.rio.crs
    if crs is not None:
        stack = stack.rio.write_crs(crs)
    # the transform as stored (GeoTransform), not recomputed from rounded coordinates
    stack = stack.rio.write_transform(ds.rio.transform())
    stack = stack.rio.write_nodata(nodata, encoded=False)
    stack.compute().rio.to_raster(tmp, driver="GTiff", dtype=np.dtype(dtype).name, compress="deflate",
                                  recalc_transform=False,
                                  tiled=stack.sizes[ds.rio.x_dim] >= 256 and stack.sizes[ds.rio.y_dim] >= 256)
    with rasterio.open(tmp, "r+") as dst:
        for i, name in enumerate(names, start=1):
            dst.set_band_description(i, name)
        tags = {k: (v if isinstance(v, str) else repr(v)) for k, v in ds.attrs.items()}
        dst.update_tags(**{k if k.startswith("tscube_") else f"tscube_{k}": v for k, v in tags.items()})


def netcdf_engine() -> str:
    """xarray's NetCDF engine: h5netcdf (NetCDF4) when h5py is installed, else scipy (NetCDF3)."""
    import importlib.util

    if importlib.util.find_spec("h5netcdf") and importlib.util.find_spec("h5py"):
        return "h5netcdf"
    if importlib.util.find_spec("scipy"):
        return "scipy"
    raise CubeError("writing NetCDF needs h5netcdf and h5py (pip install tscube[geo])")


def write_result(ds, path) -> Path:
    """Write a result Dataset by the suffix of ``path``: GeoTIFF, NetCDF or Zarr.

    ``.tif``/``.tiff``: one band per per-pixel variable (band descriptions = variable
    names; one band per start for a ``start`` dim), float32 with NaN nodata (int32 when
    every variable is an integer), the dataset's CRS and transform, attrs as tags.
    ``.nc``: NetCDF4 through h5netcdf. ``.zarr``: a Zarr store. The file is written to a
    temporary name in the same folder and renamed, so ``path`` never holds a partial
    result. Lazy (dask) datasets are computed by the current dask scheduler.

    Returns
    -------
    Path
        ``path``.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in GEOTIFF_SUFFIXES + NETCDF_SUFFIXES + ZARR_SUFFIXES:
        raise CubeError(f"output {path.name}: unsupported suffix {suffix!r} (use .tif, .nc or .zarr)")
    if not path.parent.exists():
        raise FileNotFoundError(f"output folder {str(path.parent)!r} does not exist")
    tmp = temporary_path(path)
    _remove(tmp)
    try:
        if suffix in GEOTIFF_SUFFIXES:
            _write_geotiff(ds, tmp)
        elif suffix in NETCDF_SUFFIXES:
            ds.to_netcdf(tmp, engine=netcdf_engine())
        else:
            ds.to_zarr(tmp, mode="w")
        replace_atomically(tmp, path)
    except CubeError:
        _remove(tmp)
        raise
    except Exception as exc:  # a full disk, a lost folder: the file and the cause, not "Write failed"
        _remove(tmp)
        if _is_write_failure(exc):
            raise OSError(f"cannot write {path.name}: {failure_cause(exc)}") from exc
        raise
    except BaseException:
        _remove(tmp)
        raise
    return path


def _is_write_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is the file system's (or GDAL's report of it), not a caller's error."""
    try:
        import rasterio

        if isinstance(exc, rasterio.errors.RasterioError):
            return True
    except ImportError:  # pragma: no cover - the geo extra
        pass
    return isinstance(exc, OSError)
