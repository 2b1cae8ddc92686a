"""Nothing silently wrong, nothing lost: one test per case of the fault and bad-input probe
(issue 38), each reproducing the case as a user met it. docs/production.md's table of
guarantees names these tests."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

xr = pytest.importorskip("xarray")
rasterio = pytest.importorskip("rasterio")
pytest.importorskip("zarr")

from rasterio.transform import from_origin  # noqa: E402

import tscube  # noqa: E402
from tscube import BfastMonitor, bfast_lite, bfast_monitor  # noqa: E402
from tscube.bfast.nrt import update_saved  # noqa: E402
from tscube.io import CubeError, RunIncomplete, open_cube, read_dates, write_result  # noqa: E402
from tscube.runs import check_apart_from_inputs, exclusive_lock, quiet_zarr, record_path  # noqa: E402

from test_runs import RECORD_NAME, _run_and_kill, cube, monitor_args, tscube as cli  # noqa: E402, F401

N_DATES, ROWS, COLS = 60, 6, 8
DATES = pd.DatetimeIndex([pd.Timestamp(2000 + i // 23, 1, 1) + pd.Timedelta(days=16 * (i % 23))
                          for i in range(N_DATES)])
TRANSFORM = from_origin(500_000.0, 4_000_000.0, 30.0, 30.0)


def ndvi(seed: int = 3) -> np.ndarray:
    """Float NDVI ``(T, ROWS, COLS)`` with clouds (NaN) and a drop in one corner from date 46 on."""
    rng = np.random.default_rng(seed)
    t = np.arange(N_DATES)
    values = 0.6 + 0.15 * np.sin(2 * np.pi * t / 23)[:, None, None] + rng.normal(0, 0.015, (N_DATES, ROWS, COLS))
    values[46:, :3, :4] -= 0.25
    values[rng.random(values.shape) < 0.15] = np.nan
    return values.astype(np.float32)


def write_scene(path: Path, image: np.ndarray, dtype="float32", nodata=None) -> Path:
    with rasterio.open(path, "w", driver="GTiff", width=COLS, height=ROWS, count=1, dtype=dtype, crs="EPSG:32633",
                       transform=TRANSFORM, nodata=nodata, compress="deflate") as dst:
        dst.write(image[None].astype(dtype))
    return path


def scene_folder(folder: Path, values: np.ndarray, dates=DATES) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for image, date in zip(values, dates):
        write_scene(folder / f"ndvi_{date:%Y%m%d}.tif", image)
    return folder


def start_args(folder, output, *extra):
    return ["monitor", folder, "--start", f"{DATES[40]:%Y-%m-%d}", "--freq", 23, "--history", "all", "-o", output,
            "--engine", "cpu", "--no-progress", *extra]


# --------------------------------------------------------------------------------------
# 1. a saved state takes one date per image


@pytest.mark.parametrize("n_images, n_dates", [(3, 2), (2, 3)])
def test_1_a_state_refuses_images_and_dates_that_do_not_pair(tmp_path, n_images, n_dates):
    data = ndvi()
    t = np.arange(N_DATES) / 23 + 2000
    monitor = BfastMonitor(float(t[40]), freq=23, history="all", engine="cpu").fit(data[:50], t[:50])
    with pytest.raises(ValueError, match=f"{n_images} images on the time axis but {n_dates} dates"):
        monitor.update(data[50:50 + n_images], t[50:50 + n_dates])
    monitor.save(tmp_path / "s.zarr")
    before = {p: p.read_bytes() for p in (tmp_path / "s.zarr").rglob("*") if p.is_file()}
    with pytest.raises(ValueError, match=f"{n_images} images on the time axis but {n_dates} dates"):
        update_saved(tmp_path / "s.zarr", data[50:50 + n_images], t[50:50 + n_dates])
    assert {p: p.read_bytes() for p in (tmp_path / "s.zarr").rglob("*") if p.is_file()} == before
    # the same images with their dates are taken, and equal the full run
    update_saved(tmp_path / "s.zarr", data[50:], t[50:])
    full = bfast_monitor(data, t, float(t[40]), freq=23, history="all", engine="cpu")
    assert int(BfastMonitor.load(tmp_path / "s.zarr").result().has_break.sum()) == int(full.has_break.sum())


# --------------------------------------------------------------------------------------
# 2. a half-written .zarr says so, and tscube's readers refuse it


def test_2_an_unfinished_zarr_says_so_and_is_refused(cube, tmp_path):
    out = tmp_path / "kp.zarr"
    env = dict(os.environ, TSCUBE_TEST_CHUNK_DELAY="0.4")
    n_finished = _run_and_kill(monitor_args(cube, out), out / RECORD_NAME, env)
    with quiet_zarr():
        stored = xr.open_zarr(out)
    status = stored["status"].values
    assert stored.attrs["tscube_complete"] == 0
    assert (status == -1).any() and (status != -1).any()  # unwritten chunks: status -1, not 0 (OK)
    assert 0 < n_finished
    for command in (["plot", out, "-o", tmp_path / "map.png"], ["cluster", out, "-k", 2, "-o", tmp_path / "c.tif"],
                    ["stl", out, "--period", 23, "-o", tmp_path / "stl.nc"]):
        refused = cli(*command)
        assert refused.exit_code == 1, refused.output
        assert "kp.zarr holds an unfinished run" in refused.output and "run the same command again" in refused.output
    with pytest.raises(RunIncomplete):
        tscube.plot.read_result(out)
    finished = cli(*monitor_args(cube, out))  # resumed: complete, readable
    assert finished.exit_code == 0, finished.output
    assert xr.open_zarr(out).attrs["tscube_complete"] == 1
    assert (tscube.plot.read_result(out)["status"].values >= 0).all()


# --------------------------------------------------------------------------------------
# 3. one lock for every writer of an output


def test_3_an_overwrite_is_refused_while_an_update_runs(tmp_path):
    from tscube.bfast.nrt import _store

    folder = scene_folder(tmp_path / "scenes", ndvi()[:50], DATES[:50])
    out = tmp_path / "a3.zarr"
    assert cli(*start_args(folder, out, "--update")).exit_code == 0
    scene_folder(folder, ndvi()[50:], DATES[50:])
    env = dict(os.environ, **{_store.PAUSE_ENV: "30"})
    process = subprocess.Popen([sys.executable, "-m", "tscube.cli", *map(str, start_args(folder, out, "--update"))],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 90
        while "updating a3.zarr" not in (line := process.stdout.readline()) and time.monotonic() < deadline:
            assert line or process.poll() is None, "the update ended before it could be raced"
        time.sleep(1.0)  # in its pause before the commit, holding the lock
        for extra in (["--overwrite"], ["--update"], ["--update", "--overwrite"], []):
            refused = cli(*start_args(folder, out, *extra))
            assert refused.exit_code == 1 and "another tscube run" in refused.output, (extra, refused.output)
        assert out.exists()
    finally:
        process.kill()
        process.wait()
        process.stdout.close()


def test_3_an_update_is_refused_while_a_plain_run_writes_the_output(cube, tmp_path):
    out = tmp_path / "b.zarr"
    env = dict(os.environ, TSCUBE_TEST_CHUNK_DELAY="1.0")
    process = subprocess.Popen([sys.executable, "-m", "tscube.cli", *map(str, monitor_args(cube, out))], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        while not (out / RECORD_NAME).exists() and time.monotonic() < deadline:
            assert process.poll() is None, "the run ended before it could be raced"
            time.sleep(0.05)
        for extra in (["--update"], ["--overwrite"], []):
            refused = cli(*monitor_args(cube, out, *extra))
            assert refused.exit_code == 1 and "another tscube run" in refused.output, (extra, refused.output)
    finally:
        process.kill()
        process.wait()


def test_3_a_writer_may_take_its_own_lock_again_but_no_other_thread(tmp_path):
    import threading

    out = tmp_path / "x.zarr"
    errors = []
    with exclusive_lock(out):
        with exclusive_lock(out):  # nested writers of one command
            pass

        def other():
            try:
                with exclusive_lock(out):
                    pass
            except OSError as exc:
                errors.append(exc)

        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
    assert len(errors) == 1 and "another tscube run" in str(errors[0])
    with exclusive_lock(out):  # released
        pass


# --------------------------------------------------------------------------------------
# 4. one reading of a date for every date input


def test_4_dates_files_refuse_day_month_orders(tmp_path, cube):
    ambiguous = tmp_path / "dates.txt"
    ambiguous.write_text("01/01/2000\n17/01/2000\n05/03/2000\n")
    with pytest.raises(CubeError, match="'01/01/2000' is not a date tscube reads unambiguously: write dates as "
                                        "YYYY-MM-DD"):
        read_dates(ambiguous)
    path, raw, dates = cube
    text = tmp_path / "stack-dates.txt"
    text.write_text("\n".join(f"{d:%d/%m/%Y}" for d in dates))
    refused = cli(*monitor_args(cube, tmp_path / "o.zarr", "--dates", text))
    assert refused.exit_code == 1 and "write dates as YYYY-MM-DD" in refused.output
    # ISO, year first and month names read the one way they can
    fine = tmp_path / "fine.txt"
    fine.write_text("2000-01-01\n2000/01/17\n2 February 2000\n20000218\n")
    assert list(read_dates(fine)) == list(pd.to_datetime(["2000-01-01", "2000-01-17", "2000-02-02", "2000-02-18"]))
    with pytest.raises(ValueError, match="write dates as YYYY-MM-DD"):  # the library's text dates too
        bfast_monitor(np.ones((3, 1)), ["01/01/2000", "17/01/2000", "05/03/2000"], "2000-03-01")


# --------------------------------------------------------------------------------------
# 5. the scenes of one series share their type and scale


def test_5_a_scene_of_another_type_is_refused(tmp_path):
    values = ndvi()
    folder = scene_folder(tmp_path / "scenes", values)
    odd = folder / f"ndvi_{DATES[30]:%Y%m%d}.tif"
    write_scene(odd, np.nan_to_num(values[30] * 10000, nan=-3000), dtype="int16", nodata=-3000)
    with pytest.raises(CubeError, match=rf"scene {odd.name}: int16 values, while \S+ holds float32"):
        open_cube(folder)
    refused = cli(*start_args(folder, tmp_path / "o.zarr"))
    assert refused.exit_code == 1 and f"scene {odd.name}: int16 values" in refused.output


def test_5_an_update_of_another_type_is_refused(tmp_path):
    values = ndvi()
    folder = scene_folder(tmp_path / "scenes", values[:50], DATES[:50])
    out = tmp_path / "a.zarr"
    assert cli(*start_args(folder, out, "--update")).exit_code == 0
    write_scene(folder / f"ndvi_{DATES[50]:%Y%m%d}.tif", np.nan_to_num(values[50] * 10000, nan=-3000),
                dtype="int16", nodata=-3000)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    refused = cli(*start_args(folder, out, "--update"))
    assert refused.exit_code == 1 and "the new scenes: int16 values, while a.zarr was fitted on float32" in (
        refused.output)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    # the library's state: integers after floats are refused, other floats taken
    t = np.arange(N_DATES) / 23 + 2000
    monitor = BfastMonitor(float(t[40]), freq=23, history="all", engine="cpu").fit(values[:50], t[:50])
    with pytest.raises(TypeError, match="the new images are int16, the state was fitted on float32 images"):
        monitor.update((values[50:51] * 10000).astype(np.int16), t[50:51])
    monitor.update(values[50:51].astype(np.float64), t[50:51])


# --------------------------------------------------------------------------------------
# 6. a file that cannot be read or written is named, with the cause


def test_6_a_corrupt_scene_is_named(tmp_path):
    folder = scene_folder(tmp_path / "scenes", ndvi())
    cut = folder / f"ndvi_{DATES[20]:%Y%m%d}.tif"
    with open(cut, "r+b") as handle:  # the end of its compressed pixels gone, its header whole
        handle.truncate(cut.stat().st_size - 16)
    result = cli(*start_args(folder, tmp_path / "o.zarr"))
    assert result.exit_code == 1
    assert f"cannot read {cut.name}" in result.output and "previous exception" not in result.output


def test_6_a_write_failure_names_the_file_and_the_cause(tmp_path, monkeypatch):
    """GDAL's "Write failed. See previous exception" becomes the file and the chained cause."""
    from rasterio.errors import RasterioIOError

    from tscube import io

    def full_disk(ds, tmp):
        try:
            raise OSError(28, "No space left on device")
        except OSError as cause:
            raise RasterioIOError("Write failed. See previous exception for details.") from cause

    monkeypatch.setattr(io, "_write_geotiff", full_disk)
    ds = xr.Dataset({"status": (("y", "x"), np.zeros((2, 2), np.int8))})
    with pytest.raises(OSError, match=r"cannot write out\.tif: \[Errno 28\] No space left on device"):
        write_result(ds, tmp_path / "out.tif")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0 or sys.platform != "linux", reason="mounting a small tmpfs needs root on Linux")
def test_6_a_full_disk_while_assembling_a_tif_is_named(tmp_path, cube):
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24k", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        result = cli(*monitor_args(cube, disk / "breaks.tif"))
        assert result.exit_code == 1
        assert ("No space left on device" in result.output or "no space" in result.output.lower()), result.output
        assert "See previous exception" not in result.output
    finally:
        subprocess.run(["umount", str(disk)], check=False)


# --------------------------------------------------------------------------------------
# 7. float16 is taken everywhere, as float32


def test_7_float16_is_taken_as_float32_everywhere(tmp_path):
    values = ndvi()
    half = values.astype(np.float16)
    t = np.arange(N_DATES) / 23 + 2000
    for function, kwargs in ((bfast_monitor, dict(start=float(t[40]), history="all")), (bfast_lite, {})):
        from_half = function(half, t, freq=23, engine="cpu", **kwargs)
        from_single = function(half.astype(np.float32), t, freq=23, engine="cpu", **kwargs)
        np.testing.assert_array_equal(from_half.status, from_single.status)
        np.testing.assert_array_equal(from_half.break_index, from_single.break_index)
        np.testing.assert_array_equal(from_half.magnitude, from_single.magnitude)
    monitor = BfastMonitor(float(t[40]), freq=23, history="all", engine="cpu").fit(half[:50], t[:50])
    monitor.update(half[50:], t[50:])
    da = xr.DataArray(half, dims=("time", "y", "x"), coords={"time": DATES, "y": np.arange(ROWS), "x": np.arange(COLS)},
                      name="ndvi")
    da.to_dataset().to_netcdf(tmp_path / "half.nc")
    result = cli(*start_args(tmp_path / "half.nc", tmp_path / "o.zarr"))
    assert result.exit_code == 0, result.output


# --------------------------------------------------------------------------------------
# 8. inputs are only ever read


def test_8_an_input_is_never_an_output(tmp_path, cube):
    folder = scene_folder(tmp_path / "scenes", ndvi())
    scene = folder / f"ndvi_{DATES[0]:%Y%m%d}.tif"
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    for output in (scene, folder / "result.zarr"):
        refused = cli(*start_args(folder, output, "--overwrite"))
        assert refused.exit_code == 1, refused.output
        assert ("is the input" in refused.output) or ("inside the input folder" in refused.output)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before  # no scene replaced, no lock file left
    out = tmp_path / "out.tif"
    assert cli(*monitor_args(cube, out)).exit_code == 0
    record, result = record_path(out).read_bytes(), out.read_bytes()
    refused = cli("cluster", out, "-k", 3, "-o", out)
    assert refused.exit_code == 1 and "is the input" in refused.output
    assert out.read_bytes() == result and record_path(out).read_bytes() == record
    # a cluster output that exists needs --overwrite; its stale run record goes with it
    labels = tmp_path / "labels.tif"
    assert cli("cluster", out, "-k", 2, "-o", labels, "--method", "kmeans", "--engine", "cpu").exit_code == 0
    again = cli("cluster", out, "-k", 2, "-o", labels, "--method", "kmeans", "--engine", "cpu")
    assert again.exit_code == 1 and "pass --overwrite" in again.output
    copied = tmp_path / "copy.tif"
    copied.write_bytes(result)
    record_path(copied).write_bytes(record)
    replaced = cli("cluster", out, "-k", 2, "-o", copied, "--method", "kmeans", "--engine", "cpu", "--overwrite")
    assert replaced.exit_code == 0, replaced.output
    assert not record_path(copied).exists()


# --------------------------------------------------------------------------------------
# 9. network reads time out; a web catalog does not read local files


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    from tscube.datasets import make_stac_catalog

    folder = tmp_path_factory.mktemp("stac")
    make_stac_catalog(folder, n_dates=6, tile_shape=(8, 8), overlap=4, seed=1)
    return folder


def test_9_a_frozen_stac_server_ends_the_run(catalog, tmp_path):
    from tscube.datasets import serve_folder
    from tscube.io import open_stac

    with serve_folder(catalog, stall=lambda path: path.endswith(".tif")) as (url, _):
        began = time.monotonic()
        result = cli("monitor", f"{url}/catalog.json", "--start", "2021-04-20", "-o", tmp_path / "a.zarr",
                     "--timeout", 2, "--no-progress")
        assert time.monotonic() - began < 60  # GDAL's few retries of each read, not minutes of them
        assert result.exit_code == 1 and f"cannot read asset {url}/" in result.output and "--timeout" in result.output
        began = time.monotonic()
        with pytest.raises(Exception):  # the library: the read fails, in time
            open_stac(f"{url}/catalog.json", timeout=2).values
        assert time.monotonic() - began < 60
    with serve_folder(catalog, stall=lambda path: path.endswith(".json")) as (url, _):
        began = time.monotonic()
        result = cli("info", f"{url}/catalog.json", "--timeout", 2)
        assert result.exit_code == 1 and f"{url}/catalog.json" in result.output and "timed out" in result.output
        assert time.monotonic() - began < 60


def test_9_a_web_catalog_may_not_name_local_files(catalog, tmp_path):
    import json
    import shutil

    from tscube import config
    from tscube.datasets import serve_folder
    from tscube.io import StacError, open_stac

    served = tmp_path / "served"
    shutil.copytree(catalog, served)
    items = sorted(served.rglob("*.json"))
    item_path = next(p for p in items if json.loads(p.read_text()).get("type") == "Feature")
    item = json.loads(item_path.read_text())
    key = "nir"  # an asset NDVI reads
    item["assets"][key]["href"] = (catalog / "secret.tif").as_uri()
    item_path.write_text(json.dumps(item))
    with serve_folder(served) as (url, _):
        with pytest.raises(StacError, match="does not read local files"):
            open_stac(f"{url}/catalog.json")
        config.STAC_LOCAL_HREFS_FROM_WEB = True
        try:
            with pytest.raises(Exception) as opted_in:  # allowed: the asset is then read (and is missing)
                open_stac(f"{url}/catalog.json").values
            assert "does not read local files" not in str(opted_in.value)
        finally:
            config.reset()


# --------------------------------------------------------------------------------------
# smaller cases


def test_a_multi_start_tif_can_be_plotted(cube, tmp_path):
    _, raw, dates = cube
    out = tmp_path / "starts.tif"
    starts = bfast_monitor(raw, dates, [dates[40], dates[45]], freq=23, nodata=-3000, history="all", engine="cpu")
    ds = xr.Dataset({name: (("start", "y", "x"), array) for name, array in starts.to_dict().items()},
                    coords={"y": np.arange(ROWS), "x": np.arange(COLS)}, attrs={"tscube_function": "bfast_monitor"})
    ds = ds.rio.write_crs("EPSG:32633").rio.write_transform(TRANSFORM)
    write_result(ds, out)
    for index in (0, 1):
        plotted = cli("plot", out, "-o", tmp_path / f"map{index}.png", "--start-index", index)
        assert plotted.exit_code == 0, plotted.output


def test_b_a_start_index_the_result_lacks_is_refused(cube, tmp_path):
    out = tmp_path / "one.zarr"
    assert cli(*monitor_args(cube, out)).exit_code == 0
    refused = cli("plot", out, "-o", tmp_path / "m.png", "--start-index", 5)
    assert refused.exit_code == 1 and "holds one monitoring start (index 0)" in refused.output


def test_c_series_over_time_are_not_written_to_a_tif(cube, tmp_path):
    refused = cli(*monitor_args(cube, tmp_path / "p.tif", "--process"))
    assert refused.exit_code == 1 and "write .nc or .zarr" in refused.output
    assert not (tmp_path / "p.tif").exists()
    ds = xr.Dataset({"status": (("y", "x"), np.zeros((2, 2), np.int8)),
                     "process": (("time", "y", "x"), np.zeros((3, 2, 2)))},
                    coords={"time": pd.date_range("2000-01-01", periods=3), "y": [1.0, 0.0], "x": [0.0, 1.0]})
    ds = ds.rio.write_crs("EPSG:32633")
    with pytest.warns(UserWarning, match="process not written"):
        write_result(ds, tmp_path / "s.tif")
    with rasterio.open(tmp_path / "s.tif") as src:
        assert src.count == 1 and src.descriptions == ("status",)


def test_d_the_refusals_docs_io_lists_are_refused(cube, tmp_path):
    """docs/io.md names examples of parameter values the algorithms do not support."""
    import re

    text = (Path(__file__).resolve().parents[1] / "docs" / "io.md").read_text()
    listed = re.search(r"parameter values the algorithms do not support \(([^)]*)\)", text.replace("\n", " "))[1]
    examples = re.findall(r"`(--[a-z-]+) ([^`]+)`", listed)
    assert len(examples) >= 3
    for option, value in examples:
        refused = cli(*monitor_args(cube, tmp_path / "x.zarr", option, value))
        assert refused.exit_code == 1, (option, value, refused.output)


def test_e_a_refused_run_leaves_no_file_in_the_input_folder(tmp_path):
    folder = scene_folder(tmp_path / "scenes", ndvi())
    names = sorted(p.name for p in folder.iterdir())
    refused = cli(*start_args(folder, folder / "out.tif"))
    assert refused.exit_code == 1
    assert sorted(p.name for p in folder.iterdir()) == names


def test_f_dates_on_one_slot_of_another_freq_are_named(tmp_path):
    folder = scene_folder(tmp_path / "scenes", ndvi())
    refused = cli("monitor", folder, "--start", f"{DATES[40]:%Y-%m-%d}", "--freq", 12, "-o", tmp_path / "a.zarr",
                  "--update", "--no-progress")
    assert refused.exit_code == 1
    assert "fall on the same slot of the time grid of freq=12 (one slot per month)" in refused.output
    assert "duplicate" not in refused.output


def test_g_a_cluster_output_of_another_kind_is_refused_before_clustering(cube, tmp_path, monkeypatch):
    from tscube.cli import cluster as cluster_cli

    def never(*args, **kwargs):
        raise AssertionError("clustered before the output was checked")

    monkeypatch.setattr(cluster_cli, "run_cluster", never)
    refused = cli("cluster", cube[0], "-k", 2, "-o", tmp_path / "x.png")
    assert refused.exit_code == 1 and "unsupported suffix '.png' (use .tif)" in refused.output


def test_h_a_monitor_before_fit_says_so():
    monitor = BfastMonitor("2010-01-01", freq=23)
    for call in (monitor.result, monitor.to_dataset, lambda: monitor.save("x.zarr"),
                 lambda: monitor.update(np.ones((1, 2)), [2011.0])):
        with pytest.raises(RuntimeError, match=r"call fit\(\) before"):
            call()


def test_the_input_guard_passes_outputs_beside_the_input_and_urls(tmp_path):
    folder = tmp_path / "scenes"
    folder.mkdir()
    check_apart_from_inputs(tmp_path / "out.zarr", folder, "https://example.com/catalog.json")
    with pytest.raises(ValueError, match="inside the input folder"):
        check_apart_from_inputs(folder / "sub" / "out.zarr", folder)
    with pytest.raises(ValueError, match="holds the input"):
        check_apart_from_inputs(tmp_path, folder)
