"""Shared test helpers: where the R reference fixtures live, and how to load them."""

from __future__ import annotations

import os

# CUDA kernels run on numba's CUDA simulator unless a real GPU run is asked for. This must
# happen before numba is imported; it only affects numba.cuda, not the CPU kernels.
if not os.environ.get("TSCUBE_TEST_REAL_CUDA"):
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
# a kernel whose callees compiled in another process are not those it calls fails its
# call (tscube._jit.STRICT_ENV), in the warmup's processes too
os.environ["TSCUBE_STRICT_COMPILE_JOBS"] = "1"

import json
import lzma
import sys
import threading
from functools import lru_cache
from pathlib import Path
from typing import TextIO

import numpy as np
import pytest


def _serialise_simulator_shared_arrays() -> None:
    """Make the CUDA simulator's ``cuda.shared.array`` allocation thread-safe.

    The simulator runs each CUDA thread as a Python thread and finds a block's shared
    array by its source line in a dict, with an unlocked get-then-set: two threads that
    reach the line together can each allocate their own array, and one of them then
    works on a private copy (garbage scans and solves, seen as a rare, load-dependent
    wrong break in CI). Same lookup, under a lock; dynamic shared memory is unchanged.
    """
    try:
        from numba.cuda.simulator import kernelapi
    except ImportError:  # no simulator in this numba-cuda: nothing to fix
        return
    FakeCUDAShared = kernelapi.FakeCUDAShared
    types, numpy_support = kernelapi.types, kernelapi.numpy_support  # the simulator's own
    original = FakeCUDAShared.array
    if getattr(original, "_tscube_locked", False):
        return
    lock = threading.Lock()

    def array(self, shape, dtype, alignment=None):
        if shape == 0 or alignment is not None:
            return original(self, shape, dtype, alignment)
        if isinstance(dtype, types.Type):
            dtype = numpy_support.as_dtype(dtype)
        frame = sys._getframe(1)
        caller = (frame.f_code.co_filename, frame.f_lineno)
        with lock:
            found = self._allocations.get(caller)
            if found is None:
                found = self._allocations[caller] = np.empty(shape, dtype)
        return found

    array._tscube_locked = True
    FakeCUDAShared.array = array


class _BlockBarrier:
    """``cuda.syncthreads()`` for one simulated block: the last of its running threads to
    arrive (or to finish while the others wait) opens it; a thread that fails opens it for
    good, and the others then raise as the simulator's own abort does."""

    def __init__(self, n_threads: int):
        self.condition = threading.Condition()
        self.running = n_threads
        self.arrived = 0
        self.generation = 0
        self.aborted = False

    def wait(self) -> None:
        with self.condition:
            if self.aborted:
                raise RuntimeError("abort flag set on syncthreads call")
            generation = self.generation
            self.arrived += 1
            if self.arrived == self.running:
                self._open()
            while generation == self.generation and not self.aborted:
                self.condition.wait()
            if self.aborted:
                raise RuntimeError("abort flag set on syncthreads clear")

    def leave(self, failed: bool) -> None:
        with self.condition:
            self.running -= 1
            if failed:
                self.aborted = True
                self.condition.notify_all()
            elif self.arrived and self.arrived == self.running:
                self._open()

    def _open(self) -> None:
        self.arrived = 0
        self.generation += 1
        self.condition.notify_all()


def _simulator_barriers_without_polling() -> None:
    """Let the CUDA simulator's threads meet at ``cuda.syncthreads()`` by themselves.

    The simulator runs a block's threads as Python threads, and its block manager finds
    out that they all reached a barrier by polling every live thread in a loop on the
    main thread, holding the GIL against the threads it waits for: each barrier of a
    256-thread block cost milliseconds, and the cuda engines' tests spent most of their
    time there (BFAST Monitor's masked Gram with season dummies: 21 of 22 s for one
    pixel). Here a block's threads count themselves in at a condition variable and the
    manager only joins them. Same semantics: the barrier opens when every thread still
    running has arrived (threads that returned do not count), and a thread's exception
    aborts the others and is raised, not theirs.
    """
    try:
        from numba.cuda.simulator import kernel as simulator
    except ImportError:  # no simulator in this numba-cuda: nothing to change
        return
    BlockManager, BlockThread = simulator.BlockManager, simulator.BlockThread
    if getattr(BlockManager.run, "_tscube_barrier", False):
        return
    thread_run = BlockThread.run

    def syncthreads(self):
        self._manager._tscube_barrier.wait()

    def run_thread(self):
        failed = True
        try:
            thread_run(self)  # records the kernel's exception in self.exception
            failed = self.exception is not None
        finally:
            self._manager._tscube_barrier.leave(failed)

    def run_block(self, grid_point, *args):
        self._tscube_barrier = _BlockBarrier(int(np.prod(self._block_dim)))

        def target():
            self._f(*args)

        threads = [BlockThread(target, self, grid_point, block_point, self._debug)
                   for block_point in np.ndindex(*self._block_dim)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        failed = [thread for thread in threads if thread.exception]
        cause = next((thread for thread in failed if "abort flag set" not in str(thread.exception[0])),
                     failed[0] if failed else None)
        if cause is not None:
            raise cause.exception[0].with_traceback(cause.exception[1])

    run_block._tscube_barrier = True
    BlockThread.syncthreads = syncthreads
    BlockThread.run = run_thread
    BlockManager.run = run_block


if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
    _serialise_simulator_shared_arrays()
    _simulator_barriers_without_polling()

#: Fewer simulated paths for critical values outside R's table (tscube.bfast.monitor.critval):
#: quicker, still within the table's precision (tests/test_bfast_critval.py).
TEST_CRITVAL_PATHS = 20_000
#: Fewer simulated paths per cell of calibrated critical values (bfast_monitor(calibrate=True),
#: tscube.bfast.monitor.calibration): enough beyond the quantiles of level 0.05 and 0.01.
TEST_CALIBRATION_PATHS = 6000


@pytest.fixture(autouse=True)
def _critval_simulations(tmp_path_factory, monkeypatch):
    """Simulated critical values of the tests: fewer paths, cached in the session's temporary
    folder (not the user's ~/.cache), shared by the tests of one worker."""
    from tscube import config

    monkeypatch.setattr(config, "CRITVAL_PATHS", TEST_CRITVAL_PATHS)
    monkeypatch.setattr(config, "CALIBRATION_PATHS", TEST_CALIBRATION_PATHS)
    monkeypatch.setenv("TSCUBE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "critval-cache"))


#: The R reference outputs and the MODIS cube the tests compare against: copies of the files
#: they read from the project's ../shared, made by fixtures/refresh.py (tests/README.md).
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def open_fixture(name: str) -> TextIO:
    """A fixture file opened as text, by its path under ``fixtures/`` (``"r_stlplus/inputs.csv"``):
    the file itself, or the ``.xz`` copy that refresh.py keeps of a large one, decompressed."""
    path = FIXTURES / name
    if path.exists():
        return path.open(encoding="utf-8")
    return lzma.open(path.with_name(path.name + ".xz"), "rt", encoding="utf-8")


def read_fixture_text(name: str) -> str:
    """The whole text of a fixture file (:func:`open_fixture`)."""
    with open_fixture(name) as file:
        return file.read()


@lru_cache(maxsize=1)
def modis_pixels() -> tuple[np.ndarray, np.ndarray]:
    """The 25 pixels of bfast's example MODIS NDVI cube (``data/modisraster.tif``, 275
    16-day dates 2000-2012, no gaps) as NDVI ``(275, 25)`` float64, and their decimal years
    (freq 23)."""
    rasterio = pytest.importorskip("rasterio")
    with rasterio.open(FIXTURES / "data" / "modisraster.tif") as source:
        values = source.read().reshape(source.count, -1).astype(np.float64) / 10_000
    with open_fixture("data/modisraster_dates.csv") as file:
        times = np.genfromtxt(file, delimiter=",", names=True, dtype=None, encoding=None)["time"]
    return values, times.astype(np.float64)


#: Gap patterns of :func:`gappy_modis`.
GAP_PATTERNS = ("random 20 %", "a missing year", "sparse monitoring")


def gappy_modis(pattern: str, seed: int = 0, monitor_from: float = 2009.0) -> tuple[np.ndarray, np.ndarray]:
    """:func:`modis_pixels` with one of the :data:`GAP_PATTERNS` cut out, per pixel: 20 % of
    the dates at random; one whole year of 2003..2007 and 5 % at random; 60 % of the
    dates from ``monitor_from`` on and 10 % before. Histories and segments then miss
    cycle positions: fits with season dummies start rank deficient."""
    values, times = modis_pixels()
    data = values.copy()
    rng = np.random.default_rng(seed)
    if pattern == "random 20 %":
        gone = rng.random(data.shape) < 0.2
    elif pattern == "a missing year":
        year = rng.integers(2003, 2008, data.shape[1])
        gone = (np.floor(times)[:, None] == year) | (rng.random(data.shape) < 0.05)
    elif pattern == "sparse monitoring":
        gone = rng.random(data.shape) < np.where(times >= monitor_from, 0.6, 0.1)[:, None]
    else:
        raise ValueError(pattern)
    data[gone] = np.nan
    return data, times


@lru_cache(maxsize=1)
def bfast_cases() -> list[dict]:
    """The R bfastmonitor reference cases."""
    return json.loads(read_fixture_text("r_bfastmonitor/bfastmonitor_cases.json"))["cases"]


@lru_cache(maxsize=None)
def bfast_series(name: str) -> tuple[np.ndarray, np.ndarray, int]:
    """(values, decimal-year times, frequency) of a fixture series, as R saw it."""
    with open_fixture(f"r_bfastmonitor/series/{name}.csv") as file:
        table = np.genfromtxt(file, delimiter=",", names=True)
    freq = {"ndvi": 24}.get(name, 23)
    return table["value"], table["time"], freq


def _r_history(history):
    """A fixture's history as tscube takes it: "all"/"ROC"/"BP", c(year, cycle) as a
    tuple, a decimal year as a number."""
    if isinstance(history, list):
        return tuple(history) if len(history) == 2 else history[0]
    return history


def bfast_case_kwargs(case: dict) -> dict:
    """tscube.bfast_monitor keyword arguments reproducing an R fixture case."""
    formula = case["formula"]
    history = _r_history(case["history"])
    values, times, freq = bfast_series(case["series"])
    return dict(
        data=values,
        dates=times,
        start=tuple(case["start"]),
        order=0 if formula == "response ~ trend" else case["order"],
        trend="trend" in formula,
        h=case["h"],
        level=case["level"],
        end=case["end"],
        history=history,
        freq=freq,
    )


#: R formula of the extended fixtures -> (order, trend, season)
EXT_FORMULAS = {
    "trend+harmon": (3, True, False),
    "trend+season": (0, True, True),
    "season": (0, False, True),
    "trend": (0, True, False),
}


@lru_cache(maxsize=1)
def ext_cases() -> list[dict]:
    """The R bfastmonitor cases beyond the default model."""
    return json.loads(read_fixture_text("r_bfastmonitor_ext/cases.json"))["cases"]


def ext_kwargs(case: dict) -> dict:
    """tscube.bfast_monitor keyword arguments reproducing an R fixture case."""
    values, times, freq = bfast_series(case["series"])
    order, trend, season = EXT_FORMULAS[case["formula"]]
    history = _r_history(case["history"])
    return dict(
        data=values, dates=times, start=tuple(case["start"]), order=order, trend=trend, season=season,
        type=case["type"], h=case["h"], level=case["level"], end=case["end"], history=history, freq=freq,
    )


def assert_bfast_matches_r(result, case: dict, *, rtol: float, magnitude_rtol: float, critval_rtol: float) -> None:
    """A one-pixel ``bfast_monitor`` result equals an R fixture case: status OK, break time,
    history start and size exactly; magnitude (``magnitude_rtol``, 1e-9 absolute), sigma,
    process, statistic, process mean (``rtol``), boundary (1e-12) and critical value."""
    assert result.status == 0
    if case["breakpoint"] is None:
        assert result.break_index == -1 and np.isnan(result.break_time)
    else:
        assert result.break_time == case["breakpoint"]
    assert result.history_start == case["history_start"]
    assert result.n_history == case["histsize"]
    np.testing.assert_allclose(result.magnitude, case["magnitude"], rtol=magnitude_rtol, atol=1e-9)
    np.testing.assert_allclose(result.sigma, case["sigma"], rtol=rtol)
    process = result.process[np.isfinite(result.process)]
    np.testing.assert_allclose(process, case["process"], rtol=rtol, atol=1e-12)
    boundary = result.boundary[np.isfinite(result.boundary)]
    np.testing.assert_allclose(boundary, case["boundary"], rtol=1e-12)
    np.testing.assert_allclose(result.statistic, case["statistic"], rtol=rtol)
    np.testing.assert_allclose(result.mosum_mean, np.mean(case["process"]), rtol=rtol, atol=1e-12)
    assert result.attrs["critval"] == pytest.approx(case["critval"], rel=critval_rtol)



def pytest_configure(config):
    """Under pytest-xdist (``-n 2``), before the workers start: compile the main kernels
    into numba's cache once, in parallel processes (``tscube.warmup``). Otherwise every
    worker compiles the same kernels at the same time, each on its own core (about half
    of a cold suite's time). A failed warmup only costs time: the tests compile what
    they need and fail on their own if a kernel is broken."""
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        return
    import time

    from tscube.warmup import warmup

    began = time.perf_counter()
    try:
        records = warmup(jobs=os.cpu_count())
    except Exception as error:  # noqa: BLE001 - see the docstring
        if "StaleCompileJobs" in str(error):  # the kernel is cached now: no test would compile it again
            pytest.exit(f"warmup: {error}", returncode=1)
        print(f"\nwarmup failed ({error}); the tests compile what they need", file=sys.stderr)
        return
    compiled = sum(record.compiled for record in records)
    print(f"\nwarmup: {compiled} kernels compiled in {time.perf_counter() - began:.0f} s", file=sys.stderr)
