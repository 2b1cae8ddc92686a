"""Argument resolution of :func:`tscube.stl`, one rule set per flavour.

``flavor="statsmodels"`` follows statsmodels ``STL`` defaults (with R ``stl``'s
handling of even windows and ``"periodic"``); ``flavor="stlplus"`` follows R
``stlplus`` 0.5.1 called through its ``ts`` method (see ``SPEC-stl.md`` §1).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass

FLAVORS = ("statsmodels", "stlplus")

# stlplus' critical-frequency rule for the default trend window (get.t.window),
# coefficients indexed by degree 1 and 2.
_CRIT_A = (1.03350651767650e-4, 3.81086166990428e-6)
_CRIT_B = (-2.16653946625270e-4, 7.08495976681902e-4)
_CRIT_B1 = (1.42686036792937, 2.24089552678906)
_CRIT_B2 = (-3.1503819836694, -3.30435316073732)
_CRIT_B3 = (5.07481807116087, 5.08099438760489)
_CRIT_C1 = (1.66534145060448, 2.33114333880815)
_CRIT_C2 = (-3.87719398039131, -1.8314816166323)
_CRIT_C3 = (6.46952900183769, 1.85431548427732)
STLPLUS_CRITFREQ = 0.05
STLPLUS_ZERO_WEIGHT = 1e-6


@dataclass(frozen=True)
class StlParams:
    """Parameters an STL fit actually used (windows odd, defaults filled in)."""

    flavor: str
    period: int
    seasonal: int
    trend: int
    low_pass: int
    seasonal_deg: int
    trend_deg: int
    low_pass_deg: int
    seasonal_jump: int
    trend_jump: int
    low_pass_jump: int
    inner_iter: int
    outer_iter: int
    robust: bool
    periodic: bool

    def as_dict(self) -> dict:
        return asdict(self)


def _as_int(value, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if not float(value).is_integer():
        raise ValueError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def _as_degree(value, name: str) -> int:
    degree = _as_int(value, name, 0)
    if degree > 2:
        raise ValueError(f"{name} must be 0, 1 or 2, got {degree}")
    return degree


def _is_periodic(seasonal, flavor: str) -> bool:
    if not isinstance(seasonal, str):
        return False
    text = seasonal.lower()
    # stlplus matches "periodic" partially ("per" works); statsmodels flavour wants it whole.
    ok = ("periodic".startswith(text) and len(text) >= 3) if flavor == "stlplus" else text == "periodic"
    if not ok:
        raise ValueError(f"seasonal must be an odd integer or 'periodic', got {seasonal!r}")
    return True


def _fortran_odd(window: int) -> int:
    """Cleveland's Fortran: at least 3, and odd."""
    window = max(window, 3)
    return window + 1 if window % 2 == 0 else window


def _nextodd(value: float, name: str) -> int:
    """R's ``nextodd``: round half to even, plus one if even."""
    window = int(round(value))
    if window % 2 == 0:
        window += 1
    if window <= 0:
        raise ValueError(f"{name} must be positive, got {value!r}")
    return window


def stlplus_default_trend(period: int, seasonal: int, seasonal_deg: int, trend_deg: int,
                          critfreq: float = STLPLUS_CRITFREQ) -> int:
    """stlplus' default trend window from its critical-frequency rule (``get.t.window``)."""
    sd = max(seasonal_deg, 1) - 1
    td = max(trend_deg, 1) - 1

    def betas(d):
        beta0 = _CRIT_A[d] + _CRIT_B[d] * critfreq
        beta1 = _CRIT_B1[d] + _CRIT_B2[d] * critfreq + _CRIT_B3[d] * critfreq**2
        beta2 = _CRIT_C1[d] + _CRIT_C2[d] * critfreq + _CRIT_C3[d] * critfreq**2
        return beta0, beta1, beta2

    b0, b1, b2 = betas(sd)
    f_c = (1.0 - (b0 + b1 / seasonal + b2 / seasonal**2)) / period
    b0, b1, b2 = betas(td)
    t = (-b1 - math.sqrt(b1**2 - 4.0 * (b0 - f_c) * b2)) / (2.0 * (b0 - f_c))
    return _nextodd(t, "trend")


def resolve_params(n_times: int, period, seasonal, trend, low_pass, seasonal_deg, trend_deg,
                   low_pass_deg, seasonal_jump, trend_jump, low_pass_jump, robust,
                   inner_iter, outer_iter, flavor: str) -> StlParams:
    """Validate the arguments of :func:`tscube.stl` and fill in the flavour's defaults."""
    if flavor not in FLAVORS:
        raise ValueError(f"flavor must be one of {FLAVORS}, got {flavor!r}")
    stlplus = flavor == "stlplus"
    period = _as_int(period, "period", 4 if stlplus else 2)
    if n_times <= 2 * period:
        raise ValueError(
            f"data: STL needs more than 2*period = {2 * period} time steps, got {n_times}")
    robust = bool(robust)
    seasonal_deg = _as_degree(seasonal_deg, "seasonal_deg")
    trend_deg = _as_degree(trend_deg, "trend_deg")
    if low_pass_deg is None:
        low_pass_deg = trend_deg if stlplus else 1
    low_pass_deg = _as_degree(low_pass_deg, "low_pass_deg")

    periodic = _is_periodic(seasonal, flavor)
    if periodic:
        seasonal_passed = 10 * n_times + 1
        seasonal_deg = 0
    else:
        seasonal_passed = _as_int(seasonal, "seasonal", 1)

    if stlplus:
        s_window = _nextodd(seasonal_passed, "seasonal")
        if trend is None:
            t_window = stlplus_default_trend(period, s_window, seasonal_deg, trend_deg)
            t_passed = t_window
        else:
            t_passed = _as_int(trend, "trend", 1)
            t_window = _nextodd(t_passed, "trend")
        if low_pass is None:
            l_window = _nextodd(period, "low_pass")
            l_passed = l_window
        else:
            l_passed = _as_int(low_pass, "low_pass", 1)
            l_window = _nextodd(l_passed, "low_pass")
        # stlplus' ts method evaluates ceiling(window/10) from the window as passed.
        default_jumps = (math.ceil(seasonal_passed / 10), math.ceil(t_passed / 10),
                         math.ceil(l_passed / 10))
        if periodic:
            default_jumps = (n_times + 1,) + default_jumps[1:]
            seasonal_jump = None  # stlplus overrides a passed s.jump; the periodic path ignores it
        default_inner = 2
    else:
        if trend is None:
            t_passed = math.ceil(1.5 * period / (1.0 - 1.5 / seasonal_passed))
            if seasonal_passed <= 1.5:
                raise ValueError("seasonal must be > 1.5 when trend is not given")
        else:
            t_passed = _as_int(trend, "trend", 1)
        if low_pass is None:
            l_passed = period + 1 + (period + 1 + 1) % 2  # next odd > period
        else:
            l_passed = _as_int(low_pass, "low_pass", 1)
        s_window = _fortran_odd(seasonal_passed)
        t_window = _fortran_odd(t_passed)
        l_window = _fortran_odd(l_passed)
        default_jumps = (1, 1, 1)
        default_inner = 2 if robust else 5

    jumps = []
    for value, default, name in zip((seasonal_jump, trend_jump, low_pass_jump), default_jumps,
                                    ("seasonal_jump", "trend_jump", "low_pass_jump")):
        jumps.append(default if value is None else _as_int(value, name, 1))
    if inner_iter is None:
        inner_iter = default_inner
    if outer_iter is None:
        outer_iter = 15 if robust else 0
    inner_iter = _as_int(inner_iter, "inner_iter", 1)
    outer_iter = _as_int(outer_iter, "outer_iter", 0)
    return StlParams(flavor=flavor, period=period, seasonal=s_window, trend=t_window,
                     low_pass=l_window, seasonal_deg=seasonal_deg, trend_deg=trend_deg,
                     low_pass_deg=low_pass_deg, seasonal_jump=jumps[0], trend_jump=jumps[1],
                     low_pass_jump=jumps[2], inner_iter=inner_iter, outer_iter=outer_iter,
                     robust=robust, periodic=periodic)
