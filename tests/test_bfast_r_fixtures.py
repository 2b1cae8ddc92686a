"""The reference engine reproduces R ``bfast::bfastmonitor`` on every fixture case."""

from __future__ import annotations

import numpy as np
import pytest

from tscube import BfastStatus, bfast_monitor, config
from tscube.bfast.monitor._reference import log_plus
from tscube.bfast.monitor.critval import MIN_TAIL_PATHS, simulated_critical_value

from conftest import assert_bfast_matches_r, bfast_case_kwargs, bfast_cases

ENGINE = "reference"


def _cases(predicate):
    cases = [c for c in bfast_cases() if predicate(c)]
    return pytest.mark.parametrize("case", cases, ids=[c["id"] for c in cases])


def _aliased(case) -> bool:
    """R's degenerate rank-deficient designs (NA coefficients): tscube flags them."""
    return case.get("coefficients") is not None and any(v is None for v in case["coefficients"])


def _fits(case) -> bool:
    return case["status"] == "ok" and not _aliased(case) and bool(case.get("monitor_time"))


def _assert_matches_r(result, case):
    """Break time and history start exact; magnitude, process, boundary, sigma to 1e-6 rel."""
    # a 9-observation history with 8 regressors is ill-conditioned; even so the magnitude
    # agrees to ~2e-9 (R's harmonics carry ~1e-12 of phase rounding, ours do not)
    tol = 1e-6 if case["histsize"] > 2 * len(case["coefficients"]) else 1e-8
    assert_bfast_matches_r(result, case, rtol=1e-6, magnitude_rtol=tol, critval_rtol=1e-12)


@_cases(lambda c: _fits(c) and c["history"] not in ("ROC", "BP"))
def test_matches_r(case):
    result = bfast_monitor(**bfast_case_kwargs(case), return_process=True, engine=ENGINE)
    _assert_matches_r(result, case)


@_cases(lambda c: c["status"] in ("ok", "warning") and c["history"] in ("ROC", "BP") and not _aliased(c))
def test_stable_history_matches_r(case):
    """ROC and BP select the same stable history as R, hence the same break and magnitude."""
    result = bfast_monitor(**bfast_case_kwargs(case), return_process=True, engine=ENGINE)
    _assert_matches_r(result, case)


@_cases(lambda c: c["status"] == "error" and "NA/NaN/Inf" in c["message"])
def test_roc_without_crossing_is_flagged(case):
    """R fails when the ROC test (level[2] > 0.05) rejects without a boundary crossing;
    tscube keeps the full history, monitors, and flags the pixel."""
    kwargs = bfast_case_kwargs(case)
    result = bfast_monitor(**kwargs, engine=ENGINE)
    assert result.status == BfastStatus.ROC_NO_CROSSING
    full = bfast_monitor(**{**kwargs, "history": "all"}, engine=ENGINE)
    assert result.history_start == full.history_start and result.n_history == full.n_history
    assert result.magnitude == full.magnitude and result.break_index == full.break_index


@_cases(lambda c: c["status"] == "ok" and _aliased(c))
def test_aliased_design_is_flagged(case):
    """R returns NA coefficients and no break; tscube says why (SINGULAR_DESIGN)."""
    result = bfast_monitor(**bfast_case_kwargs(case), engine=ENGINE)
    assert result.status == BfastStatus.SINGULAR_DESIGN
    assert result.break_index == -1 and np.isnan(result.magnitude)


@_cases(lambda c: "too few" in c.get("message", "") or "Fewer observations" in c.get("message", ""))
def test_too_few_history(case):
    result = bfast_monitor(**bfast_case_kwargs(case), engine=ENGINE)
    assert result.status == BfastStatus.TOO_FEW_HISTORY
    assert result.break_index == -1 and np.isnan(result.magnitude)


@_cases(lambda c: c["status"] == "error" and any(w in c["message"] for w in ("not available", "significance")))
def test_parameters_outside_r_table_are_simulated(case):
    """R stops for h, end or level outside its critical-value table; tscube simulates the
    critical value (or says the level is too small for the simulation's paths)."""
    kwargs = bfast_case_kwargs(case)
    level = np.atleast_1d(kwargs["level"])[0]
    if level * config.CRITVAL_PATHS < MIN_TAIL_PATHS:
        with pytest.raises(ValueError, match="too small for a simulated critical value"):
            bfast_monitor(**kwargs, engine=ENGINE)
        return
    result = bfast_monitor(**kwargs, return_process=True, engine=ENGINE)
    critval = simulated_critical_value(kwargs["h"], kwargs["end"], level)
    assert result.attrs["critval"] == critval
    assert result.status == BfastStatus.OK
    n = result.n_history
    t = np.arange(n + 1, n + 1 + result.n_monitor)
    np.testing.assert_allclose(result.boundary[np.isfinite(result.boundary)], critval * np.sqrt(2 * log_plus(t / n)))


@_cases(lambda c: c["status"] == "ok" and not c.get("monitor_time") and c["start_time"] > c["history_end"])
def test_start_after_last_date_raises(case):
    """R silently returns NA; tscube refuses a start with nothing to monitor."""
    with pytest.raises(ValueError, match="after the last date"):
        bfast_monitor(**bfast_case_kwargs(case), engine=ENGINE)
