"""Critical values of BFAST Monitor's monitoring tests (strucchange ``mefp``).

* ``"OLS-MOSUM"`` inside strucchange's table (``h`` in {0.25, 0.5, 1}, ``end`` in
  {2, 4, 6, 8, 10}, ``level`` in [0.001, 0.05]): the tabled value, as R. The table ships
  with tscube (``tscube/data/critval_ols_mosum.csv``, strucchange's
  ``monitorMECritvalTable``): simulated (1 - alpha)-quantiles of
  ``sup_{1<t<=end} |B(t) - B(t-h)| / sqrt(2 logPlus(t))`` for a Brownian bridge ``B``
  (``B(t) = W(t) - t W(1)``, extended past 1) on a grid of 1/1000; ``alpha`` between
  table columns is interpolated linearly.
* ``"OLS-MOSUM"`` outside the table (any ``0 < h <= 1``, ``1 < end <= 100``, ``level`` in
  (0, 1)), which R refuses: the same functional simulated here, exactly as strucchange's
  ``monitorMECritvalData`` built the table (same grid, same process), with a seeded,
  thread-count independent generator (:func:`simulate_mosum_statistic`). The simulated
  sample is cached on disk (:func:`cache_dir`), so each new ``(h, end)`` is simulated once
  and serves every level. Accuracy: at the tabled points a simulation of
  ``config.CRITVAL_PATHS`` paths reproduces the table within its Monte Carlo error
  (``tests/test_bfast_critval.py``; docs/bfast_monitor.md gives the figures).
* ``"OLS-CUSUM"``: the root ``c`` of ``2 (Phi(c) - c phi(c)) = 2 - alpha`` found as R finds
  it: Brent's minimiser of ``|2 (Phi(a) - a phi(a)) + alpha - 2|`` on [0, 10] with
  tolerance ``sqrt(eps)`` (R's ``optimize`` in ``mefp.efp``), up to 4e-8 from the exact
  root; ``h`` and ``end`` play no part.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import threading
import time
from functools import lru_cache
from importlib.resources import files
from pathlib import Path

import numpy as np

from ... import config
from ..._jit import jit
from ..._threads import run_tasks

SUPPORTED_H = (0.25, 0.5, 1.0)
SUPPORTED_END = (2, 4, 6, 8, 10)
LEVEL_RANGE = (0.001, 0.05)

#: Monitoring processes (R ``bfastmonitor(type=...)``).
PROCESS_TYPES = ("OLS-MOSUM", "OLS-CUSUM")

#: Grid points per unit of the history size in the simulation (strucchange's ``frequency``).
SIM_FREQUENCY = 1000
#: Largest horizon ``end`` the simulation accepts (its cost grows linearly with ``end``).
MAX_SIM_END = 100
#: Fewest simulated paths beyond the quantile a level may ask for (``level * paths``).
MIN_TAIL_PATHS = 50
_PATHS_PER_STREAM = 500  # each block of paths has its own seeded stream: thread-count independent


@lru_cache(maxsize=1)
def _table() -> dict[tuple[float, int], tuple[np.ndarray, np.ndarray]]:
    text = files("tscube").joinpath("data/critval_ols_mosum.csv").read_text()
    rows = [line.split(",") for line in text.strip().splitlines()[1:]]
    table: dict[tuple[float, int], list[tuple[float, float]]] = {}
    for h, period, one_minus_alpha, functional, critval in rows:
        if functional == "max":
            table.setdefault((float(h), int(period)), []).append((float(one_minus_alpha), float(critval)))
    out = {}
    for key, pairs in table.items():
        pairs.sort()
        out[key] = (np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs]))
    return out


def _as_number(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return value


def in_table(h: float, end: float, level: float) -> bool:
    """Whether strucchange's OLS-MOSUM table covers ``(h, end, level)`` (R accepts it)."""
    return h in SUPPORTED_H and end in SUPPORTED_END and LEVEL_RANGE[0] <= level <= LEVEL_RANGE[1]


def check_process_type(type: str) -> None:
    """Raise ``ValueError`` unless ``type`` is a monitoring process tscube implements."""
    if type not in PROCESS_TYPES:
        raise ValueError(
            f"type must be one of {', '.join(map(repr, PROCESS_TYPES))}; got {type!r} "
            "(R's parameter-based 'RE' and 'ME' processes are not implemented)"
        )


def critical_value(h: float, end: float, level: float, type: str = "OLS-MOSUM") -> float:
    """Critical value of the monitoring test ``type`` for bandwidth ``h``, horizon ``end``
    and significance ``level``: R's value wherever R has one, else simulated (OLS-MOSUM).

    Raises ``ValueError`` for values no test can use (``h`` outside (0, 1], ``end`` outside
    (1, 100], ``level`` outside (0, 1)) and for levels too small for the simulation.
    """
    h = _as_number(h, "h")
    end = _as_number(end, "end")
    level = _as_number(level, "level")
    check_process_type(type)
    if not 0.0 < level < 1.0:
        raise ValueError(f"level = {level:g} (monitoring significance) must lie in (0, 1)")
    if not 0.0 < h <= 1.0:
        raise ValueError(f"h = {h:g} must lie in (0, 1]: the MOSUM window is a fraction of the history")
    if type == "OLS-CUSUM":
        return cusum_critical_value(level)
    if not 1.0 < end <= MAX_SIM_END:
        raise ValueError(f"end = {end:g} must lie in (1, {MAX_SIM_END}] (monitoring horizon in history sizes)")
    if in_table(h, end, level):
        x, y = _table()[(h, int(end))]
        return float(np.interp(1.0 - level, x, y))
    return simulated_critical_value(h, end, level)


# --------------------------------------------------------------------------------------
# OLS-CUSUM: R's optimize() of the boundary-crossing probability
# --------------------------------------------------------------------------------------


_ONE_OVER_SQRT_2PI = 0.398942280401432677939946059934


def _cusum_size_gap(a: float, level: float) -> float:
    """``|2 (Phi(a) - a phi(a)) + level - 2|``: zero at the OLS-CUSUM critical value."""
    cdf = 0.5 * math.erfc(-a / math.sqrt(2.0))
    density = _ONE_OVER_SQRT_2PI * math.exp(-0.5 * a * a)  # as R's dnorm: the same last bit
    return abs(2.0 * (cdf - a * density) + level - 2.0)


def brent_minimum(f, lower: float, upper: float, tol: float) -> float:
    """Brent's minimiser (golden section with parabolic steps) as R's ``optimize`` runs
    it (``Brent_fmin``): same start point, steps and stopping rule, so the same result."""
    golden = (3.0 - math.sqrt(5.0)) * 0.5
    eps = math.sqrt(np.finfo(float).eps)
    a, b = lower, upper
    v = w = x = a + golden * (b - a)
    d = e = 0.0
    fv = fw = fx = f(x)
    tol3 = tol / 3.0
    while True:
        xm = (a + b) * 0.5
        tol1 = eps * abs(x) + tol3
        t2 = tol1 * 2.0
        if abs(x - xm) <= t2 - (b - a) * 0.5:
            return x
        p = q = r = 0.0
        if abs(e) > tol1:  # fit a parabola
            r = (x - w) * (fx - fv)
            q = (x - v) * (fx - fw)
            p = (x - v) * q - (x - w) * r
            q = (q - r) * 2.0
            if q > 0.0:
                p = -p
            else:
                q = -q
            r = e
            e = d
        if abs(p) >= abs(q * 0.5 * r) or p <= q * (a - x) or p >= q * (b - x):  # golden section
            e = (b - x) if x < xm else (a - x)
            d = golden * e
        else:  # parabolic interpolation, not too close to the ends
            d = p / q
            u = x + d
            if u - a < t2 or b - u < t2:
                d = tol1 if x < xm else -tol1
        if abs(d) >= tol1:
            u = x + d
        else:
            u = x + tol1 if d > 0.0 else x - tol1
        fu = f(u)
        if fu <= fx:
            if u < x:
                b = x
            else:
                a = x
            v, w, x = w, x, u
            fv, fw, fx = fw, fx, fu
        else:
            if u < x:
                a = u
            else:
                b = u
            if fu <= fw or w == x:
                v, fv = w, fw
                w, fw = u, fu
            elif fu <= fv or v == x or v == w:
                v, fv = u, fu


@lru_cache(maxsize=64)
def cusum_critical_value(level: float) -> float:
    """OLS-CUSUM critical value for significance ``level``, bit for bit as R computes it."""
    return brent_minimum(lambda a: _cusum_size_gap(a, level), 0.0, 10.0, math.sqrt(np.finfo(float).eps))


# --------------------------------------------------------------------------------------
# OLS-MOSUM beyond the table: simulation of the limiting process
# --------------------------------------------------------------------------------------


@jit()
def _simulate_paths(seed, first, count, frequency, windows, ends, inv_bound, out, w):
    """``count`` paths of one seeded stream: a Wiener process on the grid ``i / frequency``
    (i = 1 .. len(w)), made a Brownian bridge tied at 1; for each window ``h`` (grid steps)
    the running maximum of ``|B(t) - B(t - h)| / sqrt(2 logPlus(t))`` over ``t > 1``,
    recorded at each horizon ``end`` (grid steps, increasing) into ``out[first + r]``."""
    np.random.seed(seed)
    n_steps = w.shape[0]
    scale = 1.0 / math.sqrt(frequency)
    for r in range(count):
        acc = 0.0
        for i in range(n_steps):
            acc += np.random.standard_normal() * scale
            w[i] = acc
        w1 = w[frequency - 1]
        for i in range(n_steps):
            w[i] -= (i + 1) / frequency * w1
        for a in range(windows.shape[0]):
            lag = windows[a]
            best = 0.0
            e = 0
            for i in range(frequency, n_steps):
                best = max(best, abs(w[i] - w[i - lag]) * inv_bound[i])
                if i + 1 == ends[e]:
                    out[first + r, a, e] = best
                    e += 1


@jit(nogil=True)
def _simulate_stream(c, n_streams, seed, n_paths, frequency, windows, ends, inv_bound, out):
    """Stream ``c`` of the ``n_streams`` (a task of :func:`tscube._threads.run_tasks`): its
    :data:`_PATHS_PER_STREAM` paths from its own seed."""
    w = np.empty(ends[-1])
    first = c * _PATHS_PER_STREAM
    count = min(_PATHS_PER_STREAM, n_paths - first)
    _simulate_paths(seed * 1_000_003 + c, first, count, frequency, windows, ends, inv_bound, out, w)


def _simulate(seed: int, n_paths: int, frequency: int, windows: np.ndarray, ends: np.ndarray) -> np.ndarray:
    # libm's log, as the kernels use, not NumPy's vectorised one: the same bits as before
    inv_bound = np.array([1.0 / math.sqrt(2.0 * (math.log(t) if t > math.e else 1.0))
                          for t in ((i + 1) / frequency for i in range(int(ends[-1])))])
    out = np.empty((n_paths, windows.shape[0], ends.shape[0]))
    run_tasks(_simulate_stream, -(-n_paths // _PATHS_PER_STREAM), seed, n_paths, frequency, windows, ends, inv_bound,
              out)
    return out


def simulate_mosum_statistic(h, end, n_paths: int, seed: int, frequency: int = SIM_FREQUENCY) -> np.ndarray:
    """``n_paths`` draws of ``sup_{1<t<=end} |B(t) - B(t-h)| / sqrt(2 logPlus(t))``.

    As strucchange's ``monitorMECritvalData``: ``B(t) = W(t) - t W(1)`` on the grid
    ``t = i / frequency``, the window ``h`` rounded to the grid, every ``h`` and ``end``
    from the same paths. ``h`` and ``end`` are numbers or sequences; returns
    ``(n_paths,)`` for numbers, else ``(n_paths, len(h), len(end))``. Reproducible: paths
    come in blocks of 500, each from its own stream seeded by ``(seed, block)``, so the
    sample does not depend on the number of threads.
    """
    windows = np.rint(np.atleast_1d(np.asarray(h, dtype=float)) * frequency).astype(np.int64)
    ends = np.rint(np.atleast_1d(np.asarray(end, dtype=float)) * frequency).astype(np.int64)
    if windows.min() < 1 or ends.min() <= frequency or np.any(np.diff(ends) <= 0):
        raise ValueError(f"h = {h} and end = {end} leave nothing to simulate on a grid of 1/{frequency}")
    out = _simulate(int(seed), int(n_paths), int(frequency), windows, ends)
    return out[:, 0, 0] if np.ndim(h) == 0 and np.ndim(end) == 0 else out


def cache_dir() -> Path:
    """Where simulated samples are kept: ``config.CRITVAL_CACHE_DIR``, else
    ``$TSCUBE_CACHE_DIR``, else ``$XDG_CACHE_HOME/tscube`` (``~/.cache/tscube``)."""
    chosen = config.CRITVAL_CACHE_DIR or os.environ.get("TSCUBE_CACHE_DIR")
    if chosen:
        return Path(chosen)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tscube"


def _cache_path(h: float, end: float, n_paths: int, seed: int) -> Path:
    key = f"OLS-MOSUM h={h!r} end={end!r} paths={n_paths} seed={seed} frequency={SIM_FREQUENCY}"
    digest = hashlib.sha1(key.encode()).hexdigest()[:16]
    return cache_dir() / f"critval-ols-mosum-{digest}.npy"


#: Samples this process has read or simulated, by cache path: a chunked run calls the
#: public function once per chunk, and a read-only cache folder must not mean a new
#: simulation each time.
_SAMPLES: dict[Path, np.ndarray] = {}


def mosum_sample(h: float, end: float) -> tuple[np.ndarray, float]:
    """The sorted simulated statistic for ``(h, end)`` (``config.CRITVAL_PATHS`` paths, seed
    ``config.CRITVAL_SEED``, read-only) and the seconds its simulation took (0.0 when read
    from the cache). Written atomically, so concurrent runs never read a partial file."""
    n_paths, seed = int(config.CRITVAL_PATHS), int(config.CRITVAL_SEED)
    path = _cache_path(h, end, n_paths, seed)
    if path in _SAMPLES:
        return _SAMPLES[path], 0.0
    try:
        sample = np.load(path)
        if sample.shape == (n_paths,):
            sample.setflags(write=False)
            _SAMPLES[path] = sample
            return sample, 0.0
    except (OSError, ValueError):
        pass
    began = time.perf_counter()
    sample = np.sort(simulate_mosum_statistic(h, end, n_paths, seed))
    seconds = time.perf_counter() - began
    sample.setflags(write=False)
    _SAMPLES[path] = sample
    write_cached(path, sample)
    return sample, seconds


def write_cached(path: Path, array: np.ndarray) -> None:
    """Save ``array`` to the cache file ``path`` atomically (a temporary file of this
    process and thread, renamed into place: a reader never sees half a file); a cache
    folder that cannot be written only loses the file, the values are still right."""
    partial = path.with_suffix(f".{os.getpid()}-{threading.get_ident()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(partial, "wb") as stream:
            np.save(stream, array)
        os.replace(partial, path)
    except OSError:
        with contextlib.suppress(OSError):  # (a full disk: no half file left behind)
            partial.unlink(missing_ok=True)


def quantile_standard_error(sample: np.ndarray, p: float) -> float:
    """Monte Carlo standard error of the empirical ``p``-quantile of ``sample``, distribution
    free: half the spread of the order statistics one binomial standard deviation away."""
    n = sample.size
    spread = math.sqrt(n * p * (1 - p)) / n
    return 0.5 * (np.quantile(sample, min(p + spread, 1.0)) - np.quantile(sample, p - spread))


def simulated_critical_value(h: float, end: float, level: float) -> float:
    """The ``1 - level`` quantile (R's default type 7) of the simulated OLS-MOSUM statistic."""
    n_paths = int(config.CRITVAL_PATHS)
    if level * n_paths < MIN_TAIL_PATHS:
        raise ValueError(
            f"level = {level:g} is too small for a simulated critical value from {n_paths} paths "
            f"(needs level >= {MIN_TAIL_PATHS / n_paths:g}; raise tscube.config.CRITVAL_PATHS)"
        )
    sample, _ = mosum_sample(h, end)
    return float(np.quantile(sample, 1.0 - level))


@jit(inline="always", error_model="numpy")
def process_bound(ratio, critval, cusum):
    """Boundary of the monitoring process at ``ratio`` = t / n (t: 1-based position from
    the history start, n: history size), as R's ``boundary``: OLS-CUSUM
    ``sqrt(x (x - 1) (critval^2 + log(x / (x - 1))))``, OLS-MOSUM
    ``critval sqrt(2 logPlus(x))`` (logPlus = 1 while x <= e)."""
    if cusum:
        return math.sqrt(ratio * (ratio - 1.0) * (critval * critval + math.log(ratio / (ratio - 1.0))))
    return critval * math.sqrt(2.0 * math.log(ratio)) if ratio > math.e else critval * math.sqrt(2.0)
