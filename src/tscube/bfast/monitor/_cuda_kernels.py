"""numba.cuda kernels of BFAST Monitor (paper 001, Fig. 12 kernels ker 1-10).

This module imports :mod:`numba.cuda` at import time; only :func:`tscube.bfast.monitor._cuda.run`
imports it, after checking that a GPU (or the simulator) is there.

Kernel boundaries follow paper 001 §III-B: every group of inner operations of the same
size becomes one kernel, padded to the largest size of the batch.

* ``clean_transpose_kernel`` (from :mod:`tscube.parallel`): raw ``(T, P)`` of any dtype to
  float64 rows ``(P, T)``, missing (NaN, inf, nodata) to NaN; a shared-memory tile
  transpose (preprocessing).
* ``count_kernel``: thread per pixel; valid and inf counts, and per start the history
  and monitoring counts, first history date, ``max |y_history|`` (ker 8's n̄) and
  whether the history holds every season level (season dummies).
* ``history_mask_kernel``: ``mask_t[t, p]`` = valid and inside the history window.
* masked Gram of :mod:`tscube.parallel`: ``G[p] = Σ_t mask x_t x_tᵀ``, register tiled
  (ker 1-2, Fig. 4b).
* ``masked_xty_kernel``: ``b[p] = Σ_t mask x_t y_t`` (ker 4, ``mvMulFilt``).
* ``solve_kernel``: equilibrated Cholesky in shared memory, the singular test and
  ``β = G⁻¹ b`` (ker 3 and 5, the Fig. 5 pattern).
* ``monitor_kernel``: block per pixel; residuals, compaction, σ, magnitude by selection,
  MOSUM (or CUSUM) by scan, first break by reduction (ker 6-10).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numba
import numpy as np
from numba import cuda

from ...parallel.cuda import (  # noqa: F401  (clean_transpose_kernel: used through this module)
    block_compact_row,
    block_min_index,
    block_scan_row,
    block_sum,
    clean_transpose_kernel,
    is_valid,
    masked_gram_kernel,
    scan_shared_size,
    threads_per_block_of,
)
from ..core.inputs import PERFECT_FIT_RTOL, SINGULAR_PIVOT_TOL
from .status import BfastStatus

#: Rows of the packed integer output ``(N_INT, S, P)``; ``I_LEVELS`` is 1 when the history
#: holds every season level (or the design has no season dummies).
I_BREAK, I_STATUS, I_NVALID, I_NHIST, I_NMON, I_NINF, I_FIRST, I_LEVELS = range(8)
N_INT = 8
#: Rows of the packed float output ``(N_FLOAT, S, P)``; ``F_YMAX`` is ``max |y_history|``.
F_MAGNITUDE, F_MEAN, F_STATISTIC, F_SIGMA, F_YMAX, F_RMSE, F_RELATIVE = range(7)
N_FLOAT = 7

#: Largest block of the per-pixel monitor kernel: it uses ~70 registers per thread
#: (ptxas, sm_80), so 1024 threads would exceed the 64 Ki registers of a block.
MAX_PIXEL_BLOCK = 512

#: Largest number of regressors of the shared-memory solve (k x k float64 must fit 48 KiB).
MAX_REGRESSORS = 64

_OK = int(BfastStatus.OK)
_ALL_MISSING = int(BfastStatus.ALL_MISSING)
_TOO_FEW = int(BfastStatus.TOO_FEW_HISTORY)
_NO_MONITOR = int(BfastStatus.NO_MONITORING_DATA)
_SINGULAR = int(BfastStatus.SINGULAR_DESIGN)
_PERFECT = int(BfastStatus.PERFECT_FIT)


# --------------------------------------------------------------------------------------
# device functions
# --------------------------------------------------------------------------------------


@cuda.jit(device=True)
def block_max_nan(s):
    """Tree maximum of shared ``s[0:blockDim.x]`` that propagates NaN (like ``np.max``).

    Not in :mod:`tscube.parallel` (which has sums and argmin); power-of-two block.
    Returns the maximum; ends with a barrier.
    """
    tid = cuda.threadIdx.x
    d = cuda.blockDim.x >> 1
    while d > 0:
        cuda.syncthreads()
        if tid < d:
            other = s[tid + d]
            if math.isnan(other) or other > s[tid]:
                s[tid] = other
        d >>= 1
    cuda.syncthreads()
    value = s[0]
    cuda.syncthreads()
    return value


@cuda.jit(device=True)
def log_plus(x):
    """strucchange's ``logPlus``: ``log(x)`` for ``x > e``, else 1."""
    if x > math.e:
        return math.log(x)
    return 1.0


# --------------------------------------------------------------------------------------
# element-wise and thread-per-pixel kernels
# --------------------------------------------------------------------------------------


@cuda.jit
def count_kernel(raw, has_nodata, nodata, monitor_begin, history_begin, levels, all_levels, i_out, f_out):
    """Thread per pixel (reads of ``raw[t, :]`` coalesced): the counts of every start.

    ``n_valid``, ``n_inf``; per start ``n_history``, ``n_monitor``, the first history
    index, ``max |y_history|`` (the PERFECT_FIT scale) and whether the history holds
    every season level (bits of ``levels[t]`` against ``all_levels``; 0 = no dummies).
    """
    p = cuda.grid(1)
    n_dates, n_pixels = raw.shape
    if p >= n_pixels:
        return
    n_valid = 0
    n_inf = 0
    for t in range(n_dates):
        v = numba.float64(raw[t, p])
        if math.isinf(v):
            n_inf += 1
        if is_valid(v, has_nodata, nodata):
            n_valid += 1
    for s in range(monitor_begin.shape[0]):
        begin = monitor_begin[s]
        first_eligible = history_begin[s, p]
        n_hist = 0
        n_mon = 0
        first = -1
        y_max = 0.0
        seen = numba.int64(0)
        for t in range(min(first_eligible, begin), n_dates):
            v = numba.float64(raw[t, p])
            if is_valid(v, has_nodata, nodata):
                if t >= begin:
                    n_mon += 1
                elif t >= first_eligible:
                    n_hist += 1
                    seen |= numba.int64(1) << levels[t]
                    if first < 0:
                        first = t
                    if abs(v) > y_max:
                        y_max = abs(v)
        i_out[I_LEVELS, s, p] = 1 if all_levels == 0 or seen == all_levels else 0
        i_out[I_NVALID, s, p] = n_valid
        i_out[I_NINF, s, p] = n_inf
        i_out[I_NHIST, s, p] = n_hist
        i_out[I_NMON, s, p] = n_mon
        i_out[I_FIRST, s, p] = first
        f_out[F_YMAX, s, p] = y_max


@cuda.jit
def history_mask_kernel(raw, has_nodata, nodata, history_begin, s, begin, mask_t):
    """``mask_t[t, p] = 1`` if ``raw[t, p]`` is valid and ``history_begin[s, p] <= t <
    begin`` (thread per element, coalesced over pixels)."""
    i = cuda.grid(1)
    n_dates, n_pixels = raw.shape
    if i < n_dates * n_pixels:
        t = i // n_pixels
        p = i - t * n_pixels
        inside = t < begin and t >= history_begin[s, p]
        if inside and is_valid(numba.float64(raw[t, p]), has_nodata, nodata):
            mask_t[t, p] = 1
        else:
            mask_t[t, p] = 0


@cuda.jit
def masked_xty_kernel(X, raw, mask_t, b):
    """``b[p, j] = Σ_t mask_t[t, p] X[t, j] y[t, p]`` in float64 (the paper's
    ``mvMulFilt``, ker 4): thread per (pixel, regressor), pixels on x for coalescing."""
    p = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    j = cuda.blockIdx.y
    n_dates, n_pixels = raw.shape
    if p < n_pixels:
        acc = 0.0
        for t in range(n_dates):
            if mask_t[t, p] != 0:
                acc += X[t, j] * numba.float64(raw[t, p])
        b[p, j] = acc


# --------------------------------------------------------------------------------------
# block-per-pixel kernels (cached factories: shared sizes are compile-time constants)
# --------------------------------------------------------------------------------------


@lru_cache(maxsize=None)
def solve_kernel(k: int, tpb: int):
    """Kernel ``(G, b, beta, singular)``: block per pixel, ``tpb`` threads.

    The Gram ``G = D C D`` (``D = diag(sqrt(diag G))``) is equilibrated to the
    correlation-like ``C`` in shared memory and factored ``C = L Lᵀ`` by right-looking
    Cholesky (``k`` sequential steps, each updating the trailing block in parallel, the
    Fig. 5 pattern). The system is singular when some ``d_j = 0`` or some squared pivot
    of ``L`` (``1 - R²`` of column ``j`` on the previous ones) is below
    ``SINGULAR_PIVOT_TOL``: the cpu/reference rule. Otherwise ``β = D⁻¹ L⁻ᵀ L⁻¹ D⁻¹ b``
    by two triangular solves. Cholesky without pivoting is backward stable for symmetric
    positive definite matrices, and after equilibration every accepted pivot is at least
    1e-10 of its column norm, so the solve is as accurate as the design allows.
    """
    tol = SINGULAR_PIVOT_TOL

    @cuda.jit
    def solve(G, b, beta, singular):
        p = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        C = cuda.shared.array((k, k), numba.float64)
        d = cuda.shared.array(k, numba.float64)
        z = cuda.shared.array(k, numba.float64)
        flag = cuda.shared.array(1, numba.int32)
        for e in range(tid, k * k, tpb):
            i = e // k
            C[i, e - i * k] = G[p, i, e - i * k]
        for i in range(tid, k, tpb):
            d[i] = math.sqrt(G[p, i, i])
            z[i] = b[p, i]
        cuda.syncthreads()
        if tid == 0:
            bad = 0
            for i in range(k):
                if not d[i] > 0.0:  # zero column (or NaN)
                    bad = 1
            flag[0] = bad
        cuda.syncthreads()
        if flag[0] == 0:
            for e in range(tid, k * k, tpb):
                i = e // k
                c = e - i * k
                C[i, c] = C[i, c] / (d[i] * d[c])
            cuda.syncthreads()
            for q in range(k):
                if tid == 0:
                    pivot = C[q, q]
                    if not pivot >= tol:  # not positive definite, or nearly aliased
                        flag[0] = 1
                    else:
                        C[q, q] = math.sqrt(pivot)
                cuda.syncthreads()
                if flag[0] != 0:  # uniform: every thread reads the same shared flag
                    break
                lqq = C[q, q]
                for i in range(q + 1 + tid, k, tpb):
                    C[i, q] = C[i, q] / lqq
                cuda.syncthreads()
                m = k - q - 1
                for e in range(tid, m * m, tpb):
                    i = q + 1 + e // m
                    c = q + 1 + (e - (e // m) * m)
                    if c <= i:
                        C[i, c] -= C[i, q] * C[c, q]
                cuda.syncthreads()
        if flag[0] == 0:
            for i in range(tid, k, tpb):
                z[i] = z[i] / d[i]
            cuda.syncthreads()
            for q in range(k):  # forward: L u = z (column-oriented, parallel updates)
                if tid == 0:
                    z[q] = z[q] / C[q, q]
                cuda.syncthreads()
                for i in range(q + 1 + tid, k, tpb):
                    z[i] -= C[i, q] * z[q]
                cuda.syncthreads()
            for q in range(k - 1, -1, -1):  # backward: Lᵀ v = u
                if tid == 0:
                    z[q] = z[q] / C[q, q]
                cuda.syncthreads()
                for i in range(tid, q, tpb):
                    z[i] -= C[q, i] * z[q]
                cuda.syncthreads()
        for i in range(tid, k, tpb):
            beta[p, i] = math.nan if flag[0] != 0 else z[i] / d[i]
        if tid == 0:
            singular[p] = flag[0]

    return solve


@lru_cache(maxsize=None)
def monitor_kernel(k: int, tpb: int):
    """Kernel of one monitoring start, block per pixel (paper ker 6-10).

    Arguments ``(X, y_rows, beta, singular, history_begin, flagged, s, h, critvals, cusum,
    return_process, i_out, f_out, r_buf, r_comp, keys, proc_out, bnd_out)``.

    Per pixel: status by precedence; residuals of every valid observation from the
    history start on (ker 6-7); their compaction with keys (``block_compact_row``,
    ker 7); σ and the RMSE from the block sum of the squared history residuals (ker 8);
    magnitude as the median monitoring residual by rank selection, relative to the mean
    prediction (a block sum); the inclusive float64 scan of the compacted residuals
    (ker 9-10), whose differences are the MOSUM window sums and whose values are the
    CUSUM process (``cusum``); ``statistic`` by a max reduction, ``mosum_mean`` by a sum,
    the first crossing by a min-index reduction.
    """
    scan_size = scan_shared_size(2 * tpb)
    perfect_rtol = PERFECT_FIT_RTOL

    @cuda.jit
    def monitor(X, y_rows, beta, singular, history_begin, flagged, s, h, critvals, cusum,
                return_process, i_out, f_out, r_buf, r_comp, keys, proc_out, bnd_out):
        p = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        n_dates = y_rows.shape[1]
        beta_sh = cuda.shared.array(k, numba.float64)
        scan_f = cuda.shared.array(scan_size, numba.float64)
        scan_i = cuda.shared.array(scan_size, numba.int32)
        red_f = cuda.shared.array(tpb, numba.float64)
        red_i = cuda.shared.array(tpb, numba.int64)
        chosen = cuda.shared.array(2, numba.float64)

        if return_process:  # uniform; the MOSUM values are written after a barrier
            for t in range(tid, n_dates, tpb):
                proc_out[s, t, p] = math.nan
                bnd_out[s, t, p] = math.nan
            cuda.syncthreads()

        n_valid = i_out[I_NVALID, s, p]
        n = i_out[I_NHIST, s, p]
        n_mon = i_out[I_NMON, s, p]
        window = int(math.floor(h * n))
        status = -1
        if n_valid == 0:
            status = _ALL_MISSING
        elif n <= k or window <= 1:
            status = _TOO_FEW
        elif n_mon == 0:
            status = _NO_MONITOR
        elif singular[p] != 0 or i_out[I_LEVELS, s, p] == 0:
            status = _SINGULAR
        if status >= 0:  # uniform over the block: nothing more to compute
            if tid == 0:
                i_out[I_STATUS, s, p] = status
                i_out[I_BREAK, s, p] = -1
                f_out[F_MAGNITUDE, s, p] = math.nan
                f_out[F_MEAN, s, p] = math.nan
                f_out[F_STATISTIC, s, p] = math.nan
                f_out[F_SIGMA, s, p] = math.nan
                f_out[F_RMSE, s, p] = math.nan
                f_out[F_RELATIVE, s, p] = math.nan
            return

        # ker 6-7: residuals of the valid observations from the history start on
        for j in range(tid, k, tpb):
            beta_sh[j] = beta[p, j]
        cuda.syncthreads()
        first_eligible = history_begin[s, p]
        for t in range(tid, n_dates, tpb):
            y = y_rows[p, t]
            if t >= first_eligible and not math.isnan(y):
                fit = 0.0
                for j in range(k):
                    fit += X[t, j] * beta_sh[j]
                r_buf[p, t] = y - fit
            else:
                r_buf[p, t] = math.nan
        cuda.syncthreads()
        count = block_compact_row(r_buf[p], r_comp[p], keys[p], scan_i, math.nan, -1)

        # ker 8: sigma of the history fit (float64 block sum)
        partial = 0.0
        for i in range(tid, n, tpb):
            v = r_comp[p, i]
            partial += v * v
        red_f[tid] = partial
        rss = block_sum(red_f)
        sigma = math.sqrt(rss / (n - k))
        rmse = math.sqrt(rss / n)

        # the mean prediction over the monitoring observations (for the relative magnitude)
        partial = 0.0
        for i in range(tid, n_mon, tpb):
            partial += y_rows[p, keys[p, n + i]] - r_comp[p, n + i]
        red_f[tid] = partial
        expected = block_sum(red_f)

        # magnitude: median of the monitoring residuals by rank selection
        if tid == 0:
            chosen[0] = math.nan
            chosen[1] = math.nan
        cuda.syncthreads()
        lower_mid = (n_mon - 1) // 2
        upper_mid = n_mon // 2
        for i in range(tid, n_mon, tpb):
            v = r_comp[p, n + i]
            below = 0
            equal = 0
            for j in range(n_mon):
                u = r_comp[p, n + j]
                if u < v:
                    below += 1
                elif u == v:
                    equal += 1
            if below <= lower_mid and lower_mid < below + equal:
                chosen[0] = v  # every writer writes the same value
            if below <= upper_mid and upper_mid < below + equal:
                chosen[1] = v
        cuda.syncthreads()
        magnitude = (chosen[0] + chosen[1]) / 2.0
        relative = magnitude / (expected / n_mon) if expected != 0.0 else math.nan

        if sigma <= perfect_rtol * f_out[F_YMAX, s, p]:  # uniform
            if tid == 0:
                i_out[I_STATUS, s, p] = _PERFECT
                i_out[I_BREAK, s, p] = -1
                f_out[F_MAGNITUDE, s, p] = magnitude
                f_out[F_MEAN, s, p] = math.nan
                f_out[F_STATISTIC, s, p] = math.nan
                f_out[F_SIGMA, s, p] = sigma
                f_out[F_RMSE, s, p] = rmse
                f_out[F_RELATIVE, s, p] = relative
            return

        # ker 9-10: MOSUM window sums = differences of the inclusive scan; CUSUM = the scan
        block_scan_row(r_comp[p, :count], r_buf[p, :count], scan_f, False, 0.0)
        cuda.syncthreads()
        scale = sigma * math.sqrt(numba.float64(n))
        critval = critvals[s, p]
        local_sum = 0.0
        local_max = 0.0
        local_bad = 0.0
        first = -1
        for j in range(tid, n_mon, tpb):
            at = n + j
            x = (n + 1 + j) / n
            if cusum:
                process = r_buf[p, at] / scale
                boundary = math.sqrt(x * (x - 1.0) * (critval * critval + math.log(x / (x - 1.0))))
            else:
                process = (r_buf[p, at] - r_buf[p, at - window]) / scale
                boundary = critval * math.sqrt(2.0 * log_plus(x))
            size = abs(process)
            if math.isnan(process) or math.isinf(process):
                local_bad += 1.0
            local_sum += process
            if math.isnan(size) or size > local_max:
                local_max = size
            if first < 0 and size > boundary:
                first = j
            if return_process:
                proc_out[s, keys[p, at], p] = process
                bnd_out[s, keys[p, at], p] = boundary
        red_f[tid] = local_sum
        total = block_sum(red_f)
        red_f[tid] = local_bad
        n_bad = block_sum(red_f)
        red_f[tid] = local_max
        statistic = block_max_nan(red_f)
        red_i[tid] = first
        first = block_min_index(red_i)
        if tid == 0:
            i_out[I_STATUS, s, p] = flagged[s, p] if flagged[s, p] != 0 else _OK  # a flag status
            if first >= 0 and n_bad == 0.0:
                i_out[I_BREAK, s, p] = keys[p, n + first]
            else:
                i_out[I_BREAK, s, p] = -1
            f_out[F_MAGNITUDE, s, p] = magnitude
            f_out[F_MEAN, s, p] = total / n_mon
            f_out[F_STATISTIC, s, p] = statistic
            f_out[F_SIGMA, s, p] = sigma
            f_out[F_RMSE, s, p] = rmse
            f_out[F_RELATIVE, s, p] = relative

    return monitor


def threads_per_block() -> int:
    """``config.CUDA_THREADS_PER_BLOCK``, checked (a power of two in [1, 1024])."""
    return threads_per_block_of(None)


def gram_kernel(k: int, tile_k: int, tile_pixels: int, tile_dates: int):
    """The register-tiled masked Gram of :mod:`tscube.parallel` (Fig. 4b), float64."""
    return masked_gram_kernel(tile_k, tile_pixels, tile_dates, np.dtype(np.float64).str)
