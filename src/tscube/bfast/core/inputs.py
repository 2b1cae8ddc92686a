"""Inputs as every BFAST method and engine takes them: the checks of the data and of the
parameters that BFAST Monitor and BFAST Lite share, what counts as missing, and the
tolerances that decide a singular or an exact fit."""

from __future__ import annotations

import numpy as np

from ..._numbers import native_byte_order

#: Equilibrated Cholesky pivot (1 - R^2 of a column on the previous ones) below which
#: the history design counts as rank deficient (status SINGULAR_DESIGN). R's QR uses a
#: tolerance of 1e-7 on |r_jj| / ||x_j||, i.e. 1e-14 on this squared scale; 1e-10 also
#: flags designs so close to singular that float rounding would decide the result.
SINGULAR_PIVOT_TOL = 1e-10

#: sigma / max|y_history| below which the history fit counts as exact (PERFECT_FIT).
PERFECT_FIT_RTOL = 1e-10


def check_numeric_dtype(values: np.ndarray, what: str = "data") -> None:
    """Refuse ``values`` that are not float or integer numbers (bool, complex, object,
    strings): a TypeError that names them as ``what``."""
    if values.dtype == bool or not (np.issubdtype(values.dtype, np.integer) or np.issubdtype(values.dtype, np.floating)):
        raise TypeError(f"{what} must be a float or integer array, got dtype {values.dtype}")


def as_numbers(values: np.ndarray, what: str = "data") -> np.ndarray:
    """``values`` as the engines take them: float or integer numbers (anything else is
    refused, :func:`check_numeric_dtype`), float16 widened to float32 (no kernel computes in
    half precision, and float32 holds every float16 exactly), big-endian data swapped to the
    machine's byte order (numba kernels take native numbers only)."""
    check_numeric_dtype(values, what)
    values = native_byte_order(values)
    return values.astype(np.float32) if values.dtype == np.float16 else values


def as_time_first(data) -> np.ndarray:
    """``data`` as an array of numbers (:func:`as_numbers`) with a time axis first (shape
    ``(T, ...)``)."""
    values = as_numbers(np.asarray(data))
    if values.ndim == 0:
        raise ValueError("data must have a time axis first: shape (T, ...), got a scalar")
    return values


def check_order(order) -> int:
    """The harmonic order: a non-negative integer."""
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or order < 0:
        raise ValueError(f"order must be a non-negative integer, got {order!r}")
    return int(order)


def check_nodata(nodata) -> float | None:
    """The value marking missing data: a number (as float), or None."""
    if nodata is None:
        return None
    if isinstance(nodata, bool) or not isinstance(nodata, (int, float, np.integer, np.floating)):
        raise TypeError(f"nodata must be a number, got {nodata!r}")
    return float(nodata)


def invalid_mask(values: np.ndarray, nodata: float | None) -> tuple[np.ndarray, np.ndarray]:
    """Missing-value mask (NaN, inf or ``nodata``) and the inf mask of ``values``."""
    if np.issubdtype(values.dtype, np.integer):
        missing = np.zeros(values.shape, dtype=bool) if nodata is None else values == nodata
        return missing, np.zeros(values.shape, dtype=bool)
    is_inf = np.isinf(values)
    missing = ~np.isfinite(values)
    if nodata is not None:
        missing |= values == nodata
    return missing, is_inf


def kernel_nodata(values: np.ndarray, nodata: float | None) -> tuple[float, bool]:
    """``nodata`` as the float64 a kernel compares float64-converted values with, and whether
    there is one. Compared in the data's dtype, as NumPy does (0.1 in float32 data is
    float32(0.1)); integer data compares exactly."""
    if nodata is None:
        return 0.0, False
    if np.issubdtype(values.dtype, np.floating):
        with np.errstate(over="ignore"):  # a nodata beyond the dtype's range matches nothing
            return float(np.asarray(nodata).astype(values.dtype)), True
    return float(nodata), True
