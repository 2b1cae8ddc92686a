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
values per pixel and new image (:mod:`tscube.bfast._nrt_store`).
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
from numba import prange

from .._jit import jit
from .._kernel_io import read_exactly, write_exactly
from .._prefetch import prefetch_row
from ..timeaxis import TIME_TOL, build_time_axis
from ._cpu import _solve_equilibrated, add_normal_row, mirror_lower, process_bound
from .design import build_design
from .plan import PERFECT_FIT_RTOL, check_numeric_dtype, invalid_mask
from .result import MONITORED, OUTPUT_DTYPES, BfastMonitorResult, BfastStatus, empty_outputs

#: Version of the state layout (saved with the state; another version is not loaded).
STATE_VERSION = 5

#: Residuals kept around the median of every pixel (the rows of ``median_window``).
MEDIAN_WINDOW = 24  # >= 2: both middle ranks of an even count

#: Per-pixel state arrays (name -> dtype). ``coefficients`` is ``(k, P)``, ``tail``
#: ``(W, P)``, ``median_window`` ``(MEDIAN_WINDOW, P)`` and ``residuals`` ``(M, P)`` (M
#: monitoring dates); the others ``(P,)``.
STATE_FIELDS = {
    "fitted_status": np.int8,
    "history_begin": np.int64,
    "n_history": np.int32,
    "n_valid": np.int32,
    "n_monitor": np.int32,
    "n_inf": np.int32,
    "coefficients": np.float64,
    "sigma": np.float64,
    "tail": np.float64,
    "leaving": np.int32,
    "window_sum": np.float64,
    "residual_sum": np.float64,
    "fitted_sum": np.float64,
    "process_sum": np.float64,
    "statistic": np.float64,
    "break_index": np.int32,
    "leaving_value": np.float64,
    "median_window": np.float64,
    "median_count": np.int32,
    "median_below": np.int32,
    "median_above": np.int32,
    "residuals": np.float64,
}

#: What an update changes, kept as one record per pixel (a ``(P, HOT_WIDTH)`` float64
#: array, the state's ``"hot"``): the floats of :data:`HOT_FLOATS` in a slot each, the
#: integers of :data:`HOT_INTS` as int32 in pairs (the int32 view of the record), then the
#: median window. An update then reads and writes every pixel's row as one stream, where
#: ~30 arrays read and written at once left it bound by the memory system's juggling of
#: streams (2.1x slower on the 2-core VM). The state's arrays of these names are views of
#: its columns.
HOT_FLOATS = ("window_sum", "residual_sum", "fitted_sum", "process_sum", "statistic", "leaving_value")
HOT_INTS = ("n_monitor", "n_valid", "n_inf", "leaving", "break_index", "median_count", "median_below", "median_above")
HOT_SCALARS = HOT_FLOATS + HOT_INTS
_WINDOW_SUM, _RESIDUAL_SUM, _FITTED_SUM, _PROCESS_SUM, _STATISTIC, _LEAVING_VALUE = range(len(HOT_FLOATS))
#: Columns of the integers in the record's int32 view (two per float64 slot).
(_N_MONITOR, _N_VALID, _N_INF, _LEAVING, _BREAK_INDEX, _MEDIAN_COUNT, _MEDIAN_BELOW,
 _MEDIAN_ABOVE) = range(2 * len(HOT_FLOATS), 2 * len(HOT_FLOATS) + len(HOT_INTS))
#: First column of the median window in the record (``MEDIAN_WINDOW`` columns).
_WINDOW = len(HOT_FLOATS) + (len(HOT_INTS) + 1) // 2
HOT_WIDTH = _WINDOW + MEDIAN_WINDOW
#: The state's names kept in the record.
HOT = HOT_SCALARS + ("median_window",)
#: The state's arrays that the fit sets and updates only read.
STATIC = tuple(name for name in STATE_FIELDS if name not in HOT and name != "residuals")
#: ``inf_added`` of :func:`_advance` when no infinite value came.
_NO_INF = np.zeros(0, dtype=np.int32)
#: The arrays a result is computed into by lane (:func:`_result_block`; ``_advance``'s
#: ``out``): the outputs of ``bfast_monitor`` but ``n_history`` (which the fit sets), then
#: ``alert`` and ``changes`` (bits: what can differ from the result before an update).
RESULT_OUTPUTS = ("status", "break_index", "break_time", "history_start", "sigma", "magnitude", "statistic",
                  "mosum_mean", "rmse", "relative_magnitude", "n_valid", "n_monitor", "n_inf", "alert", "changes")
#: Bits of ``changes``: the status (and with it sigma and rmse), the break, ``n_inf``.
CHANGED_STATUS, CHANGED_BREAK, CHANGED_INF = 1, 2, 4

#: Statuses whose history is fitted (the others never get a model, whatever comes later).
_FITTED = tuple(MONITORED) + (BfastStatus.PERFECT_FIT,)
_MONITORED_CODES = np.array([int(s) for s in MONITORED], dtype=np.int8)
_FITTED_CODES = np.array([int(s) for s in _FITTED], dtype=np.int8)
#: Whether a status code (indexed by its byte) is fitted (row 0) or monitored (row 1): the
#: kernels' lookup table.
_CODE_KINDS = np.zeros((2, 256), dtype=np.bool_)
_CODE_KINDS[0, _FITTED_CODES.view(np.uint8)] = True
_CODE_KINDS[1, _MONITORED_CODES.view(np.uint8)] = True
_NO_MONITORING_DATA, _ALL_MISSING, _PERFECT_FIT = (int(s) for s in (BfastStatus.NO_MONITORING_DATA,
                                                                     BfastStatus.ALL_MISSING,
                                                                     BfastStatus.PERFECT_FIT))

#: Parameters of :func:`tscube.bfast_monitor` that define the model (saved with the state).
MODEL_PARAMS = ("order", "trend", "h", "level", "end", "history", "freq", "nodata")


# --------------------------------------------------------------------------------------
# kernels (numba, one pixel lane per iteration)


@jit()
def _residual(y, X, t, coef):
    """``y - X[t] @ coef``, summed in the engines' order."""
    r = y
    for a in range(X.shape[1]):
        r -= X[t, a] * coef[a]
    return r


@jit(parallel=True)
def _fit_history(Y, X, levels, all_levels, first, stop, fit, h, beta, sigma, tail, hot, singular, perfect):
    """History OLS of every lane with ``fit[p]``: valid rows ``first[p] <= t < stop`` of
    ``Y`` (NaN = missing). Writes the coefficients, sigma, the last ``floor(h n)``
    residuals in date order (``tail``) and their sum, the residual sum (into the record
    ``hot``); flags singular fits (also a history missing a season level, as the engines:
    ``levels``, ``all_levels``) and exact fits."""
    P = Y.shape[1]
    k = X.shape[1]
    for p in prange(P):
        if not fit[p]:
            continue
        G = np.zeros((k, k))
        b = np.zeros(k)
        n = 0
        ymax = 0.0
        seen = 0
        for t in range(first[p], stop):
            y = Y[t, p]
            if math.isnan(y):
                continue
            n += 1
            ymax = max(ymax, abs(y))
            seen |= np.int64(1) << levels[t]
            add_normal_row(G, b, X, t, y)
        mirror_lower(G)
        coef = np.empty(k)
        singular_design = all_levels != 0 and seen != all_levels
        if n <= k or singular_design or not _solve_equilibrated(G, b, k, coef, np.empty((k + 1, k))):
            singular[p] = True
            continue
        w = int(math.floor(h * n))
        rss = 0.0
        total = 0.0
        wsum = 0.0  # chronological order, as the engines sum it
        i = 0
        for t in range(first[p], stop):
            if not math.isnan(Y[t, p]):
                r = _residual(Y[t, p], X, t, coef)
                rss += r * r
                total += r
                if i >= n - w:
                    tail[i - (n - w), p] = r
                    wsum += r
                i += 1
        s = math.sqrt(rss / (n - k))
        for a in range(k):
            beta[a, p] = coef[a]
        sigma[p] = s
        hot[p, _WINDOW_SUM] = wsum
        hot[p, _RESIDUAL_SUM] = total
        perfect[p] = s <= PERFECT_FIT_RTOL * ymax


@jit(error_model="numpy")
def _window_insert(v, hot, q, count, below, above, size):
    """Insert the residual ``v`` into the sorted median window of pixel ``q`` (``size``
    columns of the record ``hot[q]`` from :data:`_WINDOW`, ``count`` filled,
    ``below``/``above`` residuals outside it); returns the new ``(count, below, above)``.
    The window keeps consecutive ranks: a value beyond an end with residuals outside it
    only counts; a full window drops the end farther from the middle ranks."""
    if count > 0 and v < hot[q, _WINDOW] and below > 0:
        return count, below + 1, above
    if count > 0 and v > hot[q, _WINDOW + count - 1] and above > 0:
        return count, below, above + 1
    largest = hot[q, _WINDOW + count - 1] if count > 0 else v
    i = count
    while i > 0 and hot[q, _WINDOW + i - 1] > v:
        if i < size:
            hot[q, _WINDOW + i] = hot[q, _WINDOW + i - 1]
        i -= 1
    if i < size:
        hot[q, _WINDOW + i] = v
    if count < size:
        return count + 1, below, above
    # ``count + 1`` values of ranks below .. below + count, the last one not stored if it
    # was the largest: drop an end
    n = below + count + 1 + above
    room_low = (n - 1) // 2 - below
    room_high = below + count - n // 2
    if room_low > room_high:  # drop the lowest (the window is shifted down by one)
        top = v if i == count else largest
        for u in range(count - 1):
            hot[q, _WINDOW + u] = hot[q, _WINDOW + u + 1]
        hot[q, _WINDOW + count - 1] = top
        return count, below + 1, above
    return count, below, above + 1  # the largest (v, or the last slot's old value) is out


@jit(error_model="numpy")
def _holds_median(count, below, above):
    """Whether a median window (``count`` slots, ``below``/``above`` outside) holds the
    middle ranks of its residuals."""
    n = below + count + above
    return below <= (n - 1) // 2 and n // 2 < below + count


@jit(error_model="numpy")
def _rebuild_window(hot, q, n, residuals, column, offset, fresh, size):
    """Refill the median window of pixel ``q`` (``size`` columns of the record ``hot[q]``)
    from its ``n`` residuals (the non-NaN values of ``residuals[:offset, column]`` and of
    the new rows ``fresh[:, q]``), centred on their middle ranks; returns ``(count, below,
    above)``. The residual rows are read without a branch on their values (their loads
    issue together: each is a miss, in a row of its own)."""
    values = np.empty(n + 1)  # (+1: a missing value is written, then overwritten)
    m = 0
    for t in range(offset):
        r = residuals[t, column]
        values[m] = r
        m += not math.isnan(r)
    for t in range(fresh.shape[0]):
        r = fresh[t, q]
        values[m] = r
        m += not math.isnan(r)
    values = np.sort(values[:m])
    count = min(size, m)
    below = min(max((m - 1) // 2 - (size - 1) // 2, 0), m - count)
    for u in range(count):
        hot[q, _WINDOW + u] = values[below + u]
    return count, below, m - below - count


@jit(error_model="numpy")
def _window_median(hot, q, count, below, above):
    """The median of all residuals of pixel ``q`` from a window that holds the middle
    ranks (as :func:`tscube.bfast._cpu._median`: the middle value, or ``0.5 (a + b)``);
    NaN without residuals."""
    n = below + count + above
    if n == 0:
        return np.nan
    lower = hot[q, _WINDOW + (n - 1) // 2 - below]
    upper = hot[q, _WINDOW + n // 2 - below]  # the same slot for an odd count
    return lower if (n & 1) == 1 else 0.5 * (lower + upper)  # both loaded: a select, no branch


#: How far ahead the gather of leaving residuals asks for its loads.
_AHEAD = 24

#: Lanes that the kernels update and put in the result at a time (:func:`_advance_block`
#: then :func:`_result_block`: their records stay in the core's cache between the two),
#: and the parallel kernels' unit of work.
BLOCK = 1024


@jit(parallel=True, nogil=True, error_model="numpy")
def _advance(Y, X, index, offset, pixel0, fitted_status, codes, beta, sigma, n_history, history_begin, h, critval,
             cusum, tail, residuals, fresh, count_valid, inf_added, hot, time, alert_from, out):
    """Run the monitoring of every lane over the new dates ``Y`` (time indices ``index``,
    design rows ``X``; their residuals go to ``fresh``, ``(T, lanes)``: the residual rows
    from ``offset`` on, after ``residuals[:offset]``): residuals, the MOSUM window, the
    process (OLS-MOSUM, or OLS-CUSUM if ``cusum``) and its running statistics, the first
    boundary crossing, the median window and the magnitude. Fitted lanes get residuals
    and a magnitude, monitored ones (fitted, sigma > 0) the process: the kinds of each
    ``fitted_status`` in ``codes`` (:data:`_CODE_KINDS`). Counts the valid new values of
    every lane in ``n_monitor`` (and in ``n_valid`` if ``count_valid``; ``inf_added``:
    the infinite ones, per lane, or empty for none). O(1) per lane and date, but for a
    rebuilt median window.

    Lane ``p`` (column ``p`` of ``Y``) is row ``p`` of the records ``hot``
    (:data:`HOT_SCALARS`), updated in place, and pixel ``q = pixel0 + p`` of the fit's
    arrays (``fitted_status``, ``beta``, ``sigma``, ``n_history``, ``history_begin``,
    ``tail``) and of ``residuals``, and column ``p`` of ``fresh`` (NaN where a lane has no
    residual: the caller's fill).

    ``out``: the arrays of :data:`RESULT_OUTPUTS` over the lanes, where the result of each
    lane goes as it is updated (on the time axis ``time``: ``alert`` where its break index
    is ``alert_from`` or later; ``changes``, :data:`CHANGED_STATUS` ... bits of what differs
    from the result before), or arrays of size 0 for no result.

    Blocks of :data:`BLOCK` lanes on every core; :func:`_advance_serial` is the same on the
    calling thread."""
    for block in prange((Y.shape[1] + BLOCK - 1) // BLOCK):
        first = block * BLOCK
        stop = min(first + BLOCK, Y.shape[1])
        _advance_block(first, stop, Y, X, index, offset, pixel0, fitted_status, codes, beta, sigma, n_history, h,
                       critval, cusum, tail, residuals, fresh, count_valid, inf_added, hot, out[14])
        if out[0].size:
            _result_block(first, stop, pixel0, fitted_status, hot, n_history, history_begin, sigma, time,
                          beta.shape[0], codes, alert_from, out)


@jit(nogil=True, error_model="numpy")
def _advance_serial(Y, X, index, offset, pixel0, fitted_status, codes, beta, sigma, n_history, history_begin, h,
                    critval, cusum, tail, residuals, fresh, count_valid, inf_added, hot, time, alert_from, out):
    """:func:`_advance` on the calling thread alone, for a band of lanes updated on a thread
    of its own (:func:`tscube.bfast._nrt_store.update_files`)."""
    for first in range(0, Y.shape[1], BLOCK):
        stop = min(first + BLOCK, Y.shape[1])
        _advance_block(first, stop, Y, X, index, offset, pixel0, fitted_status, codes, beta, sigma, n_history, h,
                       critval, cusum, tail, residuals, fresh, count_valid, inf_added, hot, out[14])
        if out[0].size:
            _result_block(first, stop, pixel0, fitted_status, hot, n_history, history_begin, sigma, time,
                          beta.shape[0], codes, alert_from, out)


@jit(nogil=True, error_model="numpy")
def _advance_block(first, stop, Y, X, index, offset, pixel0, fitted_status, codes, beta, sigma, n_history, h, critval,
                   cusum, tail, residuals, fresh, count_valid, inf_added, hot, changes):
    """Lanes ``first`` to ``stop`` of :func:`_advance`, their records and residuals (and the
    bits of ``changes``, when it is not empty). Lanes without a new value keep their record
    untouched; the others go through three loops: which windows move, the residuals that
    leave them (scattered loads, issued without branches on their values), then the
    update. The lanes' work is written out here, with no call that takes arrays per lane
    but the median window's: numba counts references to every array a call or a tuple
    passes, which costs more than a lane's arithmetic."""
    T = Y.shape[0]
    k = beta.shape[0]
    ints = hot.view(np.int32)  # the records' integers
    flat_bound = critval * math.sqrt(2.0)  # logPlus(t / n) = 1 while t / n <= e
    if changes.size:
        changes[first:stop] = 0
    # the lanes with a new value or a new infinite one (the records of the others stay as
    # they are), compacted without a branch
    active = np.empty(stop - first, dtype=np.int64)
    n_active = 0
    for p in range(first, stop):
        new_values = 0
        for i in range(T):
            new_values += not math.isnan(Y[i, p])
        active[n_active] = p
        n_active += (new_values > 0) | (inf_added.size > 0 and inf_added[p] > 0)
    # the residual that leaves the MOSUM window with each lane's first new value is in its
    # record; the one after it (the next to leave) is the first valid residual after row
    # ``oldest``: loads scattered over the residual rows (a miss each, in a page of its own),
    # asked for _AHEAD lanes ahead and issued in a loop without branches on their values,
    # then the rows after a missing one scanned, the same way
    gathers = np.empty(n_active, dtype=np.int64)  # active indices whose window moves
    n_gathers = 0
    for a in range(n_active):
        p = active[a]
        q = pixel0 + p
        m = np.int64(ints[p, _N_MONITOR])
        w = int(math.floor(h * n_history[q]))
        valid = False
        for i in range(T):
            valid |= not math.isnan(Y[i, p])
        gathers[n_gathers] = a
        n_gathers += codes[1, fitted_status[q]] and w > 0 and m >= w and valid
    next_value = np.empty(n_active)  # NaN: missing, to be scanned past
    next_row = np.full(n_active, -1, dtype=np.int64)  # offset: none among the old rows (the new value's)
    for g in range(n_gathers):
        if g + _AHEAD < n_gathers:  # the load _AHEAD lanes on, asked for now
            ahead = active[gathers[g + _AHEAD]]
            row = np.int64(ints[ahead, _LEAVING]) + 1
            if row < offset:
                prefetch_row(residuals, row, pixel0 + ahead)
        a = gathers[g]
        q = pixel0 + active[a]
        row = np.int64(ints[active[a], _LEAVING]) + 1
        next_value[a] = residuals[row, q] if row < offset else 0.0
        next_row[a] = min(row, offset)
    n_missing = 0  # the gathers that found a missing value, compacted (their scans go on)
    for g in range(n_gathers):
        gathers[n_missing] = gathers[g]
        n_missing += math.isnan(next_value[gathers[g]])
    for g in range(n_missing):
        if g + _AHEAD < n_missing:
            ahead = gathers[g + _AHEAD]
            if next_row[ahead] + 1 < offset:
                prefetch_row(residuals, next_row[ahead] + 1, pixel0 + active[ahead])
        a = gathers[g]
        q = pixel0 + active[a]
        row = next_row[a] + 1
        while row < offset and math.isnan(residuals[row, q]):
            row += 1
        next_row[a] = row
        next_value[a] = residuals[row, q] if row < offset else 0.0
    for a in range(n_active):
        p = active[a]
        q = pixel0 + p
        count = np.int64(ints[p, _N_MONITOR])
        n_valid = np.int64(ints[p, _N_VALID])
        n_inf = np.int64(ints[p, _N_INF])
        old = (count, n_valid, n_inf, np.int64(ints[p, _BREAK_INDEX]))
        wsum = hot[p, _WINDOW_SUM]
        rsum = hot[p, _RESIDUAL_SUM]
        predicted = hot[p, _FITTED_SUM]
        total = hot[p, _PROCESS_SUM]
        biggest = hot[p, _STATISTIC]
        first_break = old[3]
        oldest = np.int64(ints[p, _LEAVING])
        leaving = hot[p, _LEAVING_VALUE]
        filled = np.int64(ints[p, _MEDIAN_COUNT])
        below = np.int64(ints[p, _MEDIAN_BELOW])
        above = np.int64(ints[p, _MEDIAN_ABOVE])
        new_values = 0
        for i in range(T):
            new_values += not math.isnan(Y[i, p])
        if count_valid:
            n_valid += new_values
        if inf_added.size:
            n_inf += inf_added[p]
        kind = fitted_status[q]
        monitored = codes[1, kind]
        n = n_history[q]
        if not codes[0, kind]:
            count += new_values
        else:
            w = int(math.floor(h * n))
            seen = False
            for i in range(T):
                y = Y[i, p]
                if math.isnan(y):
                    continue
                seen = True
                r = y
                for c in range(k):  # as _residual, from the lane's coefficients in place
                    r -= X[i, c] * beta[c, q]
                row = offset + i
                fresh[i, p] = r
                predicted += y - r
                rsum += r
                filled, below, above = _window_insert(r, hot, p, filled, below, above, MEDIAN_WINDOW)
                m = count  # r is the m-th monitoring residual (0-based), n + m from the history start
                count += 1
                if m == 0:  # the first to leave the window, once w residuals have come
                    oldest = row
                    leaving = r
                if not monitored:
                    continue
                scale = 1.0 / (sigma[q] * math.sqrt(n))
                if m < w:  # the residual leaving the window: a history one ...
                    out_value = tail[m, q]
                elif w == 0:
                    out_value = r
                else:  # ... or the monitoring residual m - w, at row ``oldest``; the next after it:
                    out_value = leaving
                    if next_row[a] >= 0:  # gathered (offset: no old row, the new value)
                        oldest = next_row[a] if next_row[a] < offset else row
                        leaving = next_value[a] if next_row[a] < offset else r
                        next_row[a] = -1
                    else:  # scanned, among the old rows or the new ones
                        oldest += 1
                        leaving = residuals[oldest, q] if oldest < offset else fresh[oldest - offset, p]
                        while math.isnan(leaving):
                            oldest += 1
                            leaving = residuals[oldest, q] if oldest < offset else fresh[oldest - offset, p]
                wsum += r - out_value
                value = (rsum if cusum else wsum) * scale
                total += value
                size = abs(value)
                if size > biggest:
                    biggest = size
                if first_break >= 0 or not (cusum or size > flat_bound):  # the log only when needed
                    continue
                if size > process_bound((n + m + 1) / n, critval, cusum):  # t from the history start
                    first_break = index[i]
            if seen:
                if not _holds_median(filled, below, above):
                    filled, below, above = _rebuild_window(hot, p, filled + below + above, residuals, q, offset,
                                                           fresh, MEDIAN_WINDOW)
        ints[p, _N_MONITOR] = count
        ints[p, _N_VALID] = n_valid
        ints[p, _N_INF] = n_inf
        hot[p, _WINDOW_SUM] = wsum
        hot[p, _RESIDUAL_SUM] = rsum
        hot[p, _FITTED_SUM] = predicted
        hot[p, _PROCESS_SUM] = total
        hot[p, _STATISTIC] = biggest
        ints[p, _BREAK_INDEX] = first_break
        ints[p, _LEAVING] = oldest
        hot[p, _LEAVING_VALUE] = leaving
        ints[p, _MEDIAN_COUNT] = filled
        ints[p, _MEDIAN_BELOW] = below
        ints[p, _MEDIAN_ABOVE] = above
        if changes.size:
            changes[p] = (CHANGED_STATUS * (((old[1] == 0) != (n_valid == 0)) or ((old[0] == 0) != (count == 0)))
                          + CHANGED_BREAK * (old[3] != first_break) + CHANGED_INF * (old[2] != n_inf))


@jit(nogil=True, error_model="numpy")
def _result_block(first, stop, pixel0, fitted_status, hot, n_history, history_begin, sigma, time, k, codes,
                  alert_from, out, at=0):
    """The result of lanes ``first`` to ``stop`` into ``out`` (the arrays of
    :data:`RESULT_OUTPUTS`, ``changes`` not written; ``alert`` where it is not empty: the
    break index is ``alert_from`` or later) from their records ``hot`` and the fit's
    arrays (pixel ``pixel0 + p`` for lane ``p``, element ``at + p`` of ``out``) on the time
    axis ``time``. The status is the fit's, or no monitoring data, or all missing; the
    outputs that it gives (``codes[0]``: fitted codes, ``codes[1]``: monitored ones), NaN /
    -1 elsewhere."""
    nan = np.nan
    ints = hot.view(np.int32)  # the records' integers
    (status, break_index_out, break_time, history_start, sigma_out, magnitude_out, statistic_out, mosum_mean, rmse,
     relative_magnitude, n_valid_out, n_monitor_out, n_inf_out, alert, _) = out
    for lane in range(first, stop):
        p = lane + at  # the outputs' element; the record's row is ``lane``
        q = pixel0 + lane
        n_valid = np.int64(ints[lane, _N_VALID])
        n_monitor = np.int64(ints[lane, _N_MONITOR])
        break_index = np.int64(ints[lane, _BREAK_INDEX])
        n_valid_out[p] = n_valid
        n_monitor_out[p] = n_monitor
        n_inf_out[p] = np.int64(ints[lane, _N_INF])
        if alert.size:
            alert[p] = break_index >= alert_from
        code = fitted_status[q]
        if codes[0, code] and n_monitor == 0:
            code = np.uint8(_NO_MONITORING_DATA)
        if n_valid == 0:
            code = np.uint8(_ALL_MISSING)
        status[p] = np.int8(code)
        monitored = codes[1, code]
        broke = monitored and break_index >= 0
        break_index_out[p] = break_index if broke else -1
        break_time[p] = time[break_index] if broke else nan
        begin = history_begin[q]
        history_start[p] = time[begin] if begin >= 0 else nan
        statistic_out[p] = hot[lane, _STATISTIC] if monitored else nan
        mosum_mean[p] = hot[lane, _PROCESS_SUM] / n_monitor if monitored else nan
        if not (monitored or code == _PERFECT_FIT):
            sigma_out[p] = magnitude_out[p] = rmse[p] = relative_magnitude[p] = nan
            continue
        s = sigma[q]
        n = n_history[q]
        magnitude = _window_median(hot, lane, np.int64(ints[lane, _MEDIAN_COUNT]), np.int64(ints[lane, _MEDIAN_BELOW]),
                                   np.int64(ints[lane, _MEDIAN_ABOVE]))
        sigma_out[p] = s
        magnitude_out[p] = magnitude
        rmse[p] = math.sqrt(s * s * (n - k) / n)  # s * s: the bits of numpy's sigma ** 2
        expected = hot[lane, _FITTED_SUM] / n_monitor
        relative_magnitude[p] = magnitude / expected if expected != 0 else nan


#: Lanes whose records :func:`update_band_files` reads, updates and writes at a time (1
#: MiB of records, with their residuals and result: they stay in a core's L2 cache from
#: the read to the write, where a whole band's records went back and forth to memory
#: three times).
RECORD_LANES = 4096


@jit(nogil=True, error_model="numpy")
def update_band_files(values, nodata, has_nodata, begin, end, X, index, offset, fitted_status, codes, beta, sigma,
                      n_history, history_begin, h, critval, cusum, tail, residuals, time, alert_from, out, record,
                      source, source_at, target, target_at, residual_file, residual_at, n_pixels, tally):
    """Update the pixels ``begin`` to ``end`` of a saved state
    (:func:`tscube.bfast._nrt_store.update_files`) with the new images ``values`` ``(T, P)``
    (any numeric dtype; ``nodata`` as :func:`tscube.bfast.plan.kernel_nodata` gives it),
    :data:`RECORD_LANES` at a time: their records are read from the committed slot (file
    ``source``, records from byte ``source_at``) into the thread's buffer ``record``,
    updated by :func:`_advance_block` (their result goes into ``out``, the band's outputs
    from element 0, on the way) and written to the other slot (``target``, from byte
    ``target_at``); their new residuals go to ``residual_file`` (row ``i`` of the new dates
    from byte ``residual_at + 8 i n_pixels``). The fit's arrays and the committed
    ``residuals`` are indexed by pixel. Counts the band's statuses (``tally[code byte]``),
    breaks (``tally[256]``) and alerts (``tally[257]``). Returns 0, or -1 where a record
    could not be read, -2 where a write failed."""
    T = values.shape[0]
    width = record.shape[1] * 8
    for first in range(begin, end, RECORD_LANES):
        stop = min(end, first + RECORD_LANES)
        lanes = stop - first
        hot = record[:lanes]
        if not read_exactly(source, hot, source_at + first * width):
            return -1
        Y = np.empty((T, lanes))
        inf_added = np.zeros(lanes, dtype=np.int32)
        if not _lanes_of(values, first, stop, nodata, has_nodata, Y, inf_added):
            inf_added = inf_added[:0]
        fresh = np.full((T, lanes), np.nan)
        changes = out[14][first - begin:stop - begin]
        for block in range(0, lanes, BLOCK):
            last = min(lanes, block + BLOCK)
            _advance_block(block, last, Y, X, index, offset, first, fitted_status, codes, beta, sigma, n_history, h,
                           critval, cusum, tail, residuals, fresh, True, inf_added, hot, changes)
            _result_block(block, last, first, fitted_status, hot, n_history, history_begin, sigma, time,
                          beta.shape[0], codes, alert_from, out, first - begin)
        for p in range(first - begin, stop - begin):
            tally[np.uint8(out[0][p])] += 1
            tally[256] += out[1][p] >= 0
            tally[257] += out[13][p]
        if not write_exactly(target, hot, target_at + first * width):
            return -2
        for i in range(T):
            if not write_exactly(residual_file, fresh[i], residual_at + (i * n_pixels + first) * 8):
                return -2
    return 0


# --------------------------------------------------------------------------------------
# the state


def _design_rows(axis, rows, model: dict) -> np.ndarray:
    """Design rows of the time indices ``rows`` of ``axis``, in the parametrisation of the
    fit (the trend column centred and scaled as at fit time, whatever the dates now)."""
    design = build_design(axis, model["order"], bool(model["trend"]), **_season(model))
    X = np.array(design.matrix[rows], dtype=np.float64)
    if "trend" in design.names:
        X[:, design.names.index("trend")] = (axis.trend[rows] - model["trend_centre"]) / model["trend_scale"]
    return np.ascontiguousarray(X)


def _season(model: dict) -> dict:
    return {"season": True} if model.get("season") else {}


def _as_lanes(values: np.ndarray, nodata) -> tuple[np.ndarray, np.ndarray]:
    """``(T, P)`` float64 with NaN for every missing value, and the infinite values per
    lane (:data:`_NO_INF` for none)."""
    missing, is_inf = invalid_mask(values, nodata)
    Y = values.astype(np.float64)
    Y[missing] = np.nan
    return Y, is_inf.sum(axis=0, dtype=np.int32) if is_inf.any() else _NO_INF


@jit(nogil=True, error_model="numpy")
def _lanes_of(values, first, stop, nodata, has_nodata, Y, inf_added):
    """Pixels ``first`` to ``stop`` of the new images ``values`` ``(T, P)`` (any numeric
    dtype) into ``Y`` ``(T, stop - first)`` as float64, NaN where missing (NaN, inf, or
    ``nodata`` as :func:`tscube.bfast.plan.kernel_nodata` gives it, when ``has_nodata``),
    and their infinite values per lane into ``inf_added``: :func:`_as_lanes` in a kernel.
    Returns whether any value was infinite."""
    any_inf = False
    for i in range(values.shape[0]):
        for p in range(stop - first):
            v = np.float64(values[i, first + p])
            if math.isinf(v):
                inf_added[p] += 1
                any_inf = True
                v = np.nan
            elif has_nodata and v == nodata:
                v = np.nan
            Y[i, p] = v
    return any_inf


def _empty_state(n_pixels: int, k: int, window: int, n_monitor_dates: int) -> dict[str, np.ndarray]:
    shapes = {"coefficients": (k, n_pixels), "tail": (window, n_pixels), "residuals": (n_monitor_dates, n_pixels)}
    state = {}
    for name in STATIC + ("residuals",):
        dtype = STATE_FIELDS[name]
        fill = -1 if name == "history_begin" else (0 if np.issubdtype(dtype, np.integer) else np.nan)
        state[name] = np.full(shapes.get(name, (n_pixels,)), fill, dtype=dtype)
    hot = np.zeros((n_pixels, HOT_WIDTH))
    hot.view(np.int32)[:, [_LEAVING, _BREAK_INDEX]] = -1
    hot[:, _LEAVING_VALUE] = np.nan
    hot[:, _WINDOW:] = np.nan
    return with_hot(state, hot)


def _hot_views(hot: np.ndarray) -> dict[str, np.ndarray]:
    """The state arrays of :data:`HOT` as views of the record ``hot`` (float64, int32 for
    :data:`HOT_INTS`)."""
    ints = hot.view(np.int32)
    views = {name: hot[:, column] for column, name in enumerate(HOT_FLOATS)}
    views.update({name: ints[:, _N_MONITOR + column] for column, name in enumerate(HOT_INTS)})
    views["median_window"] = hot[:, _WINDOW:].T
    return views


def with_hot(state: dict, hot: np.ndarray) -> dict[str, np.ndarray]:
    """``state`` (its arrays but those of the record) with the record ``hot`` and its views."""
    state = {name: array for name, array in state.items() if name not in HOT}
    state["hot"] = hot
    state.update(_hot_views(hot))
    return state


def hot_record(get, n_pixels: int, out: np.ndarray | None = None) -> np.ndarray:
    """The record of the arrays ``get(name)`` of :data:`HOT` (into ``out`` when given)."""
    hot = np.zeros((n_pixels, HOT_WIDTH)) if out is None else out
    for name, view in _hot_views(hot).items():
        view[...] = get(name)
    return hot


def state_part(state: dict, pixels: slice) -> dict[str, np.ndarray]:
    """The state of the pixels ``pixels`` (views), without the residuals."""
    return with_hot({name: state[name][..., pixels] for name in STATIC}, state["hot"][pixels])


def fit_state(values: np.ndarray, dates, start, *, engine: str = "auto", **params) -> tuple[dict, dict]:
    """The monitoring state of the pixels ``values`` ``(T, P)`` after the dates ``dates``.

    Runs :func:`tscube.bfast_monitor` (any engine) for the per-pixel history selection,
    refits each selected history (float64 normal equations, the engines' equilibrated
    Cholesky) and monitors the dates from ``start`` on with the update kernel. Returns
    ``(state, model)``: the arrays of :data:`STATE_FIELDS` and the shared parameters.
    """
    from .monitor import bfast_monitor

    if isinstance(start, (list, np.ndarray)) and not isinstance(start, str):
        raise ValueError("a monitoring state holds one start: pass a single start (not a list)")
    if params.get("return_process"):
        raise ValueError("return_process is not available for a monitoring state")
    params.pop("return_process", None)
    first = bfast_monitor(values, dates, start, engine=engine, **params)
    attrs = first.attrs
    freq = params.get("freq")
    axis = build_time_axis(dates, freq)
    design = build_design(axis, attrs["order"], attrs["trend"], **_season(attrs))
    start_time = float(attrs["start"])
    begin = int(np.searchsorted(axis.time, start_time - TIME_TOL))
    h = float(attrs["h"])
    model = {
        "start": start_time, "order": int(attrs["order"]), "trend": bool(attrs["trend"]),
        "season": bool(attrs.get("season", False)), "type": attrs.get("type", "OLS-MOSUM"), "h": h,
        "level": list(attrs["level"]), "end": attrs["end"],
        "critval": float(attrs["critval"]), "history": attrs["history"], "freq": freq,
        "nodata": params.get("nodata"), "engine": attrs["engine"], "regressors": list(design.names),
        "trend_centre": float(design.trend_centre), "trend_scale": float(design.trend_scale),
        "window_slots": max(int(math.floor(h * begin)), 1),
    }
    options = sorted(key for key in params if key not in MODEL_PARAMS)
    model.update({key: params[key] for key in options}, options=options)
    Y, _ = _as_lanes(values, model["nodata"])
    n_pixels = Y.shape[1]
    k = design.k
    state = _empty_state(n_pixels, k, model["window_slots"], Y.shape[0] - begin)

    status = first.status
    for name in ("n_history", "n_valid", "n_inf"):
        state[name][:] = getattr(first, name)
    has_history = np.isfinite(first.history_start)
    state["history_begin"][has_history] = np.searchsorted(axis.time, first.history_start[has_history] - TIME_TOL)
    fitted = status.copy()
    fitted[status == BfastStatus.ALL_MISSING] = BfastStatus.TOO_FEW_HISTORY  # what later data would make it
    unmonitored = status == BfastStatus.NO_MONITORING_DATA
    fitted[unmonitored] = BfastStatus.OK
    fit = np.isin(fitted, _FITTED_CODES)

    singular = np.zeros(n_pixels, dtype=np.bool_)
    perfect = np.zeros(n_pixels, dtype=np.bool_)
    levels, all_levels = design.kernel_levels()
    _fit_history(Y, design.matrix, levels, all_levels, np.maximum(state["history_begin"], 0), begin, fit, h,
                 state["coefficients"], state["sigma"], state["tail"], state["hot"], singular, perfect)
    # pixels without monitoring data: the engine stopped before the checks a fit makes
    fitted[unmonitored & singular] = BfastStatus.SINGULAR_DESIGN
    fitted[unmonitored & perfect & ~singular] = BfastStatus.PERFECT_FIT
    flag_pixels = np.flatnonzero(unmonitored & (fitted == BfastStatus.OK))
    if flag_pixels.size and attrs["history"] in ("ROC", "BP"):
        fitted[flag_pixels[_history_flags(values[:, flag_pixels], axis, design, begin, model)]] = (
            BfastStatus.BP_TOO_SHORT if attrs["history"] == "BP" else BfastStatus.ROC_NO_CROSSING)
    state["fitted_status"][:] = fitted
    rows = np.arange(begin, Y.shape[0])
    _advance_state(state, Y[begin:], rows, design.matrix[begin:], model)
    return state, model


def _history_flags(values, axis, design, begin, model) -> np.ndarray:
    """Whether the history selection of these pixels (all without monitoring data) is
    flagged (ROC_NO_CROSSING, BP_TOO_SHORT): the engines report it only for monitored
    pixels, so the cpu history kernel selects their histories once more."""
    from . import _cpu_history
    from .history import ROC_LAMBDA_05
    from .plan import MonitorPlan

    plan = MonitorPlan(axis=axis, design=design, starts=np.array([model["start"]]),
                       monitor_begin=np.array([begin], dtype=np.int64), history=model["history"], history_begin=0,
                       process_type=model["type"], h=model["h"], critval=model["critval"],
                       level_roc=float(model["level"][1]), roc_lambda=ROC_LAMBDA_05, nodata=model["nodata"],
                       return_process=False)
    _, flagged = _cpu_history.history_first(np.ascontiguousarray(values), plan)
    return flagged[0]


def _advance_state(state: dict, Y: np.ndarray, rows: np.ndarray, X: np.ndarray, model: dict, pixel0: int = 0,
                   count_valid: bool = False, inf_added: np.ndarray = _NO_INF, result: tuple = (),
                   serial: bool = False, fresh: np.ndarray | None = None) -> None:
    """Monitor the new rows ``Y`` (time indices ``rows``, design ``X``) into ``state``, in
    place; their residuals go to the last ``len(Y)`` rows of ``state["residuals"]`` (NaN),
    or to ``fresh`` (``len(Y)`` rows of NaN, a column per lane) when given, after all the
    rows of ``state["residuals"]``. The fit's arrays of ``state`` and its residual rows
    may cover more pixels than ``Y``: their columns from ``pixel0`` on are the lanes of
    ``Y`` (a band of a saved state, with ``fresh``), the others are left alone; its
    records ``hot`` have a row per lane, updated in place; ``count_valid``,
    ``inf_added``: see :func:`_advance`; ``result``: ``(time, alert_from, out)``, the
    lanes' result computed on the way (``out``: a dict of :func:`result_buffers`);
    ``serial``: on the calling thread alone (:func:`_advance_serial`), else on every core."""
    residuals = state["residuals"]
    if fresh is None:
        fresh = residuals[residuals.shape[0] - Y.shape[0]:]
        residuals = residuals[:residuals.shape[0] - Y.shape[0]]
    time, alert_from, out = result if result else (_NO_TIME, 0, None)
    kernel = _advance_serial if serial else _advance
    kernel(Y, X, rows.astype(np.int64), residuals.shape[0], pixel0, state["fitted_status"].view(np.uint8),
           _CODE_KINDS, state["coefficients"], state["sigma"], state["n_history"], state["history_begin"], model["h"],
           model["critval"], model["type"] == "OLS-CUSUM", state["tail"], residuals, fresh, count_valid, inf_added,
           state["hot"], time, alert_from, _NO_RESULT if out is None else tuple(out[name] for name in RESULT_OUTPUTS))


def _more_rows(rows: np.ndarray, extra: int) -> np.ndarray:
    """``rows`` ``(M, P)`` followed by ``extra`` rows of NaN. The rows live at the start of
    a buffer with spare capacity (it doubles when full), so an update does not copy the
    residuals of every earlier date: the result is a longer view of the same buffer when
    it has room."""
    M, P = rows.shape
    base = rows.base
    if (isinstance(base, np.ndarray) and base.ndim == 2 and base.shape[1] == P and base.shape[0] >= M + extra
            and base.flags.c_contiguous and rows.__array_interface__["data"][0] == base.__array_interface__["data"][0]):
        grown = base[:M + extra]
    else:  # NaN-filled now: the pages of the spare rows are touched once, not by each update
        buffer = np.full((max(2 * M, M + extra, 16), P), np.nan, dtype=rows.dtype)
        buffer[:M] = rows
        grown = buffer[:M + extra]
    grown[M:] = np.nan
    return grown


def update_state(state: dict, model: dict, dates, values: np.ndarray, new_dates) -> dict:
    """The state after the new images ``values`` ``(T_new, P)`` at ``new_dates``.

    ``dates`` are all the dates the state has seen; ``new_dates`` must all be later.
    The per-pixel arrays of ``state`` are updated in place (no copy of the state); the
    residual store grows (into its buffer's spare rows), so the returned state holds a new
    ``residuals`` array.
    """
    n_new = len(_join_dates(dates, new_dates)) - len(dates)  # refuses dates that are not later
    new = dict(state, residuals=_more_rows(state["residuals"], n_new))
    monitor_new_dates(new, model, dates, values, new_dates)
    return new


def monitor_new_dates(state: dict, model: dict, dates, values: np.ndarray, new_dates) -> None:
    """Monitor the new images ``values`` ``(T_new, P)`` at ``new_dates`` into ``state``, in
    place; ``state["residuals"]`` already ends with ``T_new`` rows of NaN for them."""
    _, _, rows, X = new_design(model, dates, new_dates)
    Y, inf_added = _as_lanes(values, model["nodata"])
    _advance_state(state, Y, rows, X, model, count_valid=True, inf_added=inf_added)


def new_design(model: dict, dates, new_dates) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(all_dates, time, rows, X)`` of new dates: all the dates (refused unless the new
    ones are later, :func:`_join_dates`), their time axis, the new dates' time indices and
    design rows (in the fit's parametrisation)."""
    all_dates = _join_dates(dates, new_dates)
    axis = build_time_axis(all_dates, model["freq"])
    rows = np.arange(len(dates), len(all_dates))
    return all_dates, axis.time, rows, _design_rows(axis, rows, model)


def _join_dates(dates, new_dates):
    """``dates`` followed by ``new_dates``, refused unless every new date is later than the last one."""
    dates = np.asarray(dates)
    new_dates = np.asarray(new_dates)
    if len(new_dates) == 0:
        return dates
    datetime_old = np.issubdtype(dates.dtype, np.datetime64)
    if datetime_old:
        import pandas as pd

        new_dates = np.asarray(pd.to_datetime(new_dates), dtype=dates.dtype)
    elif not np.issubdtype(new_dates.dtype, np.number):
        raise TypeError("the state was fitted on decimal years: new dates must be decimal years too")
    if not np.all(new_dates[1:] > new_dates[:-1]):
        raise ValueError("new dates must be strictly increasing")
    if not new_dates[0] > dates[-1]:
        raise ValueError(f"new date {new_dates[0]} is not after the last monitored date {dates[-1]}: "
                         "a state only takes images newer than the last one")
    return np.concatenate([dates, new_dates])


def state_result(state: dict, model: dict, dates, out: dict | None = None,
                 time: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The outputs of :func:`tscube.bfast_monitor` (flat, by name) that the state stands for
    (into the arrays of ``out`` when given: one per output, shaped as the state's lanes,
    ``n_history`` optional; ``time``: the time axis of ``dates``, when the caller has it).

    Every output of ``OUTPUT_DTYPES`` needs a line in :func:`_result_block` (one added
    there stays NaN until it has one; the equality tests compare every output with the
    full run)."""
    time = build_time_axis(dates, model["freq"]).time if time is None else time
    fitted_status = state["fitted_status"]
    if out is None:
        out = {name: array[0] for name, array in empty_outputs(1, fitted_status.shape[0]).items()}
    if "n_history" in out:
        out["n_history"][...] = state["n_history"]
    lanes = tuple(out[name] for name in RESULT_OUTPUTS[:13]) + _NO_RESULT[13:]
    _result_lanes(fitted_status.view(np.uint8), state["hot"], state["n_history"], state["history_begin"],
                  state["sigma"], time, state["coefficients"].shape[0], _CODE_KINDS, lanes)
    return out


@jit(parallel=True)
def _result_lanes(fitted_status, hot, n_history, history_begin, sigma, time, k, codes, out):
    """The result of every lane from its record ``hot[p]`` (:func:`_result_block`), in blocks
    of :data:`BLOCK` lanes on every core."""
    for block in prange((hot.shape[0] + BLOCK - 1) // BLOCK):
        _result_block(block * BLOCK, min(block * BLOCK + BLOCK, hot.shape[0]), 0, fitted_status, hot, n_history,
                      history_begin, sigma, time, k, codes, 0, out)


def result_buffers(n_pixels: int) -> dict[str, np.ndarray]:
    """Arrays for the result of ``n_pixels`` lanes, by the names of :data:`RESULT_OUTPUTS`."""
    dtypes = dict(OUTPUT_DTYPES, alert=np.bool_, changes=np.uint8)
    return {name: np.empty(n_pixels, dtype=dtypes[name]) for name in RESULT_OUTPUTS}


#: ``out`` and ``time`` of :func:`_advance` for no result.
_NO_RESULT = tuple(result_buffers(0).values())
_NO_TIME = np.zeros(0)


# --------------------------------------------------------------------------------------
# the state as an xarray.Dataset (what is saved)

#: Extra dimension of each multi-row state array.
_STATE_DIMS = {"coefficients": "coefficient", "tail": "window_slot", "median_window": "median_slot",
               "residuals": "monitor_time"}
#: Prefix of the state variables in a saved dataset (the others are the result and ``alert``).
STATE_PREFIX = "state_"
#: Dataset attribute: how many dates the last fit or update brought (what ``alert`` is about).
LAST_UPDATE_ATTR = "tscube_last_update_dates"


def _normalise_dates(dates) -> np.ndarray:
    """Dates as ``datetime64[ns]`` or float64 decimal years."""
    import pandas as pd

    from ..xarray_blocks import _datetime_like

    if _datetime_like(dates):
        return np.asarray(pd.DatetimeIndex(pd.to_datetime(dates)).values, dtype="datetime64[ns]")
    return np.asarray(dates, dtype=np.float64)


def state_variables(state: dict, model: dict, dates, alert: np.ndarray) -> dict[str, tuple[tuple, np.ndarray]]:
    """Every variable of a saved state over flat pixel lanes: name -> (extra dims, array
    ``(*extra sizes, P)``): the outputs of :func:`state_result`, ``alert`` and the state
    arrays (prefixed :data:`STATE_PREFIX`)."""
    variables = {name: ((), array) for name, array in state_result(state, model, dates).items()}
    variables["alert"] = ((), np.asarray(alert, dtype=np.bool_))
    for name, dtype in STATE_FIELDS.items():  # the record's columns in their own types
        array = np.ascontiguousarray(state[name], dtype=dtype) if name in HOT else state[name]
        variables[STATE_PREFIX + name] = ((_STATE_DIMS[name],) if name in _STATE_DIMS else (), array)
    return variables


def state_attrs(model: dict) -> dict:
    """Dataset attributes of a saved state: the model (JSON, read back by
    :func:`state_from_dataset`) and the attributes of a ``bfast_monitor`` result."""
    import json

    from ..xarray_blocks import serialisable_attrs

    attrs = dict(tscube_function="bfast_monitor", tscube_state_version=STATE_VERSION,
                 tscube_state_model=json.dumps(model, sort_keys=True),
                 **{key: model[key] for key in ("start", "order", "trend", "season", "type", "h", "level", "end",
                                                "critval", "history", "freq", "engine", "regressors")})
    return serialisable_attrs(attrs)


def variable_attrs(name: str) -> dict:
    """CF-style attributes of a state dataset's variable."""
    from ._xarray import _BFAST_VARIABLE_ATTRS

    if name == "alert":
        return {"long_name": "first break among the dates of the last update (or of the fit)"}
    return dict(_BFAST_VARIABLE_ATTRS.get(name, {}))


def store_uncompressed(ds):
    """Store every variable of ``ds`` without compression (in place): residuals of noisy
    data hardly compress (~4 %), while compressing them costs ~9x the write and ~5x the
    read, and an update rewrites the result in place."""
    for variable in ds.data_vars.values():
        variable.encoding["compressors"] = ()
    return ds


#: Bytes of a chunk of a saved result (:func:`_strip_chunks`).
RESULT_CHUNK_BYTES = 1 << 21


def _strip_chunks(ds):
    """Chunk every variable of ``ds`` (in place) in strips of whole rows of the grid, ~2 MiB
    each: an update writes its result band by band of whole rows, and a band's part of a
    strip is contiguous in its chunk file (one write; with narrower chunks each chunk's
    part of a band is gathered first)."""
    for variable in ds.data_vars.values():
        if variable.ndim:
            rest = int(np.prod(variable.shape[1:], dtype=np.int64))
            rows = max(1, RESULT_CHUNK_BYTES // max(rest * variable.dtype.itemsize, 1))
            variable.encoding["chunks"] = (max(1, min(rows, variable.shape[0])),) + tuple(variable.shape[1:])
    return ds


def state_dataset(state: dict, model: dict, dates, alert: np.ndarray, pixel_dims, pixel_coords):
    """The state, its result and the ``alert`` map as one :class:`xarray.Dataset` over the
    pixel dims (``pixel_coords``: a coordinate for each pixel dim)."""
    import xarray as xr

    pixel_dims = tuple(pixel_dims)
    pixel_shape = tuple(len(pixel_coords[d]) for d in pixel_dims)
    dates = _normalise_dates(dates)
    variables = {}
    for name, (lead, array) in state_variables(state, model, dates, alert).items():
        variables[name] = (lead + pixel_dims, array.reshape(array.shape[:len(lead)] + pixel_shape), variable_attrs(name))
    begin = len(dates) - state["residuals"].shape[0]
    coords = {"date": dates, "monitor_time": dates[begin:]}  # regressor names: attrs["regressors"]
    coords.update({d: pixel_coords[d] for d in pixel_dims})
    return store_uncompressed(xr.Dataset(variables, coords=coords, attrs=state_attrs(model)))


def model_from_attrs(attrs) -> dict:
    """The model saved in a state dataset's attributes (refused for other layouts)."""
    import json

    version = attrs.get("tscube_state_version")
    if version is None or "tscube_state_model" not in attrs:
        raise ValueError("this dataset holds no BFAST Monitor state (it was not written by a near-real-time "
                         "monitor: tscube monitor --update, BfastMonitor.save)")
    if int(version) != STATE_VERSION:
        raise ValueError(f"monitoring state version {version} is not this tscube's ({STATE_VERSION}); fit again")
    return json.loads(attrs["tscube_state_model"])


def state_arrays(ds, pixel_dims) -> dict[str, np.ndarray]:
    """The state of a state dataset over flat pixel lanes (``(P,)``, ``(rows, P)``; the
    record ``hot`` and its views)."""
    n_pixels = int(np.prod([ds.sizes[d] for d in pixel_dims], dtype=np.int64))
    arrays = {name: state_lanes(ds, name, pixel_dims) for name in STATIC + ("residuals",)}
    return with_hot(arrays, hot_record(lambda name: state_lanes(ds, name, pixel_dims), n_pixels))


def state_lanes(ds, name: str, pixel_dims) -> np.ndarray:
    """The state array ``name`` of a state dataset over flat pixel lanes, loaded (C order,
    writable)."""
    n_pixels = int(np.prod([ds.sizes[d] for d in pixel_dims], dtype=np.int64))
    variable = ds[STATE_PREFIX + name]
    lead = tuple(d for d in variable.dims if d not in pixel_dims)
    values = np.asarray(variable.transpose(*lead, *pixel_dims).values, dtype=STATE_FIELDS[name])
    return np.require(values.reshape(values.shape[:len(lead)] + (n_pixels,)), requirements=["C", "W"])


def state_from_dataset(ds) -> tuple[dict, dict, np.ndarray]:
    """``(state, model, dates)`` of a dataset written by :func:`state_dataset` (flat pixel lanes)."""
    model = model_from_attrs(ds.attrs)
    return state_arrays(ds, ds["status"].dims), model, _normalise_dates(ds["date"].values)


# --------------------------------------------------------------------------------------
# the public object


def _as_input(data, dates, time_dim: str):
    """``(values (T, P), dates, pixel dims, pixel coords, pixel shape)`` of NumPy or xarray input."""
    from ..xarray_blocks import is_xarray, time_coordinate

    if is_xarray(data):
        if dates is not None:
            raise TypeError("dates come from the DataArray's time coordinate: do not pass dates")
        dates = time_coordinate(data, time_dim)
        data = data.transpose(time_dim, ...)
        pixel_dims = tuple(d for d in data.dims if d != time_dim)
        coords = {d: data[d].values for d in pixel_dims if d in data.coords}
        values = np.asarray(data.values)
    else:
        if dates is None:
            raise TypeError("dates are required for NumPy data")
        values = np.asarray(data)
        pixel_dims = tuple(f"dim_{i}" for i in range(1, values.ndim))
        coords = None
    if values.ndim == 0:
        raise ValueError("data must have a time axis first: shape (T, ...)")
    check_numeric_dtype(values, "images")
    pixel_shape = values.shape[1:]
    return values.reshape(values.shape[0], int(np.prod(pixel_shape))), _normalise_dates(dates), pixel_dims, coords, pixel_shape


class BfastMonitor:
    """Near-real-time BFAST Monitor: fit once, then update with each new image.

    ``fit`` runs :func:`tscube.bfast_monitor` on the cube so far and keeps a per-pixel
    monitoring state (see :mod:`tscube.bfast.nrt`); ``update`` monitors only the new
    images, without refitting any history; ``result`` is then what
    :func:`tscube.bfast_monitor` would return over all the dates. ``save``/``load`` keep
    the state between runs (Zarr or NetCDF), like nrt's ``to_netcdf``/``from_netcdf``.

    Parameters
    ----------
    start
        First date of the monitoring period (one start; see :func:`tscube.bfast_monitor`).
    order, trend, h, level, end, history, freq, nodata, engine
        As in :func:`tscube.bfast_monitor`; ``engine`` makes the fit, updates run on the cpu.
    **options
        Further model options of :func:`tscube.bfast_monitor` (``season``, ``type``), saved
        with the state.

    Attributes
    ----------
    state_ : dict of ndarray
        Per-pixel state arrays over flat pixel lanes (:data:`STATE_FIELDS`); those that an
        update changes are float64 views of the records ``state_["hot"]``.
    dates_ : ndarray
        Every date monitored so far (``datetime64[ns]`` or decimal years).
    alert_ : ndarray of bool
        Pixels whose first break lies among the dates of the last ``fit``/``update``.
    last_update_dates_ : int
        How many dates that last ``fit``/``update`` brought.

    Examples
    --------
    >>> monitor = BfastMonitor(start="2019-01-01", freq=23).fit(cube, dates)  # doctest: +SKIP
    >>> alerts = monitor.update(new_image[None], [new_date])                  # doctest: +SKIP
    >>> monitor.save("alerts.zarr")                                           # doctest: +SKIP
    """

    def __init__(self, start, *, order: int = 3, trend: bool = True, h: float = 0.25, level=0.05, end: float = 10,
                 history="ROC", freq=None, nodata=None, engine: str = "auto", **options):
        self.start = start
        self.params = dict(order=order, trend=trend, h=h, level=level, end=end, history=history, freq=freq,
                           nodata=nodata, **options)
        self.engine = engine

    def fit(self, data, dates=None, *, time_dim: str = "time") -> "BfastMonitor":
        """Fit every pixel's history and monitor the dates of ``data`` from ``start`` on."""
        values, dates, self.pixel_dims_, self.pixel_coords_, self.pixel_shape_ = _as_input(data, dates, time_dim)
        self.state_, self.model_ = fit_state(values, dates, self.start, engine=self.engine, **self.params)
        self.dates_ = dates
        self.alert_ = (self.state_["break_index"] >= 0).reshape(self.pixel_shape_)
        self.last_update_dates_ = len(dates)
        return self

    def update(self, data, dates=None, *, time_dim: str = "time") -> np.ndarray:
        """Monitor new images (dates after the last one seen); returns the ``alert_`` map."""
        if not hasattr(self, "state_"):
            raise RuntimeError("call fit() before update()")
        values, new_dates, pixel_dims, _, pixel_shape = _as_input(data, dates, time_dim)
        if pixel_shape != self.pixel_shape_:
            raise ValueError(f"new images are shaped {pixel_shape}, the state {self.pixel_shape_}")
        n_old = len(self.dates_)
        self.state_ = update_state(self.state_, self.model_, self.dates_, values, new_dates)
        self.dates_ = _join_dates(self.dates_, new_dates)
        self.alert_ = (self.state_["break_index"] >= n_old).reshape(self.pixel_shape_)
        self.last_update_dates_ = len(self.dates_) - n_old
        return self.alert_

    def result(self) -> BfastMonitorResult:
        """The :class:`BfastMonitorResult` over every date seen (equal to ``bfast_monitor`` on them)."""
        outputs = state_result(self.state_, self.model_, self.dates_)
        attrs = {key: self.model_[key] for key in ("start", "order", "trend", "regressors", "h", "end", "critval",
                                                   "history", "freq", "engine")}
        attrs["level"] = tuple(self.model_["level"])
        shaped = {name: array.reshape(self.pixel_shape_) for name, array in outputs.items()}
        return BfastMonitorResult(**shaped, attrs=attrs)

    def to_dataset(self):
        """The result, ``alert`` and the state (``state_*`` variables) as an :class:`xarray.Dataset`."""
        coords = {d: np.arange(n) for d, n in zip(self.pixel_dims_, self.pixel_shape_)}
        coords.update(self.pixel_coords_ or {})
        ds = state_dataset(self.state_, self.model_, self.dates_, self.alert_, self.pixel_dims_, coords)
        ds.attrs[LAST_UPDATE_ATTR] = self.last_update_dates_
        return ds

    def __getstate__(self) -> dict:
        """Pickled without the views of the records (a copy would detach them from it)."""
        attributes = dict(self.__dict__)
        if "state_" in attributes:
            attributes["state_"] = {name: array for name, array in self.state_.items() if name not in HOT}
        return attributes

    def __setstate__(self, attributes: dict) -> None:
        self.__dict__.update(attributes)
        if "state_" in attributes:
            self.state_ = with_hot(self.state_, self.state_["hot"])

    @classmethod
    def from_dataset(cls, ds) -> "BfastMonitor":
        """The monitor of a dataset written by :meth:`to_dataset`."""
        state, model, dates = state_from_dataset(ds)
        return cls._from_parts(state, model, dates, ds)

    @classmethod
    def _from_parts(cls, state: dict, model: dict, dates, ds) -> "BfastMonitor":
        """The monitor of a state, its model and dates, with the pixel grid and ``alert`` of ``ds``."""
        options = {key: model[key] for key in model.get("options", ())}
        monitor = cls(model["start"], **{key: model[key] for key in MODEL_PARAMS if key != "level"},
                      level=tuple(model["level"]), engine=model["engine"], **options)
        monitor.state_, monitor.model_, monitor.dates_ = state, model, dates
        monitor.pixel_dims_ = tuple(ds["status"].dims)
        monitor.pixel_shape_ = tuple(ds.sizes[d] for d in monitor.pixel_dims_)
        monitor.pixel_coords_ = {d: ds[d].values for d in monitor.pixel_dims_ if d in ds.coords}
        monitor.alert_ = np.asarray(ds["alert"].values, dtype=bool)
        monitor.last_update_dates_ = int(ds.attrs.get(LAST_UPDATE_ATTR, len(dates)))
        return monitor

    def save(self, path) -> None:
        """Write the monitor to ``path``, atomically. ``.zarr``: the result and ``alert`` as a
        Zarr store, the state in its directory ``.tscube-state`` (see
        :mod:`tscube.bfast._nrt_store`), which :func:`update_saved` and ``tscube monitor
        --update`` update in place; ``.nc``: the dataset of :meth:`to_dataset`."""
        from ..io import _replace, _temporary_path, write_result
        from ..runs import _quiet_zarr
        from ._nrt_store import GENERATION_ATTR, write_state

        path = Path(path)
        if path.suffix.lower() != ".zarr":
            write_result(self.to_dataset(), path)
            return
        ds = self.to_dataset()
        result = ds.drop_vars([n for n in ds.data_vars if n.startswith(STATE_PREFIX)] + ["date", "monitor_time"])
        result.attrs.update({GENERATION_ATTR: 0, "tscube_last_date": str(self.dates_[-1])})
        tmp = _temporary_path(path)
        shutil.rmtree(tmp, ignore_errors=True)
        with _quiet_zarr():
            _strip_chunks(store_uncompressed(result)).to_zarr(tmp, mode="w")
        write_state(tmp, self.state_.__getitem__, self.dates_, int(np.prod(self.pixel_shape_, dtype=np.int64)),
                    last_update_dates=self.last_update_dates_)
        _replace(tmp, path)

    @classmethod
    def load(cls, path) -> "BfastMonitor":
        """The monitor saved at ``path`` (its state in memory)."""
        import xarray as xr

        from ..runs import _quiet_zarr
        from ._nrt_store import has_state, load_state, read_manifest

        path = str(path)
        if path.rstrip("/").endswith(".zarr"):
            with _quiet_zarr(), xr.open_zarr(path, consolidated=False) as ds:
                if has_state(path):
                    state, dates, _ = load_state(path)
                    monitor = cls._from_parts(state, model_from_attrs(ds.attrs), dates, ds.load())
                    monitor.last_update_dates_ = int(read_manifest(path)["last_update_dates"])
                    # from the committed state, not the stored result (which an update
                    # rewrites before its commit: a killed one leaves it half new)
                    alert = state["break_index"] >= len(dates) - monitor.last_update_dates_
                    monitor.alert_ = alert.reshape(monitor.pixel_shape_)
                    return monitor
                return cls.from_dataset(ds.load())
        with xr.open_dataset(path) as ds:
            return cls.from_dataset(ds.load())


def update_saved(path, data, dates=None, *, time_dim: str = "time") -> np.ndarray:
    """Update a monitor saved to ``.zarr`` in place with new images; returns its ``alert`` map.

    The operational path (``tscube monitor --update`` takes it): only the new images, the
    fit and what an update changes are read, only that and the new residuals written
    (:mod:`tscube.bfast._nrt_store`), so one new image costs O(1) per pixel whatever the
    number of dates so far. Killed at any point, the saved state is the previous one or
    the new one, and the same call again finishes the same update with the same bytes.
    """
    from ..runs import _exclusive, _quiet_zarr
    from . import _nrt_store as store

    path = Path(path)
    if not store.has_state(path):
        raise ValueError(f"{path.name} holds no monitoring state (save a BfastMonitor to .zarr, or run "
                         "tscube monitor --update)")
    with _exclusive(path.with_name(f"{path.name}.nrt")):
        group = store.open_result(path)
        with _quiet_zarr():
            model = model_from_attrs(group.attrs)
            pixel_shape = tuple(group["status"].shape)
        store.repair_result(path, model, group)
        values, new_dates, _, _, shape = _as_input(data, dates, time_dim)
        if shape != pixel_shape:
            raise ValueError(f"new images are shaped {shape}, the state {pixel_shape}")
        store.update_files(path, model, values, new_dates, group)
        with _quiet_zarr():
            return np.asarray(group["alert"][...], dtype=bool)
