"""Time axes: map acquisition dates onto R's decimal-year ``ts`` grid.

BFAST Monitor (like R's ``bfastts`` + ``ts``) works on a *regular* grid of ``freq`` slots
per year. Each acquisition date goes to one slot; slots without an acquisition are
missing for every pixel. The regressors need two numbers per date: its decimal-year time
(for the harmonics, the history/monitoring split and the reported break time) and its
slot index on the full grid (R's ``trend = 1:N``, counted before missing values are
dropped). :class:`TimeAxis` holds both.

Rules (see SPEC-bfastmonitor §1 and §13):

* datetimes, ``freq=None``: R's ``bfastts(type="irregular")``: a daily grid (frequency
  365) with ``t = year + (yday365 - 1) / 365``; 29 February shares the slot of 1 March.
* datetimes with ``freq=23``: MODIS 16-day composites, ``bfastts(type="16-day")``:
  ``t = year + (doy - 1) / 16 / 23``, each date to the nearest slot of the 23-per-year grid.
* datetimes with ``freq=36``: 10-day composites, ``t = year + (doy - 1) / 10 / 36``.
* datetimes with ``freq=12``: monthly, ``t = year + (month - 1) / 12``.
* datetimes with any other ``freq``: ``t = year + (yday365 - 1) / 365`` to the nearest slot.
* decimal years (numbers) need ``freq``: a regular series as R's ``ts(frequency=freq)``;
  the given times are used as they are (R's ``time()`` values), slot
  ``round((t - t0) * freq)``.

Grid time values are computed as R computes ``time()``: ``seq.int(tsp1, tsp2,
length.out=N)``, not ``t0 + i / freq`` (they differ in the last bit).
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

#: Tolerance (years) for comparing decimal-year times. Far below one slot (1/365 year),
#: far above R's 1-ulp time-axis effects.
TIME_TOL = 1e-7

_DAYS_BEFORE_MONTH_365 = np.cumsum([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30])


@dataclass(frozen=True)
class TimeAxis:
    """Decimal-year time and grid slot of each date of a cube's time axis.

    Attributes
    ----------
    time : ndarray, shape (T,)
        Decimal-year time of each date (R's ``time()`` of its slot).
    slot : ndarray of int64, shape (T,)
        Index of each date on the regular grid (0 = first date). ``slot + 1`` is R's
        ``trend`` regressor.
    freq : int
        Slots per year.
    """

    time: np.ndarray
    slot: np.ndarray
    freq: int

    def __len__(self) -> int:
        return self.time.shape[0]

    @property
    def trend(self) -> np.ndarray:
        """R's ``trend`` regressor: position on the full grid, starting at 1."""
        return (self.slot + 1).astype(np.float64)


#: Date forms every date input of tscube takes (dates files, file names, tags, options,
#: strings given to the library): ISO 8601 (``2000-03-05``, with a time and zone
#: optionally; ``2000-03``, the month's first day), compact ``20000305``, year first with slashes or dots (``2000/03/05``),
#: TIFF's ``2000:03:05 12:00:00``, and any form with a month name (``5 March 2000``).
_ISO_DATE = re.compile(r"\d{4}-\d{1,2}(-\d{1,2}([T ]\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?)?")
_COMPACT_DATE = re.compile(r"\d{8}([T ]?\d{6})?")
_YEAR_FIRST_DATE = re.compile(r"\d{4}([/.])\d{1,2}\1\d{1,2}( \d{1,2}:\d{2}(:\d{2})?)?")
_TIFF_DATE = re.compile(r"\d{4}:\d{2}:\d{2}( \d{2}:\d{2}:\d{2})?")
_MONTH_NAME = re.compile(r"[A-Za-z]{3}")


def parse_date(text: str, where: str = "date") -> pd.Timestamp:
    """One date written as text, read the one way it can be read.

    ISO 8601 dates (``2000-03-05``, ``2000-03-05T10:30:00Z``), compact ``20000305``, year
    first with ``/`` or ``.`` (``2000/03/05``), TIFF's ``2000:03:05 10:30:00`` and dates with
    a month name (``5 March 2000``) are taken. Numeric dates that do not start with the
    year (``05/03/2000``: 5 March or 3 May?) are refused, as is anything else that is no
    date, with a ``ValueError`` that names ``where``.
    """
    text = str(text).strip()
    if _TIFF_DATE.fullmatch(text):
        text = text[:10].replace(":", "-") + text[10:]
    elif _YEAR_FIRST_DATE.fullmatch(text):
        day, _, clock = text.partition(" ")
        text = re.sub(r"[/.]", "-", day) + (f" {clock}" if clock else "")
    numeric = not _MONTH_NAME.search(text.replace("T", " ", 1).rstrip("Z"))
    if numeric and not (_ISO_DATE.fullmatch(text) or _COMPACT_DATE.fullmatch(text)):
        raise ValueError(f"{where}: {text!r} is not a date tscube reads unambiguously: write dates as YYYY-MM-DD "
                         "(day/month or month/day orders are refused)")
    try:
        stamp = pd.Timestamp(text)
    except (ValueError, TypeError, OverflowError):
        raise ValueError(f"{where}: cannot parse {text!r} as a date (write it as YYYY-MM-DD)") from None
    if pd.isna(stamp):
        raise ValueError(f"{where}: {text!r} is not a date")
    return stamp


def is_datetime_like(values) -> bool:
    """Whether ``values`` are dates (datetimes, dates, timestamps or date strings), not decimal years."""
    if isinstance(values, (pd.DatetimeIndex, pd.Series)) and pd.api.types.is_datetime64_any_dtype(values):
        return True
    arr = np.asarray(values)
    if np.issubdtype(arr.dtype, np.datetime64):
        return True
    if arr.dtype == object and arr.size:
        first = arr.reshape(-1)[0]
        return isinstance(first, (_dt.date, np.datetime64, pd.Timestamp, str))
    if arr.dtype.kind in "US":
        return True
    return False


def _to_datetime_index(values, name: str) -> pd.DatetimeIndex:
    flat = np.asarray(values).reshape(-1)
    if flat.dtype.kind in "US" or (flat.dtype == object and any(isinstance(v, str) for v in flat)):
        # text is read by parse_date, the one reading of a date every input shares
        flat = np.array([parse_date(v, f"{name} (position {i})") if isinstance(v, (str, np.str_)) else v
                         for i, v in enumerate(flat)], dtype=object)
    try:
        index = pd.DatetimeIndex(pd.to_datetime(flat))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{name}: cannot parse as dates ({exc})") from None
    if index.hasnans:
        pos = int(np.flatnonzero(index.isna())[0])
        raise ValueError(f"{name}: missing date (NaT) at position {pos}")
    return index


def _yday365(index: pd.DatetimeIndex) -> np.ndarray:
    """R bfast's ``yday365``: day of year in a 365-day year (29 Feb -> slot of 1 Mar)."""
    return _DAYS_BEFORE_MONTH_365[index.month.to_numpy() - 1] + index.day.to_numpy()


def _datetime_decimal(index: pd.DatetimeIndex, freq: int | None) -> tuple[np.ndarray, int]:
    """Decimal-year value of datetimes under the bfastts rule for ``freq``."""
    year = index.year.to_numpy().astype(np.float64)
    if freq is None or freq == 365:
        return year + (_yday365(index) - 1) / 365.0, 365
    if freq == 23:
        return year + (index.day_of_year.to_numpy() - 1) / 16.0 / 23.0, 23
    if freq == 36:
        return year + (index.day_of_year.to_numpy() - 1) / 10.0 / 36.0, 36
    if freq == 12:
        return year + (index.month.to_numpy() - 1) / 12.0, 12
    return year + (_yday365(index) - 1) / 365.0, freq


def _r_time_values(t0: float, n_slots: int, freq: int) -> np.ndarray:
    """R's ``time(ts(start=t0, frequency=freq))`` for a series of ``n_slots`` values."""
    if n_slots == 1:
        return np.array([t0])
    tsp2 = t0 + (n_slots - 1) / freq
    by = (tsp2 - t0) / (n_slots - 1)
    values = t0 + np.arange(n_slots) * by
    values[-1] = tsp2
    return values


def _check_freq(freq) -> int:
    if isinstance(freq, bool) or not isinstance(freq, (int, np.integer, float, np.floating)):
        raise TypeError(f"freq must be a positive integer (slots per year), got {freq!r}")
    if float(freq) != int(freq) or int(freq) < 1:
        raise ValueError(f"freq must be a positive integer (slots per year), got {freq!r}")
    return int(freq)


def _check_increasing(slot: np.ndarray, labels, name: str, freq: int | None = None) -> None:
    step = np.diff(slot)
    bad = np.flatnonzero(step <= 0)
    if not bad.size:
        return
    i = int(bad[0]) + 1
    first, second = labels[i - 1], labels[i]
    if step[i - 1] < 0:
        raise ValueError(f"{name}: unsorted dates at positions {i - 1} and {i} ({first} and {second} fall on a "
                         "decreasing slot of the time grid); dates must be strictly increasing")
    if str(first) == str(second):
        raise ValueError(f"{name}: duplicate dates at positions {i - 1} and {i} (both {first}); dates must be "
                         "strictly increasing")
    where = (f"{name}: the dates {first} and {second} (positions {i - 1} and {i}) fall on the same slot of the time "
             f"grid of freq={freq}")
    if freq == 365:
        raise ValueError(f"{where} (R's daily grid of 365 days a year, where 29 February shares 1 March's slot), "
                         "which holds one observation: drop one of them")
    grid = {12: "month", 23: "16 days", 36: "10 days"}.get(freq, f"1/{freq} of a year")
    raise ValueError(f"{where} (one slot per {grid}), which holds one observation: give the freq of the data "
                     "(23 for 16-day composites, 36 for 10-day, 12 for monthly; none for daily dates) or "
                     "aggregate it to that grid")


def build_time_axis(dates, freq=None) -> TimeAxis:
    """Map ``dates`` (datetimes or decimal years) to a :class:`TimeAxis`.

    Raises ``ValueError`` for unsorted or duplicate dates (naming the first offending
    position), dates off a regular grid, and decimal years without ``freq``.
    """
    if freq is not None:
        freq = _check_freq(freq)
    if is_datetime_like(dates):
        index = _to_datetime_index(dates, "dates")
        if index.size == 0:
            raise ValueError("dates is empty")
        decimal, freq = _datetime_decimal(index, freq)
        slot = np.rint((decimal - decimal[0]) * freq).astype(np.int64)
        _check_increasing(slot, [str(d.date()) for d in index], "dates", freq)
        grid = _r_time_values(float(decimal[0]), int(slot[-1]) + 1, freq)
        return TimeAxis(time=grid[slot], slot=slot, freq=freq)

    values = np.asarray(dates)
    if values.ndim != 1:
        raise ValueError(f"dates must be one-dimensional, got shape {values.shape}")
    if values.size == 0:
        raise ValueError("dates is empty")
    if not np.issubdtype(values.dtype, np.number) or np.issubdtype(values.dtype, np.complexfloating):
        raise TypeError(f"dates must be datetimes or decimal years, got dtype {values.dtype}")
    values = values.astype(np.float64)
    if not np.all(np.isfinite(values)):
        raise ValueError(f"dates: non-finite decimal year at position {int(np.flatnonzero(~np.isfinite(values))[0])}")
    if freq is None:
        raise ValueError(
            "dates are decimal years, so freq (observations per year of the regular series, "
            "e.g. 23 for 16-day, 12 for monthly) is required"
        )
    offset = (values - values[0]) * freq
    slot = np.rint(offset).astype(np.int64)
    off_grid = np.flatnonzero(np.abs(offset - slot) > 1e-3)
    if off_grid.size:
        i = int(off_grid[0])
        raise ValueError(
            f"dates: decimal year {values[i]!r} at position {i} is not on the regular grid of "
            f"{freq} slots per year starting at {values[0]!r}"
        )
    _check_increasing(slot, values, "dates", freq)
    return TimeAxis(time=values, slot=slot, freq=freq)


def format_when(value) -> str:
    """A user's date as they would write it, for messages: ``2030-01-01`` (not
    ``Timestamp('2030-01-01 00:00:00')``), with the time only when it is not midnight;
    strings, ``(year, cycle)`` pairs and decimal years as given."""
    if isinstance(value, (_dt.date, np.datetime64, pd.Timestamp)):
        stamp = pd.Timestamp(value)
        if pd.isna(stamp):
            return "NaT"
        return stamp.strftime("%Y-%m-%d") if stamp == stamp.normalize() else stamp.isoformat()
    if isinstance(value, str):
        return value
    if isinstance(value, (np.integer, np.floating)):
        return repr(value.item())
    return repr(value)


def to_decimal_year(value, axis: TimeAxis, name: str) -> float:
    """Convert a user date (datetime, ``(year, cycle)`` or decimal year) to a decimal year.

    Datetimes use the same rule as the axis's dates; ``(year, cycle)`` is R's
    ``time2num``: ``year + (cycle - 1) / freq``.
    """
    if isinstance(value, (tuple, list)) and len(value) == 2 and all(
        isinstance(v, (int, float, np.integer, np.floating)) for v in value
    ):
        return float(value[0]) + (float(value[1]) - 1.0) / axis.freq
    if isinstance(value, (_dt.date, np.datetime64, pd.Timestamp, str)):
        index = _to_datetime_index([value], name)
        decimal, _ = _datetime_decimal(index, axis.freq)
        return float(decimal[0])
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        value = float(value)
        if not np.isfinite(value):
            raise ValueError(f"{name} must be finite, got {value}")
        return value
    raise TypeError(f"{name} must be a date, a (year, cycle) pair or a decimal year, got {value!r}")
