"""Confidence intervals of breakpoints: strucchange's ``confint.breakpointsfull`` with
``het.err = FALSE`` (as ``bfast()`` asks for), shared by every engine.

Bai (1997): the break's estimation error, scaled by ``sigma^2 / (delta' Q1 delta)``,
converges to the argmax of a two-sided Brownian motion with drift whose distribution
function is ``pargmaxV``; the 2.5 % and 97.5 % quantiles are found with R's ``uniroot``
(Brent's zeroin at R's tolerance ``eps^0.25``, which decides where the interval's bounds
round to). Every step follows R's arithmetic, so that the bounds' indices are R's.
"""

from __future__ import annotations

import math

from ..._jit import jit

#: R's ``uniroot`` default tolerance: ``.Machine$double.eps^0.25`` (2^-13).
UNIROOT_TOL = 2.0**-13
#: R's ``uniroot`` default ``maxiter``.
UNIROOT_MAXITER = 1000
_DBL_EPSILON = 2.0**-52
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


@jit()
def log_pnorm_lower(z):
    """``log(pnorm(-z))`` for ``z >= 0`` (R's ``pnorm(-z, log.p = TRUE)``), to full
    precision far into the tail, where ``erfc`` underflows (the bracketing of the roots
    evaluates the distribution at thousands)."""
    if z < 37.0:  # erfc is accurate to its last bits until it underflows (z ~ 38.5)
        return math.log(0.5 * math.erfc(z / math.sqrt(2.0)))
    # Mills' ratio: pnorm(-z) = phi(z) / z * (1 - 1/z^2 + 3/z^4 - ...), to rounding for z >= 37
    w = 1.0 / (z * z)
    series = 1.0 - w * (1.0 - 3.0 * w * (1.0 - 5.0 * w * (1.0 - 7.0 * w * (1.0 - 9.0 * w * (1.0 - 11.0 * w)))))
    return -0.5 * z * z - math.log(z) - _LOG_SQRT_2PI + math.log(series)


@jit()
def pargmax_v(x, xi, phi1, phi2):
    """strucchange's ``pargmaxV``: P(argmax V <= x) of the limiting distribution."""
    phi = xi * (phi2 / phi1) ** 2
    if x < 0.0:
        x = -x
        frac = xi / phi
        return (-math.exp(math.log(x) / 2.0 - x / 8.0 - _LOG_SQRT_2PI)
                - (phi / xi * (phi + 2.0 * xi) / (phi + xi))
                * math.exp((frac * (1.0 + frac) * x / 2.0) + log_pnorm_lower((0.5 + frac) * math.sqrt(x)))
                + math.exp(math.log(x / 2.0 - 2.0 + ((phi + 2.0 * xi) ** 2) / ((phi + xi) * xi))
                           + log_pnorm_lower(math.sqrt(x) / 2.0)))
    frac = xi * xi / phi
    log_x = math.log(x) if x > 0.0 else -math.inf
    return (1.0 + math.sqrt(frac) * math.exp(log_x / 2.0 - (frac * x) / 8.0 - _LOG_SQRT_2PI)
            + (xi / phi * (2.0 * phi + xi) / (phi + xi))
            * math.exp(((phi + xi) * x / 2.0) + log_pnorm_lower((phi + xi / 2.0) / math.sqrt(phi) * math.sqrt(x)))
            - math.exp(math.log(((2.0 * phi + xi) ** 2) / ((phi + xi) * phi) - 2.0 + frac * x / 2.0)
                       + log_pnorm_lower(math.sqrt(frac) * math.sqrt(x) / 2.0)))


@jit()
def _zeroin_quantile(level, ax, bx, xi, phi1, phi2):
    """R's ``uniroot(pargmaxV(.) - level, c(ax, bx))``: R_zeroin2 (Brent 1973) with R's
    default tolerance and iteration limit, step for step."""
    a = ax
    b = bx
    fa = pargmax_v(a, xi, phi1, phi2) - level
    fb = pargmax_v(b, xi, phi1, phi2) - level
    c = a
    fc = fa
    if fa == 0.0:
        return a
    if fb == 0.0:
        return b
    tol = UNIROOT_TOL
    for _ in range(UNIROOT_MAXITER + 1):
        prev_step = b - a
        if abs(fc) < abs(fb):
            a = b
            b = c
            c = a
            fa = fb
            fb = fc
            fc = fa
        tol_act = 2.0 * _DBL_EPSILON * abs(b) + tol / 2.0
        new_step = (c - b) / 2.0
        if abs(new_step) <= tol_act or fb == 0.0:
            return b
        if abs(prev_step) >= tol_act and abs(fa) > abs(fb):
            cb = c - b
            if a == c:
                t1 = fb / fa
                p = cb * t1
                q = 1.0 - t1
            else:
                q = fa / fc
                t1 = fb / fc
                t2 = fb / fa
                p = t2 * (cb * q * (q - t1) - (b - a) * (t1 - 1.0))
                q = (q - 1.0) * (t1 - 1.0) * (t2 - 1.0)
            if p > 0.0:
                q = -q
            else:
                p = -p
            if p < (0.75 * cb * q - abs(tol_act * q) / 2.0) and p < abs(prev_step * q / 2.0):
                new_step = p / q
        if abs(new_step) < tol_act:
            new_step = tol_act if new_step > 0.0 else -tol_act
        a = b
        fa = fb
        b += new_step
        fb = pargmax_v(b, xi, phi1, phi2) - level
        if (fb > 0.0 and fc > 0.0) or (fb < 0.0 and fc < 0.0):
            c = a
            fc = fa
    return b


@jit()
def break_interval(breakpoint, sigma2, q_prod1, q_prod2, out, level=0.95):
    """One break's interval: ``out[0]``, ``out[1]`` = R's ``bp - ceiling(upper)`` and
    ``bp - floor(lower)`` (NaN where R warns "Confidence interval cannot be computed").

    ``sigma2``: the RSS of the whole segmented model over ``n`` (the same on both sides,
    ``het.err = FALSE``); ``q_prod1``, ``q_prod2``: ``delta' Q delta`` of the segments
    before and after, ``Q`` their ``X'X / n_s`` and ``delta`` the change of their
    coefficients (the mean square of the two segment fits' difference over each
    segment's rows)."""
    a2 = (1.0 - level) / 2.0
    xi = q_prod2 / q_prod1
    phi = math.sqrt(sigma2)
    p0 = pargmax_v(0.0, xi, phi, phi)
    if math.isnan(p0) or p0 < a2 or p0 > 1.0 - a2:
        out[0] = math.nan
        out[1] = math.nan
        return
    ub = 0.0
    while pargmax_v(ub, xi, phi, phi) < 1.0 - a2:
        ub += 1000.0
    lb = 0.0
    while pargmax_v(lb, xi, phi, phi) > a2:
        lb -= 1000.0
    upper = _zeroin_quantile(1.0 - a2, 0.0, ub, xi, phi, phi) * phi * phi / q_prod1
    lower = _zeroin_quantile(a2, lb, 0.0, xi, phi, phi) * phi * phi / q_prod1
    out[0] = breakpoint - math.ceil(upper)
    out[1] = breakpoint - math.floor(lower)
