"""NumPy references for the data-parallel primitives of :mod:`tscube.parallel`.

Each function here states *what* a CUDA primitive in :mod:`tscube.parallel.cuda`
must compute, written for clarity rather than speed. The CUDA kernels are tested
against these functions under the numba CUDA simulator, and these functions are tested
against plain Python loops and ``numpy.linalg`` in ``tests/test_parallel_reference.py``.

Conventions shared with the CUDA engine
---------------------------------------
* Scans accumulate in ``dtype`` (default: float64 for floating input, int64 for integer
  and boolean input), so float32 data sum in float64 where the result decides something.
* Row-wise functions work along the last axis; leading axes are a batch (pixels).
* Missing values are NaN (the paper's convention: ``1 - isnan(y)`` is the mask).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "accumulation_dtype",
    "inclusive_scan",
    "exclusive_scan",
    "segmented_scan",
    "batched_scan",
    "batched_sum",
    "compact_with_keys",
    "first_true",
    "argmin",
    "batched_masked_gram",
    "batched_masked_xty",
    "batched_gauss_jordan",
]

#: Default relative pivot tolerance of the Gauss–Jordan solves: a pivot whose
#: magnitude is at most ``rtol * max|A|`` marks the system singular.
DEFAULT_PIVOT_RTOL = 1e-10


def accumulation_dtype(input_dtype, dtype=None) -> np.dtype:
    """Return the dtype a scan or reduction of ``input_dtype`` accumulates in.

    Parameters
    ----------
    input_dtype : dtype-like
        dtype of the data.
    dtype : dtype-like, optional
        Requested accumulation dtype; must be numeric when given.

    Returns
    -------
    numpy.dtype
        ``dtype`` if given, else float64 for floating data and int64 for integer or
        boolean data.
    """
    if dtype is not None:
        dtype = np.dtype(dtype)
        if dtype.kind not in "iuf":
            raise TypeError(f"dtype must be an integer or floating dtype, got {dtype}")
        return dtype
    kind = np.dtype(input_dtype).kind
    if kind == "f":
        return np.dtype(np.float64)
    if kind in "iub":
        return np.dtype(np.int64)
    raise TypeError(f"x must hold numbers or booleans, got dtype {np.dtype(input_dtype)}")


def last_axis_rows(a: np.ndarray) -> np.ndarray:
    """View ``a`` as a 2-D stack of its last-axis rows (works for empty shapes)."""
    return a.reshape(int(np.prod(a.shape[:-1], dtype=np.int64)), a.shape[-1])


def as_vector(x, name: str) -> np.ndarray:
    x = np.asarray(x)
    if x.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {x.shape}")
    if x.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold numbers or booleans, got dtype {x.dtype}")
    return x


def inclusive_scan(x, dtype=None) -> np.ndarray:
    """Inclusive prefix sum ``out[i] = x[0] + ... + x[i]``.

    Parameters
    ----------
    x : array_like, shape (n,)
        Numbers or booleans.
    dtype : dtype-like, optional
        Accumulation and output dtype (see :func:`accumulation_dtype`).

    Returns
    -------
    numpy.ndarray, shape (n,)
    """
    x = as_vector(x, "x")
    return np.cumsum(x, dtype=accumulation_dtype(x.dtype, dtype))


def exclusive_scan(x, dtype=None) -> np.ndarray:
    """Exclusive prefix sum ``out[i] = x[0] + ... + x[i-1]``, ``out[0] = 0``.

    Parameters
    ----------
    x : array_like, shape (n,)
        Numbers or booleans.
    dtype : dtype-like, optional
        Accumulation and output dtype (see :func:`accumulation_dtype`).

    Returns
    -------
    numpy.ndarray, shape (n,)
    """
    x = as_vector(x, "x")
    acc = accumulation_dtype(x.dtype, dtype)
    out = np.zeros(x.shape[0], dtype=acc)
    if x.shape[0] > 1:
        out[1:] = np.cumsum(x[:-1], dtype=acc)
    return out


def segmented_scan(x, flags, exclusive: bool = False, dtype=None) -> np.ndarray:
    """Prefix sum restarted at every segment head.

    Parameters
    ----------
    x : array_like, shape (n,)
        Numbers or booleans.
    flags : array_like of bool, shape (n,)
        ``flags[i]`` true means a new segment starts at ``i`` (the flags form of
        segment descriptors). Element 0 always starts a segment.
    exclusive : bool, default False
        Exclusive scan within each segment (segment heads get 0).
    dtype : dtype-like, optional
        Accumulation and output dtype (see :func:`accumulation_dtype`).

    Returns
    -------
    numpy.ndarray, shape (n,)
    """
    x = as_vector(x, "x")
    flags = as_vector(flags, "flags")
    if flags.shape != x.shape:
        raise ValueError(f"flags must have the shape of x {x.shape}, got {flags.shape}")
    acc = accumulation_dtype(x.dtype, dtype)
    heads = np.flatnonzero(flags.astype(bool))
    pieces = np.split(x, heads[heads > 0])
    scan = exclusive_scan if exclusive else inclusive_scan
    out = [scan(piece, dtype=acc) for piece in pieces]
    return np.concatenate(out) if out else np.zeros(0, dtype=acc)


def batched_scan(values, exclusive: bool = False, dtype=None) -> np.ndarray:
    """Prefix sum of every row along the last axis (regular segments, one per pixel).

    Parameters
    ----------
    values : array_like, shape (..., n)
        Numbers or booleans.
    exclusive : bool, default False
        Exclusive instead of inclusive scan.
    dtype : dtype-like, optional
        Accumulation and output dtype (see :func:`accumulation_dtype`).

    Returns
    -------
    numpy.ndarray, shape (..., n)
    """
    values = np.asarray(values)
    if values.ndim < 1:
        raise ValueError("values must have at least one dimension")
    acc = accumulation_dtype(values.dtype, dtype)
    rows = last_axis_rows(values)
    scan = exclusive_scan if exclusive else inclusive_scan
    out = np.zeros(rows.shape, dtype=acc)
    for r, row in enumerate(rows):
        out[r] = scan(row, dtype=acc)
    return out.reshape(values.shape)


def batched_sum(values, dtype=None, skip_nan: bool = False) -> np.ndarray:
    """Sum of every row along the last axis (e.g. valid counts, residual sums of squares).

    Parameters
    ----------
    values : array_like, shape (..., n)
        Numbers or booleans.
    dtype : dtype-like, optional
        Accumulation and output dtype (see :func:`accumulation_dtype`).
    skip_nan : bool, default False
        Treat NaN as 0 instead of propagating it.

    Returns
    -------
    numpy.ndarray, shape (...)
    """
    values = np.asarray(values)
    if values.ndim < 1:
        raise ValueError("values must have at least one dimension")
    acc = accumulation_dtype(values.dtype, dtype)
    if skip_nan and values.dtype.kind == "f":
        values = np.where(np.isnan(values), 0, values)
    return np.sum(values, axis=-1, dtype=acc)


def compact_with_keys(values, fill_value=np.nan, key_fill: int = 0):
    """Move the non-NaN values of each row to its front, with their original indices.

    This is the paper's ``filterNaNsWKeys``: outputs keep the input's length and are
    padded, so that every pixel has the same (maximal) size.

    Parameters
    ----------
    values : array_like of float, shape (..., n)
        Rows to compact along the last axis; NaN marks a missing value.
    fill_value : float, default NaN
        Padding of the compacted values after the valid ones.
    key_fill : int, default 0
        Padding of the keys after the valid ones (0 as in the paper).

    Returns
    -------
    count : numpy.ndarray of int64, shape (...)
        Number of valid (non-NaN) values per row.
    compacted : numpy.ndarray, shape (..., n)
        Valid values in their original order, then ``fill_value``.
    keys : numpy.ndarray of int64, shape (..., n)
        Original index of each compacted value, then ``key_fill``.
    """
    values = np.asarray(values)
    if values.ndim < 1:
        raise ValueError("values must have at least one dimension")
    if values.dtype.kind != "f":
        raise TypeError(f"values must be floating point (NaN = missing), got {values.dtype}")
    rows = last_axis_rows(values)
    count = np.zeros(rows.shape[0], dtype=np.int64)
    compacted = np.full(rows.shape, fill_value, dtype=values.dtype)
    keys = np.full(rows.shape, key_fill, dtype=np.int64)
    for r, row in enumerate(rows):
        valid = np.flatnonzero(~np.isnan(row))
        count[r] = valid.size
        compacted[r, : valid.size] = row[valid]
        keys[r, : valid.size] = valid
    lead = values.shape[:-1]
    return count.reshape(lead), compacted.reshape(values.shape), keys.reshape(values.shape)


def first_true(mask) -> np.ndarray:
    """Index of the first true (non-zero) element of each row, -1 where there is none.

    Parameters
    ----------
    mask : array_like, shape (..., n)
        Booleans or numbers (non-zero counts as true).

    Returns
    -------
    numpy.ndarray of int64, shape (...)
    """
    mask = np.asarray(mask)
    if mask.ndim < 1:
        raise ValueError("mask must have at least one dimension")
    truth = mask.astype(bool)
    if truth.shape[-1] == 0:
        return np.full(truth.shape[:-1], -1, dtype=np.int64)
    index = np.argmax(truth, axis=-1).astype(np.int64)
    return np.where(truth.any(axis=-1), index, -1)


def argmin(x) -> np.ndarray:
    """Index of the smallest non-NaN value of each row (first one on ties), -1 if none.

    Parameters
    ----------
    x : array_like, shape (..., n)
        Numbers; NaN values are ignored.

    Returns
    -------
    numpy.ndarray of int64, shape (...)
    """
    x = np.asarray(x)
    if x.ndim < 1:
        raise ValueError("x must have at least one dimension")
    if x.dtype.kind not in "iuf":
        raise TypeError(f"x must hold numbers, got dtype {x.dtype}")
    rows = last_axis_rows(x).astype(np.float64)
    index = np.full(rows.shape[0], -1, dtype=np.int64)
    for r, row in enumerate(rows):
        if not np.all(np.isnan(row)):
            index[r] = np.nanargmin(row)
    return index.reshape(x.shape[:-1])


def check_design_and_batch(X, batch, name: str):
    X = np.asarray(X)
    batch = np.asarray(batch)
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-D (n_dates, n_regressors) design, got shape {X.shape}")
    if batch.ndim != 2 or batch.shape[1] != X.shape[0]:
        raise ValueError(
            f"{name} must have shape (n_pixels, {X.shape[0]}) to match X, got {batch.shape}"
        )
    return X, batch


def batched_masked_gram(X, mask, dtype=np.float64) -> np.ndarray:
    """Per-pixel Gram matrix of the design under that pixel's mask.

    ``G[p] = sum_t mask[p, t] * outer(X[t], X[t])`` — the paper's ``mmMulFilt``
    (Fig. 4): the design is not filtered, masked dates are simply not accumulated.

    Parameters
    ----------
    X : array_like, shape (n, k)
        Design matrix shared by all pixels (dates by regressors).
    mask : array_like, shape (m, n)
        Non-zero where pixel ``p`` has a valid observation at date ``t``.
    dtype : dtype-like, default float64
        Accumulation and output dtype.

    Returns
    -------
    numpy.ndarray, shape (m, k, k)
    """
    X, mask = check_design_and_batch(X, mask, "mask")
    w = (mask != 0).astype(dtype)
    Xd = X.astype(dtype)
    return np.einsum("pt,tj,tk->pjk", w, Xd, Xd)


def batched_masked_xty(X, Y, dtype=np.float64) -> np.ndarray:
    """Per-pixel ``X' y`` over the pixel's valid (non-NaN) dates (``mvMulFilt``).

    Parameters
    ----------
    X : array_like, shape (n, k)
        Design matrix shared by all pixels.
    Y : array_like of float, shape (m, n)
        One time series per pixel; NaN marks a missing date.
    dtype : dtype-like, default float64
        Accumulation and output dtype.

    Returns
    -------
    numpy.ndarray, shape (m, k)
    """
    X, Y = check_design_and_batch(X, Y, "Y")
    if Y.dtype.kind != "f":
        Y = Y.astype(np.float64)
    filled = np.where(np.isnan(Y), 0.0, Y).astype(dtype)
    return filled @ X.astype(dtype)


def batched_gauss_jordan(A, B=None, rtol: float = DEFAULT_PIVOT_RTOL):
    """Solve ``A[p] X[p] = B[p]`` (or invert ``A[p]``) by Gauss–Jordan elimination.

    Partial pivoting: at step ``q`` the row with the largest ``|A[r, q]|``, ``r >= q``,
    becomes the pivot row. A system is flagged singular when a pivot's magnitude is at
    most ``rtol * max|A[p]|`` (or ``A[p]`` is all zero or not finite); its solution is
    all NaN, never a silently wrong number.

    Parameters
    ----------
    A : array_like, shape (m, k, k)
        Batch of small square matrices (e.g. masked Gram matrices).
    B : array_like, shape (m, k, r) or (m, k), optional
        Right-hand sides; the identity (giving the inverse) when omitted.
    rtol : float, default 1e-10
        Relative pivot tolerance.

    Returns
    -------
    X : numpy.ndarray of float64, shape of B (or (m, k, k))
        Solutions, NaN for singular systems.
    singular : numpy.ndarray of bool, shape (m,)
    """
    A = np.asarray(A, dtype=np.float64)
    if A.ndim != 3 or A.shape[1] != A.shape[2]:
        raise ValueError(f"A must have shape (m, k, k), got {A.shape}")
    m, k, _ = A.shape
    vector_rhs = False
    if B is None:
        B = np.broadcast_to(np.eye(k), (m, k, k))
    else:
        B = np.asarray(B, dtype=np.float64)
        if B.ndim == 2:
            B, vector_rhs = B[:, :, None], True
        if B.ndim != 3 or B.shape[:2] != (m, k):
            raise ValueError(f"B must have shape ({m}, {k}) or ({m}, {k}, r), got {B.shape}")
    if not rtol >= 0:
        raise ValueError(f"rtol must be non-negative, got {rtol}")
    aug = np.concatenate([A, B], axis=2)
    scale = np.max(np.abs(A), axis=(1, 2)) if k else np.zeros(m)
    singular = ~np.isfinite(scale) | (scale == 0) if k else np.zeros(m, dtype=bool)
    batch = np.arange(m)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        _eliminate(aug, k, scale, singular, batch, rtol)
    X = aug[:, :, k:]
    X[singular] = np.nan
    if vector_rhs:
        X = X[:, :, 0]
    return X, singular


def _eliminate(aug, k, scale, singular, batch, rtol):
    """Gauss–Jordan steps in place on the augmented batch (singular systems: garbage,
    NaN-ed by the caller)."""
    for q in range(k):
        pivot_row = q + np.argmax(np.abs(aug[:, q:, q]), axis=1)
        rows_q = aug[batch, q].copy()
        aug[batch, q] = aug[batch, pivot_row]
        aug[batch, pivot_row] = rows_q
        pivot = aug[:, q, q]
        singular |= ~(np.abs(pivot) > rtol * scale)
        safe_pivot = np.where(singular, 1.0, pivot)
        aug[:, q, :] /= safe_pivot[:, None]
        factors = aug[:, :, q].copy()
        factors[:, q] = 0.0
        aug -= factors[:, :, None] * aug[:, q, None, :]
