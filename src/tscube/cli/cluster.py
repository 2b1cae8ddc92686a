"""``tscube cluster INPUT -k K -o labels.tif``: k-means or a Gaussian mixture over the
pixels of a raster whose bands (or variables) are features, e.g. a tscube result."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import numpy as np
import typer

from ..io import GEOTIFF_SUFFIXES, check_complete, replace_atomically, temporary_path
from ..runs import exclusive_lock, record_path
from .app import app, clean_errors
from .running import check_output

#: Label written for pixels with a non-finite feature.
NODATA_LABEL = -1
METHODS = ("gmm", "kmeans")


def open_features(input_path, *, feature_dim="band", variables=None, chunks="auto"):
    """Open a GeoTIFF, NetCDF or Zarr store as a DataArray with features on ``feature_dim``.

    GeoTIFF bands are the features (read masked, so nodata becomes NaN). For
    NetCDF/Zarr the data variables (optionally only ``variables``) whose dims are
    the spatial dims become the features, e.g. break magnitude, MOSUM mean, trend
    slope of a tscube result file.
    """
    import xarray as xr

    path = Path(input_path)
    if not path.exists():
        raise FileNotFoundError(f"input_path {str(path)!r} does not exist")
    suffix = path.suffix.lower()
    if suffix in (".tif", ".tiff", ".vrt"):
        import rioxarray

        da = rioxarray.open_rasterio(path, masked=True, chunks=chunks)
        if "band" != feature_dim and "band" in da.dims:
            da = da.rename(band=feature_dim)
        return da
    if suffix == ".zarr" or path.is_dir():
        check_complete(path)  # an unfinished run's pixels are not computed
        ds = xr.open_zarr(path, chunks=chunks)
    elif suffix in (".nc", ".nc4", ".netcdf", ".h5"):
        ds = xr.open_dataset(path, chunks=chunks)
    else:
        raise ValueError(
            f"input_path must be a GeoTIFF (.tif), NetCDF (.nc) or Zarr (.zarr), got {suffix!r}"
        )
    if variables is not None:
        missing = [v for v in variables if v not in ds.data_vars]
        if missing:
            raise ValueError(f"variables {missing} are not in {path.name}")
        ds = ds[list(variables)]
    if not ds.data_vars:
        raise ValueError(f"{path.name} has no data variables to use as features")
    dims = next(iter(ds.data_vars.values())).dims
    ds = ds[[name for name, v in ds.data_vars.items() if v.dims == dims]]
    da = ds.to_array(dim=feature_dim).astype(np.float64)
    da = da.assign_coords({feature_dim: [str(v) for v in da[feature_dim].values]})
    return da


def run_cluster(input_path, k, output_path, *, method="gmm", covariance_type="full",
                engine="auto", max_iter=100, tol=None, random_state=0, feature_dim="band",
                variables=None, standardize=False, chunks="auto"):
    """Cluster the pixels of a raster by their features and write a label GeoTIFF.

    Parameters
    ----------
    input_path : path
        GeoTIFF (bands = features), NetCDF or Zarr (variables = features).
    k : int
        Number of clusters / mixture components.
    output_path : path
        GeoTIFF of int32 labels ``0..k-1`` with the input's CRS and transform;
        pixels with any non-finite feature get the nodata value -1.
    method : {"gmm", "kmeans"}
    covariance_type : {"full", "tied", "diag", "spherical"}
        For ``method="gmm"``.
    engine : {"auto", "reference", "cpu", "cuda"}
    max_iter : int
    tol : float, optional
        Convergence tolerance (estimator default when None).
    random_state : int
    feature_dim : str
        Name given to the feature dimension.
    variables : list of str, optional
        NetCDF/Zarr variables to use (all with the same dims by default).
    standardize : bool
        Scale every feature to zero mean and unit variance first (k-means is
        sensitive to feature scales; a full-covariance GMM is not).
    chunks : dask chunks
        Chunks the input is opened with; the fit streams over them.

    Returns
    -------
    estimator : KMeans or GaussianMixture
        The fitted estimator.
    """
    import rioxarray  # noqa: F401  (registers the .rio accessor)

    from ..cluster import GaussianMixture, KMeans  # here: scikit-learn's import costs every command a second

    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    features = open_features(input_path, feature_dim=feature_dim, variables=variables,
                             chunks=chunks)
    if standardize:
        other = [d for d in features.dims if d != feature_dim]
        scale = features.std(other)
        scale = scale.where(scale > 0, 1.0)  # a constant feature stays constant (0)
        features = (features - features.mean(other)) / scale
    kwargs = dict(max_iter=max_iter, random_state=random_state, engine=engine,
                  feature_dim=feature_dim)
    if tol is not None:
        kwargs["tol"] = tol
    if method == "gmm":
        estimator = GaussianMixture(k, covariance_type=covariance_type, **kwargs)
    else:
        estimator = KMeans(k, **kwargs)
    estimator.fit(features)
    labels = estimator.predict(features).astype(np.int32)
    labels.name = "label"
    labels.attrs = {"long_name": f"{method} cluster label", "method": method,
                    "n_clusters": int(k)}
    crs = features.rio.crs
    labels = labels.rio.write_nodata(NODATA_LABEL, encoded=False)
    if crs is not None:
        labels = labels.rio.write_crs(crs)
    output_path = Path(output_path)
    tmp = temporary_path(output_path)
    try:  # written whole under a temporary name, then renamed: never a half-written label map
        labels.rio.to_raster(tmp, dtype="int32", driver="GTiff")
        replace_atomically(tmp, output_path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return estimator


@app.command()
def cluster(
    input_path: Path = typer.Argument(..., metavar="INPUT", help="GeoTIFF (bands = features), .nc or .zarr (variables = features)."),
    k: int = typer.Option(..., "-k", help="Number of clusters."),
    output: Path = typer.Option(..., "-o", "--output", help="Label GeoTIFF to write."),
    method: str = typer.Option("gmm", help="gmm or kmeans."),
    covariance_type: str = typer.Option("full", help="GMM covariance: full, tied, diag or spherical."),
    variables: Optional[list[str]] = typer.Option(None, "--variable", help="NetCDF/Zarr variable to use (repeat for several)."),
    standardize: bool = typer.Option(False, "--standardize", help="Scale features to zero mean and unit variance."),
    max_iter: int = typer.Option(100, help="Maximum EM / Lloyd iterations."),
    seed: int = typer.Option(0, help="Random seed."),
    engine: str = typer.Option("auto", help="auto, reference, cpu or cuda."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing OUTPUT; without it the run is refused."),
) -> None:
    """Cluster the pixels of a raster by their features (e.g. a tscube result) into a label map."""
    with clean_errors():
        if not input_path.exists():
            raise FileNotFoundError(f"input {str(input_path)!r} does not exist")
        check_output(output, input_path, GEOTIFF_SUFFIXES, ".tif")  # before any work
        with exclusive_lock(output):
            if output.exists() and not overwrite:
                raise FileExistsError(f"output {output.name} exists; pass --overwrite to replace it")
            began = time.perf_counter()
            estimator = run_cluster(input_path, k, output, method=method, covariance_type=covariance_type,
                                    engine=engine, max_iter=max_iter, random_state=seed,
                                    variables=variables or None, standardize=standardize)
            stale = record_path(output)  # the run record of what the label map replaced
            if stale.exists():
                stale.unlink()
        typer.echo(f"{method} with {k} clusters: {time.perf_counter() - began:.2f} s, "
                   f"converged={getattr(estimator, 'converged_', 'n/a')}")
        typer.echo(f"written {output}")
