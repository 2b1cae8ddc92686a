"""Resumable production runs: kill and resume, byte-identical outputs, refusals, untouched inputs."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

xr = pytest.importorskip("xarray")
rasterio = pytest.importorskip("rasterio")
pytest.importorskip("rioxarray")
pytest.importorskip("zarr")

from rasterio.transform import from_origin  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from tscube.bfast import bfast_monitor  # noqa: E402
from tscube.cli import app  # noqa: E402
from tscube.runs import RECORD_NAME, chunk_store_path, record_path  # noqa: E402

NODATA = -3000
runner = CliRunner()


def tscube(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def cube(tmp_path_factory):
    """A dated multi-band GeoTIFF (int16, nodata gaps, a drop in some pixels) and its contents."""
    rng = np.random.default_rng(11)
    n_dates, rows, cols = 60, 6, 8
    dates = pd.DatetimeIndex([pd.Timestamp(2000 + i // 23, 1, 1) + pd.Timedelta(days=16 * (i % 23))
                              for i in range(n_dates)])
    t = np.arange(n_dates)
    values = 6000 + 1500 * np.sin(2 * np.pi * t / 23)[:, None, None] + rng.normal(0, 150, (n_dates, rows, cols))
    values[46:, :3, :4] -= 2500
    raw = np.rint(values).astype(np.int16)
    raw[rng.random(raw.shape) < 0.15] = NODATA
    raw[:, 5, 7] = NODATA  # one all-missing pixel
    path = tmp_path_factory.mktemp("runs") / "stack.tif"
    with rasterio.open(path, "w", driver="GTiff", width=cols, height=rows, count=n_dates, dtype="int16",
                       crs="EPSG:32633", transform=from_origin(500_000.0, 4_000_000.0, 30.0, 30.0),
                       nodata=NODATA) as dst:
        dst.write(raw)
        for i, date in enumerate(dates):
            dst.set_band_description(i + 1, f"{date:%Y-%m-%d}")
    return path, raw, dates


def monitor_args(cube, output, *extra):
    path, _, dates = cube
    return ["monitor", path, "--start", f"{dates[40]:%Y-%m-%d}", "--freq", 23, "--history", "all", "-o", output,
            "--engine", "reference", "--memory", "24kB", "--no-progress", *extra]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tree_bytes(path: Path) -> dict[str, bytes]:
    """Every file of an output (a file, or a Zarr folder), by relative name; the run record aside."""
    if path.is_file():
        return {path.name: path.read_bytes()}
    return {str(f.relative_to(path)): f.read_bytes() for f in sorted(path.rglob("*"))
            if f.is_file() and f.name != RECORD_NAME}


@pytest.fixture(scope="module")
def uninterrupted(cube, tmp_path_factory):
    """Outputs of uninterrupted runs (.zarr and .tif)."""
    folder = tmp_path_factory.mktemp("uninterrupted")
    outputs = {}
    for suffix in (".zarr", ".tif", ".nc"):
        out = folder / f"breaks{suffix}"
        result = tscube(*monitor_args(cube, out))
        assert result.exit_code == 0, result.output
        outputs[suffix] = out
    return outputs


def test_uninterrupted_run_equals_the_library(cube, uninterrupted):
    _, raw, dates = cube
    expected = bfast_monitor(raw, dates, dates[40], freq=23, history="all", nodata=NODATA, engine="reference")
    back = xr.open_zarr(uninterrupted[".zarr"])
    for name, array in expected.to_dict().items():
        np.testing.assert_array_equal(back[name].values, array, err_msg=name)
    record = json.loads((uninterrupted[".zarr"] / RECORD_NAME).read_text())
    assert len(record["finished"]) > 3  # the test cube is really split into chunks
    # the run summary: in the record and (deterministic part) in the output's attributes
    counts = expected.status_counts()
    assert record["summary"]["status_counts"] == counts
    assert record["summary"]["breaks"] == int(expected.has_break.sum())
    assert record["summary"]["pixels"] == raw.shape[1] * raw.shape[2]
    assert record["summary"]["pixels_per_second"] > 0
    assert back.attrs["breaks_found"] == int(expected.has_break.sum())
    assert back.attrs["pixels_processed"] == raw.shape[1] * raw.shape[2]
    assert "ALL_MISSING: 1" in back.attrs["status_counts"]
    # a .tif run leaves the result and its record, no sidecar store
    tif = uninterrupted[".tif"]
    assert not chunk_store_path(tif).exists() and record_path(tif).exists()
    with rasterio.open(tif) as src:
        assert src.tags()["tscube_breaks_found"] == str(int(expected.has_break.sum()))


def _run_and_kill(args: list, record: Path, env: dict) -> int:
    """Start the CLI in a subprocess, SIGKILL it once the record shows a finished chunk; finished chunks."""
    process = subprocess.Popen([sys.executable, "-m", "tscube.cli", *map(str, args)], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            if record.exists():
                try:
                    finished = json.loads(record.read_text())["finished"]
                except (ValueError, KeyError):
                    finished = {}
                if finished:
                    process.send_signal(signal.SIGKILL)
                    process.wait()
                    return len(finished)
            if process.poll() is not None:
                pytest.fail(f"the run ended before it could be killed: {process.stderr.read().decode()[-2000:]}")
            time.sleep(0.02)
        pytest.fail("no chunk finished within 60 s")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stderr.close()


@pytest.mark.parametrize("suffix", [".zarr", ".tif", ".nc"])
def test_killed_run_resumes_to_byte_identical_output(cube, uninterrupted, tmp_path, suffix):
    input_hash = sha256(cube[0])
    out = tmp_path / f"breaks{suffix}"
    args = monitor_args(cube, out)
    in_progress = chunk_store_path(out) / RECORD_NAME
    env = dict(os.environ, TSCUBE_TEST_CHUNK_DELAY="0.4")
    n_finished = _run_and_kill(args, in_progress, env)

    killed = json.loads(in_progress.read_text())
    n_chunks = int(np.prod([len(c) for c in killed["grid"]["chunks"]]))
    assert 1 <= n_finished < n_chunks
    assert not killed["complete"]
    if suffix != ".zarr":
        assert not out.exists()  # a .tif or .nc is only assembled at the end

    result = tscube(*args)  # the same arguments again
    assert result.exit_code == 0, result.output
    assert "resuming" in result.output

    record = json.loads(record_path(out).read_text())
    first, second = (set(s["computed"]) for s in record["sessions"])
    assert first == {int(k) for k in killed["finished"]}
    assert not first & second  # no finished chunk computed again
    assert first | second == set(range(n_chunks))
    assert tree_bytes(out) == tree_bytes(uninterrupted[suffix])
    assert sha256(cube[0]) == input_hash  # the input is only read


def test_finished_run_is_not_recomputed(cube, tmp_path):
    out = tmp_path / "breaks.zarr"
    assert tscube(*monitor_args(cube, out)).exit_code == 0
    before = tree_bytes(out)
    again = tscube(*monitor_args(cube, out))
    assert again.exit_code == 0, again.output
    assert "nothing to compute" in again.output and "written" not in again.output
    assert len(json.loads((out / RECORD_NAME).read_text())["sessions"]) == 1
    assert tree_bytes(out) == before


@pytest.mark.parametrize("suffix", [".zarr", ".tif"])
def test_other_parameters_are_refused_unless_overwrite(cube, tmp_path, suffix):
    input_hash = sha256(cube[0])
    out = tmp_path / f"breaks{suffix}"
    assert tscube(*monitor_args(cube, out)).exit_code == 0
    before = tree_bytes(out)

    refused = tscube(*monitor_args(cube, out, "--h", 0.5))
    assert refused.exit_code != 0
    assert "params.h (0.25 -> 0.5)" in refused.output and "--overwrite" in refused.output
    assert tree_bytes(out) == before

    replaced = tscube(*monitor_args(cube, out, "--h", 0.5, "--overwrite"))
    assert replaced.exit_code == 0, replaced.output
    record = json.loads(record_path(out).read_text())
    assert record["params"]["h"] == 0.5 and record["complete"]
    _, raw, dates = cube
    expected = bfast_monitor(raw, dates, dates[40], freq=23, h=0.5, history="all", nodata=NODATA, engine="reference")
    if suffix == ".zarr":
        np.testing.assert_array_equal(xr.open_zarr(out)["statistic"].values, expected.statistic)
    assert sha256(cube[0]) == input_hash


def test_in_progress_run_with_other_parameters_is_refused(cube, tmp_path):
    out = tmp_path / "breaks.tif"
    env = dict(os.environ, TSCUBE_TEST_CHUNK_DELAY="0.4")
    _run_and_kill(monitor_args(cube, out), chunk_store_path(out) / RECORD_NAME, env)
    refused = tscube(*monitor_args(cube, out, "--order", 1))
    assert refused.exit_code != 0
    assert "params.order (3 -> 1)" in refused.output
    assert chunk_store_path(out).exists() and not out.exists()  # the partial run is kept


def test_a_run_of_another_tscube_with_other_outputs_is_not_resumed(cube, tmp_path):
    """A killed run whose store was made for other result variables (an older tscube,
    before ``critval``) is refused, naming them, not resumed into a store it cannot fill."""
    out = tmp_path / "breaks.zarr"
    env = dict(os.environ, TSCUBE_TEST_CHUNK_DELAY="0.4")
    in_progress = chunk_store_path(out) / RECORD_NAME
    _run_and_kill(monitor_args(cube, out), in_progress, env)
    record = json.loads(in_progress.read_text())
    record["variables"] = ",".join(name for name in record["variables"].split(",") if name != "critval")
    in_progress.write_text(json.dumps(record))
    refused = tscube(*monitor_args(cube, out))
    assert refused.exit_code != 0 and "variables (" in refused.output and "--overwrite" in refused.output
    replaced = tscube(*monitor_args(cube, out, "--overwrite"))
    assert replaced.exit_code == 0, replaced.output
    assert "critval" in xr.open_zarr(out).data_vars


def test_foreign_output_is_refused_and_changed_input_is_noticed(cube, tmp_path):
    out = tmp_path / "breaks.tif"
    out.write_bytes(b"not ours")
    refused = tscube(*monitor_args(cube, out))
    assert refused.exit_code != 0 and "not written by a resumable tscube run" in refused.output
    assert out.read_bytes() == b"not ours"

    # a finished run whose input changed since: the input's identity differs
    copy = tmp_path / "stack.tif"
    copy.write_bytes(cube[0].read_bytes())
    moved = (copy, *cube[1:])
    zarr_out = tmp_path / "breaks.zarr"
    assert tscube(*monitor_args(moved, zarr_out)).exit_code == 0
    os.utime(copy, ns=(time.time_ns(), time.time_ns() + 10**9))
    refused = tscube(*monitor_args(moved, zarr_out))
    assert refused.exit_code != 0 and "input.mtime_ns" in refused.output


def test_stl_run_is_chunked_and_summarised(cube, tmp_path):
    out = tmp_path / "stl.zarr"
    result = tscube("stl", cube[0], "--period", 23, "-o", out, "--engine", "reference", "--memory", "24kB",
                    "--no-progress")
    assert result.exit_code == 0, result.output
    assert "pixels processed: 48" in result.output
    record = json.loads((out / RECORD_NAME).read_text())
    assert record["complete"] and len(record["finished"]) > 3
    assert record["summary"]["breaks"] is None
    assert record["summary"]["status_counts"]["ALL_MISSING"] == 1
    assert xr.open_zarr(out).attrs["pixels_processed"] == 48


def test_a_second_run_into_the_same_output_is_refused(cube, tmp_path):
    fcntl = pytest.importorskip("fcntl")
    out = tmp_path / "breaks.zarr"
    with open(tmp_path / ".breaks.zarr.lock", "a+") as held:  # as a run in progress holds it
        fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        refused = tscube(*monitor_args(cube, out))
        assert refused.exit_code != 0 and "another tscube run" in refused.output
        assert not out.exists()
        fcntl.flock(held.fileno(), fcntl.LOCK_UN)
    assert tscube(*monitor_args(cube, out)).exit_code == 0


def test_pixel_chunks_are_regular_for_zarr():
    """dask's "auto" can split 600 rows as 294 + 306; results need equal chunks (but a smaller last one)."""
    import dask.array

    from tscube.xarray_blocks import _is_regular, pixel_chunks

    da = xr.DataArray(dask.array.zeros((92, 600, 800), dtype=np.float32, chunks=(1, 256, 256)),
                      dims=("time", "y", "x"))
    for budget in (512e6, 64e6, 7e6):
        chunked = pixel_chunks(da, "time", int(budget), 40.0)
        assert chunked.chunksizes["time"] == (92,)
        for dim in ("y", "x"):
            assert _is_regular(chunked.chunksizes[dim]), (budget, chunked.chunksizes)
        pixels = max(chunked.chunksizes["y"]) * max(chunked.chunksizes["x"])
        assert pixels * 92 * 40 <= budget * 1.05  # the memory bound still holds
