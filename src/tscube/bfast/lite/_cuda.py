"""CUDA engine of BFAST Lite (numba.cuda): pixels x segment starts spread over the device,
the dynamic programme per pixel.

Per chunk of pixels (sized to the free device memory, or ``config.CUDA_CHUNK_BYTES``):

1. host, every core: compaction, the optional pre-test and R's checks
   (:func:`tscube.bfast.lite._cpu.prepare_pixels`); the pixels with a programme go on.
2. ``sums``, a thread per pixel: prefix sums of X'X, X'y, y'y and the RSS of every last
   segment from one pass backwards (:func:`~tscube.bfast.core.bai_perron_cpu.pixel_sums`).
3. ``starts``, a thread per (pixel, segment start): the start's kind and the RSS of all
   its segments into the pixel's triangle ``tri[start, end]``
   (:func:`~tscube.bfast.core.bai_perron_cpu.start_segments`): for a start from the sums
   (all but a few of the default model's) by Sherman–Morrison updates; for a start whose
   first rows are rank deficient or ill-conditioned (most of them with seasonal dummies
   and gaps), R's recursion with its aliasing rule on a Givens-updated QR factor.
4. host, every core: the rare recursion starts where a column is too close to R's
   aliasing bound for the Givens recursion to tell take R's exact refits
   (:func:`tscube.bfast.lite._cpu.recursion_rows`), whose rows ``place`` puts into the
   triangle.
5. ``programme``, a block per pixel, a thread per segment end: the Bai–Perron programme,
   one number of breaks after the other, each end's best last segment the earliest of
   the least (the cpu engine offers starts in order and keeps the first of ties); then
   the best partition of every number of breaks.
6. host, every core: criteria, choice, exact-fit check, segment coefficients and
   magnitudes (:func:`tscube.bfast.lite._cpu.finish_pixels`), in a thread of its own
   while the next chunk is prepared and on the device.

Steps 2 and 3 run the cpu engine's own functions, which numba-cuda compiles for the
device with everything they call: the same kinds of start and the same arithmetic (but
for fused multiply-adds) as the cpu engine's scalar path, and step 4 is the cpu
engine's code. What the device does not do:
the cpu engine's sharing of one triangle among pixels with the same valid dates, so a
gap-free cube gains less here than a cloudy one.

Importing this module needs no CUDA driver or toolkit: :mod:`numba.cuda` is imported in
:func:`run` after the check that a GPU (or numba's CUDA simulator) is present.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache

import numba
import numpy as np

from ... import config
from ..._cuda_host import DEVICE_LOCK, chunk_items, on_simulator, require_cuda
from ..._threads import run_tasks
from ..core.bai_perron_cpu import START_REFITS, outer_products, pixel_sums, start_segments
from ..core.series_cpu import cube_bytes
from ._cpu import finish_pixels, prepare_pixels, pretest, recursion_rows
from .plan import LitePlan
from .result import empty_lite_outputs

#: numba.cuda, bound by :func:`_kernels` on first use (not at import). The kernels read it
#: as a module global, which is what numba's CUDA simulator swaps while it runs.
cuda = None

#: What the kernels call per pixel and per start: the cpu engine's functions, compiled for
#: the device by numba-cuda (on the simulator, :func:`_kernels` puts wrappers here).
_pixel_sums = pixel_sums
_start_segments = start_segments

#: Kinds of segment start in ``kinds`` (those of :mod:`tscube.bfast.core.bai_perron_cpu`):
#: R's recursion, from the sums, the last segment only, R's recursion left to the host's
#: refits; -1: not a start.
_RECURSION, _SUMS, _NONE, _REFITS = 0, 1, 2, START_REFITS

#: Threads per block at most: the per-start kernel keeps three k x k matrices per thread
#: (local memory) and calls deep device functions.
MAX_BLOCK = 128


@lru_cache(maxsize=None)
def _kernels(cuda_module, k: int):
    """The ``cuda.jit`` kernels for ``k`` regressors (their per-thread scratch is local
    arrays of compile-time size): ``sums``, ``starts``, ``place``, ``programme``."""
    global cuda, _pixel_sums, _start_segments
    cuda = cuda_module
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":  # as require_cuda decides
        _pixel_sums = on_simulator(pixel_sums)
        _start_segments = on_simulator(start_segments)
    f8 = numba.float64
    K = k
    K1 = k + 1  # shapes must be compile-time constants: no arithmetic in them
    KY = 3 * k  # a first fit's centred values: fewer than 3k rows (bai_perron_cpu._first_rss)

    def sums(X, rows, y, n_of, h_of, S, U, YY, last, w, mean, back):
        """Thread per pixel ``q``: prefix sums, and the last segments' RSS to ``last[q]``
        where they come from the pass backwards (``back[q]``)."""
        q = cuda.grid(1)
        if q >= n_of.shape[0]:
            return
        Q = cuda.local.array((K, K), f8)
        L = cuda.local.array((K, K), f8)
        P = cuda.local.array((K, K), f8)
        Px = cuda.local.array(K, f8)
        beta = cuda.local.array(K, f8)
        yc = cuda.local.array(KY, f8)
        steps = cuda.local.array((1, 1), f8)
        m, b = _pixel_sums(X, rows[q], y[q], n_of[q], h_of[q], S[q], U[q], YY[q], Q, L, P, Px, yc, beta, last[q], w[q],
                           steps)
        mean[q] = m
        back[q] = b

    def starts(X, rows, y, n_of, h_of, mean, back, S, U, YY, last, tri, kinds):
        """Thread per (pixel ``q``, start slot): slot 0 is start 0, slot ``s > 0`` start
        ``h + s - 1`` up to ``n - h``; its kind to ``kinds[q, i]``, its segments' RSS
        to ``tri[q, i]`` (one left to R's refits by the host)."""
        t = cuda.grid(1)
        T = rows.shape[1]
        q = t // T
        if q >= n_of.shape[0]:
            return
        slot = t - q * T
        n = n_of[q]
        h = h_of[q]
        i = 0 if slot == 0 else h + slot - 1
        if i > n - h:
            return
        Q = cuda.local.array((K, K), f8)
        L = cuda.local.array((K, K), f8)
        P = cuda.local.array((K, K), f8)
        Px = cuda.local.array(K, f8)
        beta = cuda.local.array(K, f8)
        yc = cuda.local.array(KY, f8)
        steps = cuda.local.array((1, 1), f8)
        G = cuda.local.array((K, K1), f8)
        u = cuda.local.array(K1, f8)
        kept = cuda.local.array(K, numba.boolean)
        order = cuda.local.array(K, numba.int64)
        pos = cuda.local.array(K, numba.int64)
        old_pos = cuda.local.array(K, numba.int64)
        norm2 = cuda.local.array(K, f8)
        kinds[q, i] = _start_segments(X, rows[q], y[q], n, h, i, mean[q], back[q], S[q], U[q], YY[q], Q, L, P, Px, yc,
                                      beta, tri[q, i], last[q], steps, G, u, kept, order, pos, old_pos, norm2)

    def place(tri, pixel, start, values, n_of, h_of):
        """Thread per start ``f`` refitted on the host: its row ``values[f]`` into the
        triangle of pixel ``pixel[f]``, ends from the start's first full segment on."""
        f = cuda.grid(1)
        if f >= start.shape[0]:
            return
        q = pixel[f]
        i = start[f]
        for e in range(i + h_of[q] - 1, n_of[q]):
            tri[q, i, e] = values[f, e]

    def programme(tri, kinds, n_of, h_of, M_of, best, arg, totals, parts):
        """Block per pixel ``q``, threads over segment ends ``e``: ``best[q, m, e]``, the
        least RSS of rows ``0..e`` in ``m + 1`` segments of at least ``h`` rows (ends
        ``e <= n - h - 1`` and ``e = n - 1``, as the cpu engine's programme), with
        ``arg`` its last break, the earliest of ties; then ``totals[q, m]`` and the
        breakpoints ``parts[q, m, :m]`` of the best m-break partition."""
        q = cuda.blockIdx.x
        if q >= n_of.shape[0]:
            return
        n = n_of[q]
        h = h_of[q]
        M = M_of[q]
        B = best[q]
        A = arg[q]
        rss = tri[q]
        kind = kinds[q]
        for e in range(cuda.threadIdx.x, n, cuda.blockDim.x):
            v = np.inf
            if e == n - 1 or h - 1 <= e <= n - h - 1:
                v = rss[0, e]
            B[0, e] = v
            A[0, e] = -1
        cuda.syncthreads()
        for m in range(1, M + 1):
            for e in range(cuda.threadIdx.x, n, cuda.blockDim.x):
                held = np.inf
                at = -1
                if e == n - 1 or e <= n - h - 1:
                    # the last segment i..e: i >= m h (room for m segments before it)
                    for i in range(m * h, e - h + 2):
                        if kind[i] == _NONE and e != n - 1:
                            continue  # such a start has its last segment only
                        total = B[m - 1, i - 1] + rss[i, e]
                        if total < held:
                            held = total
                            at = i - 1
                B[m, e] = held
                A[m, e] = at
            cuda.syncthreads()
        if cuda.threadIdx.x == 0:
            for m in range(M + 1):
                total = B[m, n - 1]
                totals[q, m] = total
                if m > 0 and abs(total) < np.inf:
                    b = A[m, n - 1]
                    parts[q, m, m - 1] = b
                    for level in range(m - 1, 0, -1):
                        b = A[level, b]
                        parts[q, m, level - 1] = b

    jit = cuda_module.jit
    return jit(sums), jit(starts), jit(place), jit(programme)


def _bytes_per_pixel(n_times: int, k: int, max_m: int) -> int:
    """Device bytes of one pixel (kept in step with the arrays of :func:`_run_locked`)."""
    T = n_times
    floats = T * T + (T + 1) * (k * k + k + 1) + 3 * T + 1 + (max_m + 1) * (T + 1 + max(max_m, 1))
    ints = T + 5 + (max_m + 1) * T  # rows, n, h, M; arg
    return 8 * (floats + ints) + T + 1  # kinds, back


def run(values: np.ndarray, plan: LitePlan, timings: dict | None = None) -> dict[str, np.ndarray]:
    """Engine entry point: ``values`` (T, P) -> the outputs of :func:`empty_lite_outputs`.
    ``timings`` (a dict), if given, gets the seconds of each step summed over chunks
    (``prepare``, ``triangle``: the device's sums and starts with the copies in,
    ``refits``: the host's, with their copies, ``programme``; ``finish``, which runs
    behind the next chunk, and ``waiting`` for it) and the number of segment ``starts``,
    of ``recursion_starts`` (R's recursion on the device) and of ``refit_starts`` (R's
    refits on the host), for benchmarks.

    Raises
    ------
    RuntimeError
        No GPU / CUDA driver (the simulator counts as a GPU).
    """
    cuda_module = require_cuda()
    if timings is not None:
        timings.clear()
        timings.update(prepare=0.0, triangle=0.0, refits=0.0, programme=0.0, finish=0.0, waiting=0.0, starts=0,
                       recursion_starts=0, refit_starts=0)
    _, n_pixels = values.shape
    out = empty_lite_outputs(n_pixels, plan.break_slots, plan.design.k, plan.n_models)
    if n_pixels == 0:
        return out
    with DEVICE_LOCK:
        _run_locked(cuda_module, values, plan, out, {} if timings is None else timings)
    return out


def _run_locked(cuda, values: np.ndarray, plan: LitePlan, out: dict, timings: dict) -> None:
    n_times, n_pixels = values.shape
    design = plan.design
    k = design.k
    X = design.matrix
    max_m = plan.break_slots
    kernels = _kernels(cuda, k)
    raw, itemsize, nodata, has_nodata = cube_bytes(values, plan.nodata)  # one host kernel for every dtype
    trend_col = design.names.index("trend") if "trend" in design.names else -1
    level = float(plan.level)  # 0: no pre-test
    chunk = chunk_items(cuda, n_pixels, _bytes_per_pixel(n_times, k, max_m))
    tpb = max(1, min(int(config.CUDA_THREADS_PER_BLOCK), MAX_BLOCK))
    threads = numba.get_num_threads()
    d_X = cuda.to_device(X)
    XX = outer_products(X)
    clock = _Clock(timings)

    def finish(p0, active, rows, y, count, M_of, totals, parts):
        start = time.perf_counter()
        run_tasks(finish_pixels, min(threads, active.size), X, XX, plan.axis.trend, plan.axis.time, trend_col,
                  plan.selection, plan.interval, p0, active.astype(np.int64), rows, y, out["n_obs"][p0:p0 + count],
                  M_of, totals, parts, out["status"], out["n_breaks"], out["break_index"], out["break_time"],
                  out["magnitudes"], out["coefficients"], out["rss"], out["bic"], out["lwz"], design.trend_centre,
                  design.trend_scale)
        timings["finish"] = timings.get("finish", 0.0) + time.perf_counter() - start

    # a chunk's finish (host cores) runs while the next chunk is prepared and on the device
    with ThreadPoolExecutor(max_workers=1) as behind:
        pending = None
        try:
            for p0 in range(0, n_pixels, chunk):
                count = min(chunk, n_pixels - p0)
                done = _chunk_on_device(cuda, kernels, d_X, raw, itemsize, nodata, has_nodata, level, plan, out, p0,
                                        count, tpb, threads, clock, timings)
                if done is None:
                    continue
                if pending is not None:
                    pending.result()
                    clock.mark("waiting")
                pending = behind.submit(finish, p0, *done)
        finally:
            if pending is not None:
                pending.result()


def _chunk_on_device(cuda, kernels, d_X, raw, itemsize, nodata, has_nodata, level, plan, out, p0, count, tpb,
                     threads, clock, timings):
    """Pixels ``p0..p0+count-1`` up to their programmes: prepared on the host (statuses
    of the pixels without one in ``out``), their triangles and programmes on the device;
    returns what :func:`finish_pixels` needs of them (None: no pixel has a programme)."""
    sums, starts, place, programme = kernels
    n_times = raw.shape[0]
    k = plan.design.k
    X = plan.design.matrix
    max_m = plan.break_slots
    rows = np.zeros((count, n_times), dtype=np.int64)
    y = np.zeros((count, n_times))
    M_of = np.empty(count, dtype=np.int64)
    tested = (pretest(raw, itemsize, nodata, has_nodata, X, plan.h, p0, count, out["pretest_p"]) if level > 0
              else np.zeros(0, dtype=np.bool_))
    run_tasks(prepare_pixels, min(threads, count), raw, itemsize, nodata, has_nodata, X, plan.h, plan.selection,
              plan.n_breaks_asked, plan.max_breaks, level, tested, p0, count, out["status"], out["n_obs"],
              out["h_obs"], out["max_breaks"], out["pretest_p"], M_of, rows, y)
    active = np.flatnonzero(M_of >= 0)
    A = active.size
    clock.mark("prepare")
    if A == 0:
        return None
    n_of = out["n_obs"][p0 + active].astype(np.int64)
    h_of = out["h_obs"][p0 + active].astype(np.int64)
    rows_a = np.ascontiguousarray(rows[active])
    y_a = np.ascontiguousarray(y[active])
    d_rows, d_y = cuda.to_device(rows_a), cuda.to_device(y_a)
    d_n, d_h = cuda.to_device(n_of), cuda.to_device(h_of)
    d_S = cuda.device_array((A, n_times + 1, k, k))
    d_U = cuda.device_array((A, n_times + 1, k))
    d_YY = cuda.device_array((A, n_times + 1))
    d_last = cuda.device_array((A, n_times))
    d_w = cuda.device_array((A, n_times))
    d_mean = cuda.device_array(A)
    d_back = cuda.device_array(A, dtype=np.bool_)
    sums[(A + tpb - 1) // tpb, tpb](d_X, d_rows, d_y, d_n, d_h, d_S, d_U, d_YY, d_last, d_w, d_mean, d_back)
    d_tri = cuda.device_array((A, n_times, n_times))
    d_kinds = cuda.to_device(np.full((A, n_times), -1, dtype=np.int8))
    starts[(A * n_times + tpb - 1) // tpb, tpb](d_X, d_rows, d_y, d_n, d_h, d_mean, d_back, d_S, d_U, d_YY, d_last,
                                               d_tri, d_kinds)
    del d_S, d_U, d_YY, d_w
    kinds = d_kinds.copy_to_host()
    pixel, start = np.nonzero(kinds == _REFITS)  # by pixel, then start
    timings["starts"] = timings.get("starts", 0) + int(np.count_nonzero(kinds >= 0))
    timings["recursion_starts"] = timings.get("recursion_starts", 0) + int(np.count_nonzero(kinds == _RECURSION))
    timings["refit_starts"] = timings.get("refit_starts", 0) + int(pixel.size)
    clock.mark("triangle")
    if pixel.size:
        values_f = refit_rows(X, rows_a, y_a, n_of, pixel, start, threads)
        F = pixel.size
        place[(F + tpb - 1) // tpb, tpb](d_tri, cuda.to_device(pixel.astype(np.int64)),
                                         cuda.to_device(start.astype(np.int64)), cuda.to_device(values_f), d_n,
                                         d_h)
    clock.mark("refits")
    d_best = cuda.device_array((A, max_m + 1, n_times))
    d_arg = cuda.device_array((A, max_m + 1, n_times), dtype=np.int64)
    d_totals = cuda.device_array((A, max_m + 1))
    d_parts = cuda.to_device(np.full((A, max_m + 1, max(max_m, 1)), -1, dtype=np.int64))
    block = min(tpb, 32 * ((n_times + 31) // 32))
    programme[A, block](d_tri, d_kinds, d_n, d_h, cuda.to_device(M_of[active]), d_best, d_arg, d_totals, d_parts)
    totals = d_totals.copy_to_host()
    parts = d_parts.copy_to_host()
    clock.mark("programme")
    return active, rows, y, count, M_of, totals, parts


def refit_rows(X, rows, y, n_of, pixel, start, threads: int) -> np.ndarray:
    """R's refits on the host of the starts ``start[f]`` of pixels ``pixel[f]`` (rows of
    ``rows``, ``y``, ``n_of``; sorted by pixel): their rows ``(F, T)`` of segment RSS by
    end (:func:`tscube.bfast.lite._cpu.recursion_rows`, pixels spread over ``threads``).
    With no start at all it still runs one empty task (``tscube warmup`` compiles the
    kernel so)."""
    groups, first = np.unique(pixel, return_index=True)
    offsets = np.append(first, pixel.size).astype(np.int64)
    values = np.zeros((pixel.size, rows.shape[1]))
    run_tasks(recursion_rows, max(1, min(threads, groups.size)), X, rows, y, n_of, groups.astype(np.int64), offsets,
              start.astype(np.int64), values)
    return values


class _Clock:
    """Seconds since the last mark added to ``timings[name]`` (the steps end with a copy
    to the host, which waits for the device)."""

    def __init__(self, timings: dict):
        self.timings = timings
        self.last = time.perf_counter()

    def mark(self, name: str) -> None:
        now = time.perf_counter()
        self.timings[name] = self.timings.get(name, 0.0) + now - self.last
        self.last = now
