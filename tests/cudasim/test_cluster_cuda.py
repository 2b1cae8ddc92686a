"""tscube.cluster cuda engine against the reference, on the numba CUDA simulator (tiny inputs)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from cuda_checks import check_ptx

from tscube.cluster import GaussianMixture, KMeans
from tscube.cluster import _reference
from tscube.cluster._common import precision_cholesky_from_covariances

cuda_engine = pytest.importorskip("tscube.cluster._cuda")


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(size=(50, 3)) + c for c in ([0, 0, 0], [4, 0, 1], [0, 5, 2])])
    means = X[[0, 60, 120]] + 0.3
    covariances = np.array([np.eye(3) * s + 0.2 for s in (0.5, 1.0, 2.0)])
    log_weights = np.log([0.2, 0.3, 0.5])
    return X, means, covariances, log_weights


@pytest.mark.parametrize("covariance_type", ["full", "diag"])
def test_cuda_gmm_statistics_equal_reference(problem, covariance_type):
    X, means, covariances, log_weights = problem
    if covariance_type == "diag":
        covariances = np.array([np.diag(c) for c in covariances])
    factors = precision_cholesky_from_covariances(covariances, covariance_type)
    expected = _reference.gmm_statistics(X, means, factors, log_weights, covariance_type)
    got = cuda_engine.gmm_statistics(X, means, factors, log_weights, covariance_type)
    for e, g in zip(expected, got):
        np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-10)
    if covariance_type == "full":
        expected = _reference.gmm_log_resp(X, means, factors, log_weights, covariance_type)
        got = cuda_engine.gmm_log_resp(X, means, factors, log_weights, covariance_type)
        for e, g in zip(expected, got):
            np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-10)


def test_cuda_kmeans_statistics_equal_reference(problem):
    X, means, _, _ = problem
    expected = _reference.kmeans_statistics(X, means)
    got = cuda_engine.kmeans_statistics(X, means)
    np.testing.assert_array_equal(got[0], expected[0])
    for e, g in zip(expected[1:], got[1:]):
        np.testing.assert_allclose(g, e, rtol=1e-12)


def test_cuda_estimators_equal_reference(problem):
    X, means, _, _ = problem
    init = dict(means_init=means, weights_init=np.full(3, 1 / 3),
                precisions_init=np.array([np.eye(3)] * 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = GaussianMixture(3, max_iter=2, tol=0, engine="reference", **init).fit(X)
        b = GaussianMixture(3, max_iter=2, tol=0, engine="cuda", **init).fit(X)
    np.testing.assert_allclose(b.means_, a.means_, rtol=1e-10)
    np.testing.assert_allclose(b.covariances_, a.covariances_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(b.lower_bound_, a.lower_bound_, rtol=1e-12)
    np.testing.assert_array_equal(b.labels_, a.labels_)
    a = KMeans(3, init=means, max_iter=2, engine="reference").fit(X)
    b = KMeans(3, init=means, max_iter=2, engine="cuda").fit(X)
    np.testing.assert_allclose(b.cluster_centers_, a.cluster_centers_, rtol=1e-12)
    np.testing.assert_allclose(b.inertia_, a.inertia_, rtol=1e-12)
    np.testing.assert_array_equal(b.labels_, a.labels_)


def test_cuda_engine_streams_dask_chunks(problem):
    da = pytest.importorskip("dask.array")
    X, means, _, _ = problem
    init = dict(means_init=means, weights_init=np.full(3, 1 / 3),
                precisions_init=np.array([np.ones(3)] * 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = GaussianMixture(3, covariance_type="diag", max_iter=1, tol=0, engine="reference",
                            **init).fit(X)
        b = GaussianMixture(3, covariance_type="diag", max_iter=1, tol=0, engine="cuda",
                            **init).fit(da.from_array(X, chunks=(80, 3)))
    np.testing.assert_allclose(b.means_, a.means_, rtol=1e-10)
    np.testing.assert_allclose(b.covariances_, a.covariances_, rtol=1e-10)
    np.testing.assert_allclose(b.lower_bound_, a.lower_bound_, rtol=1e-12)


@pytest.mark.parametrize("covariance_type,precisions", [
    ("tied", np.eye(3) * 0.8 + 0.1),
    ("spherical", np.array([0.5, 1.0, 2.0])),
])
def test_cuda_tied_and_spherical_mixtures_equal_reference(problem, covariance_type, precisions):
    """Tied and spherical mixtures run through the engine's full and diagonal kernels."""
    X, means, _, _ = problem
    init = dict(means_init=means, weights_init=np.array([0.2, 0.3, 0.5]),
                precisions_init=precisions)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = GaussianMixture(3, covariance_type=covariance_type, max_iter=2, tol=0,
                            engine="reference", **init).fit(X)
        b = GaussianMixture(3, covariance_type=covariance_type, max_iter=2, tol=0,
                            engine="cuda", **init).fit(X)
    assert b.covariances_.shape == a.covariances_.shape == {"tied": (3, 3), "spherical": (3,)}[
        covariance_type]
    np.testing.assert_allclose(b.weights_, a.weights_, rtol=1e-10)
    np.testing.assert_allclose(b.means_, a.means_, rtol=1e-10)
    np.testing.assert_allclose(b.covariances_, a.covariances_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(b.lower_bound_, a.lower_bound_, rtol=1e-12)
    np.testing.assert_array_equal(b.labels_, a.labels_)
    np.testing.assert_allclose(b.score_samples(X), a.score_samples(X), rtol=1e-12)


_PTX_CHECK = '''
from tscube.cluster import _cuda as engine

f8, i8, b1 = nt.float64, nt.int64, nt.boolean
# the argument types the engine's host functions pass (C-contiguous device arrays)
checks = [
    (engine._log_resp_kernel, (A(f8, 2), A(f8, 2), A(f8, 3), A(f8, 1), b1, A(f8, 2), A(f8, 1))),
    (engine._gmm_statistics_kernel, (A(f8, 2), A(f8, 2), A(f8, 2), A(f8, 1), A(i8, 1), A(i8, 1), i8, A(f8, 1))),
    (engine._nearest_kernel, (A(f8, 2), A(f8, 2), A(i8, 1), A(f8, 1))),
    (engine._kmeans_statistics_kernel, (A(f8, 2), A(i8, 1), A(f8, 1), i8, A(f8, 1))),
]
'''


def test_cuda_kernels_compile_to_ptx():
    """The simulator neither types nor compiles kernels: compile the engine's four to PTX
    with NVVM where its libraries are installed (the test extras'; no GPU needed), else
    skip."""
    check_ptx(_PTX_CHECK, 4)
