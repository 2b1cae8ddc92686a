"""Per-series status codes of :func:`tscube.stl`."""

from __future__ import annotations

from enum import IntEnum


class StlStatus(IntEnum):
    """Outcome of the decomposition of one series.

    Every status other than ``OK`` leaves all components of that series NaN; the other
    series of the batch are unaffected.
    """

    #: Decomposed.
    OK = 0
    #: No finite value (all NaN, inf or ``nodata``).
    ALL_MISSING = 1
    #: Fewer than ``2 * period`` valid values.
    TOO_FEW_OBSERVATIONS = 2
    #: A cycle-subseries (e.g. every January) has no valid value, so its seasonal value
    #: is undefined.
    SUBSERIES_EMPTY = 3
    #: ``flavor="stlplus"`` only: a cycle-subseries has fewer valid values than
    #: ``seasonal_deg + 1``, so stlplus' local polynomial is singular (R stlplus
    #: returns NaN or stops there).
    SUBSERIES_TOO_SHORT = 4
    #: ``flavor="stlplus"`` only: a local fit was singular during the iterations (too
    #: few distinct points with positive weight), so the components are not finite.
    FIT_FAILED = 5
