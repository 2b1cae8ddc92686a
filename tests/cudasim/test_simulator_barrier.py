"""The CUDA simulator's ``cuda.syncthreads()`` as tests/conftest.py replaces it (threads that
meet at a condition variable instead of a polling block manager): the semantics the cuda
engines' tests rely on, checked on kernels written for them."""

import numpy as np
import pytest

cuda = pytest.importorskip("numba.cuda")
from numba import config as numba_config  # noqa: E402

if not numba_config.ENABLE_CUDASIM:
    pytest.skip("checks the simulator's barrier", allow_module_level=True)

from numba.cuda.simulator import kernel as simulator  # noqa: E402

TPB = 8


@cuda.jit
def _block_sums(x, out):
    """Tree sum per block in shared memory: a barrier before every level."""
    shared = cuda.shared.array(TPB, np.float64)
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * TPB + tid
    shared[tid] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    step = TPB // 2
    while step > 0:
        if tid < step:
            shared[tid] += shared[tid + step]
        cuda.syncthreads()
        step //= 2
    if tid == 0:
        out[cuda.blockIdx.x] = shared[0]


@cuda.jit
def _early_return(n_running, counts, rounds):
    """Threads from ``n_running`` on return at once; the others meet ``rounds`` times and
    count, after each barrier, how many arrived at it."""
    tid = cuda.threadIdx.x
    block = counts[cuda.blockIdx.x]
    if tid >= n_running:
        return
    for r in range(rounds):
        cuda.atomic.add(block, r, 1)
        cuda.syncthreads()
        if tid == 0 and block[r] != n_running:
            block[rounds] = 1  # someone passed the barrier before all had arrived


@cuda.jit
def _counts_and_votes(flags, out):
    tid = cuda.threadIdx.x
    out[0] = cuda.syncthreads_count(flags[tid])
    out[1] = cuda.syncthreads_and(flags[tid])
    out[2] = cuda.syncthreads_or(flags[tid])


@cuda.jit
def _fails_in_one_thread(x):
    tid = cuda.threadIdx.x
    cuda.syncthreads()
    if tid == 3:
        x[x.size + 10] = 1.0  # out of bounds: the simulator raises IndexError
    cuda.syncthreads()
    x[tid] = tid


def test_the_polling_block_manager_is_replaced():
    assert getattr(simulator.BlockManager.run, "_tscube_barrier", False)


def test_block_sums_wait_for_every_level():
    x = np.arange(37, dtype=np.float64)
    out = np.zeros(5)
    _block_sums[5, TPB](x, out)
    np.testing.assert_array_equal(out, [x[i:i + TPB].sum() for i in range(0, 40, TPB)])


@pytest.mark.parametrize("n_running", [TPB, 5, 1, 0])
def test_threads_that_returned_do_not_hold_the_barrier(n_running):
    rounds = 4
    counts = np.zeros((2, rounds + 1), np.int64)
    _early_return[2, TPB](n_running, counts, rounds)
    np.testing.assert_array_equal(counts[:, :rounds], n_running)
    np.testing.assert_array_equal(counts[:, rounds], 0)


def test_syncthreads_count_and_or():
    out = np.zeros(3, np.int64)
    _counts_and_votes[1, TPB](np.array([0, 1, 1, 0, 1, 0, 0, 1], np.int32), out)
    np.testing.assert_array_equal(out, [4, 0, 1])
    _counts_and_votes[1, TPB](np.ones(TPB, np.int32), out)
    np.testing.assert_array_equal(out, [TPB, 1, 1])


def test_a_failing_thread_raises_its_own_error_and_frees_the_others():
    with pytest.raises(IndexError, match=r"tid=\[3, 0, 0\]"):
        _fails_in_one_thread[1, TPB](np.zeros(TPB))
