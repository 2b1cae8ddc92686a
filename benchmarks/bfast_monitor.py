"""Benchmark of BFAST Monitor engines on the BFAST GPU paper's Table I datasets.

Prints one JSON line per measurement, then a Markdown table (``--markdown``).

For each dataset (generated with :func:`tscube.datasets.make_cube`, float32, ``k = 3``
harmonics + intercept + trend = ``K = 8`` regressors, history ``"all"`` as in the paper):

* ``engine_ms``: wall time of the engine on the whole cube (best of ``--repeat`` warm
  runs; the engine only: ``run(values, plan)``, without the public function's date
  parsing, reported separately as ``call_ms``);
* ``read_once_ms``: the time to read the cube once (``np.sum`` over it), measured in the
  same run, and ``ratio_read_once = engine_ms / read_once_ms``, the distance to the
  memory-bound limit;
* ``pixels_per_s`` and ``gflops_sp``, the paper's GFLOPs^Sp: the floating-point
  operations of the padded (worst-case) Algorithm 1 divided by the time. The paper gives
  ``4 M n K^2`` for the masked Gram matrices and ``6 M K^3`` for the inversion; we count
  the whole pipeline (``M`` pixels, ``N`` dates, ``n`` history dates, ``K`` regressors)::

      Gram 4 M n K^2 + inversion 6 M K^3 + X'y 3 M n K + beta 2 M K^2
      + predictions 2 M N K + residuals and filter 4 M N + sigma 2 M n
      + MOSUM 4 M (N - n) + boundary and break 5 M (N - n)

* the reference engine on the first ``--reference-pixels`` pixels: ``reference_ms_per_pixel``
  and ``speedup_per_pixel`` (reference / engine, per pixel);
* ``first_call_s``: the first call of each kernel in a fresh process (numba loads the
  compiled kernels from its cache; without a cache this is the compile time).

``--large`` runs a Peru(Large)-sized cube (4458 x 3678 pixels, 488 dates, 69% missing)
in row blocks so that the peak memory stays bounded (see :func:`bench_large` for how the
blocks are generated); it reports the engine time, the end-to-end time and the peak RSS.

The cpu engine's threads follow numba (``NUMBA_NUM_THREADS``); BLAS threads are left as
they are (only the "blas" formulation calls BLAS, outside the numba kernels).

Usage::

    python benchmarks/bfast_monitor.py [--datasets D1,D2] [--engine cpu] [--gram simd,fused]
        [--repeat 5] [--reference-pixels 64] [--large] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time

import numpy as np

DATASETS = ("D1", "D2", "D3", "D4", "D5", "D6", "peru_small")
ORDER = 3


def pipeline_flops(M: int, N: int, n: int, K: int) -> float:
    """Floating-point operations of Algorithm 1, padded (every date of every pixel)."""
    return (
        4.0 * M * n * K**2  # masked Gram matrices
        + 6.0 * M * K**3  # batched inversion
        + 3.0 * M * n * K  # X'y
        + 2.0 * M * K**2  # beta
        + 2.0 * M * N * K  # predictions
        + 4.0 * M * N  # residuals and missing-value filter
        + 2.0 * M * n  # sigma
        + 4.0 * M * (N - n)  # MOSUM
        + 5.0 * M * (N - n)  # boundary and first break
    )


def best_of(fn, repeat: int) -> float:
    """Best wall time of ``repeat`` calls, in seconds."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


class _Captured(Exception):
    pass


def capture_plan(cube, history: str):
    """The validated ``(values (T, P), plan)`` that ``bfast_monitor`` hands its engines."""
    from tscube import bfast_monitor
    from tscube.bfast.monitor import _reference

    captured = {}
    original = _reference.run

    def grab(values, plan):
        captured.update(values=values, plan=plan)
        raise _Captured

    _reference.run = grab
    try:
        bfast_monitor(cube.data, cube.dates, cube.start, order=ORDER, freq=23, history=history, engine="reference")
    except _Captured:
        pass
    finally:
        _reference.run = original
    return captured["values"], captured["plan"]


def engine_runner(engine: str, gram: str | None):
    if engine == "cpu":
        from tscube.bfast.monitor import _cpu

        return lambda values, plan: _cpu.run(values, plan, gram=gram)
    if engine == "cuda":
        from tscube.bfast.monitor import _cuda

        return _cuda.run
    from tscube.bfast.monitor import _reference

    return _reference.run


def emit(record: dict) -> None:
    print(json.dumps(record), flush=True)


def first_calls(engine: str, grams: list[str | None]) -> dict:
    """Time of the first call of each formulation in this process (JIT cache load)."""
    from tscube.datasets import make_cube

    tiny = make_cube("demo", shape=(4, 4), n_dates=120, n_history=60, nan_fraction=0.3, seed=0)
    values, plan = capture_plan(tiny, "all")
    out = {}
    for gram in grams:
        run = engine_runner(engine, gram)
        t0 = time.perf_counter()
        run(values, plan)
        out[gram or engine] = time.perf_counter() - t0
    return out


def bench_dataset(name, engine, grams, repeat, reference_pixels, first_call, history) -> list[dict]:
    from tscube.datasets import make_cube

    cube = make_cube(name, seed=0)
    values, plan = capture_plan(cube, history)
    N, M = values.shape
    n = int(plan.monitor_begin[0])
    K = plan.design.k
    flops = pipeline_flops(M, N, n, K)
    read_once = best_of(lambda: np.sum(values), max(repeat, 5))
    reference_ms = None
    if reference_pixels:
        sub = np.ascontiguousarray(values[:, :reference_pixels])
        run_ref = engine_runner("reference", None)
        reference_ms = best_of(lambda: run_ref(sub, plan), 1) * 1e3 / sub.shape[1]
    records = []
    for gram in grams:
        run = engine_runner(engine, gram)
        run(values, plan)  # warm
        seconds = best_of(lambda: run(values, plan), repeat)
        record = dict(
            benchmark="bfast_monitor", dataset=name, engine=engine, gram=gram, M=M, N=N, n=n, K=K,
            nan_fraction=float(np.isnan(values[:, : min(M, 4096)]).mean()), history=history,
            threads=_threads(), engine_ms=seconds * 1e3, read_once_ms=read_once * 1e3,
            ratio_read_once=seconds / read_once, pixels_per_s=M / seconds, gflops_sp=flops / seconds / 1e9,
            first_call_s=first_call.get(gram or engine),
        )
        if reference_ms is not None:
            per_pixel = seconds * 1e3 / M
            record.update(reference_pixels=reference_pixels, reference_ms_per_pixel=reference_ms,
                          speedup_per_pixel=reference_ms / per_pixel)
        records.append(record)
        emit(record)
    # the public function end to end (time axis from datetimes, validation, reshapes)
    from tscube import bfast_monitor

    call = best_of(lambda: bfast_monitor(cube.data, cube.dates, cube.start, order=ORDER, freq=23,
                                         history=history, engine=engine), 2)
    emit(dict(benchmark="bfast_monitor_call", dataset=name, engine=engine, call_ms=call * 1e3))
    for record in records:
        record["call_ms"] = call * 1e3
    return records


def bench_large(engine: str, gram: str | None, rows_per_block: int, distinct: int) -> dict:
    """Peru(Large)-sized cube processed in row blocks of ``rows_per_block`` x 3678 pixels.

    ``make_cube`` takes ~40 s per 128-row block on our 2 cores (two cosines and a normal
    draw per value, in float64), i.e. ~25 minutes for the whole cube, so only ``distinct``
    blocks are generated (different seeds, no planted clearings: their disc painting is
    quadratic in the block size) and the engine cycles through them. The record reports
    the engine time over all blocks, the measured wall time, and the wall time the run
    would take generating every block (``generation_per_block_s`` x blocks + engine).
    """
    from tscube.datasets import make_cube
    from tscube.datasets._cube import PRESETS

    rows, cols = PRESETS["peru_large"]["shape"]
    run = engine_runner(engine, gram)
    t_start = time.perf_counter()
    _, plan = capture_plan(make_cube("peru_large", shape=(2, 2), seed=0), "all")
    blocks = []
    generation = []
    for b in range(distinct):
        t0 = time.perf_counter()
        cube = make_cube("peru_large", shape=(rows_per_block, cols), change_fraction=0.0, seed=1000 + b)
        blocks.append(cube.data.reshape(cube.data.shape[0], -1))
        generation.append(time.perf_counter() - t0)
        del cube
    engine_s = 0.0
    counts = np.zeros(8, dtype=np.int64)
    n_blocks = 0
    for r0 in range(0, rows, rows_per_block):
        values = blocks[n_blocks % distinct][:, : min(rows_per_block, rows - r0) * cols]
        t0 = time.perf_counter()
        out = run(values, plan)
        engine_s += time.perf_counter() - t0
        counts += np.bincount(out["status"].ravel(), minlength=8)[:8]
        n_blocks += 1
        del out
    total_s = time.perf_counter() - t_start
    M = rows * cols
    per_block = float(np.mean(generation))
    record = dict(
        benchmark="bfast_monitor_large", dataset="peru_large", engine=engine, gram=gram, M=M,
        N=int(PRESETS["peru_large"]["n_dates"]), rows_per_block=rows_per_block, blocks=n_blocks,
        distinct_blocks=distinct, threads=_threads(), engine_s=engine_s, wall_s=total_s,
        generation_per_block_s=per_block, end_to_end_all_generated_s=engine_s + per_block * n_blocks,
        pixels_per_s=M / engine_s, peak_rss_gb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
        status_counts=counts.tolist(),
    )
    emit(record)
    return record


def _threads() -> int:
    import numba

    return numba.get_num_threads()


def markdown(records: list[dict]) -> str:
    lines = [
        "| dataset | M | N | n | formulation | engine ms | read-once ms | × read-once | pixels/s | GFLOPs^Sp "
        "| reference ms/pixel | × reference | call ms | first call s |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in records:
        lines.append(
            f"| {r['dataset']} | {r['M']} | {r['N']} | {r['n']} | {r['gram'] or r['engine']} | {r['engine_ms']:.1f} "
            f"| {r['read_once_ms']:.1f} | {r['ratio_read_once']:.1f} | {r['pixels_per_s']:.3g} | {r['gflops_sp']:.1f} "
            f"| {r.get('reference_ms_per_pixel', float('nan')):.2f} | {r.get('speedup_per_pixel', float('nan')):.0f} "
            f"| {r.get('call_ms', float('nan')):.0f} | {r['first_call_s'] if r['first_call_s'] is not None else float('nan'):.2f} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", default=",".join(DATASETS), help="comma-separated presets")
    parser.add_argument("--engine", default="cpu", choices=["cpu", "cuda", "reference"])
    parser.add_argument("--gram", default=None, help="cpu formulations, comma-separated (default: all)")
    parser.add_argument("--repeat", type=int, default=5, help="warm runs per measurement (best is kept)")
    parser.add_argument("--reference-pixels", type=int, default=64, help="pixels for the reference engine (0: skip)")
    parser.add_argument("--history", default="all", help='history selection ("all" as in the paper, "ROC", "BP")')
    parser.add_argument("--large", action="store_true", help="also run the Peru(Large)-sized cube in row blocks")
    parser.add_argument("--large-only", action="store_true", help="only the Peru(Large)-sized run")
    parser.add_argument("--rows-per-block", type=int, default=128, help="rows per block of the large run")
    parser.add_argument("--distinct-blocks", type=int, default=3, help="generated blocks the large run cycles through")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table at the end")
    args = parser.parse_args(argv)

    if args.engine == "cuda":
        try:
            from tscube.bfast.monitor import _cuda

            emit(dict(benchmark="device", **_cuda.device_summary()))
        except Exception as error:  # no GPU, driver or toolkit: say so clearly
            print(f"bfast_monitor benchmark: engine 'cuda' is not available here: {error}", file=sys.stderr)
            return 2
    if args.engine == "cpu":
        from tscube.bfast.monitor._cpu import FORMULATIONS

        grams = args.gram.split(",") if args.gram else list(FORMULATIONS)
    else:
        grams = [None]
    from isa import target  # this folder's

    emit(dict(benchmark="machine", cpus=os.cpu_count(), threads=_threads(), load_average=os.getloadavg(), **target()))
    first_call = first_calls(args.engine, grams)
    emit(dict(benchmark="first_call", engine=args.engine, seconds=first_call))
    records = []
    if not args.large_only:
        for name in args.datasets.split(","):
            records += bench_dataset(name, args.engine, grams, args.repeat, args.reference_pixels, first_call,
                                     args.history)
    if args.large or args.large_only:
        bench_large(args.engine, grams[0], args.rows_per_block, args.distinct_blocks)
    emit(dict(benchmark="machine_after", load_average=os.getloadavg()))
    if args.markdown and records:
        print(markdown(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
