"""Reference engine: plain NumPy, written for clarity rather than speed.

Every engine module exposes the same three functions; the estimators in
``_gmm.py``/``_kmeans.py`` only ever call these, so engines are interchangeable.

``gmm_statistics``
    one E step plus the sufficient statistics of the following M step.
``gmm_log_resp``
    per-sample log responsibilities and log-likelihoods (predict/score).
``kmeans_statistics``
    one Lloyd assignment plus the sums needed to move the centres.

Inputs are float64, C-contiguous, finite (rows with NaN are removed by the caller).
"""

from __future__ import annotations

import numpy as np

LOG_2PI = np.log(2.0 * np.pi)


def prepare(X):
    """Return ``X`` as the engine wants it (float64, C order)."""
    return np.ascontiguousarray(X, dtype=np.float64)


def log_gaussian_density(X, means, precisions_cholesky, covariance_type):
    """Log-density of every sample under every component, shape (N, K).

    With the Cholesky factor ``P`` of the precision matrix (``P P^T = Σ^-1``,
    upper triangular as in scikit-learn) the Mahalanobis term is ``||(x-μ) P||²``
    and ``log|Σ|^(-1/2) = Σ_j log P_jj``: a triangular product instead of an
    inverse, as in the paper.
    """
    n_samples, n_features = X.shape
    n_components = means.shape[0]
    log_density = np.empty((n_samples, n_components))
    for k in range(n_components):
        diff = X - means[k]
        if covariance_type == "full":
            y = diff @ precisions_cholesky[k]
            log_det = np.sum(np.log(np.diag(precisions_cholesky[k])))
        else:
            y = diff * precisions_cholesky[k]
            log_det = np.sum(np.log(precisions_cholesky[k]))
        mahalanobis = np.sum(y * y, axis=1)
        log_density[:, k] = -0.5 * (n_features * LOG_2PI + mahalanobis) + log_det
    return log_density


def logsumexp_rows(a):
    """``log Σ_k exp(a[:, k])`` without overflow: shift by the row maximum."""
    row_max = np.max(a, axis=1, keepdims=True)
    return row_max[:, 0] + np.log(np.sum(np.exp(a - row_max), axis=1))


def gmm_log_resp(X, means, precisions_cholesky, log_weights, covariance_type):
    """Log responsibilities (N, K) and per-sample log-likelihood (N,)."""
    weighted = log_gaussian_density(X, means, precisions_cholesky, covariance_type)
    weighted += log_weights
    log_prob_norm = logsumexp_rows(weighted)
    return weighted - log_prob_norm[:, None], log_prob_norm


def gmm_statistics(X, means, precisions_cholesky, log_weights, covariance_type):
    """E step and M-step sufficient statistics, centred on the current means.

    Returns
    -------
    log_likelihood : float
        ``Σ_i log p(x_i)`` under the current parameters.
    nk : ndarray (K,)
        ``Σ_i r_ik``.
    s1 : ndarray (K, D)
        ``Σ_i r_ik (x_i - μ_k)``.
    s2 : ndarray (K, D, D) or (K, D)
        ``Σ_i r_ik (x_i - μ_k)(x_i - μ_k)^T`` (its diagonal for "diag").
        Centring on the current means keeps the one-pass covariance free of
        the cancellation of ``E[xx^T] - μμ^T``.
    """
    log_resp, log_prob_norm = gmm_log_resp(
        X, means, precisions_cholesky, log_weights, covariance_type
    )
    resp = np.exp(log_resp)
    n_components, n_features = means.shape
    nk = resp.sum(axis=0)
    s1 = np.empty((n_components, n_features))
    if covariance_type == "full":
        s2 = np.empty((n_components, n_features, n_features))
    else:
        s2 = np.empty((n_components, n_features))
    for k in range(n_components):
        diff = X - means[k]
        s1[k] = resp[:, k] @ diff
        if covariance_type == "full":
            s2[k] = (resp[:, k, None] * diff).T @ diff
        else:
            s2[k] = resp[:, k] @ (diff * diff)
    return float(np.sum(log_prob_norm)), nk, s1, s2


def kmeans_statistics(X, centers, sums_only=False):
    """One Lloyd assignment: nearest centre per sample and per-cluster sums.

    ``sums_only=True`` tells an engine that only the counts and sums are needed (all
    that a Lloyd iteration uses); it may then return None for the labels and the SSE
    (the cpu engine does: it neither writes labels nor computes distances twice; this
    engine and the cuda one return everything anyway).

    Returns
    -------
    labels : ndarray (N,) int64 or None
    sse : ndarray (K,) or None
        Sum of squared distances of each cluster's samples to its centre.
    counts : ndarray (K,)
    sums : ndarray (K, D)
        ``Σ x_i`` over each cluster's samples.
    """
    n_clusters = centers.shape[0]
    squared_distances = np.empty((X.shape[0], n_clusters))
    for k in range(n_clusters):
        diff = X - centers[k]
        squared_distances[:, k] = np.sum(diff * diff, axis=1)
    labels = np.argmin(squared_distances, axis=1)
    nearest = squared_distances[np.arange(X.shape[0]), labels]
    sse = np.bincount(labels, weights=nearest, minlength=n_clusters)
    counts = np.bincount(labels, minlength=n_clusters).astype(np.float64)
    sums = np.zeros((n_clusters, X.shape[1]))
    np.add.at(sums, labels, X)
    return labels.astype(np.int64), sse, counts, sums
