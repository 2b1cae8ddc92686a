"""Synthetic NDVI-like image cubes with clouds and planted deforestation breaks."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Table I of the BFAST GPU paper (M pixels, N dates, n history dates, NaN fraction),
#: plus a Peru(Large)-sized cube and a small demo. ``shape`` is the pixel grid (rows, cols).
PRESETS: dict[str, dict] = {
    "D1": dict(shape=(128, 128), n_dates=1024, n_history=512, nan_fraction=0.50),
    "D2": dict(shape=(128, 128), n_dates=512, n_history=256, nan_fraction=0.50),
    "D3": dict(shape=(128, 256), n_dates=512, n_history=256, nan_fraction=0.50),
    "D4": dict(shape=(128, 256), n_dates=256, n_history=128, nan_fraction=0.50),
    "D5": dict(shape=(256, 256), n_dates=256, n_history=128, nan_fraction=0.50),
    "D6": dict(shape=(128, 128), n_dates=1024, n_history=256, nan_fraction=0.75),
    "peru_small": dict(shape=(334, 334), n_dates=235, n_history=113, nan_fraction=0.69),
    "peru_large": dict(shape=(4458, 3678), n_dates=488, n_history=235, nan_fraction=0.69),
    "demo": dict(shape=(120, 160), n_dates=230, n_history=138, nan_fraction=0.35),
}


@dataclass
class SyntheticCube:
    """A generated cube and what was planted in it.

    Attributes
    ----------
    data : ndarray, shape (T, rows, cols)
        NDVI-like values; NaN where "clouds" hide the surface.
    dates : ndarray of datetime64[D], shape (T,)
        16-day composite dates (23 per year, day of year 1, 17, ..., 353): pass ``freq=23``.
    start : numpy.datetime64
        First date of the monitoring period (date index ``n_history``).
    changed : ndarray of bool, shape (rows, cols)
        Pixels with a planted break.
    change_time : ndarray of float, shape (rows, cols)
        Decimal-year time of the planted break (NaN where none).
    change_index : ndarray of int, shape (rows, cols)
        Date index of the planted break (-1 where none).
    change_magnitude : ndarray of float, shape (rows, cols)
        Size of the planted step (negative: vegetation loss; 0 where none).
    freq : int
        Observations per year (23).
    """

    data: np.ndarray
    dates: np.ndarray
    start: np.datetime64
    changed: np.ndarray
    change_time: np.ndarray
    change_index: np.ndarray
    change_magnitude: np.ndarray
    freq: int = 23

    @property
    def time(self) -> np.ndarray:
        """Decimal-year time of each date (the 16-day rule, as ``freq=23`` uses)."""
        years = self.dates.astype("datetime64[Y]")
        doy = (self.dates - years.astype("datetime64[D]")).astype(np.int64)
        return years.astype(np.int64) + 1970 + doy / 16.0 / 23.0


def composite_dates(n_dates: int, first_year: int = 2000) -> np.ndarray:
    """``n_dates`` MODIS-like 16-day composite dates (day of year 1, 17, ..., 353)."""
    index = np.arange(n_dates)
    years = first_year + index // 23
    day = (index % 23) * 16
    return (years - 1970).astype("datetime64[Y]").astype("datetime64[D]") + day


def _plant_clearings(rng, rows, cols, fraction, n_history, n_monitor, magnitude_range):
    """Deforestation-like patches: discs of pixels sharing a break date and step size.

    Discs are added until they cover ``fraction`` of the grid; each has its date in the
    first three quarters of the monitoring period.
    """
    changed = np.zeros((rows, cols), dtype=bool)
    index = np.full((rows, cols), -1, dtype=np.int64)
    magnitude = np.zeros((rows, cols))
    target = int(round(fraction * rows * cols))
    yy, xx = np.ogrid[:rows, :cols]
    max_radius = max(1.0, 0.08 * min(rows, cols))
    while np.count_nonzero(changed) < target:
        cy, cx = rng.integers(0, rows), rng.integers(0, cols)
        radius = rng.uniform(1.0, max_radius)
        disc = ((yy - cy) ** 2 + (xx - cx) ** 2 <= radius**2) & ~changed
        changed |= disc
        index[disc] = n_history + rng.integers(0, max(1, (3 * n_monitor) // 4))
        magnitude[disc] = rng.uniform(*magnitude_range)
    return changed.reshape(-1), index.reshape(-1), magnitude.reshape(-1)


def make_cube(
    preset: str = "demo",
    *,
    shape: tuple[int, int] | None = None,
    n_dates: int | None = None,
    n_history: int | None = None,
    nan_fraction: float | None = None,
    change_fraction: float = 0.25,
    change_magnitude: tuple[float, float] = (-0.35, -0.15),
    noise: float = 0.03,
    dtype=np.float32,
    seed: int | None = 0,
) -> SyntheticCube:
    """Generate an NDVI-like cube: intercept, trend, yearly harmonics, noise, clouds, breaks.

    Every pixel has its own level (0.4–0.8), slow trend, seasonal amplitude and phase
    (first and second harmonic) and Gaussian noise. A ``change_fraction`` of the pixels
    gets a negative step (deforestation-like) at a random date of the monitoring period's
    first three quarters, in disc-shaped patches (clearings) sharing a date and step.
    Each observation is hidden (NaN) with probability
    ``nan_fraction``.

    Parameters
    ----------
    preset : str
        One of :data:`PRESETS` (``"D1"``–``"D6"``, ``"peru_small"``, ``"peru_large"``,
        ``"demo"``); the other arguments override its values.
    shape, n_dates, n_history, nan_fraction
        Pixel grid, series length, dates before the monitoring start, cloud fraction.
    change_fraction : float
        Fraction of pixels with a planted break.
    change_magnitude : (float, float)
        Range of the planted step sizes (uniform).
    noise : float
        Standard deviation of the Gaussian noise.
    dtype : numpy dtype
        Floating dtype of ``data``.
    seed : int or None
        Seed of the random generator (results are reproducible for a given seed).
    """
    if preset not in PRESETS:
        raise ValueError(f"preset must be one of {sorted(PRESETS)}, got {preset!r}")
    spec = dict(PRESETS[preset])
    for name, value in dict(shape=shape, n_dates=n_dates, n_history=n_history, nan_fraction=nan_fraction).items():
        if value is not None:
            spec[name] = value
    rows, cols = (int(v) for v in spec["shape"])
    n_dates, n_history = int(spec["n_dates"]), int(spec["n_history"])
    nan_fraction = float(spec["nan_fraction"])
    if not 0 < n_history < n_dates:
        raise ValueError(f"n_history must be in (0, n_dates={n_dates}), got {n_history}")
    if not 0.0 <= nan_fraction <= 1.0 or not 0.0 <= change_fraction <= 1.0:
        raise ValueError("nan_fraction and change_fraction must lie in [0, 1]")
    if not np.issubdtype(np.dtype(dtype), np.floating):
        raise TypeError(f"dtype must be a floating dtype, got {dtype}")

    rng = np.random.default_rng(seed)
    dates = composite_dates(n_dates)
    t = np.arange(n_dates) / 23.0  # years since the first date
    n_pixels = rows * cols
    level = rng.uniform(0.4, 0.8, n_pixels)
    slope = rng.normal(0.0, 0.005, n_pixels)
    amplitude = rng.uniform(0.05, 0.2, n_pixels)
    phase = rng.uniform(0, 2 * np.pi, n_pixels)
    amplitude2 = rng.uniform(0.0, 0.05, n_pixels)

    changed, change_index, magnitude = _plant_clearings(
        rng, rows, cols, change_fraction, n_history, n_dates - n_history, change_magnitude
    )

    out = np.empty((n_dates, n_pixels), dtype=dtype)
    # Generate in date blocks so that peak memory stays ~ the output (large presets).
    block = max(1, 2**24 // max(n_pixels, 1))
    for begin in range(0, n_dates, block):
        tt = t[begin : begin + block, None]
        idx = np.arange(begin, min(begin + block, n_dates))[:, None]
        values = (
            level
            + slope * tt
            + amplitude * np.cos(2 * np.pi * tt + phase)
            + amplitude2 * np.cos(4 * np.pi * tt + 2 * phase)
            + noise * rng.standard_normal((tt.shape[0], n_pixels))
            + np.where(changed & (idx >= change_index), magnitude, 0.0)
        )
        values[rng.random(values.shape) < nan_fraction] = np.nan
        out[begin : begin + block] = values

    cube = SyntheticCube(
        data=out.reshape(n_dates, rows, cols),
        dates=dates,
        start=dates[n_history],
        changed=changed.reshape(rows, cols),
        change_time=np.full(n_pixels, np.nan),
        change_index=change_index.reshape(rows, cols),
        change_magnitude=magnitude.reshape(rows, cols),
    )
    cube.change_time = np.where(changed, cube.time[np.maximum(change_index, 0)], np.nan).reshape(rows, cols)
    return cube
