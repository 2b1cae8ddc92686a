"""What every BFAST Monitor engine receives: the validated parameters and the shared
design, built once."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...timeaxis import TimeAxis
from ..core.design import Design

#: Most regressors a model may have (every engine: the cuda solve keeps k x k in shared
#: memory, the cpu engines' Gram k (k + 1) / 2 sums per pixel; season levels as a 64-bit mask).
MAX_REGRESSORS = 64


@dataclass(frozen=True)
class MonitorPlan:
    """Validated parameters of one ``bfast_monitor`` call, shared by all pixels.

    Attributes
    ----------
    axis, design
        Time axis and design matrix (``design.matrix`` is ``(T, k)``).
    starts : ndarray (S,)
        Monitoring starts in decimal years, in the caller's order.
    monitor_begin : ndarray of int64 (S,)
        For each start, the first index of the time axis at or after it.
    history : {"all", "fixed", "ROC", "BP"}
        How the stable history is selected; "fixed" starts it at ``history_begin``.
    history_begin : int
        First time index eligible for the history ("all": 0).
    process_type : {"OLS-MOSUM", "OLS-CUSUM"}
        Monitoring process: moving sums of ``floor(h n)`` residuals, or cumulative sums.
    h, critval : float
        MOSUM bandwidth (fraction of the history size) and the process's critical value
        (R's, for the level; every pixel's unless ``critvals`` says otherwise).
    critvals : ndarray (S, P), optional
        Each pixel's critical value per start (``calibrate=True``: for its own design).
    history_first : (ndarray (S, P), ndarray or None), optional
        The history selection already made (:func:`.history.history_first`'s result), for
        the engines that would make it again.
    level_roc, roc_lambda : float
        Significance of the ROC test and its boundary level (always alpha = 0.05, as R).
    nodata : float or None
        Value marking missing data (in addition to NaN; inf is also missing).
    return_process : bool
        Also return the monitoring process and boundary on the time axis.
    """

    axis: TimeAxis
    design: Design
    starts: np.ndarray
    monitor_begin: np.ndarray
    history: str
    history_begin: int
    process_type: str
    h: float
    critval: float
    level_roc: float
    roc_lambda: float
    nodata: float | None
    return_process: bool
    critvals: np.ndarray | None = None
    history_first: tuple | None = None

    def pixel_critvals(self, n_pixels: int) -> np.ndarray:
        """Each pixel's critical value per start, ``(S, P)`` float64 (the same ``critval``
        for every pixel unless calibrated)."""
        if self.critvals is not None:
            return np.ascontiguousarray(self.critvals, dtype=np.float64)
        return np.full((self.n_starts, n_pixels), float(self.critval))

    @property
    def n_starts(self) -> int:
        return self.starts.shape[0]

    @property
    def cusum(self) -> bool:
        """The monitoring process is OLS-CUSUM (else OLS-MOSUM)."""
        return self.process_type == "OLS-CUSUM"
