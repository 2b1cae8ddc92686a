"""BFAST Monitor: the first structural break of each pixel after a monitoring start, equal
to R ``bfast::bfastmonitor``.

``api`` holds the public function, which hands NumPy data to ``_array`` (validation, the
plan of :mod:`.plan`, one of the engines ``_reference``, ``_cpu``, ``_cuda``) and an
``xarray.DataArray`` to ``_xarray``; :mod:`.history` selects the stable history (ROC,
BP), :mod:`.critval` gives the boundary's critical value; :mod:`.result` and
:mod:`.status` say what comes out; ``_maps`` and ``_pixel_plot`` draw it.
"""

from ._array import ENGINES, bfast_monitor_array, monitor_plan
from ._maps import break_maps
from ._pixel_plot import plot_pixel
from ._xarray import bfast_monitor_xarray
from .api import bfast_monitor
from .result import OUTPUT_DTYPES, VARIABLE_ATTRS, BfastMonitorResult, empty_outputs
from .status import MONITORED, BfastStatus

__all__ = [
    "bfast_monitor", "bfast_monitor_array", "bfast_monitor_xarray", "monitor_plan", "BfastMonitorResult", "BfastStatus",
    "MONITORED", "OUTPUT_DTYPES", "VARIABLE_ATTRS", "ENGINES", "empty_outputs", "break_maps", "plot_pixel",
]
