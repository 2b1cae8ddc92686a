"""The parallel loop of every CPU engine: serial ``nogil`` numba kernels, one call per
task, run by Python threads.

numba's ``parallel=True`` (``prange``) turns a kernel's loop into a generated "gufunc"
that numba types, lowers and optimises a second time, with the whole kernel body and
its callees inside: it doubled the compile time of every parallel kernel (BFAST
Monitor's from 19 to 37 s on a 2-core machine, issue 40) for a loop over a handful of
independent chunks that a thread pool runs as fast. Each kernel here does the work of
one task (a chunk of pixel blocks, with its own scratch buffers) with the GIL released;
:func:`run_tasks` hands the tasks to ``numba.get_num_threads()`` threads, dynamically
(a thread that finishes early takes the next task), the calling thread among them.
Every such kernel takes ``(task, n_tasks, ...)``: task ``task`` of ``n_tasks`` covers
items ``[task * n // n_tasks, (task + 1) * n // n_tasks)`` of its ``n``.

Threads follow numba's settings, as ``prange`` did: ``NUMBA_NUM_THREADS`` and
``numba.set_num_threads`` (per calling thread, e.g. 1 in each dask worker thread).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numba

from ._jit import settle, wait_compiled

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _shared_pool() -> ThreadPoolExecutor:
    """One pool for the process, as large as numba's thread count may ever be (calls
    that run at the same time, e.g. from dask's threads, share it; each call's own
    thread keeps working, so a busy pool slows a call down but never blocks it)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=max(1, numba.config.NUMBA_NUM_THREADS - 1),
                                       thread_name_prefix="tscube")
        return _pool


def run_tasks(kernel, n_tasks: int, *args) -> None:
    """``kernel(task, n_tasks, *args)`` for every ``task`` in ``range(n_tasks)``, on up to
    ``numba.get_num_threads()`` threads; ``kernel`` must be a ``nogil`` numba kernel
    whose tasks write disjoint outputs. Re-raises the first exception of a task after
    every thread has stopped (no thread is left writing into the outputs)."""
    n_tasks = int(n_tasks)
    wait_compiled(kernel, (0, n_tasks, *args))  # compiled in other processes: load from the cache once done
    try:
        _run(kernel, n_tasks, args)
    except BaseException:
        settle(kernel, checked=False)
        raise
    settle(kernel)  # its callees compiled in another process, if any, are loaded by now


def _run(kernel, n_tasks: int, args: tuple) -> None:
    threads = min(numba.get_num_threads(), n_tasks)
    if threads <= 1:
        for task in range(n_tasks):
            kernel(task, n_tasks, *args)
        return
    next_task = iter(range(n_tasks))
    take = threading.Lock()
    failed: list[BaseException] = []

    def work() -> None:
        while not failed:
            with take:
                task = next(next_task, None)
            if task is None:
                return
            try:
                kernel(task, n_tasks, *args)
            except BaseException as error:  # noqa: BLE001 - re-raised by the caller
                failed.append(error)

    helpers = [_shared_pool().submit(work) for _ in range(threads - 1)]
    work()
    for helper in helpers:
        helper.result()
    if failed:
        raise failed[0]


def task_count(n_items: int, per_thread: int = 4) -> int:
    """Tasks for ``n_items`` independent items (blocks, pixels): a few per thread, so
    that threads that finish early take over the rest, and never more than the items."""
    return max(0, min(int(n_items), per_thread * numba.get_num_threads()))
