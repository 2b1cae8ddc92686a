"""What every BFAST Lite engine receives: the validated parameters and the shared design,
and R's rules that depend on the number of observations (segment size, largest number
of breaks, the OLS-MOSUM pre-test's table)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...timeaxis import TimeAxis
from ..core.design import Design, build_design
from ..core.inputs import check_nodata, check_order

#: How the number of breaks is chosen (``LitePlan.selection``).
SELECTIONS = ("LWZ", "BIC", "RSS", "all", "number")

#: strucchange's ``sc.me`` rows for one process column (k = 1): critical values of the
#: OLS-MOSUM test at p = 0.10, 0.05, 0.025, 0.01 for h = 0.05, 0.10, ..., 0.50.
MOSUM_PRETEST_TABLE = np.array([
    [0.7552, 0.8017, 0.8444, 0.8977],
    [0.9809, 1.0483, 1.1119, 1.1888],
    [1.1211, 1.2059, 1.2845, 1.3767],
    [1.2170, 1.3158, 1.4053, 1.5131],
    [1.2811, 1.3920, 1.4917, 1.6118],
    [1.3258, 1.4448, 1.5548, 1.6863],
    [1.3514, 1.4789, 1.5946, 1.7339],
    [1.3628, 1.4956, 1.6152, 1.7572],
    [1.3610, 1.4976, 1.6210, 1.7676],
    [1.3751, 1.5115, 1.6341, 1.7808],
])
MOSUM_PRETEST_H = np.arange(1, 11) * 0.05
MOSUM_PRETEST_P = np.array([0.10, 0.05, 0.025, 0.01])


@dataclass(frozen=True)
class LitePlan:
    """Validated parameters of one ``bfast_lite`` call, shared by all pixels.

    ``h`` is a fraction of ``n`` (``h < 1``) or a number of observations; ``selection``
    indexes :data:`SELECTIONS`, ``n_breaks_asked`` is the number for ``"number"``;
    ``max_breaks`` caps the number of breaks considered (0 = no cap). ``break_slots`` is
    the most breaks any pixel can get (the engines' output size).
    """

    axis: TimeAxis
    design: Design
    h: float
    selection: int
    n_breaks_asked: int
    max_breaks: int
    level: float
    interval: float
    nodata: float | None
    break_slots: int

    @property
    def n_models(self) -> int:
        return self.break_slots + 1


def segment_size(n: int, h: float) -> int:
    """R's minimum segment size in observations: ``floor(n * h)`` for a fraction."""
    return int(math.floor(n * h)) if h < 1 else int(h)


def largest_number_of_breaks(n: int, h_obs: int) -> int:
    """R's ``ceiling(n / h) - 2``."""
    return -(-n // h_obs) - 2


def pretest_pvalue(statistic: float, h: float) -> float:
    """strucchange's ``pvalue.efp`` of an OLS-MOSUM statistic (one process column)."""
    h = min(max(h, MOSUM_PRETEST_H[0]), MOSUM_PRETEST_H[-1])
    crit = [np.interp(h, MOSUM_PRETEST_H, MOSUM_PRETEST_TABLE[:, c]) for c in range(4)]
    return float(np.interp(statistic, np.r_[0.0, crit], np.r_[1.0, MOSUM_PRETEST_P]))


def pretest_bandwidth(n: int, h: float) -> tuple[int, float]:
    """Window and bandwidth of R's pre-test ``efp(h = h)``: an ``h > 1`` becomes the
    fraction ``round(h) / n``; the window is ``floor(n * fraction)`` in IEEE arithmetic."""
    fraction = round(h) / n if h > 1 else h
    return int(math.floor(n * fraction)), fraction


def _break_slots(n_dates: int, h: float, k: int, plan_cap: int) -> int:
    """The most breaks any pixel of up to ``n_dates`` observations can get."""
    most = 0
    for n in range(1, n_dates + 1):
        h_obs = segment_size(n, h)
        if h_obs > k and h_obs <= n // 2:
            most = max(most, largest_number_of_breaks(n, h_obs))
    return min(most, plan_cap) if plan_cap > 0 else most


def _check_h(h) -> float:
    if isinstance(h, bool) or not isinstance(h, (int, float, np.integer, np.floating)) or not h > 0:
        raise ValueError(f"h must be a fraction in (0, 1) or a whole number of observations, got {h!r}")
    if h >= 1 and float(h) != int(h):
        raise ValueError(f"h >= 1 is a number of observations and must be whole, got {h!r}")
    return float(h)


def _check_breaks(breaks) -> tuple[int, int]:
    if isinstance(breaks, str):
        if breaks not in SELECTIONS[:4]:
            raise ValueError(f"breaks must be 'LWZ', 'BIC', 'RSS', 'all' or a whole number, got {breaks!r}")
        return SELECTIONS.index(breaks), 0
    if isinstance(breaks, bool) or not isinstance(breaks, (int, np.integer, float, np.floating)) or float(breaks) != int(breaks):
        raise ValueError(f"breaks must be 'LWZ', 'BIC', 'RSS', 'all' or a whole number, got {breaks!r}")
    return SELECTIONS.index("number"), max(int(breaks), 1)  # R: below 1 becomes 1


def make_lite_plan(axis: TimeAxis, *, order, trend, season, h, breaks, max_breaks, level,
                   magnitude_interval, nodata) -> LitePlan:
    """Validate the parameters and build the design once."""
    order = check_order(order)
    h = _check_h(h)
    selection, n_breaks_asked = _check_breaks(breaks)
    if max_breaks is not None and (isinstance(max_breaks, bool) or not isinstance(max_breaks, (int, np.integer)) or max_breaks < 1):
        raise ValueError(f"max_breaks must be a positive integer, got {max_breaks!r}")
    if not (isinstance(level, (int, float, np.integer, np.floating)) and 0 <= level < 1):
        raise ValueError(f"level must be in [0, 1) (0 = no pre-test), got {level!r}")
    if not (isinstance(magnitude_interval, (int, float, np.integer, np.floating)) and magnitude_interval > 0):
        raise ValueError(f"magnitude_interval must be positive, got {magnitude_interval!r}")
    nodata = check_nodata(nodata)
    design = build_design(axis, order, bool(trend), bool(season))
    cap = int(max_breaks or 0)
    if selection == SELECTIONS.index("number"):
        cap = min(cap, n_breaks_asked) if cap else n_breaks_asked
    return LitePlan(
        axis=axis, design=design, h=h, selection=selection, n_breaks_asked=n_breaks_asked,
        max_breaks=int(max_breaks or 0), level=float(level), interval=float(magnitude_interval),
        nodata=nodata, break_slots=_break_slots(len(axis), h, design.k, cap),
    )
