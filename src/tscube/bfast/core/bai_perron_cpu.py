"""Bai–Perron breakpoints for the cpu engines (numba), a pixel (or a group of pixels with
the same valid dates) per call.

Same rules as :mod:`tscube.bfast.core.bai_perron` (the reference), organised for speed:

* the segment RSS triangle, only where the programme reads it, start by start: for each
  segment start a fit of its first ``h`` rows from prefix sums of X'X and X'y (its RSS,
  for fewer than ``3k`` rows, from its residuals with the coefficients refined once),
  then rank-one (Sherman–Morrison) updates of ``(X'X)^{-1}``, ``RSS(i, j)`` the running
  sum of squared recursive residuals, each row's prediction from the segment's sums; the
  last segments from one pass backwards. Where R's recursion differs from least squares
  (the first ``k`` rows of a segment rank deficient) or the start is ill-conditioned,
  the recursion itself: while the first rows are rank deficient each step is a fit that
  drops aliased columns by R's ``lm.fit`` rule (a column's orthogonal part below 1e-7 of
  its norm), as strucchange's ``recresid`` does, here from the QR factor of the rows so
  far updated row by row (Givens) and the rule checked on it, with full refits by
  modified Gram–Schmidt QR where a column is too close to the bound to tell; the updates
  from the sums take over from the first full-rank prefix on (or ``k`` or ``2k`` rows
  later) where its Gram is well conditioned; for eight regressors (the default model)
  the starts after the first run 32 at a time side by side, as SIMD lanes
  (:mod:`tscube.bfast.core.start_lanes_cpu`);
* the dynamic programme over segment ends, ties to the earliest break, fed each start's
  segments as they come: the triangle is never stored;
* pixels with the same valid dates share everything above but their values: one
  records it, the others replay it together, the pixels as SIMD lanes.

The kernels that run the programme call its largest parts (the replay, R's recursion, the
lane starts, the last segments, a start's segments) through their addresses
(:data:`PROGRAMME_CALLS`, :class:`tscube._jit.Callees`): compiled once each and shared
by every kernel, never compiled into one.

Shared by ``bfast_monitor(history="BP")`` (:mod:`tscube.bfast.monitor.history._cpu`) and BFAST
Lite (:mod:`tscube.bfast.lite._cpu`).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ..._jit import Callees, function_type, jit
from .ols import LM_FIT_TOL
from .ols_cpu import cholesky_in_place, cholesky_solve
from .start_lanes_8_cpu import first_fits_lanes_8, full_rank_lanes_8, update_lanes_8
from .start_lanes_cpu import LANES, W_FULL, W_LOW, W_OK, W_ROWS, W_TOTAL, lane_scratch

#: Exact refits after the first full-rank fit, every k rows.
_REFITS = 2

#: A segment starts from one fit of its first h rows by prefix sums (normal equations)
#: where every equilibrated Cholesky pivot of their Gram (1 - R^2 of a column on the
#: ones before it) is at least this: cond(X'X) below ~1e5 k. Other starts take the
#: recursion from k rows with exact QR refits, as R.
_SUMS_MIN_PIVOT = 1e-5
#: From this many times k rows on, the first fit's RSS is ``y'y - b'X'y`` straight from
#: the sums (within 3e-11 of least squares at 3k rows). With fewer residual degrees of
#: freedom that difference of large sums loses up to 1e-4 of it (h = 12, k = 8) or all
#: of it (h = 9), so shorter first fits sum their squared residuals instead, the
#: coefficients refined once (:func:`refined_rss`; within 3e-8 of least squares at
#: h = 9, 3e-11 from h = 11; docs/bfast_lite.md).
_PLAIN_RSS_MIN_ROWS = 3
#: A shorter first fit must also have an equilibrated Gram of 1-norm condition number
#: at most this (the pivots alone let through near-singular Grams of 24 columns; 8
#: columns over 12 rows of a 16-day series reach 3e9): a backward-stable inverse, so
#: that the updates that follow stay the least squares of their rows.
_SHORT_MAX_COND = 1e10


@jit(allocates=False)
def _copy_square(memo, i, P):
    """``memo[i] = P`` element by element: an array-to-slice assignment compiles numba's
    shape-mismatch error formatting into the kernel (seconds of compile for a copy)."""
    for a in range(P.shape[0]):
        for b in range(P.shape[1]):
            memo[i, a, b] = P[a, b]


@jit(inline="always", error_model="numpy")
def _dot(a, b, first, step, count):
    """``sum(a[i] * b[first + step * i] for i < count)`` in four interleaved partial
    sums: a floating-point sum's chain of dependent additions, four times shorter."""
    s0 = s1 = s2 = s3 = 0.0
    quads = count - count % 4
    for i in range(0, quads, 4):
        s0 += a[i] * b[first + step * i]
        s1 += a[i + 1] * b[first + step * (i + 1)]
        s2 += a[i + 2] * b[first + step * (i + 2)]
        s3 += a[i + 3] * b[first + step * (i + 3)]
    for i in range(quads, count):
        s0 += a[i] * b[first + step * i]
    return (s0 + s1) + (s2 + s3)


@jit(error_model="numpy", plain_args=True, allocates=False)
def _upper_inverse(R, n, Rinv):
    """``Rinv[:n, :n]`` = the inverse of the upper triangle ``R[:n, :n]`` by back
    substitution (``Rinv``'s lower triangle left as it is: zeros). Row after row from the
    last: row ``a`` is ``-(sum over m > a of R[a, m] Rinv[m, :]) / R[a, a]``, each entry
    summed over ``m`` in ascending order (as a column-by-column substitution sums it:
    the same bits), the rows added whole, which vectorises (one entry at a time was a
    chain of dependent additions and divisions)."""
    for a in range(n - 1, -1, -1):
        row = Rinv[a, a + 1:n]  # views from index 0 (a loop over them vectorises)
        for c in range(n - a - 1):
            row[c] = 0.0
        for m in range(a + 1, n):
            r = R[a, m]
            later = Rinv[m, m:n]
            part = Rinv[a, m:n]
            for c in range(n - m):
                part[c] += r * later[c]
        d = R[a, a]
        for c in range(n - a - 1):
            row[c] = -row[c] / d
        Rinv[a, a] = 1.0 / d


@jit(error_model="numpy", plain_args=True)  # a per-segment set-up: one version for every caller's constants
def qr_fit_in_order(X, rows, y, first, step, count, Q, R, idx, beta, P):
    """OLS of ``count`` compacted rows (positions ``first + step * i``) with R's in-order
    aliasing, by modified Gram–Schmidt on the columns (scratch ``Q`` ``(k, T)``, a column
    per row: contiguous). Writes the coefficients (0 where aliased) to ``beta`` and
    ``(X_K'X_K)^{-1}`` of the kept columns K (zero elsewhere) to ``P``; returns the number
    of kept columns."""
    k = X.shape[1]
    nk = 0
    for j in range(k):
        for i in range(count):
            Q[nk, i] = X[rows[first + step * i], j]
        norm = math.sqrt(_dot(Q[nk], Q[nk], 0, 1, count))
        if norm == 0.0:
            continue
        for c in range(nk):
            R[c, nk] = 0.0
        for _ in range(2):  # Gram–Schmidt twice: orthogonal to working precision
            for c in range(nk):
                dot = _dot(Q[c], Q[nk], 0, 1, count)
                R[c, nk] += dot
                for i in range(count):
                    Q[nk, i] -= dot * Q[c, i]
        rest = math.sqrt(_dot(Q[nk], Q[nk], 0, 1, count))
        if rest < LM_FIT_TOL * norm:
            continue
        for i in range(count):
            Q[nk, i] /= rest
        R[nk, nk] = rest
        idx[nk] = j
        nk += 1
    for a in range(k):
        beta[a] = 0.0
        for b in range(k):
            P[a, b] = 0.0
    # R^{-1} in place of the upper triangle's columns (back substitution), then
    # beta = R^{-1} Q'y and P = R^{-1} R^{-T}
    Rinv = np.zeros((nk, nk))
    _upper_inverse(R, nk, Rinv)
    for c in range(nk):
        qy = _dot(Q[c], y, first, step, count)
        for a in range(c + 1):
            beta[idx[a]] += Rinv[a, c] * qy
    for a in range(nk):
        for b in range(nk):
            s = 0.0
            for m in range(max(a, b), nk):
                s += Rinv[a, m] * Rinv[b, m]
            P[idx[a], idx[b]] = s
    return nk


#: A segment fit comes from its Gram where every equilibrated Cholesky pivot (``1 - R^2``
#: of a column on the ones before it) is at least this: each column's part orthogonal to
#: the ones before it is then over 3e-3 of its norm, far from R's aliasing bound (1e-7),
#: so R's QR keeps every column and its fit is least squares ...
_GRAM_FIT_MIN_PIVOT = 1e-5
#: ... and where a bound of the condition number of the unit-diagonal Gram (k times the
#: trace of its inverse) is at most this: one refinement then gives QR's accuracy (the
#: pivots alone let near-singular Grams of R's 23-level season contrasts through,
#: whose fits came out 265 off R's).
_GRAM_FIT_MAX_COND = 1e8


@jit(error_model="numpy", plain_args=True, allocates=False)
def fit_in_order(X, XX, rows, y, first, count, Q, R, idx, beta, P):
    """:func:`qr_fit_in_order` of ``count`` compacted rows from ``first`` (step 1), where
    the rows are well conditioned (:data:`_GRAM_FIT_MIN_PIVOT`,
    :data:`_GRAM_FIT_MAX_COND`) from their Gram instead:
    Cholesky, then one refinement by the normal equations of the residuals (the corrected
    semi-normal equations: QR's accuracy, at a third of modified Gram–Schmidt's
    operations, twice, on the columns). ``P`` is left as it is then (only the
    coefficients, all kept); otherwise the outputs and scratch of
    :func:`qr_fit_in_order` (``Q`` with at least ``2k`` columns). ``XX``: each row's
    outer product ``x x'``, flat (:func:`outer_products`): the Gram is their sum, row
    after row (the bits of summing ``x_a x_b``), in one loop over the ``k²`` entries that
    the compiler vectorises (the loops of the triangle, ``a + 1`` long, it leaves scalar)."""
    k = X.shape[1]
    L = R
    d = Q[0, :k]
    u = Q[0, k:2 * k]
    gram = L.reshape(k * k)
    for a in range(k * k):
        gram[a] = 0.0
    for a in range(k):
        u[a] = 0.0
    for c in range(count):
        r = rows[first + c]
        products = XX[r]
        for a in range(k * k):
            gram[a] += products[a]
        v = y[first + c]
        for a in range(k):
            u[a] += X[r, a] * v
    for a in range(k):
        d[a] = L[a, a]
    if not cholesky_in_place(L, k, _GRAM_FIT_MIN_PIVOT):
        return qr_fit_in_order(X, rows, y, first, 1, count, Q, R, idx, beta, P)
    trace = 0.0  # of the unit-diagonal Gram's inverse: the columns of L^{-1}, scaled
    for j in range(k):
        beta[j] = 1.0 / L[j, j]
        column = beta[j] * beta[j]
        for a in range(j + 1, k):
            t = 0.0
            for m in range(j, a):
                t -= L[a, m] * beta[m]
            beta[a] = t / L[a, a]
            column += beta[a] * beta[a]
        trace += d[j] * column
    if not k * trace <= _GRAM_FIT_MAX_COND:
        return qr_fit_in_order(X, rows, y, first, 1, count, Q, R, idx, beta, P)
    cholesky_solve(L, u, k)
    for a in range(k):
        beta[a] = u[a]
        u[a] = 0.0
        idx[a] = a
    for c in range(count):  # X'e, then the correction
        r = rows[first + c]
        e = y[first + c]
        for a in range(k):
            e -= X[r, a] * beta[a]
        for a in range(k):
            u[a] += X[r, a] * e
    cholesky_solve(L, u, k)
    for a in range(k):
        beta[a] += u[a]
    return k


def outer_products(X: np.ndarray) -> np.ndarray:
    """Each row's outer product ``x x'`` of the design ``X`` (T, k), flat: (T, k²)
    (:func:`fit_in_order`'s ``XX``)."""
    return np.ascontiguousarray((X[:, :, None] * X[:, None, :]).reshape(X.shape[0], -1))


@jit()
def fit_residuals(X, rows, y, n, beta, e):
    """``e = y - X beta`` on the first ``n`` compacted rows (``y[i]`` of row ``rows[i]``)."""
    k = X.shape[1]
    for i in range(n):
        v = y[i]
        for a in range(k):
            v -= X[rows[i], a] * beta[a]
        e[i] = v


@jit(error_model="numpy", plain_args=True)
def recursive_residuals(X, rows, y, first, step, count, out, Q, R, idx, beta, P, Px, refits=_REFITS):
    """Recursive residuals (strucchange ``recresid``) of ``count`` compacted rows from
    position ``first`` by ``step`` (+1 forward, -1 reversed): ``count - k`` values to
    ``out``. Returns the number of rows of the first full-rank fit (``count + 1`` if none).
    After it, ``refits`` exact fits every k rows renew the Sherman–Morrison state.

    The products with ``P`` are taken row by row as R does: from the ill-conditioned
    ``k``-row start ``P`` is not symmetric to working precision, and the transposed (axpy)
    form, which vectorises, loses up to 1e-3 of a short segment's RSS there."""
    k = X.shape[1]
    full_at = count + 1
    for i in range(k, count):
        pos = first + step * i
        r = rows[pos]
        refit = full_at > count or (i - full_at) % k == 0 and i - full_at <= refits * k
        if refit:
            nk = qr_fit_in_order(X, rows, y, first, step, i, Q, R, idx, beta, P)
            if nk == k and full_at > count:
                full_at = i
        out[i - k] = recursive_residual(X, r, y[pos], beta, P, Px, full_at <= count)
    return full_at


@jit(error_model="numpy", plain_args=True)
def recursive_residual(X, r, value, beta, P, Px, update):
    """The standardised prediction error of row ``r`` of ``X`` (observed ``value``) from
    the fit ``beta``, ``P = (X'X)^{-1}`` of the rows before it; with ``update``, the
    Sherman–Morrison update of both by that row. Products with ``P`` row by row, as R."""
    k = X.shape[1]
    f = 1.0
    pred = 0.0
    for a in range(k):
        s = 0.0
        for b in range(k):
            s += P[a, b] * X[r, b]
        Px[a] = s
        f += X[r, a] * s
        pred += X[r, a] * beta[a]
    err = value - pred
    if update:
        for a in range(k):
            beta[a] += Px[a] * err / f
        for a in range(k):
            for b in range(k):
                P[a, b] -= Px[a] * Px[b] / f
    return err / math.sqrt(f)


#: Equilibrated Cholesky pivot of a k-row Gram from the prefix sums above which the rows
#: have full rank by R's rule for certain (R's bound is 1e-14 on this scale; the sums
#: carry ~1e-13): the exact test by Gram–Schmidt is then skipped.
_SURELY_FULL_PIVOT = 1e-8
#: ... for designs of at most this many columns. The 24 columns of 23 season levels' R
#: contrasts (polynomials of degree up to 22) carry the rounding of a near-singular
#: leading block into the last pivot: 73 of 13,883 windows of 24 rows (20 % missing)
#: passed the pivot test and were rank deficient. Trend and harmonics up to k = 14 and
#: monthly dummies (k = 13): none wrong in 110,000 windows with 20-95 % missing.
_SURELY_FULL_MAX_K = 16


@jit(allocates=False)
def _cholesky_of_sums(S, i, j, k, min_pivot, L):
    """Cholesky factor ``L`` of the Gram of compacted rows ``i..j-1`` (the difference of
    the prefix sums ``S``); False, unfinished, as soon as an equilibrated pivot (``1 - R^2``
    of a column on the ones before it) falls below ``min_pivot``."""
    for a in range(k):
        for b in range(a + 1):
            L[a, b] = S[j, a, b] - S[i, a, b]
    return cholesky_in_place(L, k, min_pivot)


@jit(allocates=False)
def first_rows_full_rank(X, rows, i, Q, S, L):
    """Whether the ``k`` rows from compacted position ``i`` have full rank by R's rule:
    at once when the Cholesky factor of their Gram from the prefix sums ``S`` is far from
    singular (:data:`_SURELY_FULL_MAX_K` columns at most), else by modified Gram–Schmidt,
    twice, on the columns in order. A wider design's rows whose factor is not far from
    singular are not tested (False): the start then takes R's recursion, which is R's
    result whatever their rank (and least squares where it is full)."""
    k = X.shape[1]
    if _cholesky_of_sums(S, i, i + k, k, _SURELY_FULL_PIVOT, L):
        if k <= _SURELY_FULL_MAX_K:
            return True
    elif k > _SURELY_FULL_MAX_K:
        return False  # most likely deficient: R's recursion, which applies R's rule itself
    for j in range(k):
        norm = 0.0
        for r in range(k):
            v = X[rows[i + r], j]
            Q[j, r] = v
            norm += v * v
        for _ in range(2):
            for c in range(j):
                dot = 0.0
                for r in range(k):
                    dot += Q[c, r] * Q[j, r]
                for r in range(k):
                    Q[j, r] -= dot * Q[c, r]
        rest = 0.0
        for r in range(k):
            rest += Q[j, r] * Q[j, r]
        if norm == 0.0 or not math.sqrt(rest) >= LM_FIT_TOL * math.sqrt(norm):
            return False
        rest = math.sqrt(rest)
        for r in range(k):
            Q[j, r] /= rest
    return True


@jit()
def _centring(X, rows, n):
    """Whether y may be centred on its mean: only where the design holds the constant
    (its first column an intercept), which makes every segment's fit and RSS the same
    for y and y - mean (a model without one, e.g. classic BFAST's effect-coded
    seasonal dummies, keeps y as it is)."""
    first = X[rows[0], 0]
    if first == 0.0:
        return False
    for i in range(1, n):
        if X[rows[i], 0] != first:
            return False
    return True


@jit(allocates=False)
def _prefix_sums(X, rows, y, n, S, U, YY):
    """Cumulative X'X (its lower triangle: all that the Cholesky factors read), X'y and
    y'y of the compacted rows (y centred on its mean where :func:`_centring` allows);
    returns the mean (0 where not centred)."""
    k = X.shape[1]
    mean = 0.0
    for i in range(n):
        mean += y[i]
    mean = mean / n if _centring(X, rows, n) else 0.0
    for a in range(k):
        U[0, a] = 0.0
        for b in range(a + 1):
            S[0, a, b] = 0.0
    YY[0] = 0.0
    for i in range(n):
        r = rows[i]
        v = y[i] - mean
        for a in range(k):
            U[i + 1, a] = U[i, a] + X[r, a] * v
        for a in range(k):
            xa = X[r, a]
            for b in range(a + 1):
                S[i + 1, a, b] = S[i, a, b] + xa * X[r, b]
        YY[i + 1] = YY[i] + v * v
    return mean


@jit(allocates=False)
def _inverse_from_sums(S, i, j, P, L):
    """``P`` = the inverse Gram of compacted rows ``i..j-1`` from the prefix sums
    (Cholesky); False if the Gram is too ill-conditioned for that
    (:data:`_SUMS_MIN_PIVOT`)."""
    k = P.shape[0]
    if not _cholesky_of_sums(S, i, j, k, _SUMS_MIN_PIVOT, L):
        return False
    # L^{-1} into P's lower triangle, column by column
    for c in range(k):
        for a in range(k):
            P[a, c] = 0.0
        P[c, c] = 1.0 / L[c, c]
        for a in range(c + 1, k):
            s = 0.0
            for m in range(c, a):
                s -= L[a, m] * P[m, c]
            P[a, c] = s / L[a, a]
    # (X'X)^{-1} = L^{-T} L^{-1}, formed in L's storage, then copied symmetric into P
    for a in range(k):
        for b in range(a + 1):
            s = 0.0
            for m in range(a, k):
                s += P[m, a] * P[m, b]
            L[a, b] = s
    for a in range(k):
        for b in range(a + 1):
            P[a, b] = L[a, b]
            P[b, a] = L[a, b]
    return True


@jit(allocates=False)
def _rss_from_sums(P, U, YY, i, j):
    """RSS of the least-squares fit of compacted rows ``i..j-1`` from their inverse Gram
    ``P`` and the prefix sums: ``y'y - (X'y)' P X'y``, one coefficient at a time."""
    k = P.shape[0]
    rss = YY[j] - YY[i]
    for a in range(k):
        s = 0.0
        for b in range(k):
            s += P[a, b] * (U[j, b] - U[i, b])
        rss -= s * (U[j, a] - U[i, a])
    return max(rss, 0.0)


@jit(error_model="numpy", allocates=False)
def refined_rss(X, rows, first, count, yc, P, u, beta):
    """RSS of the least-squares fit of the ``count`` compacted rows from ``first`` (their
    centred values ``yc[:count]``), given ``P`` = their inverse Gram and ``u`` = their
    X'y (overwritten): the coefficients ``P u`` refined once by the normal equations of
    their residuals (``beta += P X'e``, the corrected semi-normal equations), then the
    sum of the squared residuals. Accurate where ``y'y - b'X'y`` is not: a first error
    ``d`` in the coefficients moves the sum of squares by ``d' X'X d`` only, and the
    refinement's residuals do not come from differences of prefix sums."""
    k = X.shape[1]
    for a in range(k):
        s = 0.0
        for b in range(k):
            s += P[a, b] * u[b]
        beta[a] = s
    for a in range(k):
        u[a] = 0.0  # from here on X'e
    for c in range(count):
        r = rows[first + c]
        e = yc[c]
        for a in range(k):
            e -= X[r, a] * beta[a]
        for a in range(k):
            u[a] += X[r, a] * e
    for a in range(k):
        s = 0.0
        for b in range(k):
            s += P[a, b] * u[b]
        beta[a] += s
    rss = 0.0
    for c in range(count):
        r = rows[first + c]
        e = yc[c]
        for a in range(k):
            e -= X[r, a] * beta[a]
        rss += e * e
    return rss


# in its callers, as LLVM inlined it before its scales were hoisted (called, it made lane_starts 2-3 % slower)
@jit(inline="always")
def _well_conditioned(S, i, j, P, scratch):
    """Whether the Gram of compacted rows ``i..j-1`` (prefix sums ``S``, lower triangle),
    scaled to a unit diagonal, has a 1-norm condition number of at most
    :data:`_SHORT_MAX_COND`, with ``P`` its inverse (from :func:`_inverse_from_sums`).
    Scratch ``(>= 1, >= k)``: the scales in its first row, one square root each (not one
    per entry: with ``h`` below ``3k``, every start of a pixel asks; a matrix, not a view
    of one's row, which would cost the caller's loop a reference count)."""
    k = P.shape[0]
    for a in range(k):
        scratch[0, a] = math.sqrt(S[j, a, a] - S[i, a, a])
    gram_norm = 0.0
    inverse_norm = 0.0
    for b in range(k):
        db = scratch[0, b]
        g = 0.0
        q = 0.0
        for a in range(k):
            da = scratch[0, a]
            gab = S[j, a, b] - S[i, a, b] if a >= b else S[j, b, a] - S[i, b, a]
            g += abs(gab) / (da * db)
            q += abs(P[a, b]) * (da * db)
        gram_norm = max(gram_norm, g)
        inverse_norm = max(inverse_norm, q)
    return gram_norm * inverse_norm <= _SHORT_MAX_COND


@jit(allocates=False)
def _first_rss(X, rows, y, mean, P, U, YY, i, j, yc, u, beta):
    """The RSS of the first fit of a segment, compacted rows ``i..j-1`` (``P`` their
    inverse Gram from the sums): straight from the sums from
    :data:`_PLAIN_RSS_MIN_ROWS` times k rows on, else :func:`refined_rss` (scratch ``yc``
    ``(j - i,)``, ``u`` and ``beta`` ``(k,)``)."""
    k = P.shape[0]
    if j - i >= _PLAIN_RSS_MIN_ROWS * k:
        return _rss_from_sums(P, U, YY, i, j)
    for c in range(j - i):
        yc[c] = y[i + c] - mean
    for a in range(k):
        u[a] = U[j, a] - U[i, a]
    return refined_rss(X, rows, i, j - i, yc, P, u, beta)


@jit(plain_args=True, allocates=False)
def _update(X, rows, y, mean, U, fixed, first, step, count, total, P, Px, out, steps, s0, record):
    """Sherman–Morrison updates of ``P`` = (X'X)^{-1} of a growing segment over ``count``
    compacted rows from ``first`` by ``step``; ``out[c]`` = ``total`` + the squared
    recursive residuals of the rows so far (the RSS of the growing segment). Forwards
    (``step = 1``) the segment starts at row ``fixed``, backwards (``step = -1``) it ends
    at row ``fixed - 1``. A row's prediction comes from the segment's sums, not from
    updated coefficients: ``x' beta = (P x)' X'y`` with ``X'y`` the difference of the
    prefix sums ``U`` (y centred on ``mean``), so that the rows' predictions do not
    depend on each other (:func:`replay_partitions` computes them all at once). For a
    well-conditioned start: the products with the symmetric ``P`` in the transposed
    (axpy) form, which the compiler vectorises. With ``record``, each
    row's ``P x`` and ``1 / f`` (which depend on the rows only) go to ``steps[s0 + c]``."""
    k = X.shape[1]
    for c in range(count):
        pos = first + step * c
        lo, hi = (fixed, pos) if step > 0 else (pos + 1, fixed)
        r = rows[pos]
        for a in range(k):
            Px[a] = 0.0
        # four rows of P a pass, each P x[a] still summed in the order of b (the same bits):
        # a quarter of the loads and stores of P x, whose chain through memory was the cost
        b = 0
        while b + 4 <= k:
            x0, x1, x2, x3 = X[r, b], X[r, b + 1], X[r, b + 2], X[r, b + 3]
            for a in range(k):
                p = Px[a]
                p += P[b, a] * x0
                p += P[b + 1, a] * x1
                p += P[b + 2, a] * x2
                p += P[b + 3, a] * x3
                Px[a] = p
            b += 4
        for b in range(b, k):
            xb = X[r, b]
            for a in range(k):
                Px[a] += P[b, a] * xb
        f = 1.0
        for a in range(k):
            f += X[r, a] * Px[a]
        inv_f = 1.0 / f
        if record:
            for a in range(k):
                steps[s0 + c, a] = Px[a]
            steps[s0 + c, k] = inv_f
        pred = 0.0
        for a in range(k):
            pred += Px[a] * (U[hi, a] - U[lo, a])
        err = (y[pos] - mean) - pred
        total += err * (err * inv_f)
        out[c] = total
        for a in range(k):
            pa = Px[a] * inv_f
            for b in range(k):
                P[a, b] -= pa * Px[b]


#: Kinds of a segment start in a :func:`triangle_memo`: R's recursion, a fit from the
#: prefix sums then updates, no segment.
_START_RECURSION, _START_SUMS, _START_NONE = 0, 1, 2
#: A recursion start that :func:`start_segments` leaves to R's exact refits.
START_REFITS = 3


@jit(allocates=False)
def _sums_fit(S, i, j, P, L):
    """Whether compacted rows ``i..j-1`` can start a segment from the prefix sums, with
    ``P`` then their inverse Gram: Cholesky pivots above :data:`_SUMS_MIN_PIVOT` and, for
    fewer than :data:`_PLAIN_RSS_MIN_ROWS` times k rows, a condition bound
    (:func:`_well_conditioned`)."""
    if not _inverse_from_sums(S, i, j, P, L):
        return False
    return j - i >= _PLAIN_RSS_MIN_ROWS * P.shape[0] or _well_conditioned(S, i, j, P, L)


@jit(allocates=False)
def start_kind(X, rows, n, h, i, back, S, Q, L, P):
    """The kind of segment start ``i`` (0, or ``h..n-h``) in :func:`optimal_partitions`,
    which depends on the rows only: :data:`_START_SUMS` (``P`` then holds the inverse
    Gram of its first ``h`` rows), :data:`_START_NONE` (only its last segment counts,
    from the pass backwards: ``back``) or :data:`_START_RECURSION`. Scratch ``Q``
    ``(k, >= k)``, ``L`` ``(k, k)``; no allocation (the cuda engine runs it per start)."""
    k = X.shape[1]
    if not (h > k and first_rows_full_rank(X, rows, i, Q, S, L)):
        return _START_RECURSION
    if back and i > n - 2 * h and i > 0:  # no room for a segment after one starting here
        return _START_NONE
    return _START_SUMS if _sums_fit(S, i, i + h, P, L) else _START_RECURSION


@jit(allocates=False)
def sums_segments(X, rows, y, mean, P, U, YY, i, h, stop, w, yc, Px, beta, steps, at, record):
    """The segments of a :data:`_START_SUMS` start ``i`` (``P`` the inverse Gram of its
    first ``h`` rows) ending at rows ``i + h - 1 .. stop - 1``: their RSS to ``w[0..]``;
    or, with ``stop <= i``, those ending at row ``i + h - 1`` (the last row, in
    :func:`last_segments`) and starting at rows ``i .. stop`` (one pass backwards from
    the fit of rows ``i..i+h-1``: least squares does not depend on the order of the
    rows): ``w[c]`` = the RSS of rows ``i - c .. i + h - 1``. Scratch ``yc``
    ``(>= min(h, 3k),)``, ``Px``, ``beta`` ``(k,)``; ``steps``, ``at``, ``record``: the
    memo's, as :func:`_update`. (One function both ways: one callee to compile.)"""
    w[0] = _first_rss(X, rows, y, mean, P, U, YY, i, i + h, yc, Px, beta)
    if stop > i:
        _update(X, rows, y, mean, U, i, i + h, 1, stop - i - h, w[0], P, Px, w[1:], steps, at, record)
    else:
        _update(X, rows, y, mean, U, i + h, i - 1, -1, i - stop, w[0], P, Px, w[1:], steps, at, record)


@jit(inline="always")
def last_segments(n, h, last, w):
    """``last[i]`` = the RSS of the last segment ``i..n-1`` (``i <= n - h``) from ``w``,
    what :func:`sums_segments` computed backwards from start ``n - h`` to ``0``."""
    for c in range(n - h + 1):
        last[n - h - c] = w[c]


# What the cuda engine of BFAST Lite runs per thread (numba-cuda compiles these, and all
# they call, for the device: no allocation), and per recursion start on the host.


@jit()
def pixel_sums(X, rows, y, n, h, S, U, YY, Q, L, P, Px, yc, beta, last, w, steps):
    """A pixel's share of :func:`optimal_partitions` before its starts: the prefix sums
    (``S``, ``U``, ``YY``) and whether its last segments come from the pass backwards
    (then their RSS to ``last``); returns ``(mean, back)``. Scratch as
    :func:`start_segments`, ``w`` ``(n,)``; ``steps`` a ``(1, 1)`` dummy (nothing
    recorded)."""
    mean = _prefix_sums(X, rows, y, n, S, U, YY)
    back = h > X.shape[1] and _sums_fit(S, n - h, n, P, L)
    if back:
        sums_segments(X, rows, y, mean, P, U, YY, n - h, h, 0, w, yc, Px, beta, steps, 0, False)
        last_segments(n, h, last, w)
    return mean, back


@jit()
def start_segments(X, rows, y, n, h, i, mean, back, S, U, YY, Q, L, P, Px, yc, beta, row, last, steps, G, u, kept,
                   order, pos, old_pos, norm2):
    """Segment start ``i`` of :func:`optimal_partitions` on its own, its segments' RSS by
    end row into ``row``; returns its kind (:func:`start_kind`). From the sums:
    ``row[e]`` for ``e = i + h - 1 .. stop - 1`` (``stop = n - h`` with ``back``, else
    ``n``); with ``back``, ``row[n - 1] = last[i]``. R's recursion: ``row[e]`` for
    ``e = i + k .. n - 1`` by :func:`givens_recursion`, or, where that cannot tell a
    column's rank by R's rule, nothing and :data:`START_REFITS` (the caller's
    :func:`recursion_segments`). Scratch ``Q``, ``L``, ``P`` ``(k, k)``, ``Px``,
    ``beta`` ``(k,)``, ``yc`` ``(3k,)``, the rest as :func:`givens_recursion`."""
    kind = start_kind(X, rows, n, h, i, back, S, Q, L, P)
    if kind == _START_RECURSION:
        k = X.shape[1]
        if givens_recursion(X, rows, y, mean, U, i, n - i, row[i + k:], P, Px, steps, G, L, u, kept, order, pos,
                            old_pos, norm2, beta):
            return kind
        return START_REFITS
    if kind == _START_SUMS:
        stop = n - h if back else n
        sums_segments(X, rows, y, mean, P, U, YY, i, h, stop, row[i + h - 1:], yc, Px, beta, steps, 0, False)
    if back:
        row[n - 1] = last[i]
    return kind


@jit()
def recursion_segments(X, rows, y, n, starts, out, w, Q, R, idx, beta, P, Px, S, U, YY, steps):
    """The recursion starts ``starts`` of one pixel of :func:`optimal_partitions` on
    their own (its prefix sums ``S``, ``U``, ``YY`` computed once): ``out[s, e]`` = R's
    RSS of rows ``starts[s]..e`` for ``e = starts[s] + k .. n - 1`` (:func:`_forward`;
    scratch as there)."""
    k = X.shape[1]
    mean = _prefix_sums(X, rows, y, n, S, U, YY)
    for s in range(starts.shape[0]):
        i = starts[s]
        _forward(X, rows, y, mean, U, i, n - i, w, Q, R, idx, beta, P, Px, steps)
        for j in range(k, n - i):
            out[s, i + j] = w[j - k]
#: Largest memo of recorded update steps per thread (bytes); longer series go without.
MEMO_MAX_BYTES = 48 << 20


def memo_chunks(n_pixels: int, block: int) -> int:
    """Chunks (of consecutive blocks of ``block`` pixels) for a kernel that keeps a
    :func:`triangle_memo` per chunk: few, so that a memo serves many pixels."""
    return min(-(-n_pixels // block), 2 * numba.get_num_threads())


@jit()
def triangle_memo(n_times, k):
    """Scratch for :func:`optimal_partitions` that lets pixels with the same compacted rows
    (valid dates), ``n`` and ``h`` as the previous one share everything of their
    triangles that depends on the rows only: each start's kind and inverse Gram, and
    every update step's ``P x`` and ``1 / f``. One per thread; empty (never used) for series
    whose steps would take more than :data:`MEMO_MAX_BYTES`. Also the per-thread scratch
    of one pixel: the RSS of its last segments, a replay's for one lane, and a batch of
    starts' (:func:`~tscube.bfast.core.start_lanes_cpu.lane_scratch`)."""
    capacity = n_times * (n_times + 1) // 2 + n_times
    last = np.empty(n_times)
    if capacity * (k + 1) * 8 > MEMO_MAX_BYTES:
        n_times = capacity = 0
    key = np.full(3, -1, dtype=np.int64)  # the last pixel's n and h, whether recorded
    return (np.empty(n_times, dtype=np.int64), key, np.empty((n_times + 1, k, k)),
            np.empty(n_times + 1, dtype=np.int64), np.empty((capacity, k + 1)), last, replay_scratch(n_times, k, 1),
            lane_scratch(last.shape[0]))


@jit(allocates=False)
def memo_holds_room(memo, n):
    """Whether ``memo`` can record the rows-only part of the segments of ``n`` rows."""
    return memo[0].shape[0] >= n and memo[4].shape[0] >= n * (n + 1) // 2 + n


@jit()
def memo_recorded(memo, rows, n, h):
    """Whether ``memo`` holds the rows-only part of all the segments of these rows, ``n``
    and ``h``."""
    return _same_rows(memo, rows, n, h) and memo[1][2] == 1


@jit()
def same_rows(a, b, n):
    """Whether two pixels' compacted rows (valid dates) agree in their first ``n``."""
    for i in range(n):
        if a[i] != b[i]:
            return False
    return True


@jit(allocates=False)
def _same_rows(memo, rows, n, h):
    """Whether the previous pixel had these compacted rows, ``n`` and ``h``."""
    memo_rows, key = memo[0], memo[1]
    return key[0] == n and key[1] == h and memo_rows.shape[0] >= n and same_rows(memo_rows, rows, n)


@jit(plain_args=True)
def programme_start(best, arg, M, n, lane, lanes):
    """Empty programmes (:func:`optimal_partitions`) for ``m = 0..M`` breaks and ends
    ``0..n-1`` of lanes ``lane..lane+lanes-1``."""
    for m in range(M + 1):
        for e in range(n):
            for g in range(lane, lane + lanes):
                best[m, e, g] = np.inf
                arg[m, e, g] = -1


@jit(plain_args=True)
def _programme_row(best, arg, M, n, h, lane, G, i, first_end, values, count):
    """Segments of rows ``i..first_end + c`` (RSS ``values[c, g]``, ``c < count``)
    offered to the programmes of lanes ``lane + g`` (``g < G``): those of at least ``h``
    rows that end where a programme can use them (before row ``n - h``, or at the last
    row); each as the first segment (``i = 0``) or as the last of a partition with ``m``
    breaks whose other segments end at row ``i - 1`` (every ``m`` that leaves them ``h``
    rows each). Strict ``<``: the earliest break wins ties, as starts come in order."""
    lo = max(first_end, i + h - 1) - first_end
    hi = min(first_end + count, n - h) - first_end
    to_last = first_end + count == n and n - 1 >= i + h - 1
    if i == 0:
        for c in range(lo, hi):
            for g in range(G):
                best[0, first_end + c, lane + g] = values[c, g]
        if to_last:
            for g in range(G):
                best[0, n - 1, lane + g] = values[count - 1, g]
        return
    hi = max(hi, lo)
    if G == 1:  # one pixel: no lane slices
        for m in range(1, min(M, i // h) + 1):
            prev = best[m - 1, i - 1, lane]
            for c in range(lo, hi + 1 if to_last else hi):
                e = first_end + c if c < hi else n - 1
                total = prev + values[c if c < hi else count - 1, 0]
                if total < best[m, e, lane]:
                    best[m, e, lane] = total
                    arg[m, e, lane] = i - 1
        return
    for m in range(1, min(M, i // h) + 1):
        prev = best[m - 1, i - 1, lane:lane + G]
        for c in range(lo, hi + 1 if to_last else hi):
            e = first_end + c if c < hi else n - 1
            value = values[c] if c < hi else values[count - 1]
            held = best[m, e, lane:lane + G]
            at = arg[m, e, lane:lane + G]
            for g in range(G):
                total = prev[g] + value[g]
                if total < held[g]:
                    held[g] = total
                    at[g] = i - 1


@jit(inline="always")  # a few operations: compiled into its callers, not called
def _offer_last_1(best, arg, M, n, h, i, value):
    """The one segment ``i..n-1`` (RSS ``value``), the last of a partition, offered to the
    programme of :func:`_programme_row_1` (which offers its segments to the last row
    so): inline, a few additions without a call of that function (about 30 ns a call
    when it was measured, with the reference counts of its views, since removed:
    ``allocates=False``)."""
    if n - 1 < i + h - 1:
        return
    if i == 0:
        best[0, n - 1] = value
        return
    for m in range(1, min(M, i // h) + 1):
        total = best[m - 1, i - 1] + value
        if total < best[m, n - 1]:
            best[m, n - 1] = total
            arg[m, n - 1] = i - 1


@jit(error_model="numpy", plain_args=True, allocates=False)
def _programme_row_1(best, arg, M, n, h, i, first_end, values, count):
    """:func:`_programme_row` for one pixel whose programme is ``best``, ``arg``
    ``(M + 1, n)`` (contiguous: the compiler vectorises the offers) and segments' RSS
    ``values[c]``; the same choices."""
    lo = max(first_end, i + h - 1) - first_end
    hi = min(first_end + count, n - h) - first_end
    if i == 0:
        for c in range(lo, hi):
            best[0, first_end + c] = values[c]
    else:
        hi = max(hi, lo)
        offered = values[lo:hi]  # views from index 0: the compiler knows every index is in bounds
        for m in range(1, min(M, i // h) + 1):
            prev = best[m - 1, i - 1]
            held = best[m, first_end + lo:first_end + hi]
            at = arg[m, first_end + lo:first_end + hi]
            for c in range(hi - lo):
                total = prev + offered[c]
                old = held[c]
                better = total < old
                held[c] = total if better else old
                at[c] = i - 1 if better else at[c]
    if first_end + count == n:  # the segment to the last row (the ends above do not touch row i - 1)
        _offer_last_1(best, arg, M, n, h, i, values[count - 1])


@jit(inline="always")  # compiled in each kernel that calls it, not once more on its own (docs/performance.md)
def optimal_partitions(X, rows, y, n, h, M, best, arg, lane, w, Q, R, idx, beta, P, Px, S, U, YY, memo,
                       calls, force_record=False):
    """Bai–Perron dynamic programme of one pixel for ``m = 0..M`` breaks into lane
    ``lane`` of ``best``/``arg`` (``(M + 1, T, lanes)``): ``best[m, e]`` the least RSS of
    rows ``0..e`` in ``m + 1`` segments of at least ``h`` rows, ``arg[m, e]`` the last row
    of its m-th segment (the earliest on ties), for the ends that can matter
    (``e <= n - h - 1`` and ``e = n - 1``). ``best[m, n - 1]`` is the RSS of the best
    m-break partition, summed segment by segment as R re-sums it.

    The segments' RSS (R's triangle: the segments the programme can use, starts 0 and
    ``h..n-h``) is computed start after start and offered to the programme as it comes,
    never stored. Where the first ``k`` rows of a segment have full rank (R's rule), its
    RSS is least squares: the first ``h`` rows are then fitted at once from prefix sums of
    X'X and X'y (``S``, ``U``, ``YY``), when their Gram is well conditioned (unlike the
    ``k``-row start of a recursion), and every further row is a Sherman–Morrison update
    (:func:`_update`). The first fit's RSS comes from the sums from ``3k`` rows on, from
    its refined residuals below (:func:`_first_rss`: R's ``h = 12`` observations). Each
    start runs only to row ``n-h-1``: the RSS of every last segment ``i..n-1`` comes from
    one pass backwards from a fit of the last ``h`` rows (least squares does not depend
    on the order of the rows). Starts whose first rows are rank deficient or whose first
    ``h`` rows are ill-conditioned take R's recursion with its restricted residuals
    (:func:`_forward`), to the end.

    ``memo`` (:func:`triangle_memo`): pixels in a row with the same rows, ``n`` and ``h``
    (a cloud-free stack, pixels under the same clouds) share the kinds of start, inverse
    Grams and update steps, which depend on the rows only: the second records them, the
    update (:func:`replay_partitions`); in BFAST Lite the first of a group of such pixels
    records (``force_record``: record whatever came before) and the group replays.
    ``calls``: :data:`PROGRAMME_CALLS` (a kernel's own callees may follow)."""
    k = X.shape[1]
    memo_rows, key, memo_P, kinds, steps, last, one_lane, _ = memo
    same = _same_rows(memo, rows, n, h)
    if same and key[2] == 1:  # recorded: a group of one
        calls[_REPLAY](X, rows, y.reshape((1, y.shape[0])), np.zeros(1, dtype=np.int64), n, h, M, best, arg,
                       lane, memo, one_lane, beta, P, Px, Q, R, idx, w, calls[_FORWARD])
        return
    # recorded for the second pixel in a row with these rows: a pixel whose valid dates
    # are its own (random gaps) costs the memo only the comparison and a copy of its rows
    record = (same or force_record) and memo_holds_room(memo, n)
    if not same and memo_rows.shape[0] >= n:
        for i in range(n):
            memo_rows[i] = rows[i]
        key[0] = n
        key[1] = h
        key[2] = 0
    solo_best = np.full((M + 1, n), np.inf)  # this pixel's programme, contiguous (copied to its lane at the end)
    solo_arg = np.full((M + 1, n), -1, dtype=np.int64)
    mean = _prefix_sums(X, rows, y, n, S, U, YY)
    sums = h > k
    at = 0  # next update step of the memo
    # every choice below depends on the rows only (a replay takes the same ones)
    back = sums and _sums_fit(S, n - h, n, P, R)
    if record:
        kinds[n] = _START_SUMS if back else _START_RECURSION
        if back:
            _copy_square(memo_P, n, P)
    if back:  # last[i]: the RSS of the last segment i..n-1, from one pass backwards
        calls[_SUMS](X, rows, y, mean, P, U, YY, n - h, h, 0, w, Q[0], Px, beta, steps, at, record)
        last_segments(n, h, last, w)
        at += n - h
    stop = (n - h) if back else n
    rider = -1.0  # the first start's RSS after row 2h - 1 where it goes on in the lanes (below 0: it does not)
    for i in range(n - h + 1):
        if 0 < i < h:
            continue  # no segment but the first starts before row h
        if sums and i > 0 and k == 8:  # the others side by side, LANES at a time
            at = calls[_LANE_STARTS](X, rows, y, mean, n, h, M, solo_best, solo_arg, i, back, stop, S, U, YY, w, Q, R,
                                     idx, beta, P, Px, memo, record, at, rider, calls[_FORWARD])
            break
        kind = start_kind(X, rows, n, h, i, back, S, Q, R, P)
        if record:
            kinds[i] = kind
            if kind == _START_SUMS:
                _copy_square(memo_P, i, P)
        if kind == _START_RECURSION:
            calls[_FORWARD](X, rows, y, mean, U, i, n - i, w, Q, R, idx, beta, P, Px, steps)
            _programme_row_1(solo_best, solo_arg, M, n, h, i, i + k, w, n - i - k)
            continue
        if kind == _START_SUMS:
            if i == 0 and k == 8 and not h < _PLAIN_RSS_MIN_ROWS * k and stop > 2 * h:
                # the first start's updates from row 2h on in the first batch of lanes, beside the starts
                # from h (its own chain ran at a fifth of their speed); its segments are offered there.
                # Not with short first fits: the batch's set-up then uses P, which carries this start
                calls[_SUMS](X, rows, y, mean, P, U, YY, i, h, 2 * h, w, Q[0], Px, beta, steps, at, record)
                rider = w[h]
                at += h
            else:
                calls[_SUMS](X, rows, y, mean, P, U, YY, i, h, stop, w, Q[0], Px, beta, steps, at, record)
                at += stop - i - h
                _programme_row_1(solo_best, solo_arg, M, n, h, i, i + h - 1, w, stop - i - h + 1)
        if back:
            _offer_last_1(solo_best, solo_arg, M, n, h, i, last[i])
    if record:
        key[2] = 1  # complete: the next pixel with these rows replays it
    for m in range(M + 1):
        for e in range(n):
            best[m, e, lane] = solo_best[m, e]
            arg[m, e, lane] = solo_arg[m, e]


@jit(inline="always")  # one call site: compiled in lane_starts (docs/performance.md)
def _start_batch(X, rows, y, mean, n, h, M, best, arg, i0, count, back, stop, S, U, YY, w, Q, R, idx, beta, P, Px,
                 memo, record, at, rider, forward):
    """Starts ``i0..i0+count-1`` (``count <= LANES``, all after the first) of
    :func:`optimal_partitions` for eight regressors, side by side
    (:mod:`tscube.bfast.core.start_lanes_cpu`): each start's kind as there, the first fits
    from the sums and the updates of the starts so fitted in lanes, then each start's
    segments offered to the programme (``best``, ``arg``: one pixel's) in order. Returns
    the memo's next update step.

    With ``rider >= 0`` (``count < LANES``) the first start rides along in lane 0 from row
    ``2h`` on: its inverse Gram of rows ``0..2h-1`` in ``P``, its RSS so far ``rider``,
    its segments ending at rows ``h-1..2h-1`` in ``w[0..h]``, its update steps from
    ``at``; its segments are offered before the batch's."""
    k = X.shape[1]
    _, _, memo_P, kinds, steps, last, _, lanes = memo
    W, seg, ints = lanes
    active_from, offsets, start_kinds, place = ints[0], ints[1], ints[2], ints[3]
    full_rank_lanes_8(S, i0, count, _SURELY_FULL_PIVOT, W)
    # no fit for the starts with no room for a segment after them (the last ones)
    fitted = max(0, min(count, n - 2 * h - i0 + 1)) if back else count
    first_fits_lanes_8(S, U, YY, i0, h, fitted, _SUMS_MIN_PIVOT, W)
    short = h < _PLAIN_RSS_MIN_ROWS * k
    first_rss = 0.0
    ride = rider >= 0.0
    rider_at = at
    if ride:
        at += stop - 2 * h
    updated = 0  # the starts fitted from the sums take the first lanes of W, in order
    for l in range(count):
        i = i0 + l
        kind = _START_RECURSION
        # the first k rows' rank by R's rule (the exact test where the sums cannot tell)
        if W[W_FULL * LANES + l] == 1.0 or first_rows_full_rank(X, rows, i, Q, S, R):
            if l >= fitted:
                kind = _START_NONE
            elif W[W_OK * LANES + l] == 1.0:
                kind = _START_SUMS
                if short:  # the lane's inverse Gram, checked, and the first fit's RSS from its residuals
                    for a in range(k):
                        for b in range(a + 1):
                            P[a, b] = P[b, a] = W[(a * (a + 1) // 2 + b) * LANES + l]
                    if _well_conditioned(S, i, i + h, P, R):
                        first_rss = _first_rss(X, rows, y, mean, P, U, YY, i, i + h, Q[0], Px, beta)
                    else:
                        kind = _START_RECURSION
        start_kinds[l] = kind
        if record:
            kinds[i] = kind
        if kind != _START_SUMS:
            continue
        c = updated
        place[l] = c
        if c < l:  # after a start that is not: its lane moves down
            for r in range(W_ROWS):
                W[r * LANES + c] = W[r * LANES + l]
        if record:
            for a in range(k):
                for b in range(a + 1):
                    memo_P[i, a, b] = memo_P[i, b, a] = W[(a * (a + 1) // 2 + b) * LANES + c]
        if short:
            W[W_TOTAL * LANES + c] = first_rss
        active_from[c] = i + h
        offsets[c] = at
        at += stop - i - h
        updated += 1
    if ride:  # the batch's lanes up by one, the first start into lane 0 (its first row, 2h, comes first)
        for c in range(updated - 1, -1, -1):
            for r in range(W_TOTAL + 1):
                W[r * LANES + c + 1] = W[r * LANES + c]
            active_from[c + 1] = active_from[c]
            offsets[c + 1] = offsets[c]
        for l in range(count):
            place[l] += 1
        for a in range(k):
            for b in range(a + 1):
                W[(a * (a + 1) // 2 + b) * LANES] = P[a, b]
            W[(W_LOW + a) * LANES] = U[0, a]
        W[W_TOTAL * LANES] = rider
        active_from[0] = 2 * h
        offsets[0] = rider_at
        updated += 1
    for r in range(W_TOTAL + 1):  # the lanes past the last run idle (update_lanes_8)
        for c in range(updated, LANES):
            W[r * LANES + c] = 0.0
    for c in range(updated, LANES):
        active_from[c] = stop + 1
    if updated > 0:
        first = active_from[0]
        for c in range(updated):
            seg[active_from[c] - first, c] = W[W_TOTAL * LANES + c]
        update_lanes_8(X, rows, y, mean, U, W, active_from, updated, first, stop, seg, steps, offsets, record)
    if ride:
        column = seg[:, 0]
        for e in range(stop - 2 * h + 1):  # from the RSS after row 2h - 1
            w[h + e] = column[e]
        _programme_row_1(best, arg, M, n, h, 0, h - 1, w, stop - h + 1)
    for l in range(count):
        i = i0 + l
        if start_kinds[l] == _START_RECURSION:
            forward(X, rows, y, mean, U, i, n - i, w, Q, R, idx, beta, P, Px, steps)
            _programme_row_1(best, arg, M, n, h, i, i + k, w, n - i - k)
            continue
        if start_kinds[l] == _START_SUMS:
            c = place[l]
            column = seg[active_from[c] - active_from[0]:, c]  # a view from index 0: no negative indices to wrap
            for e in range(stop - i - h + 1):
                w[e] = column[e]
            _programme_row_1(best, arg, M, n, h, i, i + h - 1, w, stop - i - h + 1)
        if back:
            _offer_last_1(best, arg, M, n, h, i, last[i])
    return at


@jit(allocates=False)
def lane_starts(X, rows, y, mean, n, h, M, best, arg, i, back, stop, S, U, YY, w, Q, R, idx, beta, P, Px, memo, record,
                at, rider, forward):
    """The starts ``i..n-h`` (after the first; eight regressors) of
    :func:`optimal_partitions`, ``LANES`` at a time (:func:`_start_batch`), offered to the
    pixel's programme ``best``, ``arg``; returns the memo's next update step. A function
    of its own, which the kernels call by address once per pixel (:data:`PROGRAMME_CALLS`):
    the lane kernels' code is compiled into it, not into each kernel; ``forward``:
    :func:`_forward`, by address. ``rider >= 0``: the first start goes on in the first
    batch's lane 0 (:func:`_start_batch`)."""
    i0 = i
    while i0 < n - h + 1:  # one call site of the batch (compiled into this function once)
        count = min(LANES - 1 if rider >= 0.0 else LANES, n - h + 1 - i0)
        at = _start_batch(X, rows, y, mean, n, h, M, best, arg, i0, count, back, stop, S, U, YY, w, Q, R, idx, beta, P,
                          Px, memo, record, at, rider, forward)
        i0 += count
        rider = -1.0
    return at


@jit()
def _forward(X, rows, y, mean, U, i, count, w, Q, R, idx, beta, P, Px, steps):
    """R's RSS of rows ``i..i+j`` for ``j = k..count-1`` (its recursion) into
    ``w[j - k]``: by :func:`_givens_recursion`, or, where that cannot tell a column's
    rank by R's rule with certainty, by R's exact refits (:func:`recursive_residuals`)."""
    k = X.shape[1]
    if _givens_recursion(X, rows, y, mean, U, i, count, w, P, Px, steps):
        return
    recursive_residuals(X, rows, y, i, 1, count, w, Q, R, idx, beta, P, Px, _REFITS)  # (ROC's types: one version)
    total = 0.0
    for c in range(count - k):
        total += w[c] * w[c]
        w[c] = total


#: A column's residual over its norm between these is too close to R's aliasing bound
#: (1e-7) for :func:`_givens_recursion` to decide: R's exact refits decide instead. Both
#: compute the ratio to ~1e-13; the highest season contrasts on a few levels sit at
#: 1e-9 to 3e-9 (2 % of the starts of trend + season with 20 % missing, which a band
#: down to 1e-9 sent to the refits).
_AMBIGUOUS_LOW, _AMBIGUOUS_HIGH = 1e-8, 1e-6


@jit(inline="always", error_model="numpy")
def _rotate_rows(G, u, first_row, last_row):
    """Givens rotations of the row ``u`` into rows ``first_row..last_row-1`` of the upper
    triangular ``G`` (row ``m`` pivots on column ``m``), zeroing ``u`` there."""
    width = G.shape[1]
    for m in range(first_row, last_row):
        b = u[m]
        if b == 0.0:
            continue
        a = G[m, m]
        r = math.sqrt(a * a + b * b)  # rows of data scale: nothing to overflow (libm hypot cost a quarter of the time)
        inv = 1.0 / r
        c = a * inv
        s = b * inv
        G[m, m] = r
        u[m] = 0.0
        # views from column m + 1: a loop from 0 over them vectorises, one from m + 1 does
        # not (numba's LLVM; the same operations, the same bits)
        Gm = G[m, m + 1:width]
        um = u[m + 1:width]
        for j in range(width - m - 1):
            g = Gm[j]
            v = um[j]
            Gm[j] = c * g + s * v
            um[j] = c * v - s * g


@jit(inline="always", error_model="numpy")  # small helpers of _givens_recursion: compiled in it (2 s less compile)
def _place_columns(kept, order, pos):
    """``order``: the kept columns, then the aliased ones, each in original order;
    ``pos[j]`` the place of column ``j``. Returns the number kept."""
    k = kept.shape[0]
    nk = 0
    for j in range(k):
        if kept[j]:
            order[nk] = j
            pos[j] = nk
            nk += 1
    q = nk
    for j in range(k):
        if not kept[j]:
            order[q] = j
            pos[j] = q
            q += 1
    return nk


@jit(inline="always", error_model="numpy")
def _r_rule_flip(G, kept, pos, norm2):
    """The first column (original index) whose status by R's in-order aliasing rule
    (:func:`qr_fit_in_order`: aliased where its part orthogonal to the kept columns
    before it is below 1e-7 of its norm, or zero) is not ``kept[j]``, from ``G`` (the
    upper triangular R factor of the rows so far, its columns in :func:`_place_columns`'
    order, ``pos``; ``norm2`` the columns' sums of squares); -1 if none, -2 if a column
    is too close to the bound to tell (:data:`_AMBIGUOUS_LOW`). A column's part
    orthogonal to the kept columns before it is the sum of squares of its entries from
    the row of the first kept column after it on: no differences."""
    k = kept.shape[0]
    kept_before = 0
    for j in range(k):
        p = pos[j]
        norm = norm2[j]
        rest = 0.0  # (G upper triangular: nothing below row p)
        for m in range(kept_before, p + 1):
            rest += G[m, p] * G[m, p]
        if norm == 0.0:
            should = False
        else:
            ratio = math.sqrt(rest / norm)
            if _AMBIGUOUS_LOW <= ratio <= _AMBIGUOUS_HIGH:
                return -2
            should = ratio >= LM_FIT_TOL
        if should != kept[j]:
            return j
        if kept[j]:
            kept_before += 1
    return -1


@jit(inline="always", error_model="numpy")
def _retriangulate(G, old_pos, pos, tmp):
    """Columns of ``G`` moved from ``old_pos`` to ``pos`` (the last column, y, stays),
    then made upper triangular again by Givens rotations of adjacent rows, with no
    negative diagonal entry: still the R factor of the same rows, for the new column
    order."""
    k = G.shape[0]
    moved = k  # the columns before the first that moved keep their place and entries
    for j in range(k):
        if pos[j] != old_pos[j]:
            moved = min(moved, pos[j], old_pos[j])
    for m in range(k):
        for j in range(k):
            tmp[m, pos[j]] = G[m, old_pos[j]]
        for j in range(k):
            G[m, j] = tmp[m, j]
    width = G.shape[1]
    for c in range(moved, k):
        for m in range(k - 1, c, -1):
            b = G[m, c]
            if b == 0.0:
                continue
            a = G[m - 1, c]
            r = math.sqrt(a * a + b * b)
            cs = a / r
            sn = b / r
            for j in range(c, width):
                g0 = G[m - 1, j]
                g1 = G[m, j]
                G[m - 1, j] = cs * g0 + sn * g1
                G[m, j] = cs * g1 - sn * g0
            G[m, c] = 0.0
    for m in range(moved, k):  # a moved column's entry on the diagonal may be negative: a row's sign is free,
        if G[m, m] < 0.0:  # and with none negative a rotated row's residual has its sign (givens_residuals)
            for j in range(m, width):
                G[m, j] = -G[m, j]


@jit(inline="always", error_model="numpy")
def _inverse_of_r(G, P, Rinv, d):
    """``P = (R'R)^{-1}`` of the leading k x k upper triangle ``R`` of ``G``; returns a
    bound of the 1-norm condition number of ``R'R`` scaled to a unit diagonal (its norm
    bounded by k, no entry of such a Gram exceeding 1; inf if singular). Scratch
    ``Rinv`` ``(k, k)`` (its upper triangle) and ``d`` ``(k,)``."""
    k = P.shape[0]
    for c in range(k):
        if G[c, c] == 0.0:
            return np.inf
    _upper_inverse(G, k, Rinv)
    for a in range(k):
        for b in range(a, k):
            v = 0.0
            for m in range(b, k):
                v += Rinv[a, m] * Rinv[b, m]
            P[a, b] = v
            P[b, a] = v
    for a in range(k):
        v = 0.0
        for m in range(a + 1):
            v += G[m, a] * G[m, a]
        d[a] = math.sqrt(v)
    inverse_norm = 0.0
    for b in range(k):
        q = 0.0
        for a in range(k):
            q += abs(P[a, b]) * (d[a] * d[b])
        inverse_norm = max(inverse_norm, q)
    return k * inverse_norm


@jit(inline="always", error_model="numpy")
def _follow_r_rule(G, kept, order, pos, old_pos, norm2, tmp, nk):
    """Flips columns of ``G`` (``nk`` of them kept) between kept and aliased until R's
    in-order rule holds on it (:func:`_r_rule_flip`, :func:`_retriangulate`); returns the
    number kept, or -1 where a column is too close to the rule's bound to tell."""
    k = kept.shape[0]
    while True:
        j = _r_rule_flip(G, kept, pos, norm2)
        if j == -2:
            return -1
        if j == -1:
            return nk
        kept[j] = not kept[j]
        for q in range(k):
            old_pos[q] = pos[q]
        nk = _place_columns(kept, order, pos)
        _retriangulate(G, old_pos, pos, tmp)


@jit(inline="always", error_model="numpy")
def _empty_factor(G, kept, order, pos, norm2):
    """The factor of no rows: ``G`` ``(k, k + 1)`` zero, every column kept in its own
    order, no column sums of squares yet. Returns the number kept, ``k``."""
    k = kept.shape[0]
    for a in range(k):
        for b in range(k + 1):
            G[a, b] = 0.0
        kept[a] = True
        norm2[a] = 0.0
    return _place_columns(kept, order, pos)


@jit(inline="always", error_model="numpy")
def _rotate_in(G, u, X, r, value, order, nk, norm2, add_norms):
    """Row ``r`` of ``X`` (its columns in ``order``) with y ``value`` rotated into ``G``
    (``nk`` kept columns first); with ``add_norms``, its squares added to the columns'
    ``norm2``. Returns its restricted recursive residual: what is left of its y after
    the rotations into the kept columns' rows (from the ``k``-th row on; the diagonal
    kept non-negative, :func:`_retriangulate`, gives it its sign)."""
    k = G.shape[0]
    for q in range(k):
        u[q] = X[r, order[q]]
    if add_norms:
        for j in range(k):
            norm2[j] += X[r, j] * X[r, j]
    u[k] = value
    _rotate_rows(G, u, 0, nk)
    residual = u[k]
    _rotate_rows(G, u, nk, k)
    return residual


@jit(inline="always", error_model="numpy")  # one call site: no library of its own (1 s of compiling)
def _givens_recursion(X, rows, y, mean, U, first, count, out, P, Px, steps):
    """:func:`givens_recursion` with its scratch allocated here."""
    k = X.shape[1]
    return givens_recursion(X, rows, y, mean, U, first, count, out, P, Px, steps, np.empty((k, k + 1)),
                            np.empty((k, k)), np.empty(k + 1), np.empty(k, dtype=np.bool_),
                            np.empty(k, dtype=np.int64), np.empty(k, dtype=np.int64), np.empty(k, dtype=np.int64),
                            np.empty(k), np.empty(k))


@jit(error_model="numpy")
def givens_recursion(X, rows, y, mean, U, first, count, out, P, Px, steps, G, tmp, u, kept, order, pos, old_pos,
                     norm2, beta):
    """R's recursion (strucchange ``recresid`` as :func:`recursive_residuals` computes
    it) of the ``count`` compacted rows from ``first``, as running RSS: ``out[j - k]`` =
    the sum of the squared recursive residuals of rows ``k..j``. The fit of the rows so
    far is kept as the R factor of their QR (``G``, the columns that R's in-order rule
    keeps first), each row rotated in (Givens) instead of a full refit per row while the
    rows are rank deficient: a row's restricted recursive residual is what is left of its
    y after the rotations into the kept columns' rows, and the rule is checked on the
    factor after every row (:func:`_r_rule_flip`; a change of the kept columns reorders
    the factor, :func:`_retriangulate`). From the first full-rank prefix on (or ``k`` or
    ``2k`` rows later), where its Gram is well conditioned, the rest are the sums'
    updates (:func:`_update`); where it is not even ``2k`` rows later, R's
    Sherman–Morrison updates (:func:`recursive_residual`). Returns False, with nothing
    decided, where a column is too close to R's aliasing bound to tell: the caller
    refits as R. Scratch (no allocation: the cuda engine runs it per start): ``G``
    ``(k, k + 1)``, ``tmp`` ``(k, k)``, ``u`` ``(k + 1,)``, ``kept`` (bool), ``order``,
    ``pos``, ``old_pos`` (int) and ``norm2``, ``beta`` ``(k,)``."""
    k = X.shape[1]
    nk = _empty_factor(G, kept, order, pos, norm2)
    full_at = -1
    total = 0.0
    for i in range(count):
        residual = _rotate_in(G, u, X, rows[first + i], y[first + i] - mean, order, nk, norm2, full_at < 0)
        if i >= k:
            total += residual * residual
            out[i - k] = total
        if i >= k - 1 and full_at < 0:  # R's rule on rows 0..i: the fit the next row sees
            nk = _follow_r_rule(G, kept, order, pos, old_pos, norm2, tmp, nk)
            if nk < 0:
                return False
            if nk == k:
                full_at = i + 1
        # the sums' updates from the first full-rank prefix on, or k or 2k rows later (as
        # R's refits), where that prefix's Gram is well conditioned enough for them
        if full_at > 0 and (i + 1 - full_at) % k == 0 and i + 1 - full_at <= 2 * k and i + 1 < count:
            if _inverse_of_r(G, P, tmp, norm2) <= _SHORT_MAX_COND:  # norm2: no longer needed
                _update(X, rows, y, mean, U, first, first + i + 1, 1, count - i - 1, total, P, Px,
                        out[i + 1 - k:], steps, 0, False)
                return True
            if i + 1 - full_at == 2 * k:  # still ill-conditioned: R's own updates, row by row
                _coefficients_of_r(G, beta)
                for c in range(i + 1, count):
                    w = recursive_residual(X, rows[first + c], y[first + c] - mean, beta, P, Px, True)
                    total += w * w
                    out[c - k] = total
                return True
    return True


@jit(inline="always", error_model="numpy")
def _coefficients_of_r(G, beta):
    """``beta``: the least-squares coefficients of the R factor ``G`` ``(k, k + 1)`` of
    ``[X y]`` of full rank (back substitution)."""
    k = G.shape[0]
    for a in range(k - 1, -1, -1):
        v = G[a, k]
        for m in range(a + 1, k):
            v -= G[a, m] * beta[m]
        beta[a] = v / G[a, a]


@jit(error_model="numpy", plain_args=True)
def givens_residuals(X, rows, y, first, step, count, out, refits, P, Px, G, tmp, u, kept, order, pos, old_pos,
                     norm2, beta):
    """:func:`recursive_residuals` (R's ``recresid``, ``refits`` exact refits after the
    first full-rank fit) of ``count`` compacted rows from position ``first`` by ``step``,
    by the Givens-updated factor of :func:`givens_recursion`: ``out[i - k]`` the
    recursive residual of row ``i``, signed (what is left of its y after the rotations
    into the kept columns' rows). While the rows are rank deficient this replaces a QR
    refit per row, ``O(k^2)`` instead of ``O(i k^2)`` (season dummies: tens of rows).
    From the first full-rank fit on, R's Sherman–Morrison updates follow
    (:func:`recursive_residual`: no square root in their chain, unlike a rotation), from
    that fit where its Gram is well conditioned, else from a refit every ``k`` rows
    (the rows between by the factor: least squares) or the last refit's. Returns, as
    :func:`recursive_residuals`, the rows of the first full-rank fit a row is predicted
    from (``count + 1`` if none), with ``beta`` the fit of all rows where they have full
    rank; -1, with nothing decided, where a column is too close to R's aliasing bound to
    tell (the caller refits as R). Scratch as :func:`givens_recursion`."""
    k = X.shape[1]
    nk = _empty_factor(G, kept, order, pos, norm2)
    full_at = -1
    for i in range(count):
        at = first + step * i
        residual = _rotate_in(G, u, X, rows[at], y[at], order, nk, norm2, full_at < 0)
        if i >= k:
            out[i - k] = residual
        if i >= k - 1 and full_at < 0:  # R's rule on rows 0..i: the fit the next row sees
            nk = _follow_r_rule(G, kept, order, pos, old_pos, norm2, tmp, nk)
            if nk < 0:
                return -1
            if nk == k:
                full_at = i + 1
        # R's updates from R's first full-rank fit, or from a refit k rows later where that
        # fit's Gram is ill-conditioned (R's updates from it lose digits that R's refit restores)
        refit = full_at > 0 and (i + 1 - full_at) % k == 0 and i + 1 - full_at <= refits * k
        if refit and i + 1 < count:  # (norm2 as scratch: R's rule no longer needs it)
            if _inverse_of_r(G, P, tmp, norm2) <= _SHORT_MAX_COND or i + 1 - full_at == refits * k:
                _coefficients_of_r(G, beta)
                for c in range(i + 1, count):
                    at = first + step * c
                    out[c - k] = recursive_residual(X, rows[at], y[at], beta, P, Px, True)
                return full_at
    if full_at < 0:
        return count + 1
    _coefficients_of_r(G, beta)  # every column kept: in their own order
    return full_at if full_at < count else count + 1  # (all rows: no row left to predict from it)


@jit(plain_args=True)
def replay_scratch(n_times, k, lanes):
    """Scratch of :func:`replay_partitions` for up to ``lanes`` pixels of ``n_times``
    dates: prefix sums X'y ``(T + 1, k, lanes)`` and y'y, centred values, means, the RSS
    of one start's segments and of the last segments ``(T, lanes)``, and the sums of a
    segment ``(k, lanes)``. The means take ``2 * lanes``: their second half is a
    segment's gain in :func:`_rss_from_sums_lanes`."""
    return (np.empty((n_times + 1, k, lanes)), np.empty((n_times + 1, lanes)), np.empty((n_times, lanes)),
            np.empty(2 * lanes), np.empty((n_times, lanes)), np.empty((n_times, lanes)), np.empty((k, lanes)))


@jit()
def _prefix_sums_lanes(X, rows, Y, group, n, U, YY, centred, mean):
    """:func:`_prefix_sums` (without the Gram) of the pixels ``group`` (rows of ``Y``),
    the pixels as lanes (``U[i, a, g]``, ``YY[i, g]``), in the same order of operations;
    also each pixel's centred values ``centred[pos, g]``."""
    k = X.shape[1]
    G = group.shape[0]
    for g in range(G):
        mean[g] = 0.0
    for pos in range(n):
        for g in range(G):
            centred[pos, g] = Y[group[g], pos]
            mean[g] += centred[pos, g]
    centre = _centring(X, rows, n)
    for g in range(G):
        mean[g] = mean[g] / n if centre else 0.0
        YY[0, g] = 0.0
    for a in range(k):
        for g in range(G):
            U[0, a, g] = 0.0
    for pos in range(n):
        r = rows[pos]
        for g in range(G):
            centred[pos, g] -= mean[g]
            YY[pos + 1, g] = YY[pos, g] + centred[pos, g] * centred[pos, g]
        for a in range(k):
            xa = X[r, a]
            for g in range(G):
                U[pos + 1, a, g] = U[pos, a, g] + xa * centred[pos, g]


@jit()
def _rss_from_sums_lanes(P, U, YY, i, j, G, diff, gain, out):
    """The RSS of :func:`_rss_from_sums` of rows ``i..j-1`` for every lane at
    once into ``out[:G]``, in its order of operations (the same bits). Scratch:
    ``diff`` ``(k, G)``, ``gain`` ``(G,)``."""
    k = P.shape[0]
    for a in range(k):
        for g in range(G):
            diff[a, g] = U[j, a, g] - U[i, a, g]
    for g in range(G):
        out[g] = YY[j, g] - YY[i, g]
    for a in range(k):
        for g in range(G):
            gain[g] = 0.0
        for b in range(k):
            pab = P[a, b]
            for g in range(G):
                gain[g] += pab * diff[b, g]
        for g in range(G):
            out[g] -= gain[g] * diff[a, g]
    for g in range(G):
        out[g] = max(out[g], 0.0)


@jit()
def _first_rss_lanes(X, rows, P, U, YY, i, j, centred, G, diff, gain, out, yc, u, beta):
    """:func:`_first_rss` of rows ``i..j-1`` for every lane (pixel ``g``: prefix sums
    ``U[:, :, g]``, ``YY[:, g]``, centred values ``centred[:, g]``) into ``out[:G]``, in
    its order of operations (the same bits)."""
    k = P.shape[0]
    if j - i >= _PLAIN_RSS_MIN_ROWS * k:
        _rss_from_sums_lanes(P, U, YY, i, j, G, diff, gain, out)
        return
    for g in range(G):
        for c in range(j - i):
            yc[c] = centred[i + c, g]
        for a in range(k):
            u[a] = U[j, a, g] - U[i, a, g]
        out[g] = refined_rss(X, rows, i, j - i, yc, P, u, beta)


@jit(plain_args=True)
def _replay_rows(steps, s0, count, first, step, fixed, U, centred, base, out, G, k):
    """The recorded updates ``s0..s0+count-1`` of :func:`_update` (rows ``first`` by
    ``step``, the segment's fixed end ``fixed``) for every lane at once:
    ``out[c, g]`` = ``base[g]`` + the squared recursive residuals so far. Each row's
    prediction is ``(P x)' X'y`` from the recorded ``P x`` and the lane's prefix sums,
    independent of the other rows, in :func:`_update`'s order of operations (the same
    bits)."""
    for c in range(count):
        pos = first + step * c
        lo, hi = (fixed, pos) if step > 0 else (pos + 1, fixed)
        for g in range(G):
            out[c, g] = 0.0
        for a in range(k):
            pa = steps[s0 + c, a]
            for g in range(G):
                out[c, g] += pa * (U[hi, a, g] - U[lo, a, g])
    for c in range(count):
        pos = first + step * c
        inv_f = steps[s0 + c, k]
        before = base if c == 0 else out[c - 1]
        for g in range(G):
            err = centred[pos, g] - out[c, g]
            out[c, g] = before[g] + err * (err * inv_f)


@jit()
def replay_partitions(X, rows, Y, group, n, h, M, best, arg, lane, memo, scratch, beta, P, Px, Q, R, idx, w, forward):
    """:func:`optimal_partitions` of the pixels ``group`` (rows of ``Y``; programmes in
    lanes ``lane + g``) that share the compacted ``rows``, ``n`` and ``h`` recorded in
    ``memo``: the recorded update steps replayed for all of them at once, the pixels as
    SIMD lanes, each row's prediction independent of the others (:func:`_replay_rows`),
    and each start's segments offered to all their programmes at once; bit for bit each
    pixel's own. ``scratch``: :func:`replay_scratch` for at least ``len(group)`` lanes;
    ``forward``: :func:`_forward`, by address."""
    k = X.shape[1]
    G = group.shape[0]
    _, _, memo_P, kinds, steps, _, _, _ = memo
    U, YY, centred, mean, seg, last, diff = scratch
    gain = mean[G:]  # the means are needed only for the prefix sums
    programme_start(best, arg, M, n, lane, G)
    _prefix_sums_lanes(X, rows, Y, group, n, U, YY, centred, mean)
    at = 0
    back = kinds[n] == _START_SUMS
    if back:  # the last segments, from one pass backwards: seg[c] the one from row n-h-1-c
        _first_rss_lanes(X, rows, memo_P[n], U, YY, n - h, n, centred, G, diff, gain, last[n - h], Q[0], Px, beta)
        _replay_rows(steps, at, n - h, n - h - 1, -1, n, U, centred, last[n - h], seg, G, k)
        for c in range(n - h):
            for g in range(G):
                last[n - h - 1 - c, g] = seg[c, g]
        at += n - h
    stop = (n - h) if back else n
    one_U = np.empty((0, k))  # one pixel's prefix sums, for R's recursion
    for i in range(n - h + 1):
        if 0 < i < h:
            continue
        if kinds[i] == _START_RECURSION:
            if one_U.shape[0] == 0:
                one_U = np.empty((n + 1, k))
            for g in range(G):  # each pixel's own recursion, from its own sums (the same bits as alone)
                for r in range(n + 1):
                    for a in range(k):
                        one_U[r, a] = U[r, a, g]
                forward(X, rows, Y[group[g]], mean[g], one_U, i, n - i, w, Q, R, idx, beta, P, Px, steps)
                _programme_row(best, arg, M, n, h, lane + g, 1, i, i + k, w.reshape((w.shape[0], 1)), n - i - k)
            continue
        if kinds[i] == _START_SUMS:
            _first_rss_lanes(X, rows, memo_P[i], U, YY, i, i + h, centred, G, diff, gain, seg[0], Q[0], Px, beta)
            _replay_rows(steps, at, stop - i - h, i + h, 1, i, U, centred, seg[0], seg[1:], G, k)
            at += stop - i - h
            _programme_row(best, arg, M, n, h, lane, G, i, i + h - 1, seg, stop - i - h + 1)
        if back:
            _programme_row(best, arg, M, n, h, lane, G, i, n - 1, last[i:], 1)


@jit(inline="always")  # a thin wrapper: compiled in its kernel only (docs/performance.md)
def group_partitions(X, rows, Y, group, n, h, M, best, arg, memo, scratch, w, Q, R, idx, beta, P, Px, S, U, YY, calls):
    """:func:`optimal_partitions` of the pixels ``group`` (rows of ``rows`` and ``Y``), which
    share their compacted rows, ``n`` and ``h``, into lanes ``0..len(group)-1``: where
    ``memo`` does not hold these rows yet, the first pixel records it for the others (or,
    without room for it, each pixel runs alone), and the rest replay it as lanes
    (:func:`replay_partitions`; ``scratch``: :func:`replay_scratch` for the group;
    ``calls``: :data:`PROGRAMME_CALLS`)."""
    size = group.shape[0]
    q = group[0]
    first = 0  # the group's pixels from here on replay the memo
    if not memo_recorded(memo, rows[q], n, h):
        shared = size > 1 and memo_holds_room(memo, n)
        first = 1 if shared else size
        for g in range(first):
            r = group[g]
            optimal_partitions(X, rows[r], Y[r], n, h, M, best, arg, g, w, Q, R, idx, beta, P, Px, S, U, YY, memo,
                               calls, shared)
    if first < size:
        calls[_REPLAY](X, rows[q], Y, group[first:size], n, h, M, best, arg, first, memo, scratch, beta, P, Px, Q,
                       R, idx, w, calls[_FORWARD])


@jit()
def breaks_of(arg, m, n, out, lane=0):
    """The ``m`` breakpoints of the best ``m``-break partition (programme ``lane``) into
    ``out[:m]``."""
    if m == 0:
        return
    out[m - 1] = arg[m, n - 1, lane]
    for level in range(m - 1, 0, -1):
        out[level - 1] = arg[level, out[level], lane]


@jit()
def minus_2_loglik(rss_m, n):
    return n * (math.log(rss_m) + 1.0 - math.log(n) + math.log(2.0 * math.pi))


@jit()
def dummy_partitions(cycle, n_seasons, Y, group, n, h, M, best, arg, lane, counts, means, seg):
    """:func:`optimal_partitions` of the pixels ``group`` (rows of ``Y``, programmes in
    lanes ``lane + g``) for the effect-coded seasonal dummies of classic BFAST (``freq - 1``
    columns, no intercept: the seasons' effects sum to zero) on a gap-free series (row
    ``i`` of season ``cycle[i]``), in closed form.

    Every segment of at least ``h > freq - 1`` consecutive rows holds every season, and so
    do its first ``k = freq - 1`` rows' columns span (R's recursion is least squares
    there); the least squares of a season model with zero-sum effects is the seasons'
    means shifted by ``lambda / n_s``, ``lambda = sum(mean_s) / sum(1 / n_s)``, and its
    RSS is the within-season sum of squares plus ``sum(mean_s)^2 / sum(1 / n_s)``. Each
    start adds its rows one at a time: the season's count (shared by the lanes), mean and
    within-season sum of squares (Welford's update), so each segment costs O(1) per
    pixel instead of R's O(k^2) recursion. Scratch: ``counts`` (n_seasons,) int64,
    ``means`` (n_seasons, lanes), ``seg`` (T, lanes)."""
    G = group.shape[0]
    programme_start(best, arg, M, n, lane, G)
    within = np.empty(G)
    total = np.empty(G)
    for i in range(n - h + 1):
        if 0 < i < h:
            continue  # no segment but the first starts before row h
        for s in range(n_seasons):
            counts[s] = 0
            for g in range(G):
                means[s, g] = 0.0
        for g in range(G):
            within[g] = 0.0
            total[g] = 0.0
        inverse_sum = 0.0
        for j in range(i, n):
            s = cycle[j]
            c = counts[s]
            if c > 0:
                inverse_sum -= 1.0 / c
            c += 1
            counts[s] = c
            inv = 1.0 / c
            inverse_sum += inv
            for g in range(G):
                v = Y[group[g], j]
                d = v - means[s, g]
                step = d * inv
                means[s, g] += step
                total[g] += step
                within[g] += d * (v - means[s, g])
            if j - i + 1 >= h:
                shift = 1.0 / inverse_sum
                for g in range(G):
                    seg[j - i - h + 1, g] = within[g] + total[g] * total[g] * shift
        _programme_row(best, arg, M, n, h, lane, G, i, i + h - 1, seg, n - i - h + 1)


#: :func:`replay_scratch`'s buffers and :func:`triangle_memo`'s memo, in the notation of
#: :func:`tscube._jit.arg_types`.
REPLAY_SCRATCH_TYPES = "Tuple((f8[:, :, ::1], f8[:, ::1], f8[:, ::1], f8[::1], f8[:, ::1], f8[:, ::1], f8[:, ::1]))"
MEMO_TYPES = (f"Tuple((i8[::1], i8[::1], f8[:, :, ::1], i8[::1], f8[:, ::1], f8[::1], {REPLAY_SCRATCH_TYPES}, "
              "Tuple((f8[::1], f8[:, ::1], i8[:, ::1]))))")

#: :func:`_forward`'s function type (:data:`PROGRAMME_CALLS`).
FORWARD_TYPE = function_type("f8[:, ::1], i8[::1], f8[::1], f8, f8[:, ::1], i8, i8, f8[::1], f8[:, ::1], f8[:, ::1], "
                             "i8[::1], f8[::1], f8[:, ::1], f8[::1], f8[:, ::1]")

#: Indices in :data:`PROGRAMME_CALLS`.
_LANE_STARTS, _FORWARD, _REPLAY, _SUMS = range(4)

#: The Bai–Perron programme's callees by address (:class:`tscube._jit.Callees`), with
#: their compile seconds on a 2-core Zen 3 (one process each, ``sums_segments`` after
#: what it shares with ``_forward``): the kernels that run the programme (BFAST Lite,
#: ``history="BP"``, classic BFAST) pass them, with their own after them, as one
#: argument, ``calls``. A first call has other processes compile those not cached
#: (:func:`tscube._jit.compile_jobs`) while it compiles its kernel; once cached, every
#: such kernel loads them.
PROGRAMME_CALLS = Callees(
    (lane_starts, function_type(
        "f8[:, ::1], i8[::1], f8[::1], f8, i8, i8, i8, f8[:, ::1], i8[:, ::1], i8, b1, i8, f8[:, :, ::1], f8[:, ::1], "
        f"f8[::1], f8[::1], f8[:, ::1], f8[:, ::1], i8[::1], f8[::1], f8[:, ::1], f8[::1], {MEMO_TYPES}, b1, i8, f8",
        FORWARD_TYPE, returns=numba.int64), 15.5),
    (_forward, FORWARD_TYPE, 9.8),
    (replay_partitions, function_type(
        f"f8[:, ::1], i8[::1], f8[:, ::1], i8[::1], i8, i8, i8, f8[:, :, ::1], i8[:, :, ::1], i8, {MEMO_TYPES}, "
        f"{REPLAY_SCRATCH_TYPES}, f8[::1], f8[:, ::1], f8[::1], f8[:, ::1], f8[:, ::1], i8[::1], f8[::1]",
        FORWARD_TYPE), 5.1),
    (sums_segments, function_type("f8[:, ::1], i8[::1], f8[::1], f8, f8[:, ::1], f8[:, ::1], f8[::1], i8, i8, i8, "
                                  "f8[::1], f8[::1], f8[::1], f8[::1], f8[:, ::1], i8, b1"), 0.6),
)
