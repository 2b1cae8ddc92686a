"""What a first call compiles, and where: the thread pool that replaced numba's parfors,
compiling a kernel in another process into numba's cache, and ``tscube warmup``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import threading

import numba
import numpy as np
import pytest

from tscube._threads import run_tasks, task_count


def test_run_tasks_runs_every_task_once_on_several_threads():
    seen, threads = [], set()
    lock = threading.Lock()

    def task(index, n_tasks, scale, out):
        assert n_tasks == 40
        out[index] = index * scale
        with lock:
            seen.append(index)
            threads.add(threading.get_ident())

    out = np.zeros(40)
    run_tasks(task, 40, 2.0, out)
    assert sorted(seen) == list(range(40))
    np.testing.assert_array_equal(out, np.arange(40) * 2.0)
    assert len(threads) <= numba.get_num_threads()


def test_run_tasks_follows_numba_threads_and_reraises():
    threads = set()
    previous = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        run_tasks(lambda index, n_tasks: threads.add(threading.get_ident()), 8)
        assert threads == {threading.get_ident()}
        assert task_count(1000) == 4
    finally:
        numba.set_num_threads(previous)

    def fails(index, n_tasks):
        if index == 3:
            raise ValueError("task 3")

    with pytest.raises(ValueError, match="task 3"):
        run_tasks(fails, 8)
    run_tasks(fails, 0)  # nothing to do
    assert task_count(0) == 0


_KERNELS_HERE = textwrap.dedent("""
    from numba import njit

    @njit(cache=True, nogil=True)
    def total(x):
        s = 0.0
        for v in x:
            s += v
        return s
""")


def _run_beside(tmp_path, script: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    """``script`` (with ``args``) in a new interpreter that imports the modules written to
    ``tmp_path`` and has a numba cache of its own there (``env``: more variables, an
    empty value removes one); fails the test unless it exits with 0."""
    full = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"),
                PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    for name, value in env.items():
        if value:
            full[name] = value
        else:
            full.pop(name, None)
    done = subprocess.run([sys.executable, "-c", script, *args], env=full, capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return done


def test_a_kernel_compiled_in_another_process_is_loaded_from_the_cache(tmp_path):
    """compile_elsewhere compiles in a child process into numba's cache; the kernel's
    call then loads it instead of compiling (the first call of ROC BFAST Monitor runs
    its two kernels' compilations on two cores this way)."""
    (tmp_path / "kernels_here.py").write_text(_KERNELS_HERE)
    script = textwrap.dedent("""
        import numpy as np
        import kernels_here
        from tscube._jit import _cache_state, compile_elsewhere, compile_jobs, wait_compiled

        x = np.ones(5)
        sig = (kernels_here.total.typeof_pyval(x),)
        assert _cache_state(kernels_here.total, sig) == "missing"
        assert compile_elsewhere(compile_jobs(kernels_here.total, (x,)))
        assert not compile_jobs(kernels_here.total, (x,))  # already under way
        wait_compiled(kernels_here.total)
        assert _cache_state(kernels_here.total, sig) == "disk"
        assert kernels_here.total(x) == 5.0
        assert sum(kernels_here.total.stats.cache_hits.values()) == 1
        assert not kernels_here.total.stats.cache_misses
        assert _cache_state(kernels_here.total, sig) == "memory"
        assert not compile_jobs(kernels_here.total, (x,))
        print("OK")
    """)
    done = _run_beside(tmp_path, script)
    assert done.stdout.strip() == "OK"


def test_two_threads_wait_for_a_kernel_compiled_in_another_process(tmp_path):
    """Two threads' first calls (a dask scheduler's, one chunk each) both wait for the
    kernel compiled in another process: neither compiles it beside that process."""
    (tmp_path / "kernels_here.py").write_text(_KERNELS_HERE)
    script = textwrap.dedent("""
        import threading
        import numpy as np
        import kernels_here
        from tscube._jit import compile_elsewhere, compile_jobs, settle, wait_compiled

        x = np.ones(5)
        assert compile_elsewhere(compile_jobs(kernels_here.total, (x,)))
        first = threading.Thread(target=wait_compiled, args=(kernels_here.total,))
        first.start()
        wait_compiled(kernels_here.total)  # the other thread waits for the same job
        assert kernels_here.total(x) == 5.0
        first.join()
        settle(kernels_here.total)
        assert not kernels_here.total.stats.cache_misses  # loaded, never compiled here
        print("OK")
    """)
    done = _run_beside(tmp_path, script)
    assert done.stdout.strip() == "OK"


def test_arg_types_spells_numba_types_of_real_values():
    """The callee tables' argument types (tscube._jit.arg_types, numba's signature
    notation) are numba's types of the arguments: scalars, C-contiguous and read-only
    arrays, literals, nested tuples."""
    from numba import typeof, types

    from tscube._jit import arg_types

    readonly = np.zeros((2, 3), dtype=np.uint8)
    readonly.flags.writeable = False
    nested = (np.zeros(2), (np.zeros((1, 1), dtype=np.int32), np.zeros(1, dtype=np.bool_)))
    values = (np.zeros((2, 3, 4)), np.zeros(3, dtype=np.int64), readonly, np.zeros(2, dtype=np.int8), nested,
              (np.zeros(1), np.zeros(2)))
    assert arg_types('f8[:, :, ::1], i8[::1], Array(u1, 2, "C", readonly=True), i1[::1], '
                     "Tuple((f8[::1], Tuple((i4[:, ::1], b1[::1])))), Tuple((f8[::1], f8[::1]))") == tuple(
        typeof(value) for value in values)
    assert arg_types("f8, i8, i4, b1, literal(0), literal(-1)") == (types.float64, types.int64, types.int32,
                                                                   types.boolean, types.literal(0), types.literal(-1))
    with pytest.raises(SyntaxError):
        arg_types("Tuple((f8, i8)")


_SPLIT_KERNELS = textwrap.dedent("""
    from tscube._jit import jit

    @jit(nogil=True)
    def inner(x, scale):
        s = 0.0
        for v in x:
            s += v * scale
        return s

    @jit(nogil=True)
    def unused(x):
        return x[0]

    @jit(nogil=True)
    def outer(task, n_tasks, x, out):
        out[task] = inner(x, 2)
""")


@pytest.mark.parametrize("table, strict, expected", [
    ('"f8[::1], literal(2)"', False, "loaded"),  # the kernel's own types: the callee comes from the cache
    ('"f8[::1], i8"', False, "compiled here"),  # a stale table costs time only
    ('"f8[::1], i8"', True, "StaleCompileJobs: .*inner asked for"),  # ... or fails, under the tests' setting
])
def test_callees_compiled_elsewhere_are_loaded_by_the_kernels_compile(tmp_path, table, strict, expected):
    """compile_jobs with a callee table: another process compiles the callees into the
    cache while this one compiles the kernel, whose typing waits for them and loads them
    (the first calls of BFAST Lite, BP and classic BFAST compile this way)."""
    (tmp_path / "kernels_split.py").write_text(_SPLIT_KERNELS)
    script = textwrap.dedent(f"""
        import numpy as np
        import kernels_split as k
        from tscube import _jit
        from tscube._threads import run_tasks

        x, out = np.arange(5.0), np.zeros(1)
        jobs = _jit.compile_jobs(k.outer, (0, 1, x, out), [(k.inner, _jit.arg_types({table}))])
        assert [(job[0], job[2]) for job in jobs] == [(k.inner, k.outer)], jobs
        assert _jit.compile_elsewhere(jobs)
        assert not _jit.compile_elsewhere(jobs)  # already under way
        try:
            run_tasks(k.outer, 1, x, out)
        except _jit.StaleCompileJobs as error:
            print("StaleCompileJobs:", error)
            raise SystemExit
        assert out[0] == 20.0
        assert not _jit._PENDING
        assert sum(k.outer.stats.cache_misses.values()) == 1
        print("loaded" if not k.inner.stats.cache_misses else "compiled here")
        # compiled or cached now: nothing to do elsewhere
        assert not _jit.compile_jobs(k.outer, (0, 1, x, out), [(k.inner, _jit.arg_types({table}))])
    """)
    done = _run_beside(tmp_path, script, TSCUBE_STRICT_COMPILE_JOBS="1" if strict else "")
    assert re.match(expected, done.stdout.strip()), done.stdout


def test_a_callee_never_asked_for_is_a_stale_table(tmp_path):
    """Under the tests' setting, a table naming a callee the kernel no longer calls fails
    the call (it cost a process a compile nobody loads)."""
    (tmp_path / "kernels_split.py").write_text(_SPLIT_KERNELS)
    script = textwrap.dedent("""
        import numpy as np
        import kernels_split as k
        from tscube import _jit
        from tscube._threads import run_tasks

        x, out = np.arange(5.0), np.zeros(1)
        table = [(k.inner, _jit.arg_types("f8[::1], literal(2)")), (k.unused, _jit.arg_types("f8[::1]"))]
        assert _jit.compile_elsewhere(_jit.compile_jobs(k.outer, (0, 1, x, out), table))
        try:
            run_tasks(k.outer, 1, x, out)
        except _jit.StaleCompileJobs as error:
            print(error)
    """)
    done = _run_beside(tmp_path, script, TSCUBE_STRICT_COMPILE_JOBS="1")
    assert "never asked for unused" in done.stdout


_BY_ADDRESS_KERNELS = textwrap.dedent("""
    from numba import int64

    from tscube._jit import Callees, function_type, jit

    @jit(nogil=True)
    def scaled_sum(x, scale, out):
        s = 0.0
        for v in x:
            s += v * scale
        out[0] = s

    @jit(nogil=True)
    def count(x, out):
        out[1] = x.shape[0]
        return x.shape[0] * 10

    @jit(nogil=True)
    def outer(task, n_tasks, x, out, calls):
        calls[0](x, 2.0, out)
        out[2] = calls[1](x, out)

    CALLS = Callees((scaled_sum, function_type("f8[::1], f8, f8[::1]")),
                    (count, function_type("f8[::1], f8[::1]", returns=int64)))
""")


def test_callees_by_address_compile_elsewhere_once_and_stay_out_of_the_kernel(tmp_path):
    """Callees: a kernel calls its callees through their addresses. Its type needs
    nothing compiled, so other processes compile the callees while this one compiles the
    kernel; the call loads them from the cache, the kernel's module holds no code of
    theirs, and a second kernel (here: the same, in a new process) loads everything."""
    (tmp_path / "kernels_by_address.py").write_text(_BY_ADDRESS_KERNELS)
    script = textwrap.dedent("""
        import sys
        import numpy as np
        import kernels_by_address as k
        from tscube import _jit
        from tscube._threads import run_tasks

        x, out = np.arange(5.0), np.zeros(3)
        args = (0, 1, x, out, k.CALLS)
        jobs = _jit.compile_jobs(k.outer, args)
        if sys.argv[1] == "first":
            # the callees, not the kernel, in two processes
            assert [(job[0], job[2]) for job in jobs] == [(k.scaled_sum, k.outer), (k.count, k.outer)], jobs
            assert _jit.compile_elsewhere(jobs)
            assert len({job.process for jobs in _jit._PENDING.values() for job in jobs.values()}) == 2
            assert not _jit.compile_jobs(k.outer, args)  # already under way
        else:
            assert not jobs  # all cached
        run_tasks(k.outer, 1, x, out, k.CALLS)
        assert out.tolist() == [20.0, 5.0, 50.0], out
        assert not _jit._PENDING
        assert not k.scaled_sum.stats.cache_misses and not k.count.stats.cache_misses  # loaded
        module = str(k.outer.overloads[k.outer.signatures[0]].library._get_module_for_linking())
        assert "scaled_sum" not in module and "count" not in module
        print("kernel", "compiled" if k.outer.stats.cache_misses else "loaded")
    """)
    for run, kernel in (("first", "compiled"), ("second", "loaded")):
        done = _run_beside(tmp_path, script, run)
        assert done.stdout.strip() == f"kernel {kernel}", done.stdout


def test_a_kernel_with_callees_by_address_can_compile_elsewhere_too(tmp_path):
    """``kernel_too`` (classic BFAST, whose process compiles the STL start meanwhile):
    the kernel goes to another process with its callees by address, and the call waits
    for it and loads it instead of compiling it here."""
    (tmp_path / "kernels_by_address.py").write_text(_BY_ADDRESS_KERNELS)
    script = textwrap.dedent("""
        import numpy as np
        import kernels_by_address as k
        from tscube import _jit
        from tscube._threads import run_tasks

        x, out = np.arange(5.0), np.zeros(3)
        args = (0, 1, x, out, k.CALLS)
        jobs = _jit.compile_jobs(k.outer, args, kernel_too=True)
        assert [job[0] for job in jobs] == [k.outer, k.scaled_sum, k.count], jobs
        assert _jit.compile_elsewhere(jobs)
        run_tasks(k.outer, 1, x, out, k.CALLS)
        assert out.tolist() == [20.0, 5.0, 50.0], out
        assert not _jit._PENDING
        assert not k.outer.stats.cache_misses, "compiled here"
        assert not k.scaled_sum.stats.cache_misses and not k.count.stats.cache_misses
        print("ok")
    """)
    done = _run_beside(tmp_path, script)
    assert done.stdout.strip() == "ok", done.stdout


def test_two_threads_first_calls_wait_for_the_callees_compiled_elsewhere(tmp_path):
    """Two threads' first calls at once (a dask scheduler's threads, each on a chunk):
    the second waits for the callees the other processes compile, as the first does,
    instead of compiling them itself beside them."""
    (tmp_path / "kernels_by_address.py").write_text(_BY_ADDRESS_KERNELS)
    script = textwrap.dedent("""
        import threading
        import numpy as np
        import kernels_by_address as k
        from tscube import _jit
        from tscube._threads import run_tasks

        x = np.arange(5.0)
        outs = [np.zeros(3), np.zeros(3)]
        assert _jit.compile_elsewhere(_jit.compile_jobs(k.outer, (0, 1, x, outs[0], k.CALLS)))
        threads = [threading.Thread(target=run_tasks, args=(k.outer, 1, x, out, k.CALLS)) for out in outs]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert [out.tolist() for out in outs] == [[20.0, 5.0, 50.0]] * 2, outs
        assert not k.scaled_sum.stats.cache_misses and not k.count.stats.cache_misses  # loaded, not compiled
        print("ok")
    """)
    done = _run_beside(tmp_path, script)
    assert done.stdout.strip() == "ok"


def test_a_compiling_process_imports_the_job_module_but_not_the_public_api():
    """The compiling process of compile_elsewhere runs no package ``__init__`` above a
    job's module (tscube's imports the whole public API, pandas and xarray: half a second
    per process), and compiles the job all the same."""
    from tscube._jit import _COMPILE_JOB

    job = "_programme_row_1"  # small: the test compiles it
    script = "\n".join([
        _COMPILE_JOB,
        "assert 'tscube.bfast.core.bai_perron_cpu' in sys.modules",
        "assert not hasattr(sys.modules['tscube'], 'bfast_lite'), 'tscube/__init__ ran'",
        "assert 'tscube.bfast.lite' not in sys.modules and 'xarray' not in sys.modules",
        f"from tscube.bfast.core.bai_perron_cpu import {job}",
        f"print(len({job}.signatures))",
    ])
    from tscube.bfast.core import bai_perron_cpu

    sig = tuple(numba.typeof(value) for value in (np.zeros((2, 3)), np.zeros((2, 3), dtype=np.int64), 1, 3, 1, 1, 0,
                                                  np.zeros(3), 3))
    import pickle

    payload = pickle.dumps([(bai_perron_cpu.__name__, job, sig)])
    done = subprocess.run([sys.executable, "-c", script], input=payload, capture_output=True)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().strip() == "1"


def test_callees_by_address_are_dealt_to_processes_by_their_compile_seconds_or_back_and_forth():
    from tscube._jit import _deal

    assert _deal(list("abcdef"), 2) == [["a", "d", "e"], ["b", "c", "f"]]
    assert _deal(list("abc"), 4) == [["a"], ["b"], ["c"]]
    assert _deal([], 2) == []
    # with their compile seconds: the longest first, each to the process with the least so far
    # (BFAST Lite's own callee after the programme's smallest: 15.5, 9.8, 5.1, 0.6, then 5.2 s)
    assert _deal(list("abcde"), 2, [15.5, 9.8, 5.1, 0.6, 5.2]) == [["a", "d"], ["b", "e", "c"]]
    assert _deal(list("abc"), 4, [1.0, 3.0, 2.0]) == [["b"], ["c"], ["a"]]


@pytest.mark.parametrize("dtype, options", [
    ("float32", {}),
    ("int16", {"nodata": -3000, "return_process": True}),
    ("float64", {"history": "BP", "type": "OLS-CUSUM", "start": "many"}),
])
def test_the_monitor_kernel_compiled_ahead_is_the_one_the_call_runs(dtype, options):
    """compile_ahead builds the monitoring kernel's argument types without running the
    history selection: they must be exactly those of the call (else the other process
    compiles a kernel nobody runs)."""
    from tscube.bfast.monitor import _cpu
    from tscube.bfast.monitor._array import monitor_plan
    from tscube.datasets import make_cube

    cube = make_cube("demo", shape=(3, 5), seed=1)
    data = cube.data
    if dtype == "int16":
        data = np.where(np.isnan(data), -3000, np.round(data * 10000))
    data = data.astype(dtype)
    options = dict(options)
    start = cube.start if options.pop("start", None) is None else [cube.start, cube.start + np.timedelta64(180, "D")]
    flat = np.ascontiguousarray(data.reshape(data.shape[0], -1))
    plan = monitor_plan(flat.shape[0], cube.dates, start, freq=23, **options)[0]
    _cpu.run(flat, plan)
    kernel = _cpu._monitor_simd_kernel
    probe = tuple(kernel.typeof_pyval(a) for a in _cpu._probe_arguments(flat, plan))
    assert probe in kernel.signatures
    assert not _cpu.compile_ahead(flat, plan)  # compiled here already: no other process


def test_warmup_plans_jobs_once_and_in_order():
    from tscube.warmup import ALGORITHMS, JOBS, _plan, warmup

    assert _plan(["nrt", "monitor"]) == ["monitor", "monitor-roc", "nrt", "monitor-bp", "calibration"]
    assert set(_plan(ALGORITHMS)) == set(JOBS)
    for job in JOBS.values():
        assert set(job.after) <= set(JOBS)
    with pytest.raises(ValueError, match="unknown algorithm 'bfast'"):
        warmup(["bfast"])


def test_warmup_fills_the_cache_and_a_second_one_only_loads(tmp_path):
    """A warmup in an empty cache compiles the Gaussian mixture's kernels in worker
    processes; a second one finds them all in the cache (what a container image or a
    cluster's shared cache folder gives every later process)."""
    script = textwrap.dedent("""
        import json
        from tscube.warmup import warmup
        records = warmup(["cluster"], jobs=2)
        print(json.dumps([[r.job, r.dtype, r.compiled, r.error] for r in records]))
    """)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    runs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        runs.append(done.stdout.strip().splitlines()[-1])
    first, second = (__import__("json").loads(run) for run in runs)
    assert [row[:2] for row in first] == [["cluster", "float64"]]  # one job: the mixture computes in float64
    assert first[0][2] >= 2 and first[0][3] is None
    assert second[0][2] == 0


def test_warmup_command(tmp_path):
    from typer.testing import CliRunner

    from tscube.cli import app

    result = CliRunner().invoke(app, ["warmup", "-a", "cluster", "--jobs", "1"],
                                env={"NUMBA_CACHE_DIR": str(tmp_path / "cache")})
    assert result.exit_code == 0, result.output
    assert "cluster (float64): compiled" in result.output
    assert "warmup: " in result.output and "1 jobs" in result.output
    result = CliRunner().invoke(app, ["warmup", "-a", "nothing"])
    assert result.exit_code == 1
    assert "unknown algorithm 'nothing'" in result.output


def test_cache_writes_of_tscube_kernels_are_locked(tmp_path):
    """Every cached tscube kernel saves its cache under a lock on its index (parallel
    warmup jobs and compile_elsewhere write into one cache folder)."""
    from numba.core import caching

    from tscube._jit import LockedCacheFile, jit
    from tscube.bfast.monitor._cpu import _monitor_simd_kernel
    from tscube.cluster._cpu import _kmeans_kernel

    for kernel in (_monitor_simd_kernel, _kmeans_kernel):
        assert type(kernel._cache._cache_file) is LockedCacheFile
    assert issubclass(LockedCacheFile, caching.IndexDataCacheFile)
    uncached = jit(cache=False)(lambda x: x + 1)
    assert uncached(1) == 2
    cache_file = LockedCacheFile(str(tmp_path), "kernel", ("stamp", 1))
    cache_file.save(("signature", "machine"), {"code": 1})
    assert cache_file.load(("signature", "machine")) == {"code": 1}
    assert (tmp_path / "kernel.nbi.lock").exists()


def test_plain_args_helpers_compile_once_for_every_constant():
    """numba types a kernel's constant arguments as literals and compiles a callee once
    per value; a jit(plain_args=True) helper is compiled for the plain type only (set-up
    helpers: tile buffers, programme starts), a default one keeps the specialisation
    (where a constant decides the speed)."""
    from tscube._jit import jit

    def body(x, step):
        return x * step

    plain = jit(cache=False, plain_args=True)(body)
    special = jit(cache=False)(body)

    @jit(cache=False)
    def kernel(x):
        return plain(x, 1) + plain(x, -1) + special(x, 1) + special(x, -1)

    assert kernel(3.0) == 0.0
    assert len(plain.signatures) == 1
    assert str(plain.signatures[0][1]) == "int64"
    assert len(special.signatures) == 2


@pytest.mark.parametrize("name", ["monitor", "monitor-roc", "monitor-bp", "calibration", "lite", "lite-cuda-host", "stl",
                                  "cluster", "nrt"])
def test_every_warmup_job_runs(name):
    """Each job's own code, in this process (its kernels are cached by the suite's warmup
    or compiled here): a job that fails would leave its kernels to every first call."""
    from tscube.warmup import JOBS

    assert name in JOBS
    JOBS[name].run("float32")


def test_warmup_cubes_of_integers_mark_missing_values_with_nodata():
    from tscube.warmup import _cube

    data, dates, start, nodata = _cube("int16")
    floats = _cube("float32")[0]
    assert data.dtype == np.int16 and nodata == -3000
    np.testing.assert_array_equal(data == nodata, np.isnan(floats))
    assert np.abs(data[data != nodata] - np.round(floats[~np.isnan(floats)] * 10000)).max() <= 1
    assert _cube("uint16")[3] == 0


def test_compile_elsewhere_without_a_process_compiles_here(monkeypatch):
    """No interpreter to start (an embedded Python): the call compiles as usual."""
    from tscube import _jit

    def no_process(*args, **kwargs):
        raise FileNotFoundError("no python here")

    def fill(task, n_tasks, out):
        out[task] = task

    kernel = _jit.jit(cache=False, nogil=True)(fill)
    monkeypatch.setattr(_jit, "_cache_state", lambda kernel, sig: "missing")
    monkeypatch.setattr(_jit.subprocess, "Popen", no_process)
    out = np.zeros(3)
    assert not _jit.compile_elsewhere(_jit.compile_jobs(kernel, (0, 1, out)))
    assert kernel not in _jit._PENDING
    run_tasks(kernel, 3, out)
    np.testing.assert_array_equal(out, [0.0, 1.0, 2.0])


def test_per_pixel_kernels_compile_once_for_every_kind_of_cube():
    """BFAST Lite's and the history selections' kernels take the cube as bytes and its item
    size (bfast.core.series_cpu.cube_bytes): float32, float64, int16 with nodata, big-endian,
    Fortran-ordered and read-only cubes add one compiled version at most to each kernel
    (none where an earlier test of this process compiled it), with the results of the
    float64 cube (integers: of the same values as floats)."""
    from tscube import bfast_lite, bfast_monitor
    from tscube.bfast.lite import _cpu as lite_cpu
    from tscube.bfast.monitor.history import _cpu as history_cpu
    from tscube.datasets import make_cube

    cube = make_cube("demo", shape=(3, 5), seed=2)
    scaled = np.round(cube.data * 1e4)
    readonly = scaled.copy()
    readonly.flags.writeable = False
    int16 = np.where(np.isnan(scaled), -3000, scaled).astype(np.int16)
    kinds = [scaled, scaled.astype(np.float32), int16, int16.astype(">i2"), np.asfortranarray(scaled), readonly,
             int16.astype(np.uint16) + np.uint16(5000)]
    nodatas = [None, None, -3000, -3000, None, None, 2000]
    compiled = {kernel: len(kernel.signatures) for kernel in (
        lite_cpu._lite_kernel, history_cpu._history_kernel, history_cpu._roc_lanes_kernel)}
    lite = [bfast_lite(k, cube.dates, freq=23, nodata=nd, engine="cpu") for k, nd in zip(kinds, nodatas)]
    assert len(lite_cpu._lite_kernel.signatures) <= compiled[lite_cpu._lite_kernel] + 1
    for result in lite[1:]:
        np.testing.assert_array_equal(result.break_index, lite[0].break_index)
        np.testing.assert_array_equal(result.n_obs, lite[0].n_obs)
    for history, kernel in (("BP", history_cpu._history_kernel), ("ROC", history_cpu._roc_lanes_kernel)):
        runs = [bfast_monitor(k, cube.dates, cube.start, freq=23, history=history, nodata=nd, engine="cpu")
                for k, nd in zip(kinds, nodatas)]
        assert len(kernel.signatures) <= compiled[kernel] + 1, history  # (_history_kernel: also ROC's)
        for result in runs[1:]:
            np.testing.assert_array_equal(result.n_history, runs[0].n_history)


def _linked_code(kernel, arguments: slice, names: tuple) -> list:
    """For each compiled version of ``kernel``: the types of its ``arguments`` and whether
    each of ``names`` is in its LLVM module (the one numba links into callers: a private
    numba API; also from the cache)."""
    return [(signature[arguments], {name: name in str(compiled.library._get_module_for_linking()) for name in names})
            for signature, compiled in kernel.overloads.items()]


def test_each_history_kernel_holds_only_its_own_method():
    """The per-pixel history kernel is compiled once for ROC (a float level, designs too
    wide for the lanes) and once for BP: numba prunes a branch at compile time only where
    an argument is None, so each method has an argument of its own that the other passes
    as None. ROC's kernel held the whole Bai–Perron programme before. The check reads each compiled version's
    LLVM module, the one numba links into callers (a private numba API; also from the cache). BP's holds the
    programme's own code (``_programme_row_1``) but not its callees by address (``replay_partitions``:
    tscube._jit.Callees)."""
    from tscube import bfast_monitor
    from tscube.bfast.monitor.history import _cpu as history_cpu
    from tscube.datasets import make_cube

    cube = make_cube("demo", shape=(2, 2), n_dates=230, n_history=150, nan_fraction=0.2, seed=1)
    for history in ("ROC", "BP"):
        bfast_monitor(cube.data, cube.dates, cube.start, freq=23, order=5, history=history, engine="cpu")
    modules = {}
    names = ("_roc_pixel", "_programme_row_1", "replay_partitions")
    for (roc_level, bai_perron), held in _linked_code(history_cpu._history_kernel, slice(8, 10), names):
        method = "ROC" if isinstance(bai_perron, numba.types.NoneType) else "BP"
        assert isinstance(roc_level, numba.types.NoneType) == (method == "BP")
        modules[method] = held
    assert modules == {"ROC": {"_roc_pixel": True, "_programme_row_1": False, "replay_partitions": False},
                       "BP": {"_roc_pixel": False, "_programme_row_1": True, "replay_partitions": False}}


def test_each_stl_kernel_holds_only_the_path_its_series_take():
    """STL's kernel decomposes a call's series either a block at a time or one by one
    (periodic fits, as classic BFAST's start; very long series), never both: numba prunes
    the other path (an argument that is None), so a periodic call does not compile the
    blocks' loess code, nor a default call the one-by-one path. The check reads each
    compiled version's LLVM module (a private numba API; also from the cache)."""
    from tscube.stl import _cpu as stl_cpu
    from tscube.stl import stl

    rng = np.random.default_rng(3)
    cube = 0.5 + 0.2 * np.sin(np.arange(96)[:, None] * 2 * np.pi / 12) + rng.normal(0, 0.02, (96, 6))
    stl(cube, 12, engine="cpu")
    stl(cube, 12, seasonal="periodic", engine="cpu")
    modules = {}
    for (blocked, one_by_one), held in _linked_code(stl_cpu._decompose_batch, slice(12, 14),
                                                    ("_decompose_block", "decompose_one")):
        path = "blocks" if isinstance(one_by_one, numba.types.NoneType) else "one by one"
        assert isinstance(blocked, numba.types.NoneType) == (path == "one by one")
        modules[path] = held
    assert modules == {"blocks": {"_decompose_block": True, "decompose_one": False},
                       "one by one": {"_decompose_block": False, "decompose_one": True}}
