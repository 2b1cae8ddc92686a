"""Layout of the ROC lane kernel's per-lane state (:mod:`tscube.bfast.monitor.history._cpu`).

Flat arrays with a compile-time row length of ``LANES`` (one row per quantity, the
``S_*`` offsets), so that LLVM sees constant distances between the rows it loads and
stores and vectorises the loops over the lanes (with runtime row strides it would need
an alias check per pair of rows, and gives up); indexed by unsigned integers (``U``: a
signed index gets numba's negative-index wraparound, which turns every vector load and
store into a gather or scatter). Symmetric k x k matrices are packed lower triangles,
element ``a (a + 1) / 2 + b``.
"""

import numpy as np

from ...._simd import compiles_for_avx512


#: Regressors of the lane kernel: the design padded with zero columns to 8 (a zero column
#: adds exact zeros everywhere); designs with more regressors use the per-pixel loop.
LANE_REGRESSORS = 8
#: Pixels per block of the lane kernel. A block's gathered design rows take
#: ``rows x 8 x LANES x 8`` bytes, re-read by every step: with 64 lanes, 150 candidates fill
#: 600 KB, over the 512 KB L2 of an AVX2 Zen 3 core (32 lanes: 7-10 % faster selection
#: there, benchmarks/README.md); AVX-512 machines keep the 64 they were tuned with. numba's
#: cache is keyed by the target, so each target's kernels keep their own width.
LANES = 64 if compiles_for_avx512() else 32
PACKED = LANE_REGRESSORS * (LANE_REGRESSORS + 1) // 2
S_P = 0  # (X'X)^{-1}, packed
S_BETA = S_P + PACKED  # coefficients (rows 36..43, written out in _update_step)
S_G = S_BETA + LANE_REGRESSORS  # Gram of the rows an exact solve needs, packed
S_RHS = S_G + PACKED  # their X'y
S_TAKE = S_RHS + LANE_REGRESSORS  # weights (1.0 or 0.0) of the rows added to the Gram
S_FULL = S_TAKE + LANE_REGRESSORS  # 1.0: the lane's fit has full rank (rank-one updates)
S_ALONE = S_FULL + 1  # 1.0: rank deficient at an exact solve: the lane is done alone
S_COUNT = S_ALONE + 1  # number of candidates
S_YMAX = S_COUNT + 1  # max |y| over them
S_RSS = S_YMAX + 1  # residual sum of squares of their fit
S_MEAN = S_RSS + 1  # Rec-CUSUM: mean of the recursive residuals,
S_SCALE = S_MEAN + 1  # 1 / (their sd * sqrt(m)),
S_SLOPE = S_SCALE + 1  # 2 / m: the boundary is 1 + j (2 / m),
S_CUM = S_SLOPE + 1  # their running sum,
S_STAT = S_CUM + 1  # the max statistic (while scanning: the value of the best value / bound,
S_BOUND = S_STAT + 1  # and its bound)
S_FIRST = S_BOUND + 1  # and the first boundary crossing (-1: none)
S_OK = S_FIRST + 1  # the lane-parallel exact solve: 1.0 where no pivot failed,
S_PNEW = S_OK + 1  # the new (X'X)^{-1}, packed,
S_BNEW = S_PNEW + PACKED  # and coefficients
S_U = S_BNEW + LANE_REGRESSORS  # a rank-one step: (X'X)^{-1} x of its row,
S_PRED = S_U + LANE_REGRESSORS  # the row's prediction x' beta,
S_GAIN = S_PRED + 1  # the gain 1 / (1 + x'(X'X)^{-1} x) (0.0: no update),
S_STEP = S_GAIN + 1  # and the coefficients' step along u
S_ROWS = S_STEP + 1
U = np.uint64  # unsigned indices: no negative-index wraparound, so contiguous vector loads
