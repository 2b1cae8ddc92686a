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

import math

import numpy as np
from numba.extending import overload

from tscube import config

from .._jit import CONTRACT, jit
from .._prefetch import prefetch_row
from .._simd import TRANSPOSE_WIDTH, add_row, compiles_for_avx512, transpose_scaled
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

#: A sample whose two smallest expanded-form scores are not provably apart, i.e. closer
#: than ``KMEANS_MARGIN × (D + 3) × eps32 × (‖x'‖² + max_k ‖c'_k‖²)``, is re-assigned with
#: exact float64 distances. The scores are float32 sums over the shifted and scaled data
#: ``x' = (x − o) s`` and centres ``c'`` (see :func:`_score_frame`): rounding ``x'``,
#: ``−2c'`` and ``‖c'‖²`` to float32 and the ``D`` fused multiply-adds of a score (in two
#: chains, even and odd features, added at the end; beyond :data:`_SCORE_CHUNK` features
#: chunk after chunk, each chunk's two chains continuing the running score: no term goes
#: through more roundings than in one chain) leave an error below
#: ``(D + 2.1) u (2‖c'‖² + ‖x'‖²)``
#: (``u = eps32 / 2``; ``2|x'·c'| ≤ ‖x'‖² + ‖c'‖²``), so the two scores compared err by
#: less than
#: ``2 (D + 2.1) eps32 (‖x'‖² + max ‖c'‖²)``; the exact distances' float64 rounding is
#: ~1e-9 of that. 8 is a safety factor of about 4 over the sum, which also covers the
#: float32 rounding of the test itself.
KMEANS_MARGIN = 8.0

#: Samples ahead whose rows the tile transposition asks the cache for (16 tiles, 64 KB of
#: 8 features). One thread reads the data at about half the speed the tile's arithmetic
#: could take it on a Zen 3 VM (8.3 GB/s); the hardware prefetcher alone did not keep the
#: two overlapped: 15.5 -> 14.0 ms per iteration there (benchmarks/README.md, k-means).
_KMEANS_AHEAD = 1024


#: How the k-means kernel fills a tile and adds its samples to the sums, per target:
#:
#: - ``"shuffles"`` (AVX2): the tile transposed eight samples at a time by vector loads
#:   and 4 × 4 shuffles (:func:`tscube._simd.transpose_scaled`), and four sets of counts
#:   and sums that the tile's samples add to in turn: a sample's load, add and store of
#:   its centre's sums waited for the previous sample's store whenever the two shared a
#:   centre (and the processor, unable to tell in advance, often waited anyway). On a
#:   Zen 3 (AVX2) they took one Lloyd iteration from 14.3 to 12.7 ms.
#: - ``"rows"`` (AVX-512): the tile filled sample by sample in the loop that prefetches
#:   the rows ahead (whose call keeps LLVM from vectorising the loop over the samples
#:   into gathers), one set of sums. On a Zen 4 (AVX-512) the shuffles cost 11 % and the
#:   four sets 7 %: 13.1 ms per iteration with both, 10.3 without (benchmarks/README.md,
#:   "k-means per target layout").
#:
#: Both give the same labels and counts; the sums and SSE differ in rounding (the sets
#: are added in a fixed order, so neither depends on the threads).
KMEANS_LAYOUT = "rows" if compiles_for_avx512() else "shuffles"
#: Per layout: the sets of counts and sums (a tuple whose length is the kernel's
#: constant) and whether the tile goes through the shuffles (``(0,)``) or not (``()``).
_LAYOUTS = {"shuffles": ((0,) * 4, (0,)), "rows": ((0,), ())}


#: Features up to which a tile's transposition and a row's add to the sums are the vector
#: intrinsics of :mod:`tscube._simd`. They are written out feature by feature, so that
#: beyond, they cost more to compile than they save (256 features: 2.3 → 5.3 s for
#: ``KMeans().fit``'s first call); plain loops then.
_SIMD_FEATURES = 32


def _fill_tile(xt, m, X, t0, origin, scale, features, shuffles):
    """``xt[j, i] = float32((X[t0 + i, j] − origin[j]) × scale)`` for ``i < m``, and the
    rows :data:`_KMEANS_AHEAD` samples ahead asked for (numba only)."""
    raise NotImplementedError("compiled by numba: see _fill_tile_impl")


def _add_row(sums, k, X, row, features):
    """``sums[k] += X[row]`` (numba only)."""
    raise NotImplementedError("compiled by numba: see _add_row_impl")


@jit(inline="always")
def _scaled_rows(xt, start, stop, X, t0, origin, scale, features):
    """:func:`_fill_tile`'s values for samples ``start`` to ``stop``, one element at a time."""
    for i in range(start, stop):
        for j in range(len(features)):
            xt[j, i] = np.float32((X[t0 + i, j] - origin[j]) * scale)


@jit(inline="always")
def _prefetch_ahead(X, t0, m):
    last = X.shape[0] - 1
    for i in range(m):
        prefetch_row(X, min(t0 + i + _KMEANS_AHEAD, last), 0)


@overload(_fill_tile, inline="always")
def _fill_tile_impl(xt, m, X, t0, origin, scale, features, shuffles):
    if features.count > _SIMD_FEATURES:
        def elementwise(xt, m, X, t0, origin, scale, features, shuffles):
            _prefetch_ahead(X, t0, m)
            _scaled_rows(xt, 0, m, X, t0, origin, scale, features)
        return elementwise

    if shuffles.count == 0:  # the "rows" layout
        def rows(xt, m, X, t0, origin, scale, features, shuffles):
            last = X.shape[0] - 1
            for i in range(m):
                prefetch_row(X, min(t0 + i + _KMEANS_AHEAD, last), 0)
                _scaled_rows(xt, i, i + 1, X, t0, origin, scale, features)
        return rows

    def vectors(xt, m, X, t0, origin, scale, features, shuffles):
        # eight samples at a time, each row one vector load, each feature one vector
        # store; the rest one element at a time
        _prefetch_ahead(X, t0, m)
        whole = m - m % TRANSPOSE_WIDTH
        for i in range(0, whole, TRANSPOSE_WIDTH):
            transpose_scaled(xt, i, X, t0 + i, origin, scale, features)
        _scaled_rows(xt, whole, m, X, t0, origin, scale, features)
    return vectors


@overload(_add_row, inline="always")
def _add_row_impl(sums, k, X, row, features):
    if features.count > _SIMD_FEATURES:
        def elementwise(sums, k, X, row, features):
            for j in range(len(features)):
                sums[k, j] += X[row, j]
        return elementwise

    def vector(sums, k, X, row, features):
        add_row(sums, k, X, row, features)
    return vector


def _score_frame(centers):
    """Origin ``o`` and power-of-two scale ``s`` of the frame in which the kernel scores:
    ``x' = (x − o) s`` and ``c' = (c − o) s`` have the same nearest centres as ``x`` and
    ``c`` (a translation and a positive scaling), with ``o`` the centres' mean and the
    largest ``|c'_kj|`` in [0.5, 1). Centring keeps ``‖x'‖²``, which the scores' rounding
    scales with, near the distances that decide (data far from the origin no longer
    cancel); the exact power of two keeps float32's range for every scale of data."""
    origin = centers.mean(axis=0)
    spread = float(np.max(np.abs(centers - origin), initial=0.0))
    scale = math.ldexp(1.0, -math.frexp(spread)[1]) if 0.0 < spread < math.inf else 1.0
    return origin, scale


@jit(inline="always")
def _offer(score, index, best, second, best_k):
    """A sample's running (best, second best, first argmin) after one more centre's score."""
    higher = score if score > best else best
    second = higher if higher < second else second
    best_k = index if score < best else best_k
    best = score if score < best else best
    return best, second, best_k


#: Features a score's multiply-adds take in one loop body. LLVM unrolls a loop over the
#: features only up to its own limit; past it (between 16 and 20 features on a Zen 3) the
#: loop over the tile's samples was no longer a SIMD loop and a k-means iteration took 4x
#: longer per feature (benchmarks/README.md, "k-means with many features"). Scores of more
#: features are summed in chunks of this many, each chunk's loop unrolled.
_SCORE_CHUNK = 8


@jit(fastmath=CONTRACT)
def _tile_scores(m, c2, cn, xt, best, second, best_k, features, partial):
    """Smallest and second smallest ``cn_k + Σ_j c2_kj x_j`` per sample, and the
    first centre reaching the smallest (``c2 = −2c'``, ``cn = ‖c'‖²``, all float32), for
    ``len(features)`` features (a constant of the compiled code, as in the kernel).
    ``partial``: ``(2, KMEANS_TILE)`` float32 scratch for scores of more than
    :data:`_SCORE_CHUNK` features."""
    n_feat = len(features)
    n_clusters = c2.shape[0]
    for i in range(m):
        best[i] = np.inf
        second[i] = np.inf
        best_k[i] = 0
    # the centre indices chosen between are unsigned 32-bit like best_k, one lane per float32
    # score: numba unifies a signed and an unsigned 64-bit integer as a float64, and
    # converting float64 lanes to integers back and forth takes AVX-512 (vcvtuqq2pd);
    # without it (AVX2) every lane goes through scalar conversions (the loop 3x slower).
    # Centres in pairs: a sample's running values are loaded and stored once per pair (four
    # per pass scored no faster on AVX2 or AVX-512, eight did not vectorise).
    # Each score in two chains of multiply-adds (even and odd features): a chain's
    # additions wait on each other, two halve the wait (benchmarks/README.md, k-means).
    n_paired = n_clusters - n_clusters % 2
    for k in range(0, n_paired, 2):
        first = np.uint32(k)
        other = np.uint32(k + 1)
        if n_feat <= _SCORE_CHUNK:
            for i in range(m):
                s, t = _pair_scores(c2, k, cn[k], cn[k + 1], xt, i, 0, n_feat)
                _offer_pair(s, t, first, other, best, second, best_k, i)
        else:
            # chunk after chunk, each sample's two running scores kept in `partial`
            for i in range(m):
                partial[0, i] = cn[k]
                partial[1, i] = cn[k + 1]
            whole = n_feat - n_feat % _SCORE_CHUNK
            for j0 in range(0, whole, _SCORE_CHUNK):
                for i in range(m):
                    s, t = _pair_scores(c2, k, partial[0, i], partial[1, i], xt, i, j0, _SCORE_CHUNK)
                    partial[0, i] = s
                    partial[1, i] = t
            for i in range(m):
                s, t = _pair_scores(c2, k, partial[0, i], partial[1, i], xt, i, whole, n_feat - whole)
                _offer_pair(s, t, first, other, best, second, best_k, i)
    if n_paired < n_clusters:
        last = np.uint32(n_paired)
        for i in range(m):
            s = cn[n_paired]
            for j in range(n_feat):
                s += c2[n_paired, j] * xt[j, i]
            b, low, kk = _offer(s, last, best[i], second[i], best_k[i])
            best[i] = b
            second[i] = low
            best_k[i] = kk


@jit(inline="always", fastmath=CONTRACT)
def _pair_scores(c2, k, s, t, xt, i, j0, count):
    """Sample ``i``'s scores for centres ``k`` and ``k + 1`` after features ``j0`` to
    ``j0 + count``, from ``s`` and ``t`` before them: two chains each (even and odd
    features), added at the end. ``count`` is a constant at every call (the chunk, or
    what the feature count leaves), so LLVM unrolls the loop."""
    s_odd = np.float32(0.0)
    t_odd = np.float32(0.0)
    for j in range(j0, j0 + count - 1, 2):
        x = xt[j, i]
        y = xt[j + 1, i]
        s += c2[k, j] * x
        t += c2[k + 1, j] * x
        s_odd += c2[k, j + 1] * y
        t_odd += c2[k + 1, j + 1] * y
    if count % 2:
        last = j0 + count - 1
        x = xt[last, i]
        s += c2[k, last] * x
        t += c2[k + 1, last] * x
    return s + s_odd, t + t_odd


@jit(inline="always")
def _offer_pair(s, t, first, other, best, second, best_k, i):
    b, low, kk = _offer(s, first, best[i], second[i], best_k[i])
    b, low, kk = _offer(t, other, b, low, kk)
    best[i] = b
    second[i] = low
    best_k[i] = kk


@jit(nogil=True)
def _kmeans_kernel(task, n_tasks, X, centers, origin, scale, block, n_blocks, sums_only, labels, out_sse,
                   out_counts, out_sums, features, copies, shuffles):
    """The k-means assignment of task ``task`` of ``n_tasks`` (a range of blocks), for
    ``len(features)`` features (a tuple: its length is part of its type).

    Distances are compared in the expanded form ``‖c‖² − 2 x·c`` (``‖x‖²`` is common to
    all centres of a sample): ``D`` fused multiply-adds per sample and centre instead of
    ``D`` subtractions and ``D`` multiply-adds — a small matrix product per tile. The
    scores are float32, twice the SIMD lanes of float64, in the frame of
    :func:`_score_frame` (``origin``, ``scale``). A tile of samples is shifted, scaled,
    rounded to float32 and transposed in one pass so that the loop over its samples is a
    SIMD loop, the centres are taken two at a time (each sample's running minimum, second
    minimum and argmin are loaded and stored once per pair), and the number of features is
    a compile-time constant of the kernel (the length of the tuple ``features``, which
    numba compiles a kernel for: LLVM unrolls the feature loop and keeps the sums in
    registers). Compiled per feature count on first use, and cached on disk like every
    kernel.

    The scores only decide where they provably agree with the exact distance: a sample
    whose best and second-best scores are within :data:`KMEANS_MARGIN`'s bound of each
    other (ties, overflow and NaN included) is re-assigned with exact float64 distances
    ``Σ_j (x_j − c_j)²``, first centre on ties. Labels are therefore those of the exact
    distance, and counts, sums and the SSE are float64 sums of the data as given.
    ``sums_only``: counts and sums, no labels written and no SSE (all a Lloyd iteration
    needs). ``copies``, ``shuffles``: the layout's markers (:data:`KMEANS_LAYOUT`), also
    constants of the compiled code.
    """
    n_feat = len(features)
    n_copies = len(copies)
    n_samples = X.shape[0]
    n_clusters = centers.shape[0]
    c2 = np.empty((n_clusters, n_feat), dtype=np.float32)
    cn = np.empty(n_clusters, dtype=np.float32)
    for k in range(n_clusters):
        norm = 0.0
        for j in range(n_feat):
            c = (centers[k, j] - origin[j]) * scale
            c2[k, j] = np.float32(-2.0 * c)
            norm += c * c
        cn[k] = np.float32(norm)
    largest_cn = cn.max()
    margin = np.float32(KMEANS_MARGIN * (n_feat + 3) * np.finfo(np.float32).eps)
    # n_copies sets of counts and sums (SSE), sample i adding to set i % n_copies
    sse = np.empty(n_copies * n_clusters)
    counts = np.empty(n_copies * n_clusters)
    sums = np.empty((n_copies * n_clusters, n_feat))
    xt = np.empty((n_feat, KMEANS_TILE), dtype=np.float32)
    best = np.empty(KMEANS_TILE, dtype=np.float32)
    second = np.empty(KMEANS_TILE, dtype=np.float32)
    best_k = np.empty(KMEANS_TILE, dtype=np.uint32)  # unsigned: no wraparound code
    partial = np.empty((2, KMEANS_TILE), dtype=np.float32)
    norms = np.empty(KMEANS_TILE, dtype=np.float32)
    for b in range(task * n_blocks // n_tasks, (task + 1) * n_blocks // n_tasks):
        for k in range(n_copies * n_clusters):
            sse[k] = 0.0
            counts[k] = 0.0
            for j in range(n_feat):
                sums[k, j] = 0.0
        stop = min((b + 1) * block, n_samples)
        for t0 in range(b * block, stop, KMEANS_TILE):
            m = min(KMEANS_TILE, stop - t0)
            _fill_tile(xt, m, X, t0, origin, scale, features, shuffles)  # and the rows ahead asked for
            _tile_scores(m, c2, cn, xt, best, second, best_k, features, partial)
            # ‖x'‖² across samples, as SIMD lanes (not fused into the transposition, where
            # it was a chain per sample); past _SCORE_CHUNK features feature after feature
            # (the same sums): a loop over the features inside the samples' then ran one
            # sample at a time, past LLVM's unrolling limit
            if n_feat <= _SCORE_CHUNK:
                for i in range(m):
                    norm = np.float32(0.0)
                    for j in range(n_feat):
                        norm += xt[j, i] * xt[j, i]
                    norms[i] = norm
            else:
                for i in range(m):
                    norms[i] = np.float32(0.0)
                for j in range(n_feat):
                    for i in range(m):
                        norms[i] += xt[j, i] * xt[j, i]
            n_close = 0
            for i in range(m):
                # "not apart" rather than "close": a NaN or infinite score or bound
                # (float32 overflow, NaN data) goes to the exact distances too
                close = not (second[i] - best[i] > margin * (norms[i] + largest_cn))
                best[i] = -1.0 if close else 0.0  # reused as the flag
                n_close += close
            if n_close:
                for i in range(m):
                    if best[i] < 0.0:
                        best_k[i] = _nearest_centre(X, t0 + i, centers)[0]
            for i in range(m):
                kk = best_k[i]
                slot = (i % n_copies) * n_clusters + kk
                counts[slot] += 1.0
                _add_row(sums, slot, X, t0 + i, features)  # one vector add
                if not sums_only:
                    labels[t0 + i] = kk
                    dist = 0.0
                    for j in range(n_feat):
                        d = X[t0 + i, j] - centers[kk, j]
                        dist += d * d
                    sse[slot] += dist
        for k in range(n_clusters):  # element copies: a row assignment compiles numba's error formatting
            out_sse[b, k] = 0.0
            out_counts[b, k] = 0.0
            for j in range(n_feat):
                out_sums[b, k, j] = 0.0
            for copy in range(n_copies):  # in a fixed order: sums independent of the threads
                slot = copy * n_clusters + k
                out_sse[b, k] += sse[slot]
                out_counts[b, k] += counts[slot]
                for j in range(n_feat):
                    out_sums[b, k, j] += sums[slot, j]


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


def kmeans_statistics(X, centers, sums_only=False, layout=None):
    """Same contract as :func:`tscube.cluster._reference.kmeans_statistics`; ``layout``:
    one of :data:`_LAYOUTS` (default :data:`KMEANS_LAYOUT`, this target's)."""
    n_samples, n_features = X.shape
    n_clusters = centers.shape[0]
    block, n_blocks = _n_blocks(n_samples)
    labels = np.empty(0 if sums_only else n_samples, dtype=np.int64)
    out_sse = np.zeros((n_blocks, n_clusters))
    out_counts = np.zeros((n_blocks, n_clusters))
    out_sums = np.zeros((n_blocks, n_clusters, n_features))
    centers = np.ascontiguousarray(centers, dtype=np.float64)
    origin, scale = _score_frame(centers)
    run_tasks(_kmeans_kernel, task_count(n_blocks), X, centers, origin, scale, block, n_blocks, sums_only, labels,
              out_sse, out_counts, out_sums, (0,) * n_features, *_LAYOUTS[layout or KMEANS_LAYOUT])
    if sums_only:
        return None, None, out_counts.sum(axis=0), out_sums.sum(axis=0)
    return labels, out_sse.sum(axis=0), out_counts.sum(axis=0), out_sums.sum(axis=0)
