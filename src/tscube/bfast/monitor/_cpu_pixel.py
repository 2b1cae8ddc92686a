"""One pixel's monitoring after its history fit, shared by the cpu engine's formulations
(:mod:`._cpu`, :mod:`._cpu_fused`): the median monitoring residual by selection, the
OLS-MOSUM (or OLS-CUSUM) process, its boundary and first crossing, and the status codes
the kernels write."""

from __future__ import annotations

import math

import numpy as np

from ..._jit import CONTRACT, jit
from ..core.inputs import PERFECT_FIT_RTOL
from .critval import process_bound
from .status import BfastStatus

STATUS_OK = np.int8(BfastStatus.OK)
STATUS_ALL_MISSING = np.int8(BfastStatus.ALL_MISSING)
STATUS_TOO_FEW = np.int8(BfastStatus.TOO_FEW_HISTORY)
STATUS_NO_MONITORING = np.int8(BfastStatus.NO_MONITORING_DATA)
STATUS_SINGULAR = np.int8(BfastStatus.SINGULAR_DESIGN)
STATUS_PERFECT_FIT = np.int8(BfastStatus.PERFECT_FIT)


_SMALL_SELECT = np.uint64(16)  # below this many candidates, selection by partial sorting
_U = np.uint64  # unsigned indices: numba adds a negative-index wraparound to signed ones


@jit(fastmath=CONTRACT)
def _split(source, first, lo, hi, scratch, dst, pivot, inclusive):
    """Out-of-place partition of ``source[first + lo:first + hi]`` into
    ``scratch[dst + lo:dst + hi]``: the values below ``pivot`` (``<=`` if ``inclusive``)
    first. Every value is written to both ends and one end advances, so the loop has no
    branch for random data to mispredict. Returns the rank where the upper part starts."""
    i = dst + lo
    j = dst + hi - _U(1)
    for u in range(first + lo, first + hi):
        x = source[u]
        scratch[i] = x
        scratch[j] = x
        below = _U(x <= pivot) if inclusive else _U(x < pivot)
        i += below
        j -= _U(1) - below
    return i - dst


@jit(fastmath=CONTRACT, plain_args=True)  # one version for every caller's constants
def median(data, start, n, scratch):
    """Median of ``data[start:start + n]`` (mean of the two middle values for even ``n``), like
    ``np.median``; ``data`` is left unchanged, ``scratch`` holds ``>= 2 n`` values.

    Quickselect narrowing on both middle ranks at once, by branch-free out-of-place
    partitions (:func:`_split`) between the halves of ``scratch``, the first one straight
    from ``data`` (no copy). A pivot that falls between the two middle ranks ends it: they
    are the largest value left of it and the smallest right.
    """
    half = _U(scratch.shape[0] // 2)
    count = _U(n)
    k1 = (count - _U(1)) // _U(2)  # the middle ranks (equal for odd n)
    k2 = count // _U(2)
    source = data  # the first partition reads the data, the later ones a scratch half
    first = _U(start)  # where the candidates start in ``source``
    dst = _U(0)  # the scratch half the next partition writes to
    lo = _U(0)
    hi = count
    if count <= _SMALL_SELECT:
        for u in range(count):
            scratch[u] = data[first + u]
        source = scratch
        first = _U(0)
    while hi - lo > _SMALL_SELECT:
        width = hi - lo
        x0 = source[first + lo + width // _U(4)]
        x1 = source[first + lo + width // _U(2)]
        x2 = source[first + lo + _U(3) * width // _U(4)]
        pivot = max(min(x0, x1), min(max(x0, x1), x2))  # median of three
        i = _split(source, first, lo, hi, scratch, dst, pivot, False)
        lower = pivot
        if i == lo:  # the pivot is the minimum: split off the values equal to it
            i = _split(source, first, lo, hi, scratch, dst, pivot, True)
            if k2 < i:
                return pivot
        elif k1 < i <= k2:  # even n, split between the middle ranks
            lower = scratch[dst + lo]
            for u in range(dst + lo, dst + i):
                lower = max(lower, scratch[u])
        if k1 < i <= k2:
            upper = scratch[dst + i]
            for u in range(dst + i, dst + hi):
                upper = min(upper, scratch[u])
            return 0.5 * (lower + upper)
        if k2 < i:
            hi = i
        else:
            lo = i
        source = scratch
        first = dst
        dst = half - dst
    for u in range(first + lo, first + k2 + _U(1)):  # partial selection sort up to the upper rank
        best = u
        for w in range(u + _U(1), first + hi):
            if scratch[w] < scratch[best]:
                best = w
        scratch[u], scratch[best] = scratch[best], scratch[u]
    if k1 == k2:
        return scratch[first + k2]
    return 0.5 * (scratch[first + k1] + scratch[first + k2])


@jit(fastmath=CONTRACT, plain_args=True)  # one version for every caller's constants
def mosum_tail(
    buf, offset, m, n, rss, esum, ysum, ymax, k, h, critval, cusum, sel, p, s,
    status, magnitude, relative, mosum_mean, statistic, sigma_out, rmse, want_process,
):
    """One pixel after its fit, from its compacted residuals ``buf``: the ``m`` monitoring
    ones from ``offset`` on, the history's last ``window - 1`` just before (OLS-MOSUM; the
    OLS-CUSUM process starts from ``esum``, the sum of all history residuals). ``ysum`` is
    the sum of the monitoring values. Writes sigma, rmse, magnitude (absolute and
    relative), the process statistics (and PERFECT_FIT) of pixel ``p``, start ``s``; with
    ``want_process`` the process values go to ``sel[:m]`` and their boundary to
    ``sel[m:2m]``. Returns ``j``, the first monitoring value over the boundary, or -1
    (none, a non-finite process, or a perfect fit). Shared by both cpu formulations."""
    window = int(math.floor(h * n))
    sigma = math.sqrt(rss / (n - k))
    sigma_out[s, p] = sigma
    rmse[s, p] = math.sqrt(rss / n)
    middle = median(buf, offset, m, sel)
    magnitude[s, p] = middle
    expected = ysum  # the mean prediction over the monitoring values, times m
    for i in range(offset, offset + m):
        expected -= buf[i]
    relative[s, p] = middle / (expected / m) if expected != 0.0 else np.nan
    if sigma <= PERFECT_FIT_RTOL * ymax:
        status[s, p] = STATUS_PERFECT_FIT
        return -1
    scale = 1.0 / (sigma * math.sqrt(n))
    flat_bound = critval * math.sqrt(2.0)  # MOSUM: logPlus(t / n) = 1 while t / n <= e
    wsum = esum
    if not cusum:
        wsum = 0.0
        for i in range(offset + 1 - window, offset):
            wsum += buf[i]
    first = -1
    total = 0.0
    biggest = 0.0
    finite = True
    for j in range(m):
        i = offset + j
        if cusum or j == 0:
            wsum += buf[i]
        else:
            wsum += buf[i] - buf[i - window]
        value = wsum * scale
        if not math.isfinite(value):
            finite = False
        total += value
        size = abs(value)
        if size > biggest:
            biggest = size
        if want_process or (first < 0 and (cusum or size > flat_bound)):  # the log only when needed
            bound = process_bound((n + j + 1) / n, critval, cusum)
            if first < 0 and size > bound:
                first = j
            if want_process:
                sel[j] = value
                sel[m + j] = bound
    statistic[s, p] = biggest
    mosum_mean[s, p] = total / m
    return first if finite else -1
