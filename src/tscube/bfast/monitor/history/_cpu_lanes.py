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

#: Regressors of the lane kernel: the design padded with zero columns to 8 (a zero column
#: adds exact zeros everywhere); designs with more regressors use the per-pixel loop.
LANE_REGRESSORS = 8
LANES = 64  # pixels per block of the lane kernel
PACKED = LANE_REGRESSORS * (LANE_REGRESSORS + 1) // 2
S_P = 0  # (X'X)^{-1}, packed
S_BETA = S_P + PACKED  # coefficients (rows 36..43, written out in _rank_one_step)
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
S_CUM = S_SCALE + 1  # their running sum,
S_STAT = S_CUM + 1  # the max statistic
S_FIRST = S_STAT + 1  # and the first boundary crossing (-1: none)
S_OK = S_FIRST + 1  # the lane-parallel exact solve: 1.0 where no pivot failed,
S_PNEW = S_OK + 1  # the new (X'X)^{-1}, packed,
S_BNEW = S_PNEW + PACKED  # and coefficients
S_ROWS = S_BNEW + LANE_REGRESSORS
U = np.uint64  # unsigned indices: no negative-index wraparound, so contiguous vector loads
