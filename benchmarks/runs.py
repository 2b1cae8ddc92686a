"""Cost of resumability: a chunked, recorded run against one dask compute + write.

Writes a synthetic int16 NDVI GeoTIFF stack (dated bands), then times BFAST Monitor
(cpu engine) from the file to a Zarr result two ways, best of ``--repeat``:

* ``one-shot``: ``bfast_monitor_xarray(open_cube(...)).compute()`` + ``write_result``
  (what ``tscube monitor`` did before runs became resumable);
* ``resumable``: ``tscube.runs.run_chunked`` (per-chunk region writes + atomic record),
  what ``tscube monitor`` does now.

Prints one JSON line per measurement and a Markdown table.
Usage: python benchmarks/runs.py [--rows 600 --cols 800 --memory 64MB --repeat 2]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd


def write_stack(path: Path, rows: int, cols: int, n_dates: int, seed: int = 0) -> pd.DatetimeIndex:
    import rasterio
    from rasterio.transform import from_origin

    rng = np.random.default_rng(seed)
    dates = pd.DatetimeIndex([pd.Timestamp(2010 + i // 23, 1, 1) + pd.Timedelta(days=16 * (i % 23))
                              for i in range(n_dates)])
    t = np.arange(n_dates)
    with rasterio.open(path, "w", driver="GTiff", width=cols, height=rows, count=n_dates, dtype="int16",
                       crs="EPSG:32633", transform=from_origin(500_000.0, 4_000_000.0, 30.0, 30.0), nodata=-3000,
                       tiled=True, blockxsize=256, blockysize=256) as dst:
        for i in range(n_dates):
            band = 6000 + 1500 * np.sin(2 * np.pi * t[i] / 23) + rng.normal(0, 200, (rows, cols))
            if i > 0.8 * n_dates:
                band[: rows // 3] -= 2000
            band = np.rint(band).astype(np.int16)
            band[rng.random((rows, cols)) < 0.2] = -3000
            dst.write(band, i + 1)
            dst.set_band_description(i + 1, f"{dates[i]:%Y-%m-%d}")
    return dates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=600)
    parser.add_argument("--cols", type=int, default=800)
    parser.add_argument("--dates", type=int, default=92)
    parser.add_argument("--memory", default="64MB")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()

    from tscube.bfast import BfastStatus
    from tscube.io import open_cube, write_result
    from tscube.runs import input_identity, run_chunked
    from tscube.xr import bfast_monitor_xarray

    folder = Path(tempfile.mkdtemp(prefix="tscube-bench-runs-"))
    try:
        stack = folder / "stack.tif"
        dates = write_stack(stack, args.rows, args.cols, args.dates)
        start = dates[int(0.6 * args.dates)]
        n_pixels = args.rows * args.cols

        def lazy():
            da = open_cube(stack, memory=args.memory)
            return da, bfast_monitor_xarray(da, start, freq=23, history="all", engine="cpu", memory=args.memory)

        # compile the cpu kernels once, outside the timings
        da, template = lazy()
        template.isel(y=slice(0, 8), x=slice(0, 8)).compute()

        def one_shot():
            _, ds = lazy()
            write_result(ds.compute(scheduler="threads"), folder / "oneshot.zarr")

        def resumable():
            da, ds = lazy()
            shutil.rmtree(folder / "runs.zarr", ignore_errors=True)
            run_chunked(ds, folder / "runs.zarr", command="monitor", params={"start": str(start)},
                        input_id=input_identity(stack, da), status_enum=BfastStatus, progress=False,
                        echo=lambda text: None)

        n_chunks = int(np.prod([len(c) for d, c in template.chunksizes.items() if d in ("y", "x")]))
        rows = []
        for name, func in (("one-shot", one_shot), ("resumable", resumable)):
            best = float("inf")
            for _ in range(args.repeat):
                began = time.perf_counter()
                func()
                best = min(best, time.perf_counter() - began)
            line = dict(benchmark="runs", mode=name, pixels=n_pixels, dates=args.dates, memory=args.memory,
                        chunks=n_chunks, seconds=round(best, 3), pixels_per_second=round(n_pixels / best))
            print(json.dumps(line), flush=True)
            rows.append(line)
        import xarray as xr

        a, b = xr.open_zarr(folder / "oneshot.zarr"), xr.open_zarr(folder / "runs.zarr")
        same = all(np.array_equal(a[v].values, b[v].values, equal_nan=True) for v in a.data_vars)
        base = rows[0]["seconds"]
        print(f"\nresults equal: {same}\n")
        print("| mode | pixels | dates | chunks | s | pixels/s | vs one-shot |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for row in rows:
            print(f"| {row['mode']} | {row['pixels']:,} | {row['dates']} | {row['chunks']} | {row['seconds']:.2f} "
                  f"| {row['pixels_per_second']:,} | {row['seconds'] / base:.2f}x |")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
