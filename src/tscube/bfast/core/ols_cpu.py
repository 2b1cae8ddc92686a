"""Least squares for the cpu kernels (numba) that fit one pixel at a time: the normal
equations built row by row in float64, and their solve by an equilibrated Cholesky
factorisation that flags a numerically singular design (shared by BFAST Monitor's
per-pixel formulation and the near-real-time fit)."""

from __future__ import annotations

import math

from ..._jit import jit
from .inputs import SINGULAR_PIVOT_TOL


@jit()
def solve_equilibrated(G, b, k, beta, work):
    """Solve ``G beta = b`` (G symmetric positive semi-definite, k x k) by an equilibrated
    Cholesky factorisation; return False if G is numerically singular.

    The squared pivots of the unit-diagonal scaled matrix are ``1 - R^2`` of each column on
    the previous ones; a pivot below ``SINGULAR_PIVOT_TOL`` means an aliased regressor.
    """
    d = work[0]
    L = work[1:]
    for a in range(k):
        if G[a, a] <= 0.0:
            return False
        d[a] = math.sqrt(G[a, a])
    for a in range(k):
        for c in range(a + 1):
            s = G[a, c] / (d[a] * d[c])
            for m in range(c):
                s -= L[a, m] * L[c, m]
            if a == c:
                if s < SINGULAR_PIVOT_TOL:
                    return False
                L[a, a] = math.sqrt(s)
            else:
                L[a, c] = s / L[c, c]
    for a in range(k):  # the scaled system
        beta[a] = b[a] / d[a]
    cholesky_solve(L, beta, k)
    for a in range(k):
        beta[a] /= d[a]
    return True


@jit()
def cholesky_in_place(L, k, min_pivot):
    """The Cholesky factor of the Gram in ``L``'s lower triangle (k x k), in place; False,
    unfinished, as soon as an equilibrated pivot (``1 - R^2`` of a column on the ones
    before it: the pivot over the column's diagonal entry, still in place when it is
    taken) falls below ``min_pivot``. A zero column fails too."""
    for a in range(k):
        for b in range(a + 1):
            s = L[a, b]
            for m in range(b):
                s -= L[a, m] * L[b, m]
            if a == b:
                if not (s > 0.0 and s >= min_pivot * L[a, a]):
                    return False
                L[a, a] = math.sqrt(s)
            else:
                L[a, b] = s / L[b, b]
    return True


@jit(inline="always")
def cholesky_solve(L, u, k):
    """``u = (L L')^{-1} u`` in place, forward then backward substitution (``L``: the
    lower triangle of a Cholesky factor, k x k)."""
    for a in range(k):
        s = u[a]
        for m in range(a):
            s -= L[a, m] * u[m]
        u[a] = s / L[a, a]
    for a in range(k - 1, -1, -1):
        s = u[a]
        for m in range(a + 1, k):
            s -= L[m, a] * u[m]
        u[a] = s / L[a, a]


@jit()
def add_normal_row(G, xy, X, r, v):
    """Add row ``r`` of ``X`` (observed ``v``) to the normal equations: the lower triangle
    of ``G = X'X`` and ``xy = X'y``."""
    for a in range(X.shape[1]):
        xa = X[r, a]
        xy[a] += xa * v
        for c in range(a + 1):
            G[a, c] += xa * X[r, c]


@jit()
def mirror_lower(G):
    """Copy the lower triangle of ``G`` to the upper one."""
    for a in range(G.shape[0]):
        for c in range(a + 1, G.shape[0]):
            G[a, c] = G[c, a]
