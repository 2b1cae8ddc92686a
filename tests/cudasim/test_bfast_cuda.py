"""bfast_monitor(engine="cuda") equals the reference (and cpu) engine, on numba's CUDA
simulator: tiny cubes with 0/50/95 % missing values, every status code, int16 + nodata,
several starts with the MOSUM process, chunked streaming, and R fixture series.

Set ``TSCUBE_TEST_REAL_CUDA=1`` to run the same comparisons on a GPU.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest
from cuda_checks import assert_no_gpu_error, check_ptx, run_without_simulator

from tscube import BfastStatus, bfast_monitor, config
from tscube._cuda_host import chunk_items, release_buffers
from tscube.bfast.monitor import _reference
from tscube.bfast.monitor.critval import critical_value
from tscube.bfast.core.design import build_design
from tscube.bfast.monitor.history import ROC_LAMBDA_05
from tscube.bfast.monitor.plan import MonitorPlan
from tscube.timeaxis import build_time_axis

_cuda = pytest.importorskip("tscube.bfast.monitor._cuda")


def _load_root_conftest():
    """tests/conftest.py (R fixture helpers) under its own name: ``conftest`` here is
    tests/cudasim/conftest.py."""
    spec = importlib.util.spec_from_file_location(
        "_tscube_root_conftest", Path(__file__).resolve().parents[1] / "conftest.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_root = _load_root_conftest()
REAL_GPU = bool(os.environ.get("TSCUBE_TEST_REAL_CUDA"))
HAS_CPU_ENGINE = importlib.util.find_spec("tscube.bfast.monitor._cpu") is not None
FREQ = 23
INTS = ("break_index", "status", "n_valid", "n_history", "n_monitor", "n_inf")
EXACT_FLOATS = ("break_time", "history_start")
FLOATS = ("magnitude", "relative_magnitude", "mosum_mean", "statistic", "sigma", "rmse")


@pytest.fixture(autouse=True)
def _small_blocks(monkeypatch):
    """Small blocks keep the simulator quick: each thread is a Python thread. The masked
    Gram's tiles shrink too, since the simulator runs a block's 16 x 16 threads over its 32
    pixels and a barrier every 8 dates even for one pixel (a season-dummy series: 21 of its
    22 s); 8 x 8 threads over 4 pixels and 32 dates still make several tiles on each axis
    (the default tiles: tests/cudasim/test_parallel_cuda.py, and these tests on a GPU)."""
    monkeypatch.setattr(config, "CUDA_THREADS_PER_BLOCK", 16)
    if not REAL_GPU:
        monkeypatch.setattr(config, "CUDA_GRAM_TILE_K", 8)
        monkeypatch.setattr(config, "CUDA_GRAM_TILE_PIXELS", 4)
        monkeypatch.setattr(config, "CUDA_GRAM_TILE_DATES", 32)


def assert_same(got, expected, process=False):
    """Identical codes, counts and times; floats to 1e-5 relative."""
    for name in INTS:
        np.testing.assert_array_equal(getattr(got, name), getattr(expected, name), err_msg=name)
    for name in EXACT_FLOATS:
        np.testing.assert_array_equal(getattr(got, name), getattr(expected, name), err_msg=name)
    names = FLOATS + (("process", "boundary") if process else ())
    for name in names:
        np.testing.assert_allclose(getattr(got, name), getattr(expected, name), rtol=1e-5,
                                   atol=1e-10, equal_nan=True, err_msg=name)


def assert_same_as_cpu_engines(got, data, process=False, **kwargs):
    """``got`` (cuda) equals the reference engine, and the cpu engine where it exists."""
    assert_same(got, bfast_monitor(data, engine="reference", **kwargs), process)
    if HAS_CPU_ENGINE:
        assert_same(got, bfast_monitor(data, engine="cpu", **kwargs), process)


def make_cube(n_dates, n_pixels, missing, seed, dtype=np.float64, scale=1.0):
    """Season + trend + noise, a drop after 3/4 of the dates in every other pixel."""
    rng = np.random.default_rng(seed)
    t = np.arange(n_dates)[:, None]
    amplitude = rng.uniform(0.1, 0.3, n_pixels)
    cube = 0.5 + amplitude * np.sin(2 * np.pi * t / FREQ) + 0.001 * t
    cube = cube + 0.03 * rng.standard_normal((n_dates, n_pixels))
    cube[(3 * n_dates) // 4:, ::2] -= 0.3
    cube = cube * scale
    gone = rng.random((n_dates, n_pixels)) < missing
    if np.issubdtype(dtype, np.integer):
        cube = np.round(cube).astype(dtype)
        cube[gone] = -3000
    else:
        cube = cube.astype(dtype)
        cube[gone] = np.nan
    return cube


def dates_of(n_dates):
    return 2000 + np.arange(n_dates) / FREQ


@pytest.mark.parametrize("missing", [0.0, 0.5, 0.95])
def test_cuda_equals_reference_on_small_cubes(missing):
    cube = make_cube(64, 12, missing, seed=int(missing * 100))
    kwargs = dict(dates=dates_of(64), start=2000 + 44 / FREQ, freq=FREQ, order=1, h=0.25)
    got = bfast_monitor(cube, engine="cuda", **kwargs)
    assert_same_as_cpu_engines(got, cube, **kwargs)
    assert got.attrs["engine"] == "cuda"
    if missing == 0.0:  # the drop is found in every pixel that has it
        assert np.all(got.status == BfastStatus.OK)
        assert np.all(got.break_index[::2] >= 48)
    if missing == 0.95:
        assert np.all(got.status != BfastStatus.OK)


@pytest.mark.parametrize("model", ["trend+season", "season", "trend"])
@pytest.mark.parametrize("process", ["OLS-MOSUM", "OLS-CUSUM"])
def test_cuda_extended_models_equal_reference(model, process):
    """Season dummies (k = 24: a history missing a cycle position is SINGULAR_DESIGN),
    trend only, either monitoring process, a simulated critical value (h = 0.3), gaps."""
    order, trend, season = {"trend+season": (0, True, True), "season": (0, False, True), "trend": (0, True, False)}[model]
    cube = make_cube(100, 6, 0.15, seed=3)
    cube[[4, 27, 50, 73], 1] = np.nan  # pixel 1's history misses the 5th cycle position
    kwargs = dict(dates=dates_of(100), start=2000 + 75 / FREQ, freq=FREQ, order=order, trend=trend, season=season,
                  type=process, h=0.3 if model == "trend" else 0.25, return_process=True)
    got = bfast_monitor(cube, engine="cuda", **kwargs)
    assert_same_as_cpu_engines(got, cube, process=True, **kwargs)
    statuses = set(got.status.tolist())
    assert BfastStatus.OK in statuses
    if season:
        assert got.status[1] == BfastStatus.SINGULAR_DESIGN


@pytest.mark.parametrize("pattern", ["random 20 %", "sparse monitoring"])
def test_cuda_season_dummies_on_gappy_histories(pattern):
    """Season dummies and ROC on gappy MODIS pixels (conftest's ``gappy_modis``): reversed
    history candidates that start rank deficient, so R's contrast values decide the
    history; three histories that miss a cycle position (SINGULAR_DESIGN)."""
    data, times = _root.gappy_modis(pattern, seed=1)
    cube = np.ascontiguousarray(data[:, [0, 1, 2, 5, 8, 22, 23, 24]])
    kwargs = dict(dates=times, start=2009.0, freq=FREQ, order=0, season=True, history="ROC",
                  type="OLS-CUSUM" if pattern == "sparse monitoring" else "OLS-MOSUM", return_process=True)
    got = bfast_monitor(cube, engine="cuda", **kwargs)
    assert_same_as_cpu_engines(got, cube, process=True, **kwargs)
    assert np.count_nonzero(got.break_index >= 0) >= 3
    if pattern == "random 20 %":
        assert np.count_nonzero(got.status == BfastStatus.SINGULAR_DESIGN) == 3


@pytest.mark.parametrize("process", ["OLS-MOSUM", "OLS-CUSUM"])
def test_cuda_calibrated_critical_values_equal_reference(process, monkeypatch):
    """calibrate=True: each pixel's own critical value reaches the kernel (breaks, statistics
    and the critval output as the reference's), on a cloudy cube with ROC histories."""
    monkeypatch.setattr(config, "CALIBRATION_PATHS", 6000)
    cube = make_cube(80, 10, 0.3, seed=5)
    kwargs = dict(dates=dates_of(80), start=2000 + 56 / FREQ, freq=FREQ, order=1, h=0.25, history="ROC",
                  type=process, calibrate=True, return_process=True)
    got = bfast_monitor(cube, engine="cuda", **kwargs)
    assert_same_as_cpu_engines(got, cube, process=True, **kwargs)
    expected = bfast_monitor(cube, engine="reference", **kwargs)
    np.testing.assert_allclose(got.critval, expected.critval, rtol=1e-12, equal_nan=True)
    monitored = got.status == BfastStatus.OK
    assert monitored.sum() >= 5 and (got.critval[monitored] != got.attrs["critval"]).all()


def test_cuda_chunks_and_streams_give_the_same_result(monkeypatch):
    """A budget of a few pixels per chunk: several chunks over the two buffer sets."""
    cube = make_cube(48, 10, 0.5, seed=7)
    kwargs = dict(dates=dates_of(48), start=2000 + 30 / FREQ, freq=FREQ, order=1, h=0.5)
    expected = bfast_monitor(cube, engine="reference", **kwargs)
    per_pixel = _cuda._bytes_per_pixel(48, 4, 1, 8, False)
    monkeypatch.setattr(config, "CUDA_CHUNK_BYTES", 2 * 3 * per_pixel)
    assert chunk_items(None, 10, per_pixel) == 3  # 4 chunks, two streams
    got = bfast_monitor(cube, engine="cuda", **kwargs)
    assert_same(got, expected)
    if HAS_CPU_ENGINE:
        assert_same(got, bfast_monitor(cube, engine="cpu", **kwargs))


def test_cuda_buffers_are_kept_for_the_next_run_of_the_same_shape(monkeypatch):
    """Pinned and device buffers are reused by a run of the same shape (identical results),
    replaced for another shape, and not kept with CUDA_KEEP_BUFFERS off."""
    kwargs = dict(start=2000 + 30 / FREQ, freq=FREQ, order=1, h=0.5)
    cube = make_cube(48, 6, 0.3, seed=11)
    release_buffers()
    first = bfast_monitor(cube, dates=dates_of(48), engine="cuda", **kwargs)
    kept = list(_cuda._KEPT.sets)
    assert len(kept) == 1
    again = bfast_monitor(cube, dates=dates_of(48), engine="cuda", **kwargs)
    assert _cuda._KEPT.sets[0] is kept[0]
    assert_same(again, first)
    smaller = bfast_monitor(cube[:, :4], dates=dates_of(48), engine="cuda", **kwargs)
    assert _cuda._KEPT.sets[0] is kept[0]  # fewer pixels fit the kept buffers
    assert_same(smaller, bfast_monitor(cube[:, :4], dates=dates_of(48), engine="reference", **kwargs))
    other = make_cube(40, 6, 0.3, seed=12)
    bfast_monitor(other, dates=dates_of(40), engine="cuda", **kwargs)
    assert _cuda._KEPT.sets[0] is not kept[0]
    monkeypatch.setattr(config, "CUDA_KEEP_BUFFERS", False)
    release_buffers()
    bfast_monitor(cube, dates=dates_of(48), engine="cuda", **kwargs)
    assert _cuda._KEPT.sets == []


class _Captured(Exception):
    pass


def test_cuda_timings_name_every_step(monkeypatch):
    """run(timings=) reports the cpu selection and every kernel, summing to 'kernels'."""
    cube = make_cube(48, 6, 0.3, seed=13)
    kwargs = dict(dates=dates_of(48), start=2000 + 30 / FREQ, freq=FREQ, order=1, h=0.5,
                  history="ROC")
    captured = {}

    def capture(values, plan):
        captured.update(values=values, plan=plan)
        raise _Captured

    monkeypatch.setattr(_reference, "run", capture)
    with pytest.raises(_Captured):
        bfast_monitor(cube, engine="reference", **kwargs)
    timings = {}
    out = _cuda.run(captured["values"], captured["plan"], timings=timings)
    expected = {"selection", "h2d", "kernels", "d2h"} | {
        f"kernel_{name}" for name in ("transpose", "count", "history_mask", "gram", "xty", "solve",
                                      "monitor")}
    assert set(timings) == expected
    assert timings["selection"] > 0.0
    kernel_sum = sum(v for name, v in timings.items() if name.startswith("kernel_"))
    np.testing.assert_allclose(kernel_sum, timings["kernels"])
    assert out["status"].shape == (1, 6)


def test_cuda_status_codes_equal_reference():
    n_dates, start = 80, 60
    t = np.arange(n_dates)
    rng = np.random.default_rng(3)
    base = 0.4 + 0.2 * np.cos(2 * np.pi * t / FREQ) + 0.02 * rng.standard_normal(n_dates)
    cube = np.repeat(base[:, None], 8, axis=1)
    cube[:, 0] = np.nan  # ALL_MISSING
    cube[3:start, 1] = np.nan  # 3 history observations: TOO_FEW_HISTORY
    cube[start:, 2] = np.nan  # NO_MONITORING_DATA
    cube[:start, 3][t[:start] % FREQ > 1] = np.nan  # two phases only: SINGULAR_DESIGN
    cube[:, 4] = 0.7  # PERFECT_FIT
    cube[[5, 70], 5] = [np.inf, -np.inf]  # inf counts as missing
    cube[65:, 6] += 0.5  # a break
    cube[:, 7] = cube[:, 6]
    cube[::2, 7] = np.nan
    kwargs = dict(dates=dates_of(n_dates), start=2000 + start / FREQ, freq=FREQ, order=1,
                  trend=False, h=0.5)
    got = bfast_monitor(cube, engine="cuda", **kwargs)
    assert_same_as_cpu_engines(got, cube, **kwargs)
    S = BfastStatus
    assert list(got.status) == [S.ALL_MISSING, S.TOO_FEW_HISTORY, S.NO_MONITORING_DATA,
                                S.SINGULAR_DESIGN, S.PERFECT_FIT, S.OK, S.OK, S.OK]
    assert got.n_inf[5] == 2 and got.break_index[6] >= 65


def test_cuda_int16_nodata_several_starts_with_process():
    cube = make_cube(56, 9, 0.3, seed=11, dtype=np.int16, scale=5000)
    kwargs = dict(dates=dates_of(56), start=[2000 + 36 / FREQ, 2000 + 44 / FREQ], freq=FREQ,
                  order=2, h=0.25, nodata=-3000, return_process=True, history=2000 + 4 / FREQ)
    got = bfast_monitor(cube, engine="cuda", **kwargs)
    assert got.status.shape == (2, 9) and got.process.shape == (2, 56, 9)
    # reference only: the cpu engine's int16 specialisation would cost a compile here
    assert_same(got, bfast_monitor(cube, engine="reference", **kwargs), process=True)
    assert np.any(got.status == BfastStatus.OK)
    assert np.any(np.isfinite(got.process))


def test_cuda_float32_with_fractional_nodata():
    """nodata compares in the data's dtype, as NumPy does (0.1 in float32 != 0.1)."""
    cube = make_cube(48, 4, 0.2, seed=5, dtype=np.float32)
    cube[10:20, 1] = np.float32(0.1)
    kwargs = dict(dates=dates_of(48), start=2000 + 36 / FREQ, freq=FREQ, order=1, nodata=0.1)
    expected = bfast_monitor(cube, engine="reference", **kwargs)
    got = bfast_monitor(cube, engine="cuda", **kwargs)
    assert_same(got, expected)
    assert got.n_valid[1] == expected.n_valid[1] < np.count_nonzero(np.isfinite(cube[:, 1]))


def _plan(n_dates, start_index, order=1, history_begin=0, h=0.25):
    axis = build_time_axis(dates_of(n_dates), FREQ)
    return MonitorPlan(
        axis=axis, design=build_design(axis, order, True), starts=axis.time[[start_index]],
        monitor_begin=np.array([start_index]), history="fixed", history_begin=history_begin,
        process_type="OLS-MOSUM", h=h, critval=critical_value(h, 10, 0.05), level_roc=0.05, roc_lambda=ROC_LAMBDA_05,
        nodata=None, return_process=False,
    )


def test_cuda_per_pixel_history_begin_equals_fixed_history_per_pixel():
    """The path for ROC/BP: a per-pixel history start computed elsewhere."""
    cube = make_cube(60, 5, 0.2, seed=2)
    plan = _plan(60, 40)
    begin = np.array([[0, 5, 12, 20, 3]])
    flagged = np.array([[False, True, False, False, False]])
    got = _cuda.run(cube, plan, history_begin=begin, history_flagged=flagged)
    for p in range(5):
        expected = _reference.run(cube[:, [p]], dataclasses.replace(plan, history_begin=int(begin[0, p])))
        for name, array in expected.items():
            if name == "status":
                code = BfastStatus.ROC_NO_CROSSING if flagged[0, p] else array[0, 0]
                assert got[name][0, p] == code
            elif name in INTS or name in EXACT_FLOATS:
                np.testing.assert_array_equal(got[name][0, p], array[0, 0], err_msg=name)
            else:
                np.testing.assert_allclose(got[name][0, p], array[0, 0], rtol=1e-5, err_msg=name)


def _cpu_selects(method):
    try:
        from tscube.bfast.monitor.history import history_first

        history_first(np.ones((48, 1)), dataclasses.replace(_plan(48, 36), history=method))
        return True
    except (ImportError, NotImplementedError):
        return False


@pytest.mark.parametrize("method", ["ROC", "BP"])
def test_cuda_roc_bp_use_the_cpu_selection_or_say_unsupported(method):
    cube = make_cube(48, 4, 0.1, seed=1)
    cube[:20, 1] += 0.4  # an unstable early history
    kwargs = dict(dates=dates_of(48), start=2000 + 36 / FREQ, freq=FREQ, order=1, history=method)
    if not _cpu_selects(method):
        with pytest.raises(ValueError, match=f"history='{method}'.*cuda engine"):
            bfast_monitor(cube, engine="cuda", **kwargs)
        return
    got = bfast_monitor(cube, engine="cuda", **kwargs)
    assert_same(got, bfast_monitor(cube, engine="cpu", **kwargs))
    if method == "BP":  # 36 history dates < 2 x 6k = 48: Bai-Perron cannot run
        assert (got.status == BfastStatus.BP_TOO_SHORT).all()


def test_cuda_rejects_a_badly_shaped_history_begin():
    cube = make_cube(48, 2, 0.0, seed=1)
    with pytest.raises(ValueError, match="history_begin must be an integer array"):
        _cuda.run(cube, _plan(48, 36), history_begin=np.zeros((1, 3), int))
    with pytest.raises(ValueError, match=r"time indices in \[0, T\]"):
        _cuda.run(cube, _plan(48, 36), history_begin=np.array([[0, -1]]))


R_CASES = (
    "som_a__s2010.13__all__o1__h0.25__e10__l0.05__trend+harmon",
    "som_b__s2010.13__2008.7__o4__h0.25__e10__l0.05__trend+harmon",
    "ndvi__s2005.1__1995.1__o3__h0.5__e10__l0.05__trend+harmon",
    "harvest__s2005.12__all__o1__h0.5__e10__l0.05__harmon",
    "simts__s2006.1__all__o3__h1__e10__l0.05__trend+harmon",
)


R_EXT_CASES = (
    "som_a_trend+season_OLS-CUSUM_ROC_h0.25_l0.05_e10",
    "ndvi_season_OLS-MOSUM_all_h0.5_l0.01_e10",
    "ndvi_trend+season_OLS-CUSUM_ROC_h0.25_l0.05_e10",  # ROC on rank-deficient prefixes
    "harvest_trend+harmon_OLS-CUSUM_all_h0.25_l0.001_e10",
)


@pytest.mark.parametrize("case_id", R_CASES + R_EXT_CASES)
def test_cuda_equals_reference_on_r_fixture_series(case_id):
    """R's series, the default model and (last four) season dummies and OLS-CUSUM: the
    cuda engine equals the reference and gives R's history, break and process."""
    if case_id in R_EXT_CASES:
        case = next(c for c in _root.ext_cases() if c["id"] == case_id)
        kwargs = _root.ext_kwargs(case)
    else:
        case = next(c for c in _root.bfast_cases() if c["id"] == case_id)
        kwargs = _root.bfast_case_kwargs(case)
    expected = bfast_monitor(engine="reference", return_process=True, **kwargs)
    got = bfast_monitor(engine="cuda", return_process=True, **kwargs)
    assert_same(got, expected, process=True)
    assert got.status == BfastStatus.OK and got.history_start == case["history_start"]
    if case["breakpoint"] is None:
        assert got.break_index == -1
    else:
        assert got.break_time == case["breakpoint"]
    np.testing.assert_allclose(got.process[np.isfinite(got.process)], case["process"], rtol=1e-6, atol=1e-12)


@pytest.mark.skipif(REAL_GPU, reason="checks the error raised where there is no GPU")
def test_cuda_without_gpu_raises_naming_the_cause():
    """Without the simulator and without a driver: a RuntimeError, not a crash; importing
    the engine module imports no numba.cuda."""
    code = (
        "import sys, numpy as np\n"
        "import tscube, tscube.bfast.monitor._cuda\n"
        "assert 'numba.cuda' not in sys.modules\n"
        "try:\n"
        "    tscube.bfast_monitor(np.ones((30, 2)), 2000 + np.arange(30) / 23, 2001, freq=23,\n"
        "                         order=1, engine='cuda')\n"
        "except RuntimeError as exc:\n"
        "    print('RuntimeError:', exc)\n"
        "try:\n"
        "    tscube.bfast.monitor._cuda.device_summary()\n"
        "except RuntimeError as exc:\n"
        "    print('summary RuntimeError:', exc)\n"
    )
    result = run_without_simulator(code)
    assert_no_gpu_error(result)
    assert "summary RuntimeError: engine='cuda' needs" in result.stdout


_PTX_CHECK = '''
from tscube.bfast.monitor import _cuda_kernels as kern

f8, i4, i8, u1, i1, b1 = nt.float64, nt.int32, nt.int64, nt.uint8, nt.int8, nt.boolean
checks = []
for raw_type in (nt.int16, nt.float32, nt.float64):
    raw = A(raw_type, 2)
    checks += [
        (kern.clean_transpose_kernel(32, 8), (raw, b1, f8, A(f8, 2))),
        (kern.count_kernel, (raw, b1, f8, A(i4, 1), A(i4, 2), A(i8, 1), i8, A(i4, 3), A(f8, 3))),
        (kern.history_mask_kernel, (raw, b1, f8, A(i4, 2), i8, i8, A(u1, 2))),
        (kern.masked_xty_kernel, (A(f8, 2), raw, A(u1, 2), A(f8, 2))),
    ]
for k in (1, 8, 24):
    checks += [
        (kern.solve_kernel(k, 8), (A(f8, 3), A(f8, 2), A(f8, 2), A(i4, 1))),
        (kern.monitor_kernel(k, 256), (A(f8, 2), A(f8, 2), A(f8, 2), A(i4, 1), A(i4, 2),
                                       A(i1, 2), i8, f8, A(f8, 2), b1, b1, A(i4, 3), A(f8, 3),
                                       A(f8, 2), A(f8, 2), A(i4, 2), A(f8, 3), A(f8, 3))),
        (kern.gram_kernel(k, min(16, k), 32, 8), (A(f8, 2), A(u1, 2), A(f8, 3))),
    ]
'''


@pytest.mark.skipif(REAL_GPU, reason="the real-GPU run compiles every kernel anyway")
def test_cuda_kernels_compile_to_ptx():
    """The simulator neither types nor compiles kernels: compile them all to PTX with
    NVVM where its libraries are installed (the test extras' nvidia-nvvm and
    nvidia-cuda-nvrtc; no GPU needed), else skip."""
    check_ptx(_PTX_CHECK, 21)


def test_cuda_keeps_pixel_shapes_and_empty_batches():
    cube = make_cube(40, 4, 0.1, seed=9).reshape(40, 2, 2)
    kwargs = dict(dates=dates_of(40), start=2000 + 30 / FREQ, freq=FREQ, order=1, h=0.5)
    got = bfast_monitor(cube, engine="cuda", **kwargs)
    assert got.status.shape == (2, 2)
    assert_same(got, bfast_monitor(cube, engine="reference", **kwargs))
    empty = bfast_monitor(np.empty((40, 0, 3)), engine="cuda", **kwargs)
    assert empty.status.shape == (0, 3) and empty.break_index.dtype == np.int64
