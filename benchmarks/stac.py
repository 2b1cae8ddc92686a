"""`tscube monitor` from a STAC catalog over HTTP against the same cube from Zarr on disk.

Writes a synthetic Sentinel-2 catalog (``tscube.datasets.make_stac_catalog``: two
overlapping tiles of ``--tile`` pixels, ``--dates`` dates, uint16 COGs with SCL), serves
it on 127.0.0.1 (``serve_folder``: a thread of this process answering byte-range
requests), writes the NDVI cube that ``open_stac`` makes of it to a Zarr store, and
times ``tscube monitor`` (a subprocess each, cpu engine, resumable run, ``--memory``)

* ``stac-http``: INPUT = the catalog's URL (reads, masks, scales, merges per day);
* ``stac-local``: INPUT = the catalog's path;
* ``zarr``: INPUT = the Zarr store of the same cube (float32, one chunk per run chunk).

For each: wall seconds (process start, imports and numba's cache load included), the
run's own pixels/s (its summary line: chunks computed and written), and the peak
resident memory of the process (``ru_maxrss``), next to the size of the cube and the
``--memory`` budget. Results of the three runs are checked equal. Best of ``--repeat``.
Two catalog sizes (``--tile 256 768``) with the same ``--memory`` show whether the peak
memory follows the budget rather than the catalog.
Usage: python benchmarks/stac.py [--tile 256 768 --dates 40 --memory 64MB --repeat 1]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

MONITOR = ["--start", "2022-03-01", "--freq", "23", "--order", "1", "--history", "all", "--no-trend",
           "--engine", "cpu", "--no-progress"]


#: Runs the CLI and prints the process's peak resident memory at exit: VmHWM, which a new
#: program starts afresh (``ru_maxrss`` would carry this benchmark's own peak over exec).
_CHILD = ("import atexit, sys\n"
          "def peak():\n"
          "    status = open('/proc/self/status').read()\n"
          "    print('peak_rss_kib', status.split('VmHWM:')[1].split()[0])\n"
          "atexit.register(peak)\n"
          "from tscube.cli import app\n"
          "sys.argv = ['tscube', *sys.argv[1:]]\n"
          "app()\n")


def run_monitor(source: str, out: Path, memory: str, extra=()) -> dict:
    """One ``tscube monitor`` process: wall seconds, the run's pixels/s, its peak RSS (KiB)."""
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, "-c", _CHILD, "monitor", source, *extra, *MONITOR, "--memory", memory, "-o", str(out)]
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    wall = time.perf_counter() - began
    if done.returncode != 0:
        raise RuntimeError(f"tscube monitor {source} failed:\n{done.stdout}\n{done.stderr}")
    rate = re.search(r"time: ([\d.]+) s, ([\d,]+) pixels/s", done.stdout)
    chunks = re.search(r"in (\d+) chunks", done.stdout)
    peak = re.search(r"peak_rss_kib (\d+)", done.stdout)
    return dict(wall_s=wall, run_s=float(rate[1]), run_pixels_per_s=int(rate[2].replace(",", "")),
                chunks=int(chunks[1]), peak_rss_kib=int(peak[1]))


def measure(folder: Path, tile: int, n_dates: int, memory: str, repeat: int) -> list[dict]:
    """The three inputs of one catalog (two tiles of ``tile`` x ``tile`` pixels)."""
    import xarray as xr

    from tscube.datasets import make_stac_catalog, serve_folder
    from tscube.io import open_stac

    began = time.perf_counter()
    catalog = make_stac_catalog(folder / "catalog", tile_shape=(tile, tile), overlap=tile // 4, n_dates=n_dates)
    made = time.perf_counter() - began
    assets = sum(f.stat().st_size for f in (folder / "catalog").rglob("*.tif"))
    cube = open_stac(catalog.path, memory=memory)
    store = folder / "ndvi.zarr"
    began = time.perf_counter()
    cube.to_dataset(name="ndvi").to_zarr(store, mode="w")
    to_zarr = time.perf_counter() - began
    pixels = cube.sizes["y"] * cube.sizes["x"]
    print(f"catalog: {len(catalog.item_ids)} items, {n_dates} dates, {cube.sizes['y']} x {cube.sizes['x']} "
          f"pixels; COG assets {assets / 2**20:.1f} MiB (written in {made:.1f} s); NDVI cube "
          f"{cube.nbytes / 2**20:.1f} MiB float32 (to Zarr in {to_zarr:.1f} s); --memory {memory}", flush=True)

    # numba compiles the cpu kernels once (then loads them from its cache): not timed
    run_monitor(str(store), folder / "warm.zarr", memory, ["--variable", "ndvi"])
    rows = []
    with serve_folder(folder / "catalog") as (url, requests):
        sources = {"stac-http": (f"{url}/catalog.json", ["--index", "NDVI"]),
                   "stac-local": (str(catalog.path), ["--index", "NDVI"]),
                   "zarr": (str(store), ["--variable", "ndvi"])}
        for mode, (source, extra) in sources.items():
            best = None
            for attempt in range(repeat):
                measured = run_monitor(source, folder / f"{mode}-{attempt}.zarr", memory, extra)
                if best is None or measured["wall_s"] < best["wall_s"]:
                    best = measured
            line = dict(benchmark="stac", mode=mode, pixels=pixels, dates=int(cube.sizes["time"]),
                        items=len(catalog.item_ids), memory=memory, cube_mib=round(cube.nbytes / 2**20, 1),
                        assets_mib=round(assets / 2**20, 1), chunks=best["chunks"], wall_s=round(best["wall_s"], 2),
                        run_s=best["run_s"], pixels_per_s=best["run_pixels_per_s"],
                        peak_rss_mib=round(best["peak_rss_kib"] / 1024),
                        http_requests=len(requests) if mode == "stac-http" else None)
            print(json.dumps(line), flush=True)
            rows.append(line)
    results = [xr.open_zarr(folder / f"{mode}-0.zarr") for mode in sources]
    same = all(np.array_equal(results[0][v].values, other[v].values, equal_nan=True)
               for other in results[1:] for v in results[0].data_vars)
    print(f"results equal: {same}", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tile", type=int, nargs="+", default=[256, 768],
                        help="rows and columns of each of the two tiles (one catalog per value)")
    parser.add_argument("--dates", type=int, default=40)
    parser.add_argument("--memory", default="64MB")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()

    rows = []
    for tile in args.tile:
        folder = Path(tempfile.mkdtemp(prefix="tscube-bench-stac-"))
        try:
            rows += measure(folder, tile, args.dates, args.memory, args.repeat)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    print("\n| input | pixels | dates | cube MiB | chunks | wall s | run s | pixels/s | vs Zarr | peak RSS MiB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        base = next(r for r in rows if r["mode"] == "zarr" and r["pixels"] == row["pixels"])
        print(f"| {row['mode']} | {row['pixels']:,} | {row['dates']} | {row['cube_mib']} | {row['chunks']} "
              f"| {row['wall_s']:.2f} | {row['run_s']:.2f} | {row['pixels_per_s']:,} "
              f"| {row['pixels_per_s'] / base['pixels_per_s']:.2f}x | {row['peak_rss_mib']} |")


if __name__ == "__main__":
    main()
