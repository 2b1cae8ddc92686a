"""What every classic-BFAST engine receives: the validated parameters, the two models'
designs and R's rules that depend on the number of observations (SPEC-bfast.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...timeaxis import TimeAxis
from ..core.design import season_cycle
from ..core.inputs import check_nodata
from ..core.rules import largest_number_of_breaks, segment_size

#: The seasonal models of R's ``bfast(season = )``.
SEASON_MODELS = ("dummy", "harmonic", "none")
#: The pre-tests of R's ``bfast(type = )``: strucchange ``efp`` types.
TEST_TYPES = ("OLS-MOSUM", "OLS-CUSUM")
#: The order of the harmonic seasonal model (``co, si, co2, si2, co3, si3``).
HARMONIC_ORDER = 3


@dataclass(frozen=True)
class ClassicPlan:
    """Validated parameters of one ``bfast_classic`` call, shared by all pixels.

    ``trend_design`` is R's ``Vt ~ ti``, ``[1, ti - trend_centre]`` (the decimal-year time,
    centred: the breaks, fits and intervals do not depend on the origin of ``ti``, and
    ``ti ~ 2000`` would cost six digits of the normal equations); ``season_design`` is
    R's seasonal model (effect-coded dummies ``D``, no intercept, or ``[1, co, si, co2,
    si2, co3, si3]`` of the date's index), None for ``season="none"``.
    ``breaks``: per component the number of breaks asked for, None = BIC; ``level``:
    per component the pre-test level. ``break_slots``: the most breaks of either
    component a pixel can get (the engines' output size).
    """

    axis: TimeAxis
    h: float
    season: str
    max_iter: int
    breaks: tuple
    level: tuple
    test: str
    nodata: float | None
    trend_design: np.ndarray
    trend_centre: float
    season_design: np.ndarray | None
    break_slots: int

    @property
    def freq(self) -> int:
        return self.axis.freq

    @property
    def season_cycle(self) -> np.ndarray:
        """Each date's season, 0-based (R's ``cycle(Yt) - 1``): the dummy model's levels."""
        return season_cycle(self.axis).astype(np.int64)

    @property
    def season_intercept(self) -> bool:
        """Whether the seasonal model has an intercept shared by all its segments (the
        harmonic model: R's ``(co + ...) %in% breakfactor(bp)``)."""
        return self.season == "harmonic"


def season_dummies(axis: TimeAxis) -> np.ndarray:
    """R's ``seasonaldummy(Yt)`` with the last season's rows set to -1 (bfast's effect
    coding): ``freq - 1`` columns, column ``j`` 1 on the dates of season ``j``."""
    cycle = season_cycle(axis)
    D = (cycle[:, None] == np.arange(axis.freq - 1)[None, :]).astype(np.float64)
    D[cycle == axis.freq - 1] = -1.0
    return D


def season_harmonics(axis: TimeAxis) -> np.ndarray:
    """bfast's harmonic model ``[1, co, si, co2, si2, co3, si3]`` of the date's index
    ``tl = 1..n`` (not its time): ``cos(2 pi tl j / freq)``, ``sin(...)``."""
    tl = axis.trend  # 1-based position on the grid
    columns = [np.ones_like(tl)]
    for j in range(1, HARMONIC_ORDER + 1):
        angle = 2.0 * math.pi * tl * (1.0 / axis.freq) * j
        columns += [np.cos(angle), np.sin(angle)]
    return np.ascontiguousarray(np.stack(columns, axis=1))


def _pair(value, name: str, check) -> tuple:
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValueError(f"{name} must be one value or a pair (trend, season), got {value!r}")
        return check(value[0]), check(value[1])
    checked = check(value)
    return checked, checked


def _check_level(level) -> float:
    if isinstance(level, bool) or not isinstance(level, (int, float, np.integer, np.floating)) or not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    return float(level)


def _check_breaks(breaks):
    if breaks is None or (isinstance(breaks, str) and breaks == "BIC"):
        return None
    number = isinstance(breaks, (int, np.integer, float, np.floating)) and not isinstance(breaks, bool)
    if not number or float(breaks) != int(breaks):
        raise ValueError(f"breaks must be None (BIC) or a whole number, got {breaks!r}")
    return max(int(breaks), 1)  # R: "number of breaks must be at least 1"


def _break_slots(n_dates: int, h: float, asked) -> int:
    """The most breaks any pixel of up to ``n_dates`` observations can get."""
    most = max((largest_number_of_breaks(n, segment_size(n, h)) for n in range(1, n_dates + 1)
                if segment_size(n, h) > 0), default=0)
    caps = [b for b in asked if b is not None]
    return max(0, min(most, max(caps)) if len(caps) == len(asked) else most)


def make_classic_plan(axis: TimeAxis, *, h, season, max_iter, breaks, level, type, nodata) -> ClassicPlan:
    """Validate the parameters and build the designs once."""
    if isinstance(h, bool) or not isinstance(h, (int, float, np.integer, np.floating)) or not 0 < h < 0.5:
        raise ValueError(f"h must be a fraction of the series in (0, 0.5) (bfast's minimal segment size), got {h!r}")
    if season not in SEASON_MODELS:
        raise ValueError(f"season must be one of {', '.join(SEASON_MODELS)}, got {season!r}")
    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        raise ValueError(f"max_iter must be a positive integer, got {max_iter!r}")
    if type not in TEST_TYPES:
        raise ValueError(f"type must be one of {', '.join(TEST_TYPES)}, got {type!r}")
    if axis.freq < 2:
        raise ValueError(f"bfast_classic needs a seasonal series (freq >= 2), got freq {axis.freq}")
    if not np.array_equal(axis.slot, np.arange(len(axis))):
        missing = int(np.flatnonzero(np.diff(axis.slot) > 1)[0])
        raise ValueError(
            f"bfast_classic needs a regular series (R's ts): dates skip grid slots after position {missing}; "
            "insert the missing dates with NaN values")
    breaks = _pair(breaks, "breaks", _check_breaks)
    level = _pair(level, "level", _check_level)
    nodata = check_nodata(nodata)
    centre = 0.5 * (axis.time[0] + axis.time[-1])
    trend_design = np.ascontiguousarray(np.stack([np.ones(len(axis)), axis.time - centre], axis=1))
    season_design = {"dummy": season_dummies, "harmonic": season_harmonics}.get(season, lambda _: None)(axis)
    asked = breaks if season != "none" else breaks[:1]
    return ClassicPlan(axis=axis, h=float(h), season=season, max_iter=int(max_iter), breaks=breaks, level=level,
                       test=type, nodata=nodata, trend_design=trend_design, trend_centre=float(centre),
                       season_design=season_design, break_slots=_break_slots(len(axis), float(h), asked))
