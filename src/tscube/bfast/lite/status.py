"""Per-pixel status codes of :func:`tscube.bfast_lite`."""

from __future__ import annotations

from enum import IntEnum

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
