"""Samples from a random Gaussian mixture, for clustering tests and benchmarks."""

from __future__ import annotations

import numpy as np


def _wishart(scale_cholesky, dof, rng):
    """One Wishart(dof, L L^T) draw by Bartlett's decomposition (Odell & Feiveson).

    ``A`` is lower triangular with ``A_ii = sqrt(χ²(dof - i))`` and standard normal
    entries below the diagonal; the draw is ``L A A^T L^T``.
    """
    n_features = scale_cholesky.shape[0]
    a = np.tril(rng.standard_normal((n_features, n_features)), -1)
    a[np.diag_indices(n_features)] = np.sqrt(rng.chisquare(dof - np.arange(n_features)))
    la = scale_cholesky @ a
    return la @ la.T


def make_gmm(n_samples=1000, n_features=2, n_components=3, *, separation=10.0,
             dof=None, random_state=None, dtype=np.float64, return_params=False):
    """Draw samples from a random Gaussian mixture model, as the paper's evaluation.

    Mixture weights are uniform draws normalised to one; means are uniform in
    ``[-separation, separation]^D`` times ``sqrt(n_components)`` (so they are
    spread out); every covariance is a Wishart draw with ``dof`` degrees of
    freedom and scale ``I / dof`` (mean ``I``). Each sample picks a component by
    its weight and is ``μ + L z`` with ``L`` the covariance's Cholesky factor.

    Parameters
    ----------
    n_samples, n_features, n_components : int
    separation : float
        Spread of the means in units of the (unit-scale) component widths; larger
        values make the components easier to separate.
    dof : int, optional
        Wishart degrees of freedom, at least ``n_features``; default
        ``n_features + 2`` (random, clearly non-spherical shapes).
    random_state : int, numpy Generator or None
    dtype : numpy dtype
        dtype of ``X``.
    return_params : bool
        Also return the true ``(weights, means, covariances)``.

    Returns
    -------
    X : ndarray (n_samples, n_features)
    labels : ndarray (n_samples,) int64
        Component of each sample.
    params : tuple, only if ``return_params``
    """
    for name, value in (("n_samples", n_samples), ("n_features", n_features),
                        ("n_components", n_components)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    dof = n_features + 2 if dof is None else dof
    if dof < n_features:
        raise ValueError(f"dof must be at least n_features={n_features}, got {dof}")
    if not separation >= 0:
        raise ValueError(f"separation must be >= 0, got {separation}")
    rng = np.random.default_rng(random_state)
    weights = rng.uniform(0.5, 1.5, n_components)
    weights /= weights.sum()
    spread = separation * np.sqrt(n_components)
    means = rng.uniform(-spread, spread, (n_components, n_features))
    scale_cholesky = np.eye(n_features) / np.sqrt(dof)
    covariances = np.array([_wishart(scale_cholesky, dof, rng) for _ in range(n_components)])
    labels = rng.choice(n_components, size=n_samples, p=weights).astype(np.int64)
    X = np.empty((n_samples, n_features))
    for k in range(n_components):
        members = labels == k
        z = rng.standard_normal((int(members.sum()), n_features))
        X[members] = means[k] + z @ np.linalg.cholesky(covariances[k]).T
    X = X.astype(dtype, copy=False)
    if return_params:
        return X, labels, (weights, means, covariances)
    return X, labels
