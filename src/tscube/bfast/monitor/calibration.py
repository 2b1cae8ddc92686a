"""Calibrated critical values (``bfast_monitor(calibrate=True)``): per pixel, the critical
value of R's boundary whose false-alarm probability is ``level`` for that pixel's own
design, under Gaussian i.i.d. errors.

R's critical values come from the limit process of OLS-MOSUM/OLS-CUSUM monitoring with
regressors whose averages settle; a linear trend does not, its estimation error is
extrapolated over the monitoring period and the process drifts, so that stable pixels
cross far more often than ``level`` (docs/bfast_monitor.md). The crossing probability of
a pixel depends only on its design: the regressors at its valid history and monitoring
dates, ``h`` and the process type, not on its values (the process divides by the
history's sigma). This module estimates it by Monte Carlo on *canonical* designs that
match a pixel in what drives it, and interpolates:

* ``n`` (history observations) and ``r = m / n`` (monitoring observations over history
  observations): where the boundary is, how long the process runs, sigma's degrees of
  freedom;
* with a trend, the drift: how far (in history standard deviations of the time) the
  monitoring observations lie from the history's centre, which is what the trend's
  estimation error is multiplied by. A pixel's gaps move it; the canonical design
  matching it has regular history dates and monitoring dates spaced ``s`` times as far
  apart (``stretch``), ``s`` chosen so that the drift at the last MOSUM window (OLS-CUSUM:
  the monitoring period's mean) is the pixel's;
* the model (harmonics, seasonal dummies, trend), ``h``, the process type, and the
  pixel's spacing class (history slots per observation, to the nearest half octave).

Each cell of the grid in ``(n, r, s)`` holds the ``1 - level`` quantiles of the
simulated statistic (``config.CALIBRATION_PATHS`` paths, for a fixed grid of levels),
simulated when first needed and cached on disk beside the simulated critical values
(:func:`tscube.bfast.monitor.critval.cache_dir`); a pixel's critical value is the
interpolation (linear in ``log n``, ``log r``, ``log s``) of its cell's corners. Errors
and costs: docs/bfast_monitor.md, ``benchmarks/calibration.py``.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

import numpy as np
from threadpoolctl import threadpool_limits

from ... import config
from ..._jit import jit
from ..._threads import run_tasks, task_count
from ...timeaxis import TimeAxis
from ..core.design import build_design, n_regressors
from ..core.inputs import kernel_nodata
from .critval import cache_dir, write_cached
from .history import history_first
from .plan import MonitorPlan

logger = logging.getLogger(__name__)

#: History sizes of the grid (observations; beyond its ends the nearest is used: the
#: statistic settles as n grows).
N_GRID = np.array([12, 16, 20, 25, 32, 40, 50, 64, 80, 100, 128, 160, 200, 256, 320, 400, 512, 640, 800, 1024,
                   1280, 1600, 2048])
#: Monitoring over history observations of the grid.
R_GRID = 2.0 ** np.arange(-6.0, 4.01, 0.25)
#: Stretches of the grid (monitoring date spacing over history spacing in the canonical design).
S_GRID = 2.0 ** np.arange(-2.0, 2.01, 0.25)
#: History slots per observation of the canonical designs (a pixel takes the nearest, in log).
SPACING_STEP = 0.5
SPACING_GRID = 2.0 ** np.arange(0.0, 5.01, SPACING_STEP)
#: Levels whose critical values a cell keeps (the ``1 - level`` quantiles).
LEVEL_GRID = np.geomspace(1e-3, 0.5, 120)
#: The fewest simulated paths beyond a quantile for its critical value.
MIN_TAIL_PATHS = 50


@dataclass(frozen=True)
class CalibrationModel:
    """What the null distribution depends on beyond a pixel's ``(n, r, s)`` cell."""

    freq: int
    order: int
    trend: bool
    season: bool
    h: float
    cusum: bool
    spacing: float  # history dates (of the step below) per observation (1: no gaps)
    step: int = 1  # grid slots between consecutive dates of the call (16 for 16-day dates on R's daily grid)

    def key(self) -> str:
        return (f"freq={self.freq} order={self.order} trend={self.trend} season={self.season} h={self.h!r} "
                f"cusum={self.cusum} spacing={self.spacing!r}" + (f" step={self.step}" if self.step != 1 else ""))


def history_slots(n: int, spacing: float, rng: np.random.Generator) -> np.ndarray:
    """Grid slots of the history of one draw of a canonical design: ``n`` dates taken at
    random among ``n * spacing`` consecutive slots (a regular series that lost
    ``1 - 1/spacing`` of its dates at random, as a cloudy pixel), the first and last slot
    among them (the history spans what its spacing says)."""
    span = max(n, round(n * spacing))
    history = np.sort(rng.choice(span, size=n, replace=False)) if span > n else np.arange(n)
    history[[0, -1]] = 0, span - 1
    return history.astype(np.int64)


def monitoring_slots(after: int, m: int, stretch: float, spacing: float, rng: np.random.Generator) -> np.ndarray:
    """Grid slots of the ``m`` monitoring dates of one draw of a canonical design: among the
    ``m * stretch * spacing`` slots (at least ``m``) from slot ``after``."""
    reach = max(m, round(m * stretch * spacing))
    return after + (np.sort(rng.choice(reach, size=m, replace=False)) if reach > m else np.arange(m, dtype=np.int64))


def drift_coefficients(n, m, w, spacing: float, cusum: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(A, B)``: the canonical design's drift at stretch ``s`` is ``A + B s`` (before
    rounding): the distance of the last MOSUM window's mean date (OLS-CUSUM: the monitoring
    dates' mean) from the history's mean date, in history standard deviations. Arrays of
    ``n``, ``m``, ``w`` (window) in, arrays out."""
    with np.errstate(divide="ignore", invalid="ignore"):  # NaN where n < 2 or w = 0: no calibration
        return _drift_coefficients(*(np.asarray(v, dtype=np.float64) for v in (n, m, w)), spacing, cusum)


def _drift_coefficients(n, m, w, spacing, cusum):
    sd = spacing * np.sqrt((n * n - 1.0) / 12.0)
    centre = spacing * (n - 1.0) / 2.0
    if cusum:
        return (spacing * (n - 1.0) - centre) / sd, spacing * (m + 1.0) / 2.0 / sd
    in_monitoring = np.minimum(w, m)
    in_history = w - in_monitoring
    history_part = spacing * in_history * (2.0 * n - in_history - 1.0) / 2.0  # slots n - in_history .. n - 1
    steps = (m - in_monitoring + 1.0 + m) * in_monitoring / 2.0  # steps of the window's monitoring dates
    mean = (history_part + in_monitoring * spacing * (n - 1.0)) / w
    return (mean - centre) / sd, spacing * steps / w / sd


def canonical_designs(model: CalibrationModel, n: int, m: int, stretches, rng: np.random.Generator,
                      monitoring_seed: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """One draw of the canonical dates at each of ``stretches``: the design of the history
    alone ``(n, k)`` (the model's columns; drawn from ``rng``, redrawn while it cannot fit
    the model, at most 100 times), and the design matrices ``(n + m, k)`` of that history
    followed by monitoring dates drawn from a generator seeded with ``monitoring_seed`` at
    each stretch (the same draws, spread over their stretch's reach)."""
    for attempt in range(100):  # the last draws without gaps in the history (they fit when any can)
        history = model.step * history_slots(n, model.spacing if attempt < 80 else 1.0, rng)
        X = _model_design(model, history)
        if np.linalg.matrix_rank(X) == X.shape[1]:
            break
    else:
        raise ValueError(f"no canonical design of {n} history dates can fit the model ({model.key()})")
    after = int(history[-1]) // model.step + 1
    return X, [_model_design(model, np.concatenate([history, model.step * monitoring_slots(
        after, m, stretch, model.spacing, np.random.default_rng(monitoring_seed))])) for stretch in stretches]


def _model_design(model: CalibrationModel, slots: np.ndarray) -> np.ndarray:
    axis = TimeAxis(time=2000.0 + slots / model.freq, slot=slots, freq=model.freq)
    return build_design(axis, model.order, model.trend, model.season).matrix


def simulate_statistic(X: np.ndarray, n: int, h: float, cusum: bool, n_paths: int, seed: int) -> np.ndarray:
    """``n_paths`` draws of the monitoring statistic under no break (i.i.d. N(0, 1) errors;
    the process divides by sigma, so any scale gives the same) for the design ``X``
    (history rows first, ``n`` of them): OLS-MOSUM ``max_j |process_j| / sqrt(2 logPlus(x_j))``,
    a break at critical value ``c`` where it exceeds ``c``; OLS-CUSUM
    ``max_j process_j^2 / (x_j (x_j - 1)) - log(x_j / (x_j - 1))``, a break where it exceeds
    ``c^2``; ``x_j = (n + j + 1) / n`` at monitoring observation ``j``. The residuals,
    sigma (``n - k`` degrees of freedom) and windows are the engines'."""
    return simulate_statistics([X], n, h, cusum, n_paths, seed)[0]


def simulate_statistics(designs: list[np.ndarray], n: int, h: float, cusum: bool, n_paths: int, seed: int,
                        history: np.ndarray | None = None) -> np.ndarray:
    """:func:`simulate_statistic` of each of ``designs`` (rows ``(n + m, k)`` each, the same
    history rows up to a change of basis of the columns, as the canonical designs of one
    draw at several stretches), on the same draws of the errors (common random numbers:
    the errors are drawn once); ``(len(designs), n_paths)``. ``history`` (``(n, k)``, by
    default the first design's first ``n`` rows): the history rows whose basis the draws
    use, so that each design's statistics do not depend on the others'.

    The history errors are not drawn one by one where they need not be
    (:func:`_history_reduction`): of the history, the statistic sees the coefficients'
    error, the residual sum of squares and, with OLS-MOSUM, the last ``floor(h n) - 1``
    residuals (the first windows reach back into the history). Those are drawn from their
    exact joint distribution: ``k`` normals for the part of the coefficients' error that
    the earlier history errors make, one chi-square for the rest of their squares, and
    the last errors themselves."""
    total, k = designs[0].shape
    m = total - n
    w = int(np.floor(h * n))
    bases = [_orthonormal_basis(X, n) for X in designs]
    basis = _orthonormal_basis(designs[0][:n] if history is None else history, n)
    front, lower = _history_reduction(basis, n, w, cusum)
    tail = n - front  # history rows whose errors are drawn (all of them when nothing reduces)
    drawn = basis[front:]  # their rows in the orthonormal basis (every design's, to rounding): tail of them
    extra = k if front else 0  # normals of the earlier history's part of the coefficients' error
    x = (n + np.arange(m) + 1.0) / n
    if cusum:
        scale, shift = x * (x - 1.0), np.log(x / (x - 1.0))
    else:
        inverse_unit = 1.0 / np.sqrt(2.0 * np.where(x > np.e, np.log(np.maximum(x, np.e)), 1.0))
    # each process value is a sum of residuals (OLS-MOSUM: a window's; OLS-CUSUM: all up to
    # the date), residuals are errors less the fit: the process is the errors' sums less
    # the coefficients' error times the same sums of the design's rows. The errors' sums
    # are the same for every design; each design has its ``(m, k)`` sums of rows.
    row_sums = [_process_sums(np.concatenate([drawn, Z[n:]]), tail, m, w, cusum) for Z in bases]
    rng = np.random.default_rng(seed)
    out = np.empty((len(designs), n_paths))
    chunk = int(np.clip(_CHUNK_VALUES // (extra + tail + m + 1), 16, 4096))
    for begin in range(0, n_paths, chunk):
        count = min(chunk, n_paths - begin)
        draws = rng.standard_normal((count, extra + tail + m))
        errors = draws[:, extra:]  # the last history rows', then the monitoring rows'
        # the coefficients' error (orthonormal basis: Z_H' e_H) and the history's RSS
        delta = errors[:, :tail] @ drawn
        squares = np.einsum("ij,ij->i", errors[:, :tail], errors[:, :tail])
        if front:
            delta += draws[:, :extra] @ lower.T
            squares += np.einsum("ij,ij->i", draws[:, :extra], draws[:, :extra])
            if front > k:
                squares += rng.chisquare(front - k, count)
        rss = np.maximum(squares - np.einsum("ij,ij->i", delta, delta), 0.0)
        root = np.sqrt(rss * (n / (n - k)))  # sigma sqrt(n)
        error_sums = _process_sums(errors, tail, m, w, cusum, axis=1)
        for d, sums in enumerate(row_sums):
            process = error_sums - delta @ sums.T
            if cusum:
                process /= root[:, None]
                np.multiply(process, process, out=process)
                process /= scale
                process -= shift
                out[d, begin:begin + count] = np.max(process, axis=1)
            else:
                np.abs(process, out=process)
                process *= inverse_unit
                out[d, begin:begin + count] = np.max(process, axis=1) / root
    return out


def _process_sums(values: np.ndarray, tail: int, m: int, w: int, cusum: bool, axis: int = 0) -> np.ndarray:
    """The sums of ``values`` (2-d; along ``axis``: ``tail`` history rows, then ``m``
    monitoring rows) that make the process at each monitoring row (``m`` along ``axis``):
    OLS-MOSUM the ``w`` rows up to it (the first windows reach into the history rows),
    OLS-CUSUM every row up to it."""
    shape = list(values.shape)
    shape[axis] += 1
    sums = np.zeros(shape)
    np.cumsum(values, axis=axis, out=sums[1:] if axis == 0 else sums[:, 1:])

    def rows(first):
        return sums[first:first + m] if axis == 0 else sums[:, first:first + m]

    return rows(tail + 1) if cusum else rows(tail + 1) - rows(tail + 1 - w)


#: Values (paths x rows) per chunk of :func:`simulate_statistics`: large enough that the threads of
#: :func:`_cells` rarely wait for the GIL between NumPy calls (smaller chunks, in L2, ran slower on two threads).
_CHUNK_VALUES = 200_000


def _orthonormal_basis(X: np.ndarray, n: int) -> np.ndarray:
    """The design ``X`` in the basis whose history columns (its first ``n`` rows) are
    orthonormal: ``X R^{-1}`` with ``R`` the QR factor of the history with a positive
    diagonal (unique: the same for designs whose histories span the same columns). The
    same fits, well conditioned whatever the regressors' scales."""
    _, upper = np.linalg.qr(X[:n])
    upper *= np.where(np.diag(upper) < 0.0, -1.0, 1.0)[:, None]
    return np.linalg.solve(upper.T, X.T).T


def _history_reduction(Z: np.ndarray, n: int, w: int, cusum: bool) -> tuple[int, np.ndarray | None]:
    """``(front, lower)`` for :func:`simulate_statistics` of the design ``Z``
    (:func:`_orthonormal_basis`): the history's first ``front`` rows, whose errors ``e_f``
    need not be drawn, and ``lower``, the Cholesky factor of their Gram ``Z_f' Z_f``. The
    statistic sees ``e_f`` only through ``Z_f' e_f`` (``lower z`` for ``z ~ N(0, I_k)``) and
    ``|e_f|^2`` (``|z|^2`` plus an independent chi-square of ``front - k`` degrees of
    freedom); OLS-MOSUM's windows also see the last ``w - 1`` history residuals (drawn),
    OLS-CUSUM the sum of the history's residuals (0 when the constant is in the history's
    span). ``front`` is 0 where this does not hold or the earlier rows cannot fit the
    model alone (e.g. a season missing there)."""
    k = Z.shape[1]
    front = n if cusum else n - max(w - 1, 0)
    if front < k:
        return 0, None
    if cusum:
        ones = np.ones(n)
        if not np.allclose(Z[:n] @ (Z[:n].T @ ones), ones, rtol=0.0, atol=1e-9):
            return 0, None
    later = Z[front:n]
    try:
        lower = np.linalg.cholesky(np.eye(k) - later.T @ later)
    except np.linalg.LinAlgError:
        return 0, None
    if not np.min(np.diag(lower)) > 1e-6:  # the earlier rows (nearly) miss a direction of the model
        return 0, None
    return front, lower


#: Canonical designs drawn per cell (each gets an equal share of the paths): a cell's
#: distribution is that of the designs of its class, not of one draw's accidents.
DESIGNS_PER_CELL = 20
#: Version of the cells' recipe, in their cache key (a new recipe never reads old cells).
RECIPE = 3


def n_grid(model: CalibrationModel) -> np.ndarray:
    """The history sizes of the model's grid: every size from ``k + 2`` observations (two
    degrees of freedom for sigma; the engines need ``n > k``) to :data:`N_GRID`'s third
    value, where a few observations more or less change the critical value by orders of
    magnitude, then :data:`N_GRID`."""
    k = n_regressors(model.freq, model.order, model.trend, model.season)
    dense = np.arange(k + 2, max(k + 2, int(N_GRID[2])) + 1)
    return np.unique(np.concatenate([dense, N_GRID[N_GRID > k + 2]])).astype(np.int64)


def _cell_path(model: CalibrationModel, n: int, ri: int, si: int):
    """Cache file of the cell ``(n, ri, si)`` and its key (the recipe, the model, the cell,
    the paths, designs and seed: whatever its values depend on)."""
    key = (f"recipe={RECIPE} {model.key()} n={n} r={R_GRID[ri]!r} s={S_GRID[si]!r} "
           f"paths={int(config.CALIBRATION_PATHS)} designs={DESIGNS_PER_CELL} seed={int(config.CRITVAL_SEED)}")
    return cache_dir() / "calibration" / f"{hashlib.sha1(key.encode()).hexdigest()[:20]}.npy", key


def _row_seed(model: CalibrationModel, n: int, ri: int) -> int:
    """The seed of the cells of one ``(n, ri)`` (:func:`simulate_cells`), from what their
    values depend on but the stretch."""
    key = (f"recipe={RECIPE} {model.key()} n={n} r={R_GRID[ri]!r} paths={int(config.CALIBRATION_PATHS)} "
           f"designs={DESIGNS_PER_CELL} seed={int(config.CRITVAL_SEED)}")
    return int.from_bytes(hashlib.sha1(key.encode()).digest()[:8], "little")


#: Cells this process has read or simulated, by ``(model, n, ri, si, paths, seed)``.
_CELLS: dict = {}


def simulate_cells(model: CalibrationModel, n: int, m: int, stretches, n_paths: int, seed: int) -> np.ndarray:
    """``n_paths`` draws of the statistic (:func:`simulate_statistics`) over
    :data:`DESIGNS_PER_CELL` draws of the canonical design ``(n, m)`` at each of
    ``stretches``, ``(len(stretches), n_paths)``. The cells of one ``(n, r)`` share their
    draws (the history, the monitoring dates spread over each stretch's reach, the errors):
    common random numbers, drawn once, and a cell's values do not depend on which others
    it is simulated with."""
    rng = np.random.default_rng(seed)
    shares = np.diff(np.linspace(0, n_paths, DESIGNS_PER_CELL + 1).astype(np.int64))
    samples = []
    for share in shares:
        history, designs = canonical_designs(model, n, m, stretches, rng, int(rng.integers(2**63)))
        samples.append(simulate_statistics(designs, n, model.h, model.cusum, int(share), int(rng.integers(2**63)),
                                           history=history))
    return np.concatenate(samples, axis=1)


def row_values(model: CalibrationModel, n: int, ri: int, sis) -> list[np.ndarray]:
    """The critical values of the grid cells ``(n, ri, si)`` for each of ``sis`` at the
    levels of :data:`LEVEL_GRID` (NaN below what ``config.CALIBRATION_PATHS`` can tell);
    simulated once (those of one ``(n, ri)`` together, :func:`simulate_cells`), then read
    from the cache."""
    out = {}
    for si in sis:
        memory_key = _cell_key(model, n, ri, si)
        known = _CELLS.get(memory_key)
        if known is None:
            try:
                values = np.load(_cell_path(model, n, ri, si)[0])
                if values.shape == LEVEL_GRID.shape:
                    _CELLS[memory_key] = known = values
            except (OSError, ValueError):
                pass
        if known is not None:
            out[si] = known
    missing = [si for si in sis if si not in out]
    if missing:
        n_paths = int(config.CALIBRATION_PATHS)
        m = max(1, round(float(R_GRID[ri]) * n))
        stretches = [S_GRID[si] if model.trend else 1.0 for si in missing]
        began = time.perf_counter()
        try:
            samples = simulate_cells(model, n, m, stretches, n_paths, _row_seed(model, n, ri))
        except ValueError:  # no design of this size fits the model: no pixel's does (SINGULAR_DESIGN)
            samples = np.full((len(missing), n_paths), np.nan)
        with _SECONDS_LOCK:
            SIMULATION_SECONDS[0] += time.perf_counter() - began
        for si, sample in zip(missing, samples):
            values = np.quantile(sample, 1.0 - LEVEL_GRID)
            if model.cusum:
                values = np.sqrt(np.maximum(values, 0.0))
            values[LEVEL_GRID * n_paths < MIN_TAIL_PATHS] = np.nan
            values.setflags(write=False)
            _CELLS[_cell_key(model, n, ri, si)] = out[si] = values
            write_cached(_cell_path(model, n, ri, si)[0], values)
    return [out[si] for si in sis]


def _bracket(grid: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lower grid indices and the interpolation weights, in log, of ``values`` (clamped to
    the grid)."""
    g = np.log(grid)
    v = np.clip(np.log(values), g[0], g[-1])
    lower = np.clip(np.searchsorted(g, v, side="right") - 1, 0, len(g) - 2)
    return lower, (v - g[lower]) / (g[lower + 1] - g[lower])


#: Pixels per block of :func:`_features_kernel`.
_FEATURE_BLOCK = 64


@jit(nogil=True, error_model="numpy")
def _features_kernel(task, n_tasks, values, nodata, has_nodata, first, begins, slots, h, cusum, n_out, m_out,
                     drift_out, spacing_out):
    """:func:`pixel_features` over blocks of :data:`_FEATURE_BLOCK` pixels (task ``task``
    of ``n_tasks``: a range of blocks), the pixels of a block in the inner loops
    (contiguous rows of each date, so they vectorise): per start, a forward pass over the
    dates counts the history and monitoring observations and sums their dates, a
    backward one (OLS-MOSUM) the dates of the last MOSUM window, until every pixel's is
    full."""
    T, P = values.shape
    S = begins.shape[0]
    block = _FEATURE_BLOCK
    n_blocks = (P + block - 1) // block
    for b in range(task * n_blocks // n_tasks, (task + 1) * n_blocks // n_tasks):
        p0 = b * block
        width = min(P, p0 + block) - p0
        valid = np.empty((T, width), dtype=np.float64)  # 1.0 / 0.0: sums without branches
        for t in range(T):
            for q in range(width):
                v = np.float64(values[t, p0 + q])
                valid[t, q] = 1.0 if (v == v and abs(v) != np.inf and not (has_nodata and v == nodata)) else 0.0
        n = np.empty(width)
        total = np.empty(width)
        squares = np.empty(width)
        low = np.empty(width)
        high = np.empty(width)
        m = np.empty(width)
        reach = np.empty(width)
        window = np.empty(width)
        taken = np.empty(width)
        for s in range(S):
            begin = begins[s]
            lo = begin
            for q in range(width):
                lo = min(lo, first[s, p0 + q])
                n[q] = 0.0
                total[q] = 0.0
                squares[q] = 0.0
                low[q] = np.inf
                high[q] = -np.inf
                m[q] = 0.0
                reach[q] = 0.0
                taken[q] = 0.0
            for t in range(lo, begin):
                tau = np.float64(slots[t])
                for q in range(width):
                    ok = valid[t, q] if t >= first[s, p0 + q] else 0.0
                    n[q] += ok
                    total[q] += ok * tau
                    squares[q] += ok * tau * tau
                    low[q] = min(low[q], tau if ok > 0.0 else np.inf)
                    high[q] = max(high[q], tau if ok > 0.0 else -np.inf)
            for t in range(begin, T):
                tau = np.float64(slots[t])
                for q in range(width):
                    m[q] += valid[t, q]
                    reach[q] += valid[t, q] * tau  # OLS-CUSUM: the monitoring dates' sum
            if cusum:
                for q in range(width):
                    window[q] = m[q]
                    taken[q] = m[q]
            else:  # the last floor(h n) valid dates, history ones included
                for q in range(width):
                    window[q] = math.floor(h * n[q])
                    reach[q] = 0.0
                remaining = width
                t = T - 1
                while t >= lo and remaining > 0:
                    tau = np.float64(slots[t])
                    remaining = 0
                    for q in range(width):
                        ok = valid[t, q] if t >= first[s, p0 + q] else 0.0
                        take = ok if taken[q] < window[q] else 0.0
                        reach[q] += take * tau
                        taken[q] += take
                        remaining += taken[q] < window[q]
                    t -= 1
            for q in range(width):
                p = p0 + q
                n_out[s, p] = np.int64(n[q])
                m_out[s, p] = np.int64(m[q])
                if n[q] == 0.0:
                    drift_out[s, p] = np.nan
                    spacing_out[s, p] = np.nan
                    continue
                mean = total[q] / n[q]
                sd = math.sqrt(max(squares[q] / n[q] - mean * mean, 0.0))
                spacing_out[s, p] = (high[q] - low[q]) / max(n[q] - 1.0, 1.0)
                drift_out[s, p] = (reach[q] / max(taken[q], 1.0) - mean) / sd if sd > 0 else np.nan


def pixel_features(values: np.ndarray, nodata, first: np.ndarray, begins: np.ndarray, slots: np.ndarray, h: float,
                   cusum: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(n, m, drift, spacing)``, each ``(S, P)``, of the pixels of ``values`` ``(T, P)``
    for each monitoring start (first date of each pixel's history ``first`` ``(S, P)``,
    first monitoring date ``begins`` ``(S,)``): history observations, monitoring
    observations, the drift of the last MOSUM window's mean date (OLS-CUSUM: the monitoring
    dates' mean) from the history's mean date in history standard deviations (dates as grid
    slots), and the history's slots per observation."""
    S, P = first.shape
    n, m = np.zeros((S, P), np.int64), np.zeros((S, P), np.int64)
    drift, spacing = np.full((S, P), np.nan), np.full((S, P), np.nan)
    nodata_value, has_nodata = kernel_nodata(values, nodata)
    run_tasks(_features_kernel, task_count(-(-P // _FEATURE_BLOCK)), values, nodata_value, has_nodata,
              np.ascontiguousarray(first, dtype=np.int64), np.ascontiguousarray(begins, dtype=np.int64),
              np.ascontiguousarray(slots, dtype=np.int64), float(h), bool(cusum), n, m, drift, spacing)
    return n, m, drift, spacing


def spacing_class(spacing: np.ndarray) -> np.ndarray:
    """The :data:`SPACING_GRID` value nearest (in log) to each pixel's history slots per
    observation (1 where there is none)."""
    spacing = np.where(np.isfinite(spacing) & (spacing >= 1.0), spacing, 1.0)
    index = np.rint(np.log2(np.clip(spacing, SPACING_GRID[0], SPACING_GRID[-1])) / SPACING_STEP).astype(np.int64)
    return SPACING_GRID[index]


def calibrated_critvals(model: CalibrationModel, level: float, n: np.ndarray, m: np.ndarray, drift: np.ndarray,
                        spacing: np.ndarray) -> np.ndarray:
    """The critical value of each pixel (arrays of its ``n``, ``m``, ``drift`` and
    ``spacing``, see :func:`pixel_features`) at ``level``, for ``model`` (its ``spacing``
    is replaced by the :func:`spacing_class` of each pixel's spacing over the model's
    ``step``); NaN where a pixel has no history
    or monitoring to calibrate for (its status says why)."""
    n_paths = int(config.CALIBRATION_PATHS)
    # the interpolation reads the grid level below ``level``: it needs its tail paths too
    reachable = LEVEL_GRID[LEVEL_GRID * n_paths >= MIN_TAIL_PATHS]
    lowest = float(reachable[0]) if reachable.size else math.inf
    if level < lowest:
        raise ValueError(f"level = {level:g} is too small for calibrated critical values from {n_paths} simulated "
                         f"paths (needs level >= {lowest:.4g}; raise tscube.config.CALIBRATION_PATHS)")
    if not LEVEL_GRID[0] <= level <= LEVEL_GRID[-1]:
        raise ValueError(f"calibrated critical values are for levels {LEVEL_GRID[0]:g} to {LEVEL_GRID[-1]:g}, "
                         f"got {level:g}")
    n = np.asarray(n, dtype=np.int64)
    m = np.asarray(m, dtype=np.int64)
    out = np.full(n.shape, np.nan)
    grid = n_grid(model)
    usable = (n > grid[0] - 2) & (m >= 1) & (np.floor(model.h * n) >= 2)  # the engines' TOO_FEW_HISTORY
    drift = np.asarray(drift, dtype=np.float64)
    classes = spacing_class(np.asarray(spacing, dtype=np.float64) / model.step)
    for value in np.unique(classes[usable]):
        chosen = usable & (classes == value)
        out[chosen] = _interpolate(replace(model, spacing=float(value)), grid, level, n[chosen], m[chosen],
                                   drift[chosen])
    return out


def _interpolate(model: CalibrationModel, grid: np.ndarray, level: float, n: np.ndarray, m: np.ndarray,
                 drift: np.ndarray) -> np.ndarray:
    """:func:`calibrated_critvals` of pixels of one spacing class: the cells at the corners
    of each pixel's ``(log n, log r, log s)``, interpolated linearly."""
    nu, mu = n.astype(np.float64), m.astype(np.float64)
    n_lower, n_weight = _bracket(grid.astype(np.float64), nu)
    r_lower, r_weight = _bracket(R_GRID, mu / nu)
    if model.trend:  # the stretch whose canonical drift is the pixel's
        a, b = drift_coefficients(nu, mu, np.floor(model.h * nu), model.spacing, model.cusum)
        with np.errstate(divide="ignore", invalid="ignore"):
            stretch = (drift - a) / b
        # (a drift below every canonical design's, e.g. a long gap inside the history: the
        # lowest stretch, the nearest design)
        stretch = np.clip(np.where(np.isfinite(stretch), stretch, 1.0), S_GRID[0], S_GRID[-1])
        s_lower, s_weight = _bracket(S_GRID, stretch)
    else:  # no drift: the cells of stretch 1
        s_lower = np.full(nu.size, int(np.argmin(np.abs(S_GRID - 1.0))))
        s_weight = np.zeros(nu.size)
    level_lower, level_weight = _bracket(LEVEL_GRID, np.array([level]))
    # the window of floor(h n) observations: its share u of the history moves the last
    # window's variance u + u^2 (1 + drift^2) (in sigma^2 units) between a pixel and the
    # cells, whose critical values scale with its square root
    d2 = 1.0 + (np.where(np.isfinite(drift), drift, 0.0) ** 2 if model.trend else 0.0)

    def window_variance(size):
        u = np.floor(model.h * size) / size
        return u + u * u * d2

    pixel_variance = window_variance(nu)
    corners = [(dn, dr, ds) for dn in (0, 1) for dr in (0, 1) for ds in ((0, 1) if model.trend else (0,))]
    codes = [((n_lower + dn) * len(R_GRID) + r_lower + dr) * len(S_GRID) + s_lower + ds for dn, dr, ds in corners]
    used = np.zeros(len(grid) * len(R_GRID) * len(S_GRID), dtype=bool)  # the grid's cells, flat
    for code in codes:
        used[code] = True
    needed = np.flatnonzero(used)
    table = np.full(used.size, np.nan)  # each needed cell's critical value at the level
    table[needed] = [(1 - level_weight[0]) * at[level_lower[0]] + level_weight[0] * at[level_lower[0] + 1]
                     for at in _cells(model, grid, needed.tolist())]
    result = np.zeros(nu.size)
    for (dn, dr, ds), code in zip(corners, codes):
        weight = ((n_weight if dn else 1 - n_weight) * (r_weight if dr else 1 - r_weight)
                  * ((s_weight if ds else 1 - s_weight) if model.trend else 1.0))
        scale = 1.0 if model.cusum else np.sqrt(pixel_variance / window_variance(grid[n_lower + dn].astype(np.float64)))
        result += weight * table[code] * scale
    return result


def _cells(model: CalibrationModel, grid: np.ndarray, codes: list[int]) -> list[np.ndarray]:
    """The critical values (:func:`row_values`) of the cells ``codes`` (``(ni * len(R_GRID)
    + ri) * len(S_GRID) + si``), those not cached simulated a row ``(n, ri)`` at a time on a
    thread per core, each with a single-threaded BLAS (NumPy's generators and matrix
    products release the GIL; the products are too small for BLAS's own threads, which
    would only compete with the pool's). Each row has its own seed: the values do not
    depend on the order."""
    cells = [_cell_of(grid, code) for code in codes]
    rows: dict = {}
    for n, ri, si in cells:
        rows.setdefault((n, ri), []).append(si)
    missing = {row: sis for row, sis in rows.items()
               if any(_CELLS.get(_cell_key(model, *row, si)) is None for si in sis)}
    began, simulated = time.perf_counter(), SIMULATION_SECONDS[0]
    if missing:
        # one simulation at a time in the process: threadpool_limits is process-wide, and
        # the same BLAS thread count for every cell (its sums' order: bit-identical values)
        with _SIMULATION_LOCK, threadpool_limits(limits=1, user_api="blas"):
            with ThreadPoolExecutor(max_workers=min(len(missing), os.cpu_count() or 1)) as pool:
                list(pool.map(lambda row: row_values(model, *row, missing[row]), list(missing)))
    out = [row_values(model, n, ri, [si])[0] for n, ri, si in cells]
    if SIMULATION_SECONDS[0] > simulated:
        logger.info("calibrated critical values: %d table cells read or simulated in %.1f s (simulated once, then "
                    "read from %s)", sum(map(len, missing.values())), time.perf_counter() - began,
                    cache_dir() / "calibration")
    return out


def _cell_of(grid: np.ndarray, code: int) -> tuple[int, int, int]:
    """``(n, ri, si)`` of the flat cell index ``code`` (see :func:`_cells`)."""
    ni, rest = divmod(code, len(R_GRID) * len(S_GRID))
    ri, si = divmod(rest, len(S_GRID))
    return int(grid[ni]), ri, si


def _cell_key(model: CalibrationModel, n: int, ri: int, si: int) -> tuple:
    """The key of a cell in :data:`_CELLS` (its values depend on the paths and the seed)."""
    return model, n, ri, si, int(config.CALIBRATION_PATHS), int(config.CRITVAL_SEED)


#: Seconds this process has spent simulating cells, summed over the threads that did
#: (benchmarks/calibration.py reports the one-off cost as wall time).
SIMULATION_SECONDS = [0.0]
_SECONDS_LOCK = threading.Lock()
_SIMULATION_LOCK = threading.Lock()


def model_of(plan: MonitorPlan) -> CalibrationModel:
    """The calibration model of a :class:`~tscube.bfast.monitor.plan.MonitorPlan` (spacing
    1: each pixel's class replaces it). Its step is the dates' usual spacing on the grid
    (the median; 1 for a regular series with ``freq``): the canonical designs thin a
    regular series of that step, as clouds thin regular acquisitions."""
    design = plan.design
    slots = np.asarray(plan.axis.slot)
    step = max(1, int(round(float(np.median(np.diff(slots)))))) if slots.size > 1 else 1
    return CalibrationModel(freq=int(plan.axis.freq), order=int(design.order), trend="trend" in design.names,
                            season=design.season_level is not None, h=float(plan.h), cusum=bool(plan.cusum),
                            spacing=1.0, step=step)


def calibrate_plan(values: np.ndarray, plan: MonitorPlan, level: float) -> MonitorPlan:
    """``plan`` with each pixel's calibrated critical value per start (``critvals``) and the
    history selection they were calibrated on (``history_first``, conditionally on it:
    the ROC/BP selection is taken as given), for the pixels ``values`` ``(T, P)``."""
    selection = history_first(values, plan)
    n, m, drift, spacing = pixel_features(values, plan.nodata, selection[0], plan.monitor_begin, plan.axis.slot,
                                          plan.h, plan.cusum)
    critvals = calibrated_critvals(model_of(plan), level, n, m, drift, spacing)
    return replace(plan, critvals=critvals, history_first=selection)
