"""tscube.cluster on data larger than memory: dask arrays, xarray objects, the CLI function."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from tscube.cluster import GaussianMixture, KMeans
from tscube.datasets._gmm import make_gmm

da = pytest.importorskip("dask.array")
xr = pytest.importorskip("xarray")


@pytest.fixture(scope="module")
def data():
    X, labels = make_gmm(2400, 3, 3, separation=3.0, random_state=5)
    X[[10, 500, 1999]] = np.nan
    return X, labels


def explicit(X, k=3):
    rng = np.random.default_rng(0)
    finite = X[np.isfinite(X).all(axis=1)]
    return dict(means_init=finite[rng.choice(len(finite), k, replace=False)],
                weights_init=np.full(k, 1.0 / k), precisions_init=np.array([np.eye(3)] * k))


@pytest.mark.parametrize("covariance_type", ["full", "diag"])
def test_dask_fit_streams_and_equals_in_memory_fit(data, covariance_type, monkeypatch):
    X, _ = data
    init = explicit(X)
    if covariance_type == "diag":
        init["precisions_init"] = np.ones((3, 3))
    calls = []
    from tscube.cluster import _streaming

    original = _streaming._chunk_call

    def counting(block, *args):
        calls.append(block.shape[0])
        return original(block, *args)

    monkeypatch.setattr(_streaming, "_chunk_call", counting)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        memory = GaussianMixture(3, covariance_type=covariance_type, max_iter=6, tol=0,
                                 **init).fit(X)
        streamed = GaussianMixture(3, covariance_type=covariance_type, max_iter=6, tol=0,
                                   **init).fit(da.from_array(X, chunks=(500, 3)))
    assert max(calls) == 500 and len(calls) == 6 * 5  # one task per chunk and iteration
    np.testing.assert_allclose(streamed.means_, memory.means_, rtol=1e-10)
    np.testing.assert_allclose(streamed.covariances_, memory.covariances_, rtol=1e-10)
    np.testing.assert_allclose(streamed.lower_bound_, memory.lower_bound_, rtol=1e-12)
    labels = streamed.predict(da.from_array(X, chunks=(500, 3)))
    assert isinstance(labels, da.Array)
    np.testing.assert_array_equal(labels.compute(), memory.labels_)
    proba = streamed.predict_proba(da.from_array(X, chunks=(500, 3))).compute()
    np.testing.assert_allclose(proba, memory.predict_proba(X), atol=1e-12, equal_nan=True)
    np.testing.assert_allclose(streamed.bic(da.from_array(X, chunks=(700, 3))), memory.bic(X),
                               rtol=1e-12)


def test_dask_kmeans_equals_in_memory(data):
    X, _ = data
    init = explicit(X)["means_init"]
    memory = KMeans(3, init=init, tol=1e-6).fit(X)
    streamed = KMeans(3, init=init, tol=1e-6).fit(da.from_array(X, chunks=(600, 3)))
    np.testing.assert_allclose(streamed.cluster_centers_, memory.cluster_centers_, rtol=1e-10)
    np.testing.assert_allclose(streamed.inertia_, memory.inertia_, rtol=1e-10)
    assert not hasattr(streamed, "labels_")


def test_dask_seeding_and_fit_recover_the_mixture():
    from sklearn.metrics import adjusted_rand_score

    X, truth = make_gmm(3000, 2, 4, separation=8.0, random_state=2)
    model = GaussianMixture(4, random_state=0).fit(da.from_array(X, chunks=(400, 2)))
    assert adjusted_rand_score(truth, model.predict(X)) > 0.99


def test_xarray_predict_returns_a_label_map_with_coords(data):
    X, _ = data
    cube = xr.DataArray(X.T.reshape(3, 40, 60), dims=("band", "y", "x"),
                        coords={"band": ["red", "nir", "swir"], "y": np.arange(40.0),
                                "x": np.arange(60.0), "spatial_ref": 0},
                        attrs={"units": "reflectance"})
    model = GaussianMixture(3, random_state=0).fit(cube.chunk({"y": 10}))
    labels = model.predict(cube.chunk({"y": 10}))
    assert labels.dims == ("y", "x")
    np.testing.assert_array_equal(labels.y, cube.y)
    assert "spatial_ref" in labels.coords
    np.testing.assert_array_equal(labels.values.ravel(), model.predict(X))
    assert labels.values[0, 10] == -1
    proba = model.predict_proba(cube)
    assert proba.dims == ("y", "x", "component")
    dataset = cube.to_dataset(dim="band")
    np.testing.assert_array_equal(model.predict(dataset.to_array("band").transpose(
        "y", "x", "band")).values, labels.values)
    with pytest.raises(ValueError, match="feature_dim"):
        GaussianMixture(3, feature_dim="wavelength").fit(cube)


def test_run_cluster_writes_a_georeferenced_label_geotiff(tmp_path, data):
    rioxarray = pytest.importorskip("rioxarray")
    from tscube.cli.cluster import run_cluster

    X, truth = data
    image = xr.DataArray(X.T.reshape(3, 40, 60).astype(np.float32), dims=("band", "y", "x"),
                         coords={"band": [1, 2, 3], "y": 5e6 - 30.0 * np.arange(40),
                                 "x": 4e5 + 30.0 * np.arange(60)})
    image = image.rio.write_crs("EPSG:32633")
    source = tmp_path / "features.tif"
    image.rio.to_raster(source)
    target = tmp_path / "labels.tif"
    for method in ("gmm", "kmeans"):
        model = run_cluster(source, 3, target, method=method, random_state=0)
        labels = rioxarray.open_rasterio(target)
        assert labels.rio.crs.to_epsg() == 32633
        assert labels.rio.transform() == image.rio.transform()
        assert labels.rio.nodata == -1 and labels.dtype == np.int32
        values = labels.values[0].ravel()
        np.testing.assert_array_equal(values[[10, 500, 1999]], -1)
        finite = values >= 0
        assert set(np.unique(values[finite])) <= {0, 1, 2}
        expected = model.predict(X.astype(np.float32).astype(np.float64))
        np.testing.assert_array_equal(values, expected)
    with pytest.raises(ValueError, match="method"):
        run_cluster(source, 3, target, method="dbscan")
    with pytest.raises(FileNotFoundError):
        run_cluster(tmp_path / "missing.tif", 3, target)


def test_run_cluster_reads_result_variables_from_zarr(tmp_path, data):
    pytest.importorskip("rioxarray")
    pytest.importorskip("zarr")
    import rioxarray

    from tscube.cli.cluster import run_cluster

    X, truth = data
    coords = {"y": 5e6 - 30.0 * np.arange(40), "x": 4e5 + 30.0 * np.arange(60)}
    results = xr.Dataset(
        {name: (("y", "x"), X[:, i].reshape(40, 60) * scale)
         for i, (name, scale) in enumerate([("magnitude", 1.0), ("mosum_mean", 1e-3),
                                            ("trend_slope", 1e3)])}
        | {"n_breaks": (("x",), np.zeros(60))},  # other dims: not a feature
        coords=coords,
    )
    source = tmp_path / "results.zarr"
    results.to_zarr(source)
    target = tmp_path / "labels.tif"
    from sklearn.metrics import adjusted_rand_score

    scores = {}
    for standardize in (False, True):
        model = run_cluster(source, 3, target, method="kmeans", standardize=standardize,
                            random_state=0)
        assert model.n_features_in_ == 3
        values = rioxarray.open_rasterio(target).values[0].ravel()
        np.testing.assert_array_equal(values[[10, 500, 1999]], -1)
        finite = values >= 0
        scores[standardize] = adjusted_rand_score(truth[finite], values[finite])
    # features on wildly different scales: k-means only sees all three once standardised
    assert scores[True] > scores[False] + 0.2
    with pytest.raises(ValueError, match="variables"):
        run_cluster(source, 3, target, variables=["ndvi"])
