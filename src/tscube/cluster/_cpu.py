"""CPU engine: numba kernels, one pass over the data per E+M step.

Samples are cut into blocks of ``config.CLUSTER_BLOCK_SAMPLES``; blocks run in
parallel (ranges of blocks as tasks of :func:`tscube._threads.run_tasks`) and each
keeps its own partial sums (log-likelihood,
``Σr``, ``Σr(x-μ)``, ``Σr(x-μ)(x-μ)^T``), which are added up at the end — the
paper's per-thread partial sums, made independent of the thread count. Nothing of
size N×K×D is ever allocated; per-sample work is held in small per-block buffers.
Same interface as :mod:`tscube.cluster._reference`.
"""

from __future__ import annotations

import numpy as np

from tscube import config

from .._jit import CONTRACT, jit
from .._threads import run_tasks, task_count
from ._common import nearest_centre
from ._reference import LOG_2PI, prepare  # noqa: F401  (same preparation)

_nearest_centre = jit()(nearest_centre)


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


@jit(inline="always")
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


@jit(inline="always")
def _component_log_prob_diag(X, i, means, prec, log_const, k, diff):
    n_features = X.shape[1]
    mahalanobis = 0.0
    for j in range(n_features):
        diff[j] = X[i, j] - means[k, j]
        y = diff[j] * prec[k, j, 0]  # diag precisions arrive as (K, D, 1)
        mahalanobis += y * y
    return log_const[k] - 0.5 * mahalanobis


@jit(nogil=True)
def _gmm_statistics_kernel(task, n_tasks, X, means, prec, log_const, full, block, n_blocks,
                           out_ll, out_nk, out_s1, out_s2):
    """The E-step's partial sums of blocks ``[task n_blocks / n_tasks, (task + 1)
    n_blocks / n_tasks)``, each block's in its own row of the outputs."""
    n_samples, n_features = X.shape
    n_components = means.shape[0]
    block = max(1, block)  # with b >= 0: sample indices >= 0, no negative-index wraparound code
    for b in range(max(0, task * n_blocks // n_tasks), (task + 1) * n_blocks // n_tasks):
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
                # exp(< -700) < 1e-304 is flushed to 0: arithmetic on subnormal numbers
                # takes a slow path in the CPU, for no visible change of the result.
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
        for k in range(n_components):  # element copies: see _kmeans_kernel
            out_nk[b, k] = nk[k]
            for j in range(n_features):
                out_s1[b, k, j] = s1[k, j]
                for m in range(n_features):
                    out_s2[b, k, j, m] = s2[k, j, m]


@jit(nogil=True)
def _gmm_log_resp_kernel(task, n_tasks, X, means, prec, log_const, full, out_log_resp, out_norm):
    """Log responsibilities of samples ``[task N / n_tasks, (task + 1) N / n_tasks)``."""
    n_samples, n_features = X.shape
    n_components = means.shape[0]
    for i in range(max(0, task * n_samples // n_tasks), (task + 1) * n_samples // n_tasks):  # i >= 0: no wraparound
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

#: A sample whose two smallest expanded-form scores are closer than
#: ``KMEANS_MARGIN × (D + 3) × eps × (‖x‖² + max_k ‖c_k‖²)`` is re-assigned with exact
#: distances. The rounding error of one score is below ``3 γ_{D+1} (‖x‖² + ‖c‖²)`` and
#: that of an exact distance below ``2 γ_{D+3} (‖x‖² + ‖c‖²)`` (``γ_n = n eps / 2``), so
#: a larger margin proves that the exact distances have the same unique minimum; 8 is
#: a safety factor of about 1.6 over the sum of the four errors.
KMEANS_MARGIN = 8.0


@jit(fastmath=CONTRACT)
def _tile_scores(m, c2, cn, xt, best, second, best_k, n_feat):
    """Smallest and second smallest ``cn_k + Σ_j c2_kj x_j`` per sample, and the
    first centre reaching the smallest (``c2 = −2c``, ``cn = ‖c‖²``)."""
    n_clusters = c2.shape[0]
    for i in range(m):
        best[i] = np.inf
        second[i] = np.inf
        best_k[i] = 0
    # the centre indices chosen between are unsigned like best_k: numba unifies a signed and
    # an unsigned 64-bit integer as a float64, and converting float64 lanes to integers back
    # and forth takes AVX-512 (vcvtuqq2pd); without it (AVX2) every lane goes through scalar
    # conversions, which made the whole loop 3x slower
    for k in range(0, n_clusters - 1, 2):
        first = np.uint64(k)
        other = np.uint64(k + 1)
        for i in range(m):
            s = cn[k]
            t = cn[k + 1]
            for j in range(n_feat):
                s += c2[k, j] * xt[j, i]
                t += c2[k + 1, j] * xt[j, i]
            b = best[i]
            low = second[i]
            high = s if s > b else b
            low = high if high < low else low
            kk = first if s < b else best_k[i]
            b = s if s < b else b
            high = t if t > b else b
            second[i] = high if high < low else low
            best_k[i] = other if t < b else kk
            best[i] = t if t < b else b
    if n_clusters % 2:
        k = n_clusters - 1
        last = np.uint64(k)
        for i in range(m):
            s = cn[k]
            for j in range(n_feat):
                s += c2[k, j] * xt[j, i]
            b = best[i]
            high = s if s > b else b
            second[i] = high if high < second[i] else second[i]
            best_k[i] = last if s < b else best_k[i]
            best[i] = s if s < b else b


@jit(nogil=True)
def _kmeans_kernel(task, n_tasks, X, centers, block, n_blocks, sums_only, labels, out_sse, out_counts, out_sums,
                   features):
    """The k-means assignment of task ``task`` of ``n_tasks`` (a range of blocks), for
    ``len(features)`` features (a tuple: its length is part of its type).

    Distances are compared in the expanded form ``‖c‖² − 2 x·c`` (``‖x‖²`` is common to
    all centres of a sample): ``D`` fused multiply-adds per sample and centre instead of
    ``D`` subtractions and ``D`` multiply-adds — a small matrix product per tile. A tile of
    samples is transposed so that the loop over its samples is a SIMD loop, the centres
    are taken two at a time (each sample's running minimum, second minimum and argmin
    are loaded and stored once per pair), and the number of features is a compile-time
    constant of the kernel (the length of the tuple ``features``, which numba compiles a
    kernel for: LLVM unrolls the feature loop and keeps the sums in registers). Compiled per feature count on first use, and cached on disk
    like every kernel.

    The expanded form cancels when ``‖x‖²`` is much larger than the distances, so it
    only decides where it provably agrees with the exact distance: a sample whose best
    and second-best scores are within :data:`KMEANS_MARGIN`'s bound of each other
    (ties included) is re-assigned with exact distances ``Σ_j (x_j − c_j)²``, first
    centre on ties. Labels are therefore those of the exact distance. The SSE is the
    exact squared distance to the chosen centre. ``sums_only``: counts and sums, no
    labels written and no SSE (all a Lloyd iteration needs).
    """
    n_feat = len(features)
    n_samples, n_columns = X.shape
    n_clusters = centers.shape[0]
    c2 = -2.0 * centers
    cn = np.sum(centers * centers, axis=1)  # ‖c_k‖²
    largest_cn = cn.max()
    margin = KMEANS_MARGIN * (n_feat + 3) * np.finfo(np.float64).eps
    for b in range(task * n_blocks // n_tasks, (task + 1) * n_blocks // n_tasks):
        sse = np.zeros(n_clusters)
        counts = np.zeros(n_clusters)
        sums = np.zeros((n_clusters, n_feat))
        xt = np.empty((n_feat, KMEANS_TILE))
        best = np.empty(KMEANS_TILE)
        second = np.empty(KMEANS_TILE)
        best_k = np.empty(KMEANS_TILE, dtype=np.uint64)  # unsigned: no wraparound code
        stop = min((b + 1) * block, n_samples)
        for t0 in range(b * block, stop, KMEANS_TILE):
            m = min(KMEANS_TILE, stop - t0)
            # row by row: each sample's features are one contiguous load; column by column
            # (a load per cache line and feature) took twice as long, a third of the kernel
            for i in range(m):
                for j in range(n_feat):
                    xt[j, i] = X[t0 + i, j]
            _tile_scores(m, c2, cn, xt, best, second, best_k, n_feat)
            n_close = 0
            for i in range(m):
                norm = 0.0
                for j in range(n_feat):
                    norm += xt[j, i] * xt[j, i]
                close = second[i] - best[i] <= margin * (norm + largest_cn)
                best[i] = -1.0 if close else 0.0  # reused as the flag
                n_close += close
            if n_close:
                for i in range(m):
                    if best[i] < 0.0:
                        best_k[i] = _nearest_centre(X, t0 + i, centers)[0]
            for i in range(m):
                kk = best_k[i]
                counts[kk] += 1.0
                # a run-time trip count: one SIMD add of the row, which the unrolled
                # compile-time loop did not get (benchmarks/README.md, k-means)
                for j in range(n_columns):
                    sums[kk, j] += X[t0 + i, j]
                if not sums_only:
                    labels[t0 + i] = kk
                    dist = 0.0
                    for j in range(n_feat):
                        d = X[t0 + i, j] - centers[kk, j]
                        dist += d * d
                    sse[kk] += dist
        for k in range(n_clusters):  # element copies: a row assignment compiles numba's error formatting
            out_sse[b, k] = sse[k]
            out_counts[b, k] = counts[k]
            for j in range(n_feat):
                out_sums[b, k, j] = sums[k, j]


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
    run_tasks(
        _gmm_statistics_kernel, task_count(n_blocks),
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
    run_tasks(
        _gmm_log_resp_kernel, task_count(_n_blocks(X.shape[0])[1]),  # as many tasks as the E-step's
        X, np.ascontiguousarray(means), _kernel_precisions(precisions_cholesky, covariance_type),
        _log_constants(precisions_cholesky, log_weights, covariance_type),
        covariance_type == "full", log_resp, norm,
    )
    return log_resp, norm


def kmeans_statistics(X, centers, sums_only=False):
    """Same contract as :func:`tscube.cluster._reference.kmeans_statistics`."""
    n_samples, n_features = X.shape
    n_clusters = centers.shape[0]
    block, n_blocks = _n_blocks(n_samples)
    labels = np.empty(0 if sums_only else n_samples, dtype=np.int64)
    out_sse = np.zeros((n_blocks, n_clusters))
    out_counts = np.zeros((n_blocks, n_clusters))
    out_sums = np.zeros((n_blocks, n_clusters, n_features))
    run_tasks(_kmeans_kernel, task_count(n_blocks), X, np.ascontiguousarray(centers, dtype=np.float64), block,
              n_blocks, sums_only, labels, out_sse, out_counts, out_sums, (0,) * n_features)
    if sums_only:
        return None, None, out_counts.sum(axis=0), out_sums.sum(axis=0)
    return labels, out_sse.sum(axis=0), out_counts.sum(axis=0), out_sums.sum(axis=0)
