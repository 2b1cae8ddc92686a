"""Bai–Perron breakpoints for the cpu engines (numba), one pixel per call.

Same rules as :mod:`tscube.bfast.bai_perron` (the reference), organised for speed:

* the segment RSS triangle, only where the programme reads it, row by row: for each
  segment start a fit of its first ``h`` rows from prefix sums of X'X and X'y, then
  rank-one (Sherman–Morrison) updates of ``(X'X)^{-1}`` and the coefficients, ``RSS(i, j)``
  the running sum of squared recursive residuals; the last segments from one pass
  backwards. Where R's recursion differs from least squares (the first ``k`` rows of a
  segment rank deficient) or the start is ill-conditioned, the recursion itself: while
  the first rows are rank deficient each step is a full fit by modified Gram–Schmidt QR
  that drops aliased columns by R's ``lm.fit`` rule (a column's orthogonal part below
  1e-7 of its norm), as strucchange's ``recresid`` does, and two exact refits after the
  first full-rank one keep the updates' rounding below what could move a breakpoint;
* the dynamic programme over segment ends, ties to the earliest break.

Shared by ``bfast_monitor(history="BP")`` (:mod:`tscube.bfast._cpu_history`) and BFAST
Lite (:mod:`tscube.bfast._lite_cpu`).
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import njit

from .ols import LM_FIT_TOL

#: Exact refits after the first full-rank fit, every k rows.
_REFITS = 2

#: A segment starts from one fit of its first h rows by prefix sums (normal equations)
#: only when h is at least this many times k (with few residual degrees of freedom the
#: RSS is a small difference of large sums: h = 9 rows for k = 8 loses 1e-3 of it) ...
_SUMS_MIN_ROWS = 3
#: ... and every equilibrated Cholesky pivot of their Gram (1 - R^2 of a column on the
#: ones before it) is at least this: cond(X'X) below ~1e5 k. Other starts take the
#: recursion from k rows with exact QR refits, as R.
_SUMS_MIN_PIVOT = 1e-5


@njit(cache=True)
def qr_fit_in_order(X, rows, y, first, step, count, Q, R, idx, beta, P):
    """OLS of ``count`` compacted rows (positions ``first + step * i``) with R's in-order
    aliasing. Writes the coefficients (0 where aliased) to ``beta`` and ``(X_K'X_K)^{-1}``
    of the kept columns K (zero elsewhere) to ``P``; returns the number of kept columns."""
    k = X.shape[1]
    nk = 0
    for j in range(k):
        norm = 0.0
        for i in range(count):
            v = X[rows[first + step * i], j]
            Q[i, nk] = v
            norm += v * v
        norm = math.sqrt(norm)
        if norm == 0.0:
            continue
        for c in range(nk):
            R[c, nk] = 0.0
        for _ in range(2):  # Gram–Schmidt twice: orthogonal to working precision
            for c in range(nk):
                dot = 0.0
                for i in range(count):
                    dot += Q[i, c] * Q[i, nk]
                R[c, nk] += dot
                for i in range(count):
                    Q[i, nk] -= dot * Q[i, c]
        rest = 0.0
        for i in range(count):
            rest += Q[i, nk] * Q[i, nk]
        rest = math.sqrt(rest)
        if rest < LM_FIT_TOL * norm:
            continue
        for i in range(count):
            Q[i, nk] /= rest
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
    for c in range(nk):
        Rinv[c, c] = 1.0 / R[c, c]
        for a in range(c - 1, -1, -1):
            s = 0.0
            for m in range(a + 1, c + 1):
                s += R[a, m] * Rinv[m, c]
            Rinv[a, c] = -s / R[a, a]
    for c in range(nk):
        qy = 0.0
        for i in range(count):
            qy += Q[i, c] * y[first + step * i]
        for a in range(c + 1):
            beta[idx[a]] += Rinv[a, c] * qy
    for a in range(nk):
        for b in range(nk):
            s = 0.0
            for m in range(max(a, b), nk):
                s += Rinv[a, m] * Rinv[b, m]
            P[idx[a], idx[b]] = s
    return nk


@njit(cache=True)
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


@njit(cache=True)
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


@njit(cache=True)
def _cholesky_of_sums(S, i, j, k, min_pivot, L):
    """Cholesky factor ``L`` of the Gram of compacted rows ``i..j-1`` (the difference of
    the prefix sums ``S``); False, unfinished, as soon as an equilibrated pivot (``1 - R^2``
    of a column on the ones before it) falls below ``min_pivot``."""
    for a in range(k):
        for b in range(a + 1):
            s = S[j, a, b] - S[i, a, b]
            for m in range(b):
                s -= L[a, m] * L[b, m]
            if a == b:
                if not s >= min_pivot * (S[j, a, a] - S[i, a, a]):
                    return False
                L[a, a] = math.sqrt(s)
            else:
                L[a, b] = s / L[b, b]
    return True


@njit(cache=True)
def first_rows_full_rank(X, rows, i, Q, S, L):
    """Whether the ``k`` rows from compacted position ``i`` have full rank by R's rule:
    at once when the Cholesky factor of their Gram from the prefix sums ``S`` is far from
    singular, else by modified Gram–Schmidt, twice, on the columns in order."""
    k = X.shape[1]
    if _cholesky_of_sums(S, i, i + k, k, _SURELY_FULL_PIVOT, L):
        return True
    for j in range(k):
        norm = 0.0
        for r in range(k):
            v = X[rows[i + r], j]
            Q[r, j] = v
            norm += v * v
        for _ in range(2):
            for c in range(j):
                dot = 0.0
                for r in range(k):
                    dot += Q[r, c] * Q[r, j]
                for r in range(k):
                    Q[r, j] -= dot * Q[r, c]
        rest = 0.0
        for r in range(k):
            rest += Q[r, j] * Q[r, j]
        if norm == 0.0 or not math.sqrt(rest) >= LM_FIT_TOL * math.sqrt(norm):
            return False
        rest = math.sqrt(rest)
        for r in range(k):
            Q[r, j] /= rest
    return True


@njit(cache=True)
def _prefix_sums(X, rows, y, n, S, U, YY, gram=True):
    """Cumulative X'X (if ``gram``), X'y and y'y of the compacted rows (y centred on its
    mean)."""
    k = X.shape[1]
    mean = 0.0
    for i in range(n):
        mean += y[i]
    mean /= n
    for a in range(k):
        U[0, a] = 0.0
        if gram:
            for b in range(k):
                S[0, a, b] = 0.0
    YY[0] = 0.0
    for i in range(n):
        r = rows[i]
        v = y[i] - mean
        for a in range(k):
            U[i + 1, a] = U[i, a] + X[r, a] * v
        if gram:
            for a in range(k):
                for b in range(k):
                    S[i + 1, a, b] = S[i, a, b] + X[r, a] * X[r, b]
        YY[i + 1] = YY[i] + v * v
    return mean


@njit(cache=True)
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


@njit(cache=True)
def _coefficients_from_sums(P, U, YY, mean, i, j, beta):
    """Coefficients of compacted rows ``i..j-1`` into ``beta`` from their inverse Gram
    ``P`` and the prefix sums; returns their RSS."""
    k = beta.shape[0]
    rss = YY[j] - YY[i]
    for a in range(k):
        s = 0.0
        for b in range(k):
            s += P[a, b] * (U[j, b] - U[i, b])
        beta[a] = s
        rss -= s * (U[j, a] - U[i, a])
    beta[0] += mean  # the centring of y moves the intercept only (column 0 is ones)
    return max(rss, 0.0)


@njit(cache=True)
def _update(X, rows, y, first, step, count, total, beta, P, Px, out, steps, s0, record):
    """Sherman–Morrison updates of the fit ``beta``, ``P`` over ``count`` compacted rows
    from ``first`` by ``step``; ``out[c]`` = ``total`` + the squared recursive residuals
    of the rows so far (the RSS of the growing segment). For a well-conditioned start
    (``h >= 3k`` rows): the products with the symmetric ``P`` in the transposed (axpy)
    form, which the compiler vectorises. With ``record``, each row's ``P x`` and ``f``
    (which depend on the rows only) go to ``steps[s0 + c]`` for :func:`replay_triangles`."""
    k = X.shape[1]
    for c in range(count):
        pos = first + step * c
        r = rows[pos]
        for a in range(k):
            Px[a] = 0.0
        pred = 0.0
        for b in range(k):
            xb = X[r, b]
            pred += xb * beta[b]
            for a in range(k):
                Px[a] += P[b, a] * xb
        f = 1.0
        for a in range(k):
            f += X[r, a] * Px[a]
        if record:
            for a in range(k):
                steps[s0 + c, a] = Px[a]
            steps[s0 + c, k] = f
        err = y[pos] - pred
        total += err * err / f
        out[c] = total
        g = err / f
        inv_f = 1.0 / f
        for a in range(k):
            beta[a] += Px[a] * g
        for a in range(k):
            pa = Px[a] * inv_f
            for b in range(k):
                P[a, b] -= pa * Px[b]


#: Kinds of a segment start in a :func:`triangle_memo`: R's recursion, a fit from the
#: prefix sums then updates, no segment.
_START_RECURSION, _START_SUMS, _START_NONE = 0, 1, 2
#: Largest memo of recorded update steps per thread (bytes); longer series go without.
MEMO_MAX_BYTES = 48 << 20


def memo_chunks(n_pixels: int, block: int) -> int:
    """Chunks (of consecutive blocks of ``block`` pixels) for a kernel that keeps a
    :func:`triangle_memo` per chunk: few, so that a memo serves many pixels."""
    return min(-(-n_pixels // block), 2 * numba.get_num_threads())


@njit(cache=True)
def triangle_memo(n_times, k):
    """Scratch for :func:`rss_triangle` that lets pixels with the same compacted rows
    (valid dates), ``n`` and ``h`` as the previous one share everything of their
    triangles that depends on the rows only: each start's kind and inverse Gram, and
    every update step's ``P x`` and ``f``. One per thread; empty (never used) for series
    whose steps would take more than :data:`MEMO_MAX_BYTES`."""
    capacity = n_times * (n_times + 1) // 2 + n_times
    if capacity * (k + 1) * 8 > MEMO_MAX_BYTES:
        n_times = capacity = 0
    key = np.full(3, -1, dtype=np.int64)  # the last pixel's n and h, whether recorded
    return (np.empty(n_times, dtype=np.int64), key, np.empty((n_times + 1, k, k)),
            np.empty(n_times + 1, dtype=np.int64), np.empty((capacity, k + 1)))


@njit(cache=True)
def memo_holds_room(memo, n):
    """Whether ``memo`` can record the triangle of ``n`` rows."""
    return memo[0].shape[0] >= n and memo[4].shape[0] >= n * (n + 1) // 2 + n


@njit(cache=True)
def memo_recorded(memo, rows, n, h):
    """Whether ``memo`` holds the whole triangle of these rows, ``n`` and ``h``."""
    return _same_rows(memo, rows, n, h) and memo[1][2] == 1


@njit(cache=True)
def same_rows(a, b, n):
    """Whether two pixels' compacted rows (valid dates) agree in their first ``n``."""
    for i in range(n):
        if a[i] != b[i]:
            return False
    return True


@njit(cache=True)
def _same_rows(memo, rows, n, h):
    """Whether the previous pixel had these compacted rows, ``n`` and ``h``."""
    memo_rows, key = memo[0], memo[1]
    return key[0] == n and key[1] == h and memo_rows.shape[0] >= n and same_rows(memo_rows, rows, n)


@njit(cache=True)
def rss_triangle(X, rows, y, n, h, rss, w, Q, R, idx, beta, P, Px, S, U, YY, memo, force_record=False):
    """``rss[i, j]`` = R's RSS of compacted rows ``i..j`` for the segments the programme
    can use: starts 0 and ``h..n-2h``, ends ``i+h-1..n-h-1`` (a segment that more
    segments follow) and ``n-1`` (the last segment).

    Where the first ``k`` rows of a segment have full rank (R's rule), its RSS is least
    squares: the first ``h`` rows are then fitted at once from prefix sums of X'X and X'y
    (``S``, ``U``, ``YY``), when their Gram is well conditioned (unlike the ``k``-row
    start of a recursion), and every further row is a Sherman–Morrison update. Each start
    runs only to row ``n-h-1``: the RSS of every last segment ``i..n-1`` comes from one
    pass backwards from a fit of the last ``h`` rows (least squares does not depend on
    the order of the rows). Starts whose first rows are rank deficient or whose first
    ``h`` rows are ill-conditioned or few (``h < 3k``) take R's recursion with its
    restricted residuals (:func:`recursive_residuals`), to the end.

    ``memo`` (:func:`triangle_memo`): pixels in a row with the same rows, ``n`` and ``h``
    (a cloud-free stack, pixels under the same clouds) share the kinds of start, inverse
    Grams and update steps, which depend on the rows only: the second records them, the
    others replay them, bit for bit the same triangle at O(k) instead of O(k^2) per
    update (:func:`replay_triangles`). ``force_record``: record whatever came before."""
    k = X.shape[1]
    memo_rows, key, memo_P, kinds, steps = memo
    same = _same_rows(memo, rows, n, h)
    if same and key[2] == 1:  # recorded: a group of one
        T = y.shape[0]
        replay_triangles(X, rows, y.reshape((1, T)), np.zeros(1, dtype=np.int64), n, h,
                         rss.reshape((1, T, T)), memo, U.reshape((1, T + 1, k)), YY.reshape((1, T + 1)),
                         np.empty(1), beta, np.empty((k + 3 + T, 1)), Q, R, idx, P, Px, w)
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
    mean = _prefix_sums(X, rows, y, n, S, U, YY)
    sums = h >= _SUMS_MIN_ROWS * k
    at = 0  # next update step of the memo
    # every choice below depends on the rows only (a replay takes the same ones)
    back = sums and _inverse_from_sums(S, n - h, n, P, R)
    if record:
        kinds[n] = _START_SUMS if back else _START_RECURSION
        if back:
            memo_P[n, :, :] = P
    if back:  # the last segments, from one pass backwards
        backwards = _coefficients_from_sums(P, U, YY, mean, n - h, n, beta)
        rss[n - h, n - 1] = backwards
        _update(X, rows, y, n - h - 1, -1, n - h, backwards, beta, P, Px, w, steps, at, record)
        at += n - h
        for c in range(n - h):
            rss[n - h - 1 - c, n - 1] = w[c]
    stop = (n - h) if back else n
    for i in range(n - h + 1):
        if 0 < i < h:
            continue  # no segment but the first starts before row h
        last_only = i > n - 2 * h and i > 0  # no room for a segment after one starting here
        kind = _START_RECURSION
        if sums and first_rows_full_rank(X, rows, i, Q, S, R):
            if last_only and back:
                kind = _START_NONE
            elif _inverse_from_sums(S, i, i + h, P, R):
                kind = _START_SUMS
                if record:
                    memo_P[i, :, :] = P
        if record:
            kinds[i] = kind
        if kind == _START_NONE:
            continue
        if kind == _START_RECURSION:
            _forward(X, rows, y, n, i, n - i, rss, w, Q, R, idx, beta, P, Px)
            continue
        base = _coefficients_from_sums(P, U, YY, mean, i, i + h, beta)
        rss[i, i + h - 1] = base
        _update(X, rows, y, i + h, 1, stop - i - h, base, beta, P, Px, w, steps, at, record)
        at += stop - i - h
        for c in range(stop - i - h):
            rss[i, i + h + c] = w[c]
    if record:
        key[2] = 1  # complete: the next pixel with these rows replays it


@njit(cache=True)
def _forward(X, rows, y, n, i, count, rss, w, Q, R, idx, beta, P, Px):
    """Forward recursive residuals of rows ``i..i+count-1`` into ``rss[i, .]``."""
    k = X.shape[1]
    full_at = recursive_residuals(X, rows, y, i, 1, count, w, Q, R, idx, beta, P, Px)
    total = 0.0
    for j in range(k, count):
        total += w[j - k] * w[j - k]
        rss[i, i + j] = total
    return full_at


@njit(cache=True)
def replay_triangles(X, rows, Y, group, n, h, rss, memo, U, YY, mean, beta, lanes, Q, R, idx, P, Px, w):
    """:func:`rss_triangle` of the pixels ``group`` (rows of ``Y``, triangles into
    ``rss[g]``) that share the compacted ``rows``, ``n`` and ``h`` recorded in ``memo``:
    the recorded update steps replayed for all of them at once, the pixels as lanes
    (their own coefficients ``lanes[:k]``, predictions and running sums), so that the
    pixels' chains of dependent updates overlap; bit for bit each pixel's triangle.
    Scratch: ``U`` ``(G, T + 1, k)``, ``YY`` ``(G, T + 1)``, ``mean`` and ``beta``
    ``(G,)``/``(k,)``, ``lanes`` ``(k + 3 + T, G)``."""
    k = X.shape[1]
    G = group.shape[0]
    _, _, memo_P, kinds, steps = memo
    no_gram = np.empty((1, 1, 1))
    for g in range(G):
        mean[g] = _prefix_sums(X, rows, Y[group[g]], n, no_gram, U[g], YY[g], False)
    at = 0
    # lanes rows: 0..k-1 coefficients, k prediction, k+1 running sum, k+2.. values by row
    for g in range(G):
        for pos in range(n):
            lanes[k + 2 + pos, g] = Y[group[g], pos]
    if kinds[n] == _START_SUMS:  # the last segments, from one pass backwards
        for g in range(G):
            lanes[k + 1, g] = _coefficients_from_sums(memo_P[n], U[g], YY[g], mean[g], n - h, n, beta)
            rss[group[g], n - h, n - 1] = lanes[k + 1, g]
            for a in range(k):
                lanes[a, g] = beta[a]
        for c in range(n - h):
            _replay_lanes_step(X, rows, n - h - 1 - c, lanes, steps, at + c, G, k)
            for g in range(G):
                rss[group[g], n - h - 1 - c, n - 1] = lanes[k + 1, g]
        at += n - h
    stop = (n - h) if kinds[n] == _START_SUMS else n
    for i in range(n - h + 1):
        if 0 < i < h or kinds[i] == _START_NONE:
            continue
        if kinds[i] == _START_RECURSION:
            for g in range(G):
                _forward(X, rows, Y[group[g]], n, i, n - i, rss[group[g]], w, Q, R, idx, beta, P, Px)
            continue
        for g in range(G):
            lanes[k + 1, g] = _coefficients_from_sums(memo_P[i], U[g], YY[g], mean[g], i, i + h, beta)
            rss[group[g], i, i + h - 1] = lanes[k + 1, g]
            for a in range(k):
                lanes[a, g] = beta[a]
        for c in range(stop - i - h):
            _replay_lanes_step(X, rows, i + h + c, lanes, steps, at + c, G, k)
            for g in range(G):
                rss[group[g], i, i + h + c] = lanes[k + 1, g]
        at += stop - i - h


@njit(cache=True, inline="always")
def _replay_lanes_step(X, rows, pos, lanes, steps, s, G, k):
    """One recorded update (step ``s``, compacted row ``pos``) of every lane: the
    arithmetic of :func:`_update` on the recorded ``P x`` and ``f``, lane by lane in the
    same order (so the same bits), without the O(k^2) update of ``P``."""
    r = rows[pos]
    for g in range(G):
        lanes[k, g] = 0.0
    for b in range(k):
        xb = X[r, b]
        for g in range(G):
            lanes[k, g] += xb * lanes[b, g]
    f = steps[s, k]
    for g in range(G):
        err = lanes[k + 2 + pos, g] - lanes[k, g]
        lanes[k + 1, g] += err * err / f
        lanes[k, g] = err / f  # the gain's scalar g, in the prediction's row
    for a in range(k):
        pa = steps[s, a]
        for g in range(G):
            lanes[a, g] += pa * lanes[k, g]


@njit(cache=True)
def optimal_partition(rss, n, h, max_breaks, best, arg):
    """Bai–Perron dynamic programme: ``best[m, i]`` the least RSS of rows ``0..i`` in
    ``m + 1`` segments of at least ``h`` rows, ``arg[m, i]`` the last row of its m-th
    segment (the earliest on ties). Rows ``0..max_breaks`` of ``best``/``arg`` are set,
    for the ends ``i`` that can matter: ``i <= n - h - 1`` (more segments follow) and
    ``i = n - 1``."""
    for m in range(max_breaks + 1):
        for i in range(n):
            best[m, i] = np.inf
            arg[m, i] = -1
    for i in range(h - 1, n - h):
        best[0, i] = rss[0, i]
    best[0, n - 1] = rss[0, n - 1]
    for m in range(1, max_breaks + 1):
        for i in range((m + 1) * h - 1, n):
            if n - h <= i < n - 1:
                continue  # no segment fits after row i
            for j in range(m * h - 1, i - h + 1):
                total = best[m - 1, j] + rss[j + 1, i]
                if total < best[m, i]:
                    best[m, i] = total
                    arg[m, i] = j
    return 0


@njit(cache=True)
def breaks_of(arg, m, n, out):
    """The ``m`` breakpoints of the best ``m``-break partition into ``out[:m]``."""
    if m == 0:
        return
    out[m - 1] = arg[m, n - 1]
    for level in range(m - 1, 0, -1):
        out[level - 1] = arg[level, out[level]]


@njit(cache=True)
def partition_rss(rss, breaks, m, n):
    """RSS of the partition with ``breaks[:m]``, re-summed from the triangle as R does."""
    total = 0.0
    start = 0
    for l in range(m):
        total += rss[start, breaks[l]]
        start = breaks[l] + 1
    return total + rss[start, n - 1]


@njit(cache=True)
def minus_2_loglik(rss_m, n):
    return n * (math.log(rss_m) + 1.0 - math.log(n) + math.log(2.0 * math.pi))
