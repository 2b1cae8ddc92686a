"""Cubes as the numba kernels read them in place: float32 or float64 numbers in the
machine's byte order."""

from __future__ import annotations

import numpy as np


def native_byte_order(values: np.ndarray) -> np.ndarray:
    """``values`` in the machine's byte order (big-endian data swapped once, values
    unchanged): numba kernels take native numbers only."""
    return values if values.dtype.isnative else values.astype(values.dtype.newbyteorder("="))


def as_kernel_floats(values: np.ndarray, nodata: float | None) -> tuple[np.ndarray, float | None]:
    """``(values, nodata)`` with ``values`` float32 or float64 in native byte order.

    Big-endian data is swapped; other types are converted once, ``nodata`` becoming NaN
    (and ``None``): integers of up to 16 bits to float32, which holds every one of them,
    the rest to float64. One float kernel then serves every integer type instead of one
    compiled per type (tens of seconds each), and float16 and longdouble, which are not
    numba types, are read too."""
    values = native_byte_order(values)
    if values.dtype not in (np.float32, np.float64):
        small = values.dtype.kind in "iu" and values.dtype.itemsize <= 2
        converted = values.astype(np.float32 if small else np.float64)
        if nodata is not None:
            with np.errstate(over="ignore", invalid="ignore"):
                converted[values == nodata] = np.nan
        values, nodata = converted, None
    return values, nodata
