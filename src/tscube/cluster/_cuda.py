"""CUDA engine (numba.cuda). Imported only when ``engine="cuda"`` is requested.

The data is copied to the device once per fit (:func:`prepare`); every EM or
Lloyd iteration then runs two kernels:

1. one thread per sample computes the K log-densities (triangular products with
   the precision Cholesky factors), the log-sum-exp and writes the
   responsibilities (or the nearest centre) to device memory;
2. a grid of ``(sample slice, statistic)`` threads sums one sufficient statistic
   (``Σr``, one entry of ``Σr(x-μ)`` or of the lower triangle of
   ``Σr(x-μ)(x-μ)^T``, and the log-likelihood) over a strided slice of samples
   and adds its partial sum atomically to the output.

Only the small statistics come back to the host, where the M step runs. Diagonal
covariances use the same kernels with diagonal factors. Same interface as
:mod:`tscube.cluster._reference`.
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda

from tscube import config

from ._common import nearest_centre
from ._reference import LOG_2PI

_nearest_centre = cuda.jit(device=True)(nearest_centre)

_SLICES_PER_BLOCK = 32  # threads along the sample-slice axis of the statistics grid
_MAX_SLICES = 8192  # at most this many partial sums per statistic
_MIN_SAMPLES_PER_SLICE = 16


def check_available():
    """Raise a clear error when no CUDA device (or simulator) can be used."""
    # the module's ``cuda`` name is swapped by the simulator while a kernel runs
    from numba import cuda as numba_cuda

    if not numba_cuda.is_available():
        raise RuntimeError(
            "engine='cuda' needs an NVIDIA GPU with a working CUDA driver "
            "(numba.cuda.is_available() is False); use engine='cpu'"
        )


def prepare(X):
    """Copy ``X`` (float64, C order) to the device once; device arrays pass through."""
    if hasattr(X, "copy_to_host"):  # already a device array
        return X
    return cuda.to_device(np.ascontiguousarray(X, dtype=np.float64))


def _launch_1d(n):
    threads = max(1, min(int(config.CUDA_THREADS_PER_BLOCK), n))
    return (n + threads - 1) // threads, threads


def _slices(n):
    n_slices = min(_MAX_SLICES, max(1, -(-n // _MIN_SAMPLES_PER_SLICE)))
    n_slices = -(-n_slices // _SLICES_PER_BLOCK) * _SLICES_PER_BLOCK
    return n_slices


@cuda.jit
def _log_resp_kernel(X, means, prec_t, log_const, exponentiate, out_resp, out_norm):
    """Per sample: ``log w_k + log N(x | k)`` for all k, log-sum-exp, responsibilities."""
    i = cuda.grid(1)
    n_samples, n_features = X.shape
    if i >= n_samples:
        return
    n_components = means.shape[0]
    best = -math.inf
    for k in range(n_components):
        mahalanobis = 0.0
        for j in range(n_features):
            y = 0.0
            for m in range(j + 1):
                y += (X[i, m] - means[k, m]) * prec_t[k, j, m]
            mahalanobis += y * y
        v = log_const[k] - 0.5 * mahalanobis
        out_resp[i, k] = v
        if v > best:
            best = v
    total = 0.0
    for k in range(n_components):
        shifted = out_resp[i, k] - best
        if shifted > -700.0:
            total += math.exp(shifted)
    norm = best + math.log(total)
    out_norm[i] = norm
    for k in range(n_components):
        shifted = out_resp[i, k] - norm
        if exponentiate:
            out_resp[i, k] = math.exp(shifted) if shifted > -700.0 else 0.0
        else:
            out_resp[i, k] = shifted


@cuda.jit
def _gmm_statistics_kernel(X, means, resp, norm, stat_a, stat_b, n_slices, out):
    """Thread (slice, s): partial sum of statistic ``s`` over samples slice, slice+n_slices, ...

    Statistic ``s`` of component ``k = s // n_stat`` is ``Σ r_ik d_a d_b`` with
    ``d = x - μ_k`` and ``d_{-1} = 1``; the last statistic is ``Σ log p(x_i)``.
    """
    slice_index, s = cuda.grid(2)
    n_samples = X.shape[0]
    n_stats_total = out.shape[0]
    if slice_index >= n_slices or s >= n_stats_total:
        return
    acc = 0.0
    if s == n_stats_total - 1:
        for i in range(slice_index, n_samples, n_slices):
            acc += norm[i]
    else:
        n_stat = stat_a.shape[0]
        k = s // n_stat
        a = stat_a[s % n_stat]
        b = stat_b[s % n_stat]
        for i in range(slice_index, n_samples, n_slices):
            r = resp[i, k]
            if r != 0.0:
                if a >= 0:
                    r *= X[i, a] - means[k, a]
                if b >= 0:
                    r *= X[i, b] - means[k, b]
                acc += r
    cuda.atomic.add(out, s, acc)


@cuda.jit
def _nearest_kernel(X, centers, out_labels, out_distance):
    i = cuda.grid(1)
    if i >= X.shape[0]:
        return
    best_k, best = _nearest_centre(X, i, centers)
    out_labels[i] = best_k
    out_distance[i] = best


@cuda.jit
def _kmeans_statistics_kernel(X, labels, distance, n_slices, out):
    """Thread (slice, s), ``s = k (D + 2) + t``: count (t=0), SSE (t=1), Σx_j (t=2+j)."""
    slice_index, s = cuda.grid(2)
    n_samples, n_features = X.shape
    if slice_index >= n_slices or s >= out.shape[0]:
        return
    k = s // (n_features + 2)
    t = s % (n_features + 2)
    acc = 0.0
    for i in range(slice_index, n_samples, n_slices):
        if labels[i] == k:
            if t == 0:
                acc += 1.0
            elif t == 1:
                acc += distance[i]
            else:
                acc += X[i, t - 2]
    cuda.atomic.add(out, s, acc)


def _full_factors(precisions_cholesky, covariance_type):
    if covariance_type == "full":
        return precisions_cholesky
    return np.stack([np.diag(p) for p in precisions_cholesky])


def _log_constants(factors, log_weights):
    log_det = np.log(np.diagonal(factors, axis1=1, axis2=2)).sum(axis=1)
    return log_weights + log_det - 0.5 * factors.shape[1] * LOG_2PI


def _responsibilities(d_X, means, precisions_cholesky, log_weights, covariance_type,
                      exponentiate):
    n_samples = d_X.shape[0]
    factors = _full_factors(np.asarray(precisions_cholesky, dtype=np.float64), covariance_type)
    d_means = cuda.to_device(np.ascontiguousarray(means, dtype=np.float64))
    d_prec_t = cuda.to_device(np.ascontiguousarray(factors.transpose(0, 2, 1)))
    d_const = cuda.to_device(_log_constants(factors, np.asarray(log_weights, dtype=np.float64)))
    d_resp = cuda.device_array((n_samples, means.shape[0]), dtype=np.float64)
    d_norm = cuda.device_array(n_samples, dtype=np.float64)
    blocks, threads = _launch_1d(n_samples)
    _log_resp_kernel[blocks, threads](d_X, d_means, d_prec_t, d_const, exponentiate,
                                      d_resp, d_norm)
    return d_means, d_resp, d_norm


def _statistic_indices(n_features, covariance_type):
    """(a, b) per statistic of one component: nk, s1_j, then s2 entries."""
    pairs = [(-1, -1)] + [(j, -1) for j in range(n_features)]
    if covariance_type == "full":
        pairs += [(j, m) for j in range(n_features) for m in range(j + 1)]
    else:
        pairs += [(j, j) for j in range(n_features)]
    a, b = zip(*pairs)
    return np.array(a, dtype=np.int64), np.array(b, dtype=np.int64)


def gmm_statistics(X, means, precisions_cholesky, log_weights, covariance_type):
    """Same contract as :func:`tscube.cluster._reference.gmm_statistics`."""
    d_X = prepare(X)
    n_samples, n_features = d_X.shape
    n_components = means.shape[0]
    d_means, d_resp, d_norm = _responsibilities(
        d_X, means, precisions_cholesky, log_weights, covariance_type, True)
    stat_a, stat_b = _statistic_indices(n_features, covariance_type)
    n_stat = stat_a.shape[0]
    d_out = cuda.to_device(np.zeros(n_components * n_stat + 1))
    n_slices = _slices(n_samples)
    grid = (n_slices // _SLICES_PER_BLOCK, n_components * n_stat + 1)
    _gmm_statistics_kernel[grid, (_SLICES_PER_BLOCK, 1)](
        d_X, d_means, d_resp, d_norm, cuda.to_device(stat_a), cuda.to_device(stat_b),
        n_slices, d_out)
    out = d_out.copy_to_host()
    per_component = out[:-1].reshape(n_components, n_stat)
    nk = per_component[:, 0].copy()
    s1 = per_component[:, 1:1 + n_features].copy()
    tail = per_component[:, 1 + n_features:]
    if covariance_type == "full":
        s2 = np.zeros((n_components, n_features, n_features))
        order = [(j, m) for j in range(n_features) for m in range(j + 1)]
        rows = np.array([p[0] for p in order])
        cols = np.array([p[1] for p in order])
        s2[:, rows, cols] = tail
        s2[:, cols, rows] = tail
    else:
        s2 = tail.copy()
    return float(out[-1]), nk, s1, s2


def gmm_log_resp(X, means, precisions_cholesky, log_weights, covariance_type):
    """Same contract as :func:`tscube.cluster._reference.gmm_log_resp`."""
    d_X = prepare(X)
    _, d_resp, d_norm = _responsibilities(
        d_X, means, precisions_cholesky, log_weights, covariance_type, False)
    return d_resp.copy_to_host(), d_norm.copy_to_host()


def kmeans_statistics(X, centers, sums_only=False):
    """Same contract as :func:`tscube.cluster._reference.kmeans_statistics` (labels and
    SSE are always returned: the statistics kernel reads both)."""
    d_X = prepare(X)
    n_samples, n_features = d_X.shape
    n_clusters = centers.shape[0]
    d_labels = cuda.device_array(n_samples, dtype=np.int64)
    d_distance = cuda.device_array(n_samples, dtype=np.float64)
    blocks, threads = _launch_1d(n_samples)
    _nearest_kernel[blocks, threads](
        d_X, cuda.to_device(np.ascontiguousarray(centers, dtype=np.float64)),
        d_labels, d_distance)
    n_stats = n_clusters * (n_features + 2)
    d_out = cuda.to_device(np.zeros(n_stats))
    n_slices = _slices(n_samples)
    _kmeans_statistics_kernel[(n_slices // _SLICES_PER_BLOCK, n_stats), (_SLICES_PER_BLOCK, 1)](
        d_X, d_labels, d_distance, n_slices, d_out)
    out = d_out.copy_to_host().reshape(n_clusters, n_features + 2)
    return d_labels.copy_to_host(), out[:, 1].copy(), out[:, 0].copy(), out[:, 2:].copy()
