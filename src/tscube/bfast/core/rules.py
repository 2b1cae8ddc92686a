"""R's rules of a Bai–Perron run that depend on the number of observations (strucchange
``breakpoints``: minimum segment size, largest number of breaks) and the OLS-MOSUM
pre-test's table (strucchange ``efp``, ``sctest``), shared by BFAST Lite and classic
BFAST."""

from __future__ import annotations

import math

import numpy as np

#: strucchange's ``sc.me`` rows for one process column (k = 1): critical values of the
#: OLS-MOSUM test at p = 0.10, 0.05, 0.025, 0.01 for h = 0.05, 0.10, ..., 0.50.
MOSUM_PRETEST_TABLE = np.array([
    [0.7552, 0.8017, 0.8444, 0.8977],
    [0.9809, 1.0483, 1.1119, 1.1888],
    [1.1211, 1.2059, 1.2845, 1.3767],
    [1.2170, 1.3158, 1.4053, 1.5131],
    [1.2811, 1.3920, 1.4917, 1.6118],
    [1.3258, 1.4448, 1.5548, 1.6863],
    [1.3514, 1.4789, 1.5946, 1.7339],
    [1.3628, 1.4956, 1.6152, 1.7572],
    [1.3610, 1.4976, 1.6210, 1.7676],
    [1.3751, 1.5115, 1.6341, 1.7808],
])
MOSUM_PRETEST_H = np.arange(1, 11) * 0.05
MOSUM_PRETEST_P = np.array([0.10, 0.05, 0.025, 0.01])


def segment_size(n: int, h: float) -> int:
    """R's minimum segment size in observations: ``floor(n * h)`` for a fraction."""
    return int(math.floor(n * h)) if h < 1 else int(h)


def largest_number_of_breaks(n: int, h_obs: int) -> int:
    """R's ``ceiling(n / h) - 2``."""
    return -(-n // h_obs) - 2


def pretest_pvalue(statistic: float, h: float) -> float:
    """strucchange's ``pvalue.efp`` of an OLS-MOSUM statistic (one process column)."""
    h = min(max(h, MOSUM_PRETEST_H[0]), MOSUM_PRETEST_H[-1])
    crit = [np.interp(h, MOSUM_PRETEST_H, MOSUM_PRETEST_TABLE[:, c]) for c in range(4)]
    return float(np.interp(statistic, np.r_[0.0, crit], np.r_[1.0, MOSUM_PRETEST_P]))


def pretest_bandwidth(n: int, h: float) -> tuple[int, float]:
    """Window and bandwidth of R's pre-test ``efp(h = h)``: an ``h > 1`` becomes the
    fraction ``round(h) / n``; the window is ``floor(n * fraction)`` in IEEE arithmetic."""
    fraction = round(h) / n if h > 1 else h
    return int(math.floor(n * fraction)), fraction
