"""The map layers of a result and their tiles: which variables of a BFAST Monitor, BFAST
Lite, classic BFAST, STL or cluster result are shown, how each is coloured (as the
quick-look maps of :mod:`tscube.plot` colour them), its legend, and 256 x 256 PNG tiles
of a zoom pyramid so that the browser never receives the whole raster.

Pure NumPy over a lazily opened :class:`xarray.Dataset`: a layer's 2-D array is read the
first time it is drawn, each pyramid level (every 2**k-th pixel, the "nearest" overview
of GDAL) the first time it is asked for.
"""

from __future__ import annotations

import hashlib
import io
import math
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..figures import FLAGGED_GREY, NO_BREAK_GREY, function_of, n_starts, year_colours

TILE = 256

#: What each algorithm's result shows, in order: (variable, index on its break/segment
#: axis or None, title, colouring). Colourings: "year" (one colour per year of a decimal
#: year), "diverging" (centred on 0), "sequential", "count" and "category" (one colour
#: per integer), "status" (the status enum's names).
SPECS = {
    "bfast_monitor": [
        ("break_time", None, "Break date (year)", "year"),
        ("magnitude", None, "Magnitude (median residual of the monitoring period)", "diverging"),
        ("status", None, "Status", "status"),
        ("history_start", None, "Start of the stable history", "sequential"),
        ("n_valid", None, "Valid observations", "sequential"),
    ],
    "bfast_lite": [
        ("n_breaks", None, "Number of breaks", "count"),
        ("break_time", 0, "First break (year)", "year"),
        ("magnitude", None, "Magnitude of the largest break", "diverging"),
        ("status", None, "Status", "status"),
    ],
    "bfast_classic": [
        ("n_trend_breaks", None, "Trend breaks", "count"),
        ("n_season_breaks", None, "Seasonal breaks", "count"),
        ("magnitude_time", None, "Largest trend break (year)", "year"),
        ("magnitude", None, "Magnitude of the largest trend break", "diverging"),
        ("status", None, "Status", "status"),
    ],
    "stl": [
        ("trend_slope", None, "Trend slope (per year)", "diverging"),
        ("seasonal_amplitude", None, "Seasonal amplitude", "sequential"),
        ("status", None, "Status", "status"),
    ],
}
#: Layers whose missing value on an OK pixel means "no break" (light grey), as in the quick looks.
BREAK_LAYERS = {"break_time", "magnitude", "magnitude_time"}


def status_enum(function: str):
    """The per-pixel status enum of an algorithm's result (None for a cluster map)."""
    if function == "bfast_monitor":
        from ..bfast import BfastStatus as enum
    elif function == "bfast_lite":
        from ..bfast import BfastLiteStatus as enum
    elif function == "bfast_classic":
        from ..bfast import BfastClassicStatus as enum
    elif function == "stl":
        from ..stl import StlStatus as enum
    else:
        return None
    return enum


def result_kind(ds) -> str:
    """``function_of`` the result, or ``"cluster"`` for a label map of ``tscube cluster``."""
    try:
        return function_of(ds)
    except ValueError:
        if label_variable(ds) is not None:
            return "cluster"
        raise ValueError("not a tscube result: no break_time, n_breaks, n_trend_breaks, trend_slope or cluster label "
                         f"variable (variables: {', '.join(map(str, ds.data_vars)) or 'none'})") from None


def label_variable(ds) -> str | None:
    """The label variable of a cluster map (``label``, or a GeoTIFF band named ``... label``)."""
    for name in ds.data_vars:
        if str(name) == "label" or str(name).endswith("cluster label"):
            return str(name)
    return None


def _hex(colour) -> str:
    from matplotlib.colors import to_hex

    return to_hex(colour, keep_alpha=False)


def _rgba(colour) -> np.ndarray:
    from matplotlib.colors import to_rgba

    return np.round(np.asarray(to_rgba(colour)) * 255).astype(np.uint8)


@dataclass
class Layer:
    """One map of a result: its 2-D values, how they are coloured and the tiles drawn from them."""

    name: str
    title: str
    colouring: str
    variable: object  # lazily read 2-D xarray.DataArray
    status: "Layer | None" = None  # the result's status layer (greys of the break layers)
    enum: object = None
    overviews: "Overviews | None" = None  # the pyramid's levels kept on disk between sessions
    _full: np.ndarray | None = field(default=None, repr=False)
    _levels: dict = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _style: dict | None = field(default=None, repr=False)
    _range: tuple | None = field(default=None, repr=False)

    # -- values ----------------------------------------------------------------------
    def values(self) -> np.ndarray:
        """The whole 2-D array (float32, NaN where missing), read once."""
        with self._lock:
            if self._full is None:
                self._full = np.asarray(self.variable.values).astype(np.float32, copy=False)
            return self._full

    def value_at(self, row: int, col: int) -> float:
        if self._full is not None:
            return float(self._full[row, col])
        return float(np.asarray(self.variable[row, col].values))

    def level(self, step: int) -> np.ndarray:
        """Every ``step``-th pixel of the layer (the overview of that zoom level): from
        memory, else from the overview cache, else taken from the whole layer (which then
        fills the cache with every level, as ``gdaladdo`` builds a GeoTIFF's overviews)."""
        if step == 1:
            return self.values()
        with self._lock:
            if step not in self._levels and self.overviews is not None:
                cached = self.overviews.load(self.name, step)
                if cached is not None:
                    self._levels[step] = cached
            if step in self._levels:
                return self._levels[step]
        full = self.values()
        with self._lock:
            if step not in self._levels:
                built, size = {}, 2
                while size < 2 * max(full.shape):  # the whole pyramid, down to one pixel
                    built[size] = np.ascontiguousarray(full[::size, ::size])
                    size *= 2
                built.setdefault(step, np.ascontiguousarray(full[::step, ::step]))
                self._levels.update(built)
                self._range = _finite_range(full)
                if self.overviews is not None:  # written behind: the first view does not wait for the disk
                    self.overviews.save_behind(self.name, built, self._range)
            return self._levels[step]

    def value_range(self) -> tuple[float, float] | None:
        """``(min, max)`` of the finite values of the whole layer (None: none), which the
        legends of years, counts and labels need whole (a sample could miss a rare year):
        known once the layer was read whole, here or in an earlier session (cached)."""
        if self._range is None and self.overviews is not None:
            self._range = self.overviews.load_range(self.name)
        if self._range is None:
            self._range = _finite_range(self.values())
        return None if self._range == () else self._range

    # -- colours ---------------------------------------------------------------------
    def style(self) -> dict:
        """The colour table and legend (computed once from the layer's values)."""
        if self._style is None:
            self._style = self._make_style()
        return self._style

    def _make_style(self) -> dict:
        from matplotlib import colormaps

        values = self.level(sample_step(self.variable.shape[-2:]))
        finite = values[np.isfinite(values)]
        greys = []
        if self.name in BREAK_LAYERS:
            greys.append({"label": "no break", "colour": _hex(NO_BREAK_GREY)})
        if self.status is not None and self.colouring != "status":
            greys.append({"label": "status not OK", "colour": _hex(FLAGGED_GREY)})
        extent = self.value_range() if self.colouring in ("year", "count", "category") else None
        if self.colouring == "year":
            if extent is not None:
                first, last = (int(np.floor(v + 1e-9)) for v in extent)
            else:
                first = last = 0
            cmap = year_colours(last - first + 1)
            colours = [cmap(i) for i in range(last - first + 1)]
            return {"kind": "categorical", "offset": first, "lut": np.stack([_rgba(c) for c in colours]),
                    "year": True,
                    "entries": [{"label": str(first + i), "colour": _hex(c)} for i, c in enumerate(colours)]
                    if extent is not None else [], "greys": greys}
        if self.colouring in ("status", "count", "category"):
            if self.colouring == "status" and self.enum is not None:
                codes = [int(member) for member in self.enum]
                labels = {int(member): member.name for member in self.enum}
            else:
                top = int(extent[1]) if extent is not None else 0
                codes = list(range(0, max(top, 0) + 1))
                labels = {code: str(code) for code in codes}
            if self.colouring == "status":
                palette = ["#1a9850"] + [colormaps["tab10"](i) for i in (1, 3, 4, 5, 6, 7, 8, 9, 0)]
            elif len(codes) <= 10:
                palette = [colormaps["viridis"](x) for x in np.linspace(0, 1, max(len(codes), 2))]
                if self.colouring == "category":
                    palette = [colormaps["tab10"](i) for i in range(10)]
            else:
                palette = [colormaps["tab20" if self.colouring == "category" else "viridis"](x)
                           for x in np.linspace(0, 1, len(codes))]
            colours = [palette[i % len(palette)] for i in range(len(codes))]
            if self.colouring == "count" and codes:
                colours[0] = NO_BREAK_GREY  # no break: light grey, as in the quick looks
            lut = np.zeros((codes[-1] + 1 if codes else 1, 4), dtype=np.uint8)
            for code, colour in zip(codes, colours):
                lut[code] = _rgba(colour)
            return {"kind": "categorical", "offset": 0, "lut": lut, "year": False,
                    "entries": [{"label": labels[c], "colour": _hex(col)} for c, col in zip(codes, colours)],
                    "greys": [g for g in greys if self.colouring != "count" or g["label"] != "no break"]}
        if self.colouring == "diverging":
            limit = float(np.percentile(np.abs(finite), 98)) if finite.size else 1.0
            limit = limit if limit > 0 else 1.0
            low, high, cmap = -limit, limit, colormaps["RdBu"]
        else:
            low, high = (float(np.percentile(finite, 2)), float(np.percentile(finite, 98))) if finite.size else (0, 1)
            if high <= low:
                high = low + 1.0
            cmap = colormaps["viridis"]
        lut = (cmap(np.linspace(0, 1, 256)) * 255).round().astype(np.uint8)
        return {"kind": "continuous", "min": low, "max": high, "lut": lut,
                "stops": [_hex(cmap(x)) for x in np.linspace(0, 1, 9)], "greys": greys}

    def legend(self) -> dict:
        """The legend as JSON: continuous (gradient stops, min, max) or categorical (entries)."""
        return {key: value for key, value in self.style().items() if key not in ("lut", "offset")}

    def colour(self, values: np.ndarray, status: np.ndarray | None) -> np.ndarray:
        """RGBA (uint8) of ``values``: the layer's colours, greys where the value is missing."""
        style = self.style()
        lut = style["lut"]
        rgba = np.zeros(values.shape + (4,), dtype=np.uint8)
        finite = np.isfinite(values)
        if style["kind"] == "continuous":
            scaled = (values[finite] - style["min"]) / (style["max"] - style["min"])
            index = np.clip(np.rint(scaled * 255), 0, 255).astype(np.intp)
        else:
            raw = values[finite]
            if style.get("year"):
                raw = np.floor(raw + 1e-9)
            index = np.clip(raw - style["offset"], 0, len(lut) - 1).astype(np.intp)
        rgba[finite] = lut[index]
        if status is not None and self.colouring != "status":
            flagged = np.isfinite(status) & (status != 0) & ~self._valid_despite_status(status)
            if self.name in BREAK_LAYERS:
                rgba[~finite & ~flagged & np.isfinite(status)] = _rgba(NO_BREAK_GREY)
            rgba[flagged] = _rgba(FLAGGED_GREY)
        return rgba

    def _valid_despite_status(self, status: np.ndarray) -> np.ndarray:
        """BFAST Monitor's ROC_NO_CROSSING and BP_TOO_SHORT only flag an event: their outputs are valid."""
        if self.enum is not None and self.enum.__name__ == "BfastStatus":
            return np.isin(status, (6, 7))
        return np.zeros(status.shape, dtype=bool)

    def tile(self, z: int, x: int, y: int, native_zoom: int) -> bytes | None:
        """The PNG of tile ``x``, ``y`` at zoom ``z`` (None: outside the raster)."""
        if z < 0 or z > native_zoom:
            return None
        step = 2 ** (native_zoom - z)
        values = self.level(step)
        status = self.status.level(step) if self.status is not None and self.status is not self else None
        r0, c0 = y * TILE, x * TILE
        if x < 0 or y < 0 or r0 >= values.shape[0] or c0 >= values.shape[1]:
            return None
        block = values[r0:r0 + TILE, c0:c0 + TILE]
        rgba = np.zeros((TILE, TILE, 4), dtype=np.uint8)
        rgba[:block.shape[0], :block.shape[1]] = self.colour(
            block, status[r0:r0 + TILE, c0:c0 + TILE] if status is not None else None)
        return png(rgba)


def _finite_range(values: np.ndarray) -> tuple:
    """``(min, max)`` of the finite values, ``()`` when there is none."""
    finite = values[np.isfinite(values)]
    return (float(finite.min()), float(finite.max())) if finite.size else ()


def sample_step(shape) -> int:
    """A power-of-two decimation step (a pyramid level) that leaves at most a quarter of a
    million pixels for the legend's statistics (and the first view's tiles read it too)."""
    return 2 ** max(0, math.ceil(math.log2(max(math.sqrt(shape[0] * shape[1] / 250_000), 1))))


class Overviews:
    """The pyramid levels of a result's layers (every 2**k-th pixel, float32) kept as
    ``.npy`` files in a cache folder, so that a result opened again shows its first view
    without reading every chunk of the layer.

    The folder is named by the result's path and modification times (and ``variant``: the
    start shown of a multi-start result): a result written again gets new overviews. A cache that cannot be written (read-only, disk full) is
    only not used: the layers are then read as without it.
    """

    def __init__(self, result: Path, shape, root: Path | None = None, variant=0):
        result = Path(result).resolve()
        stamps = [result.stat().st_mtime_ns]
        from ..runs import record_path

        record = record_path(result)
        if record.exists():
            stamps.append(record.stat().st_mtime_ns)
        if root is None:
            root = Path(os.environ.get("TSCUBE_VIEW_CACHE") or Path(
                os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tscube" / "view")
        key = hashlib.sha256(f"{result}|{stamps}|{tuple(shape)}|{variant}".encode()).hexdigest()[:20]
        self.folder = Path(root) / key
        self.shape = tuple(shape)
        self._writers: list[threading.Thread] = []

    def save_behind(self, name: str, levels: dict, extent: tuple) -> None:
        """:meth:`save` in a background thread (:meth:`wait` waits for every such write)."""
        writer = threading.Thread(target=self.save, args=(name, levels, extent), name="tscube-view-overviews",
                                  daemon=True)
        writer.start()
        self._writers.append(writer)

    def wait(self, timeout: float | None = None) -> None:
        for writer in list(self._writers):
            writer.join(timeout)

    def _path(self, name: str, step: int) -> Path:
        return self.folder / f"{name}.{step}.npy"

    def load(self, name: str, step: int) -> np.ndarray | None:
        path = self._path(name, step)
        try:
            array = np.load(path, allow_pickle=False)
        except (OSError, ValueError):
            return None
        expected = (-(-self.shape[0] // step), -(-self.shape[1] // step))
        return array if array.shape == expected else None

    def load_range(self, name: str) -> tuple | None:
        """The layer's ``(min, max)`` as :meth:`save` kept it (``()``: no finite value)."""
        try:
            extent = np.load(self.folder / f"{name}.range.npy", allow_pickle=False)
        except (OSError, ValueError):
            return None
        return tuple(float(v) for v in extent)

    def save(self, name: str, levels: dict, extent: tuple) -> None:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            files = {self._path(name, step): array for step, array in levels.items()}
            files[self.folder / f"{name}.range.npy"] = np.asarray(extent, dtype=np.float64)
            for path, array in files.items():
                tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
                with open(tmp, "wb") as out:
                    np.save(out, array, allow_pickle=False)
                os.replace(tmp, path)  # whole or not at all: a reader never sees half a level
        except OSError:
            pass


def png(rgba: np.ndarray) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.fromarray(rgba, "RGBA").save(out, format="PNG", compress_level=1)
    return out.getvalue()


def native_zoom(shape) -> int:
    """The zoom level at which one tile pixel is one raster pixel (zoom 0: the whole raster in one tile)."""
    return max(0, math.ceil(math.log2(max(shape[0], shape[1], 1) / TILE)))


def _variable(ds, name: str, index, start_index: int):
    """The lazily read 2-D variable ``name`` (item ``index`` of its break axis), or None."""
    if name in ds.data_vars:
        var = ds[name]
    elif index is not None and f"{name}_{index + 1}" in ds.data_vars:  # a GeoTIFF band per break
        return ds[f"{name}_{index + 1}"]
    elif f"{name}_start{start_index}" in ds.data_vars:
        return ds[f"{name}_start{start_index}"]
    else:
        return None
    if "start" in var.dims:
        var = var.isel(start=start_index)
    extra = [d for d in var.dims if d not in var.dims[-2:]]
    if extra:
        if index is None or len(extra) != 1:
            return None
        var = var.isel({extra[0]: index})
    return var


def result_layers(ds, *, start_index: int = 0, overviews: Overviews | None = None) -> tuple[str, list[Layer]]:
    """``(kind, layers)`` of a lazily opened result: the algorithm (or ``"cluster"``) and its
    map layers (their pyramid levels cached in ``overviews``, when given)."""
    kind = result_kind(ds)
    if start_index and not 0 <= start_index < n_starts(ds):
        raise ValueError(f"start index {start_index} is not in the result ({n_starts(ds)} starts)")
    enum = status_enum(kind)
    layers: list[Layer] = []
    if kind == "cluster":
        label = label_variable(ds)
        layers.append(Layer("label", f"Cluster label ({ds.attrs.get('method', 'cluster')})", "category", ds[label],
                            overviews=overviews))
        return kind, layers
    status_var = _variable(ds, "status", None, start_index)
    status = (Layer("status", "Status", "status", status_var, enum=enum, overviews=overviews)
              if status_var is not None else None)
    for name, index, title, colouring in SPECS[kind]:
        if name == "status":
            if status is not None:
                layers.append(status)
            continue
        var = _variable(ds, name, index, start_index)
        if var is None:
            continue
        layers.append(Layer(name, title, colouring, var, status=status, enum=enum, overviews=overviews))
    if not layers:
        raise ValueError(f"the {kind} result holds none of its maps")
    return kind, layers
