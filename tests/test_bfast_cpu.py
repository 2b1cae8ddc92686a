"""The cpu engine equals the reference engine (and so R) on fixtures and random cubes."""

from __future__ import annotations

import numpy as np
import pytest

from tscube import bfast_monitor, config
from tscube.bfast.monitor import OUTPUT_DTYPES
from tscube.datasets import make_cube

from conftest import bfast_case_kwargs, bfast_cases

GRAMS = ["fused", "blas", "simd"]


def assert_same_result(a, b, rtol=1e-5):
    """Identical integer outputs; float outputs within ``rtol`` (NaN where NaN)."""
    for name in list(OUTPUT_DTYPES) + (["process", "boundary"] if a.process is not None else []):
        x, y = getattr(a, name), getattr(b, name)
        assert x.shape == y.shape, name
        if np.issubdtype(x.dtype, np.integer):
            np.testing.assert_array_equal(x, y, err_msg=name)
        else:
            np.testing.assert_array_equal(np.isnan(x), np.isnan(y), err_msg=name)
            np.testing.assert_allclose(x, y, rtol=rtol, atol=1e-10, equal_nan=True, err_msg=name)


@pytest.fixture(params=GRAMS)
def gram(request):
    config.CPU_BFAST_GRAM = request.param
    yield request.param
    config.reset()


_FIXTURE_CASES = [c for c in bfast_cases() if c["status"] != "error" or "NA/NaN/Inf" in c["message"]]


@pytest.mark.parametrize("case", _FIXTURE_CASES[::7], ids=[c["id"] for c in _FIXTURE_CASES[::7]])
def test_cpu_equals_reference_on_r_fixtures(case, gram):
    kwargs = bfast_case_kwargs(case)
    try:
        ref = bfast_monitor(**kwargs, return_process=True, engine="reference")
    except ValueError:
        pytest.skip("caller error in both engines")
    assert_same_result(bfast_monitor(**kwargs, return_process=True, engine="cpu"), ref)


@pytest.mark.parametrize("nan_fraction", [0.0, 0.5, 0.9, 1.0])
def test_cpu_equals_reference_random_cubes(nan_fraction, gram):
    cube = make_cube("demo", shape=(7, 9), n_dates=150, n_history=90, nan_fraction=nan_fraction, seed=4)
    kwargs = dict(data=cube.data, dates=cube.dates, start=cube.start, freq=23, return_process=True)
    assert_same_result(bfast_monitor(**kwargs, engine="cpu"), bfast_monitor(**kwargs, engine="reference"))


#: R's formulas: (order, trend, season)
MODELS = {"trend+season": (0, True, True), "season": (0, False, True), "trend": (0, True, False), "trend+harmon": (3, True, False)}


@pytest.mark.parametrize("process", ["OLS-MOSUM", "OLS-CUSUM"])
@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("nan_fraction", [0.0, 0.5, 0.9])
def test_cpu_equals_reference_extended_models(model, process, nan_fraction, gram):
    """Season dummies (k = 24 regressors), trend only, harmonics, with either monitoring
    process, on cloudy cubes (ROC history at 50 % missing: its recursive residuals on
    prefixes that miss some cycle positions); gappy histories that miss a cycle position
    are SINGULAR_DESIGN in both engines."""
    order, trend, season = MODELS[model]
    cube = make_cube("demo", shape=(5, 9), n_dates=230, n_history=150, nan_fraction=nan_fraction, seed=6)
    kwargs = dict(data=cube.data, dates=cube.dates, start=cube.start, freq=23, order=order, trend=trend, season=season,
                  type=process, history="ROC" if nan_fraction == 0.5 else "all", return_process=True)
    ref = bfast_monitor(**kwargs, engine="reference")
    assert_same_result(bfast_monitor(**kwargs, engine="cpu"), ref)
    if nan_fraction < 0.9:
        assert np.count_nonzero(ref.status == 0) > 10  # most pixels are monitored


def test_cpu_equals_reference_outside_r_table():
    """h, end and level R has no table for: a simulated critical value, the same in both."""
    cube = make_cube("demo", shape=(4, 6), n_dates=150, n_history=90, nan_fraction=0.3, seed=8)
    kwargs = dict(data=cube.data, dates=cube.dates, start=cube.start, freq=23, h=0.3, end=5, level=0.1, return_process=True)
    ref = bfast_monitor(**kwargs, engine="reference")
    assert_same_result(bfast_monitor(**kwargs, engine="cpu"), ref)
    assert ref.attrs["critval"] < bfast_monitor(**{**kwargs, "level": 0.05}, engine="reference").attrs["critval"]


@pytest.mark.parametrize("nan_fraction", [0.0, 0.5])
def test_cpu_equals_reference_float64(nan_fraction):
    """(float64 with the default formulation; each formulation x dtype is a numba compile.)"""
    cube = make_cube("demo", shape=(7, 9), n_dates=150, n_history=90, nan_fraction=nan_fraction, dtype=np.float64, seed=4)
    kwargs = dict(data=cube.data, dates=cube.dates, start=cube.start, freq=23, return_process=True)
    assert_same_result(bfast_monitor(**kwargs, engine="cpu"), bfast_monitor(**kwargs, engine="reference"))


@pytest.mark.parametrize(
    "shape, n_dates, n_history",
    [((1,), 60, 30), ((1, 1), 40, 12), ((3, 1, 2), 50, 25), ((2, 11), 80, 20)],
)
def test_cpu_equals_reference_odd_shapes(shape, n_dates, n_history):
    """One pixel, T barely above k, non-square grids, extra pixel dims."""
    cube = make_cube("demo", shape=(1, int(np.prod(shape))), n_dates=n_dates, n_history=n_history, nan_fraction=0.2, seed=9)
    data = cube.data.reshape((n_dates,) + shape)
    kwargs = dict(data=data, dates=cube.dates, start=cube.start, freq=23, order=1)
    assert_same_result(bfast_monitor(**kwargs, engine="cpu"), bfast_monitor(**kwargs, engine="reference"))


def test_cpu_int16_nodata_equals_reference():
    cube = make_cube("demo", shape=(5, 5), n_dates=120, n_history=70, nan_fraction=0.4, seed=2)
    data = np.where(np.isnan(cube.data), -3000, np.round(cube.data * 1e4)).astype(np.int16)
    kwargs = dict(data=data, dates=cube.dates, start=cube.start, freq=23, nodata=-3000, return_process=True)
    assert_same_result(bfast_monitor(**kwargs, engine="cpu"), bfast_monitor(**kwargs, engine="reference"))


def test_small_blocks_and_many_starts(gram):
    """Pixel blocks smaller than the cube; a list of starts equals one call per start."""
    config.CPU_BLOCK_PIXELS = 3
    cube = make_cube("demo", shape=(4, 5), n_dates=150, n_history=80, nan_fraction=0.3, seed=5)
    starts = [cube.dates[80], cube.dates[100], cube.dates[120]]
    many = bfast_monitor(cube.data, cube.dates, starts, freq=23, engine="cpu", return_process=True)
    assert many.break_time.shape == (3, 4, 5) and many.process.shape == (3, 150, 4, 5)
    ref_many = bfast_monitor(cube.data, cube.dates, starts, freq=23, engine="reference", return_process=True)
    assert_same_result(many, ref_many)
    for i, start in enumerate(starts):
        one = bfast_monitor(cube.data, cube.dates, start, freq=23, engine="cpu", return_process=True)
        for name, value in one.to_dict().items():
            np.testing.assert_array_equal(getattr(many, name)[i], value, err_msg=name)


@pytest.mark.parametrize("n", [1, 2, 3, 15, 16, 17, 18, 33, 64, 257, 1000])
@pytest.mark.parametrize("ties", [False, True])
def test_median_selection_equals_numpy(n, ties):
    """The engine's selection median (both middle ranks, first partition read straight from
    the data) equals ``np.median`` and leaves the data unchanged, for odd and even sizes,
    sizes around the small-selection cut-off, ties and an offset into a longer row."""
    from tscube.bfast.monitor._cpu_pixel import median as _median

    rng = np.random.default_rng(n + 1000 * ties)
    for _ in range(20):
        values = rng.integers(0, 4, n).astype(np.float64) if ties else rng.standard_normal(n)
        row = np.concatenate([rng.standard_normal(5), values, rng.standard_normal(3)])
        before = row.copy()
        scratch = np.full(2 * n, np.nan)
        assert _median(row, 5, n, scratch) == np.median(values)
        np.testing.assert_array_equal(row, before)


def test_gram_basis_spans_the_products_and_is_cached():
    """The 36 products of intercept, trend and three harmonics follow from 21 basis
    columns; the cached variant returns the same, read-only, once per design."""
    from tscube.bfast.monitor._cpu import cached_gram_basis, gram_basis
    from tscube.bfast.core.design import build_design
    from tscube.timeaxis import build_time_axis

    axis = build_time_axis(2000 + np.arange(300) / 23, freq=23)
    X = build_design(axis, order=3, trend=True).matrix
    low = np.tril_indices(X.shape[1])
    products = (X[:, :, None] * X[:, None, :])[:, low[0], low[1]]
    basis, ptr, index, value = gram_basis(products)
    assert len(basis) == 21
    rebuilt = np.stack([products[:, basis[index[ptr[ab]:ptr[ab + 1]]]] @ value[ptr[ab]:ptr[ab + 1]]
                        for ab in range(products.shape[1])], axis=1)
    np.testing.assert_allclose(rebuilt, products, rtol=0, atol=1e-12 * np.abs(products).max())
    cached = cached_gram_basis(products)
    for got, want in zip(cached, (basis, ptr, index, value)):
        np.testing.assert_array_equal(got, want)
        assert not got.flags.writeable
    assert cached_gram_basis(products.copy())[0] is cached[0]
