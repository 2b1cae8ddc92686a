"""Classic BFAST equals R ``bfast::bfast`` on every fixture case; cpu equals reference on
random cubes; R's errors and bad input become statuses or clear errors."""

from __future__ import annotations

import csv
import json
from functools import lru_cache

import numpy as np
import pytest

from tscube import BfastClassicStatus, bfast_classic

from conftest import open_fixture, read_fixture_text


@lru_cache(maxsize=1)
def classic_cases() -> list[dict]:
    return json.loads(read_fixture_text("r_bfast/cases.json"))["cases"]


@lru_cache(maxsize=1)
def classic_series() -> dict[str, tuple[np.ndarray, np.ndarray, int]]:
    """Each input series: (values, R's time(Yt), freq)."""
    rows: dict[str, list] = {}
    with open_fixture("r_bfast/inputs.csv") as file:
        for row in csv.DictReader(file):
            rows.setdefault(row["series"], []).append(row)
    return {name: (np.array([float(r["value"]) for r in rs]), np.array([float(r["time"]) for r in rs]),
                   int(rs[0]["freq"])) for name, rs in rows.items()}


def _case_id(case: dict) -> str:
    return (f'{case["series"]}-h{case["h"]}-{case["season"]}-it{case["max_iter"]}-b{case["breaks"]}'
            f'-l{case["level"]}-{case["type"]}')


def run_case(case: dict, engine: str):
    values, times, freq = classic_series()[case["series"]]
    breaks = None if case["breaks"] == "NULL" else int(case["breaks"])
    return bfast_classic(values, times, freq=freq, h=case["h"], season=case["season"], max_iter=case["max_iter"],
                         breaks=breaks, level=case["level"], type=case["type"], iterations=True, engine=engine)


def _one_based(index) -> list[int]:
    return [int(i) + 1 for i in np.ravel(index) if i >= 0]


def assert_matches_r(result, case: dict) -> None:
    values, times, _ = classic_series()[case["series"]]
    assert case["status"] == "ok"  # the fixtures hold no R error (README)
    scale = np.ptp(values)
    assert result.n_iter == case["n_iter"]
    converged = (case["iter_trend_breaks"][-1], case["iter_season_breaks"][-1]) == (
        (case["iter_trend_breaks"][-2], case["iter_season_breaks"][-2]) if case["n_iter"] > 1 else ([], []))
    assert result.status == (BfastClassicStatus.OK if converged else BfastClassicStatus.MAX_ITER)
    for part in ("trend", "season"):
        breaks = _one_based(getattr(result, f"{part}_break_index"))
        assert breaks == case[f"{part}_breaks"]
        assert getattr(result, f"n_{part}_breaks") == len(breaks)
        assert bool(getattr(result, f"n_{part}_breaks") == 0) == case[f"nobp_{part}"]
        history = getattr(result, f"iter_{part}_break_index")
        assert [_one_based(history[i]) for i in range(case["n_iter"])] == case[f"iter_{part}_breaks"]
        assert np.all(history[case["n_iter"]:] == -1)
        confint = getattr(result, f"{part}_confint")[: len(breaks)]
        ours = [[int(lo) + 1, b, int(hi) + 1] for (lo, hi), b in zip(confint, breaks)]
        assert ours == case[f"{part}_confint"]
        np.testing.assert_array_equal(getattr(result, f"{part}_break_time")[: len(breaks)],
                                      times[np.array(breaks, dtype=int) - 1])
    for name in ("trend", "seasonal", "remainder"):
        expected = np.broadcast_to(np.asarray(case[name], dtype=float), values.shape)  # season "none": R's St is 0
        np.testing.assert_allclose(getattr(result, name), expected, rtol=0, atol=1e-8 * scale)
    np.testing.assert_allclose(result.magnitude, case["magnitude"], rtol=0, atol=1e-8 * scale)
    if case["mags"]:
        np.testing.assert_allclose(result.magnitudes[: len(case["mags"])], case["mags"], rtol=0, atol=1e-8 * scale)
        assert int(result.magnitude_index) + 1 == case["time_index"]
        # R's time(Yt), not the CSV's digits
        assert result.magnitude_time == pytest.approx(case["time"], rel=0, abs=1e-9)
    else:
        assert result.magnitude_index == -1 and np.isnan(result.magnitude_time)


@pytest.mark.parametrize("engine", ["reference", "cpu"])
@pytest.mark.parametrize("case", classic_cases(), ids=_case_id)
def test_equals_r(case, engine):
    assert_matches_r(run_case(case, engine), case)


def test_fixtures_cover_the_settings():
    """The cases run above span every setting the issue names (a guard against a
    fixture file that shrank)."""
    cases = classic_cases()
    assert len(cases) >= 336
    for key, wanted in (("season", {"dummy", "harmonic", "none"}), ("max_iter", {1, 10}),
                        ("breaks", {"NULL", "1", "2"}), ("type", {"OLS-MOSUM", "OLS-CUSUM"}),
                        ("h", {0.05, 0.1, 0.15, 0.25})):
        assert {c[key] for c in cases} == wanted
    assert {c["freq"] for c in cases} >= {12, 23, 24, 36}
    assert any(c["n_iter"] > 2 for c in cases) and any(c["season_breaks"] for c in cases)


# ---------------------------------------------------------------- cpu = reference


def planted_cube(freq: int, years: float, n_pixels: int, missing: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Trend + three harmonics + noise, per pixel a planted trend step somewhere in the
    middle half and, for half the pixels, a change of seasonal amplitude; ``missing`` of
    the values NaN at random."""
    rng = np.random.default_rng(seed)
    T = int(round(years * freq))
    t = 2001 + np.arange(T) / freq
    phase = 2 * np.pi * (t - np.floor(t))
    data = np.empty((T, n_pixels))
    for p in range(n_pixels):
        at = rng.integers(T // 4, 3 * T // 4)
        amp = np.where((np.arange(T) > rng.integers(T // 4, 3 * T // 4)) & (p % 2 == 0), 0.5, 0.25)
        trend = 0.3 + 0.01 * (t - 2001) - np.where(np.arange(T) > at, rng.uniform(0.15, 0.3), 0.0)
        data[:, p] = (trend + amp * np.sin(phase) + 0.05 * np.cos(2 * phase) + 0.02 * np.sin(3 * phase)
                      + rng.normal(0, 0.03, T))
    data[rng.random(data.shape) < missing] = np.nan
    return data, t


def assert_engines_agree(a, b, data) -> None:
    np.testing.assert_array_equal(a.status, b.status)
    for name in ("n_iter", "n_obs", "n_trend_breaks", "n_season_breaks", "trend_break_index", "season_break_index",
                 "iter_trend_break_index", "iter_season_break_index", "magnitude_index"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    scale = np.nanmax(np.abs(data))
    for name in ("trend", "seasonal", "remainder", "magnitudes", "magnitude"):
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=0, atol=1e-8 * scale, err_msg=name)
    for name in ("trend_confint", "season_confint", "trend_pretest_p", "season_pretest_p"):
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=1e-8, err_msg=name)


@pytest.mark.parametrize("season", ["dummy", "harmonic", "none"])
@pytest.mark.parametrize("missing", [0.0, 0.3])
@pytest.mark.parametrize("freq,years", [(23, 9), (12, 12), (24, 3.2)])
def test_cpu_equals_reference(season, missing, freq, years):
    data, t = planted_cube(freq, years, 12, missing, seed=freq + int(10 * missing))
    data[:, 0] = np.nan  # all missing
    kwargs = dict(freq=freq, season=season, h=0.15, iterations=True)
    ref = bfast_classic(data, t, engine="reference", **kwargs)
    cpu = bfast_classic(data, t, engine="cpu", **kwargs)
    assert_engines_agree(ref, cpu, data)
    assert ref.status[0] == BfastClassicStatus.ALL_MISSING
    # 30 % missing leaves 22 seasonal dummies segments of 21 observations at f = 23 (R
    # stops), and some short series a cycle-subseries without a value (no STL start)
    assert np.all(np.isin(ref.status[1:], [BfastClassicStatus.OK, BfastClassicStatus.MAX_ITER,
                                           BfastClassicStatus.SEGMENT_TOO_SHORT,
                                           BfastClassicStatus.TOO_FEW_OBSERVATIONS]))
    if missing == 0 and years > 5 and season != "none":
        assert ref.n_trend_breaks[1:].min() >= 1  # every pixel has its planted step


@pytest.mark.parametrize("kwargs", [
    dict(breaks=2, type="OLS-CUSUM"), dict(breaks=(1, None), level=(0.05, 0.5), max_iter=1),
    dict(h=0.1, season="harmonic", level=0.01), dict(h=0.25, season="dummy", breaks=(None, 1)),
])
def test_cpu_equals_reference_settings(kwargs):
    data, t = planted_cube(23, 8, 8, 0.1, seed=5)
    ref = bfast_classic(data, t, freq=23, engine="reference", iterations=True, **kwargs)
    cpu = bfast_classic(data, t, freq=23, engine="cpu", iterations=True, **kwargs)
    assert_engines_agree(ref, cpu, data)


def test_planted_breaks_are_found():
    """A gap-free pixel with one planted trend step: one trend break at the step, and the
    magnitude is the step's size."""
    freq, T = 23, 230
    t = 2001 + np.arange(T) / freq
    rng = np.random.default_rng(1)
    y = 0.5 + 0.2 * np.sin(2 * np.pi * t) + rng.normal(0, 0.01, T)
    y[120:] -= 0.3
    result = bfast_classic(y, t, freq=freq)
    assert result.status == BfastClassicStatus.OK
    assert result.n_trend_breaks == 1 and result.trend_break_index[0] == 119
    assert result.magnitude == pytest.approx(-0.3, abs=0.02)
    lo, hi = result.trend_confint[0]
    assert lo <= 119 <= hi


# ---------------------------------------------------------------- statuses and bad input


def test_statuses_of_r_errors():
    freq, T = 23, 199
    t = 2001 + np.arange(T) / freq
    data, _ = planted_cube(freq, T / freq, 6, 0.0, seed=3)
    data[:, 0] = 0.7  # constant: R's process is 0 / 0
    data[:, 1] = np.nan
    data[:, 2] = 1e200
    data[:40, 3] = np.inf  # inf values are missing: the rest still decomposes
    for engine in ("reference", "cpu"):
        result = bfast_classic(data, t, freq=freq, engine=engine)
        assert list(result.status[:3]) == [BfastClassicStatus.PERFECT_FIT, BfastClassicStatus.ALL_MISSING,
                                           BfastClassicStatus.OVERFLOW]
        assert result.n_obs[3] == T - 40 and result.status[3] in (BfastClassicStatus.OK, BfastClassicStatus.MAX_ITER)
        assert np.all(np.isnan(result.trend[:, :3])) and np.all(result.trend_break_index[:, :3] == -1)
        # 22 seasonal dummies need segments of 23 observations: h = 0.05 of 199 is 9
        short = bfast_classic(data[:, 4:], t, freq=freq, h=0.05, level=0.99, engine=engine)
        assert np.all(short.status == BfastClassicStatus.SEGMENT_TOO_SHORT)
        assert np.all(np.isnan(short.magnitude))


def test_too_short_for_stl():
    t = 2001 + np.arange(46) / 23
    y = np.sin(2 * np.pi * t)[:, None] + np.zeros((1, 2))
    result = bfast_classic(y, t, freq=23)
    assert np.all(result.status == BfastClassicStatus.TOO_FEW_OBSERVATIONS)


def test_nodata_and_pixel_shape():
    data, t = planted_cube(23, 8, 6, 0.0, seed=2)
    cube = np.round(data * 10_000).astype(np.int16).reshape(len(t), 2, 3)
    cube[:10, 0, 0] = -9999
    result = bfast_classic(cube, t, freq=23, nodata=-9999)
    assert result.status.shape == (2, 3) and result.trend.shape == (len(t), 2, 3)
    assert result.n_obs[0, 0] == len(t) - 10 and np.all(np.isnan(result.trend[:10, 0, 0]))
    plain = bfast_classic(data.reshape(len(t), 2, 3)[:, 1, 1], t, freq=23)
    scaled = bfast_classic(cube[:, 1, 1].astype(float) / 10_000, t, freq=23)
    assert scaled.trend_break_index.shape[0] >= 0 and plain.status.shape == ()


@pytest.mark.parametrize("kwargs,message", [
    (dict(h=0.5), "h must be"), (dict(h=0), "h must be"), (dict(season="harmon"), "season must be"),
    (dict(max_iter=0), "max_iter"), (dict(type="Rec-CUSUM"), "type must be"), (dict(level=1.0), "level"),
    (dict(breaks=1.5), "breaks"), (dict(level=(0.05, 0.1, 0.2)), "pair"), (dict(engine="gpu"), "engine"),
])
def test_bad_parameters(kwargs, message):
    data, t = planted_cube(23, 4, 2, 0.0, seed=0)
    with pytest.raises(ValueError, match=message):
        bfast_classic(data, t, freq=23, **kwargs)


def test_bad_dates():
    data, t = planted_cube(23, 4, 2, 0.0, seed=0)
    with pytest.raises(ValueError, match="regular series"):
        bfast_classic(np.delete(data, 5, axis=0), np.delete(t, 5), freq=23)
    with pytest.raises(ValueError, match="dates"):
        bfast_classic(data, t[:-1], freq=23)
    with pytest.raises(ValueError, match="freq"):
        bfast_classic(data, t)
    with pytest.raises(TypeError, match="needs dates"):
        bfast_classic(data)
