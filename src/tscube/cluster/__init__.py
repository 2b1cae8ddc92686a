"""Unsupervised clustering of pixels by their features: k-means and Gaussian mixtures.

Both estimators follow scikit-learn's API (parameters in ``__init__``, ``fit``
returns ``self``, fitted attributes end in ``_``) and take an
``engine="auto"|"reference"|"cpu"|"cuda"`` argument. They accept (N, D) NumPy
arrays, dask arrays (streamed chunk by chunk, never loaded whole) and xarray
objects whose ``feature_dim`` (default ``"band"``) holds the features.
"""

from ._gmm import GaussianMixture
from ._kmeans import KMeans

__all__ = ["GaussianMixture", "KMeans"]
