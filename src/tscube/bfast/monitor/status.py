"""Per-pixel status codes of :func:`tscube.bfast_monitor`."""

from __future__ import annotations

from enum import IntEnum


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
