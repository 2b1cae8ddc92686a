"""BFAST Monitor, its near-real-time form and BFAST Lite: per-pixel structural breaks, equal
to R ``bfast::bfastmonitor`` and ``bfast::bfastlite``.

One subpackage per method (``monitor``, ``lite``, ``nrt``: the near-real-time state of
BFAST Monitor) over ``core``, the numerics they share; see docs/architecture.md.
"""

from .lite import BfastLiteResult, BfastLiteStatus, bfast_lite
from .lite import ENGINES as LITE_ENGINES
from .monitor import ENGINES, BfastMonitorResult, BfastStatus, bfast_monitor
from .nrt import BfastMonitor

__all__ = [
    "bfast_monitor", "BfastMonitor", "BfastMonitorResult", "BfastStatus", "ENGINES",
    "bfast_lite", "BfastLiteResult", "BfastLiteStatus", "LITE_ENGINES",
]
