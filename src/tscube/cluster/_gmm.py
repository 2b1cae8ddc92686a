"""Gaussian mixture models fitted by EM, with scikit-learn's estimator API."""

from __future__ import annotations

import warnings

import numpy as np

from ._base import BaseEstimator, DensityMixin, EstimatorChecks
from ._common import (
    COVARIANCE_TYPES,
    check_nonnegative_float,
    check_positive_int,
    engine_precisions,
    gmm_m_step,
    precision_cholesky_from_covariances,
    precision_cholesky_from_precisions,
    precisions_from_cholesky,
    resolve_engine,
)
from ._kmeans import KMeans
from ._streaming import apply_per_sample, make_samples

GMM_INITS = ("kmeans", "k-means++", "random_from_data")


class GaussianMixture(EstimatorChecks, DensityMixin, BaseEstimator):
    """Gaussian mixture fitted by expectation-maximisation.

    Every EM iteration is one pass over the data (E step and the sums of the
    M step together). Densities are evaluated in log space through the Cholesky
    factor of each precision matrix (triangular products, no inverse) and the
    responsibilities by the log-sum-exp trick, as in the paper.

    Parameters
    ----------
    n_components : int
        Number of mixture components ``K``.
    covariance_type : {"full", "tied", "diag", "spherical"}
        A full covariance matrix per component, one full matrix shared by all
        components, a diagonal matrix per component, or one variance per component
        (scikit-learn's options and layouts of ``covariances_``: (K, D, D), (D, D),
        (K, D), (K,)).
    tol : float
        Stop when the average log-likelihood improves by less than ``tol``.
    reg_covar : float
        Added to the diagonal of every covariance so that constant or collinear
        features and nearly empty components do not make it singular.
    max_iter : int
        Maximum number of EM iterations.
    init : {"kmeans", "k-means++", "random_from_data"}
        Initial parameters unless all of ``weights_init``/``means_init``/
        ``precisions_init`` are given. "kmeans": k-means clusters give the weights,
        means and a spherical covariance per component (the paper's start);
        "k-means++": the k-means++ seeds as means; "random_from_data": random samples
        as means. The last two use equal weights and the data's mean variance.
        "tied" starts from the weighted mean of the components' variances.
    weights_init, means_init, precisions_init : array-like, optional
        Explicit initial parameters (layouts as scikit-learn's); they override
        those of ``init``.
    random_state : int, numpy Generator or None
        Seed of the initialisation.
    engine : {"auto", "reference", "cpu", "cuda"}
        Implementation; "auto" is "cpu".
    feature_dim : str
        Name of the feature dimension of xarray input; all other dims are samples.

    Attributes
    ----------
    weights_, means_, covariances_, precisions_, precisions_cholesky_ : ndarray
        Fitted parameters (scikit-learn's layouts: ``precisions_cholesky_`` is the
        upper-triangular ``P`` with ``P P^T`` the precision matrix).
    converged_ : bool
    n_iter_ : int
    lower_bound_ : float
        Average log-likelihood of the training samples at the last E step.
    labels_ : ndarray (N,) or xarray.DataArray
        Most likely component of each training sample (-1 where a feature is not
        finite); only set for in-memory input (a label map for NumPy-backed
        xarray input).

    Notes
    -----
    Samples with a non-finite feature are ignored by ``fit``; ``predict`` labels
    them -1, ``predict_proba`` and ``score_samples`` give NaN. A component that
    receives no weight keeps its mean and gets covariance ``reg_covar·I`` and a
    weight of about 0 (as scikit-learn).
    """

    def __init__(self, n_components=1, *, covariance_type="full", tol=1e-3, reg_covar=1e-6,
                 max_iter=100, init="kmeans", weights_init=None, means_init=None,
                 precisions_init=None, random_state=None, engine="auto", feature_dim="band"):
        self.n_components = n_components
        self.covariance_type = covariance_type
        self.tol = tol
        self.reg_covar = reg_covar
        self.max_iter = max_iter
        self.init = init
        self.weights_init = weights_init
        self.means_init = means_init
        self.precisions_init = precisions_init
        self.random_state = random_state
        self.engine = engine
        self.feature_dim = feature_dim

    # ------------------------------------------------------------------ fitting
    def _check_parameters(self):
        self._k = check_positive_int(self.n_components, "n_components")
        check_positive_int(self.max_iter, "max_iter")
        check_nonnegative_float(self.tol, "tol")
        check_nonnegative_float(self.reg_covar, "reg_covar")
        if self.covariance_type not in COVARIANCE_TYPES:
            raise ValueError(
                f"covariance_type must be one of {COVARIANCE_TYPES}, got {self.covariance_type!r}"
            )
        if self.init not in GMM_INITS:
            raise ValueError(f"init must be one of {GMM_INITS}, got {self.init!r}")

    def _initialize(self, samples, rng):
        k, d, cov_type = self._k, samples.n_features, self.covariance_type
        explicit = (self.weights_init is not None, self.means_init is not None,
                    self.precisions_init is not None)
        mean_variance = float(np.mean(samples.moments()[1])) + self.reg_covar
        if not all(explicit):
            if self.init == "kmeans":
                kmeans = KMeans(k, max_iter=100, tol=1e-4, random_state=rng,
                                engine=self.engine)
                centers, counts, sse = _kmeans_for_init(kmeans, samples, rng)
                weights = counts + 10 * np.finfo(float).eps
                weights /= weights.sum()
                means = centers
                variances = np.where(counts > 0, sse / np.maximum(counts, 1) / d, 0.0)
                variances = np.maximum(variances, 0.0) + self.reg_covar
                variances[counts <= 1] = mean_variance
            else:
                kmeans = KMeans(k, init="k-means++" if self.init == "k-means++" else "random",
                                random_state=rng)
                means = kmeans._initial_centers(samples, rng)
                weights = np.full(k, 1.0 / k)
                variances = np.full(k, mean_variance)
            covariances = {
                "full": lambda: variances[:, None, None] * np.eye(d),
                "tied": lambda: np.dot(weights, variances) * np.eye(d),
                "diag": lambda: np.repeat(variances[:, None], d, axis=1),
                "spherical": lambda: variances,
            }[cov_type]()
        self.weights_ = weights if self.weights_init is None else self._check_array(
            self.weights_init, (k,), "weights_init")
        if self.weights_init is not None:
            if np.any(self.weights_ < 0) or not np.isclose(self.weights_.sum(), 1.0):
                raise ValueError("weights_init must be non-negative and sum to 1")
        self.means_ = means if self.means_init is None else self._check_array(
            self.means_init, (k, d), "means_init")
        if self.precisions_init is None:
            self.precisions_cholesky_ = precision_cholesky_from_covariances(covariances, cov_type)
        else:
            shape = {"full": (k, d, d), "tied": (d, d), "diag": (k, d), "spherical": (k,)}[cov_type]
            self.precisions_cholesky_ = precision_cholesky_from_precisions(
                self._check_array(self.precisions_init, shape, "precisions_init"), cov_type)

    @staticmethod
    def _check_array(value, shape, name):
        value = np.array(value, dtype=np.float64)
        if value.shape != shape:
            raise ValueError(f"{name} must have shape {shape}, got {value.shape}")
        if not np.all(np.isfinite(value)):
            raise ValueError(f"{name} must be finite")
        return value

    def fit(self, X, y=None):
        """Estimate the mixture's parameters from ``X`` by EM.

        ``X`` is an (N, D) NumPy or dask array or an xarray object whose
        ``feature_dim`` holds the features; dask-backed data is streamed chunk by
        chunk at every iteration.
        """
        self._check_parameters()
        engine = resolve_engine(self.engine)
        samples = make_samples(X, self.engine, engine, self.feature_dim)
        if samples.n_samples < self._k:
            raise ValueError(
                f"n_components={self._k} is larger than the number of samples with "
                f"finite features ({samples.n_samples})"
            )
        rng = np.random.default_rng(self.random_state)
        self._initialize(samples, rng)
        tol = float(self.tol)
        lower_bound = -np.inf
        self.converged_ = False
        for n_iter in range(1, int(self.max_iter) + 1):
            previous = lower_bound
            log_likelihood, nk, s1, s2 = samples.gmm_statistics(*self._engine_parameters())
            self.weights_, self.means_, self.covariances_, self.precisions_cholesky_ = (
                gmm_m_step(nk, s1, s2, self.means_, self.reg_covar, self.covariance_type))
            lower_bound = log_likelihood / samples.n_samples
            if abs(lower_bound - previous) < tol:
                self.converged_ = True
                break
        if not self.converged_:
            warnings.warn(
                f"EM did not converge in max_iter={self.max_iter} iterations; increase "
                "max_iter or tol", RuntimeWarning, stacklevel=2)
        self.n_iter_ = n_iter
        self.lower_bound_ = lower_bound
        self.precisions_ = precisions_from_cholesky(self.precisions_cholesky_, self.covariance_type)
        self.n_features_in_ = samples.n_features
        if hasattr(samples, "host"):
            self.labels_ = self.predict(X)
        return self

    def fit_predict(self, X, y=None):
        return self.fit(X).predict(X)

    def sample(self, n_samples=1):
        """Draw ``n_samples`` samples from the fitted mixture, as scikit-learn's
        ``GaussianMixture.sample``: ``(X (n, D), y (n,))``, grouped by component, the
        number per component multinomial in the weights (seeded by ``random_state``)."""
        self._check_fitted_input()
        n_samples = check_positive_int(n_samples, "n_samples")
        rng = np.random.default_rng(self.random_state)
        counts = rng.multinomial(n_samples, self.weights_ / self.weights_.sum())
        covariances = (np.broadcast_to(self.covariances_, (len(counts),) + self.covariances_.shape)
                       if self.covariance_type == "tied" else self.covariances_)
        parts = []
        for mean, covariance, count in zip(self.means_, covariances, counts):
            if self.covariance_type in ("full", "tied"):
                parts.append(rng.multivariate_normal(mean, covariance, int(count), method="cholesky"))
            else:  # diagonal or spherical: independent features
                parts.append(mean + rng.standard_normal((int(count), mean.size)) * np.sqrt(covariance))
        labels = np.repeat(np.arange(len(counts)), counts)
        return np.vstack(parts), labels

    # --------------------------------------------------------------- inference
    def _engine_parameters(self):
        """Means, precision factors, log weights and statistics type as the engines take them."""
        factors, kind = engine_precisions(self.precisions_cholesky_, self.covariance_type,
                                          *self.means_.shape)
        return self.means_, factors, np.log(self.weights_), kind

    def _log_resp_function(self, output):
        engine = resolve_engine(self.engine)
        params = self._engine_parameters()

        def function(rows):
            log_resp, log_prob_norm = engine.gmm_log_resp(engine.prepare(rows), *params)
            if output == "labels":
                return np.argmax(log_resp, axis=1)
            if output == "proba":
                return np.exp(log_resp)
            return log_prob_norm

        return function

    def predict(self, X):
        """Most likely component per sample (-1 where a feature is not finite).

        xarray input gives a label map with the input's coords (CRS included).
        """
        self._check_fitted_input(X)
        return apply_per_sample(X, self._log_resp_function("labels"), None, np.int64, -1,
                                self.feature_dim)

    def predict_proba(self, X):
        """Responsibilities, shape (..., K) (NaN where a feature is not finite)."""
        self._check_fitted_input(X)
        return apply_per_sample(X, self._log_resp_function("proba"), self._k, np.float64,
                                np.nan, self.feature_dim)

    def score_samples(self, X):
        """Log-likelihood of every sample (NaN where a feature is not finite)."""
        self._check_fitted_input(X)
        return apply_per_sample(X, self._log_resp_function("score"), None, np.float64,
                                np.nan, self.feature_dim)

    def score(self, X, y=None):
        """Average log-likelihood of the samples with finite features."""
        total, n = self._total_log_likelihood(X)
        return total / n

    def _total_log_likelihood(self, X):
        self._check_fitted_input(X)
        engine = resolve_engine(self.engine)
        samples = make_samples(X, self.engine, engine, self.feature_dim)
        log_likelihood = samples.gmm_statistics(*self._engine_parameters())[0]
        return log_likelihood, samples.n_samples

    def _n_parameters(self):
        k, d = self.means_.shape
        cov_params = {"full": k * d * (d + 1) / 2, "tied": d * (d + 1) / 2, "diag": k * d,
                      "spherical": k}[self.covariance_type]
        return int(cov_params + k * d + k - 1)

    def bic(self, X):
        """Bayesian information criterion on ``X`` (lower is better)."""
        total, n = self._total_log_likelihood(X)
        return -2 * total + self._n_parameters() * np.log(n)

    def aic(self, X):
        """Akaike information criterion on ``X`` (lower is better)."""
        total, n = self._total_log_likelihood(X)
        return -2 * total + 2 * self._n_parameters()


def _kmeans_for_init(kmeans, samples, rng):
    """Run k-means on already-wrapped samples; return centres, counts and SSE."""
    from ._kmeans import lloyd

    centers = kmeans._initial_centers(samples, rng)
    tol = kmeans.tol * float(np.mean(samples.moments()[1]))
    centers, _, sse, counts, _, _ = lloyd(samples, centers, kmeans.max_iter, tol)
    return centers, counts, sse
