"""bfast_lite(engine="cuda") equals the cpu engine (and the reference), on numba's CUDA
simulator: random cubes with 0/20/50/90 % missing, short series and segments (h = 12,
9), seasonal dummies whose segment starts are rank deficient (R's recursion, on the
host), every selection, the pre-test, degenerate pixels, chunks, R's fixtures, the
missing-GPU error and a PTX compile of the kernels.

On the simulator the per-pixel and per-start functions are the CPU-compiled cpu engine
functions, so these tests check the engine's own parts: the kinds of start, the
triangle's layout, the recursion rows placed from the host, the programme over threads
(its ties), the partitions and the unpacking. Set ``TSCUBE_TEST_REAL_CUDA=1`` to run the
same comparisons on a GPU.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from cuda_checks import assert_no_gpu_error, check_ptx, run_without_simulator
from test_bfast_lite import _assert_matches_r, _assert_same, _case_kwargs, lite_cases, planted_cube

from tscube import BfastLiteStatus, bfast_lite, config
from tscube._cuda_host import on_simulator
from tscube.bfast.lite._array import make_lite_plan
from tscube.timeaxis import build_time_axis

_cuda = pytest.importorskip("tscube.bfast.lite._cuda")

REAL_GPU = bool(os.environ.get("TSCUBE_TEST_REAL_CUDA"))


def _plan(t, freq=23, **options):
    """The plan of ``bfast_lite(data, t, freq=freq, **options)``."""
    defaults = dict(order=3, trend=True, season=False, h=0.15, breaks="LWZ", max_breaks=None, level=0.0,
                    magnitude_interval=0.1, nodata=None)
    return make_lite_plan(build_time_axis(t, freq), **{**defaults, **options})


def assert_cuda_equals_cpu(cuda, cpu, rtol=1e-8):
    """Breaks and statuses identical; floats within ``rtol`` (issue 42: 1e-8 relative)."""
    for name in ("status", "n_breaks", "break_index", "break_time", "n_obs", "h_obs", "max_breaks"):
        np.testing.assert_array_equal(getattr(cuda, name), getattr(cpu, name), err_msg=name)
    for name in ("magnitudes", "coefficients", "rss", "bic", "lwz", "pretest_p"):
        a, b = getattr(cuda, name), getattr(cpu, name)
        if a is None:
            continue
        if name in ("bic", "lwz"):  # logs of an exact fit's RSS (rounding noise) are noise too
            exact = cpu.status == BfastLiteStatus.PERFECT_FIT
            a, b = a[..., ~exact], b[..., ~exact]
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-12, err_msg=name)


def _cube(nan_fraction, n_dates=120, n_pixels=6, seed=5, freq=23):
    data, t, _ = planted_cube(n_pixels, n_dates, nan_fraction, seed=seed, freq=freq)
    data[:, 0] = np.nan  # all missing
    data[:, 1] = 0.3  # constant: an exact fit
    data[: n_dates // 2, 2] = np.nan  # a short series
    return data, t


@pytest.mark.parametrize("nan_fraction", [0.0, 0.2, 0.5])
@pytest.mark.parametrize("options", [dict(), dict(breaks="BIC", h=12, level=0.05), dict(h=9, order=1, breaks=3),
                                     dict(breaks="all", order=2), dict(breaks="RSS", max_breaks=2)])
def test_cuda_equals_cpu_and_reference_on_random_cubes(nan_fraction, options):
    data, t = _cube(nan_fraction, seed=11 + int(10 * nan_fraction))
    kwargs = dict(freq=23, criteria=True, **options)
    cuda = bfast_lite(data, t, engine="cuda", **kwargs)
    cpu = bfast_lite(data, t, engine="cpu", **kwargs)
    assert_cuda_equals_cpu(cuda, cpu)
    assert cuda.status[0] == BfastLiteStatus.ALL_MISSING and cuda.status[1] == BfastLiteStatus.PERFECT_FIT
    assert (cuda.status == BfastLiteStatus.OK).sum() >= 2
    _assert_same(cuda, bfast_lite(data, t, engine="reference", **kwargs))


def test_cuda_equals_cpu_on_a_long_series_with_90_percent_missing():
    data, t, _ = planted_cube(4, 1000, 0.9, seed=3)
    kwargs = dict(freq=23, h=0.3, criteria=True)
    cuda = bfast_lite(data, t, engine="cuda", **kwargs)
    assert np.all(cuda.status == BfastLiteStatus.OK) and cuda.n_breaks.sum() > 0
    assert_cuda_equals_cpu(cuda, bfast_lite(data, t, engine="cpu", **kwargs))


@pytest.mark.parametrize("nan_fraction, options", [
    (0.4, dict(freq=12, order=0, season=True, h=0.25)),
    (0.2, dict(freq=23, order=0, season=True, h=30, breaks="BIC")),
])
def test_cuda_season_dummies_take_r_recursion(nan_fraction, options):
    """Seasonal dummies with gaps: segment starts whose first k rows miss a season level
    are rank deficient and take R's recursion (the Givens recursion on the device, R's
    refits on the host where a column is too close to R's bound: placed into the
    device's triangle)."""
    data, t = _cube(nan_fraction, n_dates=100 if options["freq"] == 12 else 230, freq=options["freq"], seed=9)
    kwargs = dict(criteria=True, **options)
    timings = {}
    out = _cuda.run(np.ascontiguousarray(data), _plan(t, **options), timings=timings)
    assert 0 < timings["recursion_starts"] < timings["starts"]
    cuda = bfast_lite(data, t, engine="cuda", **kwargs)
    np.testing.assert_array_equal(out["n_breaks"], cuda.n_breaks)
    assert (cuda.status == BfastLiteStatus.OK).sum() >= 2 and cuda.n_breaks.sum() > 0
    assert_cuda_equals_cpu(cuda, bfast_lite(data, t, engine="cpu", **kwargs))


def test_cuda_places_the_starts_refitted_on_the_host(monkeypatch):
    """Where the Givens recursion cannot tell a column's rank by R's rule, the start is
    R's refits on the host. Made to happen for every recursion start (a band around R's
    bound that takes all): the same results."""
    from tscube.bfast.core import bai_perron_cpu

    data, t = _cube(0.4, n_dates=100, freq=12, seed=9)
    kwargs = dict(freq=12, order=0, season=True, h=0.25, criteria=True)
    expected = bfast_lite(data, t, engine="cuda", **kwargs)
    monkeypatch.setattr(_cuda, "_start_segments", _refits_for_every_recursion)
    timings = {}
    _cuda.run(np.ascontiguousarray(data), _plan(t, **{k: v for k, v in kwargs.items() if k != "criteria"}),
              timings=timings)
    assert timings["recursion_starts"] == 0 and timings["refit_starts"] > 0
    assert_cuda_equals_cpu(bfast_lite(data, t, engine="cuda", **kwargs), expected, rtol=1e-6)
    assert bai_perron_cpu.START_REFITS == _cuda._REFITS


def _refits_for_every_recursion(*args):
    """The simulator's start function, with every recursion start left to the host."""
    kind = on_simulator(_cuda.start_segments)(*args)
    return _cuda._REFITS if kind == _cuda._RECURSION else kind


def test_cuda_gap_free_default_model_needs_no_recursion():
    data, t, _ = planted_cube(3, 100, 0.0, seed=4)
    plan = _plan(t)
    timings = {}
    _cuda.run(np.ascontiguousarray(data), plan, timings=timings)
    assert timings["recursion_starts"] == timings["refit_starts"] == 0 and timings["starts"] == 3 * (100 - 2 * 15 + 2)
    assert set(timings) == {"prepare", "triangle", "refits", "programme", "finish", "waiting", "starts",
                            "recursion_starts", "refit_starts"}


def test_cuda_statuses_of_degenerate_pixels_and_dtypes():
    data, t, _ = planted_cube(5, 60, 0.0, seed=2)
    data[:, 0] = np.nan
    data[:50, 1] = np.nan  # too few observations
    data[:, 2] = 1e200  # squares overflow
    int_cube = np.where(np.abs(data) < 30, np.round(data * 1000), -9999).astype(np.int16)
    statuses = []
    with np.errstate(over="ignore"):
        as_float32 = data.astype(np.float32)
    for cube, nodata in ((data, None), (as_float32, None), (int_cube, -9999)):
        cuda = bfast_lite(cube, t, freq=23, nodata=nodata, engine="cuda", criteria=True)
        assert_cuda_equals_cpu(cuda, bfast_lite(cube, t, freq=23, nodata=nodata, engine="cpu", criteria=True))
        statuses.append(cuda.status.tolist())
    S = BfastLiteStatus
    assert statuses[0] == [S.ALL_MISSING, S.SEGMENT_TOO_SHORT, S.OVERFLOW, S.OK, S.OK]
    assert statuses[1][:2] == statuses[2][:2] == statuses[0][:2]  # 1e200: inf in float32, nodata in int16
    assert statuses[1][2] == statuses[2][2] == S.ALL_MISSING


def test_cuda_chunks_give_the_same_result(monkeypatch):
    """Two pixels per chunk: chunks with every pixel done on the host, and the last short."""
    data, t = _cube(0.3, n_pixels=7, seed=21)
    expected = bfast_lite(data, t, freq=23, engine="cpu", h=12)
    per_pixel = _cuda._bytes_per_pixel(data.shape[0], 8, _plan(t, h=12).break_slots)
    monkeypatch.setattr(config, "CUDA_CHUNK_BYTES", 2 * 2 * per_pixel + 7)
    assert_cuda_equals_cpu(bfast_lite(data, t, freq=23, engine="cuda", h=12), expected)


def test_cuda_keeps_pixel_shapes_and_empty_batches():
    data, t = _cube(0.2, n_pixels=6, seed=8)
    got = bfast_lite(data.reshape(-1, 2, 3), t, freq=23, engine="cuda")
    assert got.n_breaks.shape == (2, 3) and got.coefficients.shape[1:3] == (2, 3)
    np.testing.assert_array_equal(got.n_breaks.ravel(), bfast_lite(data, t, freq=23, engine="cpu").n_breaks)
    empty = bfast_lite(np.empty((data.shape[0], 0, 3)), t, freq=23, engine="cuda")
    assert empty.status.shape == (0, 3)


def test_cuda_on_a_chunked_xarray_cube_equals_numpy():
    xr = pytest.importorskip("xarray")
    pytest.importorskip("dask")
    import pandas as pd

    data, _ = _cube(0.3, n_pixels=6, seed=12)
    dates = pd.date_range("2000-01-01", periods=data.shape[0], freq="16D")
    da = xr.DataArray(data.reshape(-1, 2, 3), dims=("time", "y", "x"),
                      coords={"time": dates, "y": [20.0, 10.0], "x": [1.0, 2.0, 3.0]}).chunk({"x": 2})
    ds = bfast_lite(da, engine="cuda", max_breaks=3).compute()
    assert ds.attrs["engine"] == "cuda"
    expected = bfast_lite(data.reshape(-1, 2, 3), dates, engine="cpu", max_breaks=3)
    np.testing.assert_array_equal(ds["n_breaks"].values, expected.n_breaks)
    np.testing.assert_array_equal(ds["break_index"].values, expected.break_index)
    np.testing.assert_allclose(ds["slope"].values, expected.slope, rtol=1e-8)


@pytest.mark.skipif(REAL_GPU, reason="auto picks cuda on a GPU for large batches only")
def test_auto_engine_picks_cuda_for_large_batches_on_a_gpu(monkeypatch):
    from tscube import engines

    data, t = _cube(0.2, n_pixels=4, seed=6)
    assert bfast_lite(data, t, freq=23).attrs["engine"] == "cpu"  # the simulator is no GPU
    monkeypatch.setattr(engines, "cuda_available", lambda: True)
    monkeypatch.setattr(config, "CUDA_AUTO_MIN_WORK", data.size + 1)
    assert bfast_lite(data, t, freq=23).attrs["engine"] == "cpu"  # too small
    monkeypatch.setattr(config, "CUDA_AUTO_MIN_WORK", data.size)
    got = bfast_lite(data, t, freq=23)
    assert got.attrs["engine"] == "cuda"
    assert_cuda_equals_cpu(got, bfast_lite(data, t, freq=23, engine="cpu"))


def _fixture_sample():
    """R's fixture cases on the device: one of each series, model and R outcome (ok,
    warning, error), and one of each break selection with and without the pre-test (all
    625 with ``TSCUBE_TEST_ALL_FIXTURES=1``)."""
    cases, seen = [], set()
    everything = bool(os.environ.get("TSCUBE_TEST_ALL_FIXTURES"))
    for case in lite_cases():
        keys = {(case["series"], case["formula"], case["status"]), (str(case["breaks"]), case["level"] > 0)}
        if everything or not keys <= seen:
            seen |= keys
            cases.append(case)
    return cases


@pytest.mark.parametrize("case", _fixture_sample(), ids=lambda c: c["id"])
def test_cuda_matches_r_fixtures(case):
    _assert_matches_r(bfast_lite(**_case_kwargs(case), engine="cuda"), case)


@pytest.mark.skipif(REAL_GPU, reason="checks the error raised where there is no GPU")
def test_cuda_without_gpu_raises_naming_the_cause():
    """Without the simulator and without a driver: a RuntimeError, not a crash; importing
    the engine module imports no numba.cuda."""
    code = (
        "import sys, numpy as np\n"
        "import tscube.bfast.lite._cuda\n"
        "from tscube import bfast_lite\n"
        "assert 'numba.cuda' not in sys.modules\n"
        "try:\n"
        "    bfast_lite(np.ones((60, 2)), 2000 + np.arange(60) / 23, freq=23, engine='cuda')\n"
        "except RuntimeError as exc:\n"
        "    print('RuntimeError:', exc)\n"
    )
    assert_no_gpu_error(run_without_simulator(code))


_PTX_CHECK = '''
from tscube.bfast.lite import _cuda

f8, i8 = nt.float64, nt.int64
checks = []
for k in (8, 13):  # the default model; trend + monthly dummies
    sums, starts, place, programme = _cuda._kernels(cuda, k)
    # the argument types _cuda._run_locked passes (C-contiguous device arrays)
    checks += [
        (sums, (A(f8, 2), A(i8, 2), A(f8, 2), A(i8, 1), A(i8, 1), A(f8, 4), A(f8, 3), A(f8, 2), A(f8, 2), A(f8, 2),
                A(f8, 1), A(nt.boolean, 1))),
        (starts, (A(f8, 2), A(i8, 2), A(f8, 2), A(i8, 1), A(i8, 1), A(f8, 1), A(nt.boolean, 1), A(f8, 4), A(f8, 3),
                  A(f8, 2), A(f8, 2), A(f8, 3), A(nt.int8, 2))),
        (place, (A(f8, 3), A(i8, 1), A(i8, 1), A(f8, 2), A(i8, 1), A(i8, 1))),
        (programme, (A(f8, 3), A(nt.int8, 2), A(i8, 1), A(i8, 1), A(i8, 1), A(f8, 3), A(i8, 3), A(f8, 2), A(i8, 3))),
    ]
'''


@pytest.mark.skipif(REAL_GPU, reason="the real-GPU run compiles the kernels anyway")
def test_cuda_kernels_compile_to_ptx():
    """The simulator neither types nor compiles kernels (it calls the CPU-compiled cpu
    engine functions): compile every kernel, with everything it calls, to PTX with NVVM
    where its libraries are installed (docs/gpu.md; no GPU needed), else skip."""
    check_ptx(_PTX_CHECK, 8)
