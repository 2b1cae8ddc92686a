"""How fast ``tscube view`` opens a large result and answers a pixel click.

Issue 43's target: a 16 M-pixel result opens in <= 3 s and a pixel click answers in
<= 1 s on a 2-core machine, with the cube chunked as docs/view.md recommends.

``--prepare``: writes, under ``--dir``, a Peru(Large)-sized cube (4458 x 3678 pixels, by
default 92 16-day dates, int16 NDVI x 10000 with -32768 for clouds, 35 % missing,
planted clearings) as Zarr chunked ``(time, 128, 128)``, then runs ``tscube monitor`` on
it (the real CLI, resumable), which writes ``result.zarr``. Minutes on 2 cores; done once.

Then (without ``--prepare``): starts the viewer on that result and measures, in headless
Chromium (Debian's ``chromium`` and ``chromium-driver``, driven by Selenium):

* ``open_first_s``: from starting the server (``tscube.view``, which reads the result's
  record and the first layer) until the page shows the map with every tile of the first
  view loaded, with an empty overview cache (the first time a result is opened);
* ``open_again_s``: the same for a second opening, which reads the overviews the first
  one cached (docs/view.md);
* ``click_s``: from a click on a pixel until the pixel panel shows its figure (read the
  pixel's series from the cube, run the algorithm on it, draw it), median and max over
  ``--clicks`` pixels spread over the grid (each a chunk not read before);
* ``layer_s``: switching to another layer until its tiles are loaded.

Prints one JSON line per measurement and a summary line.

    python benchmarks/view.py --prepare --dir /tmp/view-bench
    python benchmarks/view.py --dir /tmp/view-bench
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

SHAPE = (4458, 3678)  # Peru(Large), PRESETS["peru_large"]
BLOCK = 512
NODATA = -32768


def prepare(folder: Path, n_dates: int, n_history: int) -> None:
    import dask.array as da
    import pandas as pd
    import rioxarray  # noqa: F401  (registers .rio)
    import xarray as xr

    from tscube.datasets import composite_dates, make_cube

    folder.mkdir(parents=True, exist_ok=True)
    cube_path, result_path = folder / "cube.zarr", folder / "result.zarr"
    dates = composite_dates(n_dates)
    if not cube_path.exists():
        rows, cols = SHAPE

        def block(block_info=None):
            (t0, t1), (r0, r1), (c0, c1) = block_info[None]["array-location"]
            seed = (r0 // BLOCK) * 1000 + c0 // BLOCK
            cube = make_cube("demo", shape=(r1 - r0, c1 - c0), n_dates=n_dates, n_history=n_history, seed=seed)
            raw = np.rint(cube.data * 10000)
            raw[~np.isfinite(cube.data)] = NODATA
            return raw.astype(np.int16)

        data = da.map_blocks(block, dtype=np.int16, chunks=((n_dates,), *(
            tuple(min(BLOCK, n - i) for i in range(0, n, BLOCK)) for n in (rows, cols))))
        y = 9_000_000.0 - 30.0 * (np.arange(rows) + 0.5)
        x = 300_000.0 + 30.0 * (np.arange(cols) + 0.5)
        cube = xr.DataArray(data, dims=("time", "y", "x"),
                            coords={"time": pd.DatetimeIndex(dates), "y": y, "x": x}, name="ndvi")
        cube.attrs["_FillValue"] = NODATA
        cube = cube.rio.write_crs("EPSG:32718")
        encoding = {"ndvi": {"chunks": (n_dates, 128, 128)}}
        began = time.perf_counter()
        cube.to_dataset().to_zarr(cube_path, mode="w", encoding=encoding)
        print(json.dumps({"prepared": str(cube_path), "seconds": round(time.perf_counter() - began, 1)}), flush=True)
    if not (result_path / "_tscube_run.json").exists() or "complete" not in (result_path / "_tscube_run.json").read_text():
        start = str(np.datetime64(dates[n_history], "D"))
        began = time.perf_counter()
        subprocess.run([sys.executable, "-m", "tscube.cli", "monitor", str(cube_path), "-o", str(result_path),
                        "--start", start, "--freq", "23"], check=True)
        print(json.dumps({"prepared": str(result_path), "seconds": round(time.perf_counter() - began, 1)}), flush=True)


def measure(folder: Path, clicks: int) -> dict:
    from selenium.webdriver.common.by import By

    import tscube
    from tscube.viewer.browser import chromium, wait_for

    import tempfile

    result_path = folder / "result.zarr"
    out = {}
    os.environ["TSCUBE_VIEW_CACHE"] = tempfile.mkdtemp(prefix="tscube-view-cache-")  # no overviews yet
    with chromium() as driver:
        for name in ("open_first_s", "open_again_s"):  # the second open finds the overviews the first wrote
            began = time.perf_counter()
            viewer = tscube.view(result_path, open_browser=False)
            driver.get(viewer.url)
            wait_for(driver, "return window.tscubeView && window.tscubeView.tilesLoaded()", timeout=60)
            out[name] = time.perf_counter() - began
            info = driver.execute_script("return window.tscubeView.info")
            rows, cols = info["shape"]
            print(json.dumps({"measure": name, "seconds": round(out[name], 3), "pixels": rows * cols}), flush=True)
            if name == "open_first_s":
                time.sleep(2)  # let the first viewer finish writing its overviews
                viewer.stop()
                driver.get("about:blank")
        try:
            times = []
            rng = np.random.default_rng(1)
            for i in range(clicks):
                row, col = int(rng.integers(0, rows)), int(rng.integers(0, cols))
                began = time.perf_counter()
                driver.execute_script("window.tscubeView.selectPixel(arguments[0], arguments[1])", row, col)
                wait_for(driver, "return window.tscubeView.pixelShown("
                                 f"{row}, {col})", timeout=60)
                times.append(time.perf_counter() - began)
                print(json.dumps({"measure": "click", "row": row, "col": col, "seconds": round(times[-1], 3)}),
                      flush=True)
            out["click_median_s"] = float(np.median(times))
            out["click_max_s"] = float(np.max(times))
            layer = next(name for name in (layer["name"] for layer in info["layers"]) if name != info["layers"][0]["name"])
            began = time.perf_counter()
            driver.find_element(By.CSS_SELECTOR, f"#layers input[value='{layer}']").click()
            wait_for(driver, "return window.tscubeView.tilesLoaded()", timeout=60)
            out["layer_s"] = time.perf_counter() - began
        finally:
            viewer.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/tscube-view-bench"))
    parser.add_argument("--prepare", action="store_true", help="write the cube and the result first")
    parser.add_argument("--dates", type=int, default=92)
    parser.add_argument("--history", type=int, default=46)
    parser.add_argument("--clicks", type=int, default=10)
    args = parser.parse_args()
    if args.prepare:
        prepare(args.dir, args.dates, args.history)
        return
    out = measure(args.dir, args.clicks)
    out = {k: round(v, 3) for k, v in out.items()}
    out.update(cpus=os.cpu_count(), result=str(args.dir / "result.zarr"))
    print(json.dumps({"summary": out}), flush=True)


if __name__ == "__main__":
    main()
