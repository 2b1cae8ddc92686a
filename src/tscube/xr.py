"""xarray and dask front end: run tscube's per-pixel algorithms over labelled cubes.

Every algorithm of tscube works on NumPy arrays shaped ``(T, pixels...)``. This module
maps them over an :class:`xarray.DataArray` with a ``time`` dimension (dates from its
coordinate, every other dimension is pixels) with :func:`xarray.apply_ufunc`:

* NumPy-backed input runs at once; dask-backed input stays lazy and runs per chunk
  (``dask="parallelized"``). The time axis must be one chunk: it is rechunked, with a
  ``UserWarning``, when it is not.
* ``memory`` bounds the bytes one chunk may use while it is processed (input, working
  copy and outputs), which sets the number of pixels per chunk.
* ``client`` (a ``dask.distributed.Client``) computes the result on that cluster. The
  library never starts a cluster itself; the ``tscube`` CLI does for ``--workers``.
* Results are :class:`xarray.Dataset` objects: one variable per output, the input's
  pixel dimensions and coordinates, parameters in ``attrs`` (netCDF-serialisable) and
  the CRS/transform of rioxarray kept.

xarray is an optional dependency (``pip install tscube[geo]``): it is imported inside
the functions, so ``is_xarray`` is cheap to call from the NumPy entry points.
"""

from __future__ import annotations

from .bfast._xarray import bfast_monitor_xarray
from .stl._xarray import stl_xarray
from .xarray_blocks import (OutputSpec, apply_time_series, chunks_fit, is_xarray, parse_memory,
                            partial_block, serialisable_attrs, time_coordinate)

__all__ = [
    "OutputSpec",
    "apply_time_series",
    "bfast_monitor_xarray",
    "chunks_fit",
    "is_xarray",
    "parse_memory",
    "partial_block",
    "serialisable_attrs",
    "stl_xarray",
    "time_coordinate",
]
