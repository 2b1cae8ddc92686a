"""Benchmark of classic BFAST (``tscube.bfast_classic``) against R's ``bfast()`` and
against BFAST Lite on the same cube.

Prints one JSON line per measurement, then a Markdown table (``--markdown``).

* ``r_series``: each series of R's fixtures (``../shared/fixtures/r_bfast``: bfast's
  harvest, simts, som pixels and synthetic series at f = 12..36, 96-400 dates) under the
  default settings (h 0.15, dummy seasons, max.iter 10, BIC, level 0.05, OLS-MOSUM),
  copied into a cube of ``--pixels`` identical pixels, so that every pixel does the
  work R timed for that series (the same iterations, breaks and intervals; the test
  suite checks they are R's): µs per pixel on one thread and on all threads, and
  ``vs_r_per_core`` = R's seconds for the call (``elapsed_s``, one core, measured on
  another machine: indicative) / tscube's seconds per pixel on one thread.
* ``modis``: a 275-date 16-day NDVI cube (planted trend steps and seasonal changes,
  0 % and 30 % missing) per seasonal model: µs per pixel, iterations, and BFAST Lite
  (default: trend + harmonics, LWZ) on the same cube in the same run.
* ``start``: the part of a default call that is the periodic STL start
  (``tscube.stl`` with R's windows), and the part that reads the cube once.

Usage::

    python benchmarks/bfast_classic.py [--pixels 1024] [--repeat 3] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path

import numba
import numpy as np

import tscube
from bfast_monitor import best_of  # this folder's
from isa import target  # this folder's
from tscube.bfast.classic.start import r_stl_windows

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "r_bfast"
DEFAULT = dict(h=0.15, season="dummy", max_iter=10, breaks="NULL", level=0.05, type="OLS-MOSUM")


def r_cases() -> tuple[list[dict], dict]:
    """The fixtures' default-setting cases and their series ``name -> (values, times, freq)``."""
    sys.path.insert(0, str(FIXTURES.parents[1]))
    from test_bfast_classic import classic_cases, classic_series  # the tests' loaders

    cases = [c for c in classic_cases() if all(c[key] == value for key, value in DEFAULT.items())]
    return cases, classic_series()


def timed(run, repeat: int) -> tuple[float, float]:
    """Best wall seconds of ``run`` on all threads and on one."""
    threads = numba.get_num_threads()
    run()
    all_threads = best_of(run, repeat)
    numba.set_num_threads(1)
    try:
        one = best_of(run, repeat)
    finally:
        numba.set_num_threads(threads)
    return all_threads, one


def bench_r_series(n_pixels: int, repeat: int) -> list[dict]:
    cases, series = r_cases()
    rows = []
    for case in cases:
        values, times, freq = series[case["series"]]
        cube = np.repeat(values[:, None], n_pixels, axis=1)
        run = lambda: tscube.bfast_classic(cube, times, freq=freq)  # noqa: E731
        result = run()
        assert int(result.n_iter[0]) == case["n_iter"]  # the work R timed
        all_threads, one = timed(run, repeat)
        rows.append(dict(
            bench="r_series", series=case["series"], dates=values.size, freq=freq, n_iter=case["n_iter"],
            pixels=n_pixels, threads=numba.get_num_threads(), us_per_pixel=1e6 * all_threads / n_pixels,
            us_per_pixel_1thread=1e6 * one / n_pixels, r_s_per_pixel=case["elapsed_s"],
            vs_r_per_core=case["elapsed_s"] / (one / n_pixels),
        ))
    return rows


def planted(n_pixels: int, missing: float, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    """275 16-day dates: trend, three harmonics, noise 0.03; per pixel a trend step of
    0.1-0.3 and, in half the pixels, a doubled seasonal amplitude from a random date."""
    rng = np.random.default_rng(seed)
    T, freq = 275, 23
    t = 2000 + np.arange(T) / freq
    phase = 2 * np.pi * (t - np.floor(t))
    steps = rng.integers(T // 4, 3 * T // 4, n_pixels)
    amp_at = np.where(rng.random(n_pixels) < 0.5, rng.integers(T // 4, 3 * T // 4, n_pixels), T)
    idx = np.arange(T)[:, None]
    data = (0.5 + 0.005 * (t[:, None] - 2000) - rng.uniform(0.1, 0.3, n_pixels) * (idx > steps)
            + np.where(idx > amp_at, 0.3, 0.15) * np.sin(phase)[:, None] + 0.03 * np.cos(2 * phase)[:, None]
            + rng.normal(0, 0.03, (T, n_pixels)))
    data[rng.random(data.shape) < missing] = np.nan
    return data, t


def bench_modis(n_pixels: int, repeat: int) -> list[dict]:
    rows = []
    for missing in (0.0, 0.3):
        data, t = planted(n_pixels, missing)
        lite_all, lite_one = timed(lambda: tscube.bfast_lite(data, t, freq=23), repeat)
        for season in ("dummy", "harmonic", "none"):
            run = lambda: tscube.bfast_classic(data, t, freq=23, season=season)  # noqa: E731
            result = run()
            all_threads, one = timed(run, repeat)
            rows.append(dict(
                bench="modis", season=season, missing=missing, pixels=n_pixels, dates=t.size,
                threads=numba.get_num_threads(), mean_iterations=float(result.n_iter.mean()),
                trend_breaks_per_pixel=float(result.n_trend_breaks.mean()), statuses=result.status_counts(),
                us_per_pixel=1e6 * all_threads / n_pixels, us_per_pixel_1thread=1e6 * one / n_pixels,
                lite_us_per_pixel=1e6 * lite_all / n_pixels, lite_us_per_pixel_1thread=1e6 * lite_one / n_pixels,
                ratio_to_lite_1thread=one / lite_one,
            ))
    return rows


def bench_start(n_pixels: int, repeat: int) -> dict:
    data, t = planted(n_pixels, 0.0)
    stl_all, stl_one = timed(lambda: tscube.stl(data, 23, **r_stl_windows(t.size, 23)), repeat)
    read_all, _ = timed(lambda: np.isfinite(data).sum(axis=0), repeat)
    classic_all, classic_one = timed(lambda: tscube.bfast_classic(data, t, freq=23), repeat)
    return dict(bench="start", pixels=n_pixels, stl_us_per_pixel_1thread=1e6 * stl_one / n_pixels,
                stl_share_1thread=stl_one / classic_one, read_once_us_per_pixel=1e6 * read_all / n_pixels,
                classic_over_read_once=classic_all / read_all)


def markdown(rows: list[dict]) -> str:
    lines = ["| series | dates, f | iterations | µs/pixel, 1 thread | R s/pixel | R / tscube per core | µs/pixel, all threads |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["bench"] == "r_series":
            lines.append(f"| {r['series']} | {r['dates']}, {r['freq']} | {r['n_iter']} | {r['us_per_pixel_1thread']:.0f} "
                         f"| {r['r_s_per_pixel']:.3f} | {r['vs_r_per_core']:.0f}× | {r['us_per_pixel']:.0f} |")
    lines += ["", "| season | missing | iterations | µs/pixel, 1 thread | all threads | BFAST Lite µs/pixel, 1 thread | classic / Lite |",
              "|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["bench"] == "modis":
            lines.append(f"| {r['season']} | {r['missing']:.0%} | {r['mean_iterations']:.2f} | {r['us_per_pixel_1thread']:.0f} "
                         f"| {r['us_per_pixel']:.0f} | {r['lite_us_per_pixel_1thread']:.0f} | {r['ratio_to_lite_1thread']:.1f} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pixels", type=int, default=1024, help="pixels per cube")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    print(json.dumps(dict(bench="machine", cpus=os.cpu_count(), threads=numba.get_num_threads(),
                          processor=platform.processor() or platform.machine(), **target(),
                          load_average=os.getloadavg())), flush=True)
    rows = bench_r_series(args.pixels, args.repeat)
    rows += bench_modis(args.pixels, args.repeat)
    rows.append(bench_start(args.pixels, args.repeat))
    for row in rows:
        print(json.dumps(row), flush=True)
    if args.markdown:
        print(markdown(rows))


if __name__ == "__main__":
    sys.exit(main())
