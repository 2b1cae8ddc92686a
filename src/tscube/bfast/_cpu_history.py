"""Stable-history selection for the cpu engine: first history date of each pixel."""

from __future__ import annotations

import numpy as np

from .plan import MonitorPlan


def history_first(values: np.ndarray, plan: MonitorPlan) -> tuple[np.ndarray, np.ndarray | None]:
    """First time index of each pixel's stable history, ``(S, P)`` int64, and the
    ROC_NO_CROSSING flags ``(S, P)`` bool (``None`` when no pixel can be flagged)."""
    n_pixels = values.shape[1]
    if plan.history in ("all", "fixed"):
        return np.full((plan.n_starts, n_pixels), plan.history_begin, dtype=np.int64), None
    raise NotImplementedError(f"history={plan.history!r} is not implemented in the cpu engine yet")
