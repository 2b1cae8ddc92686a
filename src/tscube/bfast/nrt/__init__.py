"""Near-real-time BFAST Monitor: a per-pixel monitoring state, updated image by image.

Operational alerting runs BFAST Monitor over a cube that grows by one image every few
days. The history fit and everything the OLS-MOSUM test has accumulated do not change
when images are added after ``start``, so :class:`BfastMonitor` keeps them as a
per-pixel *state* and :meth:`BfastMonitor.update` processes only the new images. The
result after any sequence of updates equals :func:`tscube.bfast_monitor` over all the
dates: break index and time, history start, statuses and counts exactly; the floats to
1e-12 of their scale for decimal-year dates. Datetime dates sit on R's grid, whose time
values (``seq.int(tsp1, tsp2, length.out=N)``) move by an ulp when the series grows: the
full run's harmonics then differ from the fitted ones by ~3e-12, and so do the floats
(~1e-11 relative; tested to 1e-10). A history test (ROC, BP) decided within rounding
can then go the other way in the full run: one pixel in 4 million in
``benchmarks/nrt.py``, where the cpu engine selects another history on 235 dates than on
the 234 of the fit (the reference engine selects the fit's on both).

The state of a pixel (flat arrays over pixel lanes; names in :data:`STATE_FIELDS`; what
an update changes is one float64 record per pixel, ``state["hot"]``, and the arrays of
those names are views of its columns, see :data:`HOT_SCALARS`):

* the history fit: ``coefficients`` (k regressors, in the fit's design
  parametrisation, see ``trend_centre``/``trend_scale``), ``sigma``, ``n_history`` and
  ``history_begin`` (index of the first history date), and ``fitted_status``, the
  status the pixel has whenever it has monitoring data;
* the MOSUM window, without a ring that every update would rewrite: ``tail``, the last
  ``floor(h n)`` history residuals in date order (fixed at fit time), and ``leaving`` and
  ``leaving_value``, the residual row and value of the next monitoring residual to leave
  the window (the window's oldest once ``floor(h n)`` monitoring residuals have come: an
  update reads the residual rows only to find the one after it); and the window's sum;
* running sums from the history start that every type of monitoring process needs:
  ``residual_sum`` (sum of all residuals, the OLS-CUSUM process), ``process_sum`` (for
  the mean process) and ``statistic`` (max |process|); ``fitted_sum``, the sum of the
  model's predictions over the monitoring observations (the relative magnitude's
  denominator, where the result has one);
* the first break (``break_index``; its time comes from the dates), the counts;
* ``residuals``: every monitoring residual (time x pixel, NaN where missing), because
  R's magnitude is the median of *all* of them: the median of a growing set can move, one
  rank per new value, to any of its elements, so every one may be needed again;
* ``median_window``: the ``MEDIAN_WINDOW`` residuals of consecutive ranks around the
  median, sorted, with the numbers of residuals below and above them
  (``median_below``, ``median_above``, ``median_count`` filled slots). A new residual
  outside the window only moves a count; one inside is inserted (the end farther from the
  median drops out). While the window holds the middle ranks, the magnitude comes from it
  exactly (the same values, the same ``0.5 (a + b)``); when the median has walked out of
  it (after about ``MEDIAN_WINDOW`` residuals on one side, e.g. after a break), it is
  rebuilt from the pixel's residuals. So an update costs O(1) per pixel and new image,
  not O(monitoring dates).

The update kernel runs on the cpu (numba, over pixel lanes) whatever engine made the
fit: per new image it reads and writes a few numbers per pixel plus the residual
store, which is memory-bound work a GPU transfer would only slow down. The fit itself
(history selection and the first monitoring) comes from any engine's outputs.

:meth:`BfastMonitor.save` to ``.zarr`` writes the result and the state as files that
:func:`update_saved` (and ``tscube monitor --update``) update in place, touching O(1)
values per pixel and new image (:mod:`._store`).

The modules: ``_cpu`` (the kernels and the record they update), :mod:`.state` (the state
in memory: fit, update, result), :mod:`.dataset` (its ``xarray.Dataset`` form),
``_store`` (the state on disk, updated in place), :mod:`.monitor` (the public
:class:`BfastMonitor` and :func:`update_saved`), ``_xarray`` (the chunked fit of a cube
and ``tscube monitor --update``).
"""

from ._xarray import holds_state, nrt_fit_xarray, run_nrt
from .monitor import BfastMonitor, update_saved

__all__ = ["BfastMonitor", "update_saved", "holds_state", "nrt_fit_xarray", "run_nrt"]
