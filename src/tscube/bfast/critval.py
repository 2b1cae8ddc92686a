"""Critical values of the OLS-MOSUM monitoring test (strucchange's ``monitorMECritvalTable``).

The table ships with tscube (``tscube/data/critval_ols_mosum.csv``): simulated
(1 - alpha)-quantiles of ``sup_{1<t<=end} |B(t) - B(t-h)| / sqrt(2 logPlus(t))`` for a
Brownian bridge, for ``h`` in {0.25, 0.5, 1}, ``end`` in {2, 4, 6, 8, 10} and
``1 - alpha`` in {0.950, 0.951, ..., 0.999}. As in R, ``alpha`` between table columns is
interpolated linearly and anything outside the table is an error.
"""

from __future__ import annotations

from functools import lru_cache
from importlib.resources import files

import numpy as np

SUPPORTED_H = (0.25, 0.5, 1.0)
SUPPORTED_END = (2, 4, 6, 8, 10)
LEVEL_RANGE = (0.001, 0.05)


@lru_cache(maxsize=1)
def _table() -> dict[tuple[float, int], tuple[np.ndarray, np.ndarray]]:
    text = files("tscube").joinpath("data/critval_ols_mosum.csv").read_text()
    rows = [line.split(",") for line in text.strip().splitlines()[1:]]
    table: dict[tuple[float, int], list[tuple[float, float]]] = {}
    for h, period, one_minus_alpha, functional, critval in rows:
        if functional == "max":
            table.setdefault((float(h), int(period)), []).append((float(one_minus_alpha), float(critval)))
    out = {}
    for key, pairs in table.items():
        pairs.sort()
        out[key] = (np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs]))
    return out


def _as_number(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, got {value!r}")
    return float(value)


def critical_value(h: float, end: float, level: float) -> float:
    """OLS-MOSUM critical value for bandwidth ``h``, horizon ``end`` and significance ``level``.

    Raises ``ValueError`` naming the supported values when ``h``, ``end`` or ``level`` is
    outside strucchange's table.
    """
    h = _as_number(h, "h")
    end = _as_number(end, "end")
    level = _as_number(level, "level")
    if h not in SUPPORTED_H:
        raise ValueError(f"h = {h:g} is not supported; the OLS-MOSUM table has h = 0.25, 0.5, 1")
    if end not in SUPPORTED_END:
        raise ValueError(f"end = {end:g} is not supported; the OLS-MOSUM table has end = 2, 4, 6, 8, 10")
    if not (LEVEL_RANGE[0] <= level <= LEVEL_RANGE[1]):
        raise ValueError(
            f"level = {level:g} (monitoring significance) is outside the OLS-MOSUM table's "
            f"range [{LEVEL_RANGE[0]}, {LEVEL_RANGE[1]}]"
        )
    x, y = _table()[(h, int(end))]
    return float(np.interp(1.0 - level, x, y))
