"""Which observations form the stable history period (R ``bfastmonitor(history=...)``).

``"all"`` and a fixed start need no per-pixel work beyond the missing-value mask; the
per-pixel tests (``"ROC"``, ``"BP"``) are implemented here, in plain NumPy, for the
reference engine; the fast engines implement the same rules in their kernels.
"""

from __future__ import annotations

import numpy as np

HISTORY_METHODS = ("all", "ROC", "BP")

#: Boundary level of the ROC test: strucchange's ``boundary(efp)`` always uses its
#: default alpha = 0.05, and R's ``uniroot`` returns this value.
ROC_LAMBDA_05 = 0.947898101732124


def select(method: str, X: np.ndarray, y: np.ndarray, plan) -> tuple[int, bool]:
    """First row of the stable history among the history candidates ``X``, ``y``.

    Returns the row index and whether the selection was flagged (ROC_NO_CROSSING).
    """
    raise NotImplementedError(f"history={method!r} is not implemented yet")
