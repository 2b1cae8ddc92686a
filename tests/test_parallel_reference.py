"""NumPy references of tscube.parallel vs plain Python loops and numpy.linalg."""

import subprocess
import sys

import numpy as np
import pytest

from tscube.parallel import reference as R

SIZES = [0, 1, 31, 32, 33, 100]


@pytest.fixture
def rng():
    return np.random.default_rng(7)


def _loop_scan(x, exclusive=False):
    out, running = [], 0
    for value in x:
        if exclusive:
            out.append(running)
            running += value
        else:
            running += value
            out.append(running)
    return np.array(out, dtype=np.float64)


@pytest.mark.parametrize("n", SIZES)
def test_scans_match_loops(n, rng):
    x = rng.integers(-20, 20, size=n)
    np.testing.assert_array_equal(R.inclusive_scan(x), _loop_scan(x.tolist()))
    np.testing.assert_array_equal(R.exclusive_scan(x), _loop_scan(x.tolist(), exclusive=True))
    assert R.inclusive_scan(x).dtype == np.int64


def test_scan_dtypes_float32_accumulates_in_float64(rng):
    x = (rng.random(1000) * 1e3).astype(np.float32)
    got = R.inclusive_scan(x)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got[-1], sum(float(v) for v in x), rtol=1e-14)
    assert R.exclusive_scan(x, dtype=np.float32).dtype == np.float32
    assert R.inclusive_scan(np.ones(3, bool)).tolist() == [1, 2, 3]


def _loop_segmented(x, flags, exclusive):
    out, running = [], 0
    for value, head in zip(x, flags):
        if head:
            running = 0
        out.append(running if exclusive else running + value)
        running += value
    return np.array(out, dtype=np.float64)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("exclusive", [False, True])
def test_segmented_scan_matches_loop(n, exclusive, rng):
    x = rng.integers(-9, 10, size=n)
    flags = rng.random(n) < 0.15
    got = R.segmented_scan(x, flags, exclusive=exclusive)
    np.testing.assert_array_equal(got, _loop_segmented(x, flags, exclusive))


@pytest.mark.parametrize("exclusive", [False, True])
def test_batched_scan_matches_cumsum(exclusive, rng):
    values = rng.standard_normal((3, 4, 17))
    want = np.cumsum(values, axis=-1)
    if exclusive:
        want = np.concatenate([np.zeros((3, 4, 1)), want[..., :-1]], axis=-1)
    np.testing.assert_allclose(R.batched_scan(values, exclusive=exclusive), want, atol=1e-12)
    assert R.batched_scan(np.zeros((0, 5))).shape == (0, 5)
    assert R.batched_scan(np.zeros((2, 0))).shape == (2, 0)


def test_batched_sum_matches_loop(rng):
    values = rng.standard_normal((4, 9)).astype(np.float32)
    values[0, 3] = np.nan
    got = R.batched_sum(values, skip_nan=True)
    assert got.dtype == np.float64
    for r, row in enumerate(values):
        assert got[r] == pytest.approx(sum(float(v) for v in row if not np.isnan(v)), rel=1e-12)
    assert np.isnan(R.batched_sum(values)[0])
    assert R.batched_sum(np.ones((2, 3), bool)).tolist() == [3, 3]


def test_compact_with_keys_matches_loop(rng):
    values = rng.standard_normal((4, 15))
    values[rng.random(values.shape) < 0.4] = np.nan
    values[0] = np.nan
    count, compacted, keys = R.compact_with_keys(values)
    for r, row in enumerate(values):
        kept = [(v, i) for i, v in enumerate(row) if not np.isnan(v)]
        assert count[r] == len(kept)
        np.testing.assert_array_equal(compacted[r, : len(kept)], [v for v, _ in kept])
        np.testing.assert_array_equal(keys[r, : len(kept)], [i for _, i in kept])
        assert np.all(np.isnan(compacted[r, len(kept):]))  # padded like filterNaNsWKeys
        assert np.all(keys[r, len(kept):] == 0)


def test_compact_with_keys_shapes_and_errors():
    count, compacted, keys = R.compact_with_keys(np.array([np.nan, 2.0, np.nan, 4.0]))
    assert count.shape == () and int(count) == 2
    np.testing.assert_array_equal(compacted, [2.0, 4.0, np.nan, np.nan])
    np.testing.assert_array_equal(keys, [1, 3, 0, 0])
    count, _, _ = R.compact_with_keys(np.zeros((2, 0)))
    assert count.tolist() == [0, 0]
    with pytest.raises(TypeError, match="values"):
        R.compact_with_keys(np.arange(3))


def test_first_true_and_argmin_match_loops(rng):
    mask = rng.random((6, 30)) < 0.05
    mask[0] = False
    for r, row in enumerate(mask):
        hits = [i for i, v in enumerate(row) if v]
        assert R.first_true(mask)[r] == (hits[0] if hits else -1)
    x = np.round(rng.standard_normal((6, 30)) * 2)
    x[rng.random(x.shape) < 0.3] = np.nan
    x[1] = np.nan
    for r, row in enumerate(x):
        valid = [(v, i) for i, v in enumerate(row) if not np.isnan(v)]
        assert R.argmin(x)[r] == (min(valid)[1] if valid else -1)  # ties: first index
    assert R.argmin(np.array([np.inf, np.nan, np.inf])) == 0
    assert R.first_true(np.zeros((2, 0))).tolist() == [-1, -1]
    assert R.argmin(np.zeros(0)) == -1


def test_masked_gram_and_xty_match_loops(rng):
    X = rng.standard_normal((12, 3))
    Y = rng.standard_normal((5, 12))
    Y[rng.random(Y.shape) < 0.3] = np.nan
    mask = ~np.isnan(Y)
    G = R.batched_masked_gram(X, mask)
    b = R.batched_masked_xty(X, Y)
    for p in range(5):
        want_G = sum(np.outer(X[t], X[t]) for t in range(12) if mask[p, t])
        want_b = sum(X[t] * Y[p, t] for t in range(12) if mask[p, t])
        np.testing.assert_allclose(G[p], want_G, rtol=1e-12)
        np.testing.assert_allclose(b[p], want_b, rtol=1e-12)
    with pytest.raises(ValueError, match="mask"):
        R.batched_masked_gram(X, mask[:, :5])
    with pytest.raises(ValueError, match="X"):
        R.batched_masked_xty(X[0], Y)


def test_gauss_jordan_matches_linalg_and_flags_singular(rng):
    A = rng.standard_normal((6, 4, 4))
    A = A @ A.transpose(0, 2, 1) + 0.1 * np.eye(4)
    A[1] = 0.0
    A[2, 3] = A[2, 0]  # rank 3
    A[3] = np.eye(4)[[1, 0, 3, 2]]  # zero leading pivot: needs row exchanges
    A[4, 2, 2] = np.inf
    inverse, singular = R.batched_gauss_jordan(A)
    assert singular.tolist() == [False, True, True, False, True, False]
    ok = ~singular
    np.testing.assert_allclose(inverse[ok], np.linalg.inv(A[ok]), rtol=1e-9, atol=1e-12)
    assert np.all(np.isnan(inverse[singular]))
    b = rng.standard_normal((6, 4))
    x, singular_b = R.batched_gauss_jordan(A, b)
    np.testing.assert_array_equal(singular_b, singular)
    np.testing.assert_allclose(x[ok], np.linalg.solve(A[ok], b[ok][..., None])[..., 0],
                               rtol=1e-9, atol=1e-12)
    # relative tolerance: a well-conditioned but tiny matrix is not singular
    _, tiny = R.batched_gauss_jordan(1e-200 * np.eye(3)[None])
    assert not tiny[0]
    with pytest.raises(ValueError, match="A"):
        R.batched_gauss_jordan(np.zeros((2, 3, 4)))
    with pytest.raises(ValueError, match="rtol"):
        R.batched_gauss_jordan(A, rtol=-1.0)


@pytest.mark.parametrize("bad", [np.zeros((2, 2)), np.array(["a"])])
def test_scan_rejects_bad_input(bad):
    with pytest.raises((ValueError, TypeError), match="x"):
        R.inclusive_scan(bad)


def test_importing_tscube_parallel_does_not_import_numba_cuda():
    code = (
        "import sys, tscube, tscube.parallel as p; p.reference.inclusive_scan([1]);"
        "assert 'numba.cuda' not in sys.modules, 'numba.cuda imported';"
        "assert 'cuda_inclusive_scan' in dir(p)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
