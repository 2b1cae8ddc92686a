"""Batched STL (seasonal-trend decomposition by loess) with missing values.

One implementation, two flavours (see :func:`stl` and ``docs/stl.md``):
``"statsmodels"`` equals statsmodels ``STL`` / R ``stl`` on complete series, and
``"stlplus"`` reproduces R ``stlplus`` 0.5.1, quirks included.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._layout import decompose_via_rows
from ._params import StlParams, resolve_params
from ._status import StlStatus

__all__ = ["stl", "StlResult", "StlStatus", "StlParams"]

ENGINES = ("auto", "reference", "cpu", "cuda")
DAYS_PER_YEAR = 365.25


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


def _decimal_years(dates, n_times: int) -> np.ndarray:
    """Dates as float years: datetime-like as 1970 + days since 1970-01-01 / 365.25."""
    values = np.asarray(dates)
    if values.ndim != 1 or len(values) != n_times:
        raise ValueError(f"dates must be 1-D with length T = {n_times}, got shape {values.shape}")
    if values.dtype.kind == "O":
        try:
            values = values.astype("datetime64[ns]")
        except (TypeError, ValueError) as err:
            raise TypeError("dates must be datetime-like or decimal years (floats)") from err
    if values.dtype.kind == "M":
        if np.isnat(values).any():
            raise ValueError("dates must not contain NaT")
        days = (values - np.datetime64("1970-01-01", "ns")) / np.timedelta64(1, "D")
        years = 1970.0 + days / DAYS_PER_YEAR
    elif values.dtype.kind in "iuf":
        years = values.astype(np.float64)
    else:
        raise TypeError(f"dates must be datetime-like or decimal years, got dtype {values.dtype}")
    if not np.isfinite(years).all():
        raise ValueError("dates must be finite")
    if np.ptp(years) == 0.0:
        raise ValueError("dates must not all be equal")
    return years


def _prepare(data, nodata):
    array = np.asarray(data)
    if array.dtype.kind not in "iufb" or array.dtype.kind == "b":
        raise TypeError(f"data must be numeric, got dtype {array.dtype}")
    if array.ndim < 1:
        raise ValueError("data must have a time axis first: shape (T, ...)")
    out_dtype = np.float32 if array.dtype == np.float32 else np.float64
    return array, out_dtype


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
    from ..xarray_blocks import is_xarray

    if is_xarray(data):
        from ._xarray import stl_xarray

        return stl_xarray(data, period, seasonal=seasonal, trend=trend, low_pass=low_pass,
                          seasonal_deg=seasonal_deg, trend_deg=trend_deg, low_pass_deg=low_pass_deg,
                          seasonal_jump=seasonal_jump, trend_jump=trend_jump, low_pass_jump=low_pass_jump,
                          robust=robust, inner_iter=inner_iter, outer_iter=outer_iter, flavor=flavor,
                          dates=dates, nodata=nodata, engine=engine, **xarray_options)
    if xarray_options:
        raise TypeError(f"stl() got options only valid for xarray input: {', '.join(xarray_options)}")
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES} for stl, got {engine!r}")
    values, out_dtype = _prepare(data, nodata)
    n_times = values.shape[0]
    pixel_shape = values.shape[1:]
    params = resolve_params(n_times, period, seasonal, trend, low_pass, seasonal_deg,
                            trend_deg, low_pass_deg, seasonal_jump, trend_jump, low_pass_jump,
                            robust, inner_iter, outer_iter, flavor)
    times = (np.arange(n_times, dtype=np.float64) if dates is None
             else _decimal_years(dates, n_times))
    values = values.reshape(n_times, -1)
    if engine == "auto":
        from ..engines import auto_engine

        engine = auto_engine(values.size)
    if engine == "cpu":  # reads the time-first data and writes the outputs in place
        from ._cpu import decompose_cube

        outputs = decompose_cube(values, nodata, params, times, out_dtype)
    else:
        if engine == "reference":
            from ._reference import decompose
        else:
            from ._cuda import decompose
        outputs = decompose_via_rows(decompose, values, nodata, params, times, out_dtype)
    (seasonal_t, trend_t, remainder_t, weights_t), slope, amplitude, status = outputs

    def to_cube(component):
        return component.reshape((n_times,) + pixel_shape)

    return StlResult(
        seasonal=to_cube(seasonal_t), trend=to_cube(trend_t), remainder=to_cube(remainder_t),
        weights=to_cube(weights_t),
        trend_slope=slope.reshape(pixel_shape).astype(out_dtype, copy=False),
        seasonal_amplitude=amplitude.reshape(pixel_shape).astype(out_dtype, copy=False),
        status=status.astype(np.int8).reshape(pixel_shape), params=params, engine=engine)
