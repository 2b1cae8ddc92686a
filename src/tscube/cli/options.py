"""Options and arguments that several commands share, declared once (their defaults stay in
each command's signature), option groups (:class:`BfastInput`, :class:`StacInput`) and
the parsers of option values (dates, bounding boxes)."""

from __future__ import annotations

import functools
import inspect
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..timeaxis import parse_date

def parse_when(text: str, name: str):
    """A CLI date: a date as :func:`tscube.timeaxis.parse_date` reads every date
    (``2010-03-31``, ``20100331``, with an optional time; no day/month or month/day
    orders), a decimal year (``2010.5``) or ``YEAR,CYCLE`` (R's ``c(2010, 4)``); anything
    else is refused."""
    text = text.strip()
    if re.fullmatch(r"\d{4}[,/]\d{1,3}", text):
        year, cycle = re.split(r"[,/]", text)
        return (int(year), int(cycle))
    if re.fullmatch(r"[-+]?\d+\.\d*|\d{4}", text):
        return float(text)
    try:
        return parse_date(text, f"--{name}")
    except ValueError as exc:
        raise ValueError(f"--{name} {text!r} is not a date (YYYY-MM-DD), a decimal year or YEAR,CYCLE "
                         f"({str(exc).split(': ', 1)[-1]})") from None


def parse_history(text: str):
    """``--history``: a selection method (all, ROC, BP) or a fixed start date."""
    return text if text in ("all", "ROC", "BP") else parse_when(text, "history")


def as_int(text: str, name: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"--{name} must be an integer or 'periodic', got {text!r}") from None


# Options shared by several commands, declared once (defaults stay in each signature).
InputCube = Annotated[str, typer.Argument(metavar="INPUT", help=(
    "Folder of dated GeoTIFFs, multi-band GeoTIFF, .nc, .zarr, or a STAC catalog, collection or item-collection "
    "JSON (path or http(s) URL)."))]
DatesFile = Annotated[Optional[Path], typer.Option("--dates", help=(
    "Dates of the time steps when the input lacks them: one ISO date per line (or a CSV with a 'date' column)."))]
DatePattern = Annotated[Optional[str], typer.Option("--date-pattern", help=(
    "Date in the file names of a folder input: strftime-like ('%Y%m%d', 'A%Y%j') or a regex."))]
Variable = Annotated[Optional[str], typer.Option(help="NetCDF/Zarr variable to read.")]
Nodata = Annotated[Optional[float], typer.Option(help="Extra value marking missing observations.")]
Workers = Annotated[Optional[int], typer.Option(help="Start a local dask cluster with N worker processes.")]
Scheduler = Annotated[Optional[str], typer.Option(help="Address of a running dask scheduler to use.")]
Memory = Annotated[Optional[str], typer.Option(help=(
    "Memory one chunk may use while processed, e.g. '2GB' (sets the dask chunk sizes)."))]
Progress = Annotated[bool, typer.Option("--progress/--no-progress", help="Show a progress bar over the chunks.")]
Overwrite = Annotated[bool, typer.Option("--overwrite", help=(
    "Replace an existing output (or a run in progress into it) made with other parameters or "
    "another input; without it such a run is refused."))]
# the BFAST Monitor model (monitor, plot-pixel)
Start = Annotated[str, typer.Option(help="Start of monitoring: YYYY-MM-DD, decimal year or YEAR,CYCLE.")]
Freq = Annotated[Optional[int], typer.Option(help="Observations per year of the time grid (23: 16-day, 12: monthly); default daily.")]
History = Annotated[str, typer.Option(help="Stable history: ROC (default, as R), BP, all or a start date.")]
Order = Annotated[int, typer.Option(help="Harmonic order of the seasonal model.")]
Season = Annotated[bool, typer.Option("--season", help=(
    "Seasonal dummies instead of harmonics (R's response ~ trend + season; needs --order 0)."))]
ProcessType = Annotated[str, typer.Option("--type", help="Monitoring process: OLS-MOSUM (default, as R) or OLS-CUSUM.")]
Bandwidth = Annotated[float, typer.Option("--h", help=(
    "MOSUM bandwidth, a fraction of the history in (0, 1]; R's table has 0.25, 0.5, 1 (others: simulated critical value)."))]
Level = Annotated[float, typer.Option(help="Significance level of the monitoring test.")]
End = Annotated[float, typer.Option(help=(
    "Monitoring horizon of the MOSUM critical value, in history sizes; R's table has 2, 4, 6, 8, 10 (others: simulated)."))]
NoTrend = Annotated[bool, typer.Option("--no-trend", help="Fit the seasonal model without a trend.")]
Calibrate = Annotated[bool, typer.Option("--calibrate", help=(
    "Critical value calibrated to each pixel's own dates, model and process, so that a stable pixel is flagged "
    "with probability --level (R's flags far more with a trend); writes each pixel's 'critval'."))]


@dataclass(frozen=True)
class BfastInput:
    """How to read the cube's dates and the BFAST Monitor model: the options that
    ``monitor`` and ``plot-pixel`` share (see :func:`with_bfast_input`)."""

    dates: Optional[Path]
    date_pattern: Optional[str]
    variable: Optional[str]
    freq: Optional[int]
    history: str
    order: int
    season: bool
    process_type: str
    h: float
    level: float
    end: float
    no_trend: bool
    nodata: Optional[float]
    calibrate: bool = False

    def model(self) -> dict:
        """The model's keyword arguments of :func:`tscube.bfast_monitor` (all but start,
        history and the input's reading), as the CLI records them for a resumable run."""
        model = dict(freq=self.freq, order=self.order, trend=not self.no_trend, season=self.season,
                     type=self.process_type, h=self.h, level=self.level, end=self.end, nodata=self.nodata)
        if self.calibrate:  # (only then: the records of earlier runs stay those of the same run)
            model["calibrate"] = True
        return model


#: (name, option type, default) of each BfastInput field, in --help order.
BFAST_INPUT_OPTIONS = (
    ("dates", DatesFile, None), ("date_pattern", DatePattern, None), ("variable", Variable, None),
    ("freq", Freq, None), ("history", History, "ROC"), ("order", Order, 3), ("season", Season, False),
    ("process_type", ProcessType, "OLS-MOSUM"), ("h", Bandwidth, 0.25), ("level", Level, 0.05), ("end", End, 10),
    ("no_trend", NoTrend, False), ("nodata", Nodata, None), ("calibrate", Calibrate, False),
)


def with_option_group(group: str, group_type, options):
    """A decorator declaring shared options once: the command's ``group`` parameter is
    replaced, in its place, by one typer option per entry of ``options`` (name, type,
    default), and the command receives them packed into a ``group_type``."""

    def decorate(command):
        signature = inspect.signature(command, eval_str=True)
        shared = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default,
                                    annotation=annotation) for name, annotation, default in options]
        parameters = []
        for parameter in signature.parameters.values():
            parameters.extend(shared if parameter.name == group else [parameter])

        @functools.wraps(command)
        def wrapper(*args, **kwargs):
            packed = group_type(**{name: kwargs.pop(name) for name, _, _ in options})
            return command(*args, **{group: packed}, **kwargs)

        wrapper.__signature__ = signature.replace(parameters=parameters)
        wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
        return wrapper

    return decorate


#: The options of :class:`BfastInput` in place of a command's ``bfast`` parameter.
with_bfast_input = with_option_group("bfast", BfastInput, BFAST_INPUT_OPTIONS)

# how to read a STAC input (monitor, stl, plot-pixel, info)
Index = Annotated[Optional[str], typer.Option(help=(
    "STAC input: spectral index NDVI (default), NBR, NDMI, EVI, or a band (nir, swir16, B8A, ...)."))]
Mask = Annotated[Optional[str], typer.Option(help=(
    "STAC input: cloud mask auto (default: SCL or QA_PIXEL), scl, qa_pixel or none; '+snow' masks snow too; "
    "or the classes/bits, e.g. scl:3,8,9 or qa_pixel:1,3,4."))]
Bbox = Annotated[Optional[str], typer.Option(help="STAC input: area WEST,SOUTH,EAST,NORTH in lon/lat degrees.")]
Crs = Annotated[Optional[str], typer.Option("--crs", help=(
    "STAC input: output CRS (e.g. EPSG:32633; default: the items' CRS); with --resolution."))]
Resolution = Annotated[Optional[float], typer.Option(help="STAC input: output pixel size, in the CRS's units.")]
Merge = Annotated[Optional[str], typer.Option(help=(
    "STAC input: how the scenes of one day combine: first (default: first valid pixel by time, then item id), "
    "last, median, mean, min or max."))]
Timeout = Annotated[Optional[float], typer.Option(help=(
    "STAC input over http(s): seconds to connect and to wait for data before the run fails (default 60)."))]


@dataclass(frozen=True)
class StacInput:
    """How to make a cube of a STAC input: the options of :func:`tscube.io.open_stac`
    that ``monitor``, ``stl``, ``plot-pixel`` and ``info`` share (None: not given)."""

    index: Optional[str]
    mask: Optional[str]
    bbox: Optional[str]
    crs: Optional[str]
    resolution: Optional[float]
    merge: Optional[str]
    timeout: Optional[float]

    def options(self) -> dict:
        """Keyword arguments of ``open_stac`` (its defaults where an option is not given)."""
        options = {name: value for name, value in vars(self).items() if value is not None}
        if self.mask is not None:
            options["mask"] = None if self.mask.strip().lower() == "none" else self.mask
        if self.bbox is not None:
            options["bbox"] = parse_bbox(self.bbox)
        return options

    def params(self) -> dict:
        """What a resumable run records of them (all that makes the cube: not the timeout)."""
        return {f"stac_{name}": value for name, value in vars(self).items() if name != "timeout"}


def parse_bbox(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        values = ()
    if len(values) != 4:
        raise ValueError(f"--bbox {text!r} is not WEST,SOUTH,EAST,NORTH (four numbers, lon/lat degrees)")
    return values


STAC_INPUT_OPTIONS = (("index", Index, None), ("mask", Mask, None), ("bbox", Bbox, None), ("crs", Crs, None),
                       ("resolution", Resolution, None), ("merge", Merge, None), ("timeout", Timeout, None))
#: The options of :class:`StacInput` in place of a command's ``stac`` parameter.
with_stac_input = with_option_group("stac", StacInput, STAC_INPUT_OPTIONS)


# figures (plot, plot-pixel)
Width = Annotated[int, typer.Option(help="Image width in pixels.")]
Height = Annotated[int, typer.Option(help="Image height in pixels.")]
Dpi = Annotated[int, typer.Option(help="Dots per inch (text size relative to the image).")]
