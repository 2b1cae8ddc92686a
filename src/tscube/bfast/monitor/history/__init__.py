"""Stable-history selection of BFAST Monitor (R ``bfastmonitor(history=...)``): which
valid observations before the monitoring start form the history the model is fitted on.

``"all"`` and a fixed start need no per-pixel work beyond the missing-value mask; the
per-pixel tests are ``"ROC"`` (reverse-ordered CUSUM, R's default) and ``"BP"``
(Bai–Perron breakpoints). :mod:`._reference` implements them in plain NumPy, one pixel at
a time (the reference engine's); :mod:`._cpu` in numba kernels over blocks of pixels
(:func:`history_first`, which the cpu and cuda engines and the near-real-time fit call).
"""

from ._cpu import history_compile_jobs, history_first
from ._reference import HISTORY_METHODS, ROC_LAMBDA_05, select

__all__ = ["HISTORY_METHODS", "ROC_LAMBDA_05", "history_compile_jobs", "history_first", "select"]
