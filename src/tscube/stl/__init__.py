"""Batched STL (seasonal-trend decomposition by loess) with missing values.

One implementation, two flavours (see :func:`stl` and ``docs/stl.md``):
``"statsmodels"`` equals statsmodels ``STL`` / R ``stl`` on complete series, and
``"stlplus"`` reproduces R ``stlplus`` 0.5.1, quirks included.
"""

from ._array import ENGINES as _ENGINE_MODULES
from ._params import StlParams
from ._status import StlStatus
from ._xarray import stl_xarray
from ._pixel_plot import plot_stl_pixel
from ._plot import stl_maps
from .api import stl
from .result import StlResult

#: What ``engine`` accepts.
ENGINES = ("auto", *_ENGINE_MODULES)

__all__ = ["stl", "StlResult", "StlStatus", "StlParams", "ENGINES", "stl_xarray", "stl_maps", "plot_stl_pixel"]
