"""Critical values: R's OLS-CUSUM values bit for bit, R's OLS-MOSUM table where R has it,
and the simulation beyond it, which reproduces the table within its Monte Carlo error."""

from __future__ import annotations

import json
import math

import numba
import numpy as np
import pytest

from tscube import config
from tscube.bfast.monitor import critval
from tscube.bfast.monitor.critval import (SUPPORTED_END, SUPPORTED_H, _table, brent_minimum, critical_value,
                                  cusum_critical_value, mosum_sample, quantile_standard_error,
                                  simulate_mosum_statistic, simulated_critical_value)

from conftest import read_fixture_text


def test_cusum_critical_values_equal_r():
    """R's optimize() result for every level of the fixtures, to the last bit
    (SPEC-bfastmonitor-ext 2.3: the exact root is up to 4e-8 away)."""
    cases = json.loads(read_fixture_text("r_bfastmonitor_ext/cases.json"))["cases"]
    by_level = {c["level"]: c["critval"] for c in cases if c["type"] == "OLS-CUSUM"}
    assert set(by_level) == {0.1, 0.05, 0.01, 0.001}
    for level, r_value in by_level.items():
        assert cusum_critical_value(level) == r_value
        # h and end play no part in OLS-CUSUM
        assert critical_value(0.37, 55, level, "OLS-CUSUM") == cusum_critical_value(level)


def test_brent_minimum_finds_minima():
    assert brent_minimum(lambda x: (x - 2.0) ** 2, 0.0, 10.0, 1e-10) == pytest.approx(2.0, abs=1e-8)
    assert brent_minimum(lambda x: math.cos(x), 0.0, 6.0, 1e-10) == pytest.approx(math.pi, abs=1e-7)
    assert brent_minimum(lambda x: abs(x - 9.99), 0.0, 10.0, 1e-10) == pytest.approx(9.99, abs=1e-7)


def test_table_is_used_inside_its_range():
    assert critical_value(0.25, 10, 0.05) == 1.34182451007628  # SPEC-bfastmonitor 6
    assert critical_value(0.5, 10, 0.05) == 1.90200317899371
    assert critical_value(1, 10, 0.05) == 2.74592761324742
    assert critical_value(0.25, 10, 0.01) == 1.52164497279622


def test_simulation_reproduces_the_table():
    """At every one of the table's 750 points (h, end, 1 - alpha), the simulated quantile is
    within 4 standard errors of the tabled value, the error being the simulation's own
    (30,000 paths) and the table's, taken as no larger (it is that of about 60,000 paths,
    docs/bfast_monitor.md): so the simulation computes strucchange's functional, on
    strucchange's grid."""
    sample = simulate_mosum_statistic(SUPPORTED_H, SUPPORTED_END, 30_000, seed=11)
    z = []
    for a, h in enumerate(SUPPORTED_H):
        for e, end in enumerate(SUPPORTED_END):
            levels, table = _table()[(h, end)]
            for p, tabled in zip(levels, table):
                draws = sample[:, a, e]
                z.append((np.quantile(draws, p) - tabled) / (math.sqrt(2.0) * quantile_standard_error(draws, p)))
    z = np.array(z)
    assert z.size == 750
    assert np.abs(z).max() < 4.0
    assert np.sqrt(np.mean(z**2)) < 1.5  # and no systematic offset
    # the comparison tells functionals apart: the h = 0.25 table is far from h = 0.5 draws
    draws = sample[:, 1, -1]
    assert (np.quantile(draws, 0.95) - 1.34182451007628) / quantile_standard_error(draws, 0.95) > 20


def test_simulation_is_reproducible_and_thread_independent():
    one = simulate_mosum_statistic(0.3, 3, 1200, seed=5)
    before = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        single = simulate_mosum_statistic(0.3, 3, 1200, seed=5)
    finally:
        numba.set_num_threads(before)
    np.testing.assert_array_equal(one, single)
    assert not np.array_equal(one, simulate_mosum_statistic(0.3, 3, 1200, seed=6))
    # the same paths serve several windows and horizons
    several = simulate_mosum_statistic([0.3, 0.6], [2, 3], 1200, seed=5)
    assert several.shape == (1200, 2, 2)
    np.testing.assert_array_equal(several[:, 0, 1], one)
    assert np.all(several[:, :, 1] >= several[:, :, 0])  # a longer horizon only adds maxima


def test_simulated_values_are_cached_on_disk(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "CRITVAL_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(config, "CRITVAL_PATHS", 5000)
    sample, seconds = mosum_sample(0.35, 3.5)
    assert seconds > 0 and len(list(tmp_path.glob("critval-ols-mosum-*.npy"))) == 1
    again, seconds_again = mosum_sample(0.35, 3.5)
    assert seconds_again == 0.0 and again is sample  # this process keeps it
    monkeypatch.setattr(critval, "_SAMPLES", {})  # another process reads the file
    again, seconds_again = mosum_sample(0.35, 3.5)
    assert seconds_again == 0.0
    np.testing.assert_array_equal(sample, again)
    value = simulated_critical_value(0.35, 3.5, 0.05)
    assert value == np.quantile(sample, 0.95)
    assert critical_value(0.35, 3.5, 0.05) == value
    assert critical_value(0.35, 3.5, 0.01) > value  # every level from one cached sample
    monkeypatch.setattr(config, "CRITVAL_SEED", config.CRITVAL_SEED + 1)
    mosum_sample(0.35, 3.5)  # another seed is another sample, another file
    assert len(list(tmp_path.glob("critval-ols-mosum-*.npy"))) == 2


def test_unwritable_cache_simulates_once_per_process(tmp_path, monkeypatch):
    """A cache folder that cannot be made: the value is right, and the process simulates it
    once (a chunked run asks for it once per chunk)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setattr(config, "CRITVAL_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.setattr(config, "CRITVAL_PATHS", 2000)
    sample, seconds = mosum_sample(0.45, 2.5)
    assert seconds > 0 and not (blocker / "cache").exists()
    again, seconds_again = mosum_sample(0.45, 2.5)
    assert seconds_again == 0.0 and again is sample
    np.testing.assert_array_equal(sample, np.sort(simulate_mosum_statistic(0.45, 2.5, 2000, config.CRITVAL_SEED)))


@pytest.mark.parametrize(
    "args, match",
    [
        ((0.0, 10, 0.05), r"h = 0 must lie in \(0, 1\]"),
        ((1.2, 10, 0.05), r"h = 1.2 must lie in \(0, 1\]"),
        ((0.25, 1.0, 0.05), r"end = 1 must lie in \(1, 100\]"),
        ((0.25, 500, 0.05), r"end = 500 must lie in \(1, 100\]"),
        ((0.25, 10, 0.0), r"level = 0 \(monitoring significance\) must lie in \(0, 1\)"),
        ((0.25, 10, 1.0), r"must lie in \(0, 1\)"),
        ((0.25, 10, 1e-4), "too small for a simulated critical value from 20000 paths"),
        ((0.25, math.inf, 0.05), "end must be finite"),
    ],
)
def test_bad_parameters(args, match):
    with pytest.raises(ValueError, match=match):
        critical_value(*args)
    with pytest.raises(TypeError, match="level must be a number"):
        critical_value(0.25, 10, "0.05")
    with pytest.raises(ValueError, match="type must be one of"):
        critical_value(0.25, 10, 0.05, "ME")
