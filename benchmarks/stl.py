"""Benchmark tscube.stl (cpu engine) against statsmodels STL looped over series.

Shapes follow the STL paper (003, §V): C = NDVI (series x 828, period 24), B = hourly air
quality (132 x 35064, weekly period 168), A = household power (long series, period 1440),
scaled to this machine. Same parameters on both sides, no missing values. Prints one JSON
line per case, then a Markdown table.

    python benchmarks/stl.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import time

import numba
import numpy as np
from statsmodels.tsa.stl._stl import STL

from tscube.stl import stl


def _cube(n_times, n_series, period, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(n_times)[:, None]
    return (0.5 + 1e-4 * t + 0.3 * np.sin(2 * np.pi * t / period + rng.uniform(0, 6, n_series))
            + 0.05 * rng.standard_normal((n_times, n_series)))


def _best(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def run_case(name, n_times, n_series, n_series_sm, period, params, robust, repeats):
    cube = _cube(n_times, n_series, period)
    fit_kw = dict(inner_iter=2, outer_iter=15) if robust else dict(inner_iter=5, outer_iter=0)
    stl(cube[:, :2], period, **params, **fit_kw)  # compile / warm up
    ours = _best(lambda: stl(cube, period, **params, **fit_kw), repeats)

    def loop():
        for s in range(n_series_sm):
            STL(cube[:, s], period=period, **params).fit(**fit_kw)

    theirs = _best(loop, max(1, repeats - 1))
    # same numbers on both sides (sanity)
    check = STL(cube[:, 0], period=period, **params).fit(**fit_kw)
    diff = float(np.abs(stl(cube[:, :1], period, **params, **fit_kw).trend[:, 0]
                        - check.trend).max())
    row = dict(case=name, robust=robust, n_times=n_times, n_series=n_series,
               threads=numba.get_num_threads(),
               tscube_series_per_s=n_series / ours, tscube_ms_per_series=1e3 * ours / n_series,
               statsmodels_series_per_s=n_series_sm / theirs,
               statsmodels_ms_per_series=1e3 * theirs / n_series_sm,
               speedup=(theirs / n_series_sm) / (ours / n_series), max_abs_trend_diff=diff)
    print(json.dumps(row), flush=True)
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller batches")
    args = parser.parse_args()
    q = args.quick
    c_params = dict(seasonal=25, trend=39, low_pass=25, seasonal_jump=3, trend_jump=4,
                    low_pass_jump=3)
    b_params = dict(seasonal=49, trend=261, low_pass=169, seasonal_jump=5, trend_jump=27,
                    low_pass_jump=17)
    a_params = dict(seasonal=359, trend=2169, low_pass=1441, seasonal_jump=36, trend_jump=217,
                    low_pass_jump=145)
    rows = [
        run_case("C-like NDVI", 828, 2000 if q else 20000, 100 if q else 300, 24, c_params,
                 False, 3),
        run_case("C-like NDVI", 828, 500 if q else 4000, 20 if q else 50, 24, c_params, True, 3),
        run_case("B-like air quality", 35064, 8 if q else 132, 2 if q else 6, 168, b_params,
                 False, 2),
        run_case("A-like power", 1 << 19, 2 if q else 4, 1, 1440, a_params, False, 2),
    ]
    print()
    print("| case | robust | T | series | tscube series/s | tscube ms/series "
          "| statsmodels ms/series | speed-up |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['case']} | {r['robust']} | {r['n_times']} | {r['n_series']} "
              f"| {r['tscube_series_per_s']:.0f} | {r['tscube_ms_per_series']:.3f} "
              f"| {r['statsmodels_ms_per_series']:.2f} | {r['speedup']:.0f}x |")


if __name__ == "__main__":
    main()
