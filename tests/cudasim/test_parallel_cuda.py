"""tscube.parallel CUDA primitives vs their NumPy references, under the CUDA simulator.

Inputs are tiny and the blocks small (2-16 threads) so that edge sizes (0, 1, one block
exactly, one element more than a block, several levels of block-sum recursion) are all
reached in seconds on the simulator.
"""

import numba
import numpy as np
import pytest

cuda = pytest.importorskip("numba.cuda")
from numba import config as numba_config  # noqa: E402

if not (numba_config.ENABLE_CUDASIM or cuda.is_available()):
    pytest.skip("neither the CUDA simulator nor a GPU is available", allow_module_level=True)

from tscube.parallel import cuda as C  # noqa: E402
from tscube.parallel import reference as R  # noqa: E402
from cuda_checks import check_ptx  # noqa: E402

# chunk of the scan kernels is 2 * threads per block = 32 elements
TPB = 16
SIZES = [0, 1, 31, 32, 33, 100]


@pytest.fixture
def rng():
    return np.random.default_rng(20261122)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("exclusive", [False, True])
def test_scan_float_matches_reference(n, exclusive, rng):
    x = rng.standard_normal(n)
    got = (C.exclusive_scan if exclusive else C.inclusive_scan)(x, threads_per_block=TPB)
    want = (R.exclusive_scan if exclusive else R.inclusive_scan)(x)
    assert got.dtype == np.float64 and got.shape == (n,)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("exclusive", [False, True])
def test_scan_deep_recursion_integers_exact(exclusive, rng):
    # 2 threads -> 4 elements a block: 77 -> 20 -> 5 -> 2 -> 1 block sums
    x = rng.integers(-50, 50, size=77).astype(np.int32)
    got = (C.exclusive_scan if exclusive else C.inclusive_scan)(x, threads_per_block=2)
    want = (R.exclusive_scan if exclusive else R.inclusive_scan)(x)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)


def test_scan_float32_accumulates_in_float64(rng):
    x = (rng.random(70) * 1e4).astype(np.float32)
    x[::7] = np.float32(1e-3)
    got = C.inclusive_scan(x, threads_per_block=TPB)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, np.cumsum(x.astype(np.float64)), rtol=1e-13)
    got32 = C.inclusive_scan(x, dtype=np.float32, threads_per_block=TPB)
    assert got32.dtype == np.float32
    np.testing.assert_allclose(got32, np.cumsum(x, dtype=np.float64), rtol=1e-5)


def test_scan_propagates_nan_like_the_reference(rng):
    x = rng.standard_normal(70)
    x[40] = np.nan
    got = C.inclusive_scan(x, threads_per_block=TPB)
    np.testing.assert_allclose(got, R.inclusive_scan(x), rtol=1e-12, atol=1e-12)
    assert np.isnan(got[40:]).all() and not np.isnan(got[:40]).any()


def test_scan_of_booleans_counts(rng):
    flags = rng.random(45) < 0.4
    np.testing.assert_array_equal(C.inclusive_scan(flags, threads_per_block=TPB),
                                  np.cumsum(flags.astype(np.int64)))


@pytest.mark.parametrize("n", [0, 1, 33, 100])
@pytest.mark.parametrize("exclusive", [False, True])
def test_segmented_scan_matches_reference(n, exclusive, rng):
    x = rng.integers(-9, 10, size=n)
    flags = rng.random(n) < 0.08
    flags[[i for i in (32, 64, 65) if i < n]] = True  # heads on chunk boundaries
    got = C.segmented_scan(x, flags, exclusive=exclusive, threads_per_block=TPB)
    np.testing.assert_array_equal(got, R.segmented_scan(x, flags, exclusive=exclusive))


def test_segmented_scan_no_heads_is_plain_scan_and_all_heads_is_identity(rng):
    x = rng.standard_normal(70)
    none = np.zeros(70, bool)
    np.testing.assert_allclose(C.segmented_scan(x, none, threads_per_block=4),
                               np.cumsum(x), rtol=1e-12, atol=1e-12)
    every = np.ones(70, bool)
    np.testing.assert_array_equal(C.segmented_scan(x, every, threads_per_block=4), x)
    np.testing.assert_array_equal(
        C.segmented_scan(x, every, exclusive=True, threads_per_block=4), np.zeros(70))


@pytest.mark.parametrize("shape", [(4, 33), (2, 1), (3, 0), (0, 5), (2, 2, 20)])
@pytest.mark.parametrize("exclusive", [False, True])
def test_batched_scan_rows(shape, exclusive, rng):
    values = rng.integers(-5, 6, size=shape)
    got = C.batched_scan(values, exclusive=exclusive, threads_per_block=TPB)
    np.testing.assert_array_equal(got, R.batched_scan(values, exclusive=exclusive))


@pytest.mark.parametrize("shape", [(5, 37), (2, 1), (3, 0), (0, 4)])
@pytest.mark.parametrize("skip_nan", [False, True])
def test_batched_sum_rows(shape, skip_nan, rng):
    values = rng.standard_normal(shape)
    values[rng.random(shape) < 0.2] = np.nan
    got = C.batched_sum(values, skip_nan=skip_nan, threads_per_block=8)
    np.testing.assert_allclose(got, R.batched_sum(values, skip_nan=skip_nan), rtol=1e-12,
                               atol=1e-12)
    counts = C.batched_sum(~np.isnan(values), threads_per_block=8)
    np.testing.assert_array_equal(counts, R.batched_sum(~np.isnan(values)))
    assert counts.dtype == np.int64


def _nan_rows(rng, shape, fraction=0.4):
    values = rng.standard_normal(shape)
    values[rng.random(shape) < fraction] = np.nan
    return values


def _assert_compaction_equal(got, want):
    count, values, keys = got
    np.testing.assert_array_equal(count, want[0])
    np.testing.assert_array_equal(values, want[1])  # NaN == NaN here
    np.testing.assert_array_equal(keys, want[2])
    assert values.dtype == want[1].dtype and keys.dtype == np.int64


def test_compact_rows_block_per_row(rng):
    values = _nan_rows(rng, (5, 37))
    values[1] = np.nan  # nothing valid
    values[2] = np.arange(37.0)  # nothing missing
    got = C.compact_with_keys(values, threads_per_block=8)
    _assert_compaction_equal(got, R.compact_with_keys(values))


def test_compact_rows_float32_and_custom_padding(rng):
    values = _nan_rows(rng, (3, 20)).astype(np.float32)
    got = C.compact_with_keys(values, fill_value=-9.0, key_fill=-1, threads_per_block=4)
    _assert_compaction_equal(got, R.compact_with_keys(values, fill_value=-9.0, key_fill=-1))


@pytest.mark.parametrize("n", [0, 1, 33, 100])
def test_compact_device_wide(n, rng):
    values = _nan_rows(rng, n)
    got = C.compact_with_keys(values, threads_per_block=TPB)
    _assert_compaction_equal(got, R.compact_with_keys(values))


def test_compact_device_wide_trailing_nan_and_all_nan(rng):
    values = _nan_rows(rng, 40)
    values[-1] = np.nan
    _assert_compaction_equal(C.compact_with_keys(values, threads_per_block=4),
                             R.compact_with_keys(values))
    empty = np.full(9, np.nan)
    _assert_compaction_equal(C.compact_with_keys(empty, threads_per_block=4),
                             R.compact_with_keys(empty))


@pytest.mark.parametrize("n", [0, 1, 33, 300])
def test_first_true_device_wide(n, rng):
    # 4 threads, 32 elements a block: 300 -> 10 candidates -> 1
    for position in ([], [n - 1], [n // 2, n - 1], [0]):
        mask = np.zeros(n, bool)
        mask[[p for p in position if 0 <= p < n]] = True
        got = C.first_true(mask, threads_per_block=4)
        assert got == R.first_true(mask)


def test_first_true_rows(rng):
    mask = rng.random((7, 45)) < 0.04
    mask[0] = False
    mask[1, -1] = True
    np.testing.assert_array_equal(C.first_true(mask, threads_per_block=8), R.first_true(mask))
    np.testing.assert_array_equal(C.first_true(np.zeros((3, 0)), threads_per_block=8), [-1] * 3)


def test_argmin_rows_ties_nan_inf(rng):
    x = np.round(rng.standard_normal((6, 41)) * 2)  # many ties
    x[rng.random(x.shape) < 0.2] = np.nan
    x[0] = np.nan
    x[1] = np.inf
    x[1, 5] = np.nan
    x[2, :] = 3.0
    got = C.argmin(x, threads_per_block=8)
    np.testing.assert_array_equal(got, R.argmin(x))


@pytest.mark.parametrize("n", [0, 1, 33, 300])
def test_argmin_device_wide(n, rng):
    x = np.round(rng.standard_normal(n) * 3)
    x[rng.random(n) < 0.2] = np.nan
    assert C.argmin(x, threads_per_block=4) == R.argmin(x)


def test_argmin_device_wide_all_nan_and_integers(rng):
    assert C.argmin(np.full(50, np.nan), threads_per_block=4) == -1
    ints = rng.integers(0, 5, size=90)
    assert C.argmin(ints, threads_per_block=4) == R.argmin(ints)


@pytest.mark.parametrize(
    "n_pixels, n_dates, k, tiles",
    [(11, 23, 5, (3, 4, 3)),  # partial tiles on every axis
     (3, 9, 2, (None, None, None)),  # config defaults, k below the regressor tile
     (1, 1, 1, (1, 1, 1)),
     (5, 0, 3, (2, 2, 2))],
)
def test_batched_masked_gram(n_pixels, n_dates, k, tiles, rng):
    X = rng.standard_normal((n_dates, k))
    mask = rng.random((n_pixels, n_dates)) < 0.7
    tile_k, tile_pixels, tile_dates = tiles
    got = C.batched_masked_gram(X, mask, tile_k=tile_k, tile_pixels=tile_pixels,
                                tile_dates=tile_dates)
    np.testing.assert_allclose(got, R.batched_masked_gram(X, mask), rtol=1e-12, atol=1e-12)


def test_batched_masked_gram_float32_and_empty(rng):
    X = rng.standard_normal((10, 3)).astype(np.float32)
    mask = rng.random((4, 10)) < 0.5
    got = C.batched_masked_gram(X, mask, dtype=np.float32, tile_pixels=2, tile_dates=4)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, R.batched_masked_gram(X, mask), rtol=1e-5, atol=1e-5)
    assert C.batched_masked_gram(X, np.zeros((0, 10), bool)).shape == (0, 3, 3)


def test_batched_masked_xty(rng):
    X = rng.standard_normal((19, 4))
    Y = _nan_rows(rng, (9, 19), 0.3)
    Y[0] = np.nan
    got = C.batched_masked_xty(X, Y, threads_per_block=4)
    np.testing.assert_allclose(got, R.batched_masked_xty(X, Y), rtol=1e-12, atol=1e-12)


def _gram_batch(rng, m=8, n=20, k=4):
    X = rng.standard_normal((n, k))
    mask = rng.random((m, n)) < 0.8
    G = R.batched_masked_gram(X, mask)
    G[1] = 0.0  # all-masked pixel
    G[2, :, 1] = G[2, :, 0]  # rank-deficient
    G[2, 1, :] = G[2, 0, :]
    G[3, 0, 0] = np.nan  # not finite
    G[4] = np.eye(k)[::-1] * 3.0  # needs row exchanges (zero leading pivot)
    return G


def test_gauss_jordan_inverse_and_flags_match_reference(rng):
    G = _gram_batch(rng)
    got, got_singular = C.batched_gauss_jordan(G)
    want, want_singular = R.batched_gauss_jordan(G)
    np.testing.assert_array_equal(got_singular, want_singular)
    assert got_singular.tolist() == [False, True, True, True] + [False] * 4
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    assert np.all(np.isnan(got[got_singular]))
    ok = ~got_singular
    np.testing.assert_allclose(got[ok], np.linalg.inv(G[ok]), rtol=1e-8, atol=1e-10)


def test_gauss_jordan_solve_vector_and_matrix_rhs(rng):
    G = _gram_batch(rng)
    b = rng.standard_normal((8, 4))
    x, singular = C.batched_gauss_jordan(G, b)
    want, want_singular = R.batched_gauss_jordan(G, b)
    np.testing.assert_array_equal(singular, want_singular)
    np.testing.assert_allclose(x, want, rtol=1e-10, atol=1e-12)
    B = rng.standard_normal((8, 4, 2))
    x2, _ = C.batched_gauss_jordan(G, B, threads_per_block=8)  # fewer threads than entries
    np.testing.assert_allclose(x2, R.batched_gauss_jordan(G, B)[0], rtol=1e-10, atol=1e-12)


def test_gauss_jordan_one_by_one_and_empty():
    A = np.array([[[2.0]], [[0.0]], [[1e-300]]])
    x, singular = C.batched_gauss_jordan(A)
    assert singular.tolist() == [False, True, False]  # the tolerance is relative
    np.testing.assert_allclose(x[[0, 2], 0, 0], [0.5, 1e300])
    x, singular = C.batched_gauss_jordan(np.zeros((0, 3, 3)))
    assert x.shape == (0, 3, 3) and singular.shape == (0,)


def test_gauss_jordan_too_large_for_shared_memory_is_rejected():
    with pytest.raises(ValueError, match="shared-memory"):
        C.batched_gauss_jordan(np.zeros((1, 60, 60)))


@pytest.mark.parametrize("bad", [3, 0, 2048, 2.0, True])
def test_bad_threads_per_block_is_rejected(bad):
    with pytest.raises((ValueError, TypeError), match="threads_per_block"):
        C.inclusive_scan(np.ones(4), threads_per_block=bad)


USER_TPB = 8
USER_SCAN_SIZE = C.scan_shared_size(2 * USER_TPB)


@cuda.jit
def _row_totals_by_block_scan(values, scanned, totals):
    """A user per-pixel kernel built on the block-level scan device function."""
    s = cuda.shared.array(USER_SCAN_SIZE, numba.float64)
    row = cuda.blockIdx.x
    tid = cuda.threadIdx.x
    s[C.conflict_free(tid)] = values[row, tid]
    s[C.conflict_free(tid + USER_TPB)] = values[row, tid + USER_TPB]
    total = C.block_exclusive_scan(s, 2 * USER_TPB)
    scanned[row, tid] = s[C.conflict_free(tid)]
    scanned[row, tid + USER_TPB] = s[C.conflict_free(tid + USER_TPB)]
    if tid == 0:
        totals[row] = total


def test_block_scan_device_function_is_reusable_in_a_user_kernel(rng):
    values = rng.standard_normal((3, 2 * USER_TPB))
    scanned = np.zeros_like(values)
    totals = np.zeros(3)
    _row_totals_by_block_scan[3, USER_TPB](values, scanned, totals)
    np.testing.assert_allclose(totals, values.sum(axis=1), rtol=1e-12)
    np.testing.assert_allclose(scanned, R.batched_scan(values, exclusive=True),
                               rtol=1e-12, atol=1e-12)


_PTX_CHECK = '''
from tscube.parallel import cuda as par

f4, f8, i2, i8, u1 = nt.float32, nt.float64, nt.int16, nt.int64, nt.uint8
tpb = 128
checks = []
# the argument types the host functions pass (C-contiguous device arrays): float64, float32 and
# int16 data; accumulation in float64, float32 (asked for) and int64; flags and masks as uint8
for data, acc, acc_name in ((f8, f8, "<f8"), (f4, f4, "<f4"), (i2, i8, "<i8"), (u1, i8, "<i8")):
    checks += [
        (par._scan_blocks_kernel(tpb, acc_name), (A(data, 1), A(acc, 1), A(acc, 1), nt.boolean)),
        (par._segscan_blocks_kernel(tpb, acc_name),
         (A(data, 1), A(u1, 1), A(acc, 1), A(u1, 1), A(acc, 1), A(u1, 1), nt.boolean)),
        (par._batched_scan_kernel(tpb, acc_name), (A(data, 2), A(acc, 2), nt.boolean)),
        (par._batched_sum_kernel(tpb, acc_name), (A(data, 2), A(acc, 1), nt.boolean)),
    ]
for acc in (f8, i8):
    checks += [(par._add_block_carry, (A(acc, 1), A(acc, 1), i8)),
               (par._add_segment_carry, (A(acc, 1), A(u1, 1), A(acc, 1), i8))]
for data in (f8, f4):
    checks += [
        (par._compact_rows_kernel(tpb), (A(data, 2), A(data, 2), A(i8, 2), A(i8, 1), data, i8)),
        (par._nan_flags, (A(data, 1), A(u1, 1))),
        (par._compact_scatter, (A(data, 1), A(i8, 1), A(data, 1), A(i8, 1), data, i8)),
    ]
for acc, acc_name in ((f8, "<f8"), (f4, "<f4")):
    checks += [
        (par.masked_gram_kernel(8, 32, 8, acc_name), (A(acc, 2), A(u1, 2), A(acc, 3))),
        (par._masked_xty_kernel(acc_name), (A(acc, 2), A(f8, 2), A(acc, 2))),
    ]
checks += [
    (par._first_true_rows_kernel(tpb), (A(u1, 2), A(i8, 1))),
    (par._first_true_chunks_kernel(tpb), (A(u1, 1), i8, A(i8, 1))),
    (par._min_index_rows_kernel(tpb), (A(i8, 2), A(i8, 1))),
    (par._argmin_rows_kernel(tpb), (A(f8, 2), A(i8, 1))),
    (par._argmin_chunks_kernel(tpb), (A(f8, 1), A(i8, 1), i8, A(f8, 1), A(i8, 1))),
    (par._gauss_jordan_kernel(8, 1, 96), (A(f8, 3), A(f8, 3), f8, A(f8, 3), A(i8, 1))),
    (par.clean_transpose_kernel(32, 8), (A(i2, 2), nt.boolean, f8, A(f8, 2))),
]
'''


def test_cuda_kernels_compile_to_ptx():
    """The simulator neither types nor compiles kernels: compile every kernel of the
    primitives to PTX with NVVM where its libraries are installed (the test extras'; no
    GPU needed), else skip."""
    check_ptx(_PTX_CHECK, 37)
