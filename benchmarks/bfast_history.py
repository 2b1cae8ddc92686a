"""Cost of stable-history selection in BFAST Monitor: ROC and BP vs history="all".

For the D1–D6 and Peru(Small)-shaped cubes of the BFAST GPU paper (``make_cube`` presets),
times ``bfast_monitor(..., history=H)`` for H in all / ROC / BP with one engine, best of
``--repeat`` warm runs taken in interleaved rounds, and prints one JSON line per (dataset,
history) with the ratio to ``history="all"`` measured in the same run, plus the reference
engine's per-pixel time on a pixel subset (and the engine's speed-up over it).

    python benchmarks/bfast_history.py [--datasets D1,D2,D3,D4,D5,D6,peru_small] [--engine cpu] [--repeat 3]
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
from tscube.datasets import make_cube


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="D1,D2,D3,D4,D5,D6,peru_small")
    parser.add_argument("--engine", default="cpu")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--reference-pixels", type=int, default=32, help="0: do not time the reference engine")
    args = parser.parse_args()
    machine = dict(cores=os.cpu_count(), processor=platform.processor() or platform.machine(),
                   load=os.getloadavg()[0], **target())
    histories = ("all", "ROC", "BP")
    for name in args.datasets.split(","):
        cube = make_cube(name, seed=1)
        n_pixels = cube.data[0].size
        runs = {history: (lambda history=history: tscube.bfast_monitor(
            cube.data, cube.dates, cube.start, freq=23, history=history, engine=args.engine)) for history in histories}
        first_call = {history: best_time(run, 1) for history, run in runs.items()}
        # interleaved rounds (all, ROC, BP, all, ...): a slow spell of a shared machine
        # falls on every history alike, not on one of them
        best = {history: float("inf") for history in histories}
        for _ in range(args.repeat):
            for history, run in runs.items():
                best[history] = min(best[history], best_time(run, 1))
        subset = np.ascontiguousarray(cube.data.reshape(cube.data.shape[0], -1)[:, : args.reference_pixels])
        for history in histories:
            seconds = best[history]
            per_pixel_reference = None  # --reference-pixels 0: the reference engine is not timed
            if subset.shape[1]:
                reference = best_time(lambda: tscube.bfast_monitor(subset, cube.dates, cube.start, freq=23,
                                                                   history=history, engine="reference"), 1)
                per_pixel_reference = reference / subset.shape[1]
            result = runs[history]()
            print(json.dumps(dict(
                benchmark="bfast_history", dataset=name, history=history, engine=args.engine,
                pixels=n_pixels, dates=cube.data.shape[0], seconds=round(seconds, 4),
                first_call_seconds=round(first_call[history], 4), pixels_per_second=round(n_pixels / seconds),
                ratio_to_all=round(seconds / best["all"], 2),
                reference_ms_per_pixel=per_pixel_reference and round(per_pixel_reference * 1e3, 3),
                speedup_vs_reference=per_pixel_reference and round(per_pixel_reference * n_pixels / seconds, 1),
                mean_history_fraction=round(float(np.mean(result.n_history)) / max(float(np.mean(result.n_valid)), 1), 3),
                **machine,
            )), flush=True)


if __name__ == "__main__":
    main()
