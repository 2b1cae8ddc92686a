"""stl(engine="cuda") equals the cpu and reference engines, on numba's CUDA simulator:
both flavours with 0/30/60 % gaps and every status, robustness, jumps, degrees 0/1/2, a
periodic (long-window) seasonal, odd lengths, float32 and float64 input, chunked
streaming, pixel shapes, the missing-GPU error and a PTX compile of the kernel.

The kernel runs the cpu engine's per-series function (``_cpu.decompose_one``); on the
simulator that is the CPU-compiled function, so these tests check the driver (chunking,
the time-major column layout, dtypes, statuses, unpacking). Set
``TSCUBE_TEST_REAL_CUDA=1`` to run the same comparisons on a GPU, where the function is
compiled for the device.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from cuda_checks import assert_no_gpu_error, check_ptx, run_without_simulator

from tscube import config
from tscube._cuda_host import chunk_items, release_buffers
from tscube.stl import StlStatus, stl
from tscube.stl import _cpu
from tscube.stl._params import resolve_params

_cuda = pytest.importorskip("tscube.stl._cuda")

REAL_GPU = bool(os.environ.get("TSCUBE_TEST_REAL_CUDA"))
COMPONENTS = ("seasonal", "trend", "remainder", "weights", "trend_slope", "seasonal_amplitude")
S = StlStatus


@pytest.fixture(autouse=True)
def _small_blocks(monkeypatch):
    """Small blocks keep the simulator quick (each thread is a Python thread); the tunables
    a test changes are restored afterwards."""
    monkeypatch.setattr(config, "CUDA_THREADS_PER_BLOCK", 16)
    yield
    config.reset()


def make_cube(n_times, period, seed):
    """Ten seasonal series: 0, 30 and 60 % random gaps, an outlier burst, whole cycles
    missing, a gap at the end, and one series per failure status (all missing, too few
    observations, a cycle-subseries without any value)."""
    rng = np.random.default_rng(seed)
    t = np.arange(n_times)[:, None]
    cube = (5 + 0.02 * t + np.sin(2 * np.pi * t / period + rng.uniform(0, 6, 10))
            + 0.3 * rng.standard_normal((n_times, 10)))
    cube[rng.random(n_times) < 0.3, 1] = np.nan
    cube[rng.random(n_times) < 0.6, 2] = np.nan
    cube[10:14, 3] += 8.0  # outliers: robustness weights near zero
    cube[period: 3 * period, 4] = np.nan  # whole cycles missing
    cube[-period // 2:, 5] = np.nan  # gap at the end: extrapolated
    cube[:, 6] = np.nan  # ALL_MISSING
    cube[2 * period - 1:, 7] = np.nan  # 2 * period - 1 values: TOO_FEW_OBSERVATIONS
    cube[2::period, 8] = np.nan  # cycle position 2 never observed: SUBSERIES_EMPTY
    cube[rng.random(n_times) < 0.3, 9] = np.nan
    return cube


EXPECTED_STATUS = {6: S.ALL_MISSING, 7: S.TOO_FEW_OBSERVATIONS, 8: S.SUBSERIES_EMPTY}

CONFIGS = [
    dict(flavor="statsmodels", seasonal=7),
    dict(flavor="statsmodels", seasonal=9, seasonal_deg=2, trend_deg=2, low_pass_deg=0,
         seasonal_jump=2, trend_jump=3, low_pass_jump=2, robust=True, inner_iter=1, outer_iter=2),
    dict(flavor="statsmodels", seasonal="periodic", robust=True, inner_iter=1, outer_iter=1),
    dict(flavor="stlplus", seasonal=7),
    dict(flavor="stlplus", seasonal=11, seasonal_deg=2, trend_deg=2, seasonal_jump=3,
         trend_jump=2, robust=True, inner_iter=1, outer_iter=2),
    dict(flavor="stlplus", seasonal="per", seasonal_deg=1, trend=15, low_pass_deg=0,
         robust=True, inner_iter=2, outer_iter=1),
]


def assert_same(got, expected, atol=1e-9):
    """Same statuses and parameters; components to ``atol`` times max|data| (the cpu
    engine's tolerance against the reference: an ill-conditioned local quadratic at a gap
    turns rounding differences into ~1e-9 relative ones; most agree to 1e-13)."""
    np.testing.assert_array_equal(got.status, expected.status)
    assert got.params == expected.params
    scale = max(1.0, float(np.nanmax(np.abs(got.seasonal + got.trend + got.remainder),
                                     initial=0.0)))
    for name in COMPONENTS:
        a, b = getattr(got, name), getattr(expected, name)
        assert a.dtype == b.dtype, name
        np.testing.assert_allclose(a, b, rtol=0, atol=atol * scale, err_msg=name)


@pytest.mark.parametrize("kw", CONFIGS, ids=[str(i) for i in range(len(CONFIGS))])
@pytest.mark.parametrize("n_times,period", [(61, 6), (97, 8)])  # odd lengths
def test_cuda_equals_cpu_and_reference(kw, n_times, period):
    cube = make_cube(n_times, period, seed=n_times + len(kw))
    got = stl(cube, period, engine="cuda", **kw)
    assert got.engine == "cuda"
    cpu = stl(cube, period, engine="cpu", **kw)
    assert_same(got, cpu)
    # config 4 (stlplus, robust local quadratics at gaps) is the ill-conditioned one: its
    # per-series fit differs from the reference by 3.5e-9 to 7.9e-9 (scale 7.5) depending
    # only on how numba compiled it (cold or warm cache, same source), hence 2e-9 here
    assert_same(got, stl(cube, period, engine="reference", **kw), atol=2e-9)
    for index, status in EXPECTED_STATUS.items():
        assert got.status[index] == status
        assert np.isnan(got.seasonal[:, index]).all() and np.isnan(got.weights[:, index]).all()
    ok = got.status == S.OK
    assert ok[[0, 1, 4, 5, 9]].all()  # stlplus: 2 and 3 can be SUBSERIES_TOO_SHORT, FIT_FAILED
    # seasonal and trend at every date, remainder NaN exactly where the data is missing
    assert np.isfinite(got.seasonal[:, ok]).all() and np.isfinite(got.trend[:, ok]).all()
    np.testing.assert_array_equal(np.isnan(got.remainder[:, ok]), np.isnan(cube[:, ok]))
    # the components add up to the data, and the fit is a real one
    np.testing.assert_allclose((got.seasonal + got.trend + got.remainder)[:, ok][~np.isnan(cube[:, ok])],
                               cube[:, ok][~np.isnan(cube[:, ok])], rtol=1e-12)
    assert 1.0 < np.median(got.seasonal_amplitude[ok]) < 3.0  # sine of amplitude 1
    if kw.get("robust"):
        assert np.median(got.weights[:, 0]) > 0.5
        assert not ok[3] or np.median(got.weights[10:14, 3]) < 0.5  # outliers down-weighted
    else:
        assert (got.weights[:, ok] == 1.0).all()
    if kw["seasonal"] in ("periodic", "per"):  # the long (10 T + 1) window
        assert got.params.seasonal == 10 * n_times + 1


def test_cuda_float32_input_gives_float32_outputs_equal_to_cpu():
    cube = make_cube(61, 6, seed=1).astype(np.float32)
    got = stl(cube, 6, engine="cuda", seasonal=9, robust=True, outer_iter=1)
    cpu = stl(cube, 6, engine="cpu", seasonal=9, robust=True, outer_iter=1)
    assert got.seasonal.dtype == np.float32 and got.trend_slope.dtype == np.float32
    assert_same(got, cpu, atol=1e-5)
    assert (got.status[[0, 1, 2]] == S.OK).all()


def test_cuda_decompose_sends_float32_as_is():
    """float32 series go to the device as float32 and are widened by the transpose
    kernel: exactly the float64 decomposition of the same values."""
    cube = make_cube(61, 6, seed=2).astype(np.float32)
    series = np.ascontiguousarray(cube.T)
    params = resolve_params(61, 6, 7, None, None, 1, 1, None, None, None, None, False, None,
                            None, "statsmodels")
    got = _cuda.decompose(series, params)
    expected = _cpu.decompose(series.astype(np.float64), params)
    assert got[0].dtype == np.float64 and got[3].dtype == np.int8
    np.testing.assert_array_equal(got[3], expected[3])
    for a, b in zip(got[:3], expected[:3]):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-9)
    assert np.isfinite(got[0][0]).all() and np.isnan(got[0][6]).all()


@pytest.mark.parametrize("how", ["max_series", "bytes"])
def test_cuda_chunks_and_streams_give_the_same_result(how):
    """3 series per chunk: 4 chunks (the last one short) over the two buffer sets."""
    cube = make_cube(61, 6, seed=3)
    kw = dict(seasonal=7, seasonal_jump=2, robust=True, outer_iter=1)
    expected = stl(cube, 6, engine="cpu", **kw)
    per_series = _cuda._bytes_per_series(61, 6, 8)
    if how == "max_series":
        config.CUDA_CHUNK_PIXELS_MAX = 3
    else:
        config.CUDA_CHUNK_BYTES = 2 * 3 * per_series + 7
        assert chunk_items(None, 10, per_series) == 3
    got = stl(cube, 6, engine="cuda", **kw)
    assert_same(got, expected)
    assert list(got.status) == list(expected.status) and (got.status[:6] == S.OK).all()


def test_cuda_keeps_pixel_shapes_and_empty_batches():
    cube = make_cube(61, 6, seed=4)[:, :6].reshape(61, 2, 3)
    got = stl(cube, 6, engine="cuda", trend_jump=2)
    assert got.trend.shape == (61, 2, 3) and got.status.shape == (2, 3)
    assert_same(got, stl(cube, 6, engine="cpu", trend_jump=2))
    empty = stl(np.empty((61, 0, 3)), 6, engine="cuda")
    assert empty.status.shape == (0, 3) and empty.seasonal.shape == (61, 0, 3)


@pytest.mark.skipif(REAL_GPU, reason="auto picks cuda on a GPU for large batches only")
def test_auto_engine_picks_cuda_for_large_batches_on_a_gpu(monkeypatch):
    from tscube import engines

    cube = make_cube(61, 6, seed=5)
    assert stl(cube, 6).engine == "cpu"  # the simulator is no GPU
    monkeypatch.setattr(engines, "cuda_available", lambda: True)
    monkeypatch.setattr(config, "CUDA_AUTO_MIN_WORK", cube.size + 1)
    assert stl(cube, 6).engine == "cpu"  # too small
    monkeypatch.setattr(config, "CUDA_AUTO_MIN_WORK", cube.size)
    got = stl(cube, 6)
    assert got.engine == "cuda"
    assert_same(got, stl(cube, 6, engine="cpu"))


def test_cuda_buffers_are_kept_for_the_next_call_and_timed():
    cube = make_cube(61, 6, seed=6)
    release_buffers()
    first = stl(cube, 6, engine="cuda", seasonal=9)
    kept = list(_cuda._KEPT.sets)
    assert len(kept) == 1
    again = stl(cube, 6, engine="cuda", seasonal=7, robust=True)  # other windows: same buffers
    assert _cuda._KEPT.sets[0] is kept[0]
    assert_same(again, stl(cube, 6, engine="cpu", seasonal=7, robust=True))
    assert_same(first, stl(cube, 6, engine="cpu", seasonal=9))
    stl(cube, 5, engine="cuda")  # another period: other work rows
    assert _cuda._KEPT.sets[0] is not kept[0]
    timings = {"stale": 1.0}
    rows = np.ascontiguousarray(cube.T)
    _cuda.decompose(rows, first.params, timings=timings)
    assert set(timings) == {"h2d", "kernels", "d2h", "kernel_transpose_in", "kernel_stl",
                            "kernel_transpose_out"}
    np.testing.assert_allclose(sum(v for k, v in timings.items() if k.startswith("kernel_")),
                               timings["kernels"])


@pytest.mark.skipif(REAL_GPU, reason="checks the error raised where there is no GPU")
def test_cuda_without_gpu_raises_naming_the_cause():
    """Without the simulator and without a driver: a RuntimeError, not a crash; importing
    the engine module imports no numba.cuda."""
    code = (
        "import sys, numpy as np\n"
        "import tscube.stl._cuda\n"
        "from tscube.stl import stl\n"
        "assert 'numba.cuda' not in sys.modules\n"
        "try:\n"
        "    stl(np.ones((30, 2)), 6, engine='cuda')\n"
        "except RuntimeError as exc:\n"
        "    print('RuntimeError:', exc)\n"
    )
    result = run_without_simulator(code)
    assert_no_gpu_error(result)


_PTX_CHECK = '''
from tscube.parallel import cuda as kern
from tscube.stl import _cuda

kernel = _cuda._kernel(cuda)
f8, i8 = nt.float64, nt.int64
# the same argument types as _cuda._run_locked passes (C-contiguous device views)
checks = [(kernel, (A(f8, 2), A(i8, 1), A(f8, 4), A(f8, 2), A(f8, 2), A(f8, 2),
                    A(nt.int8, 1), A(nt.boolean, 2), A(i8, 2), A(f8, 2)))]
for raw_type in (nt.float32, nt.float64):  # the transposes of the data and outputs
    checks.append((kern.clean_transpose_kernel(32, 8), (A(raw_type, 2), nt.boolean, f8, A(f8, 2))))
'''


@pytest.mark.skipif(REAL_GPU, reason="the real-GPU run compiles the kernel anyway")
def test_cuda_kernel_compiles_to_ptx():
    """The simulator neither types nor compiles kernels (it calls the CPU-compiled cpu
    engine function): compile the kernel, with everything it calls, to PTX with NVVM
    where its libraries are installed (the test extras'; no GPU needed), else skip."""
    check_ptx(_PTX_CHECK, 3)
