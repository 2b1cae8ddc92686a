"""BFAST Monitor: per-pixel structural break detection, equal to R ``bfast::bfastmonitor``."""

from .monitor import ENGINES, bfast_monitor
from .result import BfastMonitorResult, BfastStatus

__all__ = ["bfast_monitor", "BfastMonitorResult", "BfastStatus", "ENGINES"]
