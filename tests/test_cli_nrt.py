"""``tscube monitor --update``: a growing input monitored date by date equals the full run;
refusals; kill -9 before an update's commit and a death while it writes the result; the
previous state stays whole."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

xr = pytest.importorskip("xarray")
rasterio = pytest.importorskip("rasterio")
pytest.importorskip("zarr")

from rasterio.transform import from_origin  # noqa: E402

from tscube import bfast_monitor  # noqa: E402
from tscube.bfast.nrt import _store as _nrt_store  # noqa: E402
from tscube.runs import quiet_zarr  # noqa: E402

from test_bfast_nrt import assert_equal_to_full_run  # noqa: E402
from test_runs import tree_bytes, tscube  # noqa: E402

NODATA = -3000
N_DATES, ROWS, COLS = 64, 6, 8
DATES = pd.DatetimeIndex([pd.Timestamp(2000 + i // 23, 1, 1) + pd.Timedelta(days=16 * (i % 23))
                          for i in range(N_DATES)])
START = DATES[40]


@pytest.fixture(scope="module")
def raw():
    """int16 values with nodata gaps, a drop in a corner from date 46 on, one all-missing pixel."""
    rng = np.random.default_rng(11)
    t = np.arange(N_DATES)
    values = 6000 + 1500 * np.sin(2 * np.pi * t / 23)[:, None, None] + rng.normal(0, 150, (N_DATES, ROWS, COLS))
    values[46:, :3, :4] -= 2500
    raw = np.rint(values).astype(np.int16)
    raw[rng.random(raw.shape) < 0.15] = NODATA
    raw[:, 5, 7] = NODATA
    return raw


def write_stack(path, raw, dates):
    """A multi-band GeoTIFF of ``raw`` with one band description (date) per band, atomically."""
    tmp = path.with_name(f".{path.name}.tmp")
    with rasterio.open(tmp, "w", driver="GTiff", width=COLS, height=ROWS, count=len(dates), dtype="int16",
                       crs="EPSG:32633", transform=from_origin(500_000.0, 4_000_000.0, 30.0, 30.0),
                       nodata=NODATA) as dst:
        dst.write(raw)
        for i, date in enumerate(dates):
            dst.set_band_description(i + 1, f"{date:%Y-%m-%d}")
    os.replace(tmp, path)
    return path


def update_args(stack, output, *extra):
    return ["monitor", stack, "--start", f"{START:%Y-%m-%d}", "--freq", 23, "--history", "ROC", "-o", output,
            "--update", "--engine", "cpu", "--memory", "24kB", "--no-progress", *extra]


def grow(tmp_path, raw, until):
    return write_stack(tmp_path / "stack.tif", raw[:until], DATES[:until])


def full_run(raw, until):
    return bfast_monitor(raw[:until], DATES[:until], START, freq=23, history="ROC", nodata=NODATA, engine="cpu")


class _Stored:
    """The result variables of a state store, as attributes (for assert_equal_to_full_run)."""

    def __init__(self, path):
        with quiet_zarr(), xr.open_zarr(path, consolidated=False) as ds:
            self.ds = ds.load()

    def __getattr__(self, name):
        return self.ds[name].values


@pytest.mark.parametrize("fit_at, steps", [(44, [64]), (44, [45, 64]), (41, [42, 43, 44, 45, 50, 55, 64])])
def test_updates_equal_the_full_run(tmp_path, raw, fit_at, steps):
    """Fit at 44 (or 41: one monitoring date) dates, then updates in 1, 2 and 7 steps
    (int16, nodata, ROC history)."""
    out = tmp_path / "alerts.zarr"
    first = tscube(*update_args(grow(tmp_path, raw, fit_at), out))
    assert first.exit_code == 0, first.output
    assert "alerts (first break among the new dates)" in first.output
    for until in steps:
        before = _Stored(out).break_index
        result = tscube(*update_args(grow(tmp_path, raw, until), out))
        assert result.exit_code == 0, result.output
        assert "updating alerts.zarr" in result.output
        stored = _Stored(out)
        assert_equal_to_full_run(stored, full_run(raw, until), raw[:until], rtol=1e-10)
        np.testing.assert_array_equal(stored.alert, (before < 0) & (stored.break_index >= 0))
        np.testing.assert_array_equal(_nrt_store.state_dates(out), DATES[:until].values)
    assert np.count_nonzero(stored.break_index >= 0) > 0
    again = tscube(*update_args(grow(tmp_path, raw, 64), out))
    assert again.exit_code == 0 and "up to date" in again.output


def test_calibrated_state_updates_as_in_python(tmp_path, raw):
    """--update --calibrate: the chunked fit stores each pixel's calibrated critical value
    (for the horizon --end), the updates keep it, and the result equals
    BfastMonitor(calibrate=True) over the same dates; an update without --calibrate is
    refused."""
    from tscube.bfast.nrt import BfastMonitor

    out = tmp_path / "alerts.zarr"
    extra = ("--calibrate", "--end", "2")
    assert tscube(*update_args(grow(tmp_path, raw, 44), out, *extra)).exit_code == 0
    result = tscube(*update_args(grow(tmp_path, raw, 64), out, *extra))
    assert result.exit_code == 0, result.output
    assert "calibrated critical values for monitoring until end = 2 history periods" in result.output
    stored = _Stored(out)
    monitor = BfastMonitor(START, freq=23, history="ROC", nodata=NODATA, end=2, calibrate=True, engine="cpu")
    monitor.fit(raw[:44], DATES[:44]).update(raw[44:], DATES[44:])
    expected = monitor.result()
    np.testing.assert_allclose(stored.critval, expected.critval, rtol=1e-12, equal_nan=True)
    np.testing.assert_array_equal(stored.break_index, expected.break_index)
    assert np.isfinite(stored.critval).sum() >= 40 and stored.ds.attrs["calibrate"]
    refused = tscube(*update_args(grow(tmp_path, raw, 64), out, "--end", "2"))
    assert refused.exit_code != 0 and "calibrate (True -> False)" in refused.output


def test_update_keeps_the_process_type(tmp_path, raw):
    """``--type OLS-CUSUM`` with ``--update``: the state runs the CUSUM process (it was
    dropped: the update's model did not take --type or --season), its updates equal the
    full CUSUM run, and an update asking for the other process is refused."""
    out = tmp_path / "alerts.zarr"
    first = tscube(*update_args(grow(tmp_path, raw, 50), out, "--type", "OLS-CUSUM"))
    assert first.exit_code == 0, first.output
    result = tscube(*update_args(grow(tmp_path, raw, 64), out, "--type", "OLS-CUSUM"))
    assert result.exit_code == 0, result.output
    stored = _Stored(out)
    assert stored.ds.attrs["type"] == "OLS-CUSUM"
    full = bfast_monitor(raw, DATES, START, freq=23, history="ROC", nodata=NODATA, type="OLS-CUSUM", engine="cpu")
    assert_equal_to_full_run(stored, full, raw, rtol=1e-10)
    other = tscube(*update_args(grow(tmp_path, raw, 64), out))
    assert other.exit_code != 0 and "type ('OLS-CUSUM' -> 'OLS-MOSUM')" in other.output


def test_refusals_leave_the_state_alone(tmp_path, raw):
    out = tmp_path / "alerts.zarr"
    assert tscube(*update_args(grow(tmp_path, raw, 50), out)).exit_code == 0
    before = tree_bytes(out)
    stack = grow(tmp_path, raw, 55)

    plain = tscube(*update_args(stack, out)[:-6], "--engine", "cpu", "--memory", "24kB", "--no-progress")
    assert plain.exit_code != 0 and "--update" in plain.output

    changed = tscube(*update_args(stack, out, "--h", 0.5))
    assert changed.exit_code != 0
    assert "fitted with other parameters: h (0.25 -> 0.5)" in changed.output and len(changed.output.splitlines()) == 2

    history = tscube(*update_args(stack, out, "--history", "all"))
    assert history.exit_code != 0 and "history ('ROC' -> 'all')" in history.output

    odd_dates = DATES[:55].delete(30).insert(30, DATES[30] + pd.Timedelta(days=3))  # a date the state has not
    older = write_stack(tmp_path / "odd.tif", raw[:55], odd_dates)
    refused = tscube(*update_args(older, out))
    assert refused.exit_code != 0 and "a state only takes newer images" in refused.output
    assert tree_bytes(out) == before

    not_zarr = tscube(*update_args(stack, tmp_path / "alerts.tif"))
    assert not_zarr.exit_code != 0 and "needs a .zarr output" in not_zarr.output


@pytest.fixture(scope="module")
def updated(raw, tmp_path_factory):
    """A state fitted at 50 dates (copied by the tests) and the same state updated to 64, uninterrupted."""
    folder = tmp_path_factory.mktemp("nrt")
    fitted = folder / "fitted.zarr"
    assert tscube(*update_args(write_stack(folder / "stack50.tif", raw[:50], DATES[:50]), fitted)).exit_code == 0
    stack = write_stack(folder / "stack.tif", raw, DATES)
    done = folder / "updated.zarr"
    shutil.copytree(fitted, done)
    result = tscube(*update_args(stack, done))
    assert result.exit_code == 0, result.output
    return fitted, stack, done


def _committed(out):
    """The committed state of ``out`` (arrays, dates, generation) and its result's bytes."""
    state, dates, generation = _nrt_store.load_state(out)
    result = {path: data for path, data in tree_bytes(out).items() if _nrt_store.STATE_DIR not in str(path)}
    return state, dates, generation, result


def _assert_same_state(a, b):
    for name in a[0]:
        np.testing.assert_array_equal(a[0][name], b[0][name], err_msg=name)
    np.testing.assert_array_equal(a[1], b[1])
    assert a[2] == b[2] and a[3] == b[3]


def test_killed_update_resumes_to_byte_identical_state(updated, tmp_path):
    """kill -9 between the update's writes and its commit: the committed state is the
    previous one and the result says it is being rewritten; the same command rewrites the
    result and finishes the same update, same bytes."""
    fitted, stack, done = updated
    out = tmp_path / "alerts.zarr"
    shutil.copytree(fitted, out)
    previous = _committed(out)
    residuals = _nrt_store.state_dir(out) / _nrt_store.RESIDUALS
    size = residuals.stat().st_size
    env = dict(os.environ, **{_nrt_store.PAUSE_ENV: "30"})
    process = subprocess.Popen([sys.executable, "-m", "tscube.cli", *map(str, update_args(stack, out))], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while residuals.stat().st_size == size and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.02)
        assert residuals.stat().st_size > size, "the update did not start writing"
        time.sleep(0.5)
        process.send_signal(signal.SIGKILL)
    finally:
        process.kill()
        process.wait()
    _assert_same_state(_committed(out)[:3] + (None,), previous[:3] + (None,))  # written, not committed
    assert _nrt_store.result_generation(out) == -1  # the result: being rewritten (before the commit)

    result = tscube(*update_args(stack, out))
    assert result.exit_code == 0, result.output
    assert "rewrote the result" in result.output and "updating alerts.zarr" in result.output
    assert tree_bytes(out) == tree_bytes(done)


def test_update_killed_while_writing_the_result_is_repaired(updated, tmp_path, monkeypatch):
    """An update that committed its state but died before its result said so (and with a
    part of it spoilt): the next run rewrites the result (it shows the committed state),
    same bytes as uninterrupted."""
    fitted, stack, done = updated
    out = tmp_path / "alerts.zarr"
    shutil.copytree(fitted, out)
    real_mark = _nrt_store._mark_result

    def die_after_the_commit(root, group, *args):
        group["magnitude"][...] = np.nan
        raise SystemExit("killed")

    monkeypatch.setattr(_nrt_store, "_mark_result", die_after_the_commit)
    crashed = tscube(*update_args(stack, out))
    assert crashed.exit_code != 0
    monkeypatch.setattr(_nrt_store, "_mark_result", real_mark)
    assert _nrt_store.result_generation(out) == -1 and _nrt_store.read_manifest(out)["generation"] == 1

    result = tscube(*update_args(stack, out))
    assert result.exit_code == 0, result.output
    assert "rewrote the result" in result.output and "up to date" in result.output
    assert tree_bytes(out) == tree_bytes(done)


def test_open_cube_reads_only_the_selected_dates_of_a_folder(tmp_path, raw):
    """What an update reads of a folder of scenes: the new files only (``open_cube(times=)``)."""
    from tscube.io import open_cube

    folder = tmp_path / "scenes"
    folder.mkdir()
    for i in (3, 7, 9):
        write_stack(folder / f"scene_{DATES[i]:%Y%m%d}.tif", raw[[i]], DATES[[i]])
    whole = open_cube(folder, date_pattern="%Y%m%d")
    part = open_cube(folder, date_pattern="%Y%m%d", times=[2])
    assert part.attrs["source_files"] == [f"scene_{DATES[9]:%Y%m%d}.tif"]
    np.testing.assert_array_equal(part.values, whole.values[[2]])
    np.testing.assert_array_equal(part["time"].values, whole["time"].values[[2]])


def test_update_of_a_folder_opens_only_the_new_scenes(tmp_path, raw):
    """An update of a folder whose file names hold the dates takes the dates from the names
    and opens only the new files: old scenes that can no longer be read (archived,
    truncated) do not matter, and the result is the one from a readable folder."""
    scenes = tmp_path / "scenes"
    scenes.mkdir()
    for i in range(52):
        write_stack(scenes / f"scene_{DATES[i]:%Y%m%d}.tif", raw[[i]], DATES[[i]])
    out, whole = tmp_path / "alerts.zarr", tmp_path / "whole.zarr"
    args = ["--date-pattern", "%Y%m%d"]
    assert tscube(*update_args(scenes, out, *args)).exit_code == 0
    shutil.copytree(out, whole)
    for i in range(52, 55):
        write_stack(scenes / f"scene_{DATES[i]:%Y%m%d}.tif", raw[[i]], DATES[[i]])
    readable = tscube(*update_args(scenes, whole, *args))
    assert readable.exit_code == 0, readable.output
    for i in range(52):  # the old scenes become unreadable
        (scenes / f"scene_{DATES[i]:%Y%m%d}.tif").write_bytes(b"archived")
    result = tscube(*update_args(scenes, out, *args))
    assert result.exit_code == 0, result.output
    assert "55 dates" in result.output and "from the file names" in result.output
    assert "updating alerts.zarr: 3 new date(s)" in result.output
    assert tree_bytes(out) == tree_bytes(whole)
    assert_equal_to_full_run(_Stored(out), full_run(raw, 55), raw[:55], rtol=1e-10)
    # a new scene on a grid shifted by one pixel (same size) is refused, the state kept
    shifted = scenes / f"scene_{DATES[55]:%Y%m%d}.tif"
    with rasterio.open(shifted, "w", driver="GTiff", width=COLS, height=ROWS, count=1, dtype="int16",
                       crs="EPSG:32633", transform=from_origin(500_030.0, 4_000_000.0, 30.0, 30.0),
                       nodata=NODATA) as dst:
        dst.write(raw[55:56])
    before = tree_bytes(out)
    refused = tscube(*update_args(scenes, out, *args))
    assert refused.exit_code != 0 and "x coordinates are not those of alerts.zarr" in refused.output
    assert tree_bytes(out) == before


def test_folder_dates_from_the_file_names(tmp_path, raw):
    """The sorted dates of a folder from its file names alone; None where a name holds no
    date (open_cube then reads the file's tags) or for other inputs; duplicates refused."""
    from tscube.io import CubeError, folder_dates

    folder = tmp_path / "scenes"
    folder.mkdir()
    for i in (9, 3, 7):
        (folder / f"scene_{DATES[i]:%Y%m%d}.tif").write_bytes(b"not opened")
    np.testing.assert_array_equal(folder_dates(folder, "%Y%m%d"), DATES[[3, 7, 9]])
    assert folder_dates(tmp_path / "nothing.zarr") is None and folder_dates(tmp_path / "a.tif") is None
    (folder / f"copy_{DATES[3]:%Y%m%d}.tif").write_bytes(b"")
    with pytest.raises(CubeError, match="duplicate date"):
        folder_dates(folder, "%Y%m%d")
    (folder / f"copy_{DATES[3]:%Y%m%d}.tif").unlink()
    (folder / "undated.tif").write_bytes(b"")
    assert folder_dates(folder, "%Y%m%d") is None
