"""bfast_monitor(calibrate=True): each pixel's critical value for its own design.

The engines agree (cpu = reference on random cloudy cubes, every history selection and
process); the critical values are those of a per-pixel Monte Carlo of the pixel's own
design (the truth the method approximates); stable series are flagged at about ``level``
where R's boundary flags a quarter of them; ``calibrate=False`` reports R's value;
the cells are cached; the near-real-time monitor calibrates to its horizon.
(benchmarks/calibration.py measures the false-alarm rates of every design class with
4,000 series each.)
"""

from __future__ import annotations

import numpy as np
import pytest

from tscube import BfastStatus, bfast_monitor, config
from tscube.bfast.core.design import build_design
from tscube.bfast.monitor import calibration
from tscube.bfast.monitor.critval import critical_value
from tscube.timeaxis import build_time_axis

FREQ = 23


def cloudy_noise(n_dates, n_pixels, missing, seed):
    rng = np.random.default_rng(seed)
    values = rng.standard_normal((n_dates, n_pixels))
    values[rng.random(values.shape) < missing] = np.nan
    return values


def dates_of(n_dates):
    return 2000 + np.arange(n_dates) / FREQ


MODELS = {
    "trend + harmon": dict(order=2),
    "trend + season": dict(order=0, season=True),
    "harmon": dict(order=1, trend=False),
}


@pytest.mark.parametrize("history", ["all", "ROC"])
@pytest.mark.parametrize("process", ["OLS-MOSUM", "OLS-CUSUM"])
@pytest.mark.parametrize("model", list(MODELS))
def test_cpu_equals_reference_when_calibrated(history, process, model):
    # (season dummies: a history that misses a cycle position is SINGULAR_DESIGN)
    cube = cloudy_noise(140, 40, 0.1 if "season" in model else 0.35, seed=len(model) + len(history))
    cube[100:, ::3] -= 2.5  # breaks for some pixels
    cube[:, 5] = np.nan  # no data at all
    cube[:70, 6] = np.nan  # no history before the start
    kwargs = dict(dates=dates_of(140), start=2000 + 80 / FREQ, freq=FREQ, history=history, type=process,
                  calibrate=True, return_process=True, **MODELS[model])
    reference = bfast_monitor(cube, engine="reference", **kwargs)
    cpu = bfast_monitor(cube, engine="cpu", **kwargs)
    for name in ("status", "break_index", "n_history", "n_monitor"):
        np.testing.assert_array_equal(getattr(cpu, name), getattr(reference, name), err_msg=name)
    for name in ("critval", "statistic", "magnitude", "history_start"):
        np.testing.assert_allclose(getattr(cpu, name), getattr(reference, name), rtol=1e-9, equal_nan=True,
                                   err_msg=name)
    monitored = np.isin(cpu.status, [BfastStatus.OK])
    assert monitored.sum() >= 25
    assert np.isfinite(cpu.critval[monitored]).all()
    assert np.isnan(cpu.critval[5]) and cpu.status[5] == BfastStatus.ALL_MISSING
    assert cpu.attrs["calibrate"] is True
    # R's boundary shape with the pixel's own critical value, and a break is its first crossing
    with np.errstate(invalid="ignore"):
        over = np.abs(reference.process) > reference.boundary
    np.testing.assert_array_equal(np.where(over.any(axis=0), over.argmax(axis=0), -1)[monitored],
                                  cpu.break_index[monitored])
    kwargs["calibrate"] = False
    r_boundary = bfast_monitor(cube, engine="reference", **kwargs).boundary
    if process == "OLS-MOSUM":  # the boundary is the critical value times R's shape
        np.testing.assert_allclose(reference.boundary / reference.critval, r_boundary / reference.attrs["critval"],
                                   rtol=1e-12)
    else:  # sqrt(x (x - 1) (c^2 + log(x / (x - 1)))): the gap of the squares is x (x - 1) (c^2 - R's c^2)
        gap = (reference.boundary ** 2 - r_boundary ** 2) / (reference.critval ** 2 - reference.attrs["critval"] ** 2)
        for p in np.flatnonzero(monitored):
            rows = np.flatnonzero(np.isfinite(reference.boundary[:, p]))
            n = reference.n_history[p]
            x = (n + np.arange(rows.size) + 1.0) / n
            np.testing.assert_allclose(gap[rows, p], x * (x - 1), rtol=1e-9)
    if "trend" in model:  # the trend's drift: every calibrated value above R's limit value
        assert (cpu.critval[monitored] > cpu.attrs["critval"]).all()


def test_uncalibrated_results_report_r_critical_value():
    cube = cloudy_noise(120, 12, 0.3, seed=1)
    kwargs = dict(dates=dates_of(120), start=2000 + 70 / FREQ, freq=FREQ, history="all")
    result = bfast_monitor(cube, **kwargs)
    assert result.attrs["calibrate"] is False
    assert np.all(result.critval == result.attrs["critval"])
    assert result.attrs["critval"] == critical_value(0.25, 10, 0.05, "OLS-MOSUM")  # R's table


def per_pixel_truth(cube, dates, n_history_dates, order, trend, h, cusum, pixels, level, paths=40000, freq=FREQ):
    """The ``1 - level`` quantile of the statistic of each pixel's own design (its valid
    rows of the model's design matrix), by Monte Carlo."""
    X = build_design(build_time_axis(dates, freq), order, trend, False).matrix
    truth = []
    for p in pixels:
        rows = np.flatnonzero(np.isfinite(cube[:, p]))
        n = int((rows < n_history_dates).sum())
        sample = calibration.simulate_statistic(X[rows], n, h, cusum, paths, seed=100 + p)
        value = np.quantile(sample, 1 - level)
        truth.append(np.sqrt(value) if cusum else value)
    return np.array(truth)


@pytest.mark.parametrize("process", ["OLS-MOSUM", "OLS-CUSUM"])
def test_calibrated_values_match_each_pixels_own_monte_carlo(process):
    """Against the truth of each pixel's own design (40 % missing: every pixel's dates
    differ): within the Monte Carlo error of both (a few per cent), and far from R's."""
    n_hist, total = 120, 240
    dates = dates_of(total)
    cube = cloudy_noise(total, 8, 0.4, seed=4)
    cusum = process == "OLS-CUSUM"
    result = bfast_monitor(cube, dates, float(dates[n_hist]), freq=FREQ, order=1, history="all", type=process,
                           calibrate=True, engine="cpu")
    truth = per_pixel_truth(cube, dates, n_hist, 1, True, 0.25, cusum, range(8), 0.05)
    np.testing.assert_allclose(result.critval, truth, rtol=0.04)
    assert abs(np.mean(result.critval / truth) - 1) < 0.02
    assert np.all(truth > 1.2 * result.attrs["critval"])  # R's value is far too low here


def test_very_short_histories_match_their_own_monte_carlo():
    """A few observations more than the model's regressors: the critical value changes by
    orders of magnitude with each one (every history size there is a grid point)."""
    dates = dates_of(92)
    sizes = [8, 9, 11, 14]
    cube = cloudy_noise(92, len(sizes), 0.0, seed=6)
    for p, n in enumerate(sizes):
        cube[:23 - n, p] = np.nan  # n history observations before the start at date 23
    result = bfast_monitor(cube, dates, float(dates[23]), freq=FREQ, order=1, history="all", calibrate=True,
                           engine="cpu")
    assert (result.status == BfastStatus.OK).all()
    truth = per_pixel_truth(cube, dates, 23, 1, True, 0.25, False, range(len(sizes)), 0.05, paths=20000)
    np.testing.assert_allclose(result.critval, truth, rtol=0.06)
    assert truth[0] > 5 * truth[-1]  # (k = 4: from n = 8 to 14 the value falls more than fivefold)


def test_the_lowest_level_with_enough_simulated_paths_works():
    """Every level the check lets through gets finite critical values (the interpolation
    reads the grid level below it, which needs its tail paths too)."""
    lowest = calibration.LEVEL_GRID[calibration.LEVEL_GRID * config.CALIBRATION_PATHS >= calibration.MIN_TAIL_PATHS][0]
    cube = cloudy_noise(100, 4, 0.1, seed=9)
    kwargs = dict(dates=dates_of(100), start=2000 + 60 / FREQ, freq=FREQ, history="all", calibrate=True,
                  engine="cpu")
    result = bfast_monitor(cube, level=float(lowest) * 1.001, **kwargs)
    assert (result.status == BfastStatus.OK).all() and np.isfinite(result.critval).all()
    with pytest.raises(ValueError, match="too small for calibrated critical values"):
        bfast_monitor(cube, level=float(lowest) * 0.999, **kwargs)


def test_a_model_no_design_can_fit_gives_statuses_not_an_error():
    """freq = 1 with harmonics: every history is singular (as uncalibrated), no exception."""
    cube = cloudy_noise(40, 3, 0.0, seed=1)
    dates = 2000.0 + np.arange(40)
    kwargs = dict(dates=dates, start=2030.0, freq=1, order=1, history="all", engine="cpu")
    expected = bfast_monitor(cube, **kwargs)
    got = bfast_monitor(cube, calibrate=True, **kwargs)
    np.testing.assert_array_equal(got.status, expected.status)
    assert (got.status == BfastStatus.SINGULAR_DESIGN).all() and np.isnan(got.critval).all()


def test_dates_on_the_daily_grid_are_thinned_at_their_own_step():
    """16-day acquisitions given as datetimes (R's daily grid, no freq): the canonical
    designs thin a 16-day series, not the daily grid, and match each pixel's own Monte
    Carlo (thinning the daily grid would make them 2 % too high)."""
    n_hist, total = 110, 200
    dates = np.datetime64("2001-01-01") + (16 * np.arange(total)).astype("timedelta64[D]")
    cube = cloudy_noise(total, 12, 0.3, seed=12)
    result = bfast_monitor(cube, dates, dates[n_hist], order=1, history="all", calibrate=True, engine="cpu")
    assert result.attrs["freq"] == 365
    truth = per_pixel_truth(cube, dates, n_hist, 1, True, 0.25, False, range(12), 0.05, paths=20000, freq=None)
    np.testing.assert_allclose(result.critval, truth, rtol=0.04)
    assert abs(np.mean(result.critval / truth) - 1) < 0.012


def test_stable_series_are_flagged_at_about_level():
    """1,200 white-noise series (trend + harmon, 40 % missing): R's boundary flags about
    30 %, the calibrated one about 5 % (within 4 binomial standard errors)."""
    n_series, level = 1200, 0.05
    cube = cloudy_noise(260, n_series, 0.4, seed=11)
    dates = dates_of(260)
    kwargs = dict(dates=dates, start=float(dates[130]), freq=FREQ, history="all", engine="cpu", level=level)
    r_rate = bfast_monitor(cube, **kwargs).has_break.mean()
    rate = bfast_monitor(cube, calibrate=True, **kwargs).has_break.mean()
    assert r_rate > 0.2
    assert abs(rate - level) < 4 * np.sqrt(level * (1 - level) / n_series)


def test_several_starts_get_their_own_critical_values():
    cube = cloudy_noise(150, 6, 0.2, seed=2)
    dates = dates_of(150)
    starts = [float(dates[60]), float(dates[100])]
    many = bfast_monitor(cube, dates, starts, freq=FREQ, history="all", calibrate=True, engine="cpu")
    assert many.critval.shape == (2, 6)
    for i, start in enumerate(starts):
        one = bfast_monitor(cube, dates, start, freq=FREQ, history="all", calibrate=True, engine="cpu")
        np.testing.assert_allclose(many.critval[i], one.critval, rtol=1e-12)
        np.testing.assert_array_equal(many.break_index[i], one.break_index)
    # a longer monitoring period after a shorter history: a higher boundary
    assert (many.critval[0] > many.critval[1]).all()


def test_cells_are_simulated_once_then_read_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "CRITVAL_CACHE_DIR", str(tmp_path))
    calibration._CELLS.clear()
    cube = cloudy_noise(100, 5, 0.2, seed=3)
    kwargs = dict(dates=dates_of(100), start=2000 + 60 / FREQ, freq=FREQ, order=1, history="all", calibrate=True,
                  engine="cpu")
    before = calibration.SIMULATION_SECONDS[0]
    first = bfast_monitor(cube, **kwargs)
    assert calibration.SIMULATION_SECONDS[0] > before
    cells = sorted((tmp_path / "calibration").glob("*.npy"))
    assert cells and not list((tmp_path / "calibration").glob("*.tmp"))
    calibration._CELLS.clear()  # a new process: the files only
    before = calibration.SIMULATION_SECONDS[0]
    again = bfast_monitor(cube, **kwargs)
    assert calibration.SIMULATION_SECONDS[0] == before
    np.testing.assert_array_equal(again.critval, first.critval)
    cells[0].write_bytes(b"not a numpy file")  # a damaged cell is simulated again, to the same values
    calibration._CELLS.clear()
    np.testing.assert_array_equal(bfast_monitor(cube, **kwargs).critval, first.critval)


def brute_force_statistic(X, n, h, cusum, n_paths, seed):
    """The monitoring statistic of :func:`calibration.simulate_statistic` the plain way:
    every error drawn, the history fitted by least squares, the process summed."""
    rng = np.random.default_rng(seed)
    total, k = X.shape
    m, w = total - n, int(np.floor(h * n))
    x = (n + np.arange(m) + 1.0) / n
    errors = rng.standard_normal((total, n_paths))
    beta = np.linalg.lstsq(X[:n], errors[:n], rcond=None)[0]
    residuals = errors - X @ beta
    sigma = np.sqrt((residuals[:n] ** 2).sum(axis=0) / (n - k))
    sums = np.vstack([np.zeros(n_paths), np.cumsum(residuals, axis=0)])
    if cusum:
        process = sums[n + 1:] / (sigma * np.sqrt(n))
        return np.max(process ** 2 / (x * (x - 1))[:, None] - np.log(x / (x - 1))[:, None], axis=0)
    process = (sums[n + 1:] - sums[n + 1 - w:total + 1 - w]) / (sigma * np.sqrt(n))
    logplus = np.where(x > np.e, np.log(np.maximum(x, np.e)), 1.0)
    return np.max(np.abs(process) / np.sqrt(2 * logplus)[:, None], axis=0)


def two_sample_ks(a, b):
    both = np.concatenate([a, b])
    return np.max(np.abs(np.searchsorted(np.sort(a), both, side="right") / a.size
                         - np.searchsorted(np.sort(b), both, side="right") / b.size))


@pytest.mark.parametrize("cusum", [False, True])
@pytest.mark.parametrize("case", ["trend + harmon", "harmon, short", "trend + season", "window over half",
                                  "no intercept"])
def test_reduced_history_draws_have_the_statistics_distribution(case, cusum):
    """simulate_statistic draws the earlier history errors through their sufficient
    statistics (k normals and a chi-square) where it can: the same distribution as
    drawing every error and fitting (two-sample Kolmogorov–Smirnov at 20,000 paths each,
    bound of the 1e-4 level), including where it cannot reduce (short histories, windows
    over most of the history, a design without a constant under OLS-CUSUM)."""
    n, m, h, order, trend, season = {"trend + harmon": (90, 60, 0.25, 3, True, False),
                                     "harmon, short": (9, 30, 0.25, 1, False, False),
                                     "trend + season": (80, 40, 0.25, 0, True, True),
                                     "window over half": (40, 50, 0.9, 1, True, False),
                                     "no intercept": (60, 40, 0.25, 1, True, False)}[case]
    rng = np.random.default_rng(len(case))
    rows = np.sort(rng.choice(2 * (n + m), n + m, replace=False))
    X = build_design(build_time_axis(dates_of(2 * (n + m)), FREQ), order, trend, season).matrix[rows]
    if case == "no intercept":
        X = X[:, 1:]
    paths = 20000
    fast = calibration.simulate_statistic(X, n, h, cusum, paths, seed=1)
    plain = brute_force_statistic(X, n, h, cusum, paths, seed=2)
    assert two_sample_ks(fast, plain) < 2.15 * np.sqrt(2 / paths)
    np.testing.assert_allclose(np.quantile(fast, 0.95), np.quantile(plain, 0.95), rtol=0.05)


def test_a_cells_values_do_not_depend_on_the_cells_simulated_with_it():
    """The cells of one (n, r) share their draws (common random numbers); each cell's
    sample is the same whichever others are simulated with it."""
    model = calibration.CalibrationModel(freq=FREQ, order=2, trend=True, season=False, h=0.25, cusum=False,
                                         spacing=1.5)
    together = calibration.simulate_cells(model, 40, 50, [0.5, 1.0, 2.0], 3000, seed=5)
    alone = calibration.simulate_cells(model, 40, 50, [2.0], 3000, seed=5)
    np.testing.assert_array_equal(together[2], alone[0])
    assert not np.array_equal(together[0], together[2])  # the stretch matters
    assert np.corrcoef(together[1], together[2])[0, 1] > 0.5  # on the same errors


def test_levels_out_of_reach_are_refused():
    cube = cloudy_noise(100, 3, 0.0, seed=1)
    kwargs = dict(dates=dates_of(100), start=2000 + 60 / FREQ, freq=FREQ, history="all", calibrate=True)
    with pytest.raises(ValueError, match="too small for calibrated critical values"):
        bfast_monitor(cube, level=0.001, **kwargs)
    with pytest.raises(ValueError, match="calibrated critical values are for levels"):
        bfast_monitor(cube, level=0.7, **kwargs)


def test_canonical_drift_is_the_designs_own():
    """drift_coefficients gives the drift that pixel_features measures on the canonical
    dates (regular history, monitoring stretched by s)."""
    n, m, h = 60, 45, 0.25
    for cusum in (False, True):
        for stretch in (0.5, 1.0, 2.0):
            slots = np.concatenate([np.arange(n), n - 1 + np.round(np.arange(1, m + 1) * stretch)]).astype(np.int64)
            values = np.ones((slots.size, 1))
            _, _, drift, spacing = calibration.pixel_features(values, None, np.zeros((1, 1), np.int64),
                                                              np.array([n]), slots, h, cusum)
            a, b = calibration.drift_coefficients(n, m, np.floor(h * n), 1.0, cusum)
            assert drift[0, 0] == pytest.approx(a + b * stretch, rel=0.02)
            assert spacing[0, 0] == 1.0


@pytest.mark.parametrize("cusum", [False, True])
def test_pixel_features_equal_a_plain_numpy_count(cusum):
    """The features kernel (blocks of 64 pixels, pixels vectorised) against one pixel at a
    time in NumPy: per-pixel history starts, two starts, gaps, inf and nodata."""
    rng = np.random.default_rng(8)
    T, P, h = 90, 150, 0.25
    values = rng.normal(size=(T, P))
    values[rng.random((T, P)) < 0.4] = np.nan
    values[rng.random((T, P)) < 0.02] = np.inf
    values[rng.random((T, P)) < 0.02] = -9.0
    values[:, 7] = np.nan
    slots = np.cumsum(rng.integers(1, 4, size=T))
    begins = np.array([50, 70])
    first = rng.integers(0, 40, size=(2, P))
    n, m, drift, spacing = calibration.pixel_features(values, -9.0, first, begins, slots, h, cusum)
    valid = np.isfinite(values) & (values != -9.0)
    for s_, begin in enumerate(begins):
        for p in range(P):
            history = np.flatnonzero(valid[:, p] & (np.arange(T) >= first[s_, p]) & (np.arange(T) < begin))
            monitoring = np.flatnonzero(valid[begin:, p]) + begin
            assert n[s_, p] == history.size and m[s_, p] == monitoring.size
            if history.size < 2:
                continue
            tau = slots[history].astype(float)
            window = monitoring if cusum else np.concatenate([history, monitoring])[-int(np.floor(h * history.size)):]
            expected = (slots[window].mean() - tau.mean()) / tau.std() if window.size else -tau.mean() / tau.std()
            assert drift[s_, p] == pytest.approx(expected, rel=1e-12, abs=1e-12)
            assert spacing[s_, p] == pytest.approx((tau[-1] - tau[0]) / (tau.size - 1))
    assert n[:, 7].tolist() == [0, 0] and np.isnan(drift[:, 7]).all()


def test_near_real_time_monitor_calibrates_to_its_horizon():
    """BfastMonitor(calibrate=True): each pixel's critical value for monitoring until
    ``end``; its breaks are the batch process's first crossings of that boundary; a
    saved state keeps the values."""
    from tscube.bfast.nrt import BfastMonitor

    cube = cloudy_noise(220, 60, 0.3, seed=5)
    cube[170:, :20] -= 3.0
    dates = dates_of(220)
    start = float(dates[110])
    monitor = BfastMonitor(start, freq=FREQ, history="all", end=2, calibrate=True, engine="cpu")
    monitor.fit(cube[:150], dates[:150]).update(cube[150:], dates[150:])
    result = monitor.result()
    assert result.attrs["calibrate"] is True
    assert np.isfinite(result.critval).all() and (result.critval > result.attrs["critval"]).all()
    batch = bfast_monitor(cube, dates, start, freq=FREQ, history="all", end=2, return_process=True, engine="cpu")
    shape = batch.boundary / batch.attrs["critval"]
    over = np.abs(batch.process) > result.critval[None, :] * shape
    np.testing.assert_array_equal(result.break_index, np.where(over.any(axis=0), over.argmax(axis=0), -1))
    assert result.has_break[:20].mean() > 0.9
    loaded = BfastMonitor.from_dataset(monitor.to_dataset())
    np.testing.assert_array_equal(loaded.result().critval, result.critval)
    uncalibrated = BfastMonitor(start, freq=FREQ, history="all", end=2, engine="cpu").fit(cube, dates).result()
    np.testing.assert_array_equal(uncalibrated.critval, np.full(60, batch.attrs["critval"]))
    np.testing.assert_array_equal(uncalibrated.break_index, batch.break_index)
