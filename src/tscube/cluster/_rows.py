"""The passes over the samples that a fit makes before its first iteration: which rows
are finite, and the features' mean and variance; parallel numba kernels (tasks of
:func:`tscube._threads.run_tasks`), whatever the estimator's engine.

NumPy's ``np.isfinite(X).all(axis=1)`` and ``X.var(axis=0)`` are single-threaded and
make (N, D) temporaries: on 1e6 × 8 samples they took about 140 ms of a k-means fit
whose Lloyd iterations take 7 ms each (benchmarks/README.md, k-means).
"""

from __future__ import annotations

import numpy as np

from .._jit import jit
from .._threads import run_tasks, task_count

#: Rows summed into one partial sum before it joins its task's (so that rounding grows
#: with this many rows, not with a task's), and the least rows worth a task.
_ROW_BLOCK = 4096


@jit(nogil=True)
def _finite_rows_kernel(task, n_tasks, X, out):
    n_rows, n_features = X.shape
    for i in range(task * n_rows // n_tasks, (task + 1) * n_rows // n_tasks):
        finite = True
        for j in range(n_features):
            finite &= abs(X[i, j]) < np.inf  # false for NaN and ±inf alike
        out[i] = finite


@jit(nogil=True)
def _deviation_sums_kernel(task, n_tasks, X, center, out_first, out_second):
    """``Σ (x_j − c_j)`` and ``Σ (x_j − c_j)²`` over task ``task``'s rows, per feature."""
    n_rows, n_features = X.shape
    start = task * n_rows // n_tasks
    stop = (task + 1) * n_rows // n_tasks
    first = np.zeros(n_features)
    second = np.zeros(n_features)
    block_first = np.empty(n_features)
    block_second = np.empty(n_features)
    for block_start in range(start, stop, _ROW_BLOCK):
        for j in range(n_features):
            block_first[j] = 0.0
            block_second[j] = 0.0
        for i in range(block_start, min(block_start + _ROW_BLOCK, stop)):
            for j in range(n_features):
                d = X[i, j] - center[j]
                block_first[j] += d
                block_second[j] += d * d
        for j in range(n_features):
            first[j] += block_first[j]
            second[j] += block_second[j]
    for j in range(n_features):  # element copies: a row assignment compiles numba's error formatting
        out_first[task, j] = first[j]
        out_second[task, j] = second[j]


def _samples(X):
    return np.ascontiguousarray(X, dtype=np.float64)


def _n_tasks(n_rows):
    return task_count(-(-n_rows // _ROW_BLOCK))


def finite_rows(X):
    """Boolean mask of the rows of the (N, D) array ``X`` whose features are all finite."""
    X = _samples(X)
    out = np.empty(X.shape[0], dtype=np.bool_)
    if X.shape[0]:
        run_tasks(_finite_rows_kernel, _n_tasks(X.shape[0]), X, out)
    return out


def column_moments(X):
    """``(n, mean, m2)`` of the finite (N, D) array ``X``: its row count, the features'
    means and sums of squared deviations (variance ``m2 / n``), as pooled by Chan et al.
    across chunks. Two passes: the mean, then the deviations from it, corrected by their
    own sum (the "corrected two-pass" algorithm: exact to rounding for any offset)."""
    X = _samples(X)
    n_rows, n_features = X.shape
    if n_rows == 0:
        return 0, np.zeros(n_features), np.zeros(n_features)
    n_tasks = _n_tasks(n_rows)
    first = np.empty((n_tasks, n_features))
    second = np.empty((n_tasks, n_features))
    run_tasks(_deviation_sums_kernel, n_tasks, X, np.zeros(n_features), first, second)
    mean = first.sum(axis=0) / n_rows
    run_tasks(_deviation_sums_kernel, n_tasks, X, mean, first, second)
    deviation = first.sum(axis=0)
    m2 = np.maximum(second.sum(axis=0) - deviation * deviation / n_rows, 0.0)
    return n_rows, mean + deviation / n_rows, m2
