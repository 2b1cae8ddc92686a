"""BFAST Monitor, its near-real-time form, BFAST Lite and classic BFAST: per-pixel
structural breaks, equal to R ``bfast::bfastmonitor``, ``bfast::bfastlite`` and
``bfast::bfast``.

One subpackage per method (``monitor``, ``lite``, ``classic``, ``nrt``: the near-real-time
state of BFAST Monitor) over ``core``, the numerics they share; see docs/architecture.md.
"""

from .classic import BfastClassicResult, BfastClassicStatus, bfast_classic
from .classic import ENGINES as CLASSIC_ENGINES
from .lite import BfastLiteResult, BfastLiteStatus, bfast_lite
from .lite import ENGINES as LITE_ENGINES
from .monitor import ENGINES, BfastMonitorResult, BfastStatus, bfast_monitor
from .nrt import BfastMonitor

__all__ = [
    "bfast_monitor", "BfastMonitor", "BfastMonitorResult", "BfastStatus", "ENGINES",
    "bfast_lite", "BfastLiteResult", "BfastLiteStatus", "LITE_ENGINES",
    "bfast_classic", "BfastClassicResult", "BfastClassicStatus", "CLASSIC_ENGINES",
]
