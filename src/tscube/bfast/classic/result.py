"""The result of :func:`tscube.bfast_classic`: the engines' outputs and the result object."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .status import BfastClassicStatus

#: The columns of :attr:`BfastClassicResult.magnitudes`, R's ``Mags``.
MAGNITUDE_COLUMNS = ("before", "after", "jump")
#: The components, time first (R's ``Tt``, ``St``, ``Nt`` of the last iteration).
COMPONENTS = ("trend", "seasonal", "remainder")


def break_times(index: np.ndarray, time: np.ndarray) -> np.ndarray:
    """Decimal-year time of each time index (NaN for -1, 'no break')."""
    return np.where(index >= 0, time[np.clip(index, 0, None)], np.nan)


def empty_classic_outputs(n_times: int, n_pixels: int, n_breaks: int, n_iterations: int = 0) -> dict[str, np.ndarray]:
    """The engines' output arrays, pixels last (components time first), filled with
    'nothing found'. ``n_iterations > 0`` adds every iteration's break sets."""
    nan = np.nan
    out = {
        "status": np.zeros(n_pixels, np.int8),
        "n_obs": np.zeros(n_pixels, np.int32),
        "n_iter": np.zeros(n_pixels, np.int32),
        "magnitude": np.full(n_pixels, nan),
        "magnitude_index": np.full(n_pixels, -1, np.int64),
        "magnitudes": np.full((n_breaks, n_pixels, len(MAGNITUDE_COLUMNS)), nan),
        **{name: np.full((n_times, n_pixels), nan) for name in COMPONENTS},
    }
    for part in ("trend", "season"):
        out[f"n_{part}_breaks"] = np.zeros(n_pixels, np.int32)
        out[f"{part}_break_index"] = np.full((n_breaks, n_pixels), -1, np.int64)
        out[f"{part}_confint"] = np.full((n_breaks, n_pixels, 2), nan)
        out[f"{part}_pretest_p"] = np.full(n_pixels, nan)
        if n_iterations:
            out[f"iter_{part}_break_index"] = np.full((n_iterations, n_breaks, n_pixels), -1, np.int64)
    return out


@dataclass
class BfastClassicResult:
    """Result of :func:`tscube.bfast_classic`: the trend and seasonal breaks of every
    pixel, R's ``bfast()`` per pixel.

    ``B`` is the most breaks found in any pixel's trend or seasonal component; pixels
    with fewer are padded with -1 / NaN. Per-pixel arrays are shaped like the pixels,
    per-break arrays have a leading break axis, the components a leading time axis.

    Attributes
    ----------
    status : int8, pixels
        :class:`BfastClassicStatus` (``OK``: converged; ``MAX_ITER``: stopped at
        ``max_iter``; the others: R would stop with an error, nothing else is set).
    n_obs, n_iter : int32, pixels
        Valid observations and iterations run (R's ``length(output)``).
    n_trend_breaks, n_season_breaks : int32, pixels
        Breaks of the last iteration's trend and seasonal components.
    trend_break_index, season_break_index : int64, (B, pixels)
        Each breakpoint: the time index of the **last observation before the break**
        (R's ``Vt.bp`` / ``Wt.bp``, 0-based here; -1 = none).
    trend_break_time, season_break_time : float64, (B, pixels)
        Decimal-year time of that observation (R's ``time(Yt)[bp]``).
    trend_confint, season_confint : float64, (B, pixels, 2)
        95 % confidence interval of each breakpoint as time indices (lower, upper),
        R's ``confint(bp, het.err = FALSE)``; they may lie outside the series, as in R;
        NaN where R cannot compute one ("Confidence interval cannot be computed").
    magnitudes : float64, (B, pixels, 3)
        R's ``Mags`` of each trend break: the trend of the segment before at the
        breakpoint, of the segment after at the next observation, and the jump
        (``after - before``), :data:`MAGNITUDE_COLUMNS`.
    magnitude : float64, pixels
        The jump of largest absolute size (R's ``Magnitude``; 0 without a trend break).
    magnitude_index : int64, pixels
        Its breakpoint (R's ``Time``, 0-based; -1 without a trend break).
    trend, seasonal, remainder : float64, (T, pixels)
        The last iteration's components ``Tt``, ``St``, ``Nt = Yt - Tt - St`` (NaN at
        missing observations).
    trend_pretest_p, season_pretest_p : float64, pixels
        p-values of the last iteration's pre-tests.
    iter_trend_break_index, iter_season_break_index : int64, (max_iter, B, pixels), or None
        Every iteration's break sets (``iterations=True``); -1 beyond ``n_iter``.
    attrs : dict
        Parameters of the call.
    """

    status: np.ndarray
    n_obs: np.ndarray
    n_iter: np.ndarray
    n_trend_breaks: np.ndarray
    n_season_breaks: np.ndarray
    trend_break_index: np.ndarray
    trend_break_time: np.ndarray
    season_break_index: np.ndarray
    season_break_time: np.ndarray
    trend_confint: np.ndarray
    season_confint: np.ndarray
    magnitudes: np.ndarray
    magnitude: np.ndarray
    magnitude_index: np.ndarray
    trend: np.ndarray
    seasonal: np.ndarray
    remainder: np.ndarray
    trend_pretest_p: np.ndarray
    season_pretest_p: np.ndarray
    iter_trend_break_index: np.ndarray | None = None
    iter_season_break_index: np.ndarray | None = None
    attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def magnitude_time(self) -> np.ndarray:
        """Decimal-year time of :attr:`magnitude_index` (NaN without a trend break)."""
        return break_times(self.magnitude_index, np.asarray(self.attrs["time"]))

    @property
    def has_trend_break(self) -> np.ndarray:
        return self.n_trend_breaks > 0

    @property
    def has_season_break(self) -> np.ndarray:
        return self.n_season_breaks > 0

    def status_counts(self) -> dict[str, int]:
        """Pixels per :class:`BfastClassicStatus` name (statuses that occur)."""
        codes, counts = np.unique(self.status, return_counts=True)
        return {BfastClassicStatus(int(c)).name: int(n) for c, n in zip(codes, counts)}

    def plot(self, **kwargs):
        """Quick-look maps: trend breaks, seasonal breaks, magnitude, status
        (:func:`tscube.bfast.classic.classic_maps`)."""
        from ._maps import classic_maps

        return classic_maps(self, **kwargs)

    def plot_pixel(self, data, pixel, **kwargs):
        """R's ``plot.bfast`` of one pixel (:func:`tscube.bfast.classic.plot_classic_pixel`)."""
        from ._pixel_plot import plot_classic_pixel

        return plot_classic_pixel(self, data, pixel, **kwargs)


def shape_result(outputs: dict, pixel_shape: tuple, time: np.ndarray, attrs: dict) -> BfastClassicResult:
    """Engine outputs (pixels flattened, break axis of the plan's slots) -> the result
    shaped like the pixels, the break axis cut to the most breaks found."""
    B = int(max(outputs["n_trend_breaks"].max(initial=0), outputs["n_season_breaks"].max(initial=0)))
    for part in ("trend", "season"):  # an earlier iteration may have had more breaks
        if f"iter_{part}_break_index" in outputs:
            found = np.flatnonzero((outputs[f"iter_{part}_break_index"] >= 0).any(axis=(0, 2)))
            B = max(B, int(found[-1]) + 1 if found.size else 0)

    def pixels(array, lead=0):
        return array.reshape(array.shape[:lead] + pixel_shape + array.shape[lead + 1:])

    fields = {name: pixels(outputs[name]) for name in (
        "status", "n_obs", "n_iter", "n_trend_breaks", "n_season_breaks", "magnitude", "magnitude_index",
        "trend_pretest_p", "season_pretest_p")}
    for part in ("trend", "season"):
        index = outputs[f"{part}_break_index"][:B]
        fields[f"{part}_break_index"] = pixels(index, 1)
        fields[f"{part}_break_time"] = pixels(break_times(index, time), 1)
        fields[f"{part}_confint"] = pixels(outputs[f"{part}_confint"][:B], 1)
        if f"iter_{part}_break_index" in outputs:
            fields[f"iter_{part}_break_index"] = pixels(outputs[f"iter_{part}_break_index"][:, :B], 2)
    fields["magnitudes"] = pixels(outputs["magnitudes"][:B], 1)
    for name in COMPONENTS:
        fields[name] = pixels(outputs[name], 1)
    return BfastClassicResult(**fields, attrs={**attrs, "time": time})
