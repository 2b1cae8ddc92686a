"""Per-pixel status codes and the result object of :func:`tscube.bfast_lite`."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import numpy as np


#: Largest valid |value| BFAST Lite takes: sums of the squares of ten thousand values
#: twice as large stay finite in float64.
OVERFLOW_VALUE = 1e150


class BfastLiteStatus(IntEnum):
    """What happened to a pixel. Stored as ``int8`` in :attr:`BfastLiteResult.status`.

    ``OK`` (0)
        Breakpoints computed; ``n_breaks`` (possibly 0) chosen by the criterion.
    ``ALL_MISSING`` (1)
        No valid observation at all.
    ``SEGMENT_TOO_SHORT`` (2)
        The minimum segment size ``h`` (in observations) is not larger than the number of
        regressors ``k``. R stops: "minimum segment size must be greater than the number
        of regressors".
    ``TOO_FEW_OBSERVATIONS`` (3)
        ``h > n // 2``: no two segments fit. R stops: "minimum segment size must be
        smaller than half the number of observations".
    ``NO_ROOM_FOR_BREAK`` (4)
        ``n == 2h``: two segments fit but R's largest number of breaks is 0 and R fails
        ("length of 'dimnames' [2] not equal to array extent"). No break is reported.
    ``STABLE_BY_PRETEST`` (5)
        ``level > 0`` and the OLS-MOSUM pre-test's p-value exceeds ``level``: like R, no
        breakpoints are computed (``n_breaks`` 0, criteria NaN); ``pretest_p`` says why.
    ``PERFECT_FIT`` (6)
        The season-trend model fits the whole series exactly (e.g. a constant series):
        the criteria are undefined (log 0), no break is reported. Decided before the
        pre-test (``pretest_p`` NaN), whose process would be rounding noise over rounding
        noise (R's p-value for such a series is whatever its rounding gives).
    ``OVERFLOW`` (7)
        A valid value beyond :data:`OVERFLOW_VALUE` (1e150) in magnitude: sums of squares
        of such values overflow float64, no break is reported.

    For every status but ``OK`` the per-break outputs are empty (NaN / -1) and
    ``n_breaks`` is 0; ``n_obs``, ``h_obs`` and ``pretest_p`` are set where known.
    """

    OK = 0
    ALL_MISSING = 1
    SEGMENT_TOO_SHORT = 2
    TOO_FEW_OBSERVATIONS = 3
    NO_ROOM_FOR_BREAK = 4
    STABLE_BY_PRETEST = 5
    PERFECT_FIT = 6
    OVERFLOW = 7


#: ``magnitude()``'s statistics of each break, in R's column order.
MAGNITUDE_STATS = ("before", "after", "diff", "rmsd", "mad", "md")


def empty_lite_outputs(n_pixels: int, n_breaks: int, k: int, n_models: int) -> dict[str, np.ndarray]:
    """The engines' output arrays, pixels last, filled with 'nothing found'."""
    nan = np.nan
    return {
        "status": np.zeros(n_pixels, np.int8),
        "n_obs": np.zeros(n_pixels, np.int32),
        "h_obs": np.zeros(n_pixels, np.int32),
        "max_breaks": np.zeros(n_pixels, np.int32),
        "n_breaks": np.zeros(n_pixels, np.int32),
        "pretest_p": np.full(n_pixels, nan),
        "break_index": np.full((n_breaks, n_pixels), -1, np.int64),
        "break_time": np.full((n_breaks, n_pixels), nan),
        "magnitudes": np.full((n_breaks, n_pixels, len(MAGNITUDE_STATS)), nan),
        "coefficients": np.full((n_breaks + 1, n_pixels, k), nan),
        "rss": np.full((n_models, n_pixels), nan),
        "bic": np.full((n_models, n_pixels), nan),
        "lwz": np.full((n_models, n_pixels), nan),
    }


@dataclass
class BfastLiteResult:
    """Result of :func:`tscube.bfast_lite`: every break of every pixel.

    ``B`` below is the largest number of breaks found in any pixel (or ``max_breaks``);
    pixels with fewer breaks are padded with NaN / -1. Arrays are shaped like the pixel
    dimensions, per-break arrays with a leading break axis.

    Attributes
    ----------
    n_breaks : int32, pixels
        Number of breaks chosen (by LWZ, BIC, or the number asked for).
    break_index : int64, (B, pixels)
        Time index of each breakpoint: the **last observation before the break**, as R's
        ``breakpoints`` (the first observation after it is the next valid date). -1 = none.
    break_time : float64, (B, pixels)
        Decimal-year time of that observation (R's ``data_pp$time[breakpoints]``).
    magnitudes : float64, (B, pixels, 6)
        R's ``magnitude(component = "trend")`` per break: the trend line of the segment
        before and after at the break (``before`` at the breakpoint, ``after`` at the next
        observation), ``diff = after - before``, and the RMSD, MAD and MD of the
        difference of the two trend lines over ``interval`` observations either side
        (:data:`MAGNITUDE_STATS` order; see :meth:`magnitude_of`). NaN without a trend.
    magnitude : float64, pixels
        The ``diff`` of the break with the largest ``|diff|`` (R's ``$Magnitude``).
    coefficients : float64, (B + 1, pixels, k)
        OLS coefficients of each segment in R's parametrisation (raw ``trend`` = position
        on the full time grid, 1-based); NaN for aliased columns and missing segments.
        :attr:`intercept` and :attr:`slope` are its first two columns.
    status : int8, pixels
        :class:`BfastLiteStatus` code.
    n_obs, h_obs, max_breaks : int32, pixels
        Valid observations ``n``, minimum segment size in observations ``h``, and the
        largest number of breaks considered (R's ``ceiling(n / h) - 2``, or ``breaks``).
    pretest_p : float64, pixels
        p-value of the OLS-MOSUM pre-test (``level > 0`` only, else NaN).
    rss, bic, lwz : float64, (M + 1, pixels), or None
        RSS and criteria of the best model with m = 0..M breaks (``criteria=True``).
    attrs : dict
        Parameters of the call (``regressors``, ``h``, ``breaks``, ``freq``, ...).
    """

    n_breaks: np.ndarray
    break_index: np.ndarray
    break_time: np.ndarray
    magnitudes: np.ndarray
    magnitude: np.ndarray
    coefficients: np.ndarray
    status: np.ndarray
    n_obs: np.ndarray
    h_obs: np.ndarray
    max_breaks: np.ndarray
    pretest_p: np.ndarray
    rss: np.ndarray | None = None
    bic: np.ndarray | None = None
    lwz: np.ndarray | None = None
    attrs: dict[str, Any] = field(default_factory=dict)

    def magnitude_of(self, stat: str) -> np.ndarray:
        """One magnitude statistic of every break, ``(B, pixels)``: one of
        ``"before", "after", "diff", "rmsd", "mad", "md"``."""
        if stat not in MAGNITUDE_STATS:
            raise ValueError(f"stat must be one of {MAGNITUDE_STATS}, got {stat!r}")
        return self.magnitudes[..., MAGNITUDE_STATS.index(stat)]

    @property
    def intercept(self) -> np.ndarray:
        """Intercept of each segment, ``(B + 1, pixels)``."""
        return self.coefficients[..., 0]

    @property
    def slope(self) -> np.ndarray:
        """Trend slope of each segment per time-grid step, ``(B + 1, pixels)`` (NaN
        without a trend)."""
        names = self.attrs.get("regressors", [])
        if "trend" not in names:
            return np.full(self.coefficients.shape[:-1], np.nan)
        return self.coefficients[..., names.index("trend")]

    @property
    def has_break(self) -> np.ndarray:
        return self.n_breaks > 0

    def status_counts(self) -> dict[str, int]:
        codes, counts = np.unique(self.status, return_counts=True)
        return {BfastLiteStatus(int(c)).name: int(n) for c, n in zip(codes, counts)}

    def plot(self, **kwargs):
        """Quick-look maps (number of breaks, first break time, largest magnitude)."""
        from ._plot import lite_maps

        return lite_maps(self, **kwargs)

    def __repr__(self) -> str:
        shape = self.n_breaks.shape
        return (
            f"BfastLiteResult(pixels={shape}, breaks up to {self.break_index.shape[0]}, "
            f"with a break: {int(np.sum(self.n_breaks > 0))}, status={self.status_counts()})"
        )
