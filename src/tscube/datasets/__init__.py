"""Synthetic data for examples, tests and benchmarks."""

from ._cube import PRESETS, SyntheticCube, composite_dates, make_cube
from ._stac import StacCatalog, make_stac_catalog, serve_folder

__all__ = ["make_cube", "SyntheticCube", "PRESETS", "composite_dates", "StacCatalog", "make_stac_catalog",
           "serve_folder"]

try:  # k-means / GMM samples (tscube.cluster)
    from ._gmm import make_gmm  # noqa: F401

    __all__.append("make_gmm")
except ImportError:  # pragma: no cover - while the clustering module is not present
    pass
