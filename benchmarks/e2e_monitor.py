"""End to end as users run it: a Peru(Large)-sized int16 cube as Zarr on disk, then
``tscube monitor`` with default settings (history ROC) into a ``.zarr`` result.

Writes the cube once (``--rows`` x ``--cols`` pixels x ``--dates`` dates, 69 % nodata
-3000, int16 NDVI x 10^4, 16-day dates; chunks of all dates x ``--chunk-rows`` rows x all
columns) from ``--distinct`` generated row blocks (``make_cube`` costs ~40 s per 128-row
block on 2 cores, so the blocks repeat), then times the CLI in a fresh process:
``/usr/bin/time -v tscube monitor CUBE.zarr --start ... --freq 23 -o OUT.zarr`` and
reports wall seconds, peak RSS (the process's maximum resident set) and pixels per
second. Prints one JSON line; ``--keep`` keeps the cube for another run.

Usage::

    python benchmarks/e2e_monitor.py [--rows 4458 --cols 3678 --dates 488] [--memory 512MB]
        [--workdir /tmp/tscube-e2e] [--keep] [--engine cpu]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

NODATA = -3000


def write_cube(path: Path, rows: int, cols: int, n_dates: int, chunk_rows: int, distinct: int) -> tuple[str, float]:
    """Write the int16 cube to ``path`` (a Zarr store, variable ``ndvi``); return the monitoring
    start as an ISO date and the seconds it took."""
    import pandas as pd
    import xarray as xr

    from tscube.datasets import make_cube

    began = time.perf_counter()
    template = make_cube("peru_large", shape=(2, 2), n_dates=n_dates, seed=0)
    dates = pd.DatetimeIndex(template.dates)
    blocks = []
    for b in range(distinct):
        cube = make_cube("peru_large", shape=(chunk_rows, cols), n_dates=n_dates, change_fraction=0.1, seed=1000 + b)
        raw = np.where(np.isnan(cube.data), NODATA, np.rint(cube.data * 1e4)).astype(np.int16)
        blocks.append(raw)
        del cube
    ds = xr.Dataset(
        {"ndvi": (("time", "y", "x"), _lazy_blocks(blocks, rows, chunk_rows))},
        coords={"time": dates, "y": 4_000_000.0 - 30.0 * np.arange(rows) - 15.0,
                "x": 500_000.0 + 30.0 * np.arange(cols) + 15.0},
    )
    ds["ndvi"].attrs.update(_FillValue=NODATA, nodata=NODATA)
    ds["ndvi"].encoding.update(chunks=(n_dates, chunk_rows, cols))
    ds.to_zarr(path, mode="w", consolidated=True)
    return str(pd.Timestamp(template.start).date()), time.perf_counter() - began


def _lazy_blocks(blocks, rows, chunk_rows):
    """The cube as a dask array cycling through the generated blocks (no copy in memory)."""
    import dask.array as da

    parts = []
    for i, r0 in enumerate(range(0, rows, chunk_rows)):
        block = blocks[i % len(blocks)][:, : min(chunk_rows, rows - r0)]
        parts.append(da.from_array(block, chunks=block.shape))
    return da.concatenate(parts, axis=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=4458)
    parser.add_argument("--cols", type=int, default=3678)
    parser.add_argument("--dates", type=int, default=488)
    parser.add_argument("--chunk-rows", type=int, default=64)
    parser.add_argument("--distinct", type=int, default=3)
    parser.add_argument("--memory", default=None, help="tscube monitor --memory (default: its own)")
    parser.add_argument("--engine", default="auto")
    parser.add_argument("--workdir", default="/tmp/tscube-e2e")
    parser.add_argument("--keep", action="store_true", help="keep the cube (and reuse one of the same size)")
    args = parser.parse_args()

    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    cube = workdir / f"cube_{args.rows}x{args.cols}x{args.dates}.zarr"
    meta = cube.with_suffix(".json")
    if cube.exists() and meta.exists():
        start, write_s = json.loads(meta.read_text())["start"], 0.0
    else:
        start, write_s = write_cube(cube, args.rows, args.cols, args.dates, args.chunk_rows, args.distinct)
        meta.write_text(json.dumps(dict(start=start)))
    out = workdir / "result.zarr"
    shutil.rmtree(out, ignore_errors=True)
    command = ["tscube", "monitor", str(cube), "--start", start, "--freq", "23", "-o", str(out),
               "--no-progress", "--engine", args.engine]
    if args.memory:
        command += ["--memory", args.memory]
    timed = subprocess.run(["/usr/bin/time", "-v", *command], capture_output=True, text=True)
    if timed.returncode != 0:
        sys.exit(f"tscube monitor failed:\n{timed.stdout}\n{timed.stderr}")
    wall = re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):([\d.]+)", timed.stderr)
    hours, minutes, seconds = (float(g) if g else 0.0 for g in wall.groups())
    wall_s = 3600 * hours + 60 * minutes + seconds
    peak_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", timed.stderr).group(1))
    pixels = args.rows * args.cols
    record = dict(benchmark="e2e_monitor", rows=args.rows, cols=args.cols, dates=args.dates, pixels=pixels,
                  missing=0.69, command=" ".join(command), write_cube_s=write_s, wall_s=wall_s,
                  peak_rss_gb=peak_kb / 2**20, pixels_per_s=pixels / wall_s,
                  summary=[line for line in timed.stdout.splitlines() if line.strip()][-4:])
    print(json.dumps(record), flush=True)
    shutil.rmtree(out, ignore_errors=True)
    if not args.keep:
        shutil.rmtree(cube, ignore_errors=True)
        meta.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
