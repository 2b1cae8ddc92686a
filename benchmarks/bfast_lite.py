"""Benchmark of BFAST Lite (``tscube.bfast_lite``): per pixel against R's ``bfastlite``,
per pixel-date against ``bfast_monitor(history="all")``, and breaks found against planted.

Prints one JSON line per measurement, then a Markdown table (``--markdown``).

* ``modis``: the 275-date MODIS setting of R's performance anchor
  (``../shared/fixtures/r_bfastlite/README.md``: R's seconds per pixel on one core,
  measured on another machine, so the ratio is indicative): a synthetic 16-day NDVI cube
  of 275 dates without gaps and with 20 % missing (``--pixels`` pixels; the two slow
  settings on an eighth of them), for each setting of the anchor table,
  on one thread (``us_per_pixel_1thread``, ``vs_r_per_core`` = R / tscube) and on all
  threads (``us_per_pixel``).
* ``D2``, ``peru_small``: the BFAST Monitor benchmark cubes (first ``--pixels`` pixels):
  ``ns_per_pixel_date`` of BFAST Lite next to ``bfast_monitor(history="all")`` in the
  same run (``ratio_to_monitor``).
* ``detection``: cubes with 0-3 planted level shifts (0.1-0.3 NDVI, noise 0.02, 30 %
  missing): planted breaks found, spurious ones, and the median date error in valid
  observations.
* ``triangle_gflops`` (per ``modis`` setting): the segment RSS triangle's rank-one
  updates of ``(X'X)^{-1}`` per pixel (``updates_per_pixel``, counted from each pixel's
  ``n`` and ``h``), at ``4 k^2`` flops each (``P x`` and the update of ``P``), over the
  whole one-thread time per pixel: a lower bound of the triangle's own rate, against
  ``fma_roof_gflops`` (:func:`isa.fma_roof`, one thread); only for the cubes with random
  gaps, where each pixel computes its own triangle (none with the pre-test).
* ``lanes``: the kernel of those updates alone (eight regressors, 32 segment starts as
  SIMD lanes over 250 rows, one thread): ns per start and row, GFLOP/s, share of the roof.

Usage::

    python benchmarks/bfast_lite.py [--pixels 2048] [--repeat 3] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numba
import numpy as np

import tscube
from bfast_monitor import best_of  # this folder's
from isa import fma_roof, target  # this folder's
from tscube.datasets import make_cube

#: R bfastlite seconds per pixel on one core (no gaps, 20 % missing), from the fixtures'
#: README: setting -> (kwargs, seconds without gaps, seconds with 20 % missing, divisor of
#: the cube's pixels timed: the slow settings on an eighth of them).
R_ANCHOR = {
    "default (trend+harmon, order 3, h 0.15, LWZ)": (dict(), 0.055, 0.035, 1),
    "BIC": (dict(breaks="BIC"), 0.056, 0.035, 1),
    "h 0.25": (dict(h=0.25), 0.043, 0.026, 1),
    "h 12 observations": (dict(h=12), 0.121, 0.077, 8),
    "order 1": (dict(order=1), 0.023, 0.019, 1),
    "trend + season": (dict(order=0, season=True), 0.202, 0.420, 8),
    "pre-test, level 0.05": (dict(level=0.05), 0.056, 0.037, 1),
}


def triangle_updates(n: int, h: int, k: int) -> int:
    """Rank-one updates of the RSS triangle of a pixel of ``n`` observations and minimum
    segment ``h`` (``bai_perron_cpu.optimal_partitions``): from the sums (``h > k``; the
    starts whose first rows are rank deficient or ill-conditioned are not told apart)
    the last segments backwards, the first start, and each later start to row ``n - h``;
    else R's recursion from ``k`` rows for every start, to the end."""
    starts = [0] + list(range(h, n - h + 1))
    if h > k:
        return (n - h) + sum(max(n - 2 * h - i, 0) for i in starts)
    return sum(n - i - k for i in starts)


def regressors(kwargs: dict) -> int:
    """k of the model of a ``modis`` setting (freq 23)."""
    if kwargs.get("season"):
        return 2 + 22
    return 2 + 2 * kwargs.get("order", 3)


def bench_modis(n_pixels: int, repeat: int, roof: float) -> list[dict]:
    cube = make_cube("demo", shape=(1, n_pixels), n_dates=275, n_history=150, nan_fraction=0.0, seed=4)
    rows = []
    threads = numba.get_num_threads()
    for missing in (0.0, 0.2):
        data = cube.data.copy()
        data[np.random.default_rng(1).random(data.shape) < missing] = np.nan
        for setting, (kwargs, r_gap_free, r_missing, divisor) in R_ANCHOR.items():
            n_timed = max(1, n_pixels // divisor)
            part = data[..., :n_timed]
            run = lambda: tscube.bfast_lite(part, cube.dates, freq=23, **kwargs)  # noqa: E731
            run()
            all_threads = best_of(run, repeat)
            numba.set_num_threads(1)
            try:
                one = best_of(run, repeat)
            finally:
                numba.set_num_threads(threads)
            r_seconds = r_missing if missing else r_gap_free
            k = regressors(kwargs)
            counts = np.isfinite(part.reshape(part.shape[0], -1)).sum(axis=0)
            h = kwargs.get("h", 0.15)
            updates = np.mean([triangle_updates(int(n), int(np.floor(n * h)) if h < 1 else int(h), k) for n in counts])
            # only where every pixel computes its own triangle: gap-free pixels replay a shared
            # one at O(k) per update, and the pre-test skips most pixels' triangles
            own = missing > 0 and not kwargs.get("level")
            gflops = updates * 4 * k * k / (one / n_timed) / 1e9 if own else None
            rows.append(dict(
                bench="modis", setting=setting, missing=missing, pixels=n_timed, threads=threads,
                us_per_pixel=1e6 * all_threads / n_timed, us_per_pixel_1thread=1e6 * one / n_timed,
                r_s_per_pixel=r_seconds, vs_r_per_core=r_seconds / (one / n_timed),
                updates_per_pixel=updates, triangle_gflops=gflops, fma_roof_gflops=roof,
                of_roof=gflops / roof if own else None,
            ))
    return rows


def bench_lanes(roof: float, repeat: int) -> dict:
    """The lane kernel of the triangle's updates alone: 32 starts side by side over 250
    rows of eight regressors, one thread."""
    from tscube.bfast.core.start_lanes_8_cpu import update_lanes_8
    from tscube.bfast.core.start_lanes_cpu import LANES, W_ROWS

    n_rows, k = 250, 8
    rng = np.random.default_rng(0)
    X, y, U = rng.normal(size=(n_rows, k)), rng.normal(size=n_rows), rng.normal(size=(n_rows + 1, k))
    rows = np.arange(n_rows)
    W = np.zeros(W_ROWS * LANES)
    for a in range(k):  # P = I / 100 in every lane (its triangle's diagonal)
        W[(a * (a + 1) // 2 + a) * LANES:(a * (a + 1) // 2 + a + 1) * LANES] = 0.01
    first_row = np.zeros(LANES, dtype=np.int64)
    seg, steps, offsets = np.empty((n_rows + 1, LANES)), np.empty((1, k + 1)), np.zeros(LANES, dtype=np.int64)
    run = lambda: update_lanes_8(X, rows, y, 0.0, U, W, first_row, LANES, 0, n_rows, seg, steps, offsets, False)  # noqa: E731
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        run()
        seconds = best_of(run, max(repeat, 5))
    finally:
        numba.set_num_threads(threads)
    per_update = seconds / (n_rows * LANES)
    gflops = 4 * k * k / per_update / 1e9
    return dict(bench="lanes", k=k, lanes=LANES, rows=n_rows, ns_per_update=1e9 * per_update, gflops=gflops,
                fma_roof_gflops=roof, of_roof=gflops / roof)


def bench_against_monitor(name: str, n_pixels: int, repeat: int) -> dict:
    cube = make_cube(name, seed=0)
    data = cube.data.reshape(cube.data.shape[0], -1)[:, :n_pixels]
    lite = lambda: tscube.bfast_lite(data, cube.dates, freq=23)  # noqa: E731
    monitor = lambda: tscube.bfast_monitor(data, cube.dates, cube.start, freq=23, history="all")  # noqa: E731
    lite(), monitor()
    t_lite, t_monitor = best_of(lite, repeat), best_of(monitor, repeat)
    values = data.size
    return dict(bench=name, pixels=data.shape[1], dates=data.shape[0], missing=float(np.isnan(data).mean()),
                ns_per_pixel_date=1e9 * t_lite / values, monitor_all_ns_per_pixel_date=1e9 * t_monitor / values,
                ratio_to_monitor=t_lite / t_monitor)


def bench_detection(n_pixels: int, seed: int = 11) -> dict:
    """Planted level shifts (0-3 per pixel): how many BFAST Lite finds, and how well dated."""
    rng = np.random.default_rng(seed)
    n_dates, freq = 230, 23
    t = 2000 + np.arange(n_dates) / freq
    data = np.empty((n_dates, n_pixels))
    planted = []
    for p in range(n_pixels):
        y = 0.5 + 0.1 * np.sin(2 * np.pi * t + rng.uniform(0, 6)) + 0.002 * rng.normal() * np.arange(n_dates)
        n_b = rng.integers(0, 4)
        where = np.sort(rng.choice(np.arange(46, 184, 46), n_b, replace=False)) if n_b else np.array([], int)
        for b in where:
            y[b:] += rng.choice([-1, 1]) * rng.uniform(0.1, 0.3)
        data[:, p] = y + rng.normal(0, 0.02, n_dates)
        planted.append(where)
    data[rng.random(data.shape) < 0.3] = np.nan
    result = tscube.bfast_lite(data, t, freq=freq)
    found = missed = spurious = 0
    errors = []
    for p, where in enumerate(planted):
        valid = np.flatnonzero(np.isfinite(data[:, p]))
        got = np.searchsorted(valid, result.break_index[: result.n_breaks[p], p], side="right")
        truth = np.searchsorted(valid, where)
        for b in truth:
            d = np.abs(got - b) if got.size else np.array([np.inf])
            if d.min() <= 5:
                found += 1
                errors.append(int(d.min()))
            else:
                missed += 1
        spurious += int(sum(np.min(np.abs(truth - g)) > 5 if truth.size else True for g in got))
    return dict(bench="detection", pixels=n_pixels, planted=found + missed, found=found, missed=missed,
                spurious=spurious, median_error_obs=float(np.median(errors)) if errors else None,
                within_1_obs=float(np.mean(np.array(errors) <= 1)) if errors else None)


def markdown(rows: list[dict]) -> str:
    lines = ["| setting | missing | µs/pixel, 1 thread | R s/pixel (anchor) | R / tscube per core | µs/pixel, all threads "
             "| triangle GFLOP/s (whole pixel) | of FMA roof |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["bench"] == "modis":
            lines.append(f"| {r['setting']} | {r['missing']:.0%} | {r['us_per_pixel_1thread']:.0f} | "
                         f"{r['r_s_per_pixel']} | {r['vs_r_per_core']:.0f}× | {r['us_per_pixel']:.0f} | "
                         + (f"{r['triangle_gflops']:.1f} | {r['of_roof']:.0%} |" if r["triangle_gflops"] else "– | – |"))
    for r in rows:
        if r["bench"] == "lanes":
            lines += ["", f"Lane kernel alone ({r['lanes']} starts × {r['rows']} rows, k = {r['k']}, one thread): "
                          f"{r['ns_per_update']:.2f} ns per update, {r['gflops']:.1f} GFLOP/s, "
                          f"{r['of_roof']:.0%} of the FMA roof ({r['fma_roof_gflops']:.1f} GFLOP/s)."]
    lines += ["", "| cube | pixels × dates | missing | BFAST Lite ns/pixel-date | monitor(all) ns/pixel-date | ratio |",
              "|---|---|---|---|---|---|"]
    for r in rows:
        if r["bench"] in ("D2", "peru_small"):
            lines.append(f"| {r['bench']} | {r['pixels']} × {r['dates']} | {r['missing']:.0%} | "
                         f"{r['ns_per_pixel_date']:.0f} | {r['monitor_all_ns_per_pixel_date']:.1f} | "
                         f"{r['ratio_to_monitor']:.0f}× |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pixels", type=int, default=2048, help="pixels per cube")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--modis-only", action="store_true", help="only the MODIS settings (and the lane kernel)")
    args = parser.parse_args(argv)
    roof = fma_roof()
    print(json.dumps(dict(bench="machine", cpus=os.cpu_count(), threads=numba.get_num_threads(), **target(),
                          fma_roof_gflops_1thread=roof)), flush=True)
    rows = [bench_lanes(roof, args.repeat)]
    rows += bench_modis(args.pixels, args.repeat, roof)
    if not args.modis_only:
        rows += [bench_against_monitor(name, args.pixels, args.repeat) for name in ("D2", "peru_small")]
        rows.append(bench_detection(400))
    for row in rows:
        print(json.dumps(row), flush=True)
    if args.markdown:
        print(markdown(rows))


if __name__ == "__main__":
    sys.exit(main())
