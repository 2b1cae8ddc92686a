"""The kernels of the near-real-time state (numba, a pixel lane per iteration) and the
layout of the record they update: the history fit, the update of every lane by new
images (the MOSUM window, the running sums, the first break, the median window), the
result of a lane from its record, and the band kernel that updates a saved state's
files itself. The record's columns live here, beside the kernels that index them (numba
compiles them in as constants)."""

from __future__ import annotations

import math

import numpy as np

from ..._jit import jit
from ..._kernel_io import read_exactly, write_exactly
from ..._prefetch import prefetch_row
from ..core.inputs import PERFECT_FIT_RTOL
from ..core.ols_cpu import add_normal_row, mirror_lower, solve_equilibrated
from ..monitor.critval import process_bound
from ..monitor.status import MONITORED, BfastStatus

#: Residuals kept around the median of every pixel (the rows of ``median_window``).
MEDIAN_WINDOW = 24  # >= 2: both middle ranks of an even count

#: What an update changes, kept as one record per pixel (a ``(P, HOT_WIDTH)`` float64
#: array, the state's ``"hot"``): the floats of :data:`HOT_FLOATS` in a slot each, the
#: integers of :data:`HOT_INTS` as int32 in pairs (the int32 view of the record), then the
#: median window. An update then reads and writes every pixel's row as one stream, where
#: ~30 arrays read and written at once left it bound by the memory system's juggling of
#: streams (benchmarks/README.md, near-real-time). The state's arrays of these names are
#: views of its columns.
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
#: The arrays a result is computed into by lane (:func:`_result_block`; ``advance``'s
#: ``out``): the outputs of ``bfast_monitor`` but ``n_history`` (which the fit sets), then
#: ``alert`` and ``changes`` (bits: what can differ from the result before an update).
RESULT_OUTPUTS = ("status", "break_index", "break_time", "history_start", "sigma", "magnitude", "statistic",
                  "mosum_mean", "rmse", "relative_magnitude", "n_valid", "n_monitor", "n_inf", "alert", "changes")
#: Bits of ``changes``: the status (and with it sigma and rmse), the break, ``n_inf``.
CHANGED_STATUS, CHANGED_BREAK, CHANGED_INF = 1, 2, 4

#: Statuses whose history is fitted (the others never get a model, whatever comes later).
FITTED = tuple(MONITORED) + (BfastStatus.PERFECT_FIT,)
MONITORED_CODES = np.array([int(s) for s in MONITORED], dtype=np.int8)
FITTED_CODES = np.array([int(s) for s in FITTED], dtype=np.int8)
#: Whether a status code (indexed by its byte) is fitted (row 0) or monitored (row 1): the
#: kernels' lookup table.
CODE_KINDS = np.zeros((2, 256), dtype=np.bool_)
CODE_KINDS[0, FITTED_CODES.view(np.uint8)] = True
CODE_KINDS[1, MONITORED_CODES.view(np.uint8)] = True
_NO_MONITORING_DATA, _ALL_MISSING, _PERFECT_FIT = (int(s) for s in (BfastStatus.NO_MONITORING_DATA,
                                                                     BfastStatus.ALL_MISSING,
                                                                     BfastStatus.PERFECT_FIT))


def empty_record(n_pixels: int) -> np.ndarray:
    """The records of ``n_pixels`` lanes before any monitoring: counts 0, no break, no
    leaving residual, an empty median window."""
    hot = np.zeros((n_pixels, HOT_WIDTH))
    hot.view(np.int32)[:, [_LEAVING, _BREAK_INDEX]] = -1
    hot[:, _LEAVING_VALUE] = np.nan
    hot[:, _WINDOW:] = np.nan
    return hot


def record_views(hot: np.ndarray) -> dict[str, np.ndarray]:
    """The state arrays of :data:`HOT` as views of the record ``hot`` (float64, int32 for
    :data:`HOT_INTS`)."""
    ints = hot.view(np.int32)
    views = {name: hot[:, column] for column, name in enumerate(HOT_FLOATS)}
    views.update({name: ints[:, _N_MONITOR + column] for column, name in enumerate(HOT_INTS)})
    views["median_window"] = hot[:, _WINDOW:].T
    return views



# --------------------------------------------------------------------------------------
# kernels


@jit()
def _residual(y, X, t, coef):
    """``y - X[t] @ coef``, summed in the engines' order."""
    r = y
    for a in range(X.shape[1]):
        r -= X[t, a] * coef[a]
    return r


@jit(nogil=True)
def fit_history(task, n_tasks, Y, X, levels, all_levels, first, stop, fit, h, beta, sigma, tail, hot, singular,
                perfect):
    """History OLS of every lane with ``fit[p]``: valid rows ``first[p] <= t < stop`` of
    ``Y`` (NaN = missing). Writes the coefficients, sigma, the last ``floor(h n)``
    residuals in date order (``tail``) and their sum, the residual sum (into the record
    ``hot``); flags singular fits (also a history missing a season level, as the engines:
    ``levels``, ``all_levels``) and exact fits. Task ``task`` of ``n_tasks`` (a range of
    lanes; :func:`tscube._threads.run_tasks`)."""
    P = Y.shape[1]
    k = X.shape[1]
    for p in range(task * P // n_tasks, (task + 1) * P // n_tasks):
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
        if n <= k or singular_design or not solve_equilibrated(G, b, k, coef, np.empty((k + 1, k))):
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
    ranks (as :func:`tscube.bfast.monitor._cpu_pixel.median`: the middle value, or ``0.5 (a + b)``);
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


@jit(nogil=True, error_model="numpy")
def advance(task, n_tasks, Y, X, index, offset, pixel0, fit, codes, test, residuals, fresh, count_valid, inf_added, hot,
            time, alert_from, out):
    """Run the monitoring of every lane over the new dates ``Y`` (time indices ``index``,
    design rows ``X``; their residuals go to ``fresh``, ``(T, lanes)``: the residual rows
    from ``offset`` on, after ``residuals[:offset]``): residuals, the MOSUM window, the
    process (OLS-MOSUM, or OLS-CUSUM if ``cusum``) and its running statistics, the first
    boundary crossing, the median window and the magnitude. Fitted lanes get residuals
    and a magnitude, monitored ones (fitted, sigma > 0) the process: the kinds of each
    ``fitted_status`` in ``codes`` (:data:`CODE_KINDS`). Counts the valid new values of
    every lane in ``n_monitor`` (and in ``n_valid`` if ``count_valid``; ``inf_added``:
    the infinite ones, per lane, or empty for none). O(1) per lane and date, but for a
    rebuilt median window.

    Lane ``p`` (column ``p`` of ``Y``) is row ``p`` of the records ``hot``
    (:data:`HOT_SCALARS`), updated in place, and pixel ``q = pixel0 + p`` of the fit's
    arrays ``fit`` = ``(fitted_status, beta, sigma, n_history, history_begin, tail, critval)``
    (:func:`tscube.bfast.nrt.state.fit_arrays`; ``critval``: each pixel's critical value,
    or empty for the model's) and of ``residuals``, and column ``p`` of ``fresh`` (NaN
    where a lane has no residual: the caller's fill). ``test`` is the monitoring test,
    ``(h, critval, cusum)`` (``critval``: the model's, R's).

    ``out``: the arrays of :data:`RESULT_OUTPUTS` over the lanes, where the result of each
    lane goes as it is updated (on the time axis ``time``: ``alert`` where its break index
    is ``alert_from`` or later; ``changes``, :data:`CHANGED_STATUS` ... bits of what differs
    from the result before), or arrays of size 0 for no result.

    Task ``task`` of ``n_tasks`` (:func:`tscube._threads.run_tasks`): a range of blocks of
    :data:`BLOCK` lanes; ``advance(0, 1, ...)`` runs every lane on the calling thread."""
    n_blocks = (Y.shape[1] + BLOCK - 1) // BLOCK
    for block in range(task * n_blocks // n_tasks, (task + 1) * n_blocks // n_tasks):
        first = block * BLOCK
        stop = min(first + BLOCK, Y.shape[1])
        _advance_block(first, stop, Y, X, index, offset, pixel0, fit, codes, test, residuals, fresh, count_valid,
                       inf_added, hot, out[14])
        if out[0].size:
            _result_block(first, stop, pixel0, fit, codes, hot, time, alert_from, out)


@jit(nogil=True, error_model="numpy")
def _advance_block(first, stop, Y, X, index, offset, pixel0, fit, codes, test, residuals, fresh, count_valid, inf_added,
                   hot, changes):
    """Lanes ``first`` to ``stop`` of :func:`advance`, their records and residuals (and the
    bits of ``changes``, when it is not empty). Lanes without a new value keep their record
    untouched; the others go through three loops: which windows move, the residuals that
    leave them (scattered loads, issued without branches on their values), then the
    update. The lanes' work is written out here, with no call that takes arrays per lane
    but the median window's: numba counts references to every array a call or a tuple
    passes, which costs more than a lane's arithmetic (the block's arrays are unpacked
    here, once)."""
    fitted_status, beta, sigma, n_history, _, tail, critvals = fit
    h, model_critval, cusum = test
    T = Y.shape[0]
    k = beta.shape[0]
    ints = hot.view(np.int32)  # the records' integers
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
        critval = critvals[q] if critvals.size else model_critval
        flat_bound = critval * math.sqrt(2.0)  # logPlus(t / n) = 1 while t / n <= e
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
def _result_block(first, stop, pixel0, fit, codes, hot, time, alert_from, out, at=0):
    """The result of lanes ``first`` to ``stop`` into ``out`` (the arrays of
    :data:`RESULT_OUTPUTS`, ``changes`` not written; ``alert`` where it is not empty: the
    break index is ``alert_from`` or later) from their records ``hot`` and the fit's
    arrays (pixel ``pixel0 + p`` for lane ``p``, element ``at + p`` of ``out``) on the time
    axis ``time``. The status is the fit's, or no monitoring data, or all missing; the
    outputs that it gives (``codes[0]``: fitted codes, ``codes[1]``: monitored ones), NaN /
    -1 elsewhere."""
    fitted_status, beta, sigma, n_history, history_begin, _, _ = fit
    k = beta.shape[0]
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
def update_band_files(values, nodata, has_nodata, begin, end, X, index, offset, fit, codes, test, residuals, time,
                      alert_from, out, record, files, n_pixels, tally):
    """Update the pixels ``begin`` to ``end`` of a saved state
    (:func:`tscube.bfast.nrt._store.update_files`) with the new images ``values`` ``(T, P)``
    (any numeric dtype; ``nodata`` as :func:`tscube.bfast.core.inputs.kernel_nodata` gives it),
    :data:`RECORD_LANES` at a time: their records are read from the committed slot (file
    ``source``, records from byte ``source_at``) into the thread's buffer ``record``,
    updated by :func:`_advance_block` (their result goes into ``out``, the band's outputs
    from element 0, on the way) and written to the other slot (``target``, from byte
    ``target_at``); their new residuals go to ``residual_file`` (row ``i`` of the new dates
    from byte ``residual_at + 8 i n_pixels``); ``files`` is ``(source, source_at, target,
    target_at, residual_file, residual_at)``. The fit's arrays ``fit`` and the committed
    ``residuals`` are indexed by pixel; ``X``, ``index``, ``offset``, ``codes``, ``test``,
    ``time``, ``alert_from``: as in :func:`advance`. Counts the band's statuses (``tally[code byte]``),
    breaks (``tally[256]``) and alerts (``tally[257]``). Returns 0, or -1 where a record
    could not be read, -2 where a write failed."""
    source, source_at, target, target_at, residual_file, residual_at = files
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
            _advance_block(block, last, Y, X, index, offset, first, fit, codes, test, residuals, fresh, True,
                           inf_added, hot, changes)
            _result_block(block, last, first, fit, codes, hot, time, alert_from, out, first - begin)
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


@jit(nogil=True, error_model="numpy")
def _lanes_of(values, first, stop, nodata, has_nodata, Y, inf_added):
    """Pixels ``first`` to ``stop`` of the new images ``values`` ``(T, P)`` (any numeric
    dtype) into ``Y`` ``(T, stop - first)`` as float64, NaN where missing (NaN, inf, or
    ``nodata`` as :func:`tscube.bfast.core.inputs.kernel_nodata` gives it, when ``has_nodata``),
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


@jit(nogil=True)
def result_lanes(task, n_tasks, fit, codes, hot, time, out):
    """The result of every lane from its record ``hot[p]`` (:func:`_result_block`): task
    ``task`` of ``n_tasks``, a range of blocks of :data:`BLOCK` lanes."""
    n_blocks = (hot.shape[0] + BLOCK - 1) // BLOCK
    for block in range(task * n_blocks // n_tasks, (task + 1) * n_blocks // n_tasks):
        _result_block(block * BLOCK, min(block * BLOCK + BLOCK, hot.shape[0]), 0, fit, codes, hot, time, 0, out)
