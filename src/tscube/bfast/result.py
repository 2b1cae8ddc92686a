"""Per-pixel status codes and the result object of :func:`tscube.bfast_monitor`."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import numpy as np


class BfastStatus(IntEnum):
    """What happened to a pixel. Stored as ``int8`` in :attr:`BfastMonitorResult.status`.

    ``OK`` (0)
        Model fitted, monitoring done. ``break_index`` is -1 when no break was found.
    ``ALL_MISSING`` (1)
        The pixel has no valid observation at all (NaN, inf or ``nodata`` everywhere).
    ``TOO_FEW_HISTORY`` (2)
        The stable history has ``n <= k`` observations (``k`` = number of regressors),
        or the MOSUM window ``floor(h * n) <= 1``. R warns "too few observations in
        selected history period" (or stops when ``n == k``).
    ``NO_MONITORING_DATA`` (3)
        No valid observation at or after ``start``.
    ``SINGULAR_DESIGN`` (4)
        The history design is rank deficient (aliased harmonics, e.g. ``order > freq/2``,
        or too few distinct dates in a cycle; with ``season=True``, a history that misses
        some position of the cycle). R gives NA coefficients there, and no break.
    ``PERFECT_FIT`` (5)
        The history model fits exactly (residual sigma ~ 0, e.g. a constant series):
        the MOSUM process is undefined, so no break is reported; ``magnitude`` is still
        the median monitoring residual.
    ``ROC_NO_CROSSING`` (6)
        ``history="ROC"`` with a ROC level above 0.05: the reversed CUSUM test was
        significant but its (alpha = 0.05) boundary was never crossed, so R fails
        ("NA/NaN/Inf in 'x'"). tscube keeps the full history and monitors normally;
        all outputs are valid, this code only flags the event.
    ``BP_TOO_SHORT`` (7)
        ``history="BP"`` with fewer than ``2 * 6k`` history observations: Bai–Perron's
        minimum segment of ``6k`` observations leaves no room for a break, and R stops
        ("minimum segment size must be smaller than half the number of observations").
        tscube keeps the full history and monitors normally; all outputs are valid,
        this code only flags the event.

    Outputs of pixels with a status other than ``OK``, ``ROC_NO_CROSSING`` and
    ``BP_TOO_SHORT`` are NaN (floats) or -1 (``break_index``), except the counts
    ``n_valid``, ``n_history``, ``n_monitor``, ``n_inf``, and under ``PERFECT_FIT`` the
    history fit's ``sigma``, ``rmse``, ``magnitude`` and ``relative_magnitude``.
    """

    OK = 0
    ALL_MISSING = 1
    TOO_FEW_HISTORY = 2
    NO_MONITORING_DATA = 3
    SINGULAR_DESIGN = 4
    PERFECT_FIT = 5
    ROC_NO_CROSSING = 6
    BP_TOO_SHORT = 7


#: Statuses whose outputs are valid (the history fit and the monitoring ran).
MONITORED = (BfastStatus.OK, BfastStatus.ROC_NO_CROSSING, BfastStatus.BP_TOO_SHORT)


def flag_status(history: str) -> BfastStatus:
    """The status of a pixel whose history selection was flagged: BP_TOO_SHORT for
    ``"BP"``, ROC_NO_CROSSING otherwise."""
    return BfastStatus.BP_TOO_SHORT if history == "BP" else BfastStatus.ROC_NO_CROSSING


#: Per-pixel outputs of the engines (name -> dtype), in the order of the result's fields.
OUTPUT_DTYPES: dict[str, Any] = {
    "break_index": np.int64,
    "break_time": np.float64,
    "status": np.int8,
    "magnitude": np.float64,
    "relative_magnitude": np.float64,
    "mosum_mean": np.float64,
    "statistic": np.float64,
    "sigma": np.float64,
    "rmse": np.float64,
    "history_start": np.float64,
    "n_valid": np.int32,
    "n_history": np.int32,
    "n_monitor": np.int32,
    "n_inf": np.int32,
}


def empty_outputs(n_starts: int, n_pixels: int) -> dict[str, np.ndarray]:
    """Output arrays ``(n_starts, n_pixels)`` filled with the 'nothing found' values."""
    out = {}
    for name, dtype in OUTPUT_DTYPES.items():
        fill = -1 if name == "break_index" else (0 if np.issubdtype(dtype, np.integer) else np.nan)
        out[name] = np.full((n_starts, n_pixels), fill, dtype=dtype)
    return out


@dataclass
class BfastMonitorResult:
    """Result of :func:`tscube.bfast_monitor`; every array is shaped like the pixel dims.

    With a list of monitoring starts every array gains a leading axis, one entry per start.

    Attributes
    ----------
    break_time : float64
        Decimal-year time of the first observation where ``|MOSUM| > boundary``
        (R's ``bfm$breakpoint``); NaN when there is no break.
    break_index : int64
        Index of that observation on the input's time axis (0-based, into ``dates``);
        -1 when there is no break.
    status : int8
        A :class:`BfastStatus` code (0 = OK). Outputs are only meaningful for OK (and
        ROC_NO_CROSSING, BP_TOO_SHORT) pixels.
    magnitude : float64
        Median of the residuals ``y - fitted`` over **all** valid observations of the
        monitoring period (``time >= start``), not only those after the break — R's
        ``bfm$magnitude``. Negative values mean the pixel is below its expected
        season-trend model (e.g. vegetation loss). Units of the data.
    relative_magnitude : float64
        ``magnitude`` divided by the mean model prediction over the same monitoring
        observations: the change as a fraction of the expected value (-0.3 = 30 % below
        the model). NaN where that mean prediction is 0; tscube's, not R's.
    mosum_mean : float64
        Mean of the (signed) monitoring process over the monitoring observations (the
        OLS-MOSUM process, as reported by the BFAST GPU papers, or the OLS-CUSUM one with
        ``type="OLS-CUSUM"``): a continuous measure of the deviation.
    statistic : float64
        ``max |process|`` over the monitoring observations (R's ``mefp$statistic``).
    sigma : float64
        Residual standard error of the history fit, ``sqrt(RSS / (n - k))`` (R's).
    rmse : float64
        Root mean squared residual of the history fit, ``sqrt(RSS / n)``
        (= ``sigma * sqrt((n - k) / n)``; bfast2/bfast#64). NaN where ``sigma`` is.
    history_start : float64
        Decimal-year time of the first observation of the selected stable history
        (R's ``bfm$history[1]``).
    n_valid, n_history, n_monitor, n_inf : int32
        Valid observations in the whole series; in the selected stable history (R's
        ``histsize``); in the monitoring period; and inf values (treated as missing).
    process, boundary : float64, shape ``(T, ...)``, only with ``return_process=True``
        The monitoring process and its boundary at the monitoring observations, on the
        input's time axis (NaN elsewhere): OLS-MOSUM ``critval * sqrt(2 logPlus(t / n))``,
        OLS-CUSUM ``sqrt(x (x - 1) (critval^2 + log(x / (x - 1))))`` with ``x = t / n``.
    attrs : dict
        The parameters that produced the result (start, h, level, critval, ...).
    """

    break_time: np.ndarray
    break_index: np.ndarray
    status: np.ndarray
    magnitude: np.ndarray
    relative_magnitude: np.ndarray
    mosum_mean: np.ndarray
    statistic: np.ndarray
    sigma: np.ndarray
    rmse: np.ndarray
    history_start: np.ndarray
    n_valid: np.ndarray
    n_history: np.ndarray
    n_monitor: np.ndarray
    n_inf: np.ndarray
    process: np.ndarray | None = None
    boundary: np.ndarray | None = None
    attrs: dict = field(default_factory=dict)

    @property
    def has_break(self) -> np.ndarray:
        """Boolean map: a break was detected."""
        return self.break_index >= 0

    def status_counts(self) -> dict[str, int]:
        """Number of pixels per status name (all starts together)."""
        codes, counts = np.unique(self.status, return_counts=True)
        return {BfastStatus(int(c)).name: int(n) for c, n in zip(codes, counts)}

    def to_dict(self) -> dict[str, np.ndarray]:
        """The per-pixel arrays by name (``process``/``boundary`` when present)."""
        names = list(OUTPUT_DTYPES)
        if self.process is not None:
            names += ["process", "boundary"]
        return {name: getattr(self, name) for name in names}

    def plot(self, **kwargs):
        """Break-date and magnitude maps of a 2-D result (:func:`tscube.plot.break_maps`); returns the figure."""
        from ._plot import break_maps

        return break_maps(self, **kwargs)

    def __repr__(self) -> str:
        shape = self.status.shape
        n_break = int(np.count_nonzero(self.has_break))
        return f"BfastMonitorResult(shape={shape}, breaks={n_break}, status={self.status_counts()})"
