"""CUDA engine of :func:`tscube.stl` (numba.cuda): one thread per series, running the cpu
engine's own per-series code, so the results are those of the ``cpu`` engine.

The kernel calls :func:`tscube.stl._cpu.decompose_one` (an ``@njit`` function, which
numba-cuda compiles for the device together with everything it calls: ``_loess``,
``_local_fit``, ``_neighbourhood``, ``_moving_average``, ``_robustness_weights``,
``_select``, ...). There is no second copy of the algorithm: every case (both flavours,
gaps, robustness, jumps, degrees 0/1/2, long windows, periodic) is the cpu code path.

Layout: a chunk of ``m`` series is stored time-major, ``(T, m)``, and so is every
per-series work array (``(rows, m)`` in global memory). Thread ``s`` gets the strided
columns ``array[:, s]``, so at a given time index the threads of a warp touch
consecutive addresses (coalesced while they run in step). The series cross the bus as
rows ``(m, T)`` in their own dtype (float32 stays float32) and the shared-memory
tile transpose (:func:`tscube.parallel.cuda.clean_transpose_kernel`) turns them
into float64 columns; the outputs are transposed back to rows on the device, so every
host copy is contiguous.

Importing this module needs no CUDA driver or toolkit: :mod:`numba.cuda` is imported in
:func:`decompose` after the check that a GPU (or numba's CUDA simulator) is present.
The series are processed in chunks sized to the free device memory (or
``config.CUDA_CHUNK_BYTES``), with two buffer sets, each with its own stream and pinned
host staging, alternating as in :mod:`tscube.bfast.monitor._cuda`.
"""

from __future__ import annotations

import os
from functools import lru_cache

import numpy as np

from .. import config
from .._cuda_host import (DEVICE_LOCK, KeptBuffers, StepEvents, chunk_items, on_simulator, require_cuda,
                          stream_chunks, view)
from ._cpu import decompose_one, code_tables, param_codes
from ._params import StlParams

#: numba.cuda, bound by :func:`_kernel` on first use (not at import). The kernel below
#: reads it as a module global, which is what numba's CUDA simulator swaps while it runs.
cuda = None

#: What the kernel calls for one series: the cpu engine's function, compiled for the
#: device by numba-cuda (on the simulator, :func:`_kernel` puts a wrapper here).
_device_decompose = decompose_one

#: Threads per block at most: the kernel uses 255 registers per thread (ptxas, H100), and a
#: block may use 64 Ki registers.
MAX_BLOCK = 256

#: dtypes sent to the device as they are (converted to float64 by the transpose, exactly).
_DEVICE_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _work_rows(n: int, period: int) -> tuple[int, int]:
    """Rows of the int64 and float64 per-series work arrays (kept in step with
    :func:`_stl_columns`)."""
    sub = n // period + 1
    int_rows = 2 * n + 2 * period  # xv, sub_xv, sub_start, sub_nv
    # work_d, cycle, ma1, ma2, low, fbuf, sbuf, resid, sub_y, sub_w (as _cpu._decompose_batch)
    float_rows = ((n + 2) + (n + 2 * period) + (n + period + 1) + (n + 2) + n + (n + 2)
                  + (n + 2) + n + 2 * sub)
    return int_rows, float_rows


def _stl_columns(data, prm, tables, seasonal, trend, weights, status, valid, iwork, fwork):
    """One thread per series ``s``: STL of column ``data[:, s]`` into the columns of
    ``seasonal``, ``trend``, ``weights`` and ``status[s]``, with the work columns of
    ``iwork`` (int64) and ``fwork`` (float64) cut as in :func:`_work_rows`."""
    s = cuda.grid(1)
    if s >= data.shape[1]:
        return
    n = prm[0]
    p = prm[1]
    sub = n // p + 1
    i1 = n
    i2 = i1 + n
    i3 = i2 + p
    i4 = i3 + p
    f1 = n + 2
    f2 = f1 + n + 2 * p
    f3 = f2 + n + p + 1
    f4 = f3 + n + 2
    f5 = f4 + n
    f6 = f5 + n + 2
    f7 = f6 + n + 2
    f8 = f7 + n
    f9 = f8 + sub
    f10 = f9 + sub
    status[s] = _device_decompose(
        data[:, s], prm, seasonal[:, s], trend[:, s], weights[:, s], valid[:, s],
        iwork[0:i1, s], iwork[i1:i2, s], iwork[i2:i3, s], iwork[i3:i4, s],
        fwork[0:f1, s], fwork[f1:f2, s], fwork[f2:f3, s], fwork[f3:f4, s], fwork[f4:f5, s],
        fwork[f5:f6, s], fwork[f6:f7, s], fwork[f7:f8, s], tables, fwork[f8:f9, s],
        fwork[f9:f10, s])


@lru_cache(maxsize=None)
def _kernel(cuda_module):
    """The ``cuda.jit`` kernel of :func:`_stl_columns` (compiled per dtype on first launch)."""
    global cuda, _device_decompose
    cuda = cuda_module
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":  # as _require_cuda decides
        _device_decompose = on_simulator(decompose_one)
    return cuda_module.jit(_stl_columns)


def _bytes_per_series(n: int, period: int, itemsize: int) -> int:
    """Device bytes one series needs in one buffer set (kept in step with ``_Buffers``)."""
    int_rows, float_rows = _work_rows(n, period)
    # data rows (as sent), data columns (float64), seasonal/trend/weights, valid, work
    # arrays (their float part also receives the transposed outputs), status
    return n * (itemsize + 8 + 3 * 8 + 1) + 8 * (int_rows + float_rows) + 1


class _Buffers:
    """One stream with its device arrays and pinned host staging for ``chunk`` series."""

    def __init__(self, cuda, n, period, chunk, dtype):
        int_rows, float_rows = _work_rows(n, period)
        self.stream = cuda.stream()
        self.chunk = chunk
        self.pending = None  # (start, stop, steps) of the chunk in flight (stream_chunks)
        pin, dev = cuda.pinned_array, cuda.device_array
        self.h_data = pin(n * chunk, dtype)  # series rows (chunk, T), as given
        self.h_out = pin(3 * n * chunk, np.float64)  # seasonal, trend, weights rows
        self.h_status = pin(chunk, np.int8)
        self.d_rows = dev(n * chunk, dtype)
        self.d_data = dev(n * chunk, np.float64)  # columns (T, chunk)
        self.d_out = dev(3 * n * chunk, np.float64)
        self.d_status = dev(chunk, np.int8)
        self.d_valid = dev(n * chunk, np.bool_)
        self.d_iwork = dev(int_rows * chunk, np.int64)
        self.d_fwork = dev(float_rows * chunk, np.float64)


#: This engine's buffer sets, kept for its next run of the same shape.
_KEPT = KeptBuffers()


def decompose(data, prm: StlParams, timings: dict | None = None):
    """cuda engine: ``data`` is ``(n_series, T)`` float64 (or float32) with NaN for
    missing; returns seasonal, trend, weights ``(n_series, T)`` float64 and the int8
    status, like :func:`tscube.stl._cpu.decompose`. ``timings`` (a dict), if given, gets
    milliseconds by CUDA events summed over chunks: ``h2d``, ``kernels`` (each also as
    ``kernel_transpose_in``, ``kernel_stl``, ``kernel_transpose_out``) and ``d2h``, for
    benchmarks (see :class:`tscube._cuda_host.StepEvents`).

    Raises
    ------
    RuntimeError
        No GPU / CUDA driver (the simulator counts as a GPU).
    """
    cuda_module = require_cuda()
    if timings is not None:
        timings.clear()
        timings.update(h2d=0.0, kernels=0.0, d2h=0.0)
    data = np.asarray(data)
    if data.dtype not in _DEVICE_DTYPES:
        data = data.astype(np.float64)
    n_series, n = data.shape
    seasonal = np.empty((n_series, n))
    trend = np.empty((n_series, n))
    weights = np.empty((n_series, n))
    status = np.empty(n_series, dtype=np.int8)
    if n_series == 0:
        return seasonal, trend, weights, status
    with DEVICE_LOCK:
        _run_locked(cuda_module, data, prm, seasonal, trend, weights, status, timings)
    return seasonal, trend, weights, status


def _run_locked(cuda, data, prm, seasonal, trend, weights, status, timings):
    from ..parallel.cuda import clean_transpose_kernel  # imports numba.cuda

    n_series, n = data.shape
    codes = param_codes(n, prm)
    kernel = _kernel(cuda)
    key = (n, prm.period, data.dtype)
    _KEPT.drop_unless(key)  # before sizing the chunks by the free memory
    per_series = _bytes_per_series(n, prm.period, data.dtype.itemsize)
    chunk = chunk_items(cuda, n_series, per_series, per_series * _KEPT.held_items())
    int_rows, float_rows = _work_rows(n, prm.period)
    assert float_rows >= 3 * n  # the transposed outputs reuse the float work array
    tpb = max(1, min(int(config.CUDA_THREADS_PER_BLOCK), MAX_BLOCK))
    # tscube.parallel's shared-memory tile transpose (32 x 32 tiles, 32 x 8 threads for 256 threads
    # per block): (rows, cols) -> (cols, rows) as float64, non-finite -> NaN; so the host
    # copies stay contiguous and float32 data crosses the bus as float32
    tile = min(32, tpb)
    block_t = (tile, max(1, min(tile, tpb // tile)))
    transpose = clean_transpose_kernel(*block_t)
    d_codes = cuda.to_device(codes)
    d_tables = cuda.to_device(code_tables(codes))  # once per call, read by every thread
    buffers = _KEPT.get(key, chunk, 2 if n_series > chunk else 1,
                        lambda size: _Buffers(cuda, n, prm.period, size, data.dtype))

    def launch(buf: _Buffers, s0: int, s1: int) -> StepEvents:
        m = s1 - s0
        stream = buf.stream
        h_data = view(buf.h_data, m, n)
        np.copyto(h_data, data[s0:s1])  # host staging overlaps the other stream
        steps = StepEvents(cuda, stream, timings)
        d_rows = view(buf.d_rows, m, n)
        d_rows.copy_to_device(h_data, stream=stream)
        steps.mark("h2d")
        d_data = view(buf.d_data, n, m)
        transpose[((n + tile - 1) // tile, (m + tile - 1) // tile), block_t, stream](
            d_rows, False, 0.0, d_data)
        steps.mark("transpose_in")
        d_out = view(buf.d_out, 3, n, m)
        d_status = view(buf.d_status, m)
        d_fwork = view(buf.d_fwork, float_rows, m)
        kernel[(m + tpb - 1) // tpb, tpb, stream](
            d_data, d_codes, d_tables, d_out[0], d_out[1], d_out[2], d_status,
            view(buf.d_valid, n, m), view(buf.d_iwork, int_rows, m), d_fwork)
        steps.mark("stl")
        d_out_rows = view(buf.d_fwork, 3, m, n)  # the work array is free again
        for k in range(3):
            transpose[((m + tile - 1) // tile, (n + tile - 1) // tile), block_t, stream](
                d_out[k], False, 0.0, d_out_rows[k])
        steps.mark("transpose_out")
        d_out_rows.copy_to_host(view(buf.h_out, 3, m, n), stream=stream)
        d_status.copy_to_host(view(buf.h_status, m), stream=stream)
        steps.mark("d2h")
        return steps

    def collect(buf: _Buffers, s0: int, s1: int) -> None:
        m = s1 - s0
        out = view(buf.h_out, 3, m, n)
        seasonal[s0:s1] = out[0]
        trend[s0:s1] = out[1]
        weights[s0:s1] = out[2]
        status[s0:s1] = view(buf.h_status, m)

    stream_chunks(n_series, chunk, buffers, launch, collect, timings)
