"""BFAST Monitor beyond the default model equals R: season dummies and OLS-CUSUM
(``../shared/fixtures/r_bfastmonitor_ext``), on the reference and cpu engines; R's RE/ME
types, which tscube does not implement, are refused with a clear error."""

from __future__ import annotations

import numpy as np
import pytest

from tscube import BfastStatus, bfast_monitor

from conftest import EXT_FIXTURES, ext_cases, ext_kwargs

pytestmark = pytest.mark.skipif(not EXT_FIXTURES.exists(), reason="../shared fixtures not available")


def _cases(predicate):
    cases = [c for c in ext_cases() if predicate(c)]
    return pytest.mark.parametrize("case", cases, ids=[c["id"] for c in cases])


def _assert_matches_r(result, case):
    assert result.status == BfastStatus.OK
    if case["breakpoint"] is None:
        assert result.break_index == -1 and np.isnan(result.break_time)
    else:
        assert result.break_time == case["breakpoint"]
    assert result.history_start == case["history_start"]
    assert result.n_history == case["histsize"]
    np.testing.assert_allclose(result.magnitude, case["magnitude"], rtol=0, atol=1e-9)
    np.testing.assert_allclose(result.sigma, case["sigma"], rtol=1e-7)
    process = result.process[np.isfinite(result.process)]
    np.testing.assert_allclose(process, case["process"], rtol=1e-7, atol=1e-12)
    boundary = result.boundary[np.isfinite(result.boundary)]
    np.testing.assert_allclose(boundary, case["boundary"], rtol=1e-12)
    np.testing.assert_allclose(result.statistic, case["statistic"], rtol=1e-7)
    np.testing.assert_allclose(result.mosum_mean, np.mean(case["process"]), rtol=1e-7, atol=1e-12)
    assert result.attrs["critval"] == pytest.approx(case["critval"], rel=1e-15)
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


@_cases(lambda c: c["type"] in ("RE", "ME"))
def test_re_me_types_are_refused(case):
    with pytest.raises(ValueError, match="type must be one of 'OLS-MOSUM', 'OLS-CUSUM'"):
        bfast_monitor(**ext_kwargs(case))
