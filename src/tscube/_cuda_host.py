"""Host-side machinery shared by the cuda engines (BFAST Monitor, STL): the GPU check,
one device lock, chunk sizing by free device memory, flat-buffer views, and buffer sets
kept between calls.

Importing this module needs no CUDA driver or toolkit: :func:`require_cuda` imports
:mod:`numba.cuda` when an engine asks for it.
"""

from __future__ import annotations

import os
import threading

import numpy as np

from . import config

#: One run at a time per process: each run sizes its chunks by the free device memory, so
#: concurrent runs (e.g. from dask worker threads) would together overcommit it.
DEVICE_LOCK = threading.Lock()


def require_cuda():
    """Return :mod:`numba.cuda` if a GPU (or numba's CUDA simulator) can run kernels.

    Raises
    ------
    RuntimeError
        Naming the cause: numba-cuda missing, or no CUDA driver / device.
    """
    try:
        from numba import cuda
    except Exception as exc:  # numba-cuda not installed, or a broken install
        raise RuntimeError(
            f"engine='cuda' needs numba's CUDA support (package numba-cuda), which could "
            f"not be imported: {exc}. Use engine='cpu'."
        ) from exc
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return cuda  # the CPU simulator: used by the tests
    if cuda.is_available():
        check_numpy_support()
        return cuda
    reason = "no CUDA-capable device was found"
    try:
        cuda.current_context()
    except Exception as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        reason = " ".join(lines[:2]) or type(exc).__name__
    raise RuntimeError(
        f"engine='cuda' needs an NVIDIA GPU with a working CUDA driver, but numba.cuda "
        f"found none ({reason}). Use engine='cpu', or engine='auto' to fall back to it."
    )


def on_simulator(function):
    """``function``, an njit function that a kernel calls, as numba's CUDA simulator must
    call it: the simulator's kernels see their arrays wrapped (``FakeWithinKernelCUDAArray``
    around ``FakeCUDAArray``), unwrapped here to the NumPy arrays (views) they hold, so
    that the CPU-compiled function runs on them in place. (On a GPU numba-cuda compiles
    the function for the device instead.)"""
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
    from numba.cuda.simulator.kernel import FakeWithinKernelCUDAArray

    def unwrap(a):
        if isinstance(a, FakeWithinKernelCUDAArray):
            a = a._item
        if isinstance(a, FakeCUDAArray):
            a = a._ary
        return a

    def call(*args):
        return function(*[unwrap(a) for a in args])

    return call


def check_numpy_support() -> None:
    """numba-cuda <= 0.30.4 registers ``np.row_stack``, which NumPy 2.5 removed: every
    kernel compilation then fails with an AttributeError deep inside numba (seen on the
    GPU machine, numpy 2.5.2). Say so at once, with the fix."""
    import importlib

    try:
        importlib.import_module("numba.cuda.np.arrayobj")
    except ModuleNotFoundError:  # another numba-cuda layout: nothing to check
        return
    except AttributeError as exc:
        raise RuntimeError(
            f"numba-cuda cannot compile kernels with NumPy {np.__version__} ({exc}); "
            f"install numpy<2.5 (or a numba-cuda that supports this NumPy), or use engine='cpu'."
        ) from exc


def chunk_items(cuda, n_items: int, bytes_per_item: int, held_bytes: int = 0) -> int:
    """Items (pixels, series) per chunk: two buffer sets of that many items must fit
    ``config.CUDA_CHUNK_BYTES``, or ``config.CUDA_MEMORY_FRACTION`` of the free device
    memory plus ``held_bytes`` (buffers the caller keeps and would reuse); at most
    ``config.CUDA_CHUNK_PIXELS_MAX`` (bounds the pinned host memory)."""
    budget = config.CUDA_CHUNK_BYTES
    if budget is None:
        free, _total = cuda.current_context().get_memory_info()
        budget = config.CUDA_MEMORY_FRACTION * min(float(free) + held_bytes, 2.0**62)
    items = int(budget) // (2 * bytes_per_item)
    return max(1, min(n_items, items, int(config.CUDA_CHUNK_PIXELS_MAX)))


def view(array, *shape):
    """Leading contiguous part of a flat (device or host) buffer, reshaped."""
    return array[: int(np.prod(shape))].reshape(shape)


class KeptBuffers:
    """Buffer sets of an engine's last run, reused by its next run with the same key
    (shape, dtype, options) when they hold enough items.

    Allocating pinned host memory and device arrays costs more than the kernels on cubes
    of ~10^5 pixels (measured on an H100, see docs/gpu.md), and dask calls an engine once
    per chunk with the same shape. ``config.CUDA_KEEP_BUFFERS = False`` turns this off;
    :func:`release_buffers` frees what every engine keeps. A buffer set is any object with
    a ``chunk`` attribute (its capacity) and a ``pending`` slot.
    """

    instances: list[KeptBuffers] = []

    def __init__(self):
        self.key = None
        self.sets: list = []
        KeptBuffers.instances.append(self)

    def drop_unless(self, key) -> None:
        """Free the kept sets unless they were made for ``key`` (call before sizing
        chunks by the free memory, so that stale buffers do not shrink them)."""
        if self.key != key or not config.CUDA_KEEP_BUFFERS:
            self.key, self.sets = None, []

    @classmethod
    def drop_all(cls) -> None:
        """Free the sets every engine keeps."""
        for kept in cls.instances:
            kept.key, kept.sets = None, []

    def held_items(self) -> int:
        """Items the kept sets hold together (their device memory counts as free for
        sizing the chunks of a run that reuses them: :func:`chunk_items`)."""
        return sum(buf.chunk for buf in self.sets)

    def get(self, key, chunk: int, count: int, make):
        """``count`` buffer sets of at least ``chunk`` items: the kept ones if they fit,
        else new ones from ``make(chunk)`` (kept for the next call)."""
        fits = (config.CUDA_KEEP_BUFFERS and self.key == key and len(self.sets) >= count
                and all(buf.chunk >= chunk for buf in self.sets[:count]))
        if fits:
            sets = self.sets[:count]
            for buf in sets:  # a run that raised may have left copies in flight
                buf.stream.synchronize()
        else:
            KeptBuffers.drop_all()  # one engine's buffers at a time, freed before allocating
            sets = [make(chunk) for _ in range(count)]
            if config.CUDA_KEEP_BUFFERS:
                self.key, self.sets = key, sets
        for buf in sets:
            buf.pending = None
        return sets


def stream_chunks(n_items: int, chunk: int, buffers: list, launch, collect, timings=None) -> None:
    """Chunk ``c`` of ``range(n_items)`` goes to ``buffers[c % len(buffers)]``:
    ``launch(buf, start, stop)`` queues its copies and kernels on ``buf.stream`` and
    returns its :class:`StepEvents`. Before a set is reused, and for every set at the end,
    its stream is synchronised, the chunk's step times are added to ``timings`` and
    ``collect(buf, start, stop)`` unpacks its results. With two sets on two streams, one
    chunk's copies overlap the other's kernels."""

    def finish(buf):
        buf.stream.synchronize()
        start, stop, steps = buf.pending
        steps.add_to(timings)
        collect(buf, start, stop)
        buf.pending = None

    for c, start in enumerate(range(0, n_items, chunk)):
        buf = buffers[c % len(buffers)]
        if buf.pending is not None:
            finish(buf)  # this buffer set's previous chunk must be back before reuse
        stop = min(start + chunk, n_items)
        buf.pending = (start, stop, launch(buf, start, stop))
    for buf in buffers:
        if buf.pending is not None:
            finish(buf)


class StepEvents:
    """CUDA events recorded on a stream after each named step of one chunk, for the
    engines' ``timings=``: ``mark("h2d")`` after the input copies, ``mark("d2h")`` after
    the output copies, ``mark(kernel name)`` after each kernel. Does nothing when
    ``timings`` is None. With two streams, an interval can include waiting for the other
    stream: an upper bound."""

    def __init__(self, cuda, stream, timings):
        self.cuda, self.stream = cuda, stream
        self.marks = [] if timings is not None else None
        self.mark("start")

    def mark(self, name: str) -> None:
        if self.marks is not None:
            event = self.cuda.event()
            event.record(self.stream)
            self.marks.append((name, event))

    def add_to(self, timings) -> None:
        """After the stream is synchronised: milliseconds of each step added to
        ``timings``, the copies under ``h2d``/``d2h``, the kernels under ``kernels`` and
        ``kernel_<name>``."""
        if not self.marks:
            return
        for (_, before), (name, after) in zip(self.marks[:-1], self.marks[1:]):
            ms = before.elapsed_time(after)
            key = name if name in ("h2d", "d2h") else "kernels"
            timings[key] = timings.get(key, 0.0) + ms
            if key == "kernels":
                timings[f"kernel_{name}"] = timings.get(f"kernel_{name}", 0.0) + ms


def release_buffers() -> None:
    """Free the device and pinned host buffers the cuda engines kept from their last run
    (``config.CUDA_KEEP_BUFFERS``), e.g. before handing the GPU to another library."""
    with DEVICE_LOCK:
        KeptBuffers.drop_all()
