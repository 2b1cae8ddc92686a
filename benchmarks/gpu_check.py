"""One command that proves every GPU path of tscube on a real device, and times it.

Run it first on any machine with an NVIDIA GPU (from the repository root; the core
needs no install when ``PYTHONPATH=src``)::

    PYTHONPATH=src python3 benchmarks/gpu_check.py [--quick] [--no-tests] [--out DIR]

In one run it

1. prints the device (name, compute capability, memory) and exits with status 2 and a
   clear message where there is no GPU (the CUDA simulator does not count);
2. runs every cuda test on the device (``TSCUBE_TEST_REAL_CUDA=1 pytest tests/cudasim``);
3. measures the card's ceilings: a large device-to-device copy (GB/s, bytes read and
   written) and a float64 FMA loop (GFLOP/s);
4. BFAST Monitor, cpu engine against cuda engine on the same data: D1–D6 and Peru(Small)
   with history ``"all"`` and ``"ROC"``, a 0/50/90 % missing-value sweep, and Peru(Small)
   tiled to ~0.9 M pixels. Agreement: identical ``status`` and ``break_index``, max
   relative difference of the float outputs. Times: cpu wall clock (median), cuda wall
   clock with transfers, and by CUDA events the kernels alone and the copies; the
   read-once time of the cube from device memory; pixels/s, GB/s and GFLOP/s^Sp
   (``benchmarks/bfast_monitor.py``'s operation count);
5. STL on the STL paper's NDVI case (828 dates, period 24, windows 25/39/25, jumps
   3/4/3), without and with 30 % NaN, robust or not: cpu against cuda, agreement and
   series/s;
6. GMM and k-means (1e6 x 8, 16 clusters, fixed iterations from the same initial
   parameters): seconds per iteration, cpu against cuda, agreement;
7. BFAST Lite on cloudy pixels (275 dates, 20 % random gaps; default model on 1 M
   pixels, h = 12, trend + season): cpu against cuda, agreement and µs/pixel.

Every measurement is printed as one JSON line (and appended to ``DIR/gpu_check.jsonl``);
Markdown tables follow at the end (also in ``DIR/gpu_check.md``). Times are medians of
``--repeat`` warm runs after one untimed warm-up (compilation excluded), except the
slow STL ones: the cpu engine and each engine alone are timed once after compiling, the
cuda call ``--repeat - 2`` times; "new buffers" columns are single runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))  # bfast_monitor.py: the operation count and the plan capture

RECORDS: list[dict] = []
DEVICE = {"name": "?"}
OUT: Path | None = None


def emit(record: dict) -> dict:
    record = {"device": DEVICE["name"], **record}
    RECORDS.append(record)
    line = json.dumps(record, default=float)
    print(line, flush=True)
    if OUT is not None:
        with open(OUT / "gpu_check.jsonl", "a") as fh:
            fh.write(line + "\n")
    return record


def median_time(fn, repeat: int) -> float:
    """Median wall seconds of ``repeat`` calls after one warm-up call."""
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def max_rel_diff(a, b) -> float:
    """max |a - b| / max(|b|, 1e-12 * max|b|) over entries finite in both; NaN patterns must match."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if not np.array_equal(np.isnan(a), np.isnan(b)):
        return float("inf")
    both = np.isfinite(a) & np.isfinite(b)
    if not both.any():
        return 0.0
    scale = np.maximum(np.abs(b[both]), 1e-12 * np.abs(b[both]).max() + 1e-300)
    return float((np.abs(a[both] - b[both]) / scale).max())


# --------------------------------------------------------------------------- device


def device_or_exit():
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        print("gpu_check: NUMBA_ENABLE_CUDASIM=1 is set; the simulator is not a GPU. Unset it.",
              file=sys.stderr)
        sys.exit(2)
    try:
        from tscube.bfast.monitor import _cuda

        summary = _cuda.device_summary()
    except RuntimeError as error:
        print(f"gpu_check: no usable GPU here: {error}", file=sys.stderr)
        sys.exit(2)
    DEVICE["name"] = summary["name"]
    from numba import cuda

    device = cuda.get_current_device()
    summary.update(multiprocessors=device.MULTIPROCESSOR_COUNT, cpus=os.cpu_count())
    import numba

    summary.update(numba=numba.__version__, cpu_threads=numba.get_num_threads())
    try:
        import numba_cuda

        summary["numba_cuda"] = numba_cuda.__version__
    except Exception:  # pragma: no cover - bundled numba.cuda
        pass
    return emit(dict(benchmark="device", **summary))


def run_cuda_tests(extra: list[str]) -> dict:
    path = os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, TSCUBE_TEST_REAL_CUDA="1", PYTHONPATH=path)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(ROOT / "tests" / "cudasim"), *extra],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    text = proc.stdout + proc.stderr
    if OUT is not None:
        (OUT / "cudasim.log").write_text(text)
    summary = [line for line in text.splitlines() if " passed" in line or " failed" in line
               or " error" in line]
    failures = [line for line in text.splitlines() if line.startswith(("FAILED", "ERROR"))]
    print(text[-6000:], flush=True)
    return emit(dict(benchmark="cuda_tests", returncode=proc.returncode,
                     summary=summary[-1] if summary else text[-300:], failures=failures[:40],
                     seconds=time.perf_counter() - start))


@functools.lru_cache(maxsize=1)
def _roof_kernels():
    global cuda  # a module global: the simulator swaps it while a kernel runs
    from numba import cuda

    @cuda.jit
    def fma_loop(out, n_iter):
        i = cuda.grid(1)
        a0 = 1.0 + i * 1e-9
        a1, a2, a3 = a0 + 1e-3, a0 + 2e-3, a0 + 3e-3
        m, c = 0.999999, 1e-7
        for _ in range(n_iter):
            a0 = a0 * m + c
            a1 = a1 * m + c
            a2 = a2 * m + c
            a3 = a3 * m + c
        out[i] = a0 + a1 + a2 + a3

    @cuda.jit
    def read_sum(x, out):
        i = cuda.grid(1)
        stride = cuda.gridsize(1)
        acc = 0.0
        for j in range(i, x.size, stride):
            acc += x[j]
        if acc == 12345.678:  # keep the loads; practically never true
            out[0] = acc

    return fma_loop, read_sum


def event_ms(fn, repeat=5) -> float:
    """Median milliseconds of a device operation between two CUDA events (after a warm-up)."""
    from numba import cuda

    fn()
    cuda.synchronize()
    times = []
    for _ in range(repeat):
        a, b = cuda.event(), cuda.event()
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return float(np.median(times))


def read_once_ms(flat_device_array) -> float:
    """Time to read a device array once (grid-stride sum), from device memory."""
    from numba import cuda

    _fma, read = _roof_kernels()
    sink = cuda.device_array(1, np.float64)
    blocks = max(1, min(132 * 16, flat_device_array.size // 1024))
    return event_ms(lambda: read[blocks, 256](flat_device_array, sink))


def ceilings() -> dict:
    from numba import cuda

    fma, _read = _roof_kernels()
    n = 1 << 29  # 2 GiB of float32 per array
    src = cuda.device_array(n, np.float32)
    dst = cuda.device_array(n, np.float32)
    src[:] = 1.0  # numba fills device arrays by a kernel
    copy_ms = event_ms(lambda: dst.copy_to_device(src))
    read_ms = read_once_ms(src)
    threads = 132 * 2048
    out = cuda.device_array(threads, np.float64)
    n_iter = 4096
    fma_ms = event_ms(lambda: fma[threads // 256, 256](out, n_iter))
    record = emit(dict(
        benchmark="ceilings", copy_gbs=2 * 4 * n / copy_ms / 1e6, read_gbs=4 * n / read_ms / 1e6,
        fp64_fma_gflops=threads * n_iter * 4 * 2 / fma_ms / 1e6))
    return record


# --------------------------------------------------------------------------- BFAST Monitor


def bfast_case(label, values, plan, history, repeat, flops, read_cpu_ms=None):
    """cpu vs cuda engine on one captured (values, plan)."""
    from numba import cuda

    from tscube import config
    from tscube.bfast.monitor import _cpu, _cuda

    T, M = values.shape
    cpu_out = _cpu.run(values, plan)
    cpu_s = median_time(lambda: _cpu.run(values, plan), repeat)
    timings: dict = {}
    cuda_out = _cuda.run(values, plan, timings=timings)  # warm-up and compile
    wall, parts = [], []
    for _ in range(repeat):
        t = {}
        start = time.perf_counter()
        cuda_out = _cuda.run(values, plan, timings=t)
        wall.append(time.perf_counter() - start)
        parts.append(t)
    cuda_s = float(np.median(wall))
    kernels_ms = float(np.median([p["kernels"] for p in parts]))
    h2d_ms = float(np.median([p["h2d"] for p in parts]))
    d2h_ms = float(np.median([p["d2h"] for p in parts]))
    selection_ms = float(np.median([p["selection"] for p in parts]))
    per_kernel = {name[len("kernel_"):]: float(np.median([p[name] for p in parts]))
                  for name in parts[0] if name.startswith("kernel_")}
    config.CUDA_KEEP_BUFFERS = False  # the cost of allocating the buffers on every call
    try:
        cold_s = median_time(lambda: _cuda.run(values, plan), 3)
    finally:
        config.CUDA_KEEP_BUFFERS = True
    d_values = cuda.to_device(np.ascontiguousarray(values).reshape(-1))
    read_ms = read_once_ms(d_values)
    del d_values
    same_status = bool(np.array_equal(cpu_out["status"], cuda_out["status"]))
    same_breaks = bool(np.array_equal(cpu_out["break_index"], cuda_out["break_index"]))
    rel = {name: max_rel_diff(cuda_out[name], cpu_out[name])
           for name in ("magnitude", "sigma", "mosum_mean", "statistic", "history_start")}
    nbytes = values.nbytes
    return emit(dict(
        benchmark="bfast_monitor", case=label, history=history, M=M, N=T,
        nan_fraction=float(np.isnan(values[:, : min(M, 8192)]).mean()),
        dtype=str(values.dtype), agree=same_status and same_breaks and max(rel.values()) < 1e-5,
        same_status=same_status, same_break_index=same_breaks,
        n_status_diff=int((cpu_out["status"] != cuda_out["status"]).sum()),
        n_break_diff=int((cpu_out["break_index"] != cuda_out["break_index"]).sum()),
        max_rel_diff=rel, breaks=int((cuda_out["break_index"] >= 0).sum()),
        cpu_ms=cpu_s * 1e3, cuda_ms=cuda_s * 1e3, cuda_kernels_ms=kernels_ms,
        cuda_h2d_ms=h2d_ms, cuda_d2h_ms=d2h_ms, cuda_selection_ms=selection_ms,
        cuda_kernel_ms=per_kernel, cuda_ms_allocating=cold_s * 1e3,
        read_once_device_ms=read_ms, kernels_over_read_once=kernels_ms / read_ms,
        speedup_wall=cpu_s / cuda_s, speedup_kernels_vs_cpu=cpu_s * 1e3 / kernels_ms,
        cpu_pixels_per_s=M / cpu_s, cuda_pixels_per_s=M / cuda_s,
        kernel_pixels_per_s=M / (kernels_ms / 1e3), kernel_input_gbs=nbytes / kernels_ms / 1e6,
        kernel_gflops_sp=flops / kernels_ms / 1e6, cpu_gflops_sp=flops / cpu_s / 1e9))


def bfast_checks(quick: bool, repeat: int) -> None:
    from bfast_monitor import capture_plan, pipeline_flops

    from tscube.datasets import make_cube

    def one(label, cube, histories):
        for history in histories:
            values, plan = capture_plan(cube, history)
            T, M = values.shape
            n = int(plan.monitor_begin[0])
            bfast_case(label, values, plan, history, repeat, pipeline_flops(M, T, n, plan.design.k))

    names = ("D1", "D2", "peru_small") if quick else ("D1", "D2", "D3", "D4", "D5", "D6", "peru_small")
    for name in names:
        one(name, make_cube(name, seed=0), ("all", "ROC"))
    # missing-value sweep on one mid-sized cube
    for fraction in (0.0, 0.5, 0.9):
        cube = make_cube("D5", nan_fraction=fraction, seed=1)
        one(f"D5 nan={fraction:.0%}", cube, ("all",))
    # a cube large enough to fill the device: Peru(Small) tiled 8 times along the pixels
    cube = make_cube("peru_small", seed=0)
    tiles = 2 if quick else 8
    big = dataclasses.replace(cube, data=np.concatenate([cube.data] * tiles, axis=2))
    del cube
    one(f"peru_small x{tiles}", big, ("all", "ROC"))


# --------------------------------------------------------------------------- STL


def stl_checks(quick: bool, repeat: int) -> None:
    """A thread per series needs ~10^5 series to fill a GPU, which would take the cpu
    engine minutes: the cuda engine runs the whole cube, the cpu engine its first
    ``cpu_series`` columns (it is parallel over series, so its series/s do not depend on
    the count once every thread is busy); agreement is checked on those columns."""
    from tscube import config
    from tscube.stl import ENGINES, stl

    if "cuda" not in ENGINES:
        emit(dict(benchmark="stl", skipped="tscube.stl has no cuda engine in this version"))
        return
    params = dict(seasonal=25, trend=39, low_pass=25, seasonal_jump=3, trend_jump=4, low_pass_jump=3)
    period, n_times = 24, 828
    rng = np.random.default_rng(0)
    t = np.arange(n_times)[:, None]
    for nan_fraction in (0.0, 0.3):
        for robust in (False, True):
            n_series = (32768 if robust else 65536) if quick else (65536 if robust else 131072)
            cpu_series = (2048 if robust else 8192) if quick else (4096 if robust else 16384)
            cube = (0.5 + 1e-4 * t + 0.3 * np.sin(2 * np.pi * t / period + rng.uniform(0, 6, n_series))
                    + 0.05 * rng.standard_normal((n_times, n_series))).astype(np.float32)
            if nan_fraction:
                cube[rng.random(cube.shape) < nan_fraction] = np.nan
            kw = dict(params, robust=robust)
            head = np.ascontiguousarray(cube[:, :cpu_series])
            stl(head[:, :64], period, engine="cpu", **kw)  # compile
            start = time.perf_counter()
            cpu = stl(head, period, engine="cpu", **kw)
            cpu_s = time.perf_counter() - start
            gpu = stl(cube, period, engine="cuda", **kw)  # compile, buffers
            cuda_s = median_time(lambda: stl(cube, period, engine="cuda", **kw), max(1, repeat - 2))
            # the engines alone (buffers kept), without the public function's layout copies
            from tscube.stl import _cpu as stl_cpu, _cuda as stl_cuda
            from tscube.stl._layout import series_rows

            rows = series_rows(cube, None)
            start = time.perf_counter()
            stl_cpu.decompose(rows[:cpu_series], gpu.params)
            cpu_engine_s = time.perf_counter() - start
            parts = {}
            start = time.perf_counter()
            stl_cuda.decompose(rows, gpu.params, timings=parts)
            cuda_engine_s = time.perf_counter() - start
            del rows
            config.CUDA_KEEP_BUFFERS = False
            try:
                start = time.perf_counter()
                stl(cube, period, engine="cuda", **kw)
                cold_s = time.perf_counter() - start
            finally:
                config.CUDA_KEEP_BUFFERS = True
            scale = float(np.nanmax(np.abs(head)))
            diff = max(float(np.nanmax(np.abs(gpu.trend[:, :cpu_series] - cpu.trend))),
                       float(np.nanmax(np.abs(gpu.seasonal[:, :cpu_series] - cpu.seasonal))))
            same_status = bool(np.array_equal(gpu.status[:cpu_series], cpu.status))
            cpu_rate, cuda_rate = cpu_series / cpu_s, n_series / cuda_s
            emit(dict(benchmark="stl", case="NDVI", n_times=n_times, n_series=n_series,
                      cpu_series=cpu_series, nan_fraction=nan_fraction, robust=robust,
                      agree=same_status and diff <= 1e-8 * scale, same_status=same_status,
                      max_abs_diff_over_max_y=diff / scale, cpu_ms=cpu_s * 1e3, cuda_ms=cuda_s * 1e3,
                      cuda_ms_allocating=cold_s * 1e3, cpu_engine_ms=cpu_engine_s * 1e3,
                      cuda_engine_ms=cuda_engine_s * 1e3, cuda_kernels_ms=parts["kernels"],
                      cuda_h2d_ms=parts["h2d"], cuda_d2h_ms=parts["d2h"],
                      engine_speedup=(n_series / cuda_engine_s) / (cpu_series / cpu_engine_s),
                      kernel_speedup=(n_series / parts["kernels"] * 1e3) / (cpu_series / cpu_engine_s),
                      cpu_series_per_s=cpu_rate,
                      cuda_series_per_s=cuda_rate, speedup=cuda_rate / cpu_rate,
                      cuda_input_gbs=cube.nbytes / cuda_s / 1e9))


# --------------------------------------------------------------------------- BFAST Lite


def _cloudy_cube(n_pixels, n_times, nan_fraction, seed=0):
    """MODIS-like float32 NDVI (23 dates a year): season, trend, one level shift in half
    the pixels, noise, ``nan_fraction`` of the values missing at random per pixel."""
    rng = np.random.default_rng(seed)
    t = np.arange(n_times, dtype=np.float32)[:, None] / 23
    cube = np.empty((n_times, n_pixels), dtype=np.float32)
    step = 4096
    for p0 in range(0, n_pixels, step):
        m = min(step, n_pixels - p0)
        phase = rng.uniform(0, 6, m).astype(np.float32)
        at = rng.integers(n_times // 4, 3 * n_times // 4, m)
        shift = np.where(rng.random(m) < 0.5, rng.uniform(-0.3, 0.3, m), 0).astype(np.float32)
        block = (0.5 + 0.002 * t + 0.15 * np.sin(2 * np.pi * t + phase)
                 + shift * (np.arange(n_times)[:, None] >= at) + rng.normal(0, 0.03, (n_times, m)))
        block[rng.random((n_times, m)) < nan_fraction] = np.nan
        cube[:, p0:p0 + m] = block
    return cube


#: bfast_lite's defaults of the plan's parameters.
LITE_DEFAULTS = dict(order=3, trend=True, season=False, h=0.15, breaks="LWZ", max_breaks=None, level=0.0,
                     magnitude_interval=0.1, nodata=None)


def lite_checks(quick: bool, repeat: int) -> None:
    """BFAST Lite on cloudy pixels (issue 42: the cuda engine >= 10x the cpu engine on the
    GPU machine's cores, 1 M pixels with 20 % random gaps). A thread per segment start
    needs ~10^4 pixels to fill a GPU, which would take the cpu engine long: the cuda
    engine runs the whole cube, the cpu engine its first ``cpu_pixels`` (parallel over
    pixels, so its pixels/s do not depend on the count once every thread is busy);
    agreement (statuses and breaks identical, floats to 1e-8) on those pixels."""
    from tscube import bfast_lite
    from tscube.bfast.lite import _cuda as lite_cuda
    from tscube.bfast.lite._array import ENGINES, make_lite_plan
    from tscube.timeaxis import build_time_axis

    if "cuda" not in ENGINES:
        emit(dict(benchmark="bfast_lite", skipped="bfast_lite has no cuda engine in this version"))
        return
    n_times = 275
    dates = 2000 + np.arange(n_times) / 23
    settings = [("default", {}, 1_000_000), ("h = 12", dict(h=12), 262_144),
                ("trend + season", dict(order=0, season=True), 65_536)]
    for label, options, n_pixels in settings:
        if quick:
            n_pixels //= 8
        cpu_pixels = min(n_pixels, 4096 if "season" in options else 16384)
        cube = _cloudy_cube(n_pixels, n_times, 0.2, seed=len(label))
        head = np.ascontiguousarray(cube[:, :cpu_pixels])
        kw = dict(freq=23, criteria=True, **options)
        bfast_lite(head[:, :64], dates, engine="cpu", **kw)  # compile
        start = time.perf_counter()
        cpu = bfast_lite(head, dates, engine="cpu", **kw)
        cpu_s = time.perf_counter() - start
        bfast_lite(head[:, :64], dates, engine="cuda", **kw)  # compile
        start = time.perf_counter()
        gpu = bfast_lite(cube, dates, engine="cuda", **kw)
        cuda_s = time.perf_counter() - start
        parts = {}
        plan = make_lite_plan(build_time_axis(dates, 23), **{**LITE_DEFAULTS, **options})
        lite_cuda.run(cube[:, :cpu_pixels], plan, timings=parts)  # the steps, on the cpu engine's pixels
        def head_of(name):  # the cuda result on the cpu engine's pixels, its break axis cut to theirs
            like = getattr(cpu, name)
            return getattr(gpu, name)[tuple(slice(0, size) for size in like.shape)], like

        same = all(np.array_equal(*head_of(name)) for name in ("status", "n_breaks", "break_index"))
        rel = max(max_rel_diff(*head_of(name)) for name in ("coefficients", "magnitudes", "rss"))
        cpu_rate, cuda_rate = cpu_pixels / cpu_s, n_pixels / cuda_s
        emit(dict(benchmark="bfast_lite", case=label, n_times=n_times, n_pixels=n_pixels, cpu_pixels=cpu_pixels,
                  nan_fraction=0.2, agree=bool(same and rel <= 1e-8), same_breaks=bool(same), max_rel_diff=rel,
                  cpu_ms=cpu_s * 1e3, cuda_ms=cuda_s * 1e3, cpu_us_per_pixel=1e6 / cpu_rate,
                  cuda_us_per_pixel=1e6 / cuda_rate, speedup=cuda_rate / cpu_rate,
                  steps_ms_on_cpu_pixels={k: v * 1e3 for k, v in parts.items() if isinstance(v, float)},
                  recursion_starts=parts["recursion_starts"], starts=parts["starts"]))


# --------------------------------------------------------------------------- clustering


def cluster_checks(quick: bool, repeat: int) -> None:
    import warnings

    from tscube.cluster import GaussianMixture, KMeans
    from tscube.datasets._gmm import make_gmm

    warnings.simplefilter("ignore")
    n, d, k, iters = (200_000 if quick else 1_000_000), 8, 16, 8
    X, _ = make_gmm(n, d, k, random_state=0)
    n = X.shape[0]
    means = X[np.random.default_rng(1).choice(n, k, replace=False)]
    init = dict(weights_init=np.full(k, 1.0 / k), means_init=means,
                precisions_init=np.array([np.eye(d)] * k))
    makers = {
        "gmm full": lambda e, it: GaussianMixture(k, max_iter=it, tol=0, engine=e, **init),
        "gmm diag": lambda e, it: GaussianMixture(
            k, max_iter=it, tol=0, engine=e, covariance_type="diag",
            weights_init=init["weights_init"], means_init=means, precisions_init=np.ones((k, d))),
        "kmeans": lambda e, it: KMeans(k, init=means, max_iter=it, tol=0, engine=e),
    }
    for method, make in makers.items():
        per_iter, values = {}, {}
        for engine in ("cpu", "cuda"):
            make(engine, 1).fit(X[:2000])  # compile
            t_one = median_time(lambda: make(engine, 1).fit(X), repeat)
            t_all = median_time(lambda: make(engine, 1 + iters).fit(X), repeat)
            model = make(engine, 1 + iters).fit(X)
            per_iter[engine] = max(t_all - t_one, 1e-9) / max(model.n_iter_ - 1, 1)
            values[engine] = model.lower_bound_ if method.startswith("gmm") else model.inertia_
        rel = abs(values["cuda"] - values["cpu"]) / abs(values["cpu"])
        emit(dict(benchmark="cluster", method=method, n=n, d=d, k=k, iterations=iters,
                  agree=bool(rel < 1e-6), rel_diff=float(rel),
                  cpu_s_per_iter=per_iter["cpu"], cuda_s_per_iter=per_iter["cuda"],
                  speedup=per_iter["cpu"] / per_iter["cuda"],
                  cuda_samples_per_s=n / per_iter["cuda"],
                  cuda_input_gbs=n * d * 8 / per_iter["cuda"] / 1e9))


# --------------------------------------------------------------------------- report


def _cc(capability) -> str:
    return ".".join(map(str, capability)) if capability else "?"


def markdown() -> str:
    name = DEVICE["name"]
    lines = []
    ceil = next((r for r in RECORDS if r["benchmark"] == "ceilings"), None)
    dev = next((r for r in RECORDS if r["benchmark"] == "device"), {})
    lines.append(f"Device: **{name}** (cc {_cc(dev.get('compute_capability'))}, "
                 f"{dev.get('multiprocessors')} SMs); cpu engine on {dev.get('cpu_threads')} threads.")
    if ceil:
        lines.append(f"Ceilings measured in this run: device-to-device copy {ceil['copy_gbs']:.0f} GB/s "
                     f"(read + write), read-only sum {ceil['read_gbs']:.0f} GB/s, "
                     f"float64 FMA {ceil['fp64_fma_gflops']:.0f} GFLOP/s.")
    tests = next((r for r in RECORDS if r["benchmark"] == "cuda_tests"), None)
    if tests:
        lines.append(f"cuda tests on the device: `{tests['summary']}` (exit {tests['returncode']}).")
    rows = [r for r in RECORDS if r["benchmark"] == "bfast_monitor"]
    if rows:
        lines += ["", "### BFAST Monitor", "",
                  "| cube | history | pixels × dates | NaN | agree | cpu ms | cuda ms (wall) "
                  "| cuda ms, new buffers | kernels ms | H2D ms | cpu ROC ms | read-once ms "
                  "| kernels / read-once | × cpu (wall) | × cpu (kernels) | Mpixel/s (kernels) "
                  "| GFLOP/s^Sp (kernels) |",
                  "|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in rows:
            lines.append(
                f"| {r['case']} | {r['history']} | {r['M']} × {r['N']} | {r['nan_fraction']:.0%} "
                f"| {'yes' if r['agree'] else 'NO'} | {r['cpu_ms']:.1f} | {r['cuda_ms']:.1f} "
                f"| {r['cuda_ms_allocating']:.1f} | {r['cuda_kernels_ms']:.2f} | {r['cuda_h2d_ms']:.2f} | {r['cuda_selection_ms']:.0f} "
                f"| {r['read_once_device_ms']:.3f} | {r['kernels_over_read_once']:.0f} "
                f"| {r['speedup_wall']:.1f} | {r['speedup_kernels_vs_cpu']:.1f} "
                f"| {r['kernel_pixels_per_s'] / 1e6:.1f} | {r['kernel_gflops_sp']:.0f} |")
    rows = [r for r in RECORDS if r["benchmark"] == "bfast_monitor"]
    if rows:
        names = list(rows[0]["cuda_kernel_ms"])
        lines += ["", "BFAST Monitor kernels, ms per call (CUDA events, summed over chunks):", "",
                  "| cube | history | " + " | ".join(names) + " |",
                  "|---|---|" + "---:|" * len(names)]
        for r in rows:
            lines.append(f"| {r['case']} | {r['history']} | "
                         + " | ".join(f"{r['cuda_kernel_ms'][n]:.2f}" for n in names) + " |")
    rows = [r for r in RECORDS if r["benchmark"] == "bfast_lite" and "skipped" not in r and "error" not in r]
    if rows:
        lines += ["", "### BFAST Lite (275 dates, 20 % random gaps per pixel)", "",
                  "| model | agree (max rel. diff) | cpu: pixels, ms | cuda: pixels, ms | cpu µs/pixel "
                  "| cuda µs/pixel | × cpu | recursion starts (host) |",
                  "|---|---|---:|---:|---:|---:|---:|---:|"]
        for r in rows:
            lines.append(f"| {r['case']} | {'yes' if r['agree'] else 'NO'} ({r['max_rel_diff']:.1e}) "
                         f"| {r['cpu_pixels']}, {r['cpu_ms']:.0f} | {r['n_pixels']}, {r['cuda_ms']:.0f} "
                         f"| {r['cpu_us_per_pixel']:.2f} | {r['cuda_us_per_pixel']:.2f} | {r['speedup']:.1f} "
                         f"| {r['recursion_starts']} of {r['starts']} |")
    rows = [r for r in RECORDS if r["benchmark"] == "stl" and "skipped" not in r]
    if rows:
        lines += ["", "### STL (NDVI case: 828 dates, period 24, windows 25/39/25, jumps 3/4/3)", "",
                  "| NaN | robust | agree | cpu: series, ms | cuda: series, ms | cuda ms, new buffers "
                  "| cpu series/s | cuda series/s | × cpu | engines alone: cpu ms, cuda ms (kernels ms) "
                  "| × cpu (engines) | × cpu (kernels) |",
                  "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in rows:
            lines.append(f"| {r['nan_fraction']:.0%} | {r['robust']} | {'yes' if r['agree'] else 'NO'} "
                         f"| {r['cpu_series']}, {r['cpu_ms']:.0f} | {r['n_series']}, {r['cuda_ms']:.0f} "
                         f"| {r['cuda_ms_allocating']:.0f} | {r['cpu_series_per_s']:.3g} "
                         f"| {r['cuda_series_per_s']:.3g} | {r['speedup']:.1f} "
                         f"| {r['cpu_engine_ms']:.0f}, {r['cuda_engine_ms']:.0f} ({r['cuda_kernels_ms']:.0f}) "
                         f"| {r['engine_speedup']:.1f} | {r['kernel_speedup']:.1f} |")
    rows = [r for r in RECORDS if r["benchmark"] == "cluster"]
    if rows:
        lines += ["", "### Clustering (per iteration)", "",
                  "| method | samples × features, K | agree (rel. diff) | cpu ms/iter | cuda ms/iter | × cpu "
                  "| cuda GB/s (input) |",
                  "|---|---|---|---:|---:|---:|---:|"]
        for r in rows:
            lines.append(f"| {r['method']} | {r['n']} × {r['d']}, {r['k']} "
                         f"| {'yes' if r['agree'] else 'NO'} ({r['rel_diff']:.1e}) "
                         f"| {r['cpu_s_per_iter'] * 1e3:.2f} | {r['cuda_s_per_iter'] * 1e3:.2f} "
                         f"| {r['speedup']:.1f} | {r['cuda_input_gbs']:.0f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    global OUT
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer and smaller cubes")
    parser.add_argument("--no-tests", action="store_true", help="skip the cuda test suite on the device")
    parser.add_argument("--test-args", default="", help="extra pytest arguments (e.g. '-x -k bfast')")
    parser.add_argument("--only", default="bfast,lite,stl,cluster", help="comma-separated parts to time")
    parser.add_argument("--repeat", type=int, default=5, help="timed warm runs per measurement (median)")
    parser.add_argument("--out", default=os.environ.get("OUT"), help="folder for gpu_check.jsonl / .md")
    args = parser.parse_args(argv)
    if args.out:
        OUT = Path(args.out)
        OUT.mkdir(parents=True, exist_ok=True)
    device_or_exit()
    if not args.no_tests:
        run_cuda_tests(args.test_args.split())
    ceilings()
    parts = args.only.split(",")
    failures = []
    for part, check in (("bfast", bfast_checks), ("lite", lite_checks), ("stl", stl_checks),
                        ("cluster", cluster_checks)):
        if part not in parts:
            continue
        try:
            check(args.quick, args.repeat)
        except Exception as error:  # report and go on with the other parts
            import traceback

            traceback.print_exc()
            failures.append(part)
            emit(dict(benchmark=part, error=f"{type(error).__name__}: {error}"))
    table = markdown()
    print("\n" + table)
    if OUT is not None:
        (OUT / "gpu_check.md").write_text(table + "\n")
    disagree = [r for r in RECORDS if r.get("agree") is False]
    tests = next((r for r in RECORDS if r["benchmark"] == "cuda_tests"), {"returncode": 0})
    return 1 if failures or disagree or tests["returncode"] != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
