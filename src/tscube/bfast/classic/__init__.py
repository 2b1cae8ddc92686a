"""Classic BFAST: iterative trend and seasonal breaks of each pixel's whole series, equal
to R ``bfast::bfast``.

``api`` holds the public function, which hands NumPy data to ``_array`` (the plan of
:mod:`.plan`, the STL start of :mod:`.start`, one of the engines ``_reference``,
``_cpu``) and an ``xarray.DataArray`` to ``_xarray``; :mod:`.confint` holds R's
breakpoint intervals, shared by the engines; :mod:`.result`, :mod:`.outputs` and
:mod:`.status` say what comes out; ``_maps`` and ``_pixel_plot`` draw it. The Bai–Perron
programme and the pre-tests are :mod:`tscube.bfast.core`'s, as BFAST Lite's.
"""

from ._array import ENGINES, bfast_classic_array
from ._maps import classic_maps
from ._pixel_plot import plot_classic_pixel
from ._xarray import bfast_classic_xarray
from .api import bfast_classic
from .result import BfastClassicResult
from .status import BfastClassicStatus

__all__ = [
    "bfast_classic", "bfast_classic_array", "bfast_classic_xarray", "BfastClassicResult", "BfastClassicStatus",
    "ENGINES", "classic_maps", "plot_classic_pixel",
]
