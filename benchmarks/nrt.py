"""Near-real-time BFAST Monitor: one new image through the state vs the full rerun.

Makes a synthetic int16 NDVI cube (``--pixels``, ``--dates``, monitoring from date
``--history``), stores the first ``dates - 1`` images and the last one as Zarr, fits a
:class:`tscube.bfast.nrt.BfastMonitor` on the first ones and saves it (``.zarr``: the
result and the state directory), then times, in one run (best of ``--repeat``):

* ``read``: reading the new image and the state that every pixel's update reads (the
  fit's arrays but for the history tail of the MOSUM window, which a pixel reads only
  while its window holds history residuals; the committed generation of what an update
  changes; one residual row, as the rows leaving the window), into kept buffers;
* ``update``: ``tscube.bfast.nrt.update_saved`` with the new image, on the saved state in
  place (the operational path of ``tscube monitor --update``: the state updated in place,
  the result rewritten), put back to the fit and synced to disk between repeats (the
  commit and the residual rows undone: files last written by tscube, as in operations);
* ``update-fresh-copy``: the same on a fresh ``shutil.copytree`` of the saved state
  (what earlier sessions timed; 25-30 % slower at 4 M pixels, the same at 1 M);
* with each update, the MiB read from disk and the MiB of page cache reclaimed meanwhile
  (``disk_read_mib``, ``reclaimed_mib``, Linux only): an update that waits for either
  measures the machine, not the update;
* ``update-kernel``: the update of the in-memory state alone (a state whose residual rows
  have spare capacity, as after any earlier update);
* ``full-rerun``: reading the whole cube and ``bfast_monitor`` on it (cpu engine), what
  an operational run without a state does for every new image (best of two at most).

With ``--scenes`` it also measures the operational case through the command line
(in-process, so without interpreter start-up): a folder of one GeoTIFF per date
(``scene_YYYYMMDD.tif``, int16, tiled), ``tscube monitor scenes/ --update`` after the
last scene arrived (on the fitted store, put back to the fit between repeats, best of
``--repeat``) vs ``tscube monitor scenes/`` over all of them (``--memory 256MB``, cpu
engine).

Prints one JSON line per measurement, the ratios, the state's size on disk per pixel,
and a Markdown table. Usage:
``PYTHONPATH=src python benchmarks/nrt.py [--pixels 500000 --dates 235 --history 135 --scenes]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd


def _best(repeat: int, func):
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        value = func()
        times.append(time.perf_counter() - began)
    return min(times), value


def _memory_counters() -> np.ndarray:
    """MiB read from block devices and MiB of page cache reclaimed, since boot (Linux
    ``/proc/vmstat``: pgpgin in KiB, pgsteal_* in 4 KiB pages; NaN elsewhere). An update
    that reads from disk, or while the system frees memory, is slowed by it, whatever its
    own work."""
    counts = {}
    try:
        with open("/proc/vmstat") as handle:
            for line in handle:
                name, value = line.split()
                counts[name] = int(value)
    except (OSError, ValueError):
        return np.full(2, np.nan)
    reclaimed = sum(value for name, value in counts.items() if name.startswith("pgsteal_"))
    return np.array([counts.get("pgpgin", 0) / 1024, reclaimed * 4 / 1024])


def _restorer(store_path: Path):
    """A function that puts the saved state ``store_path`` back as it is now (its manifest,
    its result's root metadata, its residual rows: what an update commits or adds; the
    other slot and the result's chunks an update rewrites whole) and syncs it to disk."""
    from tscube.bfast.nrt import _store as store

    directory = store_path / store.STATE_DIR
    manifest = (directory / store.MANIFEST).read_bytes()
    root_metadata = (store_path / "zarr.json").read_bytes()
    residual_bytes = (directory / store.RESIDUALS).stat().st_size

    def restore() -> None:
        (directory / store.MANIFEST).write_bytes(manifest)
        (store_path / "zarr.json").write_bytes(root_metadata)
        os.truncate(directory / store.RESIDUALS, residual_bytes)
        os.sync()

    return restore


def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pixels", type=int, default=500_000)
    parser.add_argument("--dates", type=int, default=235)
    parser.add_argument("--history", type=int, default=135, help="dates before the monitoring start")
    parser.add_argument("--nan", type=float, default=0.3, help="cloud (missing) fraction")
    parser.add_argument("--history-method", default="ROC")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--scenes", action="store_true", help="also the CLI on a folder of GeoTIFF scenes")
    args = parser.parse_args()

    import numba
    import xarray as xr

    from isa import target  # this folder's

    print(json.dumps(dict(machine=True, cpus=os.cpu_count(), **target())), flush=True)

    from tscube import bfast_monitor
    from tscube.bfast.nrt import _store as store
    from tscube.bfast import nrt
    from tscube.bfast.nrt import dataset as nrt_dataset
    from tscube.bfast.nrt import state as nrt_state
    from tscube.datasets import make_cube

    cols = 1000
    rows = max(1, args.pixels // cols)
    cube = make_cube("demo", shape=(rows, cols), n_dates=args.dates, n_history=args.history, nan_fraction=args.nan,
                     seed=1)
    raw = np.where(np.isnan(cube.data), -3000, np.rint(cube.data * 10000)).astype(np.int16)
    del cube.data
    dates, start = cube.dates, cube.dates[args.history]
    n_pixels = rows * cols
    params = dict(freq=23, history=args.history_method, nodata=-3000)
    folder = Path(tempfile.mkdtemp(prefix="tscube-nrt-bench-"))
    try:
        chunks = {"time": -1, "y": 256, "x": 1000}
        cube_da = xr.DataArray(raw, dims=("time", "y", "x"), coords={"time": dates}, name="ndvi")
        cube_da.chunk(chunks).to_dataset().to_zarr(folder / "cube.zarr", mode="w")
        cube_da[-1:].chunk(chunks).to_dataset().to_zarr(folder / "image.zarr", mode="w")

        monitor = nrt.BfastMonitor(start, engine="cpu", **params)
        fit_s, _ = _best(1, lambda: monitor.fit(raw[:-1], dates[:-1]))
        monitor.pixel_dims_ = ("y", "x")
        saved = folder / "state.zarr"
        save_s, _ = _best(1, lambda: monitor.save(saved))
        state_bytes = _du(saved)
        in_memory = {name: array.nbytes for name, array in monitor.state_.items()}
        del monitor
        directory = saved / store.STATE_DIR

        generation = store.read_manifest(saved)["generation"]
        # what every pixel's update reads: the fit (but for the history tail of the MOSUM
        # window, read only while a pixel's window still holds history residuals), the
        # committed generation, and a residual row's worth (the one leaving the window)
        read_paths = [path for folder_name in ("static", f"hot-{generation % 2}")
                      for path in sorted((directory / folder_name).glob("*.npy")) if path.stem != "tail"]
        read_buffers = [np.empty(path.stat().st_size, dtype=np.uint8) for path in read_paths]
        row_buffer = np.empty(n_pixels * 8, dtype=np.uint8)

        def read():
            """The new image and the state that each pixel's update reads, into buffers kept
            between repeats (the time of reading, not of new memory)."""
            image = xr.open_zarr(folder / "image.zarr")["ndvi"].values
            for path, buffer in zip(read_paths, read_buffers):
                with open(path, "rb") as handle:
                    handle.readinto(buffer)
            with open(directory / store.RESIDUALS, "rb") as handle:
                handle.readinto(row_buffer)
            return image

        restore_saved = _restorer(saved)
        memory: dict[str, np.ndarray] = {}  # MiB read from disk, reclaimed during an update (most)

        def timed_update(store_path: Path, step: str) -> float:
            """Seconds of ``update_saved`` of ``store_path`` with the new image; what the system
            read from disk and reclaimed meanwhile kept under ``step`` (the most of the repeats)."""
            image = xr.open_zarr(folder / "image.zarr")["ndvi"]
            counters, began = _memory_counters(), time.perf_counter()
            nrt.update_saved(store_path, image)
            elapsed = time.perf_counter() - began
            memory[step] = np.fmax(memory.get(step, 0.0), _memory_counters() - counters)
            return elapsed

        def update() -> float:
            """One update of the saved state in place, as operations update it (its files last
            written by tscube), restored to the fit before (the commit and the rows it added
            undone) and synced before the clock starts: a state written days ago."""
            restore_saved()
            return timed_update(saved, "update")

        def update_copy() -> float:
            """One update of a fresh copy of the saved state (shutil.copytree, synced, before
            the clock starts), as earlier sessions timed it."""
            target = folder / "copy.zarr"
            shutil.rmtree(target, ignore_errors=True)
            restore_saved()
            shutil.copytree(saved, target)
            os.sync()
            elapsed = timed_update(target, "update-fresh-copy")
            shutil.rmtree(target)
            return elapsed

        def update_in_memory() -> float:
            """One update of the state in memory, timed without loading it; its residual
            rows have spare capacity, as in a state updated before (an update copies none)."""
            state, old, _ = store.load_state(saved)
            state["residuals"] = nrt_state._more_rows(state["residuals"], 0)
            model = nrt_dataset.model_from_attrs(xr.open_zarr(saved).attrs)
            image = xr.open_zarr(folder / "image.zarr")["ndvi"].values
            began = time.perf_counter()
            nrt_state.update_state(state, model, old, image.reshape(1, -1), dates[-1:])
            return time.perf_counter() - began

        update_in_memory()  # compile
        read_s, _ = _best(args.repeat, read)
        kernel_s = min(update_in_memory() for _ in range(args.repeat))
        copy_s = min(update_copy() for _ in range(min(args.repeat, 2)))
        update_s = min(update() for _ in range(args.repeat))
        with xr.open_zarr(saved) as updated:
            new_breaks = updated["break_index"].values.ravel()
            new_history = updated["history_start"].values.ravel()

        def rerun():
            values = xr.open_zarr(folder / "cube.zarr")["ndvi"].values
            return bfast_monitor(values, dates, start, engine="cpu", **params)

        rerun_s, full = _best(min(args.repeat, 2), rerun)  # best of two at most, as the update: a fair ratio
        # pixels whose break differs from the full run's, and of those, how many because the
        # full run selected another stable history (a ROC/BP test decided within rounding,
        # which the ulp-level move of the datetime grid as the series grows can flip)
        differ = new_breaks != full.break_index.ravel()
        other_history = differ & (new_history != full.history_start.ravel())
        same = int(np.count_nonzero(differ)) == 0

        rows_out = [
            dict(step="read", seconds=read_s, note="new image + the state arrays every pixel's update reads"),
            dict(step="update", seconds=update_s, note="update_saved: the saved state updated in place + result"),
            dict(step="update-fresh-copy", seconds=copy_s, note="update_saved of a fresh copy of the saved state"),
            dict(step="update-kernel", seconds=kernel_s, note="update of the in-memory state (kernels only)"),
            dict(step="full-rerun", seconds=rerun_s, note=f"read the {args.dates}-date cube + bfast_monitor"),
            dict(step="fit", seconds=fit_s, note=f"fit on {args.dates - 1} dates (once)"),
            dict(step="save", seconds=save_s, note="BfastMonitor.save to .zarr (once)"),
        ]
        summary = dict(pixels=n_pixels, dates=args.dates, monitoring_dates=args.dates - args.history,
                       threads=numba.get_num_threads(), history=args.history_method, nan=args.nan,
                       state_bytes_per_pixel_disk=state_bytes / n_pixels,
                       state_bytes_per_pixel_memory=sum(in_memory.values()) / n_pixels,
                       update_over_read=update_s / read_s, rerun_over_update=rerun_s / update_s,
                       fresh_copy_update_over_read=copy_s / read_s,
                       rerun_over_kernel=rerun_s / kernel_s, breaks_equal_full_run=same,
                       breaks_differing=int(np.count_nonzero(differ)),
                       breaks_differing_by_history=int(np.count_nonzero(other_history)),
                       projected_4M_update_s=update_s * 4_000_000 / n_pixels,
                       projected_4M_rerun_s=rerun_s * 4_000_000 / n_pixels)
        if args.scenes:
            rows_out += _scenes(folder, raw, dates, start, args)
            summary["cli_rerun_over_update"] = rows_out[-2]["seconds"] / rows_out[-3]["seconds"]
        for row in rows_out:
            if row["step"] in memory:
                row["disk_read_mib"], row["reclaimed_mib"] = (round(float(v), 1) for v in memory[row["step"]])
            print(json.dumps(dict(row, pixels=n_pixels)))
        print(json.dumps(summary))
        print("\n| step | seconds | per M pixels | note |\n|---|---:|---:|---|")
        for row in rows_out:
            print(f"| {row['step']} | {row['seconds']:.3f} | {row['seconds'] * 1e6 / n_pixels:.3f} | {row['note']} |")
        print(f"\nupdate / read = {summary['update_over_read']:.2f} (fresh copy: "
              f"{summary['fresh_copy_update_over_read']:.2f}); full rerun / update = "
              f"{summary['rerun_over_update']:.1f}; state on disk {summary['state_bytes_per_pixel_disk']:.0f} B/pixel "
              f"({summary['state_bytes_per_pixel_memory']:.0f} B in memory); breaks equal the full run: {same} "
              f"({summary['breaks_differing']} differ, {summary['breaks_differing_by_history']} of them where the "
              "full run selected another history)")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _write_scene(folder: Path, image: np.ndarray, date) -> None:
    import rasterio
    from rasterio.transform import from_origin

    rows, cols = image.shape
    with rasterio.open(folder / f"scene_{pd.Timestamp(date):%Y%m%d}.tif", "w", driver="GTiff", width=cols, height=rows, count=1,
                       dtype="int16", crs="EPSG:32633", transform=from_origin(500_000.0, 4_000_000.0, 30.0, 30.0),
                       nodata=-3000, tiled=True, blockxsize=256, blockysize=256) as dst:
        dst.write(image, 1)


def _scenes(folder: Path, raw: np.ndarray, dates, start, args) -> list[dict]:
    """``tscube monitor scenes/ --update`` with one new scene vs the full ``tscube monitor scenes/``."""
    from typer.testing import CliRunner

    from tscube.cli import app

    scenes = folder / "scenes"
    scenes.mkdir()
    for image, date in zip(raw[:-1], dates[:-1]):
        _write_scene(scenes, image, date)
    common = ["--start", f"{pd.Timestamp(start):%Y-%m-%d}", "--freq", "23", "--history", args.history_method, "--engine", "cpu",
              "--memory", "256MB", "--date-pattern", "%Y%m%d", "--no-progress"]
    runner = CliRunner()

    def run(*extra):
        began = time.perf_counter()
        result = runner.invoke(app, ["monitor", str(scenes), *common, *extra])
        if result.exit_code != 0:
            raise RuntimeError(result.output)
        return time.perf_counter() - began

    alerts = folder / "alerts.zarr"
    fit_s = run("-o", str(alerts), "--update")
    _write_scene(scenes, raw[-1], dates[-1])
    restore_fit = _restorer(alerts)

    def update() -> float:
        """One update of the fitted store in place, restored to the fit and synced before."""
        restore_fit()
        return run("-o", str(alerts), "--update")

    update_s = min(update() for _ in range(args.repeat))
    rerun_s = run("-o", str(folder / "full.zarr"))
    import xarray as xr

    with xr.open_zarr(alerts) as a, xr.open_zarr(folder / "full.zarr") as b:
        differ = a["break_index"].values != b["break_index"].values
        other_history = differ & (a["history_start"].values != b["history_start"].values)
    print(json.dumps({"cli_breaks_differing": int(np.count_nonzero(differ)),
                      "cli_breaks_differing_by_history": int(np.count_nonzero(other_history))}))
    return [dict(step="cli-update", seconds=update_s, note="tscube monitor scenes/ --update, one new scene"),
            dict(step="cli-full-rerun", seconds=rerun_s, note=f"tscube monitor scenes/ ({args.dates} scenes)"),
            dict(step="cli-fit", seconds=fit_s, note=f"tscube monitor scenes/ --update, first run ({args.dates - 1})")]


if __name__ == "__main__":
    main()
