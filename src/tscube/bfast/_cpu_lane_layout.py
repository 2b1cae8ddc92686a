"""Layout of the ROC lane kernel's per-lane state (:mod:`tscube.bfast._cpu_history`).

Flat arrays with a compile-time row length of ``_LANES`` (one row per quantity, the
``_S_*`` offsets), so that LLVM sees constant distances between the rows it loads and
stores and vectorises the loops over the lanes (with runtime row strides it would need
an alias check per pair of rows, and gives up); indexed by unsigned integers (``_U``: a
signed index gets numba's negative-index wraparound, which turns every vector load and
store into a gather or scatter). Symmetric k x k matrices are packed lower triangles,
element ``a (a + 1) / 2 + b``.
"""

import numpy as np

#: Regressors of the lane kernel: the design padded with zero columns to 8 (a zero column
#: adds exact zeros everywhere); designs with more regressors use the per-pixel loop.
LANE_REGRESSORS = 8
_LANES = 64  # pixels per block of the lane kernel
_PACKED = LANE_REGRESSORS * (LANE_REGRESSORS + 1) // 2
_S_P = 0  # (X'X)^{-1}, packed
_S_BETA = _S_P + _PACKED  # coefficients (rows 36..43, written out in _rank_one_step)
_S_G = _S_BETA + LANE_REGRESSORS  # Gram of the rows an exact solve needs, packed
_S_RHS = _S_G + _PACKED  # their X'y
_S_TAKE = _S_RHS + LANE_REGRESSORS  # weights (1.0 or 0.0) of the rows added to the Gram
_S_FULL = _S_TAKE + LANE_REGRESSORS  # 1.0: the lane's fit has full rank (rank-one updates)
_S_ALONE = _S_FULL + 1  # 1.0: rank deficient at an exact solve: the lane is done alone
_S_COUNT = _S_ALONE + 1  # number of candidates
_S_YMAX = _S_COUNT + 1  # max |y| over them
_S_RSS = _S_YMAX + 1  # residual sum of squares of their fit
_S_MEAN = _S_RSS + 1  # Rec-CUSUM: mean of the recursive residuals,
_S_SCALE = _S_MEAN + 1  # 1 / (their sd * sqrt(m)),
_S_CUM = _S_SCALE + 1  # their running sum,
_S_STAT = _S_CUM + 1  # the max statistic
_S_FIRST = _S_STAT + 1  # and the first boundary crossing (-1: none)
_S_OK = _S_FIRST + 1  # the lane-parallel exact solve: 1.0 where no pivot failed,
_S_PNEW = _S_OK + 1  # the new (X'X)^{-1}, packed,
_S_BNEW = _S_PNEW + _PACKED  # and coefficients
_S_ROWS = _S_BNEW + LANE_REGRESSORS
_U = np.uint64  # unsigned indices: no negative-index wraparound, so contiguous vector loads
