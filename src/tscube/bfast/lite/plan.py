"""What every BFAST Lite engine receives: the validated parameters and the shared design
(R's rules that depend on the number of observations are :mod:`tscube.bfast.core.rules`,
shared with classic BFAST)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...timeaxis import TimeAxis
from ..core.design import Design, build_design
from ..core.inputs import check_nodata, check_order
from ..core.rules import largest_number_of_breaks, segment_size

#: How the number of breaks is chosen (``LitePlan.selection``).
SELECTIONS = ("LWZ", "BIC", "RSS", "all", "number")

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
