"""Compile tscube's kernels ahead of use: :func:`warmup` (``tscube warmup`` on the command
line) fills numba's on-disk cache with every kernel of the chosen algorithms, so that
the first call in a container, an HPC job or a dask worker loads them (under a second)
instead of compiling them (tens of seconds each; the table is in docs/performance.md).

The work is cut into *jobs*, each a group of kernels that no other job compiles (a
kernel compiled by two processes at once would be compiled twice, and both would
rewrite its cache index). Jobs run in parallel worker processes: numba compiles one
function at a time per process (a global lock), so processes are the only way to use
more than one core for it. Each job runs its algorithm's own code on a tiny synthetic
cube, per data type, which compiles the kernels exactly as a real call of that type
does (C-contiguous arrays: what the public functions hand their engines).

Where numba keeps the cache: ``NUMBA_CACHE_DIR`` if set, else beside the installed
package (``__pycache__``) when that is writable, else in the user's cache folder. Cache
entries are keyed by the kernels' source (a new tscube compiles again), numba's version
and the CPU (name and features): a cache warmed on one CPU model does not serve another
(docs/production.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

import numpy as np

__all__ = ["ALGORITHMS", "DTYPES", "JOBS", "WarmupRecord", "warmup"]

#: The data types warmed unless told otherwise: what satellite cubes arrive as once
#: scaled (float32) and what NumPy computes in (float64). Integer data (e.g. int16 MODIS
#: NDVI with a nodata value) compiles BFAST Monitor's and STL's kernels once more per type:
#: ``dtypes=("int16",)`` (BFAST Lite's, classic BFAST's and the history selections' take
#: every type, ``bfast.core.series_cpu.cube_bytes``).
DTYPES = ("float32", "float64")


def _cube(dtype: str):
    """A tiny cloudy cube of ``dtype`` (integers: NDVI scaled by 10,000, -3000 for missing),
    its dates, monitoring start and nodata value."""
    from .datasets import make_cube

    cube = make_cube("demo", shape=(4, 4), seed=0)
    data = cube.data
    nodata = None
    if np.dtype(dtype).kind in "iu":
        nodata = -3000 if np.dtype(dtype).kind == "i" else 0
        data = np.where(np.isnan(data), nodata, np.round(data * 10000)).astype(dtype)
    else:
        data = data.astype(dtype)
    return data, cube.dates, cube.start, nodata


def _monitor_plan(history: str, dtype: str, **model):
    from .bfast.monitor import monitor_plan

    data, dates, start, nodata = _cube(dtype)
    flat = np.ascontiguousarray(data.reshape(data.shape[0], -1))
    plan = monitor_plan(flat.shape[0], dates, start, freq=23, history=history, nodata=nodata, **model)[0]
    return flat, plan


def _monitor(dtype: str) -> None:
    """BFAST Monitor's engine (the model fit and monitoring of every pixel)."""
    from .engines import load

    load("bfast_monitor", "cpu").run(*_monitor_plan("all", dtype))


def _monitor_roc(dtype: str) -> None:
    """BFAST Monitor's ROC history selection (the default ``history``): pixels as lanes,
    and one at a time (designs of more than eight regressors, such as season dummies, and
    pixels whose first rows are rank deficient)."""
    from .bfast.monitor.history import history_first

    history_first(*_monitor_plan("ROC", dtype))
    history_first(*_monitor_plan("ROC", dtype, order=0, season=True))


def _monitor_bp(dtype: str) -> None:
    """BFAST Monitor's Bai–Perron history selection (``history="BP"``; the programme's
    callees by address come from the ``lite`` job)."""
    from .bfast.monitor.history import history_first

    history_first(*_monitor_plan("BP", dtype))


def _calibration(dtype: str) -> None:
    """Calibrated monitoring's per-pixel features (``calibrate=True``), and the simulation
    of critical values for an ``h``/``end`` outside R's tables (data type independent)."""
    from .bfast.monitor.calibration import pixel_features
    from .bfast.monitor.critval import simulate_mosum_statistic

    flat, plan = _monitor_plan("all", dtype)
    first = np.zeros((plan.n_starts, flat.shape[1]), dtype=np.int64)
    slots = np.arange(flat.shape[0], dtype=np.int64)
    pixel_features(flat, plan.nodata, first, plan.monitor_begin, slots, plan.h, plan.cusum)
    simulate_mosum_statistic(0.25, 10.0, n_paths=8, seed=0)


def _lite(dtype: str) -> None:
    """BFAST Lite (every break selection and magnitude runs in one kernel), and its
    OLS-MOSUM pre-test (``level > 0``: a kernel of its own)."""
    from .bfast.lite import bfast_lite

    data, dates, _, nodata = _cube(dtype)
    bfast_lite(data, dates, freq=23, nodata=nodata, engine="cpu")
    bfast_lite(data[:, :1, :2], dates, freq=23, nodata=nodata, level=0.05, engine="cpu")


def _lite_cuda_host(dtype: str) -> None:
    """BFAST Lite's cuda engine, its host kernels (compaction, R's refits, the final fits;
    one for every dtype), where numba-cuda is installed: the engine runs on numba's CUDA
    simulator (this job's process only, :data:`_Job.env`), which compiles its host kernels
    as a GPU run does. numba-cuda compiles the device kernels at the first call on the
    GPU; they are not in this cache."""
    import importlib.util

    if importlib.util.find_spec("numba_cuda") is None:
        return  # no cuda engine to warm
    from .bfast.lite.api import compile_cuda_host_kernels

    data, dates, _, nodata = _cube(dtype)
    compile_cuda_host_kernels(data[:, :1, :2], dates, freq=23, nodata=nodata)


def _classic(dtype: str) -> None:
    """Classic BFAST: its kernel, one for every seasonal model (the STL start's kernel is
    the ``stl`` job's, the Bai–Perron helpers BFAST Lite's)."""
    from .bfast.classic import bfast_classic

    data, dates, _, nodata = _cube(dtype)
    bfast_classic(data, dates, freq=23, nodata=nodata, engine="cpu")


def _stl(dtype: str) -> None:
    """STL, both flavours (one kernel: the flavour is a parameter)."""
    from .stl import stl

    data, _, _, nodata = _cube(dtype)
    stl(data, 23, nodata=nodata, engine="cpu")


def _cluster(dtype: str) -> None:
    """The Gaussian mixture's E-step kernels (full and diagonal covariances): the
    estimators compute in float64 whatever the input. k-means' kernel is compiled for the
    number of features of each fit and is not cached on disk."""
    from .cluster import GaussianMixture

    X = np.random.default_rng(0).standard_normal((256, 3))
    with warnings.catch_warnings():  # two iterations do not converge: they only compile
        warnings.simplefilter("ignore", RuntimeWarning)
        for covariance_type in ("full", "diag"):
            GaussianMixture(n_components=2, covariance_type=covariance_type, max_iter=2, random_state=0,
                            engine="cpu").fit(X)


def _nrt(dtype: str) -> None:
    """Near-real-time BFAST Monitor: the state's fit, its update and its result (after the
    ``monitor`` and ``monitor-roc`` jobs, whose kernels its fit runs)."""
    from .bfast.nrt import BfastMonitor

    data, dates, start, nodata = _cube(dtype)
    cut = int(np.searchsorted(dates, start)) + 4  # a fit needs monitoring dates
    monitor = BfastMonitor(start, freq=23, nodata=nodata, engine="cpu").fit(data[:cut], dates[:cut])
    monitor.update(data[cut:], dates[cut:])
    monitor.result()


@dataclass(frozen=True)
class _Job:
    name: str
    run: Callable[[str], None]
    after: tuple[str, ...] = ()  # jobs whose kernels this one calls: it runs once they are done
    typed: bool = True  # compiles per data type of the cube (else once, whatever the types asked)
    env: tuple[tuple[str, str], ...] = ()  # set in the job's process


#: Every job: its name, what it compiles, the jobs it must follow. In the order a worker
#: takes them (the first whose jobs to follow are done): the longest chain first (BFAST
#: Lite and STL, then classic BFAST, about 75 s of compiling on a 2-core machine), so that
#: the other jobs fill the other cores meanwhile; the ones near-real-time monitoring
#: follows before Bai–Perron, whose longer job then runs beside it. On 2 cores this order
#: took the warmup from 135 to about 100 s (docs/performance.md).
JOBS = {job.name: job for job in (
    _Job("lite", _lite),
    _Job("stl", _stl),
    _Job("classic", _classic, after=("stl", "lite")),
    _Job("lite-cuda-host", _lite_cuda_host, after=("lite",), typed=False, env=(("NUMBA_ENABLE_CUDASIM", "1"),)),
    _Job("monitor-roc", _monitor_roc),
    _Job("monitor", _monitor),
    _Job("monitor-bp", _monitor_bp, after=("lite",)),  # the Bai–Perron callees: BFAST Lite's job compiles them
    _Job("nrt", _nrt, after=("monitor", "monitor-roc")),
    _Job("calibration", _calibration),
    _Job("cluster", _cluster, typed=False),
)}

#: The algorithms :func:`warmup` knows and their jobs.
ALGORITHMS = {
    "monitor": ("monitor", "monitor-roc", "monitor-bp", "calibration"),
    "lite": ("lite", "lite-cuda-host"),
    "classic": ("stl", "lite", "classic"),
    "stl": ("stl",),
    "cluster": ("cluster",),
    "nrt": ("monitor", "monitor-roc", "nrt"),
}


@dataclass(frozen=True)
class WarmupRecord:
    """What one job did: ``compiled`` kernels (0: all came from the cache) in ``seconds``."""

    job: str
    dtype: str
    seconds: float
    compiled: int
    error: str | None = None


def _run_job(name: str, dtype: str) -> None:
    """In a worker process: run job ``name`` for ``dtype`` and print its record."""
    from ._jit import compile_notice

    began = time.perf_counter()
    with compile_notice(lambda line: None) as notice:
        JOBS[name].run(dtype)
    print("WARMUP " + json.dumps(dict(seconds=time.perf_counter() - began, compiled=notice.kernels)), flush=True)


def _spawn(name: str, dtype: str) -> WarmupRecord:
    env = dict(os.environ, NUMBA_NUM_THREADS="1", **dict(JOBS[name].env))  # tiny inputs: one thread each
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", f"from tscube.warmup import _run_job; _run_job({name!r}, {dtype!r})"],
                          env=env, capture_output=True, text=True)
    for line in done.stdout.splitlines():
        if line.startswith("WARMUP "):
            found = json.loads(line[len("WARMUP "):])
            return WarmupRecord(name, dtype, round(found["seconds"], 2), found["compiled"])
    error = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
    return WarmupRecord(name, dtype, round(time.perf_counter() - began, 2), 0, error)


def _plan(algorithms: Iterable[str]) -> list[str]:
    names: list[str] = []
    for algorithm in algorithms:
        if algorithm not in ALGORITHMS:
            raise ValueError(f"unknown algorithm {algorithm!r}: choose from {', '.join(ALGORITHMS)}")
        names += [name for name in ALGORITHMS[algorithm] if name not in names]
    return names


def warmup(algorithms: Iterable[str] | None = None, *, dtypes: Iterable[str] = DTYPES, jobs: int | None = None,
           echo: Callable[[str], None] | None = None) -> list[WarmupRecord]:
    """Compile the CPU kernels of ``algorithms`` (default: all of :data:`ALGORITHMS`) for
    each of ``dtypes`` into numba's on-disk cache, ``jobs`` worker processes at a time
    (default: one per core). Kernels already cached are loaded, not compiled (a second
    warmup takes seconds). ``echo`` is told about each finished job.

    Returns one :class:`WarmupRecord` per job and data type; raises ``RuntimeError`` if a
    job failed (the others still ran)."""
    names = _plan(ALGORITHMS if algorithms is None else algorithms)
    dtypes = [np.dtype(dtype).name for dtype in dtypes]
    workers = max(1, int(jobs or os.cpu_count() or 1))
    records: list[WarmupRecord] = []
    # a job's data types run one after the other (a process each): the same kernel
    # compiled by two processes at once would be compiled twice
    def run(name: str) -> list[WarmupRecord]:
        found = []
        for dtype in dtypes if JOBS[name].typed else ["float64"]:
            record = _spawn(name, dtype)
            found.append(record)
            if echo:
                state = f"failed: {record.error}" if record.error else (
                    f"compiled {record.compiled} kernels" if record.compiled else "already cached")
                echo(f"{name} ({dtype}): {state}, {record.seconds:.1f} s")
        return found

    # a worker takes the first job in JOBS' order whose jobs to follow are done (a job
    # that waited in a worker would keep a core idle)
    pending = [name for name in JOBS if name in names]
    finished: dict[str, list[WarmupRecord]] = {}
    running: dict[Future, str] = {}
    with ThreadPoolExecutor(workers) as pool:
        while pending or running:
            for name in [name for name in pending
                         if all(other not in names or other in finished for other in JOBS[name].after)]:
                if len(running) == workers:
                    break
                pending.remove(name)
                running[pool.submit(run, name)] = name
            if not running:  # cannot happen: every job a job follows is in the plan
                raise RuntimeError(f"warmup: jobs {pending} wait for jobs that never run")
            ended, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in ended:
                finished[running.pop(future)] = future.result()
    for name in names:
        records += finished[name]
    failed = [record for record in records if record.error]
    if failed:
        raise RuntimeError("warmup failed: " + "; ".join(f"{r.job} ({r.dtype}): {r.error}" for r in failed))
    return records
