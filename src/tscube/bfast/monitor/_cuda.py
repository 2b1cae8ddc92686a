"""CUDA engine of BFAST Monitor (numba.cuda): chunked, streamed, same results as the cpu engine.

Importing this module needs no CUDA driver or toolkit: :mod:`numba.cuda` and the kernels
(:mod:`tscube.bfast.monitor._cuda_kernels`) are imported inside :func:`run`, after the check
that a GPU (or numba's CUDA simulator) is present.

The pixels are processed in chunks sized to the free device memory (or
``config.CUDA_CHUNK_BYTES``), so cubes larger than the GPU memory work (out-of-core).
Two buffer sets, each with its own stream and pinned host staging buffers, alternate:
while the kernels of chunk ``c`` run on one stream, the host stages chunk ``c + 1`` and
its host-to-device copy is queued on the other stream, and the results of chunk
``c - 1`` come back. See ``docs/gpu.md`` for the kernel structure.
"""

from __future__ import annotations

import os
import time

import numpy as np

from ... import config
from ..._cuda_host import (DEVICE_LOCK, KeptBuffers, StepEvents, chunk_items, require_cuda,
                          stream_chunks, view)
from ..core.inputs import kernel_nodata
from .plan import MonitorPlan
from .result import empty_outputs
from .status import flag_status

#: dtypes the kernels read directly; anything else is converted on the host first.
_DEVICE_DTYPES = {np.dtype(t) for t in (np.float32, np.float64, np.int8, np.int16, np.int32,
                                        np.int64, np.uint8, np.uint16, np.uint32, np.uint64)}


def _cpu_selection(values: np.ndarray, plan: MonitorPlan):
    """Per-pixel ROC/BP history selection of the cpu engine: ``(first index, flags)``."""
    from .history import history_first

    return history_first(values, plan)


def _history_begin(plan: MonitorPlan, n_pixels: int, history_begin) -> np.ndarray:
    if history_begin is None:
        first = plan.history_begin if plan.history == "fixed" else 0
        return np.full((plan.n_starts, n_pixels), first, dtype=np.int32)
    history_begin = np.asarray(history_begin)
    if history_begin.shape != (plan.n_starts, n_pixels) or history_begin.dtype.kind not in "iu":
        raise ValueError(
            f"history_begin must be an integer array of shape {(plan.n_starts, n_pixels)}, "
            f"got {history_begin.dtype} {history_begin.shape}"
        )
    if history_begin.size and (history_begin.min() < 0 or history_begin.max() > plan.axis.time.shape[0]):
        raise ValueError("history_begin must hold time indices in [0, T]")
    return history_begin.astype(np.int32)


def _next_power_of_two(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def _bytes_per_pixel(n_dates: int, k: int, n_starts: int, itemsize: int, process: bool) -> int:
    """Device bytes one pixel needs in one buffer set (kept in step with ``_Buffers``)."""
    from . import _cuda_kernels as kern

    per_date = itemsize + 8 + 1 + 8 + 8 + 4  # raw, y_rows, mask, r_buf, r_comp, keys
    per_start = 4 + 1 + 8 + 4 * kern.N_INT + 8 * kern.N_FLOAT  # history_begin, flag, critval, outputs
    fixed = 8 * k * k + 8 * 2 * k + 4  # G, b, beta, singular
    return n_dates * per_date + n_starts * per_start + fixed + (16 * n_starts * n_dates if process else 0)


class _Buffers:
    """One stream with its device arrays and pinned host staging for ``chunk`` pixels."""

    def __init__(self, cuda, n_dates, k, n_starts, chunk, raw_dtype, process):
        from . import _cuda_kernels as kern

        self.stream = cuda.stream()
        self.chunk = chunk
        self.pending = None  # (start, stop, steps) of the chunk in flight (stream_chunks)
        pin, dev = cuda.pinned_array, cuda.device_array
        self.h_raw = pin(n_dates * chunk, raw_dtype)
        self.h_begin = pin(n_starts * chunk, np.int32)
        self.h_flag = pin(n_starts * chunk, np.int8)
        self.h_crit = pin(n_starts * chunk, np.float64)
        self.h_int = pin(kern.N_INT * n_starts * chunk, np.int32)
        self.h_float = pin(kern.N_FLOAT * n_starts * chunk, np.float64)
        self.d_raw = dev(n_dates * chunk, raw_dtype)
        self.d_begin = dev(n_starts * chunk, np.int32)
        self.d_flag = dev(n_starts * chunk, np.int8)
        self.d_crit = dev(n_starts * chunk, np.float64)
        self.d_int = dev(kern.N_INT * n_starts * chunk, np.int32)
        self.d_float = dev(kern.N_FLOAT * n_starts * chunk, np.float64)
        self.d_y = dev(n_dates * chunk, np.float64)
        self.d_mask = dev(n_dates * chunk, np.uint8)
        self.d_r = dev(n_dates * chunk, np.float64)
        self.d_rc = dev(n_dates * chunk, np.float64)
        self.d_keys = dev(n_dates * chunk, np.int32)
        self.d_G = dev(chunk * k * k, np.float64)
        self.d_b = dev(chunk * k, np.float64)
        self.d_beta = dev(chunk * k, np.float64)
        self.d_singular = dev(chunk, np.int32)
        size = n_starts * n_dates * chunk if process else 1
        self.h_proc = pin(size, np.float64)
        self.h_bnd = pin(size, np.float64)
        self.d_proc = dev(size, np.float64)
        self.d_bnd = dev(size, np.float64)


#: This engine's buffer sets, kept for its next run of the same shape.
_KEPT = KeptBuffers()


def run(values: np.ndarray, plan: MonitorPlan, history_begin=None, history_flagged=None,
        timings: dict | None = None) -> dict[str, np.ndarray]:
    """Run BFAST Monitor on ``values`` ``(T, P)`` on the GPU; outputs like ``_reference.run``.

    Parameters
    ----------
    values : ndarray (T, P)
        Raw data of any float or integer dtype; NaN, inf and ``plan.nodata`` are missing.
    plan : MonitorPlan
    history_begin : int ndarray (S, P), optional
        Per start and pixel, the first time index eligible for the stable history.
        Default: ``plan.history_begin`` ("fixed"), 0 ("all"), or for "ROC"/"BP" the
        selection in ``plan.history_first`` or else the cpu engine's.
    history_flagged : bool ndarray (S, P), optional
        Pixels whose selection was flagged: status ROC_NO_CROSSING (BP_TOO_SHORT for
        ``history="BP"``) instead of OK.
    timings : dict, optional
        Filled with milliseconds, for benchmarks: ``selection`` (cpu ROC/BP selection,
        wall clock), and by CUDA events summed over chunks ``h2d`` (input copies),
        ``kernels`` (all kernels; ``kernel_<name>`` each) and ``d2h`` (output copies);
        with several chunks on two streams an interval can include waiting for the other
        stream (an upper bound).

    Raises
    ------
    RuntimeError
        No GPU / CUDA driver (the simulator counts as a GPU).
    ValueError
        ``plan.history`` is "ROC"/"BP", no ``history_begin`` is given and the cpu
        engine's selection (``history.history_first``) is not available.
    """
    cuda = require_cuda()  # first: no costly cpu selection before a missing-GPU error
    n_dates, n_pixels = values.shape
    n_starts = plan.n_starts
    if timings is not None:
        timings.clear()
        timings.update(selection=0.0, h2d=0.0, kernels=0.0, d2h=0.0)
    if history_begin is None and plan.history_first is not None:
        history_begin, selected_flags = plan.history_first
        if history_flagged is None:
            history_flagged = selected_flags
    if history_begin is None and plan.history not in ("all", "fixed"):
        # the sequential per-pixel tests run on the cpu; the monitoring on the GPU
        started = time.perf_counter()
        history_begin, selected_flags = _cpu_selection(values, plan)
        if timings is not None:
            timings["selection"] = 1e3 * (time.perf_counter() - started)
        if history_flagged is None:
            history_flagged = selected_flags
    begin_all = _history_begin(plan, n_pixels, history_begin)
    flags_all = (np.zeros((n_starts, n_pixels), np.int8) if history_flagged is None  # status codes
                 else np.asarray(history_flagged).astype(np.int8).reshape(n_starts, n_pixels)
                 * np.int8(flag_status(plan.history)))
    critvals = plan.pixel_critvals(n_pixels)
    with DEVICE_LOCK:
        return _run_locked(cuda, values, plan, begin_all, flags_all, critvals, timings)


def _run_locked(cuda, values, plan, begin_all, flags_all, critvals, timings) -> dict[str, np.ndarray]:
    from . import _cuda_kernels as kern

    n_dates, n_pixels = values.shape
    n_starts = plan.n_starts
    X = plan.design.matrix
    k = X.shape[1]
    if k > kern.MAX_REGRESSORS:
        raise ValueError(f"the cuda engine supports at most {kern.MAX_REGRESSORS} regressors, got {k}")
    outputs = empty_outputs(n_starts, n_pixels)
    outputs["critval"][...] = critvals
    if plan.return_process:
        outputs["process"] = np.full((n_starts, n_dates, n_pixels), np.nan)
        outputs["boundary"] = np.full((n_starts, n_dates, n_pixels), np.nan)
    if n_pixels == 0 or n_dates == 0:
        return outputs

    nodata, has_nodata = kernel_nodata(values, plan.nodata)
    if values.dtype not in _DEVICE_DTYPES:
        values = values.astype(np.float64)
    raw_dtype = values.dtype
    per_pixel = _bytes_per_pixel(n_dates, k, n_starts, raw_dtype.itemsize, plan.return_process)
    key = (n_dates, k, n_starts, raw_dtype, plan.return_process)
    _KEPT.drop_unless(key)  # before sizing the chunks by the free memory
    chunk = chunk_items(cuda, n_pixels, per_pixel, per_pixel * _KEPT.held_items())

    tpb = kern.threads_per_block()
    tpb_pixel = min(tpb, kern.MAX_PIXEL_BLOCK, _next_power_of_two(max(1, (n_dates + 1) // 2)))
    tpb_solve = min(tpb, max(1, _next_power_of_two(k)))
    tile_k = max(1, min(int(config.CUDA_GRAM_TILE_K), k))
    tile_pixels = int(config.CUDA_GRAM_TILE_PIXELS)
    tile_dates = int(config.CUDA_GRAM_TILE_DATES)
    tile_t = min(32, tpb)  # transpose tile: 32 x 8 threads for 256 threads per block
    rows_t = max(1, min(tile_t, tpb // tile_t))
    transpose = kern.clean_transpose_kernel(tile_t, rows_t)
    gram = kern.gram_kernel(k, tile_k, tile_pixels, tile_dates)
    solve = kern.solve_kernel(k, tpb_solve)
    monitor = kern.monitor_kernel(k, tpb_pixel)
    d_X = cuda.to_device(np.ascontiguousarray(X, dtype=np.float64))
    d_monitor_begin = cuda.to_device(np.asarray(plan.monitor_begin, dtype=np.int32))
    levels, all_levels = plan.design.kernel_levels()
    d_levels = cuda.to_device(levels)
    axis_time = np.asarray(plan.axis.time, dtype=np.float64)

    buffers = _KEPT.get(key, chunk, 2 if n_pixels > chunk else 1,
                        lambda size: _Buffers(cuda, n_dates, k, n_starts, size, raw_dtype,
                                              plan.return_process))

    def launch(buf: _Buffers, p0: int, p1: int) -> StepEvents:
        m = p1 - p0
        stream = buf.stream
        h_raw = view(buf.h_raw, n_dates, m)
        np.copyto(h_raw, values[:, p0:p1])  # host staging overlaps the other stream
        h_begin = view(buf.h_begin, n_starts, m)
        np.copyto(h_begin, begin_all[:, p0:p1])
        h_flag = view(buf.h_flag, n_starts, m)
        np.copyto(h_flag, flags_all[:, p0:p1])
        h_crit = view(buf.h_crit, n_starts, m)
        np.copyto(h_crit, critvals[:, p0:p1])
        d_raw = view(buf.d_raw, n_dates, m)
        d_begin = view(buf.d_begin, n_starts, m)
        d_flag = view(buf.d_flag, n_starts, m)
        d_crit = view(buf.d_crit, n_starts, m)
        steps = StepEvents(cuda, stream, timings)
        mark = steps.mark
        d_raw.copy_to_device(h_raw, stream=stream)
        d_begin.copy_to_device(h_begin, stream=stream)
        d_flag.copy_to_device(h_flag, stream=stream)
        d_crit.copy_to_device(h_crit, stream=stream)
        mark("h2d")
        d_int = view(buf.d_int, kern.N_INT, n_starts, m)
        d_float = view(buf.d_float, kern.N_FLOAT, n_starts, m)
        d_y = view(buf.d_y, m, n_dates)
        d_mask = view(buf.d_mask, n_dates, m)
        d_r = view(buf.d_r, m, n_dates)
        d_rc = view(buf.d_rc, m, n_dates)
        d_keys = view(buf.d_keys, m, n_dates)
        d_G = view(buf.d_G, m, k, k)
        d_b = view(buf.d_b, m, k)
        d_beta = view(buf.d_beta, m, k)
        d_singular = view(buf.d_singular, m)
        if plan.return_process:
            d_proc = view(buf.d_proc, n_starts, n_dates, m)
            d_bnd = view(buf.d_bnd, n_starts, n_dates, m)
        else:
            d_proc = d_bnd = view(buf.d_proc, 1, 1, 1)

        grid_t = ((m + tile_t - 1) // tile_t, (n_dates + tile_t - 1) // tile_t)
        transpose[grid_t, (tile_t, rows_t), stream](d_raw, has_nodata, nodata, d_y)
        mark("transpose")
        kern.count_kernel[(m + tpb - 1) // tpb, tpb, stream](
            d_raw, has_nodata, nodata, d_monitor_begin, d_begin, d_levels, all_levels, d_int, d_float)
        mark("count")
        grid_e = (n_dates * m + tpb - 1) // tpb
        grid_g = ((m + tile_pixels - 1) // tile_pixels, (k + tile_k - 1) // tile_k,
                  (k + tile_k - 1) // tile_k)
        for s in range(n_starts):
            begin = int(plan.monitor_begin[s])
            kern.history_mask_kernel[grid_e, tpb, stream](
                d_raw, has_nodata, nodata, d_begin, s, begin, d_mask)
            mark("history_mask")
            gram[grid_g, (tile_k, tile_k), stream](d_X, d_mask, d_G)
            mark("gram")
            kern.masked_xty_kernel[((m + tpb - 1) // tpb, k), tpb, stream](d_X, d_raw, d_mask, d_b)
            mark("xty")
            solve[m, tpb_solve, stream](d_G, d_b, d_beta, d_singular)
            mark("solve")
            monitor[m, tpb_pixel, stream](
                d_X, d_y, d_beta, d_singular, d_begin, d_flag, s, float(plan.h),
                d_crit, bool(plan.cusum), bool(plan.return_process), d_int, d_float, d_r, d_rc,
                d_keys, d_proc, d_bnd)
            mark("monitor")
        d_int.copy_to_host(view(buf.h_int, kern.N_INT, n_starts, m), stream=stream)
        d_float.copy_to_host(view(buf.h_float, kern.N_FLOAT, n_starts, m), stream=stream)
        if plan.return_process:
            d_proc.copy_to_host(view(buf.h_proc, n_starts, n_dates, m), stream=stream)
            d_bnd.copy_to_host(view(buf.h_bnd, n_starts, n_dates, m), stream=stream)
        mark("d2h")
        return steps

    def collect(buf: _Buffers, p0: int, p1: int) -> None:
        m = p1 - p0
        ints = view(buf.h_int, kern.N_INT, n_starts, m)
        floats = view(buf.h_float, kern.N_FLOAT, n_starts, m)
        cols = slice(p0, p1)
        index = ints[kern.I_BREAK]
        outputs["break_index"][:, cols] = index
        outputs["break_time"][:, cols] = np.where(index >= 0, axis_time[np.maximum(index, 0)], np.nan)
        outputs["status"][:, cols] = ints[kern.I_STATUS]
        for name, row in (("n_valid", kern.I_NVALID), ("n_history", kern.I_NHIST),
                          ("n_monitor", kern.I_NMON), ("n_inf", kern.I_NINF)):
            outputs[name][:, cols] = ints[row]
        first = ints[kern.I_FIRST]
        outputs["history_start"][:, cols] = np.where(first >= 0, axis_time[np.maximum(first, 0)], np.nan)
        for name, row in (("magnitude", kern.F_MAGNITUDE), ("mosum_mean", kern.F_MEAN),
                          ("statistic", kern.F_STATISTIC), ("sigma", kern.F_SIGMA), ("rmse", kern.F_RMSE),
                          ("relative_magnitude", kern.F_RELATIVE)):
            outputs[name][:, cols] = floats[row]
        if plan.return_process:
            outputs["process"][:, :, cols] = view(buf.h_proc, n_starts, n_dates, m)
            outputs["boundary"][:, :, cols] = view(buf.h_bnd, n_starts, n_dates, m)

    stream_chunks(n_pixels, chunk, buffers, launch, collect, timings)
    return outputs


def device_summary() -> dict:
    """The GPU the engine runs on: name, compute capability, memory and the theoretical
    peak memory bandwidth (GB/s), for benchmark reports (ratio to bandwidth).

    Raises :class:`RuntimeError` like :func:`run` where there is no GPU.
    """
    cuda = require_cuda()
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return dict(name="numba CUDA simulator", compute_capability=None, memory_bytes=None,
                    peak_bandwidth_gbs=None)
    device = cuda.get_current_device()
    _free, total = cuda.current_context().get_memory_info()
    # double data rate: 2 transfers per memory clock (kHz) over a bus of `width` bits
    bandwidth = 2.0 * device.MEMORY_CLOCK_RATE * 1e3 * device.GLOBAL_MEMORY_BUS_WIDTH / 8 / 1e9
    name = device.name.decode() if isinstance(device.name, bytes) else str(device.name)
    return dict(name=name, compute_capability=device.compute_capability, memory_bytes=int(total),
                peak_bandwidth_gbs=bandwidth)
