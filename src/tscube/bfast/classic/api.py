"""Classic BFAST (R ``bfast::bfast``), the public function: NumPy data to
:func:`bfast_classic_array`, an ``xarray.DataArray`` to :func:`bfast_classic_xarray`."""

from __future__ import annotations

from ...xarray_blocks import is_xarray
from ._array import bfast_classic_array
from .result import BfastClassicResult


def bfast_classic(data, dates=None, *, h: float = 0.15, season: str = "dummy", max_iter: int = 10, breaks=None,
                  level=0.05, type: str = "OLS-MOSUM", freq=None, nodata=None, iterations: bool = False,
                  engine: str = "auto", **xarray_options) -> BfastClassicResult:
    """Breaks in the trend and in the seasonal pattern of each pixel's series, found
    iteratively (Verbesselt et al. 2010; equal to R ``bfast::bfast``, bfast 1.7.2).

    Per pixel: the seasonal component of a periodic STL as the start; then, until both
    components' breakpoints repeat or ``max_iter`` iterations: the deseasonalised series'
    pre-test and Bai–Perron breakpoints of ``Vt ~ time``, a line per segment (the
    trend), the detrended series' pre-test and breakpoints of the seasonal model, its fit
    per segment (the seasonal); at the end the magnitude of each trend break.

    Parameters
    ----------
    data : array_like, shape (T, ...)
        Time first, any pixel shape; float or integer. NaN, inf and ``nodata`` are
        missing; gap-free pixels follow R exactly, pixels with missing values run the
        same iteration on their valid observations from an stlplus start (R's path for
        them; no R fixture covers it).
    dates : array_like, length T
        A regular series (R's ``ts``): datetimes or decimal years (then ``freq`` is
        required) at every slot of the grid; missing dates as NaN values.
    h : float
        Minimal segment size, a fraction of the valid observations (``floor(n * h)``),
        in (0, 0.5); also the OLS-MOSUM pre-test's bandwidth.
    season : {"dummy", "harmonic", "none"}
        Seasonal model: ``freq - 1`` effect-coded season dummies, three harmonics of the
        date's index with an intercept, or none (no seasonal component or breaks).
    max_iter : int
        Most iterations per pixel.
    breaks : None, int, or (trend, season)
        Breaks per component: None = chosen by BIC (R's default), or a fixed number
        (at least 1; clamped to R's most possible, ``ceiling(n / h) - 2``).
    level : float or (trend, season)
        Significance level of each component's pre-test; no breakpoints are searched
        where its p-value exceeds it.
    type : {"OLS-MOSUM", "OLS-CUSUM"}
        The pre-test's empirical fluctuation process (strucchange ``efp``).
    freq : int, optional
        Observations per year of the regular grid (required for decimal-year dates).
    nodata : number, optional
        Value marking missing observations.
    iterations : bool
        Also return every iteration's break sets (``iter_trend_break_index``, ...).
    engine : {"auto", "reference", "cpu"}
        Implementation; all give the same results ("auto" = "cpu").
    **xarray_options
        Only for an ``xarray.DataArray`` ``data``: ``client``, ``memory``, ``time_dim``
        (see :func:`tscube.xr.bfast_classic_xarray`); returns an ``xarray.Dataset``.

    Returns
    -------
    BfastClassicResult
        Trend and seasonal breaks with their dates and confidence intervals, the
        magnitudes, the components and a per-pixel status (:class:`BfastClassicStatus`).
    """
    options = dict(h=h, season=season, max_iter=max_iter, breaks=breaks, level=level, type=type, freq=freq,
                   nodata=nodata, iterations=iterations, engine=engine)
    if is_xarray(data):
        from ._xarray import bfast_classic_xarray

        return bfast_classic_xarray(data, dates=dates, **options, **xarray_options)
    if xarray_options:
        raise TypeError(f"bfast_classic() got options only valid for xarray input: {', '.join(xarray_options)}")
    if dates is None:
        raise TypeError("bfast_classic() needs dates for NumPy data (only an xarray.DataArray carries its dates)")
    return bfast_classic_array(data, dates, **options)
