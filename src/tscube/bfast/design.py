"""The season-trend design matrix of BFAST Monitor (R ``bfastpp`` + ``response ~ trend + harmon``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..timeaxis import TimeAxis


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


def build_design(axis: TimeAxis, order: int, trend: bool) -> Design:
    """Build the design for ``response ~ [trend +] harmon`` with harmonic ``order``.

    Follows R's ``bfastpp``: ``order = min(freq, order)``; harmonics ``cos(2πjt)``,
    ``sin(2πjt)`` of the decimal-year time ``t``; when ``2 * order == freq`` the last
    sine column (identically ~0) is dropped. ``order=0`` gives no harmonic columns
    (R's ``response ~ trend``).
    """
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
    matrix = np.ascontiguousarray(np.stack(columns, axis=1), dtype=np.float64)
    return Design(matrix=matrix, names=tuple(names), order=order, trend_centre=centre, trend_scale=scale)
