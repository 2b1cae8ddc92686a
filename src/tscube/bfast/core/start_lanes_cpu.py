"""Segment starts as SIMD lanes: the Bai–Perron triangle of a pixel whose valid dates are
its own (cpu).

A start's Sherman–Morrison updates of ``(X'X)^{-1}`` are a chain: each row needs the
previous row's inverse, so one start's rows run at the latency of that chain (products,
a division, an update), far below what the core can do. Up to :data:`LANES` starts side by
side, each in a lane of the vectors, take every operation of a row for all of them at
once and fill the core's vector units instead. Consecutive starts share the rows they
update, so the lanes run row by row in lockstep; a start joins when the rows reach the
end of its first ``h`` rows, so the lanes at work are always the first ones.

Each lane repeats, operation for operation and in the same order, what the one-start
functions of :mod:`tscube.bfast.core.bai_perron_cpu` do (``_cholesky_of_sums``,
``_inverse_from_sums``, ``_rss_from_sums``, ``_update``), except that the updates keep
``(X'X)^{-1}`` symmetric and fuse the multiply-adds of ``P x`` (rounding: the RSS move by
about 1e-16). Each row's prediction and RSS are computed as a replay computes them from
the recorded ``P x`` and ``1 / f``, so that the memo's replays and a pixel run alone agree
bit for bit.

How the code is written is what makes the compiler vectorise it (numba's LLVM runs the
loop vectorizer, not the SLP one, so only loops vectorise, and only where it can tell
that a store does not feed a later load): the lanes are the innermost loop, with a
trip count known only at run time (a constant one is unrolled before it could be
vectorised); and in the updates every per-lane value lives in one flat array ``W`` at
rows of a constant stride :data:`LANES`, so that the compiler sees every access as a
constant distance from the others (across arrays it would need a run-time check per
pair, and gives up past eight). The kernels exist for eight regressors (the default
trend and three harmonics), written out (:mod:`tscube.bfast.core.start_lanes_8_cpu`, by
``tools/write_start_lanes.py``); other models take the one-start path.
"""

from __future__ import annotations

import numpy as np

from ..._jit import jit

#: Starts per batch, and the stride of a lane's values in ``W``: four AVX-512 vectors or
#: eight AVX2 ones. The compiler unrolls some lane loops four vectors wide and leaves
#: fewer lanes to scalar code (16 lanes: the set-up 12 % slower, in its first form).
LANES = 32

# Rows of ``W`` (each LANES wide) in the eight-regressor kernels
# (:mod:`tscube.bfast.core.start_lanes_8_cpu`): P = (X'X)^{-1}, symmetric, its entry
# (a, b), a >= b, at row a (a + 1) / 2 + b; then P x, 1 / f, the fixed end's sums of X'y
# and the running RSS ...
W_PX = 36
W_INV = 44
W_LOW = 45
W_TOTAL = 53
# ... the starts' checks: the first k rows of full rank, the first fit's Gram well
# conditioned; the first fit's Gram (its triangle) and its sums of X'y
W_FULL = 54
W_OK = 55
W_GRAM = 56
W_DIFF = 92
W_ROWS = 100


@jit(plain_args=True)
def lane_scratch(n_times):
    """Scratch of a batch of :data:`LANES` starts: ``W`` (:data:`W_ROWS` × :data:`LANES`),
    the RSS of every lane's segments ``(n_times + 1, LANES)``, and per lane its first row,
    memo offset, kind and place among the lanes updated ``(4, LANES)``."""
    return np.empty(W_ROWS * LANES), np.empty((n_times + 1, LANES)), np.empty((4, LANES), dtype=np.int64)
