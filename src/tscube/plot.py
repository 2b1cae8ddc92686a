"""Quick-look plots of tscube results (matplotlib, no screen needed).

* :func:`break_maps`: BFAST Monitor break-date map (one discrete colour per year) and
  magnitude map (diverging colours centred on 0);
* :func:`lite_maps`: BFAST Lite number of breaks, year and magnitude of the largest break;
* :func:`classic_maps`: classic BFAST trend and seasonal breaks, their years, the
  magnitude and the status;
* :func:`stl_maps`: STL trend-slope and seasonal-amplitude maps;
* :func:`result_maps`: whichever of these fits a result;
* :func:`plot_pixel`: one pixel's series, fitted season-trend model, monitoring start,
  break, and the MOSUM process with its boundary (like R's ``plot.bfastmonitor``);
* :func:`plot_lite_pixel`: one pixel's series with every segment's fit and break;
* :func:`plot_classic_pixel`: one pixel's data, seasonal, trend and remainder with the
  breaks and their confidence intervals (like R's ``plot.bfast``);
* :func:`plot_stl_pixel`: one series' STL in four panels (like R's ``plot.stl``).

Maps take in-memory results (:class:`~tscube.bfast.BfastMonitorResult`,
:class:`~tscube.stl.StlResult`) and :class:`xarray.Dataset` results, also those read
back from result files with :func:`read_result`. Pixels whose status is not OK
(missing, too few observations, ...) are dark grey; pixels without a break light grey.
Every function returns the matplotlib figure; save it with ``fig.savefig(path)``.
"""

from __future__ import annotations

from .bfast.classic import classic_maps, plot_classic_pixel
from .bfast.lite import lite_maps, plot_lite_pixel
from .bfast.monitor import break_maps, plot_pixel
from .figures import FLAGGED_GREY, NO_BREAK_GREY, function_of, locate_pixel, read_result  # noqa: F401
from .stl import plot_stl_pixel, stl_maps

__all__ = ["break_maps", "classic_maps", "lite_maps", "plot_classic_pixel", "plot_lite_pixel", "plot_pixel", "plot_stl_pixel",
           "read_result", "result_maps", "stl_maps"]


def result_maps(result, **kwargs):
    """:func:`break_maps`, :func:`lite_maps`, :func:`classic_maps` or :func:`stl_maps`,
    whichever fits ``result`` (``start_index`` only for a BFAST Monitor result: other
    results have no start)."""
    function = function_of(result)
    if function in ("bfast_lite", "bfast_classic", "stl"):
        if kwargs.pop("start_index", 0):
            raise ValueError(f"a start index is for BFAST Monitor results: a {function} result has no monitoring start")
        if function == "stl":
            kwargs.setdefault("title", "STL")
            return stl_maps(result, **kwargs)
        return (classic_maps if function == "bfast_classic" else lite_maps)(result, **kwargs)
    return break_maps(result, **kwargs)
