"""Least squares on normal equations with R's in-order aliasing (LINPACK pivoting)."""

from __future__ import annotations

import numpy as np

#: Equilibrated Gram pivot below which a column counts as aliased in the recursive
#: residuals. R's QR (``lm.fit``) uses 1e-7 on |r_jj| / ||x_j||, i.e. 1e-14 on this squared
#: scale, but pivots computed from a Gram matrix carry rounding errors of that size on
#: exactly singular starts (two dates a whole number of years apart), so engines could
#: disagree; 1e-10 (as the monitoring fit's SINGULAR_PIVOT_TOL) decides robustly.
ALIAS_PIVOT_TOL = 1e-10


def fit_in_order(gram: np.ndarray, rhs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Least-squares coefficients from normal equations, dropping aliased columns like R.

    Columns are taken in order; a column whose equilibrated Cholesky pivot (``1 - R^2`` on
    the columns kept before it) is below :data:`ALIAS_PIVOT_TOL` is aliased: coefficient 0
    and zero rows/columns in the returned inverse (R ``lm.fit`` with LINPACK pivoting,
    as strucchange's ``recresid`` uses on rank-deficient starts).

    Returns ``(beta, inverse, kept)``, ``kept`` a boolean mask of the non-aliased columns.
    """
    k = gram.shape[0]
    d = np.sqrt(np.abs(np.diag(gram)))
    if np.all(d > 0):  # the common full-rank case: one factorisation
        try:
            chol = np.linalg.cholesky(gram / np.outer(d, d))
            if np.min(np.diag(chol)) ** 2 >= ALIAS_PIVOT_TOL:
                inverse = np.linalg.inv(gram)
                return inverse @ rhs, inverse, np.ones(k, dtype=bool)
        except np.linalg.LinAlgError:
            pass
    keep: list[int] = []
    for j in range(k):
        if gram[j, j] <= 0:
            continue
        cols = keep + [j]
        d = np.sqrt(np.diag(gram)[cols])
        corr = gram[np.ix_(cols, cols)] / np.outer(d, d)
        try:
            chol = np.linalg.cholesky(corr)
        except np.linalg.LinAlgError:
            continue
        if chol[-1, -1] ** 2 >= ALIAS_PIVOT_TOL:
            keep.append(j)
    inverse = np.zeros((k, k))
    beta = np.zeros(k)
    if keep:
        sub = np.linalg.inv(gram[np.ix_(keep, keep)])
        inverse[np.ix_(keep, keep)] = sub
        beta[keep] = sub @ rhs[keep]
    kept = np.zeros(k, dtype=bool)
    kept[keep] = True
    return beta, inverse, kept


def solve_in_order(gram: np.ndarray, rhs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(beta, inverse)`` of :func:`fit_in_order`."""
    beta, inverse, _ = fit_in_order(gram, rhs)
    return beta, inverse


#: R's ``lm.fit`` tolerance: a column is aliased when the norm of its part orthogonal to
#: the columns kept before it is below this fraction of its own norm (LINPACK ``dqrdc2``).
LM_FIT_TOL = 1e-7


def fit_in_order_qr(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`fit_in_order` from the design itself, by Householder QR: R's exact aliasing
    rule (:data:`LM_FIT_TOL` on the column norms), which normal equations cannot resolve
    (it is 1e-14 on their squared scale). Used where near-aliased columns are common:
    seasonal dummies on segments that miss some levels.

    Returns ``(beta, inverse, kept)`` as :func:`fit_in_order`.
    """
    n, k = X.shape
    norms = np.linalg.norm(X, axis=0)
    keep: list[int] = []
    candidates = [j for j in range(k) if norms[j] > 0]
    while candidates:
        # Column j's part orthogonal to the kept columns before it is |r_jj| of the QR of
        # those columns and j. One QR of the kept and all remaining columns gives it for
        # each of them up to the first aliased one, whose reflector would then project the
        # next ones on a direction of rounding noise: the columns after it start a new QR.
        r = np.linalg.qr(X[:, keep + candidates], mode="r")
        rest: list[int] = []
        for position, j in enumerate(candidates):
            at = len(keep)
            if at >= n:  # more columns than rows: the last row's entry, as a QR of keep + [j]
                aliased = abs(r[n - 1, at]) < LM_FIT_TOL * norms[j]
            else:
                aliased = abs(r[at, at]) < LM_FIT_TOL * norms[j]
            if aliased:
                rest = candidates[position + 1:]
                break
            keep.append(j)
        candidates = rest
    beta, inverse = np.zeros(k), np.zeros((k, k))
    if keep:
        q, r = np.linalg.qr(X[:, keep])
        r_inv = np.linalg.inv(r)
        beta[keep] = r_inv @ (q.T @ y)
        inverse[np.ix_(keep, keep)] = r_inv @ r_inv.T
    kept = np.zeros(k, dtype=bool)
    kept[keep] = True
    return beta, inverse, kept


def deficient_prefix_residuals(X: np.ndarray, y: np.ndarray) -> tuple[int, np.ndarray]:
    """Where the recursive residuals of ``X``, ``y`` start on rank-deficient prefixes (season
    levels or annual repeats missing among the first rows), R's ``recresid`` fits each prefix
    with ``lm.fit``'s in-order aliasing (:func:`fit_in_order_qr`) until one has full rank.

    Returns ``p``, the length of the first full-rank prefix (``n + 1`` when none has), and
    the recursive residuals of rows ``k .. p - 1``, each from its own restricted fit.
    """
    n, k = X.shape
    residuals = []
    for r in range(k, n + 1):
        beta, inverse, kept = fit_in_order_qr(X[:r], y[:r])
        if kept.all():
            return r, np.array(residuals)
        if r < n:
            x = X[r]
            residuals.append((y[r] - x @ beta) / np.sqrt(1.0 + x @ inverse @ x))
    return n + 1, np.array(residuals)
