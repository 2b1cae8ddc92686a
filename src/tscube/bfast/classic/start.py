"""The start of the iteration: the seasonal component of a periodic STL (SPEC-bfast §2),
for all pixels at once with :func:`tscube.stl`.

Gap-free pixels get R's ``stl(Yt, "periodic")`` (R's windows and jumps, two inner
loops, no robustness; the seasonal replaced by its cycle means); pixels with missing
values get ``stlplus(Yt, n.p = f, s.window = "periodic")``, as R's ``bfast()`` switches to
for them (no R fixture covers that path).
"""

from __future__ import annotations

import math

import numpy as np

from ...stl import StlStatus, stl
from .status import BfastClassicStatus


def r_stl_windows(n_times: int, freq: int) -> dict:
    """The arguments of :func:`tscube.stl` that make it R's ``stl(x, "periodic")``."""
    s_window = 10 * n_times + 1
    t_window = math.ceil(1.5 * freq / (1.0 - 1.5 / s_window))
    t_window += 1 - t_window % 2  # R's nextodd of an integer
    l_window = freq + 1 - freq % 2
    return dict(seasonal="periodic", trend=t_window, low_pass=l_window, seasonal_jump=n_times + 1,
                trend_jump=math.ceil(t_window / 10), low_pass_jump=math.ceil(l_window / 10), inner_iter=2,
                outer_iter=0, flavor="statsmodels")


def start_seasonal(values: np.ndarray, invalid: np.ndarray, freq: int, engine: str) -> tuple[np.ndarray, np.ndarray]:
    """``(St, status)``: the start seasonal ``(T, P)`` of every pixel (NaN where missing)
    and the pixels whose decomposition fails (status ``TOO_FEW_OBSERVATIONS`` /
    ``ALL_MISSING``, else ``OK``)."""
    n_times, n_pixels = values.shape
    seasonal = np.full((n_times, n_pixels), np.nan)
    status = np.full(n_pixels, BfastClassicStatus.OK, np.int8)
    n_valid = n_times - invalid.sum(axis=0)
    status[n_valid == 0] = BfastClassicStatus.ALL_MISSING
    if n_times <= 2 * freq:  # R's stl: "series is not periodic or has less than two periods"
        status[n_valid > 0] = BfastClassicStatus.TOO_FEW_OBSERVATIONS
        return seasonal, status
    y = np.where(invalid, np.nan, values.astype(np.float64, copy=False))
    stl_engine = "reference" if engine == "reference" else "cpu"
    gap_free = n_valid == n_times
    gappy = ~gap_free & (n_valid > 0)
    if gap_free.any():
        seasonal[:, gap_free] = stl(y[:, gap_free], freq, engine=stl_engine, **r_stl_windows(n_times, freq)).seasonal
    if gappy.any() and freq >= 4:
        result = stl(y[:, gappy], freq, seasonal="periodic", flavor="stlplus", engine=stl_engine)
        seasonal[:, gappy] = result.seasonal
        failed = np.flatnonzero(gappy)[result.status != StlStatus.OK]
        status[failed] = BfastClassicStatus.TOO_FEW_OBSERVATIONS
    elif gappy.any():  # R falls back to stl, which stops on missing values
        status[gappy] = BfastClassicStatus.TOO_FEW_OBSERVATIONS
    return seasonal, status
