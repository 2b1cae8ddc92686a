"""The result of :func:`tscube.bfast_monitor`: the engines' outputs and the result object."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .status import BfastStatus


#: Per-pixel outputs of the engines (name -> dtype), in the order of the result's fields.
OUTPUT_DTYPES: dict[str, Any] = {
    "break_index": np.int64,
    "break_time": np.float64,
    "status": np.int8,
    "magnitude": np.float64,
    "relative_magnitude": np.float64,
    "mosum_mean": np.float64,
    "statistic": np.float64,
    "critval": np.float64,
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


#: CF-style attributes of the BFAST Monitor output variables.
VARIABLE_ATTRS = {
    "break_time": dict(long_name="time of the first break", units="decimal year"),
    "break_index": dict(long_name="index of the first break on the time axis (-1: no break)"),
    "magnitude": dict(long_name="median residual of the monitoring period"),
    "relative_magnitude": dict(long_name="magnitude over the mean model prediction of the monitoring period"),
    "mosum_mean": dict(long_name="mean of the monitoring process (OLS-MOSUM or OLS-CUSUM) over the monitoring period"),
    "statistic": dict(long_name="max |process| over the monitoring period"),
    "critval": dict(long_name="critical value of the pixel's boundary (R's for the level, or calibrated to the "
                              "pixel's design: attrs calibrate)"),
    "sigma": dict(long_name="residual standard error of the history fit"),
    "rmse": dict(long_name="root mean squared residual of the history fit"),
    "history_start": dict(long_name="start of the stable history", units="decimal year"),
    "n_valid": dict(long_name="valid observations"),
    "n_history": dict(long_name="valid observations in the stable history"),
    "n_monitor": dict(long_name="valid observations in the monitoring period"),
    "n_inf": dict(long_name="infinite values (treated as missing)"),
    "process": dict(long_name="monitoring process (OLS-MOSUM or OLS-CUSUM, attrs type)"),
    "boundary": dict(long_name="boundary of the monitoring process"),
}


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
    critval : float64
        The critical value of the pixel's boundary: R's for ``level`` (every pixel the
        same, ``attrs["critval"]``), or with ``calibrate=True`` the one calibrated to the
        pixel's own design (NaN where there is no history or monitoring to calibrate for).
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
    critval: np.ndarray
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
        from ._maps import break_maps

        return break_maps(self, **kwargs)

    def __repr__(self) -> str:
        shape = self.status.shape
        n_break = int(np.count_nonzero(self.has_break))
        return f"BfastMonitorResult(shape={shape}, breaks={n_break}, status={self.status_counts()})"
