"""Simulated OLS-MOSUM critical values (tscube.bfast.monitor.critval): cost and accuracy.

Prints one JSON line per measurement, then a Markdown table (``--markdown``):

* ``simulate``: seconds to simulate one new ``(h, end)`` (``--paths`` paths, the default
  of ``config.CRITVAL_PATHS``), for a few points R's table does not have, and the critical
  values at levels 0.05 / 0.01 / 0.001 from that one sample (every level of an ``(h, end)``
  comes from one simulation, cached on disk);
* ``table``: the simulation at strucchange's 750 tabled points (all three ``h`` and five
  ``end`` from the same paths, as strucchange built its table), against the table: the
  differences in units of the simulation's Monte Carlo standard error (rms, max) and
  relative (max for levels >= 0.01, max overall), and the seconds it took.

Usage::

    python benchmarks/critval.py [--paths 100000] [--seed 20241124] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from tscube import config
from tscube.bfast.monitor.critval import (SUPPORTED_END, SUPPORTED_H, _table, quantile_standard_error,
                                  simulate_mosum_statistic)

NEW_POINTS = ((0.3, 10), (0.15, 6), (0.75, 3), (0.25, 20))
LEVELS = (0.05, 0.01, 0.001)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--paths", type=int, default=config.CRITVAL_PATHS)
    parser.add_argument("--seed", type=int, default=config.CRITVAL_SEED)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    simulate_mosum_statistic(0.25, 2, 500, args.seed)  # compile (or load the cache) first

    rows = []
    for h, end in NEW_POINTS:
        began = time.perf_counter()
        sample = simulate_mosum_statistic(h, end, args.paths, args.seed)
        seconds = time.perf_counter() - began
        values = {f"critval_{level}": float(np.quantile(sample, 1 - level)) for level in LEVELS}
        rows.append(dict(measure="simulate", h=h, end=end, paths=args.paths, seconds=seconds, **values))
        print(json.dumps(rows[-1]), flush=True)

    began = time.perf_counter()
    sample = simulate_mosum_statistic(SUPPORTED_H, SUPPORTED_END, args.paths, args.seed)
    seconds = time.perf_counter() - began
    z, relative, levels = [], [], []
    for a, h in enumerate(SUPPORTED_H):
        for e, end in enumerate(SUPPORTED_END):
            probabilities, tabled = _table()[(h, end)]
            for p, value in zip(probabilities, tabled):
                draws = sample[:, a, e]
                q = np.quantile(draws, p)
                z.append((q - value) / quantile_standard_error(draws, p))
                relative.append(abs(q - value) / value)
                levels.append(1 - p)
    z, relative, levels = np.array(z), np.array(relative), np.array(levels)
    summary = dict(measure="table", points=int(z.size), paths=args.paths, seconds=seconds,
                   rms_z=float(np.sqrt(np.mean(z**2))), max_abs_z=float(np.abs(z).max()),
                   max_relative_level_ge_0_01=float(relative[levels >= 0.01 - 1e-9].max()),
                   max_relative=float(relative.max()))
    print(json.dumps(summary), flush=True)

    if args.markdown:
        print("\n| h | end | paths | simulation s | critval 0.05 | critval 0.01 | critval 0.001 |")
        print("|---|---|---:|---:|---:|---:|---:|")
        for row in rows:
            print(f"| {row['h']} | {row['end']} | {row['paths']} | {row['seconds']:.1f} | "
                  + " | ".join(f"{row[f'critval_{level}']:.4f}" for level in LEVELS) + " |")
        print(f"\nAgainst the table ({summary['points']} points, {summary['seconds']:.1f} s): "
              f"rms {summary['rms_z']:.2f} / max {summary['max_abs_z']:.2f} simulation standard errors; "
              f"relative difference max {100 * summary['max_relative_level_ge_0_01']:.2f} % (levels >= 0.01), "
              f"{100 * summary['max_relative']:.2f} % overall.")


if __name__ == "__main__":
    main()
