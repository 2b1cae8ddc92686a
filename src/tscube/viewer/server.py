"""The local web server of ``tscube view``: the page, its vendored scripts, and a small
JSON/PNG API over one result (and its cube).

Built on the standard library's threaded HTTP server: one user on the loopback interface
needs no web framework, and the core install stays as it is. Requests name layers and
pixels, never paths: the only files served are the result and the cube the viewer was
started on, and the page's own files from the package. When bound to a loopback
address, requests whose ``Host`` header is not a loopback name are refused (a web page
elsewhere cannot reach the viewer through DNS rebinding).
"""

from __future__ import annotations

import json
import math
import socket
import sys
import threading
import time
import webbrowser
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import numpy as np

from ..figures import read_result
from ..io import check_complete
from .layers import Overviews, native_zoom, result_layers, sample_step

from .pixel import CubeUnavailable, PixelInspector, result_attrs

STATIC = Path(__file__).with_name("static")
CONTENT_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
                 ".css": "text/css; charset=utf-8", ".png": "image/png", ".txt": "text/plain; charset=utf-8"}
LOOPBACK_NAMES = {"127.0.0.1", "localhost", "::1", "[::1]"}


def _record_of(path: Path) -> dict | None:
    from ..runs import read_json, record_path

    record = read_json(record_path(path))
    return record if isinstance(record, dict) and "unreadable" not in record else None


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


class ViewApp:
    """One result opened for viewing: its layers, pyramid, pixel inspector and page info.

    ``overview_cache``: the folder of the overview cache (None: ``$TSCUBE_VIEW_CACHE`` or
    the user's cache folder; False: no cache). The other arguments are :func:`view`'s.
    """

    def __init__(self, result, *, cube=None, dates=None, variable=None, date_pattern=None, start_index: int = 0,
                 overview_cache=None):
        try:
            import xarray  # noqa: F401
        except ImportError:
            raise ImportError("tscube view reads results and cubes with xarray, zarr, rioxarray and dask: "
                              "pip install 'tscube[view]'") from None
        self.path = Path(result)
        if not self.path.exists():
            raise FileNotFoundError(f"result {str(self.path)!r} does not exist")
        if self.path.suffix.lower() == ".zarr" or self.path.is_dir():
            check_complete(self.path)
        self.ds = read_result(self.path, load=False)
        self.shape = _grid_shape(self.ds)
        self.overviews = (Overviews(self.path, self.shape, overview_cache, variant=start_index)
                          if overview_cache is not False else None)
        self.kind, self.layers = result_layers(self.ds, start_index=start_index, overviews=self.overviews)
        self.by_name = {layer.name: layer for layer in self.layers}
        self.zoom = native_zoom(self.shape)
        self.record = _record_of(self.path)
        self.pixels = PixelInspector(self.ds, self.kind, self.layers, record=self.record, cube=cube, dates=dates,
                                     variable=variable, date_pattern=date_pattern)
        self.info = self._info()

    def _info(self) -> dict:
        attrs = {k: v for k, v in result_attrs(self.ds).items() if k not in ("function", "complete")}
        params = (self.record or {}).get("params") or {}
        summary = (self.record or {}).get("summary") or {}
        if not summary:
            summary = {key: attrs.get(key) for key in ("pixels_processed", "status_counts", "breaks_found")
                       if key in attrs}
        y_dim, x_dim = self.layers[0].variable.dims[-2:]
        coords = {}
        for key, dim in (("x", x_dim), ("y", y_dim)):
            if dim in self.ds.coords and self.ds[dim].size:
                values = np.asarray(self.ds[dim].values, dtype=float)
                coords[key] = {"first": values[0], "step": float(values[1] - values[0]) if values.size > 1 else 0.0}
        crs = None
        if "spatial_ref" in self.ds.variables:  # the CF grid mapping every tscube result carries
            crs = self.ds["spatial_ref"].attrs.get("crs_wkt") or self.ds["spatial_ref"].attrs.get("spatial_ref")
            if crs:
                try:  # "EPSG:32633" rather than the WKT
                    from rasterio.crs import CRS

                    crs = CRS.from_wkt(crs).to_string()
                except Exception:  # noqa: BLE001 - any CRS text is still worth showing
                    pass
                crs = crs[:80]
        record_input = ((self.record or {}).get("input") or {}).get("path")
        return _jsonable({
            "title": self.path.name, "kind": self.kind, "shape": list(self.shape), "zoom": self.zoom,
            "tile": 256, "layers": [{"name": layer.name, "title": layer.title, "colouring": layer.colouring}
                       for layer in self.layers],
            "params": params or {k: v for k, v in attrs.items() if k not in (
                "pixels_processed", "status_counts", "breaks_found")},
            "summary": summary, "coords": coords, "crs": crs,
            "cube": str(self.pixels.cube_path) if self.pixels.cube_path else None,
            "input": record_input, "cube_problem": self.pixels.cube_problem(),
        })

    def warm(self) -> None:
        """Read the first layer and draw its first tile, import the plotting code: what
        the page's first view and first click need, done while the browser starts."""
        from concurrent.futures import ThreadPoolExecutor

        first = self.layers[0]
        sample = sample_step(self.shape)
        with ThreadPoolExecutor(3) as pool:  # reading chunks and importing overlap
            reads = [pool.submit(first.level, sample), pool.submit(_import_plotting)]
            if first.status is not None:
                reads.append(pool.submit(first.status.level, sample))
            for read in reads:
                read.result()
        first.style()
        first.tile(0, 0, 0, self.zoom)
        self._open_cube()  # for the first click, once the first view is drawn


    def _open_cube(self) -> None:
        try:
            self.pixels.cube()
        except CubeUnavailable:
            pass  # the page says why (info["cube_problem"], and each pixel's figure_error)


def _import_plotting() -> None:
    from .. import plot  # noqa: F401  (matplotlib and the pixel plots)
    from ..figures import pyplot

    pyplot()


def _grid_shape(ds) -> tuple[int, int]:
    """The pixel grid of a result: the last two dims of its status (or first) variable."""
    var = ds["status"] if "status" in ds.data_vars else next(iter(ds.data_vars.values()))
    return tuple(int(n) for n in var.shape[-2:])


def _safe_int(query: dict, name: str) -> int:
    try:
        return int(query[name][0])
    except (KeyError, IndexError, ValueError):
        raise ValueError(f"query parameter {name!r} must be an integer") from None


class _Handler(BaseHTTPRequestHandler):
    server_version = "tscube-view"
    app: ViewApp
    files: dict[str, Path]
    loopback_only: bool

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass  # quiet: errors are reported by _error

    def _send(self, status: int, body: bytes, content_type: str, cache: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "max-age=3600" if cache else "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        self.wfile.write(body)

    def _json(self, value, status: int = 200) -> None:
        self._send(status, json.dumps(_jsonable(value)).encode(), "application/json")

    def _error(self, status: int, message: str) -> None:
        print(f"tscube view: {message}", file=sys.stderr, flush=True)
        self._json({"error": message}, status)

    def do_GET(self) -> None:  # noqa: N802 - the base class's name
        try:
            host = (self.headers.get("Host") or "").rsplit(":", 1)[0] if self.headers.get("Host") else ""
            if self.loopback_only and host not in LOOPBACK_NAMES:
                self._error(HTTPStatus.FORBIDDEN, f"refused a request for host {host!r}: the viewer serves "
                                                  "loopback names only")
                return
            self._route()
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as exc:  # noqa: BLE001 - a request never kills the server; the page shows why
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}")

    def _route(self) -> None:
        url = urlsplit(self.path)
        parts = [p for p in url.path.split("/") if p]
        query = parse_qs(url.query)
        app = self.app
        if not parts:
            self._send(200, (STATIC / "index.html").read_bytes(), CONTENT_TYPES[".html"])
        elif parts == ["favicon.ico"]:
            self._send(HTTPStatus.NO_CONTENT, b"", "image/x-icon")
        elif parts[0] == "static":
            path = self.files.get("/".join(parts[1:]))
            if path is None:
                self._error(HTTPStatus.NOT_FOUND, f"no such file: {url.path}")
                return
            self._send(200, path.read_bytes(), CONTENT_TYPES.get(path.suffix, "application/octet-stream"), True)
        elif parts == ["api", "info"]:
            self._json(app.info)
        elif parts[:2] == ["api", "legend"] and len(parts) == 3:
            layer = app.by_name.get(parts[2])
            if layer is None:
                self._error(HTTPStatus.NOT_FOUND, f"no layer {parts[2]!r}")
                return
            self._json({"name": layer.name, "title": layer.title, **layer.legend()})
        elif parts[:2] == ["api", "tile"] and len(parts) == 6 and parts[5].endswith(".png"):
            layer = app.by_name.get(parts[2])
            try:
                z, x, y = int(parts[3]), int(parts[4]), int(parts[5][:-4])
            except ValueError:
                layer = None
            tile = layer.tile(z, x, y, app.zoom) if layer is not None else None
            if tile is None:
                self._send(HTTPStatus.NOT_FOUND, b"", "image/png")
                return
            self._send(200, tile, "image/png")
        elif parts == ["api", "values"]:
            row, col = _safe_int(query, "row"), _safe_int(query, "col")
            if not (0 <= row < app.shape[0] and 0 <= col < app.shape[1]):
                self._json({"row": row, "col": col, "outside": True})
                return
            self._json(app.pixels.inspect(row, col, figure=False))
        elif parts == ["api", "pixel"]:
            row, col = _safe_int(query, "row"), _safe_int(query, "col")
            try:
                details = app.pixels.inspect(row, col)
            except IndexError as exc:
                self._error(HTTPStatus.BAD_REQUEST, str(exc))
                return
            if "figure_error" in details:
                print(f"tscube view: pixel row {row}, col {col}: {details['figure_error']}", file=sys.stderr,
                      flush=True)
            self._json(details)
        else:
            self._error(HTTPStatus.NOT_FOUND, f"no such page: {url.path}")


def _static_files() -> dict[str, Path]:
    """The page's files by their URL path under /static/ (nothing else is served)."""
    return {path.relative_to(STATIC).as_posix(): path for path in STATIC.rglob("*") if path.is_file()}


class Viewer:
    """A running viewer: ``url`` to open, ``stop()`` to end it (also a context manager).
    In a notebook it shows itself as the page in an inline frame."""

    def __init__(self, app: ViewApp, server: ThreadingHTTPServer, thread: threading.Thread):
        self.app, self._server, self._thread = app, server, thread
        host, port = server.server_address[:2]
        host = f"[{host}]" if ":" in host else host
        self.url = f"http://{host}:{port}/"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
        if self.app.overviews is not None:
            self.app.overviews.wait(timeout=30)  # overviews being written are finished, not cut

    def wait(self) -> None:
        """Serve until interrupted (Ctrl-C)."""
        try:
            while self._thread.is_alive():
                self._thread.join(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            self.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def __repr__(self) -> str:
        return f"<tscube viewer of {self.app.path.name} at {self.url}>"

    def _repr_html_(self) -> str:
        return f'<iframe src="{self.url}" width="100%" height="720" style="border:1px solid #ccc"></iframe>'


def _is_loopback(host: str) -> bool:
    try:
        return all(info[4][0].startswith("127.") or info[4][0] == "::1"
                   for info in socket.getaddrinfo(host, None))
    except socket.gaierror:
        return False


def view(result, cube=None, *, dates=None, variable: str | None = None, date_pattern: str | None = None,
         host: str = "127.0.0.1", port: int = 0, open_browser: bool = True, start_index: int = 0) -> Viewer:
    """Explore a result in the browser: its maps, and any pixel's series with what the
    algorithm saw (``tscube view`` from the command line).

    Parameters
    ----------
    result : path
        A result of ``tscube monitor``, ``breaks``, ``bfast``, ``stl`` or ``cluster``:
        ``.zarr``, ``.nc`` or GeoTIFF.
    cube : path or xarray.DataArray, optional
        The input cube, for the pixel series (default: the input the result's run
        recorded).
    dates, variable, date_pattern
        How to open ``cube``, as the command that made the result opened it (default:
        what the run recorded).
    host : str
        Interface to listen on: the loopback interface by default. Another address
        serves the result to the network: do that only on a network you trust.
    port : int
        Port (0: any free port).
    open_browser : bool
        Open the page in the default web browser.
    start_index : int
        Which start of a multi-start BFAST Monitor result to show.

    Returns
    -------
    Viewer
        Serving in a background thread: ``viewer.url``, ``viewer.stop()``.
    """
    began = time.perf_counter()
    app = ViewApp(result, cube=cube, dates=dates, variable=variable, date_pattern=date_pattern,
                  start_index=start_index)
    warm = threading.Thread(target=app.warm, name="tscube-view-warm", daemon=True)
    warm.start()
    handler = type("Handler", (_Handler,), {"app": app, "files": _static_files(),
                                            "loopback_only": _is_loopback(host)})
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    server_class = type("Server", (ThreadingHTTPServer,), {"address_family": family, "daemon_threads": True})
    server = server_class((host, port), handler)
    thread = threading.Thread(target=server.serve_forever, name="tscube-view", daemon=True)
    thread.start()
    viewer = Viewer(app, server, thread)
    viewer.opened_s = time.perf_counter() - began
    if open_browser:
        webbrowser.open(viewer.url)
    return viewer
