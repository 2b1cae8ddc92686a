"""The season-trend design matrix of BFAST (R ``bfastpp`` + ``response ~ trend + harmon``
or ``response ~ trend + season``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...timeaxis import TimeAxis


@dataclass(frozen=True)
class Design:
    """Regressors of every date of the time axis.

    ``matrix`` has R's columns ``[1, trend, cos1..cosK, sin1..sinK]`` but with the trend
    column centred and scaled to [-1, 1] over the grid (``(trend - centre) / scale``).
    That reparametrisation leaves fitted values, residuals and everything BFAST Monitor
    reports unchanged, while keeping the normal equations well conditioned (R's raw
    trend, up to the series length next to unit-scale harmonics, gives condition numbers
    ~1e14 on X'X).
    """

    matrix: np.ndarray  # (T, k) float64
    names: tuple[str, ...]
    order: int  # harmonic order actually used (R: min(freq, order))
    trend_centre: float
    trend_scale: float
    #: With season dummies, the level (0-based cycle position) of every date, else None.
    season_level: np.ndarray | None = None

    @property
    def n_season_levels(self) -> int:
        """Season levels (``freq``) of the dummies: their contrast columns plus one; 0 without."""
        if self.season_level is None:
            return 0
        return 1 + sum(name.startswith("season") for name in self.names)

    @property
    def season_mask(self) -> int:
        """Bit mask of every season level (``2**freq - 1``), 0 without season dummies: a
        history fits the dummies only if it holds every level (else R aliases the highest
        contrasts; a level count decides that exactly, where a Gram pivot of 24 columns
        can fall either side of a tolerance)."""
        return (1 << self.n_season_levels) - 1

    def kernel_levels(self) -> tuple[np.ndarray, int]:
        """The season level of every date as int64 (zeros without season dummies) and
        :attr:`season_mask` (0: no check), as the fast engines' kernels take them."""
        if self.season_level is None:
            return np.zeros(self.matrix.shape[0], dtype=np.int64), 0
        return np.ascontiguousarray(self.season_level, dtype=np.int64), self.season_mask

    @property
    def k(self) -> int:
        return self.matrix.shape[1]

    def r_coefficients(self, beta: np.ndarray) -> np.ndarray:
        """Convert coefficients of :attr:`matrix` to R's parametrisation (raw trend)."""
        beta = np.array(beta, dtype=np.float64, copy=True)
        if "trend" in self.names:
            j = self.names.index("trend")
            beta[..., j] = beta[..., j] / self.trend_scale
            beta[..., 0] = beta[..., 0] - beta[..., j] * self.trend_centre
        return beta


def season_contrasts(freq: int) -> np.ndarray:
    """R's ``contr.poly(freq)``: the orthonormal polynomials of degree 1..freq-1 in the
    level number 1..freq, ``(freq, freq - 1)``, each column summing to zero.

    Computed by Gram–Schmidt with reorthogonalisation on the centred levels (exact to
    ~1e-15). R builds them by a QR of the raw powers, which loses the last two or three
    columns at freq >= 23 (errors up to 0.1); they still span the same space, so fits,
    residuals and breakpoints agree, and intercept and trend agree wherever a segment
    holds every level (see docs/bfast_lite.md).
    """
    x = np.arange(1, freq + 1) - (freq + 1) / 2.0
    basis = np.empty((freq, freq))
    basis[:, 0] = 1.0 / np.sqrt(freq)
    for j in range(1, freq):
        v = x * basis[:, j - 1]
        for _ in range(2):  # twice is enough (Kahan): orthogonal to working precision
            v -= basis[:, :j] @ (basis[:, :j].T @ v)
        basis[:, j] = v / np.linalg.norm(v)
    return basis[:, 1:]


def season_names(freq: int) -> list[str]:
    """R's names of the ``season`` contrast columns: season.L, .Q, .C, ^4, ..."""
    named = {1: "season.L", 2: "season.Q", 3: "season.C"}
    return [named.get(j, f"season^{j}") for j in range(1, freq)]


def season_cycle(axis: TimeAxis) -> np.ndarray:
    """R's ``cycle()`` of each date, 0-based: the position of its slot within the year."""
    first = int(np.rint((axis.time[0] - np.floor(axis.time[0])) * axis.freq))
    return (first + axis.slot) % axis.freq


def build_design(axis: TimeAxis, order: int, trend: bool, season: bool = False) -> Design:
    """Build the design for ``response ~ [trend +] [harmon | season]``.

    Follows R's ``bfastpp``: ``order = min(freq, order)``; harmonics ``cos(2πjt)``,
    ``sin(2πjt)`` of the decimal-year time ``t``; when ``2 * order == freq`` the last
    sine column (identically ~0) is dropped. ``order=0`` gives no harmonic columns
    (R's ``response ~ trend``). ``season=True`` adds R's seasonal dummies, an ordered
    factor of the cycle coded by :func:`season_contrasts` (``freq - 1`` columns; R's
    ``cut(cycle(y), freq)``, whose levels are the cycles for a series of a year or more).
    Harmonics and dummies together are collinear, so ``season`` requires ``order=0``.
    """
    if season and order > 0:
        raise ValueError("season dummies and harmonics are collinear: use season=True with order=0")
    order = min(int(axis.freq), int(order))
    t = axis.time
    columns = [np.ones_like(t)]
    names = ["(Intercept)"]
    centre, scale = 0.0, 1.0
    if trend:
        raw = axis.trend
        centre = 0.5 * (raw[0] + raw[-1])
        scale = max(0.5 * (raw[-1] - raw[0]), 1.0)
        columns.append((raw - centre) / scale)
        names.append("trend")
    suffix = (lambda j: "") if order == 1 else str
    # cos(2πjt) of the fractional year (exact: t - floor(t)), not of t ~ 2000 itself: the
    # argument 2πj·2000 carries a rounding of ~1e-12 per harmonic, which breaks the
    # product identities (cos a cos b = ...) the cpu engine's Gram relies on at that level
    phase = 2.0 * np.pi * (t - np.floor(t))
    cos = [np.cos(j * phase) for j in range(1, order + 1)]
    sin = [np.sin(j * phase) for j in range(1, order + 1)]
    cos_names = [f"harmoncos{suffix(j)}" for j in range(1, order + 1)]
    sin_names = [f"harmonsin{suffix(j)}" for j in range(1, order + 1)]
    if order > 0 and 2 * order == axis.freq:
        sin, sin_names = sin[:-1], sin_names[:-1]
    columns += cos + sin
    names += cos_names + sin_names
    level = None
    if season:
        level = season_cycle(axis).astype(np.int64)
        columns += list(season_contrasts(axis.freq)[level].T)
        names += season_names(axis.freq)
    matrix = np.ascontiguousarray(np.stack(columns, axis=1), dtype=np.float64)
    return Design(matrix=matrix, names=tuple(names), order=order, trend_centre=centre, trend_scale=scale,
                  season_level=level)
