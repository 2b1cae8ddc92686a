"""tscube.cluster estimators inside scikit-learn: its estimator checks, clone, Pipeline,
GridSearchCV and set_output."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.base import clone  # noqa: E402
from sklearn.model_selection import GridSearchCV  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

from tscube.cluster import GaussianMixture, KMeans  # noqa: E402
from tscube.datasets._gmm import make_gmm  # noqa: E402


@parametrize_with_checks([KMeans(engine="cpu"), KMeans(engine="reference"),
                          GaussianMixture(engine="cpu"), GaussianMixture(engine="reference")])
def test_scikit_learn_estimator_checks(estimator, check):
    """Every check of scikit-learn's check_estimator passes: none is declared as expected
    to fail. Samples with NaN/inf are ignored by design, which the tags declare
    (``allow_nan``), so scikit-learn skips its "must raise on NaN" check."""
    check(estimator)


def test_tags_declare_that_nan_samples_are_allowed():
    from sklearn.utils import get_tags

    for estimator in (KMeans(), GaussianMixture()):
        assert get_tags(estimator).input_tags.allow_nan
    assert get_tags(KMeans()).transformer_tags is not None


@pytest.fixture(scope="module")
def blobs():
    X, truth = make_gmm(900, 3, 3, separation=6.0, random_state=3)
    return X * [1.0, 50.0, 0.02] + [0.0, 1000.0, -5.0], truth  # features on unlike scales


def test_clone_keeps_the_parameters_and_drops_the_fit(blobs):
    X, _ = blobs
    model = KMeans(3, n_init=2, random_state=0, engine="cpu").fit(X)
    copy = clone(model)
    assert copy.get_params() == model.get_params()
    assert not hasattr(copy, "cluster_centers_")
    gmm = clone(GaussianMixture(3, covariance_type="diag", reg_covar=1e-5, random_state=1))
    assert gmm.get_params()["covariance_type"] == "diag" and gmm.reg_covar == 1e-5


def test_pipeline_scales_then_clusters_as_by_hand(blobs):
    from sklearn.metrics import adjusted_rand_score

    X, truth = blobs
    pipeline = make_pipeline(StandardScaler(), KMeans(3, random_state=0, engine="cpu")).fit(X)
    scaled = StandardScaler().fit_transform(X)
    by_hand = KMeans(3, random_state=0, engine="cpu").fit(scaled)
    np.testing.assert_array_equal(pipeline.predict(X), by_hand.labels_)
    np.testing.assert_allclose(pipeline.transform(X), by_hand.transform(scaled))
    assert adjusted_rand_score(truth, by_hand.labels_) > 0.99
    gmm = make_pipeline(StandardScaler(), GaussianMixture(3, random_state=0, engine="cpu")).fit(X)
    np.testing.assert_allclose(gmm.score(X), GaussianMixture(3, random_state=0).fit(scaled).score(scaled))


def test_grid_search_picks_the_planted_number_of_components(blobs):
    X, _ = blobs
    search = GridSearchCV(GaussianMixture(random_state=0, engine="cpu"),
                          {"n_components": [1, 2, 3], "covariance_type": ["full", "diag"]},
                          cv=3).fit(X)
    assert search.best_params_["n_components"] == 3
    assert search.best_estimator_.n_components == 3
    assert set(search.cv_results_["param_covariance_type"]) == {"full", "diag"}
    kmeans = GridSearchCV(KMeans(random_state=0, engine="cpu"), {"n_clusters": [2, 3]}, cv=3).fit(X)
    assert kmeans.best_params_ == {"n_clusters": 3}  # score = -inertia: more clusters, lower


def test_set_output_gives_named_dataframe_columns(blobs):
    pd = pytest.importorskip("pandas")
    X, _ = blobs
    model = KMeans(3, random_state=0, engine="cpu").set_output(transform="pandas")
    distances = model.fit_transform(pd.DataFrame(X, columns=["a", "b", "c"]))
    assert isinstance(distances, pd.DataFrame)
    assert list(distances.columns) == ["kmeans0", "kmeans1", "kmeans2"]
    np.testing.assert_allclose(distances.to_numpy(), model.set_output(transform="default").transform(X))
    assert list(model.get_feature_names_out()) == ["kmeans0", "kmeans1", "kmeans2"]


def test_inference_errors_are_scikit_learn_errors(blobs):
    from sklearn.exceptions import NotFittedError

    X, _ = blobs
    for model in (KMeans(3), GaussianMixture(3)):
        with pytest.raises(NotFittedError, match="not fitted"):
            model.predict(X)
        model.set_params(engine="cpu", random_state=0).fit(X)
        with pytest.raises(ValueError, match="X has 2 features, but .* is expecting 3"):
            model.predict(X[:, :2])
        with pytest.raises(ValueError, match="Reshape your data"):
            model.predict(X[0])
