"""numba kernels of :mod:`.rules`: the pre-tests' p-value, ``sctest(efp(model, h, type))``
from the OLS residuals of a model (strucchange ``efp``, ``sctest.efp``, ``pvalue.efp``),
shared by BFAST Lite's cpu engine and both engines of classic BFAST."""

from __future__ import annotations

import math

import numpy as np

from ..._jit import jit
from .inputs import PERFECT_FIT_RTOL

#: ``type`` codes of the kernels (classic BFAST's ``TEST_TYPES`` order).
OLS_MOSUM, OLS_CUSUM = 0, 1


@jit()
def _cusum_pvalue(statistic):
    """``pvalue.efp`` of the sup of a Brownian bridge (one process column): R's 100-term
    series ``1 - (1 + 2 sum (-1)^i exp(-2 i^2 x^2))``, 1 below 0.1."""
    if statistic < 0.1:
        return 1.0
    total = 0.0
    for i in range(1, 101):
        total += math.exp(-2.0 * (i * i) * (statistic * statistic)) * (-1.0 if i % 2 else 1.0)
    return 1.0 - (1.0 + 2.0 * total)


@jit()
def interp(x, xp, fp):
    """``np.interp(x, xp, fp)`` for increasing ``xp``, constant beyond the ends: one small
    loop, where numba's np.interp compiles a version per array layout."""
    if x <= xp[0]:
        return fp[0]
    for i in range(1, xp.shape[0]):
        if x <= xp[i]:
            return fp[i - 1] + (fp[i] - fp[i - 1]) * (x - xp[i - 1]) / (xp[i] - xp[i - 1])
    return fp[-1]


@jit()
def _mosum_pvalue(statistic, h, table, table_h, table_p):
    """``pvalue.efp`` of an OLS-MOSUM statistic (one process column): strucchange's table
    interpolated in ``h`` (clamped to 0.05..0.5), then in the statistic."""
    h = min(max(h, table_h[0]), table_h[-1])
    crit = np.empty(table.shape[1] + 1)
    p = np.empty(table.shape[1] + 1)
    column = np.empty(table.shape[0])
    crit[0] = 0.0
    p[0] = 1.0
    for c in range(table.shape[1]):
        for i in range(table.shape[0]):
            column[i] = table[i, c]
        crit[c + 1] = interp(h, table_h, column)
        p[c + 1] = table_p[c]
    return interp(statistic, crit, p)


@jit()
def pretest_pvalue(e, n, k, kept, y_scale, h, test, table, table_h, table_p):
    """p-value of the pre-test of residuals ``e[:n]`` of an OLS fit of ``k`` columns,
    ``kept`` of them not aliased, with bandwidth ``h`` (a fraction of ``n``); NaN when the
    fit is exact (residuals at the rounding level of ``y_scale``, the series' largest
    magnitude: R's process is then 0 / 0, and its p-value whatever the rounding gives)."""
    mean = 0.0
    rss = 0.0
    for i in range(n):
        mean += e[i]
        rss += e[i] * e[i]
    if not math.sqrt(rss / (n - k)) > PERFECT_FIT_RTOL * y_scale:
        return math.nan
    mean /= n
    ss = 0.0
    for i in range(n):
        ss += (e[i] - mean) ** 2
    sigma = math.sqrt(ss / (n - 1)) * math.sqrt((n - 1) / (n - kept))  # R's sdev(e, df)
    scale = sigma * math.sqrt(n)
    statistic = 0.0
    if test == OLS_CUSUM:
        cum = 0.0
        for i in range(n):
            cum += e[i]
            statistic = max(statistic, abs(cum / scale))
        return _cusum_pvalue(statistic)
    # R's windows: differences of the cumulative sums cum[i + nh] - cum[i]
    nh = int(math.floor(n * h))
    lead = 0.0
    for i in range(nh):
        lead += e[i]
    lag = 0.0
    statistic = abs(lead / scale)
    for i in range(nh, n):
        lead += e[i]
        lag += e[i - nh]
        statistic = max(statistic, abs((lead - lag) / scale))
    return _mosum_pvalue(statistic, h, table, table_h, table_p)
