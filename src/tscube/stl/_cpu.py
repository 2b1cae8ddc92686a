"""numba engine of :func:`tscube.stl`: parallel over series, same semantics as ``_reference``.

Series are decomposed BLOCK at a time in a (time, series) layout, every loop over the
block a SIMD loop across its series (lanes). A block of consecutive series is read from
the time-first data a date at a time and its results written back the same way, so the
cube is never copied series-major (``decompose_cube``). Gap-free blocks with degrees <= 1 and
windows up to ``TABLE_MAX_WINDOW`` apply precomputed tables of tricube weights and
equivalent kernels, shared read-only by all threads. Other blocks (gaps, degree 2,
longer windows) give each lane its own valid mask and neighbourhoods: the radius of
every evaluation's ``q`` nearest valid points, found once per block by a pointer that
slides over the lane's compacted valid positions; each evaluation then sums the
tricube- and mask-weighted moments of all lanes over the union of their windows.
Periodic fits, and the cuda engine, use the per-series path (``decompose_one``): each
loess evaluation finds its ``q`` nearest valid points by binary search and expansion
(O(q + log N)) and accumulates weighted moments in one pass. Moving averages are running
sums, the robustness median a quickselect. Arithmetic is float64 throughout
(reassociation allowed in the weighted sums, for SIMD).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from .._jit import jit
from .._threads import run_tasks
from ._layout import centred_times, clean_value, kernel_values, series_summaries
from ._params import STLPLUS_ZERO_WEIGHT, StlParams
from ._status import StlStatus

SINGULAR_RTOL = 1e-12
_STATSMODELS, _STLPLUS = 0, 1
_OK = int(StlStatus.OK)
_ALL_MISSING = int(StlStatus.ALL_MISSING)
_TOO_FEW = int(StlStatus.TOO_FEW_OBSERVATIONS)
_SUB_EMPTY = int(StlStatus.SUBSERIES_EMPTY)
_SUB_SHORT = int(StlStatus.SUBSERIES_TOO_SHORT)
_FIT_FAILED = int(StlStatus.FIT_FAILED)

# Reassociation lets LLVM vectorise the weighted sums (rounding-level changes only);
# no "nnan"/"ninf" flags, so NaN handling is unaffected on the CPU. (numba-cuda, compiling
# these functions for the STL cuda kernel, reads any fastmath set as its fastmath=True,
# every flag included: see docs/gpu.md.)
_FAST = {"reassoc", "contract"}


@jit(inline="always", fastmath=_FAST)
def _neighbourhood(xv, xstart, nv, complete, m, q):
    """Index range [lo, hi) (into xv[xstart:xstart+nv]) of the q valid points nearest m,
    and the index of the nearest one."""
    if complete:  # positions 1..nv: the window is an index range
        if q >= nv:
            lo = 0
        else:
            lo = min(max(m - 1 - (q - 1) // 2, 0), nv - q)
        nearest = min(max(m - 1, 0), nv - 1)
        return lo, lo + q, nearest
    a, b = 0, nv  # binary search: first valid position >= m
    while a < b:
        c = (a + b) // 2
        if xv[xstart + c] < m:
            a = c + 1
        else:
            b = c
    left, right = a - 1, a
    if left < 0:
        nearest = right
    elif right >= nv:
        nearest = left
    elif m - xv[xstart + left] <= xv[xstart + right] - m:
        nearest = left
    else:
        nearest = right
    for _ in range(q):
        if left < 0:
            right += 1
        elif right >= nv:
            left -= 1
        elif m - xv[xstart + left] <= xv[xstart + right] - m:
            left -= 1
        else:
            right += 1
    return left + 1, right, nearest


# Tables are built for windows up to this size (memory: ~24 x window^2 bytes each).
TABLE_MAX_WINDOW = 401
_TRI, _OFFSET, _VALUE, _SLOPE, _MEAN, _SCALARS = 0, 1, 2, 3, 4, 5


@jit()
def _build_table(window, deg, flavor, tab):
    """Loess weights of a gap-free window of ``window`` points at positions 1..window,
    evaluated at m = row for row = 0 .. half+1 (left edge, extension point 0 and, at
    row half+1, the centred window shared by all interior points); the right edge is
    the mirror image. Per row: tricube weights, scaled offsets (x - m)/h, the equivalent
    kernels of the fitted value and slope (degree <= 1, no robustness weights) and of the
    plain weighted mean; scalars h, h*sqrt(var) (Fortran's spread test) and a
    non-singular flag."""
    half = (window - 1) // 2
    for row in range(half + 2):
        m = row
        h = float(max(m - 1, window - m))
        total = 0.0
        for i in range(window):
            r = abs(i + 1 - m)
            if flavor == _STLPLUS:
                wt = 0.0 if r >= h else (1.0 - (r / h) ** 3) ** 3
            elif r > 0.999 * h:
                wt = 0.0
            elif r <= 0.001 * h:
                wt = 1.0
            else:
                wt = (1.0 - (r / h) ** 3) ** 3
            tab[_TRI, row, i] = wt
            tab[_OFFSET, row, i] = (i + 1 - m) / h
            total += wt
        m1 = 0.0
        m2 = 0.0
        for i in range(window):
            tab[_MEAN, row, i] = tab[_TRI, row, i] / total
            m1 += tab[_MEAN, row, i] * tab[_OFFSET, row, i]
            m2 += tab[_MEAN, row, i] * tab[_OFFSET, row, i] ** 2
        var = m2 - m1 * m1
        ok = deg == 0 or abs(var) > SINGULAR_RTOL
        for i in range(window):
            if deg == 0 or not ok:
                tab[_VALUE, row, i] = tab[_MEAN, row, i]
                tab[_SLOPE, row, i] = 0.0
            else:
                v = tab[_OFFSET, row, i]
                tab[_VALUE, row, i] = tab[_MEAN, row, i] * (1.0 - m1 * (v - m1) / var)
                tab[_SLOPE, row, i] = tab[_MEAN, row, i] * (v - m1) / var / h
        tab[_SCALARS, row, 0] = h
        tab[_SCALARS, row, 1] = h * np.sqrt(var) if var > 0.0 else 0.0
        tab[_SCALARS, row, 2] = 1.0 if ok else 0.0


@jit(inline="always", fastmath=_FAST, error_model="numpy")
def _fit_from_moments(s0, s1, s2, s3, s4, t0, t1, t2, h, deg, flavor, n_full):
    """Loess (value, slope) at the evaluation point from the weighted moments
    s_k = sum w v^k, t_k = sum w v^k y of the scaled offsets v = (x - m)/h; NaN value
    when the fit fails (no weight, or singular in the stlplus flavour)."""
    if not s0 > 0.0:
        return np.nan, np.nan
    t0 /= s0
    if deg == 0:
        return t0, 0.0
    m1, m2 = s1 / s0, s2 / s0
    t1 /= s0
    if deg == 2:
        m3, m4 = s3 / s0, s4 / s0
        t2 /= s0
        det = m2 * m4 - m3 * m3 - m1 * (m1 * m4 - m3 * m2) + m2 * (m1 * m3 - m2 * m2)
        if abs(det) > SINGULAR_RTOL:
            b0 = (t0 * (m2 * m4 - m3 * m3) - m1 * (t1 * m4 - m3 * t2)
                  + m2 * (t1 * m3 - m2 * t2)) / det
            b1 = ((t1 * m4 - m3 * t2) - t0 * (m1 * m4 - m3 * m2)
                  + m2 * (m1 * t2 - t1 * m2)) / det
            return b0, (b1 / h if flavor == _STLPLUS else 0.0)
        if flavor == _STLPLUS:
            return np.nan, np.nan
    var = m2 - m1 * m1
    if flavor == _STLPLUS:
        if not abs(var) > SINGULAR_RTOL:
            return np.nan, np.nan
        return t0 - m1 * (t1 - m1 * t0) / var, (t1 - m1 * t0) / var / h
    # Fortran: linear correction only when the x-spread is not tiny
    if h > 0.0 and var > 0.0 and h * math.sqrt(var) > 0.001 * (n_full - 1):
        return t0 - m1 * (t1 - m1 * t0) / var, 0.0
    return t0, 0.0


@jit(fastmath=_FAST)
def _local_fit(vals, wts, use_w, off, stride, xv, xstart, nv, complete, n_full, window, deg,
               m, flavor):
    """General loess (value, slope, nearest index) at position m, any gaps and degree;
    NaN value when it fails."""
    q = min(window, nv)
    lo, hi, nearest = _neighbourhood(xv, xstart, nv, complete, m, q)
    s0 = s1 = s2 = s3 = s4 = 0.0
    t0 = t1 = t2 = 0.0
    if complete:
        x_lo, x_hi = lo + 1, hi
    else:
        x_lo, x_hi = xv[xstart + lo], xv[xstart + hi - 1]
    h = float(max(m - x_lo, x_hi - m))
    if window > nv:
        if flavor == _STLPLUS:
            h += (window - nv) / 2.0
        else:
            h += (window - nv) // 2
    # stlplus: weight 0 at r >= h; Fortran: 1 at r <= 0.001h, 0 at r > 0.999h
    cut = h if flavor == _STLPLUS else 0.999 * h
    h1 = -1.0 if flavor == _STLPLUS else 0.001 * h
    inv_h = 1.0 / h
    for i in range(lo, hi):
        x = i + 1 if complete else xv[xstart + i]
        d = float(x - m)
        r = abs(d)
        if flavor == _STLPLUS:
            if r >= cut:
                continue
        elif r > cut:
            continue
        if r <= h1:
            wt = 1.0
        else:
            c = r * inv_h
            c = 1.0 - c * c * c
            wt = c * c * c
        k = off + (x - 1) * stride
        if use_w:
            wt *= wts[k]
        yv = vals[k]
        v = d * inv_h
        wv = wt * v
        s0 += wt
        s1 += wv
        s2 += wv * v
        t0 += wt * yv
        t1 += wv * yv
        if deg == 2:
            s3 += wv * v * v
            s4 += wv * v * v * v
            t2 += wv * v * yv
    value, slope = _fit_from_moments(s0, s1, s2, s3, s4, t0, t1, t2, h, deg, flavor, n_full)
    return value, slope, nearest


@jit(inline="always", error_model="numpy")
def _eval_counts(n_full, jump, extend):
    """Loess evaluations over positions 1..n_full: the jump used, the number of
    evaluations inside, and in all (+2 one-step extrapolations if ``extend``)."""
    jump = min(jump, max(n_full - 1, 1))
    n_eval = (n_full - 1) // jump + 1
    if (n_eval - 1) * jump + 1 != n_full:
        n_eval += 1
    return jump, n_eval, n_eval + 2 if extend else n_eval


@jit(inline="always", error_model="numpy")
def _eval_position(e, n_eval, jump, n_full):
    """1-based position of evaluation ``e`` (0 and ``n_full + 1`` for the extrapolations)."""
    if e < n_eval:
        return min(1 + e * jump, n_full)
    return 0 if e == n_eval else n_full + 1


@jit(inline="always", fastmath=_FAST, error_model="numpy")
def _table_position(e, n_eval, jump, n_full, half, window):
    """Evaluation ``e`` of a tabled (gap-free) loess: its 1-based position ``m``, the
    weight-table row, the window's first index, and whether the window is mirrored
    (right edge)."""
    m = _eval_position(e, n_eval, jump, n_full)
    if m <= half:
        return m, m, 0, False
    if m <= n_full - half:
        return m, half + 1, m - 1 - half, False
    return m, n_full + 1 - m, n_full - window, True


@jit(inline="always", fastmath=_FAST, error_model="numpy")
def _hermite_basis(u):
    """Cubic Hermite basis at u in [0, 1]: weights of the two values and two slopes
    (the slopes' weights to be multiplied by the interval length)."""
    u2 = u * u
    u3 = u2 * u
    return 2 * u3 - 3 * u2 + 1, 3 * u2 - 2 * u3, u3 - 2 * u2 + u, u3 - u2


@jit(fastmath=_FAST, error_model="numpy")
def _hermite(fbuf, sbuf, n_eval, jump, n_full, out, out_off, out_stride):
    """stlplus interpolation of a jumped loess: cubic Hermite (values ``fbuf``, slopes
    ``sbuf``) between the evaluation points whose fit is finite, NaN elsewhere."""
    for t in range(1, n_full + 1):
        out[out_off + t * out_stride] = np.nan
    prev = -1
    for e in range(n_eval):
        if not math.isfinite(fbuf[e]):
            continue
        m1 = min(1 + e * jump, n_full)
        out[out_off + m1 * out_stride] = fbuf[e]
        if prev >= 0:
            m0 = min(1 + prev * jump, n_full)
            delta = float(m1 - m0)
            for t in range(m0 + 1, m1):
                c0, c1, d0, d1 = _hermite_basis((t - m0) / delta)
                out[out_off + t * out_stride] = (c0 * fbuf[prev] + c1 * fbuf[e]
                                                 + d0 * delta * sbuf[prev]
                                                 + d1 * delta * sbuf[e])
        prev = e


@jit(fastmath=_FAST)
def _loess(vals, wts, use_w, off, stride, xv, xstart, nv, complete, n_full, window, deg, jump,
           flavor, extend, out, out_off, out_stride, fbuf, sbuf, tab):
    """Loess at positions 1..n_full (and 0, n_full+1 if ``extend``) written to
    ``out[out_off + position * out_stride]``."""
    jump, n_eval, n_total = _eval_counts(n_full, jump, extend)
    e_start = 0
    if complete and window <= nv and deg <= 1 and window <= tab.shape[2] and stride == 1:
        # gap-free: fixed linear filters (unweighted) or tabled tricube weights times the
        # robustness weights, in one tight loop
        half = (window - 1) // 2
        threshold = 0.001 * (n_full - 1)
        while e_start < n_total:
            e = e_start
            m, row, lo, mirror = _table_position(e, n_eval, jump, n_full, half, window)
            if use_w:
                s0 = s1 = s2 = t0 = t1 = 0.0
                base = off + lo
                for i in range(window):
                    ii = window - 1 - i if mirror else i
                    wt = tab[_TRI, row, ii] * wts[base + i]
                    v = -tab[_OFFSET, row, ii] if mirror else tab[_OFFSET, row, ii]
                    wv = wt * v
                    yv = vals[base + i]
                    s0 += wt
                    s1 += wv
                    s2 += wv * v
                    t0 += wt * yv
                    t1 += wv * yv
                if not s0 > 0.0:
                    break  # leave the rest (and the fallbacks) to the general path
                t0 /= s0
                slope = 0.0
                value = t0
                if deg == 1:
                    m1 = s1 / s0
                    var = s2 / s0 - m1 * m1
                    t1 /= s0
                    h = tab[_SCALARS, row, 0]
                    if flavor == _STLPLUS:
                        if not abs(var) > SINGULAR_RTOL:
                            break
                        value = t0 - m1 * (t1 - m1 * t0) / var
                        slope = (t1 - m1 * t0) / var / h
                    elif var > 0.0 and h * math.sqrt(var) > threshold:
                        value = t0 - m1 * (t1 - m1 * t0) / var
                fbuf[e] = value
                sbuf[e] = slope
                e_start += 1
                continue
            if not tab[_SCALARS, row, 2] > 0.0:
                break  # singular: leave the rest to the general path
            kind = _VALUE
            if flavor == _STATSMODELS and (deg == 0 or not tab[_SCALARS, row, 1] > threshold):
                kind = _MEAN
            value = 0.0
            slope = 0.0
            base = off + lo
            if mirror:
                for i in range(window):
                    value += tab[kind, row, window - 1 - i] * vals[base + i]
                    slope -= tab[_SLOPE, row, window - 1 - i] * vals[base + i]
            else:
                for i in range(window):
                    value += tab[kind, row, i] * vals[base + i]
                    slope += tab[_SLOPE, row, i] * vals[base + i]
            fbuf[e] = value
            sbuf[e] = slope if flavor == _STLPLUS else 0.0
            e_start += 1
    # one call site of _local_fit (keeps the compiled code, and compile time, small)
    for e in range(e_start, n_total):
        m = _eval_position(e, n_eval, jump, n_full)
        f, s, nearest = _local_fit(vals, wts, use_w, off, stride, xv, xstart, nv, complete,
                                   n_full, window, deg, m, flavor)
        if flavor == _STATSMODELS and e < n_eval and not math.isfinite(f):
            x = nearest + 1 if complete else xv[xstart + nearest]
            f = vals[off + (x - 1) * stride]
        fbuf[e] = f
        sbuf[e] = s
    if jump == 1:
        for e in range(n_full):
            out[out_off + (e + 1) * out_stride] = fbuf[e]
    elif flavor == _STATSMODELS:  # linear interpolation
        for e in range(n_eval - 1):
            m0 = 1 + e * jump
            m1 = min(m0 + jump, n_full)
            delta = (fbuf[e + 1] - fbuf[e]) / (m1 - m0)
            for t in range(m0, m1):
                out[out_off + t * out_stride] = fbuf[e] + delta * (t - m0)
        out[out_off + n_full * out_stride] = fbuf[n_eval - 1]
    else:
        _hermite(fbuf, sbuf, n_eval, jump, n_full, out, out_off, out_stride)
    if extend:
        f0 = fbuf[n_eval]
        f1 = fbuf[n_eval + 1]
        if flavor == _STATSMODELS:
            if not math.isfinite(f0):
                f0 = out[out_off + out_stride]
            if not math.isfinite(f1):
                f1 = out[out_off + n_full * out_stride]
        out[out_off] = f0
        out[out_off + (n_full + 1) * out_stride] = f1


@jit()
def _moving_average(x, n, length, ave):
    """Running mean of ``length`` over x[:n] into ave[:n - length + 1] (as Fortran)."""
    v = 0.0
    for i in range(length):
        v += x[i]
    ave[0] = v / length
    for j in range(1, n - length + 1):
        v += x[j + length - 1] - x[j - 1]
        ave[j] = v / length


@jit(error_model="numpy")
def _select(a, n, k):
    """k-th smallest of a[:n] (in place, quickselect); afterwards a[:k] <= a[k]."""
    lo, hi = 0, n - 1
    while hi > lo:
        mid = (lo + hi) // 2
        # median of three as pivot, moved to a[hi]
        if a[mid] < a[lo]:
            a[mid], a[lo] = a[lo], a[mid]
        if a[hi] < a[lo]:
            a[hi], a[lo] = a[lo], a[hi]
        if a[mid] < a[hi]:
            a[mid], a[hi] = a[hi], a[mid]
        pivot = a[hi]
        store = lo
        for i in range(lo, hi):
            if a[i] < pivot:
                a[i], a[store] = a[store], a[i]
                store += 1
        a[store], a[hi] = a[hi], a[store]
        if store == k:
            return a[k]
        if store < k:
            lo = store + 1
        else:
            hi = store - 1
    return a[k]


@jit(error_model="numpy")
def _two_order_statistics(a, n, k_low, k_high):
    """Sum of the k_low-th and k_high-th smallest of a[:n] (k_low <= k_high, adjacent
    or equal)."""
    high = _select(a, n, k_high)
    if k_low == k_high:
        return 2.0 * high
    low = a[0]
    for i in range(1, k_high):
        if a[i] > low:
            low = a[i]
    return low + high


@jit(error_model="numpy")
def _robustness_scale(resid, nv, n, flavor):
    """Scale of the bisquare robustness weights from the nv absolute residuals of the
    valid points in resid[:nv] (reordered): statsmodels 6 x their median, stlplus 3 x
    the sum of the order statistics at the middle indices of the full length n; -1
    where stlplus has none (too many missing: every weight 1)."""
    if flavor == _STLPLUS:
        mid1 = n // 2 + 1  # indices from the full length n (stlplus quirk)
        mid2 = n - mid1 + 1
        if nv < mid1:
            return -1.0
        if mid1 == mid2:
            return 3.0 * _select(resid, nv, mid1 - 1)
        return 3.0 * _two_order_statistics(resid, nv, mid2 - 1, mid1 - 1)
    return 3.0 * _two_order_statistics(resid, nv, nv - nv // 2 - 1, nv // 2)  # 6 x median


@jit(inline="always", error_model="numpy")
def _bisquare(r, scale, flavor):
    """Robustness weight of a valid point with absolute residual r."""
    if flavor == _STLPLUS:
        if scale < 0.0:
            return 1.0
        if r >= 0.999 * scale:
            return STLPLUS_ZERO_WEIGHT
        if r <= 0.001 * scale:
            return 1.0
        return (1.0 - (r / scale) ** 2) ** 2
    if scale == 0.0 or r <= 0.001 * scale:
        return 1.0
    if r <= 0.999 * scale:
        return (1.0 - (r / scale) ** 2) ** 2
    return 0.0


@jit()
def _robustness_weights(y, fit_s, fit_t, valid, n, flavor, rw, resid):
    """Robustness weights of one series (1 where the value is missing)."""
    nv = 0
    for i in range(n):
        if valid[i]:
            resid[nv] = abs(y[i] - fit_s[i] - fit_t[i])
            nv += 1
    scale = _robustness_scale(resid, nv, n, flavor)
    for i in range(n):
        rw[i] = _bisquare(abs(y[i] - fit_s[i] - fit_t[i]), scale, flavor) if valid[i] else 1.0


@jit()
def _valid_positions(y, n, p, isdeg, periodic, flavor, valid, xv, sub_xv, sub_start, sub_nv):
    """Valid (finite) values of y[:n]: mask, 1-based positions ``xv`` and, per
    cycle-subseries j, their positions within it (``sub_xv[sub_start[j]:][:sub_nv[j]]``);
    returns (status, number of valid values)."""
    nv = np.int64(0)
    for i in range(n):  # compaction without branches (gaps at random mispredict them)
        valid[i] = math.isfinite(y[i])
        xv[nv] = i + 1
        nv += valid[i]
    if nv == 0:
        return _ALL_MISSING, nv
    if nv < 2 * p:
        return _TOO_FEW, nv
    pos = 0
    for j in range(p):
        sub_start[j] = pos
        k = (n - 1 - j) // p + 1
        for i in range(k):
            sub_xv[pos] = i + 1
            pos += valid[i * p + j]
        sub_nv[j] = pos - sub_start[j]
        if sub_nv[j] == 0:
            return _SUB_EMPTY, nv
        if flavor == _STLPLUS and periodic == 0 and sub_nv[j] < isdeg + 1:
            return _SUB_SHORT, nv
    return _OK, nv


@jit()
def decompose_one(y, prm, seasonal, trend, rw, valid, xv, sub_xv, sub_start, sub_nv,
                   work_d, cycle, ma1, ma2, low, fbuf, sbuf, resid, tables, sub_y, sub_w):
    """STL of one series into seasonal/trend/rw; returns the status code."""
    (n, p, ns, nt, nl, isdeg, itdeg, ildeg, nsjump, ntjump, nljump, ni, no, periodic,
     flavor) = (prm[0], prm[1], prm[2], prm[3], prm[4], prm[5], prm[6], prm[7], prm[8],
                prm[9], prm[10], prm[11], prm[12], prm[13], prm[14])
    status, nv = _valid_positions(y, n, p, isdeg, periodic, flavor, valid, xv, sub_xv,
                                  sub_start, sub_nv)
    if status != _OK:
        for i in range(n):
            seasonal[i] = trend[i] = rw[i] = np.nan
        return status
    complete = nv == n
    for i in range(n):
        trend[i] = 0.0
        seasonal[i] = 0.0
        rw[i] = 1.0
    # constants as plain (non-literal) values: one compiled specialisation per callee
    zero, one, three, minus_one = np.int64(0), np.int64(1), np.int64(3), np.int64(-1)
    yes, no_ = np.bool_(True), np.bool_(False)
    use_w = no_  # weights are all 1 until the first robustness update
    n_passes = no + 1
    for pass_index in range(n_passes):
        for _ in range(ni):
            for i in range(n):
                work_d[i] = y[i] - trend[i]
            for j in range(p):
                k = (n - 1 - j) // p + 1
                knv = sub_nv[j]
                if periodic and flavor == _STLPLUS:
                    sw = 0.0
                    swy = 0.0
                    for a in range(knv):
                        idx = (sub_xv[sub_start[j] + a] - 1) * p + j
                        sw += rw[idx]
                        swy += rw[idx] * work_d[idx]
                    for m in range(k + 2):
                        cycle[m * p + j] = swy / sw
                else:  # contiguous copies: unit-stride loops vectorise
                    for i in range(k):
                        sub_y[i] = work_d[i * p + j]
                        sub_w[i] = rw[i * p + j]
                    _loess(sub_y, sub_w, use_w, zero, one, sub_xv, sub_start[j], knv, knv == k, k,
                           ns, isdeg, nsjump, flavor, yes, cycle, j, p, fbuf, sbuf, tables[0])
            _moving_average(cycle, n + 2 * p, p, ma1)
            _moving_average(ma1, n + p + 1, p, ma2)
            _moving_average(ma2, n + 2, three, work_d)
            # stlplus quirk: the low-pass uses valid positions only, robustness-weighted
            lp_plus = flavor == _STLPLUS
            _loess(work_d, rw, use_w and lp_plus, zero, one, xv, zero, nv if lp_plus else n,
                   complete or not lp_plus, n, nl, ildeg, nljump, flavor, no_, low, minus_one,
                   one, fbuf, sbuf, tables[2])
            for i in range(n):
                seasonal[i] = cycle[p + i] - low[i]
                work_d[i] = y[i] - seasonal[i]
            _loess(work_d, rw, use_w, zero, one, xv, zero, nv, complete, n, nt, itdeg, ntjump,
                   flavor, no_, trend, minus_one, one, fbuf, sbuf, tables[1])
        if no > 0 and (flavor == _STLPLUS or pass_index < n_passes - 1):
            _robustness_weights(y, seasonal, trend, valid, n, flavor, rw, resid)
            use_w = yes
    if periodic and flavor == _STATSMODELS:  # R stl: seasonal replaced by its cycle means
        for j in range(p):
            k = (n - 1 - j) // p + 1
            total = 0.0
            for i in range(k):
                total += seasonal[i * p + j]
            for i in range(k):
                seasonal[i * p + j] = total / k
    for i in range(n):
        if not (math.isfinite(seasonal[i]) and math.isfinite(trend[i])):
            for t in range(n):
                seasonal[t] = trend[t] = rw[t] = np.nan
            return _FIT_FAILED
    return _OK


# Series (non-periodic fits) are decomposed up to BLOCK at a time, stored as (time, series)
# so that every loop over the block is a SIMD loop across series, the block's lanes. A
# block of gap-free series (degrees <= 1, windows tabled) shares the loess tables: each
# evaluation applies one kernel row to all lanes (``_block_loess``). Any other block
# (gaps, degree 2, untabled windows) weighs each lane's points with its own valid mask
# and neighbourhood (``_block_loess_masked``). The width is a run-time
# value (a constant trip count would be unrolled, not vectorised) and large enough to
# amortise the vectoriser's run-time aliasing checks.
BLOCK = 32
# A block holds about 16 arrays of (T, BLOCK) float64 per thread: longer series than
# this budget allows go one by one (the A-like case of benchmarks/stl.py, T = 2^19).
BLOCK_MAX_BYTES = 256 << 20


@jit(fastmath=_FAST, error_model="numpy")
def _block_finish(fbuf, sbuf, n_eval, jump, n_full, extend, flavor, out, out_row0, stride,
                  acc):
    """The tail of ``_loess`` for BLOCK lanes: fits ``fbuf`` (slopes ``sbuf``) of the
    evaluations interpolated to rows ``out_row0 + t * stride`` of ``out``, t = 1..n_full,
    and the extrapolated ends (t = 0, n_full + 1) if ``extend``."""
    width = fbuf.shape[1]
    if jump == 1:
        for e in range(n_full):
            for b in range(width):
                out[out_row0 + (e + 1) * stride, b] = fbuf[e, b]
    elif flavor == _STATSMODELS:  # linear interpolation
        for e in range(n_eval - 1):
            m0 = 1 + e * jump
            m1 = min(m0 + jump, n_full)
            for b in range(width):
                acc[0, b] = (fbuf[e + 1, b] - fbuf[e, b]) / (m1 - m0)
            for t in range(m0, m1):
                for b in range(width):
                    out[out_row0 + t * stride, b] = fbuf[e, b] + acc[0, b] * (t - m0)
        for b in range(width):
            out[out_row0 + n_full * stride, b] = fbuf[n_eval - 1, b]
    else:
        finite = True
        for e in range(n_eval):
            for b in range(width):
                finite &= np.isfinite(fbuf[e, b])
        if finite:  # every fit succeeded: the Hermite cubics in row order
            for e in range(n_eval - 1):
                m0 = 1 + e * jump
                m1 = min(m0 + jump, n_full)
                delta = float(m1 - m0)
                for b in range(width):
                    out[out_row0 + m0 * stride, b] = fbuf[e, b]
                for t in range(m0 + 1, m1):
                    c0, c1, d0, d1 = _hermite_basis((t - m0) / delta)
                    for b in range(width):
                        out[out_row0 + t * stride, b] = (
                            c0 * fbuf[e, b] + c1 * fbuf[e + 1, b] + d0 * delta * sbuf[e, b]
                            + d1 * delta * sbuf[e + 1, b])
            for b in range(width):
                out[out_row0 + n_full * stride, b] = fbuf[n_eval - 1, b]
        else:  # lane by lane, skipping the failed fits
            for b in range(width):
                _hermite(fbuf[:, b], sbuf[:, b], n_eval, jump, n_full, out[:, b], out_row0,
                         stride)
    if extend:
        for b in range(width):
            f0 = fbuf[n_eval, b]
            f1 = fbuf[n_eval + 1, b]
            if flavor == _STATSMODELS:
                if not np.isfinite(f0):
                    f0 = out[out_row0 + stride, b]
                if not np.isfinite(f1):
                    f1 = out[out_row0 + n_full * stride, b]
            out[out_row0, b] = f0
            out[out_row0 + (n_full + 1) * stride, b] = f1


@jit(fastmath=_FAST, error_model="numpy")
def _block_loess(vals, rw, use_w, row0, stride, n_full, window, deg, jump, extend, flavor, out,
                 out_row0, fbuf, sbuf, acc, tab):
    """``_loess`` (tabled gap-free window, degree <= 1) of the BLOCK columns of ``vals``:
    position t at row ``row0 + (t - 1) * stride``, its fit written to row
    ``out_row0 + t * stride`` of ``out`` (t = 0 and n_full + 1 too if ``extend``)."""
    width = vals.shape[1]  # a run-time trip count: LLVM vectorises these loops
    jump, n_eval, n_total = _eval_counts(n_full, jump, extend)
    half = (window - 1) // 2
    threshold = 0.001 * (n_full - 1)
    stlplus = flavor == _STLPLUS
    for e in range(n_total):
        m, row, lo, mirror = _table_position(e, n_eval, jump, n_full, half, window)
        for a in range(5):
            for b in range(width):
                acc[a, b] = 0.0
        if use_w:  # tricube times robustness weights: weighted moments per series
            for i in range(window):
                ii = window - 1 - i if mirror else i
                tri = tab[_TRI, row, ii]
                v = -tab[_OFFSET, row, ii] if mirror else tab[_OFFSET, row, ii]
                r = row0 + (lo + i) * stride
                for b in range(width):
                    wt = tri * rw[r, b]
                    wv = wt * v
                    yv = vals[r, b]
                    acc[0, b] += wt
                    acc[1, b] += wv
                    acc[2, b] += wv * v
                    acc[3, b] += wt * yv
                    acc[4, b] += wv * yv
            h = tab[_SCALARS, row, 0]
            nearest = row0 + min(max(m - 1, 0), n_full - 1) * stride
            for b in range(width):
                value, slope = _fit_from_moments(acc[0, b], acc[1, b], acc[2, b], 0.0, 0.0,
                                                 acc[3, b], acc[4, b], 0.0, h, deg, flavor,
                                                 n_full)
                if not stlplus and e < n_eval and not math.isfinite(value):
                    value = vals[nearest, b]  # no weight: the nearest value (statsmodels)
                fbuf[e, b] = value
                sbuf[e, b] = slope
        else:  # fixed linear filters: the fit, and the slope for stlplus' interpolation
            kind = _VALUE
            if deg == 0 or not (stlplus or tab[_SCALARS, row, 1] > threshold):
                kind = _MEAN
            for i in range(window):
                c = tab[kind, row, window - 1 - i] if mirror else tab[kind, row, i]
                r = row0 + (lo + i) * stride
                for b in range(width):
                    acc[0, b] += c * vals[r, b]
            if stlplus and jump > 1:
                for i in range(window):
                    c = -tab[_SLOPE, row, window - 1 - i] if mirror else tab[_SLOPE, row, i]
                    r = row0 + (lo + i) * stride
                    for b in range(width):
                        acc[1, b] += c * vals[r, b]
            for b in range(width):
                fbuf[e, b] = acc[0, b]
                sbuf[e, b] = acc[1, b]
    _block_finish(fbuf, sbuf, n_eval, jump, n_full, extend, flavor, out, out_row0, stride, acc)


@jit(plain_args=True)
def _lane_neighbourhoods(xv, xstart, nv, n_full, window, jump, extend, flavor, lane, nb_h,
                         nb_span, e0):
    """Neighbourhoods of the evaluations of a loess over one lane's valid positions
    xv[xstart:xstart + nv] (1-based, increasing, within 1..n_full), written to row e0 + e
    (evaluation e): the radius h of the q = min(window, nv) nearest valid points (widened
    as in ``_local_fit`` when window > nv) in column ``lane``; ``nb_span[e0 + e]`` (first,
    last position) grows to cover the lane's window. The evaluation points increase and
    so does the window start: a pointer moved forward, O(nv + evaluations) per lane, that
    gives ``_neighbourhood``'s windows without a search per point. Which of two points
    at the same distance is taken does not matter: both are at distance h, weight 0."""
    jump, n_eval, n_total = _eval_counts(n_full, jump, extend)
    q = min(window, nv)
    widen = 0.0
    if window > nv:
        widen = (window - nv) / 2.0 if flavor == _STLPLUS else float((window - nv) // 2)
    lo = 0  # the q nearest are xv[xstart + lo:][:q]
    for e in range(n_total):
        m = _eval_position(e, n_eval, jump, n_full)
        if e == n_eval:  # m = 0, then n_full + 1
            lo = 0
        # slide while the point after the window is strictly nearer than its first one
        while lo + q < nv and m - xv[xstart + lo] > xv[xstart + lo + q] - m:
            lo += 1
        x_lo, x_hi = xv[xstart + lo], xv[xstart + lo + q - 1]
        nb_h[e0 + e, lane] = max(m - x_lo, x_hi - m) + widen
        nb_span[e0 + e, 0] = min(nb_span[e0 + e, 0], x_lo)
        nb_span[e0 + e, 1] = max(nb_span[e0 + e, 1], x_hi)


@jit(fastmath=_FAST, error_model="numpy")
def _nearest_valid(mask, lane, m, n_full, row0, stride):
    """Block row of the valid position (1..n_full, ``mask`` > 0 in column ``lane``)
    nearest to m, the left one of two at the same distance (``_neighbourhood``'s)."""
    for d in range(n_full + 1):
        if 1 <= m - d <= n_full and mask[row0 + (m - d - 1) * stride, lane] > 0.0:
            return row0 + (m - d - 1) * stride
        if 1 <= m + d <= n_full and mask[row0 + (m + d - 1) * stride, lane] > 0.0:
            return row0 + (m + d - 1) * stride
    return row0  # no valid position: a lane whose status is not OK


# Moments accumulated by _block_loess_masked (rows of acc), then its per-lane constants.
_S0, _S1, _S2, _T0, _T1, _S3, _S4, _T2, _INV_H, _CUT, _FULL = range(11)


@jit(inline="always", fastmath=_FAST, error_model="numpy")
def _cut_tricube(r, inv_h, cut):
    """Tricube weight of a point at distance r, 0 beyond ``cut`` (a select, so that the
    lane loop stays SIMD); 1 exactly at r = 0."""
    c = r * inv_h
    c = 1.0 - c * c * c
    return c * c * c if r <= cut else 0.0


@jit(inline="always", fastmath=_FAST, error_model="numpy")
def _masked_weight(r, inv_h, cut, full, w):
    """Tricube weight of a point at distance r (0 beyond ``cut``, 1 up to ``full``)
    times its mask/robustness weight ``w``."""
    return (1.0 if r <= full else _cut_tricube(r, inv_h, cut)) * w


@jit(fastmath=_FAST, error_model="numpy", plain_args=True)
def _block_loess_masked(vals, mask, wmask, row0, stride, n_full, deg, jump, extend, flavor, out,
                        out_row0, nb_h, nb_span, e0, fbuf, sbuf, acc):
    """``_loess`` of the BLOCK lanes of ``vals`` (rows and positions as ``_block_loess``),
    each lane with its own gaps: a point weighs ``wmask`` (0 where missing, else its
    robustness weight; ``mask``: 0/1 valid) times the tricube of its lane's
    neighbourhood, found beforehand by ``_lane_neighbourhoods`` (row e0 + e). Every evaluation runs over the union of the
    lanes' windows; the weighted moments are sums over those rows for all lanes at once."""
    width = vals.shape[1]
    jump, n_eval, n_total = _eval_counts(n_full, jump, extend)
    stlplus = flavor == _STLPLUS
    for e in range(n_total):
        m = _eval_position(e, n_eval, jump, n_full)
        k = e0 + e
        for a in range(_INV_H):
            for b in range(width):
                acc[a, b] = 0.0
        for b in range(width):
            h = nb_h[k, b]
            acc[_INV_H, b] = 1.0 / h
            # stlplus: weight 0 at r >= h, i.e. r > h - 1/2 (r integer, h a multiple of
            # 1/2); Fortran: 0 at r > 0.999h, 1 at r <= 0.001h
            acc[_CUT, b] = h - 0.5 if stlplus else 0.999 * h
            acc[_FULL, b] = -1.0 if stlplus else 0.001 * h
        # distances are integers and the tricube of 0 is 1: the weight-1 rule matters
        # only where 0.001 h >= 1 (h >= 1000), left to the row-by-row loop below
        fulls = False
        for b in range(width):
            fulls |= acc[_FULL, b] >= 1.0
        t = nb_span[k, 0]
        t_stop = nb_span[k, 1] + 1
        if deg <= 1 and not fulls:  # in the unscaled offset d: rescaled below
            # four rows per pass over the accumulators: their loads and stores, not the
            # arithmetic, bound a row-by-row pass (the sums keep the order of the rows)
            while t + 4 <= t_stop:
                row = row0 + (t - 1) * stride
                d0 = float(t - m)
                d1 = d0 + 1.0
                d2 = d0 + 2.0
                d3 = d0 + 3.0
                r0, r1, r2, r3 = abs(d0), abs(d1), abs(d2), abs(d3)
                for b in range(width):
                    inv_h, cut = acc[_INV_H, b], acc[_CUT, b]
                    w0 = _cut_tricube(r0, inv_h, cut) * wmask[row, b]
                    w1 = _cut_tricube(r1, inv_h, cut) * wmask[row + stride, b]
                    w2 = _cut_tricube(r2, inv_h, cut) * wmask[row + 2 * stride, b]
                    w3 = _cut_tricube(r3, inv_h, cut) * wmask[row + 3 * stride, b]
                    y0, y1 = vals[row, b], vals[row + stride, b]
                    y2, y3 = vals[row + 2 * stride, b], vals[row + 3 * stride, b]
                    wd0, wd1, wd2, wd3 = w0 * d0, w1 * d1, w2 * d2, w3 * d3
                    acc[_S0, b] = acc[_S0, b] + w0 + w1 + w2 + w3
                    acc[_S1, b] = acc[_S1, b] + wd0 + wd1 + wd2 + wd3
                    acc[_S2, b] = acc[_S2, b] + wd0 * d0 + wd1 * d1 + wd2 * d2 + wd3 * d3
                    acc[_T0, b] = acc[_T0, b] + w0 * y0 + w1 * y1 + w2 * y2 + w3 * y3
                    acc[_T1, b] = acc[_T1, b] + wd0 * y0 + wd1 * y1 + wd2 * y2 + wd3 * y3
                t += 4
        for t in range(t, t_stop):
            row = row0 + (t - 1) * stride
            d = float(t - m)
            r = abs(d)
            if deg <= 1:
                for b in range(width):
                    wt = _masked_weight(r, acc[_INV_H, b], acc[_CUT, b], acc[_FULL, b],
                                        wmask[row, b])
                    wd = wt * d
                    yv = vals[row, b]
                    acc[_S0, b] += wt
                    acc[_S1, b] += wd
                    acc[_S2, b] += wd * d
                    acc[_T0, b] += wt * yv
                    acc[_T1, b] += wd * yv
            else:  # in the scaled offset v = d / h (unscaled fourth moments lose digits)
                for b in range(width):
                    inv_h = acc[_INV_H, b]
                    wt = _masked_weight(r, inv_h, acc[_CUT, b], acc[_FULL, b], wmask[row, b])
                    v = d * inv_h
                    wv = wt * v
                    wv2 = wv * v
                    yv = vals[row, b]
                    acc[_S0, b] += wt
                    acc[_S1, b] += wv
                    acc[_S2, b] += wv2
                    acc[_S3, b] += wv2 * v
                    acc[_S4, b] += wv2 * v * v
                    acc[_T0, b] += wt * yv
                    acc[_T1, b] += wv * yv
                    acc[_T2, b] += wv2 * yv
        if deg <= 1:  # to the scaled offsets v = d / h
            for b in range(width):
                acc[_S1, b] *= acc[_INV_H, b]
                acc[_T1, b] *= acc[_INV_H, b]
                acc[_S2, b] *= acc[_INV_H, b] * acc[_INV_H, b]
        for b in range(width):
            value, slope = _fit_from_moments(
                acc[_S0, b], acc[_S1, b], acc[_S2, b], acc[_S3, b], acc[_S4, b], acc[_T0, b],
                acc[_T1, b], acc[_T2, b], nb_h[k, b], deg, flavor, n_full)
            if not stlplus and e < n_eval and not math.isfinite(value):
                # no weight: the nearest value (statsmodels)
                value = vals[_nearest_valid(mask, b, m, n_full, row0, stride), b]
            fbuf[e, b] = value
            sbuf[e, b] = slope
    _block_finish(fbuf, sbuf, n_eval, jump, n_full, extend, flavor, out, out_row0, stride, acc)


@jit(fastmath=_FAST)
def _block_moving_average(x, n, length, ave, acc):
    """``_moving_average`` of the BLOCK columns of x[:n]."""
    width = x.shape[1]
    for b in range(width):
        acc[0, b] = 0.0
    for i in range(length):
        for b in range(width):
            acc[0, b] += x[i, b]
    for b in range(width):
        ave[0, b] = acc[0, b] / length
    for j in range(1, n - length + 1):
        for b in range(width):
            acc[0, b] += x[j + length - 1, b] - x[j - 1, b]
            ave[j, b] = acc[0, b] / length


@jit()
def _neighbourhood_rows(prm):
    """Rows of the per-evaluation neighbourhood arrays of a masked block: the seasonal
    evaluations (all cycle-subseries, with their extrapolations), then the trend's, then
    the low-pass'."""
    n, p = prm[0], prm[1]
    rows = 0
    for j in range(p):
        rows += _eval_counts((n - 1 - j) // p + 1, prm[8], True)[2]
    return rows, _eval_counts(n, prm[9], False)[2], _eval_counts(n, prm[10], False)[2]


@jit()
def _block_status(y, prm, masked, low_masked, status, mask, nb_h, nb_span, valid, xv, sub_xv,
                  sub_start, sub_nv):
    """Per lane (column) of the block y (NaN where missing): status, 0/1 valid ``mask``,
    missing values set to 0 in y; if ``masked``, the neighbourhoods of every seasonal and trend evaluation, and of the
    low-pass' if ``low_masked`` (a lane whose status is not OK gets a dummy one and no
    share of the spans)."""
    n, p, ns, nt, nl = prm[0], prm[1], prm[2], prm[3], prm[4]
    isdeg, nsjump, ntjump, nljump, flavor = prm[5], prm[8], prm[9], prm[10], prm[14]
    width = y.shape[1]
    n_seasonal, n_trend, n_low = _neighbourhood_rows(prm)
    yes, no_ = np.bool_(True), np.bool_(False)
    if masked:
        for k in range(n_seasonal + n_trend + n_low):
            nb_span[k, 0] = n + 2  # empty until a lane's window widens it
            nb_span[k, 1] = -1
            for b in range(width):
                nb_h[k, b] = 1.0
        if low_masked and flavor == _STATSMODELS:  # the low-pass: all dates, unweighted
            for i in range(n):
                xv[i] = i + 1
            for b in range(width):
                _lane_neighbourhoods(xv, 0, n, n, nl, nljump, no_, flavor, b, nb_h, nb_span,
                                     n_seasonal + n_trend)
    for b in range(width):
        status[b], nv = _valid_positions(y[:, b], n, p, isdeg, 0, flavor, valid, xv, sub_xv,
                                         sub_start, sub_nv)
        if not masked or status[b] != _OK:
            continue
        e0 = 0
        for j in range(p):
            k = (n - 1 - j) // p + 1
            _lane_neighbourhoods(sub_xv, sub_start[j], sub_nv[j], k, ns, nsjump, yes, flavor,
                                 b, nb_h, nb_span, e0)
            e0 += _eval_counts(k, nsjump, True)[2]
        _lane_neighbourhoods(xv, 0, nv, n, nt, ntjump, no_, flavor, b, nb_h, nb_span, e0)
        if low_masked and flavor == _STLPLUS:  # stlplus' low-pass: valid dates only
            _lane_neighbourhoods(xv, 0, nv, n, nl, nljump, no_, flavor, b, nb_h, nb_span,
                                 e0 + n_trend)
    for i in range(n):
        for b in range(width):
            ok = np.isfinite(y[i, b])
            mask[i, b] = 1.0 if ok and status[b] == _OK else 0.0
            y[i, b] = y[i, b] if ok else 0.0


@jit(error_model="numpy")
def _block_robustness_weights(y, seasonal, trend, mask, n, flavor, rw, wmask, resid,
                              lane_resid, counts, scale):
    """``_robustness_weights`` of the BLOCK lanes: residuals and weights in row order
    (SIMD across lanes), each lane's valid residuals gathered into a row of
    ``lane_resid`` for its scale."""
    width = y.shape[1]
    for b in range(width):
        counts[b] = 0
    for i in range(n):
        for b in range(width):
            resid[i, b] = abs(y[i, b] - seasonal[i, b] - trend[i, b])
        for b in range(width):
            if mask[i, b] > 0.0:
                lane_resid[b, counts[b]] = resid[i, b]
                counts[b] += 1
    for b in range(width):
        scale[b] = _robustness_scale(lane_resid[b], counts[b], n, flavor)
    for i in range(n):
        for b in range(width):
            w = _bisquare(resid[i, b], scale[b], flavor)
            rw[i, b] = w if mask[i, b] > 0.0 else 1.0
            wmask[i, b] = mask[i, b] * w


@jit()
def _decompose_block(y, prm, tabled, low_tabled, seasonal, trend, rw, status, mask,
                     wmask, ones, work_d, cycle, ma1, ma2, low, fbuf, sbuf, acc, nb_h, nb_span, lane_resid, counts, valid, xv, sub_xv, sub_start, sub_nv,
                     tables):
    """``decompose_one`` of the BLOCK series in the columns of y (non-periodic fits; NaN
    where missing, set to 0 on return).
    ``tabled``: the loess tables cover every window (degrees <= 1), used if the block
    has no gap; otherwise every loess is ``_block_loess_masked``, except the statsmodels
    low-pass (all dates, so gap-free) where ``low_tabled``."""
    n, p, ns, nt, nl = prm[0], prm[1], prm[2], prm[3], prm[4]
    isdeg, itdeg, ildeg, nsjump, ntjump, nljump = prm[5], prm[6], prm[7], prm[8], prm[9], prm[10]
    ni, no, flavor = prm[11], prm[12], prm[14]
    width = y.shape[1]
    masked = not tabled
    for i in range(n):
        for b in range(width):
            if not np.isfinite(y[i, b]):
                masked = True
    low_masked = not low_tabled or flavor == _STLPLUS  # stlplus' low-pass skips the gaps
    _block_status(y, prm, masked, low_masked, status, mask, nb_h, nb_span, valid, xv, sub_xv,
                  sub_start, sub_nv)
    n_seasonal, n_trend, _ = _neighbourhood_rows(prm)
    for i in range(n):
        for b in range(width):
            trend[i, b] = 0.0
            rw[i, b] = 1.0
            wmask[i, b] = mask[i, b]
            ones[i, b] = 1.0
    # constants as plain (non-literal) values: one compiled specialisation per callee
    zero, one, three, minus_one = np.int64(0), np.int64(1), np.int64(3), np.int64(-1)
    yes, no_ = np.bool_(True), np.bool_(False)
    use_w = no_
    n_passes = no + 1
    for pass_index in range(n_passes):
        for _ in range(ni):
            for i in range(n):
                for b in range(width):
                    work_d[i, b] = y[i, b] - trend[i, b]
            e0 = 0
            for j in range(p):
                k = (n - 1 - j) // p + 1
                if masked:
                    _block_loess_masked(work_d, mask, wmask, j, p, k, isdeg, nsjump, yes, flavor,
                                        cycle, j, nb_h, nb_span, e0, fbuf, sbuf, acc)
                    e0 += _eval_counts(k, nsjump, True)[2]
                else:
                    _block_loess(work_d, rw, use_w, j, p, k, ns, isdeg, nsjump, yes, flavor,
                                 cycle, j, fbuf, sbuf, acc, tables[0])
            _block_moving_average(cycle, n + 2 * p, p, ma1, acc)
            _block_moving_average(ma1, n + p + 1, p, ma2, acc)
            _block_moving_average(ma2, n + 2, three, work_d, acc)
            if low_tabled and flavor == _STATSMODELS:  # all dates, unweighted
                _block_loess(work_d, rw, no_, zero, one, n, nl, ildeg, nljump, no_, flavor, low,
                             minus_one, fbuf, sbuf, acc, tables[2])
            elif not masked:  # stlplus without gaps: robustness-weighted
                _block_loess(work_d, rw, use_w, zero, one, n, nl, ildeg, nljump, no_, flavor,
                             low, minus_one, fbuf, sbuf, acc, tables[2])
            elif flavor == _STLPLUS:  # valid dates only, robustness-weighted
                _block_loess_masked(work_d, mask, wmask, zero, one, n, ildeg, nljump, no_, flavor,
                                    low, minus_one, nb_h, nb_span, n_seasonal + n_trend, fbuf,
                                    sbuf, acc)
            else:  # all dates, unweighted, untabled window
                _block_loess_masked(work_d, ones, ones, zero, one, n, ildeg, nljump, no_, flavor,
                                    low, minus_one, nb_h, nb_span, n_seasonal + n_trend, fbuf,
                                    sbuf, acc)
            for i in range(n):
                for b in range(width):
                    seasonal[i, b] = cycle[p + i, b] - low[i, b]
                    work_d[i, b] = y[i, b] - seasonal[i, b]
            if masked:
                _block_loess_masked(work_d, mask, wmask, zero, one, n, itdeg, ntjump, no_, flavor,
                                    trend, minus_one, nb_h, nb_span, n_seasonal, fbuf, sbuf,
                                    acc)
            else:
                _block_loess(work_d, rw, use_w, zero, one, n, nt, itdeg, ntjump, no_, flavor,
                             trend, minus_one, fbuf, sbuf, acc, tables[1])
        if no > 0 and (flavor == _STLPLUS or pass_index < n_passes - 1):
            _block_robustness_weights(y, seasonal, trend, mask, n, flavor, rw, wmask, ma2,
                                      lane_resid, counts, fbuf[0])
            use_w = yes
    for i in range(n):
        for b in range(width):
            if status[b] == _OK and not (np.isfinite(seasonal[i, b])
                                         and np.isfinite(trend[i, b])):
                status[b] = _FIT_FAILED
    for i in range(n):
        for b in range(width):
            if status[b] != _OK:
                seasonal[i, b] = trend[i, b] = rw[i, b] = np.nan


@jit(nogil=True)
def _decompose_batch(c, n_chunks, values, has_nodata, nodata, prm, centered_t, denominator, tables,
                     tabled, low_tabled, n_blocked, blocked, one_by_one, out_s, out_t, out_r, out_w, slope,
                     amplitude, status):
    """STL of the series (columns) of the time-first data ``values`` (missing: NaN, +-inf
    or ``nodata``), written time-first to ``out_s``, ``out_t``, ``out_r`` (remainder) and
    ``out_w`` (robustness weights), with each series' trend slope against ``centered_t``
    (sum of squares ``denominator``) and seasonal amplitude: the first ``n_blocked``
    BLOCK at a time, read and written a date (row) at a time, the others (periodic fits,
    very long series) one by one; ``blocked`` and ``one_by_one`` are None when there are
    none of either (numba then compiles the kernel without that path: ``is None`` on an
    argument prunes the branch; a periodic STL, classic BFAST's start, has no blocks).
    This call does chunk ``c`` of ``n_chunks`` (a task of :func:`tscube._threads.run_tasks`)."""
    n, n_series = values.shape
    p = prm[1]
    n_blocks = (n_blocked + BLOCK - 1) // BLOCK
    n_single = n_series - n_blocked
    n_seasonal, n_trend, n_low = _neighbourhood_rows(prm)
    n_nb = n_seasonal + n_trend + n_low
    valid = np.empty(n, dtype=np.bool_)
    xv = np.empty(n, dtype=np.int64)
    sub_xv = np.empty(n, dtype=np.int64)
    sub_start = np.empty(p, dtype=np.int64)
    sub_nv = np.empty(p, dtype=np.int64)
    cycle_means = np.empty(p)
    block_first = c * n_blocks // n_chunks
    block_stop = (c + 1) * n_blocks // n_chunks
    width = 0
    if blocked is not None:  # else pruned at compile time: a kernel for calls without blocks lacks their code
        for block in range(block_first, block_stop):
            if width != min(BLOCK, n_blocked - block * BLOCK):  # first or short last block
                width = min(BLOCK, n_blocked - block * BLOCK)
                y_b = np.empty((n, width))
                seasonal_b = np.empty((n, width))
                trend_b = np.empty((n, width))
                rw_b = np.empty((n, width))
                status_b = np.empty(width, dtype=np.int64)
                mask_b = np.empty((n, width))
                wmask_b = np.empty((n, width))
                ones_b = np.empty((n, width))
                work_b = np.empty((n + 2, width))
                cycle_b = np.empty((n + 2 * p, width))
                ma1_b = np.empty((n + p + 1, width))
                ma2_b = np.empty((n + 2, width))
                low_b = np.empty((n, width))
                fbuf_b = np.empty((n + 2, width))
                sbuf_b = np.empty((n + 2, width))
                acc = np.empty((_FULL + 1, width))
                lane_resid = np.empty((width, n))
                counts = np.empty(width, dtype=np.int64)
                nb_h = np.empty((n_nb, width))
                nb_span = np.empty((n_nb, 2), dtype=np.int64)
            s0 = block * BLOCK
            for i in range(n):  # one pass over the dates, BLOCK values of each
                for b in range(width):
                    y_b[i, b] = clean_value(values[i, s0 + b], has_nodata, nodata)
            _decompose_block(y_b, prm, tabled, low_tabled, seasonal_b, trend_b, rw_b,
                             status_b, mask_b, wmask_b, ones_b, work_b, cycle_b, ma1_b, ma2_b,
                             low_b, fbuf_b, sbuf_b, acc, nb_h, nb_span, lane_resid,
                             counts, valid, xv, sub_xv, sub_start, sub_nv, tables)
            for i in range(n):
                for b in range(width):
                    lane = s0 + b
                    fit_s, fit_t = seasonal_b[i, b], trend_b[i, b]
                    out_s[i, lane] = fit_s
                    out_t[i, lane] = fit_t
                    # y_b is 0 where missing: the remainder is NaN there, as y - s - t
                    out_r[i, lane] = y_b[i, b] - fit_s - fit_t if mask_b[i, b] > 0.0 else np.nan
                    out_w[i, lane] = rw_b[i, b]
            for b in range(width):
                status[s0 + b] = status_b[b]
                slope[s0 + b], amplitude[s0 + b] = series_summaries(
                    trend_b[:, b], seasonal_b[:, b], centered_t, denominator, p, cycle_means)
    if one_by_one is None:
        return  # pruned at compile time: a kernel for calls without such series lacks this code
    start = n_blocked + c * n_single // n_chunks
    stop = n_blocked + (c + 1) * n_single // n_chunks
    if start == stop:
        return
    y = np.empty(n)
    seasonal = np.empty(n)
    trend = np.empty(n)
    rw = np.empty(n)
    work_d = np.empty(n + 2, dtype=np.float64)
    cycle = np.empty(n + 2 * p, dtype=np.float64)
    ma1 = np.empty(n + p + 1, dtype=np.float64)
    ma2 = np.empty(n + 2, dtype=np.float64)
    low = np.empty(n, dtype=np.float64)
    fbuf = np.empty(n + 2, dtype=np.float64)
    sbuf = np.empty(n + 2, dtype=np.float64)
    resid = np.empty(n, dtype=np.float64)
    sub_y = np.empty(n // p + 1, dtype=np.float64)
    sub_w = np.empty(n // p + 1, dtype=np.float64)
    for lane in range(start, stop):
        for i in range(n):
            y[i] = clean_value(values[i, lane], has_nodata, nodata)
        status[lane] = decompose_one(y, prm, seasonal, trend, rw, valid, xv, sub_xv,
                                      sub_start, sub_nv, work_d, cycle, ma1, ma2, low,
                                      fbuf, sbuf, resid, tables, sub_y, sub_w)
        for i in range(n):
            out_s[i, lane] = seasonal[i]
            out_t[i, lane] = trend[i]
            out_r[i, lane] = y[i] - seasonal[i] - trend[i]
            out_w[i, lane] = rw[i]
        slope[lane], amplitude[lane] = series_summaries(trend, seasonal, centered_t,
                                                        denominator, p, cycle_means)


def code_tables(codes):
    """Loess tables of the seasonal, trend and low-pass windows (read-only, shared by all
    threads); a window above TABLE_MAX_WINDOW or the series length gets none."""
    n = codes[0]
    windows = [w if w <= min(TABLE_MAX_WINDOW, n) else 0 for w in codes[2:5]]
    width = max(max(windows), 1)
    tables = np.zeros((3, 6, width // 2 + 2, width), dtype=np.float64)
    for index, window in enumerate(windows):
        if window:
            _build_table(window, codes[5 + index], codes[14], tables[index])
    return tables


def _tables_cover(codes, tables, loesses=(0, 1, 2)):
    """Whether the loess tables serve the ``loesses`` (0 seasonal, 1 trend, 2 low-pass)
    of a gap-free series: not periodic, degrees <= 1 and windows tabled, non-singular
    and no longer than the (shortest cycle-sub)series."""
    n, period = codes[0], codes[1]
    if codes[13]:
        return False
    for index in loesses:
        window, deg = codes[2 + index], codes[5 + index]
        if deg > 1:
            return False
        length = n // period if index == 0 else n
        if window > min(length, TABLE_MAX_WINDOW) or window < 1:
            return False
        half = (window - 1) // 2
        if deg == 1 and not (tables[index, _SCALARS, : half + 2, 2] > 0.0).all():
            return False
    return True


def param_codes(n: int, prm: StlParams) -> np.ndarray:
    """The int64 parameter vector of :func:`decompose_one` for series of length ``n``."""
    return np.array([n, prm.period, prm.seasonal, prm.trend, prm.low_pass, prm.seasonal_deg,
                     prm.trend_deg, prm.low_pass_deg, prm.seasonal_jump, prm.trend_jump,
                     prm.low_pass_jump, prm.inner_iter, prm.outer_iter, int(prm.periodic),
                     _STLPLUS if prm.flavor == "stlplus" else _STATSMODELS], dtype=np.int64)


def decompose_cube(values, nodata, prm: StlParams, times, out_dtype):
    """cpu engine on time-first ``(T, n)`` data (any numeric dtype; missing: NaN, +-inf or
    ``nodata``): ``(seasonal, trend, remainder, weights)`` time-first in ``out_dtype``,
    the trend slopes against ``times``, the seasonal amplitudes and the statuses. Reads
    the data and writes the outputs in place, BLOCK series and one date at a time: no
    series-major copy of either."""
    n, n_series = values.shape
    values, has_nodata, marker = kernel_values(values, nodata)
    codes = param_codes(n, prm)
    outputs = [np.empty((n, n_series), out_dtype) for _ in range(4)]
    slope = np.empty(n_series)
    amplitude = np.empty(n_series)
    status = np.empty(n_series, dtype=np.int8)
    if n_series:
        tables = code_tables(codes)
        tabled = _tables_cover(codes, tables)
        low_tabled = _tables_cover(codes, tables, (2,))
        n_blocked = 0
        n_chunks = min(n_series, 8 * numba.get_num_threads())
        if not codes[13] and 16 * n * BLOCK * 8 <= BLOCK_MAX_BYTES:  # else one by one
            n_blocked = n_series
            # a chunk allocates its block's arrays once: few, large chunks
            n_chunks = min((n_series + BLOCK - 1) // BLOCK, numba.get_num_threads())
        run_tasks(_decompose_batch, n_chunks, values, has_nodata, marker, codes, *centred_times(times),
                  tables, tabled, low_tabled, n_blocked, True if n_blocked else None,
                  True if n_blocked < n_series else None, *outputs, slope, amplitude, status)
    return outputs, slope, amplitude, status


def decompose(data, prm: StlParams):
    """cpu engine on ``(n_series, T)`` float64 rows with NaN for missing: seasonal, trend
    and weights as ``(n_series, T)`` arrays, and the statuses."""
    n_series, n = data.shape
    (seasonal, trend, _, weights), _, _, status = decompose_cube(
        np.asarray(data, dtype=np.float64).T, None, prm, np.arange(n, dtype=np.float64), np.float64)
    return seasonal.T, trend.T, weights.T, status
