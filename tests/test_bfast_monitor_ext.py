"""BFAST Monitor beyond the default model equals R: season dummies and OLS-CUSUM
(``fixtures/r_bfastmonitor_ext``), on the reference and cpu engines; R's RE/ME
types, which tscube does not implement, are refused with a clear error."""

from __future__ import annotations

import numpy as np
import pytest

from tscube import bfast_monitor
from tscube.bfast.core.design import build_design
from tscube.bfast.nrt.state import fit_state
from tscube.timeaxis import build_time_axis

from conftest import assert_bfast_matches_r, ext_cases, ext_kwargs


def _cases(predicate):
    cases = [c for c in ext_cases() if predicate(c)]
    return pytest.mark.parametrize("case", cases, ids=[c["id"] for c in cases])


def _assert_matches_r(result, case):
    """R's break and history exactly, floats within 1e-7 relative, R's critical value."""
    assert_bfast_matches_r(result, case, rtol=1e-7, magnitude_rtol=0.0, critval_rtol=1e-15)
    # the new outputs, from R's own numbers: rmse = sigma sqrt((n - k) / n), and the
    # magnitude relative to the mean of R's monitoring predictions
    n, k = case["histsize"], len(case["coefficients"])
    np.testing.assert_allclose(result.rmse, case["sigma"] * np.sqrt((n - k) / n), rtol=1e-7)
    np.testing.assert_allclose(result.relative_magnitude, case["magnitude"] / np.mean(case["monitor_prediction"]), rtol=1e-7)


@pytest.mark.parametrize("engine", ["reference", "cpu"])
@_cases(lambda c: c["type"] in ("OLS-CUSUM", "OLS-MOSUM"))
def test_matches_r(case, engine):
    """Every OLS-CUSUM / OLS-MOSUM case (season dummies, trend only, all/ROC/numeric history,
    h, end, level): identical break and history start, floats within 1e-7 relative."""
    assert case["status"] == "ok"
    result = bfast_monitor(**ext_kwargs(case), return_process=True, engine=engine)
    _assert_matches_r(result, case)


@_cases(lambda c: c["type"] in ("OLS-CUSUM", "OLS-MOSUM") and "season" in c["formula"])
def test_history_coefficients_match_r(case):
    """The history fit's coefficients (the near-real-time state's, in R's parametrisation)
    are R's, the seasonal ones included: the season columns hold R's contr.poly values."""
    kwargs = ext_kwargs(case)
    data, dates = kwargs.pop("data"), kwargs.pop("dates")
    state, model = fit_state(data[:, None], dates, kwargs.pop("start"), engine="cpu", **kwargs)
    assert model["regressors"] == case["coef_names"]
    design = build_design(build_time_axis(dates, kwargs["freq"]), 0, model["trend"], season=True)
    ours = design.r_coefficients(state["coefficients"][:, 0])
    np.testing.assert_allclose(ours, case["coefficients"], rtol=1e-7, atol=1e-12)


@_cases(lambda c: c["type"] in ("RE", "ME"))
def test_re_me_types_are_refused(case):
    with pytest.raises(ValueError, match="type must be one of 'OLS-MOSUM', 'OLS-CUSUM'"):
        bfast_monitor(**ext_kwargs(case))
