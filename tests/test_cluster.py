"""tscube.cluster: reference engine against scikit-learn, cpu engine against the reference,
recovery of planted mixtures, streaming (dask/xarray) input and bad input."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from sklearn.cluster import KMeans as SklearnKMeans
from sklearn.metrics import adjusted_rand_score
from sklearn.mixture import GaussianMixture as SklearnGaussianMixture

from tscube import config
from tscube._simd import compiles_for_avx512
from tscube.cluster import GaussianMixture, KMeans
from tscube.cluster import _cpu, _reference
from tscube.cluster._common import precision_cholesky_from_covariances
from tscube.datasets._gmm import make_gmm

ENGINES = ["reference", "cpu"]


@pytest.fixture(scope="module")
def mixture():
    """Overlapping mixture: EM needs many iterations, responsibilities are soft."""
    X, labels = make_gmm(1500, 3, 4, separation=1.0, random_state=1)
    return X, labels


def explicit_init(X, k, covariance_type, seed=0):
    rng = np.random.default_rng(seed)
    d = X.shape[1]
    means = X[rng.choice(X.shape[0], k, replace=False)]
    weights = rng.uniform(0.5, 1.5, k)
    weights /= weights.sum()
    precisions = {
        "full": lambda: np.array([np.eye(d) * rng.uniform(0.5, 2) for _ in range(k)]),
        "tied": lambda: np.eye(d) * rng.uniform(0.5, 2) + 0.1,
        "diag": lambda: rng.uniform(0.5, 2, (k, d)),
        "spherical": lambda: rng.uniform(0.5, 2, k),
    }[covariance_type]()
    return dict(weights_init=weights, means_init=means, precisions_init=precisions)


def fit_sklearn_gmm(X, k, covariance_type, max_iter, tol, init):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return SklearnGaussianMixture(k, covariance_type=covariance_type, max_iter=max_iter,
                                      tol=tol, reg_covar=1e-6, **init).fit(X)


def fit_gmm(X, k, covariance_type, max_iter, tol, init, engine):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return GaussianMixture(k, covariance_type=covariance_type, max_iter=max_iter, tol=tol,
                               reg_covar=1e-6, engine=engine, **init).fit(X)


def assert_same_mixture(ours, theirs, rtol=1e-6):
    np.testing.assert_allclose(ours.weights_, theirs.weights_, rtol=rtol, atol=1e-12)
    np.testing.assert_allclose(ours.means_, theirs.means_, rtol=rtol, atol=1e-10)
    np.testing.assert_allclose(ours.covariances_, theirs.covariances_, rtol=rtol, atol=1e-10)
    np.testing.assert_allclose(ours.precisions_cholesky_, theirs.precisions_cholesky_,
                               rtol=rtol, atol=1e-10)
    np.testing.assert_allclose(ours.precisions_, theirs.precisions_, rtol=rtol, atol=1e-10)
    np.testing.assert_allclose(ours.lower_bound_, theirs.lower_bound_, rtol=rtol)
    assert ours.n_iter_ == theirs.n_iter_


# ----------------------------------------------------------- reference == scikit-learn
COVARIANCE_TYPES = ["full", "tied", "diag", "spherical"]


@pytest.mark.parametrize("covariance_type", COVARIANCE_TYPES)
@pytest.mark.parametrize("engine", ENGINES)
def test_gmm_equals_sklearn_after_fixed_iterations(mixture, covariance_type, engine):
    X, _ = mixture
    init = explicit_init(X, 4, covariance_type)
    theirs = fit_sklearn_gmm(X, 4, covariance_type, 12, 0.0, init)
    ours = fit_gmm(X, 4, covariance_type, 12, 0.0, init, engine)
    assert_same_mixture(ours, theirs)
    np.testing.assert_array_equal(ours.labels_, theirs.predict(X))


@pytest.mark.parametrize("covariance_type", COVARIANCE_TYPES)
def test_gmm_stops_at_the_same_iteration_as_sklearn(mixture, covariance_type):
    X, _ = mixture
    init = explicit_init(X, 4, covariance_type, seed=3)
    theirs = fit_sklearn_gmm(X, 4, covariance_type, 500, 1e-4, init)
    ours = fit_gmm(X, 4, covariance_type, 500, 1e-4, init, "reference")
    assert theirs.converged_ and ours.converged_
    assert_same_mixture(ours, theirs)


@pytest.mark.parametrize("covariance_type", COVARIANCE_TYPES)
def test_gmm_inference_equals_sklearn(mixture, covariance_type):
    X, _ = mixture
    init = explicit_init(X, 4, covariance_type, seed=5)
    theirs = fit_sklearn_gmm(X, 4, covariance_type, 20, 0.0, init)
    ours = fit_gmm(X, 4, covariance_type, 20, 0.0, init, "cpu")
    np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), atol=1e-8)
    np.testing.assert_allclose(ours.score_samples(X), theirs.score_samples(X), rtol=1e-6)
    np.testing.assert_allclose(ours.score(X), theirs.score(X), rtol=1e-6)
    np.testing.assert_allclose(ours.bic(X), theirs.bic(X), rtol=1e-6)
    np.testing.assert_allclose(ours.aic(X), theirs.aic(X), rtol=1e-6)


@pytest.mark.parametrize("engine", ENGINES)
def test_kmeans_equals_sklearn_with_the_same_init(mixture, engine):
    X, _ = mixture
    centers = X[np.random.default_rng(7).choice(X.shape[0], 5, replace=False)]
    theirs = SklearnKMeans(5, init=centers, n_init=1, max_iter=300, tol=1e-4).fit(X)
    ours = KMeans(5, init=centers, max_iter=300, tol=1e-4, engine=engine).fit(X)
    np.testing.assert_allclose(ours.cluster_centers_, theirs.cluster_centers_, rtol=1e-9)
    np.testing.assert_array_equal(ours.labels_, theirs.labels_)
    np.testing.assert_allclose(ours.inertia_, theirs.inertia_, rtol=1e-9)
    assert ours.n_iter_ == theirs.n_iter_
    np.testing.assert_array_equal(ours.predict(X), theirs.predict(X))


def test_kmeans_fixed_iteration_count_equals_sklearn(mixture):
    X, _ = mixture
    centers = X[:6]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = SklearnKMeans(6, init=centers, n_init=1, max_iter=3, tol=0).fit(X)
    ours = KMeans(6, init=centers, max_iter=3, tol=0, engine="cpu").fit(X)
    np.testing.assert_allclose(ours.cluster_centers_, theirs.cluster_centers_, rtol=1e-9)
    np.testing.assert_allclose(ours.inertia_, theirs.inertia_, rtol=1e-9)
    assert ours.n_iter_ == theirs.n_iter_ == 3


# ------------------------------------------------------------ cpu engine == reference
@pytest.mark.parametrize("covariance_type", ["full", "diag"])
def test_cpu_statistics_equal_reference(covariance_type, monkeypatch):
    from tscube import config

    monkeypatch.setattr(config, "CLUSTER_BLOCK_SAMPLES", 64)  # many blocks, ragged last
    rng = np.random.default_rng(2)
    X = rng.normal(size=(1000, 4)) * [1, 2, 0.5, 3] + 10
    means = X[:5] + 0.1
    covariances = np.array([np.diag(rng.uniform(0.5, 3, 4)) + 0.2 for _ in range(5)])
    if covariance_type == "diag":
        covariances = np.array([np.diag(c) for c in covariances])
    factors = precision_cholesky_from_covariances(covariances, covariance_type)
    log_weights = np.log(rng.dirichlet(np.ones(5)))
    expected = _reference.gmm_statistics(X, means, factors, log_weights, covariance_type)
    got = _cpu.gmm_statistics(X, means, factors, log_weights, covariance_type)
    for e, g in zip(expected, got):
        np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-9)
    expected = _reference.gmm_log_resp(X, means, factors, log_weights, covariance_type)
    got = _cpu.gmm_log_resp(X, means, factors, log_weights, covariance_type)
    for e, g in zip(expected, got):
        np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-10)
    expected = _reference.kmeans_statistics(X, means)
    got = _cpu.kmeans_statistics(X, means)
    np.testing.assert_array_equal(got[0], expected[0])
    for e, g in zip(expected[1:], got[1:]):
        np.testing.assert_allclose(g, e, rtol=1e-10)


def test_cpu_fit_equals_reference_fit():
    X, _ = make_gmm(3000, 5, 6, separation=2.0, random_state=4)
    a = GaussianMixture(6, random_state=0, engine="reference").fit(X)
    b = GaussianMixture(6, random_state=0, engine="cpu").fit(X)
    np.testing.assert_allclose(b.means_, a.means_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(b.covariances_, a.covariances_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(b.lower_bound_, a.lower_bound_, rtol=1e-10)
    assert a.n_iter_ == b.n_iter_
    np.testing.assert_array_equal(a.labels_, b.labels_)


# ------------------------------------------------------------- recovery on make_gmm
@pytest.mark.parametrize("covariance_type", ["full", "diag"])
def test_gmm_recovers_planted_components(covariance_type):
    X, truth, (weights, means, _) = make_gmm(4000, 4, 5, separation=8.0, random_state=11,
                                             return_params=True)
    model = GaussianMixture(5, covariance_type=covariance_type, random_state=0).fit(X)
    assert model.converged_
    assert adjusted_rand_score(truth, model.labels_) > 0.99
    order = [np.argmin(np.linalg.norm(means - m, axis=1)) for m in model.means_]
    assert sorted(order) == list(range(5))
    np.testing.assert_allclose(model.weights_, weights[order], atol=0.03)


def test_kmeans_recovers_planted_clusters():
    X, truth = make_gmm(4000, 3, 6, separation=10.0, random_state=12)
    model = KMeans(6, random_state=0).fit(X)
    assert model.converged_
    assert adjusted_rand_score(truth, model.labels_) > 0.99


def test_bic_prefers_the_true_number_of_components():
    X, _ = make_gmm(2000, 2, 3, separation=8.0, random_state=13)
    bics = [GaussianMixture(k, random_state=0).fit(X).bic(X) for k in (1, 2, 3, 4, 5)]
    assert int(np.argmin(bics)) == 2


def test_make_gmm_draws_from_the_stated_mixture():
    X, labels, (weights, means, covariances) = make_gmm(
        20000, 3, 2, separation=5.0, random_state=0, return_params=True)
    assert X.shape == (20000, 3) and labels.shape == (20000,)
    np.testing.assert_allclose(weights.sum(), 1.0)
    for k in range(2):
        members = X[labels == k]
        np.testing.assert_allclose(members.mean(axis=0), means[k], atol=0.05)
        np.testing.assert_allclose(np.cov(members.T), covariances[k], atol=0.08)
        assert np.all(np.linalg.eigvalsh(covariances[k]) > 0)
    again = make_gmm(20000, 3, 2, separation=5.0, random_state=0)[0]
    np.testing.assert_array_equal(X, again)
    with pytest.raises(ValueError, match="n_components"):
        make_gmm(10, 2, 0)


# ------------------------------------------------------------------ bad input
def test_rows_with_nan_are_ignored_in_fit_and_flagged_in_predict(mixture):
    X, _ = mixture
    dirty = X.copy()
    dirty[[3, 50, 700]] = np.nan
    dirty[9, 1] = np.inf
    clean = np.delete(X, [3, 9, 50, 700], axis=0)
    init = explicit_init(X, 4, "full")
    a = fit_gmm(dirty, 4, "full", 5, 0.0, init, "cpu")
    b = fit_gmm(clean, 4, "full", 5, 0.0, init, "cpu")
    np.testing.assert_allclose(a.means_, b.means_, rtol=1e-12)
    np.testing.assert_allclose(a.lower_bound_, b.lower_bound_, rtol=1e-12)
    labels = a.predict(dirty)
    assert labels.shape == (X.shape[0],)
    np.testing.assert_array_equal(labels[[3, 9, 50, 700]], -1)
    assert np.all(labels[np.isfinite(dirty).all(axis=1)] >= 0)
    proba = a.predict_proba(dirty)
    assert np.all(np.isnan(proba[[3, 9]])) and np.allclose(proba[0].sum(), 1.0)
    assert np.isnan(a.score_samples(dirty)[50])
    km = KMeans(4, init=X[:4], engine="cpu").fit(dirty)
    np.testing.assert_array_equal(km.labels_, km.predict(dirty))
    assert np.sum(km.labels_ == -1) == 4 and km.labels_[700] == -1


@pytest.mark.parametrize("layout", sorted(_cpu._LAYOUTS))
@pytest.mark.parametrize("n_features", [1, 3, 8, 9, 16, 17, 32, 33, 40])
def test_cpu_kmeans_statistics_equal_the_reference_on_both_sides_of_the_vector_limit(n_features, layout):
    """Up to _cpu._SIMD_FEATURES features the k-means kernel transposes and sums with
    vector intrinsics, beyond with loops; beyond _cpu._SCORE_CHUNK features it scores in
    chunks of features (with and without a remainder): the same labels, counts and (to
    rounding) sums and SSE as the reference, tiles with and without a remainder of eight.
    Both layouts (the AVX2 and AVX-512 targets' choices), whichever this machine takes."""
    rng = np.random.default_rng(n_features)
    X = rng.normal(size=(3 * config.CLUSTER_BLOCK_SAMPLES + 77, n_features)) * 10 + 5e3
    centers = X[rng.choice(X.shape[0], 6, replace=False)]
    labels, sse, counts, sums = _cpu.kmeans_statistics(X, centers, layout=layout)
    ref_labels, ref_sse, ref_counts, ref_sums = _reference.kmeans_statistics(_reference.prepare(X), centers)
    np.testing.assert_array_equal(labels, ref_labels)
    np.testing.assert_array_equal(counts, ref_counts)
    np.testing.assert_allclose(sums, ref_sums, rtol=1e-13)
    np.testing.assert_allclose(sse, ref_sse, rtol=1e-11)
    assert _cpu.kmeans_statistics(X, centers, sums_only=True, layout=layout)[3].tolist() == sums.tolist()


def test_kmeans_layout_follows_the_target():
    """AVX-512 targets fill the tiles row by row into one set of sums, others shuffle into
    four (_cpu.KMEANS_LAYOUT: measured per target, benchmarks/README.md)."""
    assert _cpu.KMEANS_LAYOUT == ("rows" if compiles_for_avx512() else "shuffles")
    assert {name: (len(copies), len(shuffles)) for name, (copies, shuffles) in _cpu._LAYOUTS.items()} == {
        "rows": (1, 0), "shuffles": (4, 1)}


@pytest.mark.parametrize("order", ["C", "F"])
def test_finite_rows_and_moments_are_numpy_s(order):
    """The input passes of every fit (parallel kernels: rows split over tasks and
    blocks) give NumPy's finite-row mask, and the features' mean and variance to
    rounding, on data far from the origin and in either memory order."""
    from tscube.cluster._rows import _ROW_BLOCK, column_moments, finite_rows

    rng = np.random.default_rng(3)
    X = np.asarray(rng.normal(1e6, [1.0, 1e-3, 50.0], (5 * _ROW_BLOCK + 17, 3)), order=order)
    dirty = X.copy(order=order)
    dirty[[0, 4096, 9000, X.shape[0] - 1], [0, 1, 2, 1]] = [np.nan, np.inf, -np.inf, np.nan]
    np.testing.assert_array_equal(finite_rows(dirty), np.isfinite(dirty).all(axis=1))
    assert finite_rows(X).all() and finite_rows(np.arange(6).reshape(3, 2)).all()
    n, mean, m2 = column_moments(X)
    assert n == X.shape[0]
    exact_mean = np.array([math.fsum(column) / n for column in X.T])  # NumPy's is 1e-15 off
    np.testing.assert_allclose(mean, exact_mean, rtol=4e-16)
    np.testing.assert_allclose(m2 / n, X.var(axis=0), rtol=1e-9)
    assert column_moments(np.ones((1, 2)))[2].tolist() == [0.0, 0.0]
    assert column_moments(np.empty((0, 2)))[0] == 0


def test_all_nan_input_is_rejected():
    with pytest.raises(ValueError, match="n_components"):
        GaussianMixture(2).fit(np.full((10, 2), np.nan))


@pytest.mark.parametrize("Estimator,name", [(GaussianMixture, "n_components"),
                                            (KMeans, "n_clusters")])
def test_more_clusters_than_samples_is_rejected(Estimator, name):
    with pytest.raises(ValueError, match=name):
        Estimator(5).fit(np.random.default_rng(0).normal(size=(4, 2)))


def test_constant_feature_is_handled_by_reg_covar():
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.normal(size=500), np.full(500, 3.0)])
    X[:250, 0] += 10
    model = GaussianMixture(2, reg_covar=1e-4, random_state=0).fit(X)
    assert np.all(np.isfinite(model.means_)) and np.isfinite(model.lower_bound_)
    np.testing.assert_allclose(model.covariances_[:, 1, 1], 1e-4, rtol=1e-6)
    np.testing.assert_allclose(model.means_[:, 1], 3.0)
    with pytest.raises(ValueError, match="reg_covar"):
        GaussianMixture(2, reg_covar=0.0, random_state=0).fit(X)
    km = KMeans(2, random_state=0).fit(X)
    np.testing.assert_allclose(km.cluster_centers_[:, 1], 3.0)


def test_empty_kmeans_cluster_is_relocated_as_sklearn(mixture):
    X, _ = mixture
    init = np.vstack([X[:3], [[100.0, 100.0, 100.0], [-90.0, 50.0, 0.0]]])  # 2 get nothing
    theirs = SklearnKMeans(5, init=init, n_init=1, max_iter=50).fit(X)
    for engine in ENGINES:
        ours = KMeans(5, init=init, max_iter=50, engine=engine).fit(X)
        np.testing.assert_allclose(ours.cluster_centers_, theirs.cluster_centers_, rtol=1e-9)
        np.testing.assert_array_equal(ours.labels_, theirs.labels_)
        assert ours.n_iter_ == theirs.n_iter_


def test_empty_streamed_kmeans_cluster_keeps_its_centre_and_warns():
    da = pytest.importorskip("dask.array")
    X = np.random.default_rng(0).normal(size=(200, 2))
    init = np.array([[0.0, 0.0], [100.0, 100.0]])
    with pytest.warns(RuntimeWarning, match="empty"):
        model = KMeans(2, init=init).fit(da.from_array(X, chunks=(50, 2)))
    np.testing.assert_array_equal(model.cluster_centers_[1], init[1])
    np.testing.assert_allclose(model.cluster_centers_[0], X.mean(axis=0))


@pytest.mark.parametrize("kwargs,match", [
    (dict(covariance_type="banana"), "covariance_type"),
    (dict(engine="gpu"), "engine"),
    (dict(max_iter=0), "max_iter"),
    (dict(reg_covar=-1.0), "reg_covar"),
    (dict(init="nonsense"), "init"),
    (dict(means_init=np.zeros((3, 2))), "means_init"),
    (dict(weights_init=[0.9, 0.9]), "weights_init"),
])
def test_gmm_bad_parameters_are_named(kwargs, match):
    X = np.random.default_rng(0).normal(size=(50, 2))
    with pytest.raises(ValueError, match=match):
        GaussianMixture(2, **kwargs).fit(X)


def test_bad_arrays_and_unfitted_models_are_rejected():
    with pytest.raises(ValueError, match="2-D"):
        KMeans(2).fit(np.zeros(10))
    with pytest.raises(TypeError, match="real numbers"):
        GaussianMixture(2).fit(np.array([["a", "b"]] * 5))
    with pytest.raises(ValueError, match="not fitted"):
        GaussianMixture(2).predict(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="init must have shape"):
        KMeans(2, init=np.zeros((3, 2))).fit(np.zeros((10, 2)))


def test_cuda_engine_without_a_device_is_a_clear_error(monkeypatch):
    cuda_engine = pytest.importorskip("tscube.cluster._cuda")
    from numba import cuda

    monkeypatch.setattr(cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match="engine='cuda'"):
        GaussianMixture(2, engine="cuda").fit(np.random.default_rng(0).normal(size=(20, 2)))


@pytest.mark.parametrize("n_samples, n_features", [(1, 1), (63, 3), (64, 2), (4099, 13)])
def test_cpu_kmeans_tiles_give_the_reference_labels(n_samples, n_features, monkeypatch):
    """Tiles of KMEANS_TILE samples inside blocks (both cut short here), one kernel per
    feature count: labels, SSE, counts and sums as the per-sample reference."""
    monkeypatch.setattr(config, "CLUSTER_BLOCK_SAMPLES", 1000)
    rng = np.random.default_rng(n_samples)
    X = rng.standard_normal((n_samples, n_features))
    centers = rng.standard_normal((5, n_features))  # two pairs and one left
    centers[3] = centers[1]  # a tie: the first of the two centres wins
    expected = _reference.kmeans_statistics(X, centers)
    got = _cpu.kmeans_statistics(X, centers)
    np.testing.assert_array_equal(got[0], expected[0])
    assert not np.any(got[0] == 3)
    for g, e in zip(got[1:], expected[1:]):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)


def test_kmeans_n_init_keeps_the_lowest_inertia():
    X, _ = make_gmm(3000, 2, 8, separation=1.5, random_state=5)
    one = KMeans(8, init="random", n_init=1, random_state=3, engine="cpu").fit(X)
    many = KMeans(8, init="random", n_init=8, random_state=3, engine="cpu").fit(X)  # run 1 = `one`
    assert many.inertia_ <= one.inertia_
    np.testing.assert_array_equal(many.predict(X), many.labels_)
    assert KMeans(8, init="random", random_state=3)._n_runs() == 10  # "auto", as scikit-learn
    with pytest.warns(RuntimeWarning, match="explicit initial centres"):
        KMeans(8, init=X[:8], n_init=3, engine="cpu").fit(X)
    with pytest.raises(ValueError, match="n_init"):
        KMeans(8, n_init=0).fit(X)


def test_kmeans_transform_equals_scikit_learn():
    from sklearn.cluster import KMeans as SklearnKMeans

    X, _ = make_gmm(500, 4, 3, separation=2.0, random_state=6)
    centers = X[[0, 100, 200]]
    ours = KMeans(3, init=centers, max_iter=5, tol=0, engine="cpu").fit(X)
    theirs = SklearnKMeans(3, init=centers, n_init=1, max_iter=5, tol=0).fit(X)
    np.testing.assert_allclose(ours.transform(X), theirs.transform(X), rtol=1e-9, atol=1e-9)
    dirty = X.copy()
    dirty[7, 1] = np.nan
    distances = ours.fit_transform(dirty)
    assert distances.shape == (500, 3) and np.isnan(distances[7]).all() and np.isfinite(distances[8]).all()


@pytest.mark.parametrize("covariance_type", COVARIANCE_TYPES)
def test_gmm_sample_follows_the_fitted_mixture(covariance_type):
    X, _ = make_gmm(4000, 2, 3, separation=4.0, random_state=8)
    gmm = GaussianMixture(3, covariance_type=covariance_type, random_state=0, engine="cpu").fit(X)
    drawn, labels = gmm.sample(60_000)
    assert drawn.shape == (60_000, 2) and labels.shape == (60_000,)
    counts = np.bincount(labels, minlength=3)
    np.testing.assert_allclose(counts / 60_000, gmm.weights_, atol=0.01)
    for k in range(3):
        np.testing.assert_allclose(drawn[labels == k].mean(axis=0), gmm.means_[k], atol=0.05)
        covariance = np.cov(drawn[labels == k].T)
        expected = {"full": lambda: gmm.covariances_[k], "tied": lambda: gmm.covariances_,
                    "diag": lambda: np.diag(gmm.covariances_[k]),
                    "spherical": lambda: np.eye(2) * gmm.covariances_[k]}[covariance_type]()
        np.testing.assert_allclose(covariance, expected, atol=0.05 * np.abs(expected).max())
    again, _ = gmm.sample(60_000)
    np.testing.assert_array_equal(again, drawn)  # seeded by random_state


def test_protocol_without_scikit_learn(monkeypatch):
    """The stand-in base classes (scikit-learn not installed) give the same protocol."""
    import importlib.util
    import sys

    monkeypatch.setitem(sys.modules, "sklearn", None)
    monkeypatch.setitem(sys.modules, "sklearn.base", None)
    name = "tscube.cluster._base_without_sklearn"
    spec = importlib.util.spec_from_file_location(name, _base_path())
    base = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(base)
    assert base.BaseEstimator.__module__ == name
    assert issubclass(base.NotFittedError, ValueError)

    class Model(base.ClassNamePrefixFeaturesOutMixin, base.ClusterMixin, base.TransformerMixin,
                base.BaseEstimator):
        _n_features_out = 2

        def __init__(self, n=3, *, scale=1.0):
            self.n, self.scale = n, scale

        def fit(self, X, y=None):
            self.fitted_ = True
            return self

        def transform(self, X):
            return np.asarray(X) * self.scale

    model = Model(5)
    assert model.get_params() == {"n": 5, "scale": 1.0}
    assert model.set_params(scale=2.0).scale == 2.0 and repr(model) == "Model(n=5, scale=2.0)"
    with pytest.raises(ValueError, match="invalid parameter"):
        model.set_params(other=1)
    np.testing.assert_array_equal(model.fit_transform([1.0, 2.0]), [2.0, 4.0])
    assert model._estimator_type == "clusterer"
    assert list(model.get_feature_names_out()) == ["model0", "model1"]


def _base_path():
    from tscube.cluster import _base

    return _base.__file__


@pytest.mark.parametrize("n_clusters", [6, 7])  # even and odd: centres in pairs, one left
def test_cpu_kmeans_expanded_form_keeps_the_exact_labels(n_clusters):
    """Far from the origin ‖c‖² − 2x·c cancels: here the plain expanded form mislabels
    samples near the cluster boundaries, while the kernel, which re-assigns every sample
    whose two best scores are within the rounding bound with exact distances, gives the
    labels of the exact distance (the reference's), ties to the first centre included."""
    rng = np.random.default_rng(n_clusters)
    offset = 1e4  # ‖x‖² ≈ 4e8, distances ≈ 1e-6: the expanded form keeps ~2 digits
    centers = offset + rng.normal(size=(n_clusters, 4)) * 1e-3
    X = offset + rng.normal(size=(20_000, 4)) * 1e-3
    X[:50] = 0.5 * (centers[0] + centers[1])  # exact ties (as far as rounding allows)
    centers[4] = centers[2]  # a duplicate centre: the first one wins
    expected = _reference.kmeans_statistics(X, centers)
    naive = np.argmin(np.sum(centers**2, axis=1) - 2.0 * X @ centers.T, axis=1)
    assert np.sum(naive != expected[0]) > 10  # the test would catch a plain expanded form
    got = _cpu.kmeans_statistics(X, centers)
    np.testing.assert_array_equal(got[0], expected[0])
    assert not np.any(got[0] == 4)
    np.testing.assert_allclose(got[1], expected[1], rtol=1e-12)
    labels, sse, counts, sums = _cpu.kmeans_statistics(X, centers, sums_only=True)
    assert labels is None and sse is None
    np.testing.assert_array_equal(counts, got[2])
    np.testing.assert_array_equal(sums, got[3])


@pytest.mark.parametrize("magnitude", [1e-120, 1.0, 1e120])  # squares within float64's range
def test_cpu_kmeans_float32_scores_keep_the_exact_labels_at_every_scale(magnitude):
    """The kernel scores in float32, in a frame shifted to the centres' mean and scaled by
    a power of two: data far below or above float32's range give the exact labels, and a
    sample whose float32 score overflows (an outlier 1e30 times the centres' spread) or is
    NaN is decided by the exact float64 distances as the reference does."""
    rng = np.random.default_rng(3)
    centers = magnitude * (5.0 + rng.normal(size=(9, 6)))
    X = magnitude * (5.0 + rng.normal(size=(5_000, 6)))
    X[:40] = 0.5 * (centers[0] + centers[1])  # ties, as far as rounding allows
    X[40] = magnitude * 1e30
    X[41, 2] = np.nan
    expected = _reference.kmeans_statistics(X, centers)
    got = _cpu.kmeans_statistics(X, centers)
    np.testing.assert_array_equal(got[0], expected[0])
    for g, e in zip(got[1:], expected[1:]):
        np.testing.assert_allclose(g, e, rtol=1e-12)
    # a frame of the centres alone: 0.5 <= largest |c - o| * scale < 1, exact powers of two
    origin, scale = _cpu._score_frame(centers)
    assert 0.5 <= np.abs(centers - origin).max() * scale < 1.0 and np.log2(scale) % 1 == 0
    assert _cpu._score_frame(np.ones((3, 2)))[1] == 1.0  # no spread: no scaling
