"""BFAST Monitor and BFAST Lite: per-pixel structural breaks, equal to R ``bfast::bfastmonitor``
and ``bfast::bfastlite``."""

from .lite import LITE_ENGINES, bfast_lite
from .lite_result import BfastLiteResult, BfastLiteStatus
from .monitor import ENGINES, bfast_monitor
from .nrt import BfastMonitor
from .result import BfastMonitorResult, BfastStatus

__all__ = [
    "bfast_monitor", "BfastMonitor", "BfastMonitorResult", "BfastStatus", "ENGINES",
    "bfast_lite", "BfastLiteResult", "BfastLiteStatus", "LITE_ENGINES",
]
