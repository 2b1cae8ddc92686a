"""One pixel of a result, explained: its stored outputs, its status in words, its breaks
as dates, and a figure of what the algorithm saw, drawn by the algorithm's own pixel
plot (:mod:`tscube.plot`) from the pixel's series in the cube with the parameters the
run recorded.

The series is read from the cube the result records (``_tscube_run.json``: its input
path and the options it was opened with), or from the cube the viewer was given. Each
figure recomputes the one pixel with the NumPy reference engine: no compiling, a few
milliseconds, the same numbers as the run's engine (tests/test_view.py checks that the
recomputed break is the stored one).
"""

from __future__ import annotations

import base64
import inspect
import io
import math
import re
import threading
from functools import lru_cache
from pathlib import Path

import numpy as np

from .layers import Layer

#: matplotlib's pyplot is not thread-safe: one figure at a time.
_FIGURE_LOCK = threading.Lock()


class CubeUnavailable(LookupError):
    """The pixel's series cannot be read: no cube was given or recorded, or it cannot be opened."""


def decimal_year_to_date(value: float) -> str | None:
    """ISO date (YYYY-MM-DD) of a decimal year, as R's ``time()`` counts them (None for NaN)."""
    if value is None or not math.isfinite(value):
        return None
    year = int(math.floor(value + 1e-9))
    start = np.datetime64(f"{year:04d}-01-01")
    days = int((np.datetime64(f"{year + 1:04d}-01-01") - start).astype(int))
    return str(start + np.timedelta64(int(round((value - year) * days)), "D"))


@lru_cache(maxsize=None)
def status_descriptions(enum) -> dict[int, str]:
    """Each status's description, as its enum documents it (``NAME`` (code) paragraphs of
    the class docstring, or the ``#:`` comment above the member)."""
    texts: dict[int, str] = {}
    doc = inspect.getdoc(enum) or ""
    for member in enum:
        match = re.search(rf"``{member.name}`` \({int(member)}\)\n((?:[ \t]+\S.*\n?)+)", doc)
        if match:
            texts[int(member)] = " ".join(line.strip() for line in match.group(1).splitlines()).replace("``", "")
    try:
        source = inspect.getsource(enum)
    except (OSError, TypeError):  # pragma: no cover - no source shipped
        source = ""
    for match in re.finditer(r"((?:[ \t]*#:.*\n)+)[ \t]*(\w+) = (\d+)", source):
        code = int(match.group(3))
        texts.setdefault(code, " ".join(line.strip()[2:].strip() for line in match.group(1).splitlines()).replace(
            "``", ""))
    return texts


def result_attrs(ds) -> dict:
    """The run's attributes of a result, whatever the file: a GeoTIFF keeps them as
    ``tscube_NAME`` tags, .nc and .zarr as ``NAME``."""
    return {(key[len("tscube_"):] if key.startswith("tscube_") else key): value for key, value in ds.attrs.items()}


def _finite(value) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def _param(record: dict, attrs: dict, name: str, default=None):
    params = (record or {}).get("params") or {}
    if name in params and params[name] is not None:
        return params[name]
    value = attrs.get(name, default)
    return default if isinstance(value, str) and value == "None" else value


class PixelInspector:
    """What a click on a pixel shows, for one result (``ds``, opened lazily) and its cube."""

    def __init__(self, ds, kind: str, layers: list[Layer], *, record: dict | None, cube=None, dates=None,
                 variable: str | None = None, date_pattern: str | None = None):
        self.ds, self.kind, self.layers, self.record = ds, kind, layers, record or {}
        self.attrs = result_attrs(ds)
        self._cube = cube if cube is not None and not isinstance(cube, (str, Path)) else None
        recorded = ((record or {}).get("input") or {}).get("path")
        self.cube_path = Path(cube) if isinstance(cube, (str, Path)) else (Path(recorded) if recorded and cube is None
                                                                             else None)
        self.cube_given = cube is not None
        self._stac = not self.cube_given and bool(recorded) and _is_stac(str(recorded))
        self.dates = dates
        self.variable = variable if variable is not None else _param(record, {}, "variable")
        self.date_pattern = date_pattern if date_pattern is not None else _param(record, {}, "date_pattern")
        self._lock = threading.Lock()
        self._cube_error: str | None = None
        self.y_dim, self.x_dim = layers[0].variable.dims[-2:]

    # -- the cube ----------------------------------------------------------------------
    def cube_problem(self) -> str | None:
        """Why pixel series cannot be shown (None when the cube is there), without opening it."""
        if self._cube is not None:
            return None
        if self.cube_path is None:
            return ("no cube: this result records no input (a cluster map, or a result written by Python) "
                    "- start the viewer with --cube INPUT to see pixel series")
        if self._stac:
            return ("the result was computed from a STAC catalog, which the viewer does not read again over the "
                    "network: start it with --cube and a local copy of the cube to see pixel series")
        if not self.cube_path.exists():
            if self.cube_given:
                return f"the cube {str(self.cube_path)!r} (--cube) does not exist"
            return (f"the input this result records, {str(self.cube_path)!r}, does not exist (moved or deleted?) - "
                    "start the viewer with --cube INPUT")
        return self._cube_error

    def cube(self):
        """The cube as a lazily read ``(time, y, x)`` DataArray (opened once)."""
        with self._lock:
            if self._cube is None:
                problem = self.cube_problem()
                if problem:
                    raise CubeUnavailable(problem)
                from ..io import open_cube

                try:
                    cube = open_cube(self.cube_path, dates=self.dates, date_pattern=self.date_pattern,
                                     variable=self.variable)
                except (OSError, ValueError, ImportError) as exc:
                    self._cube_error = f"cube {str(self.cube_path)!r} cannot be opened: {exc}"
                    raise CubeUnavailable(self._cube_error) from None
                shape = tuple(self.layers[0].variable.shape)
                if tuple(cube.shape[-2:]) != shape:
                    self._cube_error = (f"cube {self.cube_path.name} has {cube.shape[-2]} x {cube.shape[-1]} pixels, "
                                        f"the result {shape[0]} x {shape[1]}: not the cube of this result")
                    raise CubeUnavailable(self._cube_error)
                self._cube = cube
            return self._cube

    def series(self, row: int, col: int):
        """``(values, dates)`` of one pixel (NumPy), read from the cube's chunks that hold it."""
        cube = self.cube()
        one = cube.isel({cube.dims[-2]: row, cube.dims[-1]: col})
        return np.asarray(one.values), np.asarray(one[one.dims[0]].values)

    # -- what the result stores ----------------------------------------------------------
    def _stored(self, name: str, row: int, col: int):
        if name not in self.ds.data_vars:
            return None
        var = self.ds[name]
        if "start" in var.dims:
            var = var.isel(start=0)
        return np.asarray(var.isel({self.y_dim: row, self.x_dim: col}).values)

    def _break_list(self, name: str, count: int | None, row: int, col: int) -> list[float]:
        values = self._stored(name, row, col)
        if values is None:  # a GeoTIFF: a band per break
            values, i = [], 1
            while f"{name}_{i}" in self.ds.data_vars:
                values.append(float(self.ds[f"{name}_{i}"].isel({self.y_dim: row, self.x_dim: col}).values))
                i += 1
        values = [float(v) for v in np.atleast_1d(values)]
        values = [v for v in values if math.isfinite(v)]
        return values[:count] if count is not None else values

    def stored(self, row: int, col: int) -> dict:
        """The pixel's stored status, breaks and layer values."""
        from .layers import status_enum

        out: dict = {"values": {}}
        for layer in self.layers:
            value = layer.value_at(row, col)
            out["values"][layer.name] = _finite(value)
        enum = status_enum(self.kind)
        status = out["values"].get("status")
        if enum is not None and status is not None:
            code = int(status)
            try:
                name = enum(code).name
            except ValueError:
                name = f"unknown ({code})"
            out["status"] = {"code": code, "name": name, "text": status_descriptions(enum).get(code, "")}
        breaks = []
        if self.kind == "bfast_monitor":
            breaks = [{"time": t, "kind": "break"} for t in self._break_list("break_time", 1, row, col)]
        elif self.kind == "bfast_lite":
            n = out["values"].get("n_breaks")
            breaks = [{"time": t, "kind": "break"}
                      for t in self._break_list("break_time", int(n or 0), row, col)]
        elif self.kind == "bfast_classic":
            for part, label in (("trend", "trend break"), ("season", "seasonal break")):
                n = out["values"].get(f"n_{part}_breaks")
                breaks += [{"time": t, "kind": label}
                           for t in self._break_list(f"{part}_break_time", int(n or 0), row, col)]
        for item in breaks:
            item["date"] = decimal_year_to_date(item["time"])
        out["breaks"] = breaks
        return out

    # -- the figure ----------------------------------------------------------------------
    def _figure(self, row: int, col: int, figsize):
        """The algorithm's pixel plot of this pixel (and the recomputed pixel's summary)."""
        from .. import plot

        # monitor, Lite and classic from .nc/.zarr read the pixel from the cube themselves
        cube = self.cube()
        attrs, record = self.attrs, self.record
        if self.kind == "bfast_monitor":
            history = attrs.get("history", "ROC")  # a fixed start is kept as its decimal year
            if history not in ("ROC", "BP", "all"):
                history = float(history)
            model = dict(freq=_int(_param(record, attrs, "freq")), order=int(attrs.get("order", 3)),
                         trend=bool(attrs.get("trend", 1)), season=bool(attrs.get("season", 0)),
                         type=str(attrs.get("type", "OLS-MOSUM")), h=float(attrs.get("h", 0.25)),
                         level=_param(record, attrs, "level", 0.05), end=float(attrs.get("end", 10)),
                         nodata=_param(record, attrs, "nodata"))
            if int(attrs.get("calibrate", 0)):
                model["calibrate"] = True
            fig = plot.plot_pixel(cube, start=float(attrs["start"]), x=col, y=row, coords="pixel",
                                  history=history, figsize=figsize, **model)
            result = fig.tscube_result
            summary = {"status": int(result.status[0]), "breaks": [_finite(result.break_time[0])]}
        elif self.kind == "bfast_lite":
            breaks = attrs.get("breaks", "LWZ")
            breaks = int(breaks) if re.fullmatch(r"-?\d+", str(breaks)) else breaks
            max_breaks = _param(record, attrs, "max_breaks")
            model = dict(freq=_int(_param(record, attrs, "freq")), order=int(attrs.get("order", 3)),
                         trend=bool(attrs.get("trend", 1)), season=bool(attrs.get("season", 0)),
                         h=float(attrs.get("h", 0.15)), breaks=breaks,
                         max_breaks=None if max_breaks in (None, "None") else int(max_breaks),
                         level=float(attrs.get("level", 0.0)),
                         magnitude_interval=float(attrs.get("magnitude_interval", 0.1)),
                         nodata=_param(record, attrs, "nodata"))
            fig = plot.plot_lite_pixel(cube, x=col, y=row, coords="pixel", figsize=figsize, **model)
            result = fig.tscube_result
            n = int(result.n_breaks[0])
            summary = {"status": int(result.status[0]),
                       "breaks": [_finite(t) for t in np.asarray(result.break_time)[:n, 0]]}
        elif self.kind == "bfast_classic":
            if "trend" in self.ds.data_vars:  # .nc / .zarr keep the components
                fig = plot.plot_classic_pixel(self.ds, cube, (row, col), figsize=figsize)
            else:
                from ..bfast import bfast_classic

                params = dict(h=float(attrs.get("h", 0.15)), season=str(attrs.get("season", "dummy")),
                              max_iter=int(attrs.get("max_iter", 10)), type=str(attrs.get("type", "OLS-MOSUM")),
                              freq=_int(attrs.get("freq")), nodata=_param(record, attrs, "nodata"))
                values, dates = self.series(row, col)
                result = bfast_classic(values, dates, engine="reference", **params)
                fig = plot.plot_classic_pixel(result, values, figsize=figsize)
            summary = None
        elif self.kind == "stl":
            from ..stl import plot_stl_pixel

            values, dates = self.series(row, col)
            fig = plot_stl_pixel(values, dates, figsize=figsize,
                                 **_stl_params(attrs, _param(record, attrs, "nodata")))
            summary = {"status": int(fig.tscube_result.status[0])}
        else:
            fig = _series_figure(*self.series(row, col), figsize)
            summary = None
        return fig, summary

    def inspect(self, row: int, col: int, *, figure: bool = True, figsize=(9.5, 5.6), dpi: int = 100) -> dict:
        """Everything the pixel panel shows, as JSON: where, stored values, status, breaks,
        and the figure as a PNG data URL (or why there is none)."""
        shape = tuple(self.layers[0].variable.shape)
        if not (0 <= row < shape[0] and 0 <= col < shape[1]):
            raise IndexError(f"pixel row {row}, col {col} is outside the {shape[0]} x {shape[1]} grid")
        out = {"row": row, "col": col, **self.stored(row, col)}
        for dim, index, key in ((self.x_dim, col, "x"), (self.y_dim, row, "y")):
            if dim in self.ds.coords:
                out[key] = float(self.ds[dim].values[index])
        if not figure:
            return out
        try:  # the figure alone may fail (the cube, or the algorithm on this pixel): the rest is still shown
            with _FIGURE_LOCK:
                fig, summary = self._figure(row, col, figsize)
                buffer = io.BytesIO()
                try:
                    fig.savefig(buffer, format="png", dpi=dpi)
                finally:
                    import matplotlib.pyplot as plt

                    plt.close(fig)
            out["figure"] = "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")
            if summary is not None:
                summary["breaks"] = [{"time": t, "date": decimal_year_to_date(t)} for t in summary.get("breaks", [])
                                     if t is not None]
                out["recomputed"] = summary
        except CubeUnavailable as exc:
            out["figure_error"] = str(exc)
        except (ValueError, TypeError, OSError) as exc:
            out["figure_error"] = f"the pixel's figure failed: {exc}"
        return out


def _is_stac(source: str) -> bool:
    from ..io import is_stac_source

    return is_stac_source(source)


def _int(value):
    return None if value in (None, "None") else int(value)


def _stl_params(attrs: dict, nodata) -> dict:
    params = {"period": int(attrs["period"]), "flavor": str(attrs.get("flavor", "statsmodels")),
              "robust": bool(attrs.get("robust", 0)), "nodata": nodata}
    params["seasonal"] = "periodic" if int(attrs.get("periodic", 0)) else int(attrs.get("seasonal", 7))
    for name in ("trend", "low_pass", "seasonal_deg", "trend_deg", "low_pass_deg", "seasonal_jump", "trend_jump",
                 "low_pass_jump", "inner_iter", "outer_iter"):
        if name in attrs and attrs[name] not in (None, "None"):
            params[name] = int(attrs[name])
    return params


def _series_figure(values, dates, figsize):
    """The pixel's series alone (a cluster map: no algorithm to redo)."""
    from ..figures import new_figure

    fig, (ax,) = new_figure(1, figsize)
    valid = np.isfinite(values)
    ax.plot(dates[valid], values[valid], "-o", ms=3, lw=0.6, color="black", label="observations")
    ax.set_ylabel("value")
    ax.legend(loc="upper left", fontsize="small", frameon=False)
    return fig
