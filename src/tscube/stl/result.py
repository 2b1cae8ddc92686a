"""The result of :func:`tscube.stl`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._params import StlParams


@dataclass(frozen=True)
class StlResult:
    """Result of :func:`stl`.

    Attributes
    ----------
    seasonal, trend, remainder, weights : ndarray, shape ``(T, ...)``
        Components and robustness weights. ``seasonal`` and ``trend`` are defined at
        every date, missing ones included; ``remainder`` is NaN where the data is
        missing. ``weights`` are 1 at missing dates and everywhere when the fit is not
        robust. All four are NaN for series whose ``status`` is not ``OK``.
    trend_slope : ndarray, shape ``(...)``
        OLS slope of ``trend`` against time over all T dates (the paper's "trend
        magnitude"): per year when ``dates`` were given, otherwise per time step.
    seasonal_amplitude : ndarray, shape ``(...)``
        Peak-to-trough range (max - min) of the mean seasonal cycle (the seasonal
        component averaged per cycle position).
    status : ndarray of int8, shape ``(...)``
        :class:`StlStatus` code per series.
    params : StlParams
        The parameters actually used (defaults filled in, windows made odd).
    engine : str
        The engine that ran.
    """

    seasonal: np.ndarray
    trend: np.ndarray
    remainder: np.ndarray
    weights: np.ndarray
    trend_slope: np.ndarray
    seasonal_amplitude: np.ndarray
    status: np.ndarray
    params: StlParams
    engine: str

    def plot(self, **kwargs):
        """Trend-slope and seasonal-amplitude maps of a 2-D result
        (:func:`tscube.plot.stl_maps`); returns the figure."""
        from ._plot import stl_maps

        return stl_maps(self, **kwargs)
