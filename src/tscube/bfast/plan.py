"""What every engine receives: the validated parameters and the shared design, built once."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..timeaxis import TimeAxis
from .design import Design

#: Equilibrated Cholesky pivot (1 - R^2 of a column on the previous ones) below which
#: the history design counts as rank deficient (status SINGULAR_DESIGN). R's QR uses a
#: tolerance of 1e-7 on |r_jj| / ||x_j||, i.e. 1e-14 on this squared scale; 1e-10 also
#: flags designs so close to singular that float rounding would decide the result.
SINGULAR_PIVOT_TOL = 1e-10

#: sigma / max|y_history| below which the history fit counts as exact (PERFECT_FIT).
PERFECT_FIT_RTOL = 1e-10


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
        MOSUM bandwidth (fraction of the history size) and the process's critical value.
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

    @property
    def n_starts(self) -> int:
        return self.starts.shape[0]

    @property
    def cusum(self) -> bool:
        """The monitoring process is OLS-CUSUM (else OLS-MOSUM)."""
        return self.process_type == "OLS-CUSUM"


def check_numeric_dtype(values: np.ndarray, what: str = "data") -> None:
    """Refuse ``values`` that are not float or integer numbers (bool, complex, object,
    strings): a TypeError that names them as ``what``."""
    if values.dtype == bool or not (np.issubdtype(values.dtype, np.integer) or np.issubdtype(values.dtype, np.floating)):
        raise TypeError(f"{what} must be a float or integer array, got dtype {values.dtype}")


def invalid_mask(values: np.ndarray, nodata: float | None) -> tuple[np.ndarray, np.ndarray]:
    """Missing-value mask (NaN, inf or ``nodata``) and the inf mask of ``values``."""
    if np.issubdtype(values.dtype, np.integer):
        missing = np.zeros(values.shape, dtype=bool) if nodata is None else values == nodata
        return missing, np.zeros(values.shape, dtype=bool)
    is_inf = np.isinf(values)
    missing = ~np.isfinite(values)
    if nodata is not None:
        missing |= values == nodata
    return missing, is_inf


def kernel_nodata(values: np.ndarray, nodata: float | None) -> tuple[float, bool]:
    """``nodata`` as the float64 a kernel compares float64-converted values with, and whether
    there is one. Compared in the data's dtype, as NumPy does (0.1 in float32 data is
    float32(0.1)); integer data compares exactly."""
    if nodata is None:
        return 0.0, False
    if np.issubdtype(values.dtype, np.floating):
        with np.errstate(over="ignore"):  # a nodata beyond the dtype's range matches nothing
            return float(np.asarray(nodata).astype(values.dtype)), True
    return float(nodata), True
