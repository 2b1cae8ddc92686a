"""Pieces shared by KMeans and GaussianMixture: engines, M step, seeding."""

from __future__ import annotations

import math

import numpy as np

from ..engines import load, register, resolve

#: The engines of the clustering estimators: modules of the E/M-step statistics. "auto"
#: is the cpu engine: the cuda one brings its statistics back to the host every iteration.
ENGINES = register("cluster", {
    "reference": f"{__package__}._reference",
    "cpu": f"{__package__}._cpu",
    "cuda": f"{__package__}._cuda",
}, auto_gpu=False).modules
COVARIANCE_TYPES = ("full", "tied", "diag", "spherical")
#: The engines compute "full" or "diag" statistics; "tied" and "spherical" mixtures
#: are evaluated through them (see :func:`engine_precisions`).
ENGINE_COVARIANCE_TYPE = {"full": "full", "tied": "full", "diag": "diag", "spherical": "diag"}


def resolve_engine(engine):
    """Return the engine module for ``engine`` (imported lazily: cuda only on request)."""
    name = resolve("cluster", engine)
    module = load("cluster", name)
    if name == "cuda":
        module.check_available()
    return module


def check_positive_int(value, name):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def check_nonnegative_float(value, name):
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number, got {value!r}") from None
    if not np.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return value


def precision_cholesky_from_covariances(covariances, covariance_type):
    """Upper-triangular ``P`` with ``P P^T = Σ^-1`` per component (scikit-learn's layout:
    (K, D, D) "full", (D, D) "tied", (K, D) "diag", (K,) "spherical").

    Raises a ValueError (asking for a larger ``reg_covar``) when a covariance is
    not positive definite.
    """
    message = (
        "a component's covariance is not positive definite (too few or collinear "
        "samples in it); increase reg_covar or decrease n_components"
    )
    if covariance_type == "tied":
        return precision_cholesky_from_covariances(covariances[None], "full")[0]
    if covariance_type == "full":
        n_components, n_features, _ = covariances.shape
        result = np.empty_like(covariances)
        identity = np.eye(n_features)
        for k in range(n_components):
            try:
                lower = np.linalg.cholesky(covariances[k])
            except np.linalg.LinAlgError:
                raise ValueError(message) from None
            result[k] = np.linalg.solve(lower, identity).T
        if not np.all(np.isfinite(result)):
            raise ValueError(message)
        return result
    if np.any(covariances <= 0) or not np.all(np.isfinite(covariances)):
        raise ValueError(message)
    return 1.0 / np.sqrt(covariances)


def precision_cholesky_from_precisions(precisions, covariance_type):
    """``P`` from user-given precision matrices (as scikit-learn's ``precisions_init``)."""
    precisions = np.asarray(precisions, dtype=np.float64)
    if covariance_type == "tied":
        return precision_cholesky_from_precisions(precisions[None], "full")[0]
    if covariance_type == "full":
        result = np.empty_like(precisions)
        for k in range(precisions.shape[0]):
            try:
                flipped = np.linalg.cholesky(precisions[k][::-1, ::-1])
            except np.linalg.LinAlgError:
                raise ValueError("precisions_init must be positive definite") from None
            result[k] = flipped[::-1, ::-1]
        return result
    if np.any(precisions <= 0):
        raise ValueError("precisions_init must be positive")
    return np.sqrt(precisions)


def precisions_from_cholesky(precisions_cholesky, covariance_type):
    if covariance_type == "full":
        return np.einsum("kij,klj->kil", precisions_cholesky, precisions_cholesky)
    if covariance_type == "tied":
        return precisions_cholesky @ precisions_cholesky.T
    return precisions_cholesky**2


def engine_precisions(precisions_cholesky, covariance_type, n_components, n_features):
    """The factors in an engine's layout and the statistics it should compute.

    A tied mixture is a full one whose K factors are equal, a spherical mixture a
    diagonal one whose D factors are equal: the engines evaluate them so, and return
    the full or diagonal statistics from which :func:`gmm_m_step` pools the shared
    covariance or averages the features' variances.
    """
    factors = np.asarray(precisions_cholesky, dtype=np.float64)
    if covariance_type == "tied":
        factors = np.repeat(factors[None], n_components, axis=0)
    elif covariance_type == "spherical":
        factors = np.repeat(factors[:, None], n_features, axis=1)
    return factors, ENGINE_COVARIANCE_TYPE[covariance_type]


def gmm_m_step(nk, s1, s2, pivot_means, reg_covar, covariance_type):
    """New weights, means, covariances and precision factors from summed statistics.

    ``s1``/``s2`` are centred on ``pivot_means`` (the means they were computed
    with), ``s2`` full for "full"/"tied" and diagonal for "diag"/"spherical". As in
    scikit-learn, ``10·eps`` is added to every ``nk`` so that an empty component
    keeps its mean, gets covariance ``reg_covar·I`` and a weight of about zero
    instead of dividing by zero. "tied": the components' scatter matrices pooled,
    divided by ``Σ nk``; "spherical": the mean over features of the diagonal
    covariance (scikit-learn's definitions).
    """
    nk = nk + 10 * np.finfo(np.float64).eps
    shift = s1 / nk[:, None]
    means = pivot_means + shift
    n_features = means.shape[1]
    diagonal = np.arange(n_features)
    if covariance_type in ("full", "tied"):
        outer = shift[:, :, None] * shift[:, None, :]
        if covariance_type == "full":
            covariances = s2 / nk[:, None, None] - outer
        else:
            covariances = (s2 - nk[:, None, None] * outer).sum(axis=0) / nk.sum()
        covariances = 0.5 * (covariances + np.swapaxes(covariances, -1, -2))
        covariances[..., diagonal, diagonal] += reg_covar
    else:
        covariances = s2 / nk[:, None] - shift * shift + reg_covar
        if covariance_type == "spherical":
            covariances = covariances.mean(axis=1)
    weights = nk / nk.sum()
    precisions_cholesky = precision_cholesky_from_covariances(covariances, covariance_type)
    return weights, means, covariances, precisions_cholesky


def nearest_centre(X, i, centers):
    """First centre at the smallest exact squared distance ``Σ_j (X[i, j] − c_kj)²`` from
    row ``i`` (summed in feature order), and that distance. Plain Python, compiled by the
    cpu engine (numba) and the cuda engine (a device function)."""
    nearest, smallest = 0, math.inf
    for k in range(centers.shape[0]):
        dist = 0.0
        for j in range(X.shape[1]):
            d = X[i, j] - centers[k, j]
            dist += d * d
        if dist < smallest:
            nearest, smallest = k, dist
    return nearest, smallest


def kmeans_plusplus(X, n_clusters, rng):
    """Greedy k-means++ seeding (Arthur & Vassilvitskii; 2 + log k trials as scikit-learn)."""
    n_samples = X.shape[0]
    n_trials = 2 + int(np.log(n_clusters))
    centers = np.empty((n_clusters, X.shape[1]))
    centers[0] = X[rng.integers(n_samples)]
    closest = np.sum((X - centers[0]) ** 2, axis=1)
    for c in range(1, n_clusters):
        total = closest.sum()
        if total <= 0:  # fewer distinct points than clusters: pick any
            candidates = rng.integers(n_samples, size=n_trials)
        else:
            cumulative = np.cumsum(closest)
            candidates = np.searchsorted(cumulative, rng.random(n_trials) * total)
            candidates = np.minimum(candidates, n_samples - 1)
        best_potential, best = np.inf, None
        for candidate in candidates:
            new_closest = np.minimum(closest, np.sum((X - X[candidate]) ** 2, axis=1))
            potential = new_closest.sum()
            if potential < best_potential:
                best_potential, best = potential, (candidate, new_closest)
        centers[c] = X[best[0]]
        closest = best[1]
    return centers
