"""CPU engine: numba kernels, one pass over the data per E+M step.

Samples are cut into blocks of ``config.CLUSTER_BLOCK_SAMPLES``; blocks run in
parallel (``prange``) and each keeps its own partial sums (log-likelihood,
``Σr``, ``Σr(x-μ)``, ``Σr(x-μ)(x-μ)^T``), which are added up at the end — the
paper's per-thread partial sums, made independent of the thread count. Nothing of
size N×K×D is ever allocated; per-sample work is held in small per-block buffers.
Same interface as :mod:`tscube.cluster._reference`.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from numba import njit, prange

from tscube import config

from ._reference import LOG_2PI, prepare  # noqa: F401  (same preparation)


def _n_blocks(n_samples):
    block = max(1, int(config.CLUSTER_BLOCK_SAMPLES))
    return block, max(1, -(-n_samples // block))


def _log_constants(precisions_cholesky, log_weights, covariance_type):
    """``log w_k + log|P_k| - D/2 log 2π`` per component."""
    n_features = precisions_cholesky.shape[1]
    if covariance_type == "full":
        log_det = np.log(np.diagonal(precisions_cholesky, axis1=1, axis2=2)).sum(axis=1)
    else:
        log_det = np.log(precisions_cholesky).sum(axis=1)
    return np.ascontiguousarray(log_weights + log_det - 0.5 * n_features * LOG_2PI)


@njit(cache=True, inline="always")
def _component_log_prob_full(X, i, means, prec_t, log_const, k, diff):
    """Fill ``diff = x_i - μ_k`` and return ``log w_k + log N(x_i | k)``."""
    n_features = X.shape[1]
    for j in range(n_features):
        diff[j] = X[i, j] - means[k, j]
    mahalanobis = 0.0
    for j in range(n_features):
        y = 0.0
        for m in range(j + 1):  # (x-μ) P with P upper triangular: rows m <= j
            y += diff[m] * prec_t[k, j, m]
        mahalanobis += y * y
    return log_const[k] - 0.5 * mahalanobis


@njit(cache=True, inline="always")
def _component_log_prob_diag(X, i, means, prec, log_const, k, diff):
    n_features = X.shape[1]
    mahalanobis = 0.0
    for j in range(n_features):
        diff[j] = X[i, j] - means[k, j]
        y = diff[j] * prec[k, j, 0]  # diag precisions arrive as (K, D, 1)
        mahalanobis += y * y
    return log_const[k] - 0.5 * mahalanobis


@njit(parallel=True, cache=True)
def _gmm_statistics_kernel(X, means, prec, log_const, full, block, n_blocks,
                           out_ll, out_nk, out_s1, out_s2):
    n_samples, n_features = X.shape
    n_components = means.shape[0]
    for b in prange(n_blocks):
        diff = np.empty((n_components, n_features))
        log_prob = np.empty(n_components)
        nk = np.zeros(n_components)
        s1 = np.zeros((n_components, n_features))
        s2 = np.zeros((n_components, n_features, n_features))
        log_likelihood = 0.0
        for i in range(b * block, min((b + 1) * block, n_samples)):
            best = -np.inf
            for k in range(n_components):
                if full:
                    v = _component_log_prob_full(X, i, means, prec, log_const, k, diff[k])
                else:
                    v = _component_log_prob_diag(X, i, means, prec, log_const, k, diff[k])
                log_prob[k] = v
                if v > best:
                    best = v
            total = 0.0  # log-sum-exp: shift by the largest term
            for k in range(n_components):
                # exp(< -700) < 1e-304 is flushed to 0: subnormal numbers would make
                # every following product ~100x slower for no visible change.
                shifted = log_prob[k] - best
                log_prob[k] = np.exp(shifted) if shifted > -700.0 else 0.0
                total += log_prob[k]
            log_likelihood += best + np.log(total)
            inv_total = 1.0 / total
            for k in range(n_components):
                r = log_prob[k] * inv_total
                if r == 0.0:
                    continue
                nk[k] += r
                for j in range(n_features):
                    rd = r * diff[k, j]
                    s1[k, j] += rd
                    if full:
                        for m in range(j + 1):
                            s2[k, j, m] += rd * diff[k, m]
                    else:
                        s2[k, j, j] += rd * diff[k, j]
        out_ll[b] = log_likelihood
        out_nk[b] = nk
        out_s1[b] = s1
        out_s2[b] = s2


@njit(parallel=True, cache=True)
def _gmm_log_resp_kernel(X, means, prec, log_const, full, out_log_resp, out_norm):
    n_samples, n_features = X.shape
    n_components = means.shape[0]
    for i in prange(n_samples):
        diff = np.empty(n_features)
        best = -np.inf
        for k in range(n_components):
            if full:
                v = _component_log_prob_full(X, i, means, prec, log_const, k, diff)
            else:
                v = _component_log_prob_diag(X, i, means, prec, log_const, k, diff)
            out_log_resp[i, k] = v
            if v > best:
                best = v
        total = 0.0
        for k in range(n_components):
            shifted = out_log_resp[i, k] - best
            if shifted > -700.0:  # skip subnormal terms (see _gmm_statistics_kernel)
                total += np.exp(shifted)
        norm = best + np.log(total)
        out_norm[i] = norm
        for k in range(n_components):
            out_log_resp[i, k] -= norm


#: Samples per tile of the k-means kernel: a tile's features are transposed to
#: ``(D, KMEANS_TILE)`` so that the distance loops run across samples (SIMD lanes).
KMEANS_TILE = 64


@lru_cache(maxsize=None)
def _kmeans_kernel(n_features: int):
    """The k-means assignment kernel for ``n_features`` features.

    A tile of samples is transposed so that the loop over its samples is a SIMD loop; the
    number of features is a compile-time constant of the kernel (a closure variable), so
    that LLVM unrolls the feature loop and keeps each sample's distance in a register
    (2.2x faster than a run-time feature count, measured on 1e6 x 8 samples, 16 centres).
    The arithmetic per sample (``Σ_j (x_j - c_j)²`` in feature order, first centre on
    ties) is that of a plain per-sample loop, so labels do not depend on the tiling.
    Compiled per feature count on first use (not cached on disk: closures cannot be).
    """
    n_feat = n_features

    @njit
    def assign_tile(X, t0, m, centers, xt, best, best_k):
        for j in range(n_feat):
            for i in range(m):
                xt[j, i] = X[t0 + i, j]
        for i in range(m):
            best[i] = np.inf
            best_k[i] = 0
        for k in range(centers.shape[0]):
            for i in range(m):
                dist = 0.0
                for j in range(n_feat):
                    d = xt[j, i] - centers[k, j]
                    dist += d * d
                better = dist < best[i]
                best[i] = dist if better else best[i]
                best_k[i] = k if better else best_k[i]

    @njit(parallel=True)
    def kernel(X, centers, block, n_blocks, labels, out_sse, out_counts, out_sums):
        n_samples = X.shape[0]
        n_clusters = centers.shape[0]
        for b in prange(n_blocks):
            sse = np.zeros(n_clusters)
            counts = np.zeros(n_clusters)
            sums = np.zeros((n_clusters, n_feat))
            xt = np.empty((n_feat, KMEANS_TILE))
            best = np.empty(KMEANS_TILE)
            best_k = np.empty(KMEANS_TILE, dtype=np.int64)
            stop = min((b + 1) * block, n_samples)
            for t0 in range(b * block, stop, KMEANS_TILE):
                m = min(KMEANS_TILE, stop - t0)
                assign_tile(X, t0, m, centers, xt, best, best_k)
                for i in range(m):
                    kk = best_k[i]
                    labels[t0 + i] = kk
                    sse[kk] += best[i]
                    counts[kk] += 1.0
                    for j in range(n_feat):
                        sums[kk, j] += xt[j, i]
            out_sse[b] = sse
            out_counts[b] = counts
            out_sums[b] = sums

    return kernel


def _kernel_precisions(precisions_cholesky, covariance_type):
    if covariance_type == "full":  # transpose so the triangular loop reads rows
        return np.ascontiguousarray(precisions_cholesky.transpose(0, 2, 1))
    return np.ascontiguousarray(precisions_cholesky)[:, :, None]


def gmm_statistics(X, means, precisions_cholesky, log_weights, covariance_type):
    """Same contract as :func:`tscube.cluster._reference.gmm_statistics`."""
    n_samples, n_features = X.shape
    n_components = means.shape[0]
    block, n_blocks = _n_blocks(n_samples)
    out_ll = np.zeros(n_blocks)
    out_nk = np.zeros((n_blocks, n_components))
    out_s1 = np.zeros((n_blocks, n_components, n_features))
    out_s2 = np.zeros((n_blocks, n_components, n_features, n_features))
    _gmm_statistics_kernel(
        X, np.ascontiguousarray(means), _kernel_precisions(precisions_cholesky, covariance_type),
        _log_constants(precisions_cholesky, log_weights, covariance_type),
        covariance_type == "full", block, n_blocks, out_ll, out_nk, out_s1, out_s2,
    )
    lower = out_s2.sum(axis=0)
    if covariance_type == "full":
        s2 = np.tril(lower) + np.transpose(np.tril(lower, -1), (0, 2, 1))
    else:
        s2 = np.diagonal(lower, axis1=1, axis2=2).copy()
    return float(out_ll.sum()), out_nk.sum(axis=0), out_s1.sum(axis=0), s2


def gmm_log_resp(X, means, precisions_cholesky, log_weights, covariance_type):
    """Same contract as :func:`tscube.cluster._reference.gmm_log_resp`."""
    log_resp = np.empty((X.shape[0], means.shape[0]))
    norm = np.empty(X.shape[0])
    _gmm_log_resp_kernel(
        X, np.ascontiguousarray(means), _kernel_precisions(precisions_cholesky, covariance_type),
        _log_constants(precisions_cholesky, log_weights, covariance_type),
        covariance_type == "full", log_resp, norm,
    )
    return log_resp, norm


def kmeans_statistics(X, centers):
    """Same contract as :func:`tscube.cluster._reference.kmeans_statistics`."""
    n_samples, n_features = X.shape
    n_clusters = centers.shape[0]
    block, n_blocks = _n_blocks(n_samples)
    labels = np.empty(n_samples, dtype=np.int64)
    out_sse = np.zeros((n_blocks, n_clusters))
    out_counts = np.zeros((n_blocks, n_clusters))
    out_sums = np.zeros((n_blocks, n_clusters, n_features))
    _kmeans_kernel(n_features)(X, np.ascontiguousarray(centers), block, n_blocks,
                               labels, out_sse, out_counts, out_sums)
    return labels, out_sse.sum(axis=0), out_counts.sum(axis=0), out_sums.sum(axis=0)
