"""k-means (Lloyd's algorithm) with scikit-learn's estimator API."""

from __future__ import annotations

import warnings

import numpy as np

from tscube import config

from ._base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    ClusterMixin,
    EstimatorChecks,
    TransformerMixin,
)
from ._common import check_nonnegative_float, check_positive_int, kmeans_plusplus, resolve_engine
from ._streaming import apply_per_sample, make_samples

KMEANS_INITS = ("k-means++", "random")


class KMeans(EstimatorChecks, ClassNamePrefixFeaturesOutMixin, TransformerMixin, ClusterMixin,
             BaseEstimator):
    """k-means clustering by Lloyd's assign/aggregate iterations.

    Each iteration is one pass over the data: every sample is assigned to its
    nearest centre while per-block sums and counts are accumulated, then the
    centres move to their cluster means (the parallel algorithm of the paper).

    Parameters
    ----------
    n_clusters : int
        Number of clusters ``K``.
    init : {"k-means++", "random"} or ndarray of shape (K, D)
        Seeding: greedy k-means++ or ``K`` distinct random samples, both drawn from a
        random subset of ``config.CLUSTER_INIT_SAMPLES`` samples; or explicit centres.
    n_init : int or "auto"
        Runs from different seedings; the one with the lowest inertia is kept
        (scikit-learn's rule). "auto": 10 with ``init="random"``, else 1. Explicit
        centres run once (with a warning if ``n_init`` asks for more).
    max_iter : int
        Maximum number of Lloyd iterations.
    tol : float
        Stop when the summed squared centre shift is at most
        ``tol × mean feature variance`` (scikit-learn's rule), or when no label changed
        (in-memory input only; streamed input does not keep labels between passes).
    random_state : int, numpy Generator or None
        Seed of the initialisation.
    engine : {"auto", "reference", "cpu", "cuda"}
        Implementation; "auto" is "cpu".
    feature_dim : str
        Name of the feature dimension of xarray input; all other dims are samples.

    Attributes
    ----------
    cluster_centers_ : ndarray (K, D)
    labels_ : ndarray (N,) or xarray.DataArray
        Label of every training sample (-1 for samples with a non-finite feature);
        only set for in-memory input (a label map for NumPy-backed xarray input).
    inertia_ : float
        Sum of squared distances of the samples to their closest centre.
    n_iter_ : int
    converged_ : bool

    Notes
    -----
    Empty clusters: with in-memory input, a cluster that receives no sample is
    moved to the sample farthest from its centre, as scikit-learn does; with
    streamed (dask) input it keeps its previous centre. A warning is issued at the
    end of ``fit`` if some cluster is still empty.
    """

    def __init__(self, n_clusters=8, *, init="k-means++", n_init="auto", max_iter=300, tol=1e-4,
                 random_state=None, engine="auto", feature_dim="band"):
        self.n_clusters = n_clusters
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.engine = engine
        self.feature_dim = feature_dim

    def _initial_centers(self, samples, rng):
        if not isinstance(self.init, str):
            centers = np.array(self.init, dtype=np.float64)
            if centers.shape != (self.n_clusters, samples.n_features):
                raise ValueError(
                    f"init must have shape (n_clusters, n_features) = "
                    f"({self.n_clusters}, {samples.n_features}), got {centers.shape}"
                )
            if not np.all(np.isfinite(centers)):
                raise ValueError("init must hold finite centres")
            return centers
        if self.init not in KMEANS_INITS:
            raise ValueError(f"init must be one of {KMEANS_INITS} or an array, got {self.init!r}")
        subset = samples.subsample(int(config.CLUSTER_INIT_SAMPLES), rng)
        if subset.shape[0] < self.n_clusters:  # tiny streamed chunks: take all
            subset = samples.subsample(samples.n_samples, rng)
        if self.init == "random":
            return subset[rng.choice(subset.shape[0], self.n_clusters, replace=False)].copy()
        return kmeans_plusplus(subset, self.n_clusters, rng)

    def fit(self, X, y=None):
        """Compute the clusters of ``X`` ((N, D) NumPy/dask array or xarray object)."""
        n_clusters = check_positive_int(self.n_clusters, "n_clusters")
        max_iter = check_positive_int(self.max_iter, "max_iter")
        tol = check_nonnegative_float(self.tol, "tol")
        engine = resolve_engine(self.engine)
        samples = make_samples(X, self.engine, engine, self.feature_dim)
        if samples.n_samples < n_clusters:
            raise ValueError(
                f"n_clusters={n_clusters} is larger than the number of samples with "
                f"finite features ({samples.n_samples})"
            )
        rng = np.random.default_rng(self.random_state)
        # scikit-learn's tolerance: tol × the features' mean variance (none for tol 0)
        scaled_tol = tol * float(np.mean(samples.moments()[1])) if tol > 0 else 0.0
        best = None
        for _ in range(self._n_runs()):
            run = lloyd(samples, self._initial_centers(samples, rng), max_iter, scaled_tol)
            if best is None or run[2].sum() < best[2].sum():  # lowest inertia; first on ties
                best = run
        centers, labels, sse, counts, n_iter, converged = best
        self.cluster_centers_ = centers
        self.inertia_ = float(sse.sum())
        self.n_iter_ = n_iter
        self.converged_ = converged
        self.n_features_in_ = samples.n_features
        if labels is not None:  # in-memory input; xarray input gets a label map
            self.labels_ = (self.predict(X) if type(X).__module__.startswith("xarray")
                            else samples.at_rows(labels, -1))
        if np.any(counts == 0):
            warnings.warn(f"{int(np.sum(counts == 0))} of {n_clusters} clusters are empty",
                          RuntimeWarning, stacklevel=2)
        return self

    def _n_runs(self) -> int:
        if isinstance(self.n_init, str):
            if self.n_init != "auto":
                raise ValueError(f"n_init must be a positive integer or 'auto', got {self.n_init!r}")
            return 10 if isinstance(self.init, str) and self.init == "random" else 1
        n_init = check_positive_int(self.n_init, "n_init")
        if not isinstance(self.init, str) and n_init > 1:
            warnings.warn(f"explicit initial centres: running once, not n_init={n_init} times",
                          RuntimeWarning, stacklevel=3)
            return 1
        return n_init

    @property
    def _n_features_out(self):
        """Number of outputs of ``transform`` (names from ``get_feature_names_out``)."""
        return self.cluster_centers_.shape[0]

    def predict(self, X):
        """Index of the nearest centre per sample (-1 where a feature is not finite)."""
        self._check_fitted_input(X)
        engine = resolve_engine(self.engine)
        centers = self.cluster_centers_

        def nearest(rows):
            return engine.kmeans_statistics(engine.prepare(rows), centers)[0]

        return apply_per_sample(X, nearest, None, np.int64, -1, self.feature_dim)

    def fit_predict(self, X, y=None):
        return self.fit(X).predict(X)

    def transform(self, X):
        """Euclidean distance of every sample to every centre, shape (..., K) (NaN where a
        feature is not finite), as scikit-learn's ``KMeans.transform``."""
        self._check_fitted_input(X)
        centers = self.cluster_centers_
        squared_norms = np.einsum("kd,kd->k", centers, centers)

        def distances(rows):
            squared = np.einsum("nd,nd->n", rows, rows)[:, None] - 2.0 * rows @ centers.T + squared_norms
            return np.sqrt(np.maximum(squared, 0.0))

        return apply_per_sample(X, distances, centers.shape[0], np.float64, np.nan, self.feature_dim)

    def score(self, X, y=None):
        """Opposite of the inertia of ``X`` under the fitted centres (higher is better)."""
        self._check_fitted_input(X)
        engine = resolve_engine(self.engine)
        samples = make_samples(X, self.engine, engine, self.feature_dim)
        return -float(samples.kmeans_statistics(self.cluster_centers_)[1].sum())


def lloyd(samples, centers, max_iter, tol):
    """Lloyd iterations as scikit-learn's ``_kmeans_single_lloyd``.

    Stops when no label changed or when the summed squared centre shift is at most
    ``tol``. Unchanged labels give unchanged sums, hence a zero shift, so an iteration
    only needs the counts and sums (no labels, no SSE: ``sums_only``). The labels are
    computed only when a cluster is empty, to relocate it (in-memory data), and then
    compared with those of the previous iteration: equal labels mean equal counts, so
    that iteration had relocated too and kept its labels. Returns centres, labels
    (None for streamed data), per-cluster SSE and counts under the final centres, the
    number of iterations and whether it converged.
    """
    previous_labels = None
    converged = False
    for iteration in range(1, max_iter + 1):
        _, _, counts, sums = samples.kmeans_statistics(centers, sums_only=True)
        labels = None
        if np.any(counts == 0) and hasattr(samples, "host"):
            labels, _, counts, sums = samples.kmeans_statistics(centers)
            relocate_empty_clusters(samples.host, centers, labels, counts, sums)
        new_centers = centers.copy()
        filled = counts > 0
        new_centers[filled] = sums[filled] / counts[filled, None]
        shift = float(np.sum((new_centers - centers) ** 2))
        centers = new_centers
        if labels is not None and previous_labels is not None and np.array_equal(
                labels, previous_labels):
            converged = True
            break
        if shift <= tol:
            converged = True
            break
        previous_labels = labels
    labels, sse, counts, _ = samples.kmeans_statistics(centers)
    return centers, labels, sse, counts, iteration, converged


def relocate_empty_clusters(X, centers, labels, counts, sums):
    """Move each empty cluster to one of the samples farthest from their centre.

    Same rule as scikit-learn (in place on ``counts``/``sums``): the farthest
    samples leave their cluster's sums and seed the empty clusters; labels are
    left as they are until the next assignment.
    """
    empty = np.flatnonzero(counts == 0)
    distances = np.sum((X - centers[labels]) ** 2, axis=1)
    farthest = np.argpartition(distances, -empty.size)[:-empty.size - 1:-1]
    for cluster, sample in zip(empty, farthest):
        old = labels[sample]
        sums[old] -= X[sample]
        counts[old] -= 1
        sums[cluster] = X[sample]
        counts[cluster] = 1

