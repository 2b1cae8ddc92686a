"""BFAST Lite: every structural break of each pixel's whole series, equal to R
``bfast::bfastlite``.

``api`` holds the public function, which hands NumPy data to ``_array`` (the plan of
:mod:`.plan`, one of the engines ``_reference``, ``_cpu``) and an ``xarray.DataArray``
to ``_xarray``; :mod:`.result` and :mod:`.status` say what comes out; ``_maps`` and
``_pixel_plot`` draw it. The Bai–Perron programme is BFAST Monitor's ``history="BP"``
one, in :mod:`tscube.bfast.core`.
"""

from ._array import ENGINES, bfast_lite_array
from ._maps import lite_maps
from ._pixel_plot import plot_lite_pixel
from ._xarray import bfast_lite_xarray
from .api import bfast_lite
from .result import BfastLiteResult
from .status import BfastLiteStatus

__all__ = [
    "bfast_lite", "bfast_lite_array", "bfast_lite_xarray", "BfastLiteResult", "BfastLiteStatus", "ENGINES",
    "lite_maps", "plot_lite_pixel",
]
