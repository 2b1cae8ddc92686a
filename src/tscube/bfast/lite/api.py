"""BFAST Lite: every break of every pixel (R ``bfast::bfastlite``), the public function:
NumPy data to :func:`bfast_lite_array`, an ``xarray.DataArray`` to
:func:`bfast_lite_xarray`.

Per pixel: the season-trend model of ``bfastpp`` on the valid observations, Bai–Perron
breakpoints over the whole series with minimum segment ``h``, the number of breaks chosen
by LWZ (default) or BIC, R's ``magnitude()`` and the segment coefficients. Semantics:
SPEC-bfastlite (R 4.2.2, bfast 1.7.2, strucchangeRcpp).
"""

from __future__ import annotations

import numpy as np

from ...xarray_blocks import is_xarray
from ._array import bfast_lite_array
from ._xarray import bfast_lite_xarray
from .result import BfastLiteResult


def bfast_lite(
    data,
    dates=None,
    *,
    order: int = 3,
    trend: bool = True,
    season: bool = False,
    h: float = 0.15,
    breaks="LWZ",
    max_breaks: int | None = None,
    level: float = 0.0,
    magnitude_interval: float = 0.1,
    criteria: bool = False,
    freq=None,
    nodata=None,
    engine: str = "auto",
    **xarray_options,
) -> BfastLiteResult:
    """Find every structural break in each pixel's whole time series (R ``bfastlite``).

    Per pixel: missing values dropped (R's ``na.omit``), the season-trend model
    ``response ~ trend + harmon`` (or ``+ season`` dummies), Bai–Perron breakpoints with
    at least ``h`` observations per segment, the number of breaks chosen by ``breaks``,
    and per break R's ``magnitude()``; equal to R ``bfast::bfastlite`` (bfast 1.7.2).

    Parameters
    ----------
    data : array_like, shape (T, ...)
        Time first, any pixel shape; float or integer. NaN, inf and ``nodata`` are missing.
    dates : array_like, length T
        Datetimes or decimal years (then ``freq`` is required), strictly increasing.
    order : int
        Harmonic order (R: ``min(freq, order)``); 0 = no harmonics.
    trend : bool
        Include the linear trend.
    season : bool
        Seasonal dummies (R's ``response ~ trend + season``, an ordered factor of the cycle:
        ``freq - 1`` columns) instead of harmonics; requires ``order=0``.
    h : float or int
        Minimum segment size: a fraction of the valid observations (``floor(n * h)``) or,
        if ``>= 1``, a whole number of observations.
    breaks : "LWZ" (default), "BIC", "RSS", "all", or int
        How many breaks: the minimum of the LWZ or BIC criterion, the smallest RSS, the
        most possible, or a fixed number (clamped to 1..M as R does).
    max_breaks : int, optional
        Consider at most this many breaks (caps R's ``ceiling(n / h) - 2``); the output's
        break axis then has this length.
    level : float
        If > 0, R's OLS-MOSUM pre-test: pixels whose p-value exceeds ``level`` get no
        breaks (status ``STABLE_BY_PRETEST``) and no Bai–Perron run.
    magnitude_interval : float
        Window of the RMSD/MAD/MD magnitudes: a fraction of ``n`` observations either side
        of the break, or a number of observations if ``>= 1`` (R's ``interval``).
    criteria : bool
        Also return the RSS, BIC and LWZ of the best model for every number of breaks.
    freq : int, optional
        Observations per year of the regular grid (required for decimal-year dates).
    nodata : number, optional
        Value marking missing observations.
    engine : {"auto", "reference", "cpu", "cuda"}
        Implementation; all give the same results. "auto": "cuda" on a GPU for large
        batches, else "cpu".
    **xarray_options
        Only for an ``xarray.DataArray`` ``data``: ``client``, ``memory``, ``time_dim``
        (see :func:`tscube.xr.bfast_lite_xarray`); returns an ``xarray.Dataset``.

    Returns
    -------
    BfastLiteResult
        Breaks, their times and magnitudes, segment coefficients and per-pixel status
        (:class:`BfastLiteStatus`).
    """
    options = dict(order=order, trend=trend, season=season, h=h, breaks=breaks, max_breaks=max_breaks,
                   level=level, magnitude_interval=magnitude_interval, criteria=criteria, freq=freq,
                   nodata=nodata, engine=engine)
    if is_xarray(data):
        return bfast_lite_xarray(data, dates=dates, **options, **xarray_options)
    if xarray_options:
        raise TypeError(f"bfast_lite() got options only valid for xarray input: {', '.join(xarray_options)}")
    if dates is None:
        raise TypeError("bfast_lite() needs dates for NumPy data (only an xarray.DataArray carries its dates)")
    return bfast_lite_array(data, dates, **options)


def compile_cuda_host_kernels(data, dates, *, freq, nodata=None) -> None:
    """Compile the host kernels of ``bfast_lite(engine="cuda")`` (compaction, R's refits,
    the final fits) into numba's cache: the engine on ``data`` (a tiny cube), then one
    empty refit call, which that cube does not need. For ``tscube warmup``, which runs it
    on numba's CUDA simulator where no GPU is at hand."""
    from ._cuda import refit_rows

    bfast_lite(data, dates, freq=freq, nodata=nodata, engine="cuda")
    none = np.zeros(0, dtype=np.int64)
    T = len(dates)
    refit_rows(np.zeros((T, 8)), np.zeros((1, T), dtype=np.int64), np.zeros((1, T)), np.full(1, T), none, none, 1)
