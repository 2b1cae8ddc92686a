"""The public STL function: NumPy data to :func:`stl_array`, an ``xarray.DataArray`` to
:func:`stl_xarray`."""

from __future__ import annotations

from ..xarray_blocks import is_xarray
from ._array import stl_array
from ._xarray import stl_xarray
from .result import StlResult


def stl(data, period, *, seasonal=7, trend=None, low_pass=None, seasonal_deg=1, trend_deg=1,
        low_pass_deg=None, seasonal_jump=None, trend_jump=None, low_pass_jump=None,
        robust=False, inner_iter=None, outer_iter=None, flavor="statsmodels",
        dates=None, nodata=None, engine="auto", **xarray_options) -> StlResult:
    """Seasonal-trend decomposition by loess (STL) of many series at once, gaps allowed.

    Parameters
    ----------
    data : array_like, shape ``(T, ...)``
        Time first, any trailing pixel shape. float32 (kept for the outputs), float64
        or integer. NaN, +-inf and ``nodata`` are missing values.
    period : int
        Length of the seasonal cycle in time steps (>= 2; >= 4 for ``"stlplus"``).
        ``T`` must exceed ``2 * period``.
    seasonal : int or "periodic"
        Seasonal smoother window (statsmodels ``seasonal``, R ``s.window``).
        ``"periodic"`` (stlplus also takes ``"per"``) uses ``10 T + 1`` and degree 0,
        which makes the seasonal the same in every cycle.
    trend, low_pass : int, optional
        Trend and low-pass windows. Defaults: statsmodels ``nextodd(ceil(1.5 period /
        (1 - 1.5 / seasonal)))`` and the next odd integer > period; stlplus its
        critical-frequency rule (0.05) and ``nextodd(period)``.
    seasonal_deg, trend_deg, low_pass_deg : {0, 1, 2}
        Local polynomial degrees. ``low_pass_deg`` defaults to 1 (statsmodels) or
        ``trend_deg`` (stlplus).
    seasonal_jump, trend_jump, low_pass_jump : int, optional
        Fit every ``jump``-th point and interpolate. Defaults: 1 (statsmodels),
        ``ceil(window / 10)`` of the window as passed (stlplus).
    robust : bool
        Only selects the iteration defaults, as in statsmodels: ``inner_iter`` 2 and
        ``outer_iter`` 15 if robust, else ``inner_iter`` 5 (statsmodels) or 2 (stlplus)
        and ``outer_iter`` 0.
    inner_iter, outer_iter : int, optional
        ``outer_iter + 1`` passes of ``inner_iter`` inner loops; with ``outer_iter > 0``
        robustness weights are recomputed between passes (statsmodels semantics in
        both flavours: R ``stlplus(outer=K, inner=I)`` is ``outer_iter=K-1``,
        ``inner_iter=I`` for K >= 2, ``outer_iter=0, inner_iter=I`` for K = 1, and
        ``inner_iter=2I`` for K = 0).
    flavor : {"statsmodels", "stlplus"}
        Which reference to reproduce; see Notes.
    dates : array_like, optional
        Length-T dates (datetime64, datetime, pandas DatetimeIndex) or decimal years
        (floats); datetimes count as ``1970 + days since 1970-01-01 / 365.25``. Makes
        ``trend_slope`` per year.
    nodata : scalar, optional
        Value that marks missing data (e.g. for integer cubes).
    engine : {"auto", "reference", "cpu", "cuda"}
        ``"reference"`` is plain NumPy (slow, for checking); ``"cpu"`` is numba,
        parallel over series; ``"cuda"`` runs the cpu engine's per-series code on an
        NVIDIA GPU (numba.cuda, one thread per series; same results as ``"cpu"``;
        ``RuntimeError`` without a GPU); ``"auto"`` is ``"cuda"`` on a real GPU for
        batches of at least ``config.CUDA_AUTO_MIN_WORK`` values (series x T), else
        ``"cpu"``.

    Returns
    -------
    StlResult

    Notes
    -----
    Missing values: every loess uses the ``q = min(window, n_valid)`` valid points
    nearest to the evaluation point and is evaluated at every date, so seasonal and trend exist at missing dates too. Without
    missing values this is exactly the Fortran window. A series with fewer than
    ``2 * period`` valid values, or with a cycle-subseries without valid values, gets a
    :class:`StlStatus` other than ``OK`` and NaN components; the batch goes on.

    ``flavor="statsmodels"`` is Cleveland's Fortran as ported by statsmodels (equal to
    it on complete series), with R ``stl``'s extras: windows are raised to at least 3
    and made odd (statsmodels rejects even ones); ``trend``/``low_pass`` need not
    exceed ``period``; ``"periodic"`` replaces the seasonal by its cycle means after
    the fit, as R does. With gaps: the window widening when ``window > n_valid`` is
    ``floor((window - n_valid) / 2)``; the low-pass uses all dates (its input has no
    gap) and no weights; the robustness median is the exact median of the valid
    residuals; where all weights of a window vanish the fit falls back to the nearest
    valid value. Degree 2 (absent from statsmodels and R ``stl``) is a weighted local
    quadratic, falling back to the degree-1 rule where singular. One detail is not
    copied: with a jump larger than about half the window, Fortran fits the last point
    with the window of the last jump point; we use the nearest window.

    ``flavor="stlplus"`` reproduces R ``stlplus`` 0.5.1 (``ts`` method) including its
    quirks: no Fortran weight cut-offs or fallbacks; widening by the real
    ``(window - n_valid) / 2``; cubic Hermite interpolation with local slopes for
    jumps > 1 (fits that fail are skipped); the low-pass loess uses only the dates
    where the data are valid and is robustness-weighted; robustness weights are
    recomputed after every pass, the last included (so the reported weights were not
    used by the fit), with the median taken at indices of the full length T among the
    sorted valid residuals (3 x one order statistic for odd T; undefined, hence all
    weights 1, when more than about half is missing); zero weights become 1e-6;
    ``"periodic"`` uses the weighted mean of each cycle-subseries, without a final
    cycle mean. Default windows and jumps as listed above. A singular local fit gives
    ``FIT_FAILED`` where R gives NaN or stops.

    An ``xarray.DataArray`` with a ``time`` dimension is decomposed lazily per chunk and
    returns an ``xarray.Dataset`` (``dates`` from its coordinate; ``client=``,
    ``memory=``, ``time_dim=`` and ``components=`` as in :func:`tscube.xr.stl_xarray`).
    """
    if is_xarray(data):
        return stl_xarray(data, period, seasonal=seasonal, trend=trend, low_pass=low_pass,
                          seasonal_deg=seasonal_deg, trend_deg=trend_deg, low_pass_deg=low_pass_deg,
                          seasonal_jump=seasonal_jump, trend_jump=trend_jump, low_pass_jump=low_pass_jump,
                          robust=robust, inner_iter=inner_iter, outer_iter=outer_iter, flavor=flavor,
                          dates=dates, nodata=nodata, engine=engine, **xarray_options)
    if xarray_options:
        raise TypeError(f"stl() got options only valid for xarray input: {', '.join(xarray_options)}")
    return stl_array(data, period, seasonal=seasonal, trend=trend, low_pass=low_pass, seasonal_deg=seasonal_deg,
                     trend_deg=trend_deg, low_pass_deg=low_pass_deg, seasonal_jump=seasonal_jump,
                     trend_jump=trend_jump, low_pass_jump=low_pass_jump, robust=robust, inner_iter=inner_iter,
                     outer_iter=outer_iter, flavor=flavor, dates=dates, nodata=nodata, engine=engine)
