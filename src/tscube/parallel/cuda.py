"""numba.cuda data-parallel primitives: device functions, kernels and host wrappers.

This module imports :mod:`numba.cuda`; it is loaded lazily (see
:mod:`tscube.parallel`), never by ``import tscube``.

Three layers, from reusable to convenient:

1. **Block-level device functions** (``@cuda.jit(device=True)``) that all threads of a
   block call together on a shared-memory array: :func:`block_exclusive_scan`
   (Blelloch, work-efficient, bank-conflict-free indexing), :func:`block_exclusive_segscan`,
   :func:`block_argmin`, :func:`block_min_index`, :func:`block_scan_row` (a whole row of
   any length by one block, chunk by chunk with a carry) and :func:`block_compact_row`.
   Per-pixel kernels (one CUDA block per pixel, paper 001 §III-B) build on these.
2. **Device-level functions** (``*_device``) that take and return device arrays and
   launch kernels, e.g. :func:`scan_device` (block scan, recursive scan of the block
   sums, add-back), so later engines chain them without host round trips.
3. **Host wrappers** (NumPy in, NumPy out) with the signatures of
   :mod:`tscube.parallel.reference`, which the simulator tests compare against.

Kernels whose shared/local arrays need compile-time sizes are built by small cached
factories keyed by those sizes (threads per block, tiles, matrix order).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numba
import numpy as np
from numba import cuda

from .. import config
from . import reference as _ref

__all__ = [
    "block_exclusive_scan",
    "block_exclusive_segscan",
    "block_argmin",
    "block_min_index",
    "block_sum",
    "block_scan_row",
    "block_compact_row",
    "scan_shared_size",
    "scan_device",
    "segmented_scan_device",
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
    "is_valid",
    "clean_transpose_kernel",
]

#: log2 of the number of shared-memory banks; padding one slot every 32 keeps the
#: strided accesses of the Blelloch tree free of bank conflicts (GPU Gems 3, ch. 39).
LOG_NUM_BANKS = 5

#: Static shared memory one block may use (48 KiB on every CUDA GPU); bounds the order of
#: the augmented systems of :func:`batched_gauss_jordan` (k = 56 for an inverse).
GAUSS_JORDAN_MAX_SHARED_BYTES = 48 * 1024 - 64


# --------------------------------------------------------------------------------------
# missing values and layout
# --------------------------------------------------------------------------------------


@cuda.jit(device=True)
def is_valid(v, has_nodata, nodata):
    """A float64 value is an observation: finite and not the nodata value."""
    if math.isnan(v) or math.isinf(v):
        return False
    if has_nodata and v == nodata:
        return False
    return True


@lru_cache(maxsize=None)
def clean_transpose_kernel(tile: int, rows: int):
    """Kernel ``(raw, has_nodata, nodata, y_rows)`` on blocks of ``(tile, rows)`` threads.

    ``y_rows[p, t] = raw[t, p]`` as float64, missing -> NaN: a shared-memory tile
    transpose (coalesced reads of dates x pixels, coalesced writes of pixels x dates; the
    ``tile + 1`` row pitch avoids bank conflicts).
    """
    pitch = tile + 1  # shared-array shapes must be compile-time constants

    @cuda.jit
    def clean_transpose(raw, has_nodata, nodata, y_rows):
        buf = cuda.shared.array((tile, pitch), numba.float64)
        n_dates, n_pixels = raw.shape
        p0 = cuda.blockIdx.x * tile
        t0 = cuda.blockIdx.y * tile
        tx = cuda.threadIdx.x
        p = p0 + tx
        for dt in range(cuda.threadIdx.y, tile, rows):
            t = t0 + dt
            if t < n_dates and p < n_pixels:
                v = numba.float64(raw[t, p])
                buf[dt, tx] = v if is_valid(v, has_nodata, nodata) else math.nan
        cuda.syncthreads()
        t = t0 + tx
        for dp in range(cuda.threadIdx.y, tile, rows):
            q = p0 + dp
            if t < n_dates and q < n_pixels:
                y_rows[q, t] = buf[tx, dp]

    return clean_transpose


# --------------------------------------------------------------------------------------
# configuration helpers
# --------------------------------------------------------------------------------------


def threads_per_block_of(threads_per_block=None) -> int:
    """Validated threads per block for the 1-D kernels (a power of two, 1..1024)."""
    tpb = config.CUDA_THREADS_PER_BLOCK if threads_per_block is None else threads_per_block
    if isinstance(tpb, bool) or not isinstance(tpb, (int, np.integer)):
        raise TypeError(f"threads_per_block must be an int, got {tpb!r}")
    tpb = int(tpb)
    if tpb < 1 or tpb > 1024 or tpb & (tpb - 1):
        raise ValueError(f"threads_per_block must be a power of two in [1, 1024], got {tpb}")
    return tpb


def scan_shared_size(n: int) -> int:
    """Length of a shared array holding ``n`` scan slots with conflict-free padding."""
    return n + (n >> LOG_NUM_BANKS) + 1


def _numba_type(dtype):
    return numba.from_dtype(np.dtype(dtype))


def _to_device_numeric(x: np.ndarray):
    """Copy to the device, booleans as uint8 (kernels test ``!= 0``)."""
    x = np.ascontiguousarray(x)
    if x.dtype == np.bool_:
        x = x.view(np.uint8)
    return cuda.to_device(x)


def _blocks(n: int, per_block: int) -> int:
    return (n + per_block - 1) // per_block


# --------------------------------------------------------------------------------------
# block-level device functions
# --------------------------------------------------------------------------------------


@cuda.jit(device=True)
def conflict_free(i):
    """Shared-memory slot of logical scan index ``i`` (one pad slot per 32)."""
    return i + (i >> LOG_NUM_BANKS)


@cuda.jit(device=True)
def block_exclusive_scan(s, n):
    """Work-efficient (Blelloch) exclusive sum scan of ``n`` slots of shared ``s``.

    ``n`` must be a power of two and at most ``2 * blockDim.x``; slot ``i`` lives at
    ``s[conflict_free(i)]`` (allocate :func:`scan_shared_size` ``(n)``). All threads of
    the block must call it. Up-sweep then down-sweep: work O(n), depth 2 log2(n).
    Returns the total of the ``n`` slots; ends with a barrier.
    """
    tid = cuda.threadIdx.x
    offset = 1
    d = n >> 1
    while d > 0:  # up-sweep (reduction tree)
        cuda.syncthreads()
        if tid < d:
            ai = offset * (2 * tid + 1) - 1
            bi = ai + offset
            s[conflict_free(bi)] += s[conflict_free(ai)]
        offset <<= 1
        d >>= 1
    cuda.syncthreads()
    last = conflict_free(n - 1)
    total = s[last]
    cuda.syncthreads()  # every thread has read the total before it is cleared
    if tid == 0:
        s[last] = 0
    d = 1
    while d < n:  # down-sweep
        offset >>= 1
        cuda.syncthreads()
        if tid < d:
            ai = conflict_free(offset * (2 * tid + 1) - 1)
            bi = conflict_free(offset * (2 * tid + 2) - 1)
            left = s[ai]
            s[ai] = s[bi]
            s[bi] += left
        d <<= 1
    cuda.syncthreads()
    return total


@cuda.jit(device=True)
def _segment_combine(va, fa, vb, fb):
    """The segmented-scan operator on (value, head flag) pairs: restart at a head."""
    if fb != 0:
        return vb, fb
    return va + vb, fa


@cuda.jit(device=True)
def block_exclusive_segscan(sv, sf, n):
    """Blelloch exclusive scan of (value, flag) pairs under the segmented operator.

    ``sv`` holds values and ``sf`` head flags (0/1), both with the padded indexing of
    :func:`block_exclusive_scan`. After the call slot ``i`` holds the sum of the values
    since the last head *before* ``i`` (in ``sv``) and whether such a head exists in the
    slots before ``i`` (in ``sf``). Returns the (value, flag) total of the ``n`` slots.
    The operator is associative, not commutative, so left/right operands keep order.
    """
    tid = cuda.threadIdx.x
    offset = 1
    d = n >> 1
    while d > 0:
        cuda.syncthreads()
        if tid < d:
            ai = conflict_free(offset * (2 * tid + 1) - 1)
            bi = conflict_free(offset * (2 * tid + 2) - 1)
            v, f = _segment_combine(sv[ai], sf[ai], sv[bi], sf[bi])
            sv[bi] = v
            sf[bi] = f
        offset <<= 1
        d >>= 1
    cuda.syncthreads()
    last = conflict_free(n - 1)
    total_v = sv[last]
    total_f = sf[last]
    cuda.syncthreads()
    if tid == 0:
        sv[last] = 0
        sf[last] = 0
    d = 1
    while d < n:
        offset >>= 1
        cuda.syncthreads()
        if tid < d:
            ai = conflict_free(offset * (2 * tid + 1) - 1)
            bi = conflict_free(offset * (2 * tid + 2) - 1)
            left_v = sv[ai]
            left_f = sf[ai]
            sv[ai] = sv[bi]
            sf[ai] = sf[bi]
            # prefix of the right child = prefix of the parent (+) sum of the left child
            v, f = _segment_combine(sv[bi], sf[bi], left_v, left_f)
            sv[bi] = v
            sf[bi] = f
        d <<= 1
    cuda.syncthreads()
    return total_v, total_f


@cuda.jit(device=True)
def _beats(va, ia, vb, ib):
    """True if candidate (vb, ib) is a better argmin than (va, ia); index -1 = none."""
    if ib < 0:
        return False
    if ia < 0:
        return True
    return vb < va or (vb == va and ib < ia)


@cuda.jit(device=True)
def block_argmin(sv, si):
    """Tree reduction of (value, index) candidates in shared ``sv``/``si`` (one per thread).

    ``blockDim.x`` must be a power of two. Index -1 marks an empty candidate; ties go to
    the lower index. Returns the winning (value, index); ends with a barrier.
    """
    tid = cuda.threadIdx.x
    d = cuda.blockDim.x >> 1
    while d > 0:
        cuda.syncthreads()
        if tid < d and _beats(sv[tid], si[tid], sv[tid + d], si[tid + d]):
            sv[tid] = sv[tid + d]
            si[tid] = si[tid + d]
        d >>= 1
    cuda.syncthreads()
    value = sv[0]
    index = si[0]
    cuda.syncthreads()
    return value, index


@cuda.jit(device=True)
def block_min_index(si):
    """Smallest non-negative index among shared ``si`` (one per thread), -1 if none.

    This is the "first true" reduction. Returns the result; ends with a barrier.
    """
    tid = cuda.threadIdx.x
    d = cuda.blockDim.x >> 1
    while d > 0:
        cuda.syncthreads()
        if tid < d:
            other = si[tid + d]
            if other >= 0 and (si[tid] < 0 or other < si[tid]):
                si[tid] = other
        d >>= 1
    cuda.syncthreads()
    index = si[0]
    cuda.syncthreads()
    return index


@cuda.jit(device=True)
def block_sum(s):
    """Tree sum of shared ``s[0:blockDim.x]`` (one partial per thread; power-of-two
    block). Work O(n), depth log2(n). Returns the total; ends with a barrier."""
    tid = cuda.threadIdx.x
    d = cuda.blockDim.x >> 1
    while d > 0:
        cuda.syncthreads()
        if tid < d:
            s[tid] += s[tid + d]
        d >>= 1
    cuda.syncthreads()
    total = s[0]
    cuda.syncthreads()
    return total


@cuda.jit(device=True)
def block_scan_row(x_row, out_row, s, exclusive, carry):
    """Scan a whole row (any length) with one block, ``2 * blockDim.x`` elements a chunk.

    ``s`` is a shared array of :func:`scan_shared_size` ``(2 * blockDim.x)`` slots in the
    accumulation dtype; ``carry`` is the initial value (0 of that dtype). Work O(n),
    depth O((n / blockDim) log blockDim). Returns the row total (plus ``carry``).
    This is the building block of per-pixel scans such as the MOSUM process.
    """
    tid = cuda.threadIdx.x
    tpb = cuda.blockDim.x
    chunk = 2 * tpb
    n = x_row.shape[0]
    for start in range(0, n, chunk):
        i0 = start + tid
        i1 = i0 + tpb
        if i0 < n:
            s[conflict_free(tid)] = x_row[i0]
        else:
            s[conflict_free(tid)] = 0
        if i1 < n:
            s[conflict_free(tid + tpb)] = x_row[i1]
        else:
            s[conflict_free(tid + tpb)] = 0
        total = block_exclusive_scan(s, chunk)
        if i0 < n:
            out_row[i0] = carry + s[conflict_free(tid)]
            if not exclusive:
                out_row[i0] += x_row[i0]
        if i1 < n:
            out_row[i1] = carry + s[conflict_free(tid + tpb)]
            if not exclusive:
                out_row[i1] += x_row[i1]
        carry += total
        cuda.syncthreads()  # all reads of s done before the next chunk overwrites it
    return carry


@cuda.jit(device=True)
def block_compact_row(values, out_values, out_keys, s, fill_value, key_fill):
    """The paper's ``filterNaNsWKeys`` for one row by one block; returns the count.

    Marks valid (non-NaN) entries, exclusive-scans the marks chunk by chunk (``s``:
    int32/int64 shared scan buffer of :func:`scan_shared_size` ``(2 * blockDim.x)``),
    scatters valid values and their indices to the front and pads the rest with
    ``fill_value`` / ``key_fill``.
    """
    tid = cuda.threadIdx.x
    tpb = cuda.blockDim.x
    chunk = 2 * tpb
    n = values.shape[0]
    count = 0
    for start in range(0, n, chunk):
        i0 = start + tid
        i1 = i0 + tpb
        s[conflict_free(tid)] = 1 if (i0 < n and not math.isnan(values[i0])) else 0
        s[conflict_free(tid + tpb)] = 1 if (i1 < n and not math.isnan(values[i1])) else 0
        total = block_exclusive_scan(s, chunk)
        if i0 < n and not math.isnan(values[i0]):
            pos = count + s[conflict_free(tid)]
            out_values[pos] = values[i0]
            out_keys[pos] = i0
        if i1 < n and not math.isnan(values[i1]):
            pos = count + s[conflict_free(tid + tpb)]
            out_values[pos] = values[i1]
            out_keys[pos] = i1
        count += total
        cuda.syncthreads()
    for i in range(count + tid, n, tpb):
        out_values[i] = fill_value
        out_keys[i] = key_fill
    return count


# --------------------------------------------------------------------------------------
# device-wide scan: block scan + recursive scan of block sums + add-back
# --------------------------------------------------------------------------------------


@lru_cache(maxsize=None)
def _scan_blocks_kernel(tpb: int, acc: str):
    chunk = 2 * tpb
    size = scan_shared_size(chunk)
    acc_nb = _numba_type(acc)

    @cuda.jit
    def scan_blocks(x, out, block_sums, exclusive):
        s = cuda.shared.array(size, acc_nb)
        tid = cuda.threadIdx.x
        n = x.shape[0]
        i0 = cuda.blockIdx.x * chunk + tid
        i1 = i0 + tpb
        if i0 < n:
            s[conflict_free(tid)] = x[i0]
        else:
            s[conflict_free(tid)] = 0
        if i1 < n:
            s[conflict_free(tid + tpb)] = x[i1]
        else:
            s[conflict_free(tid + tpb)] = 0
        total = block_exclusive_scan(s, chunk)
        if i0 < n:
            out[i0] = s[conflict_free(tid)]
            if not exclusive:
                out[i0] += x[i0]
        if i1 < n:
            out[i1] = s[conflict_free(tid + tpb)]
            if not exclusive:
                out[i1] += x[i1]
        if tid == 0:
            block_sums[cuda.blockIdx.x] = total

    return scan_blocks


@cuda.jit
def _add_block_carry(out, scanned_block_sums, per_block):
    """``out[i] += inclusive_block_sums[b - 1]`` for the elements of blocks ``b > 0``."""
    i = cuda.grid(1)
    if i < out.shape[0]:
        b = i // per_block
        if b > 0:
            out[i] += scanned_block_sums[b - 1]


def scan_device(d_x, exclusive: bool = False, dtype=None, threads_per_block=None):
    """Device-wide prefix sum of a 1-D device array; returns a new device array.

    Each block scans ``2 * threads_per_block`` elements and writes its total; the block
    totals are scanned recursively by this same function; each element then adds the
    scanned total of the blocks before it. Work O(n), depth O(log n) launches.
    """
    tpb = threads_per_block_of(threads_per_block)
    acc = _ref.accumulation_dtype(d_x.dtype, dtype)
    n = d_x.shape[0]
    d_out = cuda.device_array(n, dtype=acc)
    if n == 0:
        return d_out
    chunk = 2 * tpb
    nblocks = _blocks(n, chunk)
    d_sums = cuda.device_array(nblocks, dtype=acc)
    _scan_blocks_kernel(tpb, acc.str)[nblocks, tpb](d_x, d_out, d_sums, bool(exclusive))
    if nblocks > 1:
        d_scanned = scan_device(d_sums, exclusive=False, dtype=acc, threads_per_block=tpb)
        _add_block_carry[_blocks(n, tpb), tpb](d_out, d_scanned, chunk)
    return d_out


@lru_cache(maxsize=None)
def _segscan_blocks_kernel(tpb: int, acc: str):
    chunk = 2 * tpb
    size = scan_shared_size(chunk)
    acc_nb = _numba_type(acc)

    @cuda.jit
    def segscan_blocks(x, flags, out, seen, sums, sum_flags, exclusive):
        sv = cuda.shared.array(size, acc_nb)
        sf = cuda.shared.array(size, numba.uint8)
        tid = cuda.threadIdx.x
        n = x.shape[0]
        i0 = cuda.blockIdx.x * chunk + tid
        i1 = i0 + tpb
        a0 = conflict_free(tid)
        a1 = conflict_free(tid + tpb)
        if i0 < n:
            sv[a0] = x[i0]
            sf[a0] = 1 if flags[i0] != 0 else 0
        else:
            sv[a0] = 0
            sf[a0] = 0
        if i1 < n:
            sv[a1] = x[i1]
            sf[a1] = 1 if flags[i1] != 0 else 0
        else:
            sv[a1] = 0
            sf[a1] = 0
        total_v, total_f = block_exclusive_segscan(sv, sf, chunk)
        if i0 < n:
            head = flags[i0] != 0
            if head:
                out[i0] = 0 if exclusive else x[i0]
            else:
                out[i0] = sv[a0] if exclusive else sv[a0] + x[i0]
            seen[i0] = 1 if (head or sf[a0] != 0) else 0
        if i1 < n:
            head = flags[i1] != 0
            if head:
                out[i1] = 0 if exclusive else x[i1]
            else:
                out[i1] = sv[a1] if exclusive else sv[a1] + x[i1]
            seen[i1] = 1 if (head or sf[a1] != 0) else 0
        if tid == 0:
            sums[cuda.blockIdx.x] = total_v
            sum_flags[cuda.blockIdx.x] = total_f

    return segscan_blocks


@cuda.jit
def _add_segment_carry(out, seen, scanned_sums, per_block):
    """Add the carry of earlier blocks to elements with no segment head before them."""
    i = cuda.grid(1)
    if i < out.shape[0]:
        b = i // per_block
        if b > 0 and seen[i] == 0:
            out[i] += scanned_sums[b - 1]


def segmented_scan_device(d_x, d_flags, exclusive: bool = False, dtype=None,
                          threads_per_block=None):
    """Device-wide segmented prefix sum (flags form) of 1-D device arrays.

    Same three phases as :func:`scan_device` on (value, flag) pairs: the block totals
    carry a flag saying whether the block contains a head, and the carry of earlier
    blocks is added only to elements with no head between the block start and them.
    """
    tpb = threads_per_block_of(threads_per_block)
    acc = _ref.accumulation_dtype(d_x.dtype, dtype)
    n = d_x.shape[0]
    d_out = cuda.device_array(n, dtype=acc)
    if n == 0:
        return d_out
    chunk = 2 * tpb
    nblocks = _blocks(n, chunk)
    d_seen = cuda.device_array(n, dtype=np.uint8)
    d_sums = cuda.device_array(nblocks, dtype=acc)
    d_sum_flags = cuda.device_array(nblocks, dtype=np.uint8)
    _segscan_blocks_kernel(tpb, acc.str)[nblocks, tpb](
        d_x, d_flags, d_out, d_seen, d_sums, d_sum_flags, bool(exclusive)
    )
    if nblocks > 1:
        d_scanned = segmented_scan_device(
            d_sums, d_sum_flags, exclusive=False, dtype=acc, threads_per_block=tpb
        )
        _add_segment_carry[_blocks(n, tpb), tpb](d_out, d_seen, d_scanned, chunk)
    return d_out


# --------------------------------------------------------------------------------------
# per-row (one block per pixel) kernels
# --------------------------------------------------------------------------------------


@lru_cache(maxsize=None)
def _batched_scan_kernel(tpb: int, acc: str):
    size = scan_shared_size(2 * tpb)
    acc_nb = _numba_type(acc)
    zero = np.dtype(acc).type(0)

    @cuda.jit
    def batched_scan_rows(values, out, exclusive):
        s = cuda.shared.array(size, acc_nb)
        row = cuda.blockIdx.x
        block_scan_row(values[row], out[row], s, exclusive, zero)

    return batched_scan_rows


@lru_cache(maxsize=None)
def _batched_sum_kernel(tpb: int, acc: str):
    acc_nb = _numba_type(acc)
    zero = np.dtype(acc).type(0)

    @cuda.jit
    def batched_sum_rows(values, out, skip_nan):
        s = cuda.shared.array(tpb, acc_nb)
        row = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        partial = zero
        for t in range(tid, values.shape[1], tpb):  # thread-local pass (Brent)
            v = values[row, t]
            if not (skip_nan and v != v):
                partial += v
        s[tid] = partial
        total = block_sum(s)
        if tid == 0:
            out[row] = total

    return batched_sum_rows


@lru_cache(maxsize=None)
def _compact_rows_kernel(tpb: int):
    size = scan_shared_size(2 * tpb)

    @cuda.jit
    def compact_rows(values, out_values, out_keys, count, fill_value, key_fill):
        s = cuda.shared.array(size, numba.int32)
        row = cuda.blockIdx.x
        c = block_compact_row(values[row], out_values[row], out_keys[row], s,
                              fill_value, key_fill)
        if cuda.threadIdx.x == 0:
            count[row] = c

    return compact_rows


@lru_cache(maxsize=None)
def _argmin_rows_kernel(tpb: int):
    @cuda.jit
    def argmin_rows(values, out):
        sv = cuda.shared.array(tpb, numba.float64)
        si = cuda.shared.array(tpb, numba.int64)
        row = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        best_v = 0.0
        best_i = -1
        for t in range(tid, values.shape[1], tpb):  # thread-local pass (Brent)
            v = values[row, t]
            if not math.isnan(v) and (best_i < 0 or v < best_v):
                best_v = v
                best_i = t
        sv[tid] = best_v
        si[tid] = best_i
        value, index = block_argmin(sv, si)
        if tid == 0:
            out[row] = index

    return argmin_rows


@lru_cache(maxsize=None)
def _argmin_chunks_kernel(tpb: int):
    @cuda.jit
    def argmin_chunks(values, indices, per_block, cand_values, cand_indices):
        """Reduce ``per_block`` (value, index) candidates per block to one."""
        sv = cuda.shared.array(tpb, numba.float64)
        si = cuda.shared.array(tpb, numba.int64)
        tid = cuda.threadIdx.x
        start = cuda.blockIdx.x * per_block
        stop = min(start + per_block, values.shape[0])
        best_v = 0.0
        best_i = -1
        for t in range(start + tid, stop, tpb):
            v = values[t]
            i = indices[t] if indices.shape[0] > 0 else t
            if i >= 0 and not math.isnan(v) and (
                best_i < 0 or v < best_v or (v == best_v and i < best_i)
            ):
                best_v = v
                best_i = i
        sv[tid] = best_v
        si[tid] = best_i
        value, index = block_argmin(sv, si)
        if tid == 0:
            cand_values[cuda.blockIdx.x] = value
            cand_indices[cuda.blockIdx.x] = index

    return argmin_chunks


@lru_cache(maxsize=None)
def _first_true_rows_kernel(tpb: int):
    @cuda.jit
    def first_true_rows(mask, out):
        si = cuda.shared.array(tpb, numba.int64)
        row = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        first = -1
        for t in range(tid, mask.shape[1], tpb):
            if mask[row, t] != 0:
                first = t
                break
        si[tid] = first
        index = block_min_index(si)
        if tid == 0:
            out[row] = index

    return first_true_rows


@lru_cache(maxsize=None)
def _first_true_chunks_kernel(tpb: int):
    @cuda.jit
    def first_true_chunks(mask, per_block, cand):
        si = cuda.shared.array(tpb, numba.int64)
        tid = cuda.threadIdx.x
        start = cuda.blockIdx.x * per_block
        stop = min(start + per_block, mask.shape[0])
        first = -1
        for t in range(start + tid, stop, tpb):
            if mask[t] != 0:
                first = t
                break
        si[tid] = first
        index = block_min_index(si)
        if tid == 0:
            cand[cuda.blockIdx.x] = index

    return first_true_chunks


@cuda.jit
def _compact_scatter(values, excl, out_values, out_keys, fill_value, key_fill):
    """Device-wide compaction (split): valid values to the front, padding to the back."""
    i = cuda.grid(1)
    n = values.shape[0]
    if i < n:
        count = excl[n - 1] + (0 if math.isnan(values[n - 1]) else 1)
        if not math.isnan(values[i]):
            out_values[excl[i]] = values[i]
            out_keys[excl[i]] = i
        else:
            pos = count + (i - excl[i])  # invalid ones before i, after all valid ones
            out_values[pos] = fill_value
            out_keys[pos] = key_fill


@cuda.jit
def _nan_flags(values, flags):
    i = cuda.grid(1)
    if i < values.shape[0]:
        flags[i] = 0 if math.isnan(values[i]) else 1


# --------------------------------------------------------------------------------------
# batched small linear algebra (paper 001 §III-C)
# --------------------------------------------------------------------------------------


@lru_cache(maxsize=None)
def masked_gram_kernel(tile_k: int, tile_pixels: int, tile_dates: int, acc: str):
    acc_nb = _numba_type(acc)
    zero = np.dtype(acc).type(0)
    nthreads = tile_k * tile_k

    @cuda.jit
    def masked_gram(X, mask_t, G):
        """Fig. 4b: block (tile_k x tile_k) of regressor pairs, ``tile_pixels`` pixels
        per block accumulated in registers; the mask tile is staged in shared memory
        with coalesced loads from the transposed mask (dates x pixels)."""
        n_dates = mask_t.shape[0]
        n_pixels = mask_t.shape[1]
        k = X.shape[1]
        j2 = cuda.blockIdx.y * tile_k + cuda.threadIdx.x
        j1 = cuda.blockIdx.z * tile_k + cuda.threadIdx.y
        p0 = cuda.blockIdx.x * tile_pixels
        lin = cuda.threadIdx.y * tile_k + cuda.threadIdx.x
        mask_sh = cuda.shared.array((tile_dates, tile_pixels), acc_nb)
        acc_r = cuda.local.array(tile_pixels, acc_nb)
        for i in range(tile_pixels):
            acc_r[i] = zero
        active = j1 < k and j2 < k
        for t0 in range(0, n_dates, tile_dates):
            cuda.syncthreads()
            for e in range(lin, tile_dates * tile_pixels, nthreads):
                tt = e // tile_pixels
                pp = e - tt * tile_pixels
                t = t0 + tt
                p = p0 + pp
                if t < n_dates and p < n_pixels and mask_t[t, p] != 0:
                    mask_sh[tt, pp] = 1
                else:
                    mask_sh[tt, pp] = 0
            cuda.syncthreads()
            if active:
                for tt in range(tile_dates):
                    t = t0 + tt
                    if t < n_dates:
                        ab = X[t, j1] * X[t, j2]  # hoisted: reused by all pixels
                        for i in range(tile_pixels):
                            acc_r[i] += ab * mask_sh[tt, i]
        if active:
            for i in range(tile_pixels):
                if p0 + i < n_pixels:
                    G[p0 + i, j1, j2] = acc_r[i]

    return masked_gram


@lru_cache(maxsize=None)
def _masked_xty_kernel(acc: str):
    zero = np.dtype(acc).type(0)

    @cuda.jit
    def masked_xty(X, Y_t, out):
        """Thread per (pixel, regressor); pixels on x for coalesced reads of Y'."""
        p = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        j = cuda.blockIdx.y
        if p < Y_t.shape[1]:
            acc = zero
            for t in range(Y_t.shape[0]):
                y = Y_t[t, p]
                if not math.isnan(y):
                    acc += X[t, j] * y
            out[p, j] = acc

    return masked_xty


@lru_cache(maxsize=None)
def _gauss_jordan_kernel(k: int, r: int, tpb: int):
    w = k + r

    @cuda.jit
    def gauss_jordan(A, B, rtol, X, singular):
        """Fig. 5 with partial pivoting: block per system, augmented [A | B] in shared
        memory, every thread updates a strided set of its entries each step."""
        system = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        aug = cuda.shared.array((k, w), numba.float64)
        column = cuda.shared.array(k, numba.float64)
        state = cuda.shared.array(2, numba.int64)  # pivot row, singular flag
        scale = cuda.shared.array(1, numba.float64)
        for e in range(tid, k * w, tpb):
            i = e // w
            c = e - i * w
            if c < k:
                aug[i, c] = A[system, i, c]
            else:
                aug[i, c] = B[system, i, c - k]
        cuda.syncthreads()
        if tid == 0:
            largest = 0.0
            bad = 0
            for i in range(k):
                for c in range(k):
                    a = abs(aug[i, c])
                    if math.isnan(a) or math.isinf(a):
                        bad = 1
                    elif a > largest:
                        largest = a
            scale[0] = largest
            state[1] = 1 if (bad != 0 or largest == 0.0) else 0
        cuda.syncthreads()
        for q in range(k):
            if tid == 0 and state[1] == 0:
                prow = q
                best = abs(aug[q, q])
                for i in range(q + 1, k):
                    if abs(aug[i, q]) > best:
                        best = abs(aug[i, q])
                        prow = i
                state[0] = prow
                if not best > rtol * scale[0]:
                    state[1] = 1
            cuda.syncthreads()
            if state[1] != 0:  # uniform: every thread reads the same shared flag
                break
            prow = state[0]
            if prow != q:
                for c in range(tid, w, tpb):
                    tmp = aug[q, c]
                    aug[q, c] = aug[prow, c]
                    aug[prow, c] = tmp
            cuda.syncthreads()
            pivot = aug[q, q]
            for i in range(tid, k, tpb):
                column[i] = aug[i, q]
            cuda.syncthreads()
            for c in range(tid, w, tpb):
                aug[q, c] = aug[q, c] / pivot
            cuda.syncthreads()
            for e in range(tid, k * w, tpb):
                i = e // w
                c = e - i * w
                if i != q:
                    aug[i, c] = aug[i, c] - column[i] * aug[q, c]
            cuda.syncthreads()
        flag = state[1]
        for e in range(tid, k * r, tpb):
            i = e // r
            c = e - i * r
            X[system, i, c] = math.nan if flag != 0 else aug[i, k + c]
        if tid == 0:
            singular[system] = flag

    return gauss_jordan


# --------------------------------------------------------------------------------------
# host wrappers (NumPy in, NumPy out; signatures of tscube.parallel.reference)
# --------------------------------------------------------------------------------------


def inclusive_scan(x, dtype=None, threads_per_block=None) -> np.ndarray:
    """Inclusive prefix sum on the device; see :func:`reference.inclusive_scan`."""
    x = _ref.as_vector(x, "x")
    acc = _ref.accumulation_dtype(x.dtype, dtype)
    return scan_device(_to_device_numeric(x), False, acc, threads_per_block).copy_to_host()


def exclusive_scan(x, dtype=None, threads_per_block=None) -> np.ndarray:
    """Exclusive prefix sum on the device; see :func:`reference.exclusive_scan`."""
    x = _ref.as_vector(x, "x")
    acc = _ref.accumulation_dtype(x.dtype, dtype)
    return scan_device(_to_device_numeric(x), True, acc, threads_per_block).copy_to_host()


def segmented_scan(x, flags, exclusive: bool = False, dtype=None,
                   threads_per_block=None) -> np.ndarray:
    """Segmented prefix sum (flags form) on the device; see
    :func:`reference.segmented_scan`."""
    x = _ref.as_vector(x, "x")
    flags = _ref.as_vector(flags, "flags")
    if flags.shape != x.shape:
        raise ValueError(f"flags must have the shape of x {x.shape}, got {flags.shape}")
    acc = _ref.accumulation_dtype(x.dtype, dtype)
    d_out = segmented_scan_device(
        _to_device_numeric(x), _to_device_numeric(flags), exclusive, acc, threads_per_block
    )
    return d_out.copy_to_host()


def batched_scan(values, exclusive: bool = False, dtype=None,
                 threads_per_block=None) -> np.ndarray:
    """Prefix sum of every row, one block per row; see :func:`reference.batched_scan`."""
    values = np.asarray(values)
    if values.ndim < 1:
        raise ValueError("values must have at least one dimension")
    acc = _ref.accumulation_dtype(values.dtype, dtype)
    tpb = threads_per_block_of(threads_per_block)
    rows = _ref.last_axis_rows(values)
    if rows.size == 0:
        return np.zeros(values.shape, dtype=acc)
    d_out = cuda.device_array(rows.shape, dtype=acc)
    _batched_scan_kernel(tpb, acc.str)[rows.shape[0], tpb](
        _to_device_numeric(rows), d_out, bool(exclusive)
    )
    return d_out.copy_to_host().reshape(values.shape)


def batched_sum(values, dtype=None, skip_nan: bool = False,
                threads_per_block=None) -> np.ndarray:
    """Row sums, one block per row; see :func:`reference.batched_sum`."""
    values = np.asarray(values)
    if values.ndim < 1:
        raise ValueError("values must have at least one dimension")
    acc = _ref.accumulation_dtype(values.dtype, dtype)
    tpb = threads_per_block_of(threads_per_block)
    rows = _ref.last_axis_rows(values)
    if rows.shape[0] == 0:
        return np.zeros(values.shape[:-1], dtype=acc)
    d_out = cuda.device_array(rows.shape[0], dtype=acc)
    _batched_sum_kernel(tpb, acc.str)[rows.shape[0], tpb](
        _to_device_numeric(rows), d_out, bool(skip_nan)
    )
    return d_out.copy_to_host().reshape(values.shape[:-1])


def compact_with_keys(values, fill_value=np.nan, key_fill: int = 0,
                      threads_per_block=None):
    """``filterNaNsWKeys`` on the device; see :func:`reference.compact_with_keys`.

    A 1-D input is compacted device-wide (exclusive scan of the valid marks, then a
    split-style scatter); rows of an N-D input are compacted one block per row.
    """
    values = np.asarray(values)
    if values.ndim < 1:
        raise ValueError("values must have at least one dimension")
    if values.dtype.kind != "f":
        raise TypeError(f"values must be floating point (NaN = missing), got {values.dtype}")
    tpb = threads_per_block_of(threads_per_block)
    lead = values.shape[:-1]
    if values.size == 0:
        count = np.zeros(lead, dtype=np.int64)
        return (count, np.full(values.shape, fill_value, values.dtype),
                np.full(values.shape, key_fill, np.int64))
    if values.ndim == 1:
        n = values.shape[0]
        d_values = cuda.to_device(np.ascontiguousarray(values))
        d_flags = cuda.device_array(n, dtype=np.uint8)
        _nan_flags[_blocks(n, tpb), tpb](d_values, d_flags)
        d_excl = scan_device(d_flags, exclusive=True, dtype=np.int64, threads_per_block=tpb)
        d_out = cuda.device_array(n, dtype=values.dtype)
        d_keys = cuda.device_array(n, dtype=np.int64)
        _compact_scatter[_blocks(n, tpb), tpb](
            d_values, d_excl, d_out, d_keys, values.dtype.type(fill_value), np.int64(key_fill)
        )
        last_excl = int(d_excl[n - 1:].copy_to_host()[0])
        count = np.asarray(last_excl + int(not np.isnan(values[-1])), dtype=np.int64)
        return count, d_out.copy_to_host(), d_keys.copy_to_host()
    rows = _ref.last_axis_rows(values)
    d_out = cuda.device_array(rows.shape, dtype=values.dtype)
    d_keys = cuda.device_array(rows.shape, dtype=np.int64)
    d_count = cuda.device_array(rows.shape[0], dtype=np.int64)
    _compact_rows_kernel(tpb)[rows.shape[0], tpb](
        cuda.to_device(np.ascontiguousarray(rows)), d_out, d_keys, d_count,
        values.dtype.type(fill_value), np.int64(key_fill),
    )
    return (d_count.copy_to_host().reshape(lead), d_out.copy_to_host().reshape(values.shape),
            d_keys.copy_to_host().reshape(values.shape))


def first_true(mask, threads_per_block=None) -> np.ndarray:
    """First true index per row (-1 if none); see :func:`reference.first_true`.

    Rows: one block per row. 1-D: each block reduces a chunk to a candidate, then one
    block reduces the candidates (two-level reduction).
    """
    mask = np.asarray(mask)
    if mask.ndim < 1:
        raise ValueError("mask must have at least one dimension")
    tpb = threads_per_block_of(threads_per_block)
    lead = mask.shape[:-1]
    if mask.size == 0:
        return np.full(lead, -1, dtype=np.int64)
    if mask.ndim == 1:
        per_block = tpb * 8
        nblocks = _blocks(mask.shape[0], per_block)
        d_cand = cuda.device_array(nblocks, dtype=np.int64)
        _first_true_chunks_kernel(tpb)[nblocks, tpb](_to_device_numeric(mask), per_block, d_cand)
        d_out = cuda.device_array(1, dtype=np.int64)
        # second level: one block reduces the candidate indices (-1 = none)
        _min_index_rows_kernel(tpb)[1, tpb](d_cand.reshape(1, nblocks), d_out)
        return np.asarray(d_out.copy_to_host()[0])
    rows = _ref.last_axis_rows(mask)
    d_out = cuda.device_array(rows.shape[0], dtype=np.int64)
    _first_true_rows_kernel(tpb)[rows.shape[0], tpb](_to_device_numeric(rows), d_out)
    return d_out.copy_to_host().reshape(lead)


@lru_cache(maxsize=None)
def _min_index_rows_kernel(tpb: int):
    @cuda.jit
    def min_index_rows(indices, out):
        si = cuda.shared.array(tpb, numba.int64)
        row = cuda.blockIdx.x
        tid = cuda.threadIdx.x
        best = -1
        for t in range(tid, indices.shape[1], tpb):
            i = indices[row, t]
            if i >= 0 and (best < 0 or i < best):
                best = i
        si[tid] = best
        index = block_min_index(si)
        if tid == 0:
            out[row] = index

    return min_index_rows


def argmin(x, threads_per_block=None) -> np.ndarray:
    """Index of the smallest non-NaN value per row (-1 if none); see
    :func:`reference.argmin`. 1-D input uses a two-level device-wide reduction."""
    x = np.asarray(x)
    if x.ndim < 1:
        raise ValueError("x must have at least one dimension")
    if x.dtype.kind not in "iuf":
        raise TypeError(f"x must hold numbers, got dtype {x.dtype}")
    tpb = threads_per_block_of(threads_per_block)
    lead = x.shape[:-1]
    if x.size == 0:
        return np.full(lead, -1, dtype=np.int64)
    x = x.astype(np.float64)
    if x.ndim == 1:
        per_block = tpb * 8
        nblocks = _blocks(x.shape[0], per_block)
        kernel = _argmin_chunks_kernel(tpb)
        d_values = cuda.to_device(x)
        d_indices = cuda.device_array(0, dtype=np.int64)  # empty: index = position
        while True:
            d_cand_v = cuda.device_array(nblocks, dtype=np.float64)
            d_cand_i = cuda.device_array(nblocks, dtype=np.int64)
            kernel[nblocks, tpb](d_values, d_indices, per_block, d_cand_v, d_cand_i)
            if nblocks == 1:
                return np.asarray(d_cand_i.copy_to_host()[0])
            d_values, d_indices = d_cand_v, d_cand_i
            nblocks = _blocks(nblocks, per_block)
    rows = np.ascontiguousarray(_ref.last_axis_rows(x))
    d_out = cuda.device_array(rows.shape[0], dtype=np.int64)
    _argmin_rows_kernel(tpb)[rows.shape[0], tpb](cuda.to_device(rows), d_out)
    return d_out.copy_to_host().reshape(lead)


def _gram_tiles(k: int, tile_k=None, tile_pixels=None, tile_dates=None):
    tile_k = config.CUDA_GRAM_TILE_K if tile_k is None else tile_k
    tile_pixels = config.CUDA_GRAM_TILE_PIXELS if tile_pixels is None else tile_pixels
    tile_dates = config.CUDA_GRAM_TILE_DATES if tile_dates is None else tile_dates
    for name, value in (("tile_k", tile_k), ("tile_pixels", tile_pixels),
                        ("tile_dates", tile_dates)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    return max(1, min(int(tile_k), k)), int(tile_pixels), int(tile_dates)


def batched_masked_gram(X, mask, dtype=np.float64, tile_k=None, tile_pixels=None,
                        tile_dates=None) -> np.ndarray:
    """Register-tiled batched masked Gram ``G[p] = sum_t mask[p,t] x_t x_t'``; see
    :func:`reference.batched_masked_gram`.

    Tiles default to ``config.CUDA_GRAM_TILE_K`` (regressor tile, block is its square),
    ``CUDA_GRAM_TILE_PIXELS`` (pixels accumulated in registers per thread, R of the
    paper) and ``CUDA_GRAM_TILE_DATES`` (dates staged in shared memory per barrier).
    """
    X, mask = _ref.check_design_and_batch(X, mask, "mask")
    acc = np.dtype(dtype)
    m, (n, k) = mask.shape[0], X.shape
    if m == 0 or k == 0:
        return np.zeros((m, k, k), dtype=acc)
    tile_k, tile_pixels, tile_dates = _gram_tiles(k, tile_k, tile_pixels, tile_dates)
    if n == 0:
        return np.zeros((m, k, k), dtype=acc)
    mask_t = np.ascontiguousarray((mask != 0).T).view(np.uint8)
    d_G = cuda.device_array((m, k, k), dtype=acc)
    grid = (_blocks(m, tile_pixels), _blocks(k, tile_k), _blocks(k, tile_k))
    masked_gram_kernel(tile_k, tile_pixels, tile_dates, acc.str)[grid, (tile_k, tile_k)](
        cuda.to_device(np.ascontiguousarray(X, dtype=acc)), cuda.to_device(mask_t), d_G
    )
    return d_G.copy_to_host()


def batched_masked_xty(X, Y, dtype=np.float64, threads_per_block=None) -> np.ndarray:
    """Per-pixel ``X' y`` over valid dates on the device; see
    :func:`reference.batched_masked_xty`."""
    X, Y = _ref.check_design_and_batch(X, Y, "Y")
    if Y.dtype.kind != "f":
        Y = Y.astype(np.float64)
    acc = np.dtype(dtype)
    tpb = threads_per_block_of(threads_per_block)
    m, k = Y.shape[0], X.shape[1]
    if m == 0 or k == 0:
        return np.zeros((m, k), dtype=acc)
    d_out = cuda.device_array((m, k), dtype=acc)
    _masked_xty_kernel(acc.str)[(_blocks(m, tpb), k), tpb](
        cuda.to_device(np.ascontiguousarray(X, dtype=acc)),
        cuda.to_device(np.ascontiguousarray(Y.T)), d_out,
    )
    return d_out.copy_to_host()


def batched_gauss_jordan(A, B=None, rtol: float = _ref.DEFAULT_PIVOT_RTOL,
                         threads_per_block=None):
    """Batched Gauss–Jordan solve/inverse in shared memory, singular systems flagged;
    see :func:`reference.batched_gauss_jordan` (same pivoting and tolerance)."""
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
    r = B.shape[2]
    if k * (k + r) * 8 > GAUSS_JORDAN_MAX_SHARED_BYTES:
        raise ValueError(
            f"A of order {k} with {r} right-hand sides does not fit the shared-memory "
            f"Gauss-Jordan kernel (k * (k + r) * 8 bytes must be <= "
            f"{GAUSS_JORDAN_MAX_SHARED_BYTES})"
        )
    if m == 0 or k == 0 or r == 0:
        X = np.zeros((m, k, r))
        singular = np.zeros(m, dtype=bool)
    else:
        cap = threads_per_block_of(threads_per_block)
        tpb = min(cap, 32 * _blocks(k * (k + r), 32))
        d_X = cuda.device_array((m, k, r), dtype=np.float64)
        d_singular = cuda.device_array(m, dtype=np.int64)
        _gauss_jordan_kernel(k, r, tpb)[m, tpb](
            cuda.to_device(np.ascontiguousarray(A)), cuda.to_device(np.ascontiguousarray(B)),
            float(rtol), d_X, d_singular,
        )
        X = d_X.copy_to_host()
        singular = d_singular.copy_to_host() != 0
    if vector_rhs:
        X = X[:, :, 0]
    return X, singular
