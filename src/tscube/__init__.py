"""tscube — per-pixel time-series analysis over satellite image cubes, in parallel.

Main entry points: :func:`bfast_monitor` (change detection, equal to R
``bfast::bfastmonitor``), :func:`bfast_lite` and :func:`bfast_classic` (every break of a
whole series, R ``bfast::bfastlite`` and ``bfast::bfast``), :func:`stl` (batched seasonal-trend decomposition),
:mod:`tscube.cluster` (k-means, Gaussian mixtures), :mod:`tscube.io` (GeoTIFF, NetCDF,
Zarr, STAC catalogs), :mod:`tscube.datasets` (synthetic cubes and catalogs) and
:func:`view` (a result in the browser, pixel by pixel).

Layers, imports only downward (docs/architecture.md, checked by
tests/test_architecture.py): 1. foundations (config, engines, timeaxis, parallel,
datasets); 2. generic machinery that knows no algorithm (xarray_blocks, io, stac, runs,
figures); 3. one package per algorithm (stl, cluster) with its NumPy API, engines,
xarray wrapper and plots; 4. bfast, the same for the BFAST methods (classic BFAST starts
from an STL); 5. the public faces (this package, tscube.xr, tscube.plot, the browser viewer
tscube.viewer) and the command line (cli).
"""

from importlib.metadata import PackageNotFoundError, version

from .bfast import (BfastClassicResult, BfastClassicStatus, BfastLiteResult, BfastLiteStatus, BfastMonitor,
                    BfastMonitorResult, BfastStatus, bfast_classic, bfast_lite, bfast_monitor)
from .bfast.monitor import plot_pixel
from .stl import StlResult, StlStatus, stl
from .viewer import view

try:
    __version__ = version("tscube")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0+unknown"

__all__ = ["__version__", "bfast_monitor", "BfastMonitor", "BfastMonitorResult", "BfastStatus", "bfast_lite", "BfastLiteResult", "BfastLiteStatus", "bfast_classic", "BfastClassicResult", "BfastClassicStatus", "stl", "StlResult", "StlStatus", "plot_pixel", "view"]
