"""Cost of stable-history selection in BFAST Monitor: ROC and BP vs history="all".

For the D1–D6 and Peru(Small)-shaped cubes of the BFAST GPU paper (``make_cube`` presets),
times ``bfast_monitor(..., history=H)`` for H in all / ROC / BP with one engine, best of
``--repeat`` warm runs taken in interleaved rounds, and prints one JSON line per (dataset,
history) with the ratio to ``history="all"`` measured in the same run, plus the reference
engine's per-pixel time on a pixel subset (and the engine's speed-up over it).

``other_<preset>`` (e.g. ``other_D2``) is a cube of the preset's shape from a generator
independent of ``make_cube`` (:func:`other_cube`): disturbed histories that ROC has to
trim, seasonal clouds in runs, AR(1) noise, cloud-edge outliers and planted steps in the
monitoring period, so that a speed claim does not rest on one generator's pixels.

    python benchmarks/bfast_history.py [--datasets D1,D2,D3,D4,D5,D6,peru_small,other_D2] [--engine cpu]
        [--histories all,ROC,BP] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform

import numpy as np

import tscube
from bfast_monitor import best_of as best_time  # benchmarks/bfast_monitor.py, same folder
from isa import target  # this folder's
from tscube.datasets import PRESETS, composite_dates, make_cube


def other_cube(preset: str, seed: int = 1):
    """A cube of ``preset``'s shape, NaN fraction and history length, generated without
    ``make_cube``: per pixel a level, trend and two harmonics, AR(1) noise (phi 0.6), a
    step or a trend change in the history for 40 % of the pixels (at a random date of its
    second half: the stable history ROC must find is shorter than the history), a
    negative step in the monitoring period for 30 %, clouds that come in runs and more
    often in one season (mean NaN fraction the preset's), and 2 % low outliers (cloud
    edges that pass the mask). Returns ``(data (T, rows, cols) float32, dates, start)``."""
    spec = PRESETS[preset]
    rows, cols = spec["shape"]
    T, n_history, nan_fraction = spec["n_dates"], spec["n_history"], spec["nan_fraction"]
    n = rows * cols
    rng = np.random.default_rng(seed)
    dates = composite_dates(T, first_year=2003)
    t = np.arange(T) / 23.0
    x = (0.3 + 0.5 * rng.random(n) + np.outer(t, rng.normal(0.0, 0.004, n))
         + rng.uniform(0.05, 0.2, n) * np.sin(2 * np.pi * t[:, None] + rng.uniform(0, 2 * np.pi, n))
         + rng.uniform(0.0, 0.05, n) * np.cos(4 * np.pi * t[:, None] + rng.uniform(0, 2 * np.pi, n)))
    noise = np.empty((T, n))
    noise[0] = rng.normal(0.0, 0.02, n)
    for i in range(1, T):
        noise[i] = 0.6 * noise[i - 1] + rng.normal(0.0, 0.016, n)
    x += noise
    disturbed = rng.random(n) < 0.4
    at = rng.integers(n_history // 2, n_history - 10, n)
    after = np.arange(T)[:, None] >= at
    kind = rng.random(n) < 0.5  # a step, or a change of trend
    x += np.where(disturbed & kind, rng.uniform(-0.3, 0.2, n), 0.0) * after
    x += (np.where(disturbed & ~kind, rng.normal(0.0, 0.01, n), 0.0) * after
          * (t[:, None] - t[np.minimum(at, T - 1)]))
    changed = rng.random(n) < 0.3
    step_at = rng.integers(n_history, n_history + max(1, 3 * (T - n_history) // 4), n)
    x += np.where(changed, rng.uniform(-0.4, -0.1, n), 0.0) * (np.arange(T)[:, None] >= step_at)
    # clouds: a two-state Markov chain per pixel (a cloudy date stays cloudy with odds 1/2,
    # a clear one turns cloudy with odds raised in one season), then independent drops up
    # to the preset's mean cloud fraction
    season = 1.0 + 0.8 * np.sin(2 * np.pi * t)
    p_on = np.clip(0.5 * nan_fraction / max(1.0 - nan_fraction, 0.05) * season, 0.0, 0.95)
    cloudy = np.zeros((T, n), dtype=bool)
    state = rng.random(n) < nan_fraction
    for i in range(T):
        state = rng.random(n) < np.where(state, 0.5, p_on[i])
        cloudy[i] = state
    # top up to the preset's fraction (the chain stays below it: its odds are concave in p_on)
    extra = nan_fraction - cloudy.mean()
    if extra > 0:
        cloudy |= rng.random((T, n)) < extra / (1.0 - cloudy.mean())
    x[(rng.random((T, n)) < 0.02) & ~cloudy] -= 0.3
    x[cloudy] = np.nan
    return x.reshape(T, rows, cols).astype(np.float32), dates, dates[n_history]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="D1,D2,D3,D4,D5,D6,peru_small")
    parser.add_argument("--engine", default="cpu")
    parser.add_argument("--histories", default="all,ROC,BP", help="comma-separated; all is always timed")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--reference-pixels", type=int, default=32, help="0: do not time the reference engine")
    args = parser.parse_args()
    machine = dict(cores=os.cpu_count(), processor=platform.processor() or platform.machine(),
                   load=os.getloadavg()[0], **target())
    histories = ("all", *(h for h in args.histories.split(",") if h != "all"))
    for name in args.datasets.split(","):
        if name.startswith("other_"):
            data, dates, start = other_cube(name[len("other_"):], seed=1)
        else:
            cube = make_cube(name, seed=1)
            data, dates, start = cube.data, cube.dates, cube.start
        n_pixels = data[0].size
        runs = {history: (lambda history=history: tscube.bfast_monitor(
            data, dates, start, freq=23, history=history, engine=args.engine)) for history in histories}
        first_call = {history: best_time(run, 1) for history, run in runs.items()}
        # interleaved rounds (all, ROC, BP, all, ...): a slow spell of a shared machine
        # falls on every history alike, not on one of them
        best = {history: float("inf") for history in histories}
        for _ in range(args.repeat):
            for history, run in runs.items():
                best[history] = min(best[history], best_time(run, 1))
        subset = np.ascontiguousarray(data.reshape(data.shape[0], -1)[:, : args.reference_pixels])
        for history in histories:
            seconds = best[history]
            per_pixel_reference = None  # --reference-pixels 0: the reference engine is not timed
            if subset.shape[1]:
                reference = best_time(lambda: tscube.bfast_monitor(subset, dates, start, freq=23,
                                                                   history=history, engine="reference"), 1)
                per_pixel_reference = reference / subset.shape[1]
            result = runs[history]()
            print(json.dumps(dict(
                benchmark="bfast_history", dataset=name, history=history, engine=args.engine,
                pixels=n_pixels, dates=data.shape[0], seconds=round(seconds, 4),
                first_call_seconds=round(first_call[history], 4), pixels_per_second=round(n_pixels / seconds),
                ratio_to_all=round(seconds / best["all"], 2),
                reference_ms_per_pixel=per_pixel_reference and round(per_pixel_reference * 1e3, 3),
                speedup_vs_reference=per_pixel_reference and round(per_pixel_reference * n_pixels / seconds, 1),
                mean_history_fraction=round(float(np.mean(result.n_history)) / max(float(np.mean(result.n_valid)), 1), 3),
                **machine,
            )), flush=True)


if __name__ == "__main__":
    main()
