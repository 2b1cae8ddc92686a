"""The season-trend design matrix of BFAST (R ``bfastpp`` + ``response ~ trend + harmon``
or ``response ~ trend + season``)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib.resources import files

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
        history fits the dummies only if it holds every level. R's contrast columns are
        orthonormal over the levels, so a history holding every level has full rank by a
        wide margin, and one missing a level is rank deficient by one: R aliases a
        contrast and predicts NA (``tests/test_season_contrasts.py`` checks both on R's
        values for every freq). A level count decides that exactly, where a Gram pivot of
        24 columns can fall either side of a tolerance."""
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


#: Frequencies whose season dummies tscube can code: R's ``contr.poly(f)`` values ship with
#: the package for f = 2..64 (R refuses f = 1, a factor of one level, and f > 95; BFAST
#: Monitor's engines take at most 64 regressors).
MAX_SEASON_FREQ = 64


def season_contrasts(freq: int) -> np.ndarray:
    """R's ``contr.poly(freq)``, bit for bit: the ``(freq, freq - 1)`` coding of the ordered
    season factor that R's ``model.matrix`` puts in the ``season`` columns (read-only).

    R builds them by a QR of the raw powers of the level numbers (``contr.poly``'s
    ``make.poly``), which keeps them orthonormal and summing to zero but, from degree 21 on
    (``freq >= 23``), far from the orthonormal polynomials they stand for (at ``freq = 23``
    the degree-21 column is turned around, 0.89 from the polynomial, and the last two are
    0.11 and 0.12 away even turned back). At full rank any coding spans the same space;
    where a fit is rank deficient (a history or a segment missing some cycle positions)
    R's pivoting drops the *last* columns, and what the kept columns predict for a missing
    level (ROC's and Bai–Perron's recursive residuals) and the intercept they give (BFAST
    Lite's coefficients and magnitudes) follow R's exact numbers. So tscube uses R's: R 4.2.2's
    values for every ``freq`` in 2..:data:`MAX_SEASON_FREQ`, shipped as
    ``tscube/data/contr_poly.npz`` (written from ``tests/fixtures/r_contr_poly`` by
    ``python tests/test_season_contrasts.py``, which also checks them bit for bit).
    """
    freq = int(freq)
    if not 2 <= freq <= MAX_SEASON_FREQ:
        raise ValueError(
            f"season dummies need 2 <= freq <= {MAX_SEASON_FREQ} (R's contr.poly values ship with tscube "
            f"for those), got freq = {freq}: aggregate the series to a coarser grid, or use harmonics"
        )
    return _contr_poly(freq)


#: R's ``contr.poly`` values, a float64 array ``f<freq>`` per frequency (package data).
CONTR_POLY_FILE = "data/contr_poly.npz"


@functools.lru_cache(maxsize=None)
def _contr_poly(freq: int) -> np.ndarray:
    with files("tscube").joinpath(CONTR_POLY_FILE).open("rb") as file, np.load(file) as archive:
        values = np.ascontiguousarray(archive[f"f{freq}"], dtype=np.float64)
    values.setflags(write=False)
    return values


def season_names(freq: int) -> list[str]:
    """R's names of the ``season`` contrast columns: season.L, .Q, .C, ^4, ..."""
    named = {1: "season.L", 2: "season.Q", 3: "season.C"}
    return [named.get(j, f"season^{j}") for j in range(1, freq)]


def season_cycle(axis: TimeAxis) -> np.ndarray:
    """R's ``cycle()`` of each date, 0-based: the position of its slot within the year."""
    first = int(np.rint((axis.time[0] - np.floor(axis.time[0])) * axis.freq))
    return (first + axis.slot) % axis.freq


def n_regressors(freq: int, order: int, trend: bool, season: bool = False) -> int:
    """Columns of :func:`build_design`'s matrix, without building it."""
    order = min(int(freq), int(order))
    harmonics = 2 * order - (1 if order > 0 and 2 * order == freq else 0)
    return 1 + int(bool(trend)) + harmonics + (int(freq) - 1 if season else 0)


def build_design(axis: TimeAxis, order: int, trend: bool, season: bool = False) -> Design:
    """Build the design for ``response ~ [trend +] [harmon | season]``.

    Follows R's ``bfastpp``: ``order = min(freq, order)``; harmonics ``cos(2πjt)``,
    ``sin(2πjt)`` of the decimal-year time ``t``; when ``2 * order == freq`` the last
    sine column (identically ~0) is dropped. ``order=0`` gives no harmonic columns
    (R's ``response ~ trend``). ``season=True`` adds R's seasonal dummies, an ordered
    factor of the cycle coded by :func:`season_contrasts` (``freq - 1`` columns holding R's
    own values; R's ``cut(cycle(y), freq)``, whose levels are the cycles for a series of a
    year or more; ``freq`` in 2..:data:`MAX_SEASON_FREQ`). Harmonics and dummies together
    are collinear, so ``season`` requires ``order=0``.
    """
    if season and order > 0:
        raise ValueError("season dummies and harmonics are collinear: use season=True with order=0")
    contrasts = season_contrasts(axis.freq) if season else None
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
        columns += list(contrasts[level].T)
        names += season_names(axis.freq)
    matrix = np.ascontiguousarray(np.stack(columns, axis=1), dtype=np.float64)
    return Design(matrix=matrix, names=tuple(names), order=order, trend_centre=centre, trend_scale=scale,
                  season_level=level)
