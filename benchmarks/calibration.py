"""Calibrated monitoring (``bfast_monitor(calibrate=True)``): false alarms by design class,
detection power at matched false-alarm rates, cost.

Prints one JSON line per measurement, then Markdown tables (``--markdown``):

* ``false_alarms``: per design class (model, process, history size, monitoring over history,
  share missing, regular or irregular dates, history selection, ``h``) and level, on
  simulated stable series (Gaussian white noise: the process is invariant to the model's
  own terms, so noise alone is a stable series of any season-trend shape), at least
  ``--series`` monitored series: the share flagged with R's critical value and with the
  calibrated ones, and how many binomial standard errors the calibrated share lies from
  ``level``;
* ``truth``: for a few of the classes, each pixel's actual false-alarm probability at its
  calibrated critical value, by a Monte Carlo of its own design (20,000 paths per pixel),
  and the calibrated value over that Monte Carlo's quantile;
* ``power``: planted level shifts of 1-5 sigma at a random date of the first half of the
  monitoring period, detection rate and median delay (observations) of the calibrated
  boundary and of R's boundary with the critical value tuned so that its false-alarm
  rate on the class's stable series equals the calibrated one's (a fair comparison), and
  of R's default; ``--figure`` draws detection rate against break size;
* ``cost``: seconds of a warm calibrated run over a warm default run (cpu engine, ROC
  history) on the D2 and Peru (small) cubes, best of ``--repeat``, and the one-off
  seconds of simulating the cells those calls needed (a first call with an empty cache
  less a warm one).

Usage::

    python benchmarks/calibration.py [--series 4000] [--only false_alarms,truth,power,cost]
                                     [--markdown] [--figure docs/images/calibration_power.png]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
import time
from dataclasses import asdict, dataclass, replace

import numpy as np

import tscube
from tscube.bfast.monitor import MONITORED
from tscube.bfast.monitor import calibration as calibration_module

LEVELS = (0.05, 0.01)
MONITORED_CODES = [int(s) for s in MONITORED]


@dataclass(frozen=True)
class DesignClass:
    """One class of designs: the series of a class share the model, the process, the
    history and monitoring lengths (dates), the share missing and the kind of dates."""

    model: str = "trend + harmon"  # or "trend", "harmon", "trend + season"
    process: str = "OLS-MOSUM"
    history_dates: int = 150
    ratio: float = 1.0  # monitoring dates over history dates
    missing: float = 0.4
    dates: str = "16-day"  # or "irregular": gaps of 1-31 days (daily grid)
    history: str = "all"
    h: float = 0.25

    def label(self) -> str:
        return (f"{self.model}, {self.process}, n {self.history_dates}, r {self.ratio:g}, "
                f"{self.missing:.0%} missing, {self.dates}, {self.history}, h {self.h:g}")

    def parameters(self) -> dict:
        return dict(order=0 if self.model in ("trend", "trend + season") else 3, trend=self.model != "harmon",
                    season=self.model == "trend + season", type=self.process, h=self.h, history=self.history)


BASE = DesignClass()
CLASSES = [
    BASE,
    replace(BASE, model="trend"),
    replace(BASE, model="harmon"),
    replace(BASE, model="trend + season", missing=0.0, history_dates=300),
    replace(BASE, model="trend + season", missing=0.4, history_dates=300),
    replace(BASE, process="OLS-CUSUM"),
    replace(BASE, history_dates=50),
    replace(BASE, history_dates=300),
    replace(BASE, ratio=0.2),
    replace(BASE, ratio=4.0),
    replace(BASE, missing=0.0),
    replace(BASE, missing=0.7),
    replace(BASE, dates="irregular"),
    replace(BASE, history="ROC"),
    replace(BASE, h=0.5),
    # the corners: short and gappy histories with long monitoring, and the others together
    replace(BASE, history_dates=50, ratio=4.0, missing=0.7),
    replace(BASE, history_dates=300, ratio=0.2, missing=0.0, h=0.5),
    replace(BASE, process="OLS-CUSUM", missing=0.7, ratio=4.0),
    replace(BASE, model="harmon", dates="irregular", missing=0.7, history="ROC"),
    replace(BASE, model="trend", dates="irregular", history_dates=50, ratio=4.0, h=0.5),
    replace(BASE, history="ROC", missing=0.7, ratio=4.0, h=0.5),
]


def class_dates(design: DesignClass, rng: np.random.Generator):
    """``(dates, freq, start)`` of a class: 16-day decimal years (freq 23), or datetimes
    with gaps of 1 to 31 days (R's daily grid)."""
    total = int(round(design.history_dates * (1.0 + design.ratio)))
    if design.dates == "16-day":
        dates = 2000.0 + np.arange(total) / 23.0
        return dates, 23, float(dates[design.history_dates])
    gaps = rng.integers(1, 32, size=total)
    dates = np.datetime64("2000-01-01") + np.cumsum(gaps).astype("timedelta64[D]")
    return dates, None, dates[design.history_dates]


def stable_series(design: DesignClass, n_series: int, rng: np.random.Generator) -> np.ndarray:
    """White noise ``(T, n_series)`` with ``design.missing`` of the values missing at random."""
    total = int(round(design.history_dates * (1.0 + design.ratio)))
    values = rng.standard_normal((total, n_series))
    values[rng.random(values.shape) < design.missing] = np.nan
    return values


def false_alarms(design: DesignClass, n_series: int, seed: int) -> list[dict]:
    """The class's false-alarm rates with R's and the calibrated critical values, over at
    least ``n_series`` monitored series (more are drawn where designs are singular)."""
    rng = np.random.default_rng(seed)
    dates, freq, start = class_dates(design, rng)
    values = stable_series(design, int(n_series * 1.05) + 64, rng)
    while True:
        status = tscube.bfast_monitor(values, dates, start, freq=freq, engine="cpu", **design.parameters()).status
        count = int(np.isin(status, MONITORED_CODES).sum())
        if count >= n_series:
            break
        more = int((n_series - count) * values.shape[1] / max(count, 1) * 1.1) + 64
        values = np.concatenate([values, stable_series(design, more, rng)], axis=1)
    rows = []
    for level in LEVELS:
        runs = {}
        for calibrate in (False, True):
            began = time.perf_counter()
            runs[calibrate] = tscube.bfast_monitor(values, dates, start, freq=freq, level=level, calibrate=calibrate,
                                                   engine="cpu", **design.parameters())
            runs[f"seconds_{calibrate}"] = time.perf_counter() - began
        rows += rates(design, level, runs, np.isin(runs[False].status, MONITORED_CODES))
    return rows


def rates(design: DesignClass, level: float, runs: dict, monitored: np.ndarray) -> list[dict]:
    count = int(monitored.sum())
    r_rate = float(runs[False].has_break[monitored].mean())
    calibrated = float(runs[True].has_break[monitored].mean())
    standard_error = math.sqrt(level * (1 - level) / count)
    return [dict(measure="false_alarms", design=design.label(), **asdict(design), level=level, series=count,
                 r_rate=r_rate, calibrated_rate=calibrated, calibrated_se=(calibrated - level) / standard_error,
                 within_3se=abs(calibrated - level) <= 3 * standard_error,
                 median_critval=float(np.nanmedian(runs[True].critval[monitored])),
                 r_critval=float(runs[False].attrs["critval"]),
                 seconds_default=runs["seconds_False"], seconds_calibrated=runs["seconds_True"])]


def truth(design: DesignClass, n_pixels: int, paths: int, seed: int, level: float = 0.05) -> dict:
    """Each pixel's actual false-alarm probability at its calibrated critical value: the
    share of ``paths`` simulated statistics of the pixel's own design (its valid rows of
    the model's design matrix from its history start) beyond it; and the calibrated value
    over the ``1 - level`` quantile of that sample."""
    from tscube.bfast.core.design import build_design
    from tscube.timeaxis import build_time_axis

    rng = np.random.default_rng(seed)
    dates, freq, start = class_dates(design, rng)
    values = stable_series(design, n_pixels, rng)
    parameters = design.parameters()
    result = tscube.bfast_monitor(values, dates, start, freq=freq, level=level, calibrate=True, engine="cpu",
                                  **parameters)
    axis = build_time_axis(dates, freq)
    X = build_design(axis, parameters["order"], parameters["trend"], parameters["season"]).matrix
    cusum = design.process == "OLS-CUSUM"
    actual, ratio = [], []
    for p in np.flatnonzero(np.isin(result.status, MONITORED_CODES)):
        rows = np.flatnonzero(np.isfinite(values[:, p]) & (axis.time >= result.history_start[p] - 1e-9))
        n = int(np.count_nonzero(rows < design.history_dates))
        sample = calibration_module.simulate_statistic(X[rows], n, design.h, cusum, paths, seed=int(p))
        critval = result.critval[p] ** 2 if cusum else result.critval[p]
        actual.append(float(np.mean(sample > critval)))
        quantile = np.quantile(sample, 1.0 - level)
        ratio.append(float(result.critval[p] / (np.sqrt(quantile) if cusum else quantile)))
    actual, ratio = np.array(actual), np.array(ratio)
    return dict(measure="truth", design=design.label(), level=level, pixels=int(actual.size), paths=paths,
                mean_level=float(actual.mean()), p05_level=float(np.quantile(actual, 0.05)),
                p95_level=float(np.quantile(actual, 0.95)), mean_ratio=float(ratio.mean()),
                sd_ratio=float(ratio.std()), monte_carlo_sd_level=math.sqrt(level * (1 - level) / paths))


TRUTH_CLASSES = [0, 1, 5, 11, 12, 13, 15, 16]


def first_crossing(size: np.ndarray, shape: np.ndarray, critval) -> np.ndarray:
    """Time index of the first ``size > critval * shape`` per pixel (-1: none); ``size``
    and ``shape`` ``(T, P)`` with NaN outside the monitoring."""
    with np.errstate(invalid="ignore"):
        over = size > np.asarray(critval)[None, :] * shape if np.ndim(critval) else size > critval * shape
    hit = over.any(axis=0)
    return np.where(hit, over.argmax(axis=0), -1)


def mosum_pieces(result) -> tuple[np.ndarray, np.ndarray]:
    """``|process|`` and the boundary's shape (boundary over critval) of an OLS-MOSUM run."""
    return np.abs(result.process), result.boundary / result.attrs["critval"]


def tuned_critval(size: np.ndarray, shape: np.ndarray, rate: float) -> float:
    """R's critical value whose share of crossings over these (stable) series is ``rate``."""
    with np.errstate(invalid="ignore"):
        statistic = np.nanmax(size / shape, axis=0)
    return float(np.quantile(statistic[np.isfinite(statistic)], 1.0 - rate))


def power(design: DesignClass, n_series: int, seed: int, sizes=(1, 1.5, 2, 3, 4, 5), level: float = 0.05) -> list[dict]:
    """Detection of planted breaks by the calibrated boundary, by R's with its critical
    value tuned to the calibrated false-alarm rate, and by R's default."""
    rng = np.random.default_rng(seed)
    dates, freq, start = class_dates(design, rng)
    n_hist = design.history_dates
    total = int(round(n_hist * (1.0 + design.ratio)))
    stable = stable_series(design, n_series, rng)
    kwargs = dict(freq=freq, level=level, engine="cpu", return_process=True, **design.parameters())
    base = tscube.bfast_monitor(stable, dates, start, **kwargs)
    calibrated = tscube.bfast_monitor(stable, dates, start, calibrate=True, **kwargs)
    monitored = np.isin(base.status, MONITORED_CODES)
    size, shape = mosum_pieces(base)
    calibrated_rate = float(calibrated.has_break[monitored].mean())
    tuned = tuned_critval(size[:, monitored], shape[:, monitored], calibrated_rate)
    rows = [dict(measure="power", design=design.label(), break_size=0.0, level=level, series=int(monitored.sum()),
                 calibrated_rate=calibrated_rate, tuned_r_rate=float((first_crossing(size, shape, tuned) >= 0)[monitored].mean()),
                 r_rate=float(base.has_break[monitored].mean()), tuned_critval=tuned,
                 median_critval=float(np.nanmedian(calibrated.critval[monitored])))]
    print(json.dumps(rows[-1]), flush=True)
    for magnitude in sizes:
        values = stable.copy()
        planted = rng.integers(n_hist, n_hist + max(1, (total - n_hist) // 2), size=n_series)
        after = np.arange(total)[:, None] >= planted[None, :]
        values[after] -= magnitude  # sigma = 1
        base = tscube.bfast_monitor(values, dates, start, **kwargs)
        calibrated = tscube.bfast_monitor(values, dates, start, calibrate=True, **kwargs)
        monitored = np.isin(base.status, MONITORED_CODES)
        size, shape = mosum_pieces(base)
        found = {
            "calibrated": np.where(calibrated.has_break, calibrated.break_index, -1),
            "tuned_r": first_crossing(size, shape, tuned),
            "r": np.where(base.has_break, base.break_index, -1),
        }
        row = dict(measure="power", design=design.label(), break_size=float(magnitude), level=level,
                   series=int(monitored.sum()))
        for name, index in found.items():
            detected = monitored & (index >= planted)
            # delay in valid observations after the planted date
            valid = np.isfinite(values)
            counts = np.cumsum(valid, axis=0)
            delay = counts[np.maximum(index, 0), np.arange(n_series)] - counts[planted, np.arange(n_series)]
            row[f"{name}_detected"] = float(detected.sum() / monitored.sum())
            row[f"{name}_median_delay"] = float(np.median(delay[detected])) if detected.any() else math.nan
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def cost(repeat: int) -> list[dict]:
    """Warm calibrated run over warm default run on D2 and Peru (small), and the one-off
    simulation seconds of their cells (from an empty cache)."""
    from tscube import config
    from tscube.datasets import make_cube

    rows = []
    with tempfile.TemporaryDirectory() as empty:
        previous = config.CRITVAL_CACHE_DIR
        config.CRITVAL_CACHE_DIR = empty
        calibration_module._CELLS.clear()
        try:
            for name in ("D2", "peru_small"):
                cube = make_cube(name, seed=1)
                run = lambda calibrate: tscube.bfast_monitor(cube.data, cube.dates, cube.start, freq=23,  # noqa: E731
                                                             history="ROC", calibrate=calibrate, engine="cpu")
                run(False)  # compiles the engine's kernels
                before, cells = calibration_module.SIMULATION_SECONDS[0], len(calibration_module._CELLS)
                began = time.perf_counter()
                run(True)  # compiles the features' kernel, simulates the cells (empty cache)
                first = time.perf_counter() - began
                thread_seconds = calibration_module.SIMULATION_SECONDS[0] - before
                run(True)  # the features' kernel compiled
                best = {False: math.inf, True: math.inf}
                for _ in range(repeat):
                    for calibrate in (False, True):
                        began = time.perf_counter()
                        run(calibrate)
                        best[calibrate] = min(best[calibrate], time.perf_counter() - began)
                rows.append(dict(measure="cost", cube=name, pixels=int(np.prod(cube.data.shape[1:])),
                                 default_seconds=best[False], calibrated_seconds=best[True],
                                 calibrated_over_default=best[True] / best[False],
                                 one_off_seconds=first - best[True], simulation_thread_seconds=thread_seconds,
                                 cells=len(calibration_module._CELLS) - cells, threads=os.cpu_count()))
                print(json.dumps(rows[-1]), flush=True)
        finally:
            config.CRITVAL_CACHE_DIR = previous
    return rows


def _table(header: list[str], cells: list[list[str]]) -> list[str]:
    """A Markdown table's lines."""
    return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(row) + " |" for row in cells])


def markdown(rows: list[dict]) -> str:
    lines = []
    table = [r for r in rows if r["measure"] == "false_alarms"]
    if table:
        lines += _table(["design class", "level", "series", "R", "calibrated", "(calibrated - level) / SE"],
                        [[r["design"], f"{r['level']:g}", str(r["series"]), f"{r['r_rate']:.3f}",
                          f"{r['calibrated_rate']:.4f}", f"{r['calibrated_se']:+.1f}"] for r in table])
        worst = max(abs(r["calibrated_se"]) for r in table)
        lines.append(f"\nAll {len(table)} within 3 SE: {all(r['within_3se'] for r in table)} (largest |SE| {worst:.1f}).\n")
    table = [r for r in rows if r["measure"] == "truth"]
    if table:
        lines += _table(["design class", "pixels", "actual level: mean", "5-95 % of pixels",
                         "calibrated / true critval: mean", "sd"],
                        [[r["design"], str(r["pixels"]), f"{r['mean_level']:.4f}",
                          f"{r['p05_level']:.4f}-{r['p95_level']:.4f}", f"{r['mean_ratio']:.4f}", f"{r['sd_ratio']:.4f}"]
                         for r in table]) + [""]
    table = [r for r in rows if r["measure"] == "power" and r["break_size"] > 0]
    if table:
        lines += _table(["break (sigma)", "calibrated: detected", "delay", "R tuned: detected", "delay",
                         "R default: detected"],
                        [[f"{r['break_size']:g}", f"{r['calibrated_detected']:.3f}", f"{r['calibrated_median_delay']:g}",
                          f"{r['tuned_r_detected']:.3f}", f"{r['tuned_r_median_delay']:g}", f"{r['r_detected']:.3f}"]
                         for r in table]) + [""]
    table = [r for r in rows if r["measure"] == "cost"]
    if table:
        lines += _table(["cube", "pixels", "default s", "calibrated s", "ratio", "one-off s (cells simulated)"],
                        [[r["cube"], str(r["pixels"]), f"{r['default_seconds']:.3f}", f"{r['calibrated_seconds']:.3f}",
                          f"{r['calibrated_over_default']:.2f}", f"{r['one_off_seconds']:.1f} ({r['cells']})"]
                         for r in table])
    return "\n".join(lines)


def figure(rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = [r for r in rows if r["measure"] == "power" and r["break_size"] > 0]
    zero = next(r for r in rows if r["measure"] == "power" and r["break_size"] == 0)
    sizes = [r["break_size"] for r in table]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(sizes, [r["calibrated_detected"] for r in table], "o-",
            label=f"calibrated (false alarms {zero['calibrated_rate']:.3f})")
    ax.plot(sizes, [r["tuned_r_detected"] for r in table], "s--",
            label=f"R's boundary, critval tuned to the same rate ({zero['tuned_r_rate']:.3f})")
    ax.plot(sizes, [r["r_detected"] for r in table], "^:", color="grey",
            label=f"R's boundary as R (false alarms {zero['r_rate']:.3f})")
    ax.set_xlabel("break size (sigma)")
    ax.set_ylabel("share of breaks detected (at or after the break)")
    ax.set_title(table[0]["design"], fontsize=8)
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--series", type=int, default=4000, help="monitored stable series per class")
    parser.add_argument("--power-series", type=int, default=4000)
    parser.add_argument("--truth-pixels", type=int, default=300)
    parser.add_argument("--only", default="false_alarms,truth,power,cost")
    parser.add_argument("--classes", default=None, help="comma-separated class indices (default: all)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=20261128)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--figure", default=None)
    args = parser.parse_args()
    from isa import target  # this folder's

    print(json.dumps(dict(machine=True, cpus=os.cpu_count(), **target())), flush=True)
    parts = set(args.only.split(","))
    rows = []
    if "false_alarms" in parts:
        chosen = range(len(CLASSES)) if args.classes is None else [int(i) for i in args.classes.split(",")]
        for index in chosen:
            for row in false_alarms(CLASSES[index], args.series, args.seed + index):
                rows.append(row)
                print(json.dumps(row), flush=True)
    if "truth" in parts:
        for index in TRUTH_CLASSES:
            rows.append(truth(CLASSES[index], args.truth_pixels, 20000, args.seed + 2000 + index))
            print(json.dumps(rows[-1]), flush=True)
    if "power" in parts:
        rows += power(BASE, args.power_series, args.seed + 1000)
    if "cost" in parts:
        rows += cost(args.repeat)
    if args.markdown:
        print(markdown(rows))
    if args.figure and any(r["measure"] == "power" for r in rows):
        figure(rows, args.figure)


if __name__ == "__main__":
    main()
