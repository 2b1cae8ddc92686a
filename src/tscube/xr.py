"""The xarray and dask API of tscube in one place (a facade of layer 4).

:func:`bfast_monitor_xarray`, :func:`bfast_lite_xarray`, :func:`bfast_classic_xarray` and
:func:`stl_xarray` run the algorithms over an :class:`xarray.DataArray` with a ``time``
dimension, lazily per dask chunk (``memory`` bounds a chunk's bytes, ``client`` computes
on a dask cluster) and return :class:`xarray.Dataset` results with the input's
coordinates and CRS. They live with their algorithms (``tscube.bfast.monitor``,
``tscube.bfast.lite``, ``tscube.bfast.classic``, ``tscube.stl``) and are built on
:mod:`tscube.xarray_blocks` (:func:`apply_time_series`, :class:`OutputSpec`, ...), which
any other per-pixel function can use too. See ``docs/io.md``.
"""

from __future__ import annotations

from .bfast.classic import bfast_classic_xarray
from .bfast.lite import bfast_lite_xarray
from .bfast.monitor import bfast_monitor_xarray
from .stl import stl_xarray
from .xarray_blocks import (OutputSpec, apply_time_series, chunks_fit, is_xarray, parse_memory,
                            partial_block, serialisable_attrs, time_coordinate)

__all__ = [
    "OutputSpec",
    "apply_time_series",
    "bfast_classic_xarray",
    "bfast_lite_xarray",
    "bfast_monitor_xarray",
    "chunks_fit",
    "is_xarray",
    "parse_memory",
    "partial_block",
    "serialisable_attrs",
    "stl_xarray",
    "time_coordinate",
]
