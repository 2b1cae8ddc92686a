"""Benchmark tscube.stl (cpu engine) against statsmodels STL looped over series and
against hastl (the STL paper's package), all in one run.

Shapes follow the STL paper (003, §V): C = NDVI (series x 828, period 24), B = hourly air
quality (132 x 35064, weekly period 168), A = household power (long series, period 1440),
scaled to this machine. Same parameters on both sides, no missing values. The cloudy
case is the NDVI shape with 0 % and 30 % of the values missing at random, both tscube
flavours, statsmodels on linearly filled copies (fill not timed) and hastl's multicore
backend when it imports here or in the interpreter given by ``--hastl-python`` (hastl
is not a tscube dependency: install it in a separate virtualenv). Prints one JSON line
per case, then Markdown tables.

    python benchmarks/stl.py [--quick] [--cases cloudy,C,B,A] [--hastl-python PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

# tscube, numba and statsmodels are imported where used: the hastl worker
# (--hastl-worker) runs in hastl's own virtualenv, which has none of them.


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
    import numba
    from statsmodels.tsa.stl._stl import STL

    from tscube.stl import stl

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


CLOUDY_PARAMS = dict(seasonal=25, trend=39, low_pass=25, seasonal_jump=3, trend_jump=4,
                     low_pass_jump=3, seasonal_deg=1, trend_deg=1, low_pass_deg=1)
# statsmodels' meaning of the iterations; hastl's n_outer counts passes (= outer_iter + 1)
CLOUDY_FITS = {False: dict(inner_iter=2, outer_iter=0), True: dict(inner_iter=2, outer_iter=15)}


def _hastl_worker(path, robust, repeats):
    """Best time of hastl's multicore backend on the (n_series, T) rows saved at ``path``
    (runs in hastl's virtualenv)."""
    from hastl import STL as HaSTL

    rows = np.load(path)
    p = CLOUDY_PARAMS
    fit = HaSTL(backend="multicore")

    def run():
        return fit.fit(rows, 24, p["seasonal"], q_t=p["trend"], q_l=p["low_pass"], d_s=1,
                       d_t=1, d_l=1, jump_s=p["seasonal_jump"], jump_t=p["trend_jump"],
                       jump_l=p["low_pass_jump"], n_inner=2, n_outer=16 if robust else 1)

    seasonal = run()[0]  # warm up
    print(json.dumps(dict(seconds=_best(run, repeats),
                          finite=float(np.isfinite(np.asarray(seasonal)).mean()))))


def _hastl_seconds(rows, robust, repeats, hastl_python):
    """hastl's best time on ``rows``, in this interpreter if hastl imports, else in
    ``hastl_python``; None without hastl."""
    try:
        import hastl  # noqa: F401
        python = sys.executable
    except ImportError:
        python = hastl_python
    if not python:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "rows.npy")
        np.save(path, rows)
        done = subprocess.run([python, __file__, "--hastl-worker", path, "--robust",
                               str(int(robust)), "--repeats", str(repeats)],
                              capture_output=True, text=True, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if result["finite"] < 1.0:
        print(f"hastl: {1 - result['finite']:.1%} non-finite seasonal values", file=sys.stderr)
    return result["seconds"]


def run_cloudy(n_series, n_series_sm, robust, missing, repeats, hastl_python):
    """The NDVI case with a fraction ``missing`` of values missing at random: tscube
    (both flavours), hastl and statsmodels (on linearly filled copies), per series."""
    import numba
    from statsmodels.tsa.stl._stl import STL

    from tscube.stl import stl

    n_times, period = 828, 24
    cube = _cube(n_times, n_series, period, seed=1)
    cube[np.random.default_rng(2).random(cube.shape) < missing] = np.nan
    fit_kw = CLOUDY_FITS[robust]
    row = dict(case="cloudy NDVI", missing=missing, robust=robust, n_times=n_times,
               n_series=n_series, threads=numba.get_num_threads())
    # rounds of tscube (both flavours) and hastl, best of each: the machine's load varies
    best = {}
    rows = np.ascontiguousarray(cube.T)
    for _ in range(repeats):
        for flavor in ("statsmodels", "stlplus"):
            kw = dict(CLOUDY_PARAMS, flavor=flavor, **fit_kw)
            stl(cube[:, :40], period, **kw)  # compile / warm up
            seconds = _best(lambda: stl(cube, period, **kw), 2)  # 2: the first after hastl's process is slow
            best[flavor] = min(best.get(flavor, np.inf), seconds)
        seconds = _hastl_seconds(rows, robust, 1, hastl_python)
        best["hastl"] = None if seconds is None else min(best.get("hastl", np.inf), seconds)
    for flavor in ("statsmodels", "stlplus"):
        row[f"tscube_{flavor}_ms_per_series"] = 1e3 * best[flavor] / n_series
    hastl = best["hastl"]
    row["hastl_ms_per_series"] = None if hastl is None else 1e3 * hastl / n_series
    t = np.arange(n_times)
    filled = [np.interp(t, t[np.isfinite(y)], y[np.isfinite(y)]) for y in cube[:, :n_series_sm].T]

    def loop():
        for y in filled:
            STL(y, period=period, **CLOUDY_PARAMS).fit(**fit_kw)

    row["statsmodels_ms_per_series"] = 1e3 * _best(loop, max(1, repeats - 1)) / n_series_sm
    ours = row["tscube_statsmodels_ms_per_series"]
    if missing == 0:  # same numbers as statsmodels on gap-free series (sanity)
        check = STL(cube[:, 0], period=period, **CLOUDY_PARAMS).fit(**fit_kw)
        ours_trend = stl(cube[:, :1], period, **CLOUDY_PARAMS, **fit_kw).trend[:, 0]
        row["max_abs_trend_diff"] = float(np.abs(ours_trend - check.trend).max())
    for flavor in ("statsmodels", "stlplus"):
        mine = row[f"tscube_{flavor}_ms_per_series"]
        if hastl is not None:
            row[f"{flavor}_x_hastl"] = row["hastl_ms_per_series"] / mine
    row["statsmodels_flavour_x_statsmodels"] = row["statsmodels_ms_per_series"] / ours
    print(json.dumps(row), flush=True)
    return row


def _cloudy_table(rows):
    print()
    print("| NaN | robust | tscube statsmodels flavour ms | tscube stlplus flavour ms "
          "| hastl multicore ms | statsmodels ms (filled) | × hastl (sm / stlplus) "
          "| × statsmodels |")
    print("|---|---|---:|---:|---:|---:|---|---:|")
    for r in rows:
        hastl = r["hastl_ms_per_series"]
        vs_hastl = ("—" if hastl is None else
                    f"{r['statsmodels_x_hastl']:.1f} / {r['stlplus_x_hastl']:.1f}")
        print(f"| {r['missing']:.0%} | {r['robust']} "
              f"| {r['tscube_statsmodels_ms_per_series']:.4f} "
              f"| {r['tscube_stlplus_ms_per_series']:.4f} "
              f"| {'—' if hastl is None else f'{hastl:.4f}'} "
              f"| {r['statsmodels_ms_per_series']:.2f} | {vs_hastl} "
              f"| {r['statsmodels_flavour_x_statsmodels']:.0f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller batches")
    parser.add_argument("--cases", default="cloudy,C,B,A", help="comma-separated cases")
    parser.add_argument("--hastl-python", default=os.environ.get("HASTL_PYTHON"),
                        help="python of a virtualenv with hastl (if it does not import here)")
    parser.add_argument("--hastl-worker", help=argparse.SUPPRESS)
    parser.add_argument("--robust", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--repeats", type=int, default=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.hastl_worker:
        _hastl_worker(args.hastl_worker, bool(args.robust), args.repeats)
        return
    from isa import target  # this folder's

    print(json.dumps(dict(machine=True, cpus=os.cpu_count(), **target())), flush=True)
    q = args.quick
    cases = args.cases.split(",")
    if "cloudy" in cases:
        cloudy = [run_cloudy(512 if q else 4096, 20 if q else 100 // (1 + 4 * robust), robust,
                             missing, 2 if q else 3, args.hastl_python)
                  for missing in (0.0, 0.3) for robust in (False, True)]
        _cloudy_table(cloudy)
    c_params = dict(seasonal=25, trend=39, low_pass=25, seasonal_jump=3, trend_jump=4,
                    low_pass_jump=3)
    b_params = dict(seasonal=49, trend=261, low_pass=169, seasonal_jump=5, trend_jump=27,
                    low_pass_jump=17)
    a_params = dict(seasonal=359, trend=2169, low_pass=1441, seasonal_jump=36, trend_jump=217,
                    low_pass_jump=145)
    rows = []
    if "C" in cases:
        rows += [run_case("C-like NDVI", 828, 2000 if q else 20000, 100 if q else 300, 24,
                          c_params, False, 3),
                 run_case("C-like NDVI", 828, 500 if q else 4000, 20 if q else 50, 24, c_params,
                          True, 3)]
    if "B" in cases:
        rows.append(run_case("B-like air quality", 35064, 8 if q else 132, 2 if q else 6, 168,
                             b_params, False, 2))
    if "A" in cases:
        rows.append(run_case("A-like power", 1 << 19, 2 if q else 4, 1, 1440, a_params, False,
                             2))
    if not rows:
        return
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
