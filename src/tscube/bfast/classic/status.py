"""Per-pixel status codes of :func:`tscube.bfast_classic`."""

from __future__ import annotations

from enum import IntEnum


class BfastClassicStatus(IntEnum):
    """What happened to a pixel. Stored as ``int8`` in :attr:`BfastClassicResult.status`.

    Where R's ``bfast()`` stops with an error, the pixel gets the status named after that
    error and, like R, no result: every output of the pixel but ``n_obs`` (and ``n_iter``
    for errors inside the iteration) is empty (NaN / -1).

    ``OK`` (0)
        Converged: both break sets equal to the previous iteration's.
    ``MAX_ITER`` (1)
        Stopped after ``max_iter`` iterations without converging (R returns that last
        iteration silently; so does tscube, the status says so). Every output is set.
    ``ALL_MISSING`` (2)
        No valid observation.
    ``TOO_FEW_OBSERVATIONS`` (3)
        The start decomposition fails: fewer than two full periods (R's ``stl``: "series
        is not periodic or has less than two periods"; with missing values, fewer than
        ``2 * freq`` valid observations or a cycle-subseries without any).
    ``SEGMENT_TOO_SHORT`` (4)
        A Bai–Perron run was needed (its pre-test significant) but the minimum segment
        ``floor(n * h)`` is not larger than the regressors of its model (2 for the trend,
        ``freq - 1`` seasonal dummies, 7 for the harmonic model). R stops: "minimum
        segment size must be greater than the number of regressors".
    ``PERFECT_FIT`` (5)
        A pre-test's model fits its component exactly (e.g. a constant series): R's
        process is 0 / 0 and R stops ("missing value where TRUE/FALSE needed").
    ``OVERFLOW`` (6)
        A valid value beyond 1e150 in magnitude (sums of squares overflow float64).
    """

    OK = 0
    MAX_ITER = 1
    ALL_MISSING = 2
    TOO_FEW_OBSERVATIONS = 3
    SEGMENT_TOO_SHORT = 4
    PERFECT_FIT = 5
    OVERFLOW = 6


#: Statuses that come with a result (every output set).
HAS_RESULT = (BfastClassicStatus.OK, BfastClassicStatus.MAX_ITER)

#: Largest valid |value| classic BFAST takes (as BFAST Lite): sums of the squares of ten
#: thousand values twice as large stay finite in float64.
OVERFLOW_VALUE = 1e150
