"""The ``tscube`` command line: a thin layer over the library."""

from __future__ import annotations

import functools
import inspect
import os
import re
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Optional

import numpy as np
import typer

app = typer.Typer(help="Per-pixel time-series analysis of satellite image cubes.", no_args_is_help=True, add_completion=False)


@app.callback()
def main() -> None:
    """tscube: BFAST Monitor change detection (and more) over image cubes, in parallel."""


def detection_scores(detected: np.ndarray, planted: np.ndarray) -> dict[str, float]:
    """Pixel-level precision and recall of detected breaks against planted ones."""
    true_positive = int(np.count_nonzero(detected & planted))
    n_detected, n_planted = int(np.count_nonzero(detected)), int(np.count_nonzero(planted))
    return dict(
        detected=n_detected,
        planted=n_planted,
        precision=true_positive / n_detected if n_detected else float("nan"),
        recall=true_positive / n_planted if n_planted else float("nan"),
    )


@app.command()
def demo(
    output: Path = typer.Option(Path("tscube-demo.png"), "-o", "--output", help="Quick-look PNG to write."),
    rows: int = typer.Option(120, help="Rows of the generated cube."),
    cols: int = typer.Option(160, help="Columns of the generated cube."),
    engine: str = typer.Option("auto", help="auto, reference, cpu or cuda."),
    seed: int = typer.Option(0, help="Seed of the generated cube."),
) -> None:
    """Generate a cloudy NDVI demo cube with planted breaks, run BFAST Monitor, map the result."""
    from .bfast import bfast_monitor
    from .datasets import make_cube
    from .plot import break_maps

    cube = make_cube("demo", shape=(rows, cols), seed=seed)
    n_dates = cube.data.shape[0]
    typer.echo(
        f"demo cube: {rows}x{cols} pixels x {n_dates} dates (16-day, {str(cube.dates[0])} to "
        f"{str(cube.dates[-1])}), {np.isnan(cube.data).mean():.0%} cloudy, monitoring from {cube.start}"
    )
    # One pixel first: numba compiles the kernels on the very first run (then loads them
    # from its cache), which should not count as the method's speed.
    began = time.perf_counter()
    bfast_monitor(cube.data[:, :1, :1], cube.dates, cube.start, freq=23, engine=engine)
    warm_up = time.perf_counter() - began
    began = time.perf_counter()
    result = bfast_monitor(cube.data, cube.dates, cube.start, freq=23, engine=engine)
    elapsed = time.perf_counter() - began
    scores = detection_scores(result.has_break, cube.changed)
    typer.echo(
        f"BFAST Monitor ({result.attrs['engine']} engine): {elapsed:.2f} s, {rows * cols / elapsed:,.0f} pixels/s "
        f"(plus {warm_up:.1f} s first-call set-up: numba compiles once, then loads from its cache)"
    )
    typer.echo(f"pixel status: {result.status_counts()}")
    typer.echo(
        f"breaks: {scores['detected']} detected, {scores['planted']} planted; "
        f"precision {scores['precision']:.2f}, recall {scores['recall']:.2f}"
    )
    fig = break_maps(result, title="demo")
    fig.savefig(output, dpi=100)
    typer.echo(f"quick-look written to {output}")


# --------------------------------------------------------------------------------------
# Commands over files: monitor, stl, info, cluster.

#: Exit code of the file commands when the input or a parameter is wrong.
EXIT_ERROR = 1


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if not isinstance(exc, KeyError) else f"missing key {text}"


@contextmanager
def _clean_errors():
    """Turn caller errors into a one-line ``error: ...`` message and a non-zero exit code."""
    from .stac import naming_failed_reads

    try:
        with naming_failed_reads():
            yield
    except (typer.Exit, typer.Abort, KeyboardInterrupt):
        raise
    except (ValueError, TypeError, KeyError, OSError) as exc:
        typer.secho(f"error: {_one_line(exc)}", err=True, fg=typer.colors.RED)
        raise typer.Exit(EXIT_ERROR) from None
    except Exception as exc:  # noqa: BLE001 - rasterio/zarr/distributed errors of bad inputs
        typer.secho(f"error: {type(exc).__name__}: {_one_line(exc)}", err=True, fg=typer.colors.RED)
        raise typer.Exit(EXIT_ERROR) from None


def _warn(message: str) -> None:
    typer.secho(f"WARNING: {message}", err=True, fg=typer.colors.YELLOW, bold=True)


def worker_environment(n_workers: int) -> dict[str, str]:
    """Thread settings of each dask worker process: numba gets its share of the cores.

    Every worker runs one task at a time (``threads_per_worker=1``) with
    ``cores // n_workers`` numba threads; BLAS/OpenMP pools get one thread so that they
    do not oversubscribe the cores next to numba.
    """
    threads = max(1, (os.cpu_count() or 1) // max(1, n_workers))
    return {"NUMBA_NUM_THREADS": str(threads), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1"}


@contextmanager
def dask_client(workers: Optional[int], scheduler: Optional[str]):
    """A dask Client for ``--workers N`` (a new LocalCluster) or ``--scheduler ADDRESS``; else None."""
    if workers is not None and scheduler is not None:
        raise ValueError("--workers and --scheduler exclude each other: start a local cluster or use an existing one")
    if workers is None and scheduler is None:
        yield None
        return
    from distributed import Client, LocalCluster

    cluster = None
    if workers is not None:
        if workers < 1:
            raise ValueError(f"--workers must be at least 1, got {workers}")
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                               dashboard_address=None, env=worker_environment(workers))
        client = Client(cluster)
    else:
        try:
            client = Client(scheduler, timeout="10s")
        except OSError as exc:
            raise OSError(f"cannot reach the dask scheduler at {scheduler!r} ({_one_line(exc)})") from None
    try:
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _parse_when(text: str, name: str):
    """A CLI date: ISO date (``2010-03-31``, ``20100331``, with an optional time), decimal
    year (``2010.5``) or ``YEAR,CYCLE`` (R's ``c(2010, 4)``); anything else is refused."""
    text = text.strip()
    if re.fullmatch(r"\d{4}[,/]\d{1,3}", text):
        year, cycle = re.split(r"[,/]", text)
        return (int(year), int(cycle))
    if re.fullmatch(r"[-+]?\d+\.\d*|\d{4}", text):
        return float(text)
    message = f"--{name} {text!r} is not a date (YYYY-MM-DD), a decimal year or YEAR,CYCLE"
    # ISO 8601 only: forms such as 01/02/2020 read as month/day or day/month by locale
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?|\d{8}", text):
        raise ValueError(message)
    import pandas as pd

    try:
        return pd.Timestamp(text)
    except (ValueError, TypeError):
        raise ValueError(message) from None


def _parse_history(text: str):
    """``--history``: a selection method (all, ROC, BP) or a fixed start date."""
    return text if text in ("all", "ROC", "BP") else _parse_when(text, "history")


def _open_input(source, dates_file, date_pattern, variable, memory, stac: "StacInput | None" = None,
                describe: bool = False, times=None):
    """The cube of INPUT: a file or folder (open_cube), or a STAC catalog path or URL
    (open_stac with the ``stac`` options; ``describe``: describe_stac's dict, for ``info``);
    ``times``: positions of the only dates to read (a folder reads only those files)."""
    from .io import is_stac_source, open_cube, open_stac
    from .stac import describe_stac

    source = str(source)
    stac = _check_input_options(source, dates_file, date_pattern, variable, stac)
    if is_stac_source(source):
        cube = (describe_stac if describe else open_stac)(source, memory=memory, **stac.options())
        return cube if times is None else cube.isel(time=times)
    return open_cube(Path(source), dates=dates_file, date_pattern=date_pattern, variable=variable, memory=memory,
                     times=times)


def _check_input_options(source, dates_file, date_pattern, variable, stac: "StacInput | None") -> "StacInput":
    """Refuse the options that are not for this kind of INPUT (STAC catalog or not);
    returns the STAC options (all unset for None)."""
    from .io import is_stac_source

    stac = stac or StacInput(*(None,) * len(_STAC_INPUT_OPTIONS))
    if is_stac_source(str(source)):
        given = [name for name, value in (("--dates", dates_file), ("--date-pattern", date_pattern),
                                          ("--variable", variable)) if value is not None]
        if given:
            raise ValueError(f"{', '.join(given)}: not for a STAC input (its dates come from the items)")
        return stac
    given = [f"--{name}" for name, value in vars(stac).items() if value is not None]
    if given:
        raise ValueError(f"{', '.join(given)}: for STAC inputs only (a catalog JSON path or http(s) URL)")
    return stac


def _input_name(source) -> str:
    """A short name of INPUT for messages: the file name, or the last part of a URL."""
    return str(source).rstrip("/").rsplit("/", 1)[-1] or str(source)


def _echo_input(input_path, da) -> None:
    """One line on the opened cube: its name, dates (first to last) and pixels."""
    typer.echo(f"{_input_name(input_path)}: {da.sizes['time']} dates ({str(da.time.values[0])[:10]} to "
               f"{str(da.time.values[-1])[:10]}), {da.size // da.sizes['time']} pixels")


def _report_status(by_name: dict[str, int], empty_reason: str) -> None:
    """Warn loudly when no pixel produced a result (``by_name``: pixels per status name)."""
    total = int(sum(by_name.values()))
    if total and by_name.get("ALL_MISSING", 0) == total:
        _warn(f"all {total} pixels are missing (nodata everywhere): the output holds no result. {empty_reason}")
    elif total and by_name.get("OK", 0) == 0:
        _warn(f"no pixel produced a result (status counts {by_name}): the output holds no result. {empty_reason}")


def _run_resumable(template, output: Path, *, command: str, params: dict, input_path: str, da, status_enum,
                   overwrite: bool, progress: bool, client, empty_reason: str):
    """Compute ``template`` chunk by chunk into ``output`` (resumable), print the run summary."""
    from .runs import input_identity, run_chunked

    summary = run_chunked(template, output, command=command, params=params, input_id=input_identity(input_path, da),
                          status_enum=status_enum, overwrite=overwrite, progress=progress, client=client,
                          echo=typer.echo)
    for line in summary.lines():
        typer.echo(line)
    _report_status(summary.status_counts, empty_reason)
    if not summary.up_to_date:
        typer.echo(f"written {output}")
    return summary


def _check_output(output: Path) -> None:
    from .io import GEOTIFF_SUFFIXES, NETCDF_SUFFIXES, ZARR_SUFFIXES

    if output.suffix.lower() not in GEOTIFF_SUFFIXES + NETCDF_SUFFIXES + ZARR_SUFFIXES:
        raise ValueError(f"output {output.name}: unsupported suffix {output.suffix!r} (use .tif, .nc or .zarr)")
    if not output.parent.exists():
        raise FileNotFoundError(f"output folder {str(output.parent)!r} does not exist")


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

    def model(self) -> dict:
        """The model's keyword arguments of :func:`tscube.bfast_monitor` (all but start,
        history and the input's reading), as the CLI records them for a resumable run."""
        return dict(freq=self.freq, order=self.order, trend=not self.no_trend, season=self.season,
                    type=self.process_type, h=self.h, level=self.level, end=self.end, nodata=self.nodata)


#: (name, option type, default) of each BfastInput field, in --help order.
_BFAST_INPUT_OPTIONS = (
    ("dates", DatesFile, None), ("date_pattern", DatePattern, None), ("variable", Variable, None),
    ("freq", Freq, None), ("history", History, "ROC"), ("order", Order, 3), ("season", Season, False),
    ("process_type", ProcessType, "OLS-MOSUM"), ("h", Bandwidth, 0.25), ("level", Level, 0.05), ("end", End, 10),
    ("no_trend", NoTrend, False), ("nodata", Nodata, None),
)


def _with_option_group(group: str, group_type, options):
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
with_bfast_input = _with_option_group("bfast", BfastInput, _BFAST_INPUT_OPTIONS)

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

    def options(self) -> dict:
        """Keyword arguments of ``open_stac`` (its defaults where an option is not given)."""
        options = {name: value for name, value in vars(self).items() if value is not None}
        if self.mask is not None:
            options["mask"] = None if self.mask.strip().lower() == "none" else self.mask
        if self.bbox is not None:
            options["bbox"] = _parse_bbox(self.bbox)
        return options

    def params(self) -> dict:
        """What a resumable run records of them."""
        return {f"stac_{name}": value for name, value in vars(self).items()}


def _parse_bbox(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        values = ()
    if len(values) != 4:
        raise ValueError(f"--bbox {text!r} is not WEST,SOUTH,EAST,NORTH (four numbers, lon/lat degrees)")
    return values


_STAC_INPUT_OPTIONS = (("index", Index, None), ("mask", Mask, None), ("bbox", Bbox, None), ("crs", Crs, None),
                       ("resolution", Resolution, None), ("merge", Merge, None))
#: The options of :class:`StacInput` in place of a command's ``stac`` parameter.
with_stac_input = _with_option_group("stac", StacInput, _STAC_INPUT_OPTIONS)


# figures (plot, plot-pixel)
Width = Annotated[int, typer.Option(help="Image width in pixels.")]
Height = Annotated[int, typer.Option(help="Image height in pixels.")]
Dpi = Annotated[int, typer.Option(help="Dots per inch (text size relative to the image).")]


@app.command()
@with_bfast_input
@with_stac_input
def monitor(
    input_path: InputCube,
    start: Start,
    output: Annotated[Path, typer.Option("-o", "--output", help="Result file: .tif (one band per output), .nc or .zarr.")],
    bfast: BfastInput,
    stac: StacInput,
    process: Annotated[bool, typer.Option("--process", help="Also write the monitoring process/boundary (.nc/.zarr only).")] = False,
    engine: Annotated[str, typer.Option(help="auto, reference, cpu or cuda.")] = "auto",
    workers: Workers = None,
    scheduler: Scheduler = None,
    memory: Memory = None,
    progress: Progress = True,
    overwrite: Overwrite = False,
    update: Annotated[bool, typer.Option("--update", help=(
        "Near-real-time monitoring into a .zarr: the first run fits and keeps a per-pixel state; later runs "
        "monitor only the input's dates after the last one in the output and write an 'alert' band (first "
        "break among the new dates)."))] = False,
) -> None:
    """BFAST Monitor change detection: a georeferenced map of the first break per pixel.

    Resumable: chunks are committed one by one; run the same command again after a crash
    to finish the run without recomputing finished chunks.
    """
    from .bfast import BfastStatus
    from .xr import bfast_monitor_xarray

    with _clean_errors():
        _check_output(output)
        start_value = _parse_when(start, "start")
        history_value = _parse_history(bfast.history)
        if update:
            _monitor_update(input_path, output, start, start_value, history_value, bfast, stac, process, engine,
                            workers, scheduler, memory, progress, overwrite)
            return
        da = _open_input(input_path, bfast.dates, bfast.date_pattern, bfast.variable, memory, stac)
        _echo_input(input_path, da)
        template = bfast_monitor_xarray(
            da, start_value, history=history_value, **bfast.model(), return_process=process, engine=engine,
            memory=memory)
        typer.echo(f"BFAST Monitor ({template.attrs['engine']} engine)")
        params = dict(start=start, history=bfast.history, **bfast.model(), process=process, engine=engine,
                      variable=bfast.variable, date_pattern=bfast.date_pattern)
        if "stac_index" in da.attrs:
            params.update(stac.params())
        with dask_client(workers, scheduler) as client, _suggest_update():
            _run_resumable(template, output, command="monitor", params=params, input_path=input_path, da=da,
                           status_enum=BfastStatus, overwrite=overwrite, progress=progress, client=client,
                           empty_reason="Check --nodata, the input's nodata value and --start.")


@contextmanager
def _suggest_update():
    """Point at --update when a run is refused because the input has other dates."""
    from .runs import RunMismatch

    try:
        yield
    except RunMismatch as exc:
        if "input." in str(exc) or "command" in str(exc):
            raise RunMismatch(f"{exc}; to monitor only the new dates of a growing input, keep a monitoring state "
                              "with --update") from None
        raise


def _monitor_update(input_path, output: Path, start: str, start_value, history_value, bfast: "BfastInput",
                    stac: "StacInput", process: bool, engine: str, workers, scheduler, memory, progress: bool,
                    overwrite: bool) -> None:
    """``monitor --update``: fit a monitoring state into OUTPUT, or update it with the new
    dates. An update of a folder whose file names hold the dates opens only the new files."""
    from .bfast import BfastStatus
    from .bfast._nrt_xarray import holds_state, run_nrt
    from .io import folder_dates
    from .runs import input_identity

    if output.suffix.lower() != ".zarr":
        raise ValueError(f"--update keeps a monitoring state, which needs a .zarr output (got {output.name})")
    if process:
        raise ValueError("--process is not available with --update")

    def open_input(times=None):
        return _open_input(input_path, bfast.dates, bfast.date_pattern, bfast.variable, memory, stac, times=times)

    _check_input_options(input_path, bfast.dates, bfast.date_pattern, bfast.variable, stac)
    da, dates = None, None
    if not overwrite and bfast.dates is None and holds_state(output):
        dates = folder_dates(input_path, bfast.date_pattern)  # None but for a folder of dated file names
    if dates is None:
        da = open_input()
        _echo_input(input_path, da)
    else:
        typer.echo(f"{_input_name(input_path)}: {len(dates)} dates ({str(dates[0])[:10]} to {str(dates[-1])[:10]}, "
                   "from the file names)")
    model = dict(history=history_value, **bfast.model())
    params = dict(start=start, history=bfast.history, **bfast.model(), engine=engine, variable=bfast.variable,
                  date_pattern=bfast.date_pattern)
    if da is not None and "stac_index" in da.attrs:
        params.update(stac.params())
    with dask_client(workers, scheduler) as client:
        summary = run_nrt(dict(model, start=start_value, memory=memory, engine=engine), da, output, params=params,
                          input_id=None if da is None else input_identity(input_path, da), overwrite=overwrite,
                          progress=progress, client=client, echo=typer.echo, open_dates=open_input,
                          input_dates=None if dates is None else np.asarray(dates))
    if summary is None:
        return
    for line in summary.lines():
        typer.echo(line)
    _report_status(summary.status_counts, "Check --nodata, the input's nodata value and --start.")
    import xarray as xr

    from .runs import _quiet_zarr

    with _quiet_zarr(), xr.open_zarr(output, consolidated=False) as ds:
        alerts = int(np.count_nonzero(ds["alert"].values))
    typer.echo(f"alerts (first break among the new dates): {alerts:,}")
    typer.echo(f"written {output}")


@app.command("breaks")
@with_stac_input
def breaks_command(
    input_path: InputCube,
    output: Annotated[Path, typer.Option("-o", "--output", help=(
        "Result file: .tif (a band per output, break and statistic), .nc or .zarr."))],
    dates: DatesFile = None,
    date_pattern: DatePattern = None,
    variable: Variable = None,
    stac: StacInput = None,
    freq: Freq = None,
    order: Order = 3,
    no_trend: NoTrend = False,
    season: Season = False,
    h: Annotated[float, typer.Option("--h", help="Minimum segment size: a fraction of the observations, or a number of them.")] = 0.15,
    breaks: Annotated[str, typer.Option(help="Number of breaks: LWZ, BIC, RSS, all, or a number.")] = "LWZ",
    max_breaks: Annotated[Optional[int], typer.Option(help="Consider at most this many breaks.")] = None,
    level: Annotated[float, typer.Option(help="OLS-MOSUM pre-test level (0: no pre-test).")] = 0.0,
    criteria: Annotated[bool, typer.Option("--criteria", help="Also write RSS, BIC and LWZ per number of breaks.")] = False,
    nodata: Nodata = None,
    engine: Annotated[str, typer.Option(help="auto, reference or cpu.")] = "auto",
    workers: Workers = None,
    scheduler: Scheduler = None,
    memory: Memory = None,
    progress: Progress = True,
    overwrite: Overwrite = False,
) -> None:
    """BFAST Lite: every break of every pixel (R bfastlite), with times, magnitudes and segment trends.

    Resumable, as monitor.
    """
    from .bfast import BfastLiteStatus
    from .xr import bfast_lite_xarray

    with _clean_errors():
        _check_output(output)
        breaks_value = int(breaks) if re.fullmatch(r"-?\d+", breaks.strip()) else breaks.strip()
        da = _open_input(input_path, dates, date_pattern, variable, memory, stac)
        _echo_input(input_path, da)
        template = bfast_lite_xarray(
            da, freq=freq, order=order, trend=not no_trend, season=season, h=h, breaks=breaks_value,
            max_breaks=max_breaks, level=level, magnitude_interval=0.1, criteria=criteria, nodata=nodata,
            engine=engine, memory=memory)
        typer.echo(f"BFAST Lite ({template.attrs['engine']} engine), up to {template.sizes['break']} breaks per pixel")
        params = dict(freq=freq, order=order, trend=not no_trend, season=season, h=h, breaks=breaks, max_breaks=max_breaks,
                      level=level, criteria=criteria, nodata=nodata, engine=engine, variable=variable,
                      date_pattern=date_pattern)
        if "stac_index" in da.attrs:
            params.update(stac.params())
        with dask_client(workers, scheduler) as client:
            _run_resumable(template, output, command="breaks", params=params, input_path=input_path, da=da,
                           status_enum=BfastLiteStatus, overwrite=overwrite, progress=progress, client=client,
                           empty_reason="Check --nodata, the input's nodata value and --h.")


@app.command("stl")
@with_stac_input
def stl_command(
    input_path: InputCube,
    period: Annotated[int, typer.Option(help="Length of the seasonal cycle in time steps (23 for 16-day data).")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Result file: .tif (per-pixel maps), .nc or .zarr.")],
    dates: DatesFile = None,
    date_pattern: DatePattern = None,
    variable: Variable = None,
    stac: StacInput = None,
    seasonal: Annotated[str, typer.Option(help="Seasonal smoother window (odd integer) or 'periodic'.")] = "7",
    robust: Annotated[bool, typer.Option("--robust", help="Robust fit (downweights outliers).")] = False,
    flavor: Annotated[str, typer.Option(help="statsmodels or stlplus.")] = "statsmodels",
    components: Annotated[bool, typer.Option("--components", help="Also write seasonal/trend/remainder/weights series (.nc/.zarr).")] = False,
    nodata: Nodata = None,
    engine: Annotated[str, typer.Option(help="auto, reference or cpu.")] = "auto",
    workers: Workers = None,
    scheduler: Scheduler = None,
    memory: Memory = None,
    progress: Progress = True,
    overwrite: Overwrite = False,
) -> None:
    """STL decomposition: trend slope and seasonal amplitude maps (and components). Resumable, as monitor."""
    from .stl import StlStatus
    from .xr import stl_xarray

    with _clean_errors():
        _check_output(output)
        seasonal_value = seasonal if seasonal == "periodic" else _as_int(seasonal, "seasonal")
        da = _open_input(input_path, dates, date_pattern, variable, memory, stac)
        typer.echo(f"{_input_name(input_path)}: {da.sizes['time']} dates, {da.size // da.sizes['time']} pixels")
        template = stl_xarray(da, period, seasonal=seasonal_value, robust=robust, flavor=flavor,
                              components=components, nodata=nodata, engine=engine, memory=memory)
        params = dict(period=period, seasonal=seasonal, robust=robust, flavor=flavor, components=components,
                      nodata=nodata, engine=engine, variable=variable, date_pattern=date_pattern)
        if "stac_index" in da.attrs:
            params.update(stac.params())
        with dask_client(workers, scheduler) as client:
            _run_resumable(template, output, command="stl", params=params, input_path=input_path, da=da,
                           status_enum=StlStatus, overwrite=overwrite, progress=progress, client=client,
                           empty_reason="Check --nodata and the input's nodata value.")


@app.command("plot")
def plot_command(
    result_path: Path = typer.Argument(..., metavar="RESULT", help="Result of monitor, breaks or stl: .tif, .nc or .zarr."),
    output: Path = typer.Option(..., "-o", "--output", help="PNG (or .pdf/.svg) to write."),
    start_index: int = typer.Option(0, "--start-index", help="Which start of a multi-start result to map."),
    width: Width = 1100,
    height: Height = 450,
    dpi: Dpi = 100,
    title: Optional[str] = typer.Option(None, help="Title prefix of the maps (default: the result's file name)."),
) -> None:
    """Quick-look maps of a result: break year + magnitude (monitor), number, year and magnitude of
    breaks (breaks), trend slope + seasonal amplitude (stl)."""
    from .plot import read_result, result_maps

    with _clean_errors():
        _check_figure_output(output, width, height, dpi)
        ds = read_result(result_path)
        fig = result_maps(ds, title=title or result_path.name, start_index=start_index,
                          figsize=(width / dpi, height / dpi))
        _save_figure(fig, output, dpi)
        typer.echo(f"written {output} ({width} x {height} pixels)")


@app.command("plot-pixel")
@with_bfast_input
@with_stac_input
def plot_pixel_command(
    input_path: InputCube,
    x: Annotated[float, typer.Option("--x", help="Column index, or map x coordinate (see --coords).")],
    y: Annotated[float, typer.Option("--y", help="Row index, or map y coordinate (see --coords).")],
    start: Start,
    output: Annotated[Path, typer.Option("-o", "--output", help="PNG (or .pdf/.svg) to write.")] = Path("pixel.png"),
    coords: Annotated[str, typer.Option(help="How to read --x/--y: pixel (indices), map (coordinates) or auto "
                                             "(indices when both are integers inside the grid).")] = "auto",
    bfast: BfastInput = None,
    stac: StacInput = None,
    width: Width = 1000,
    height: Height = 650,
    dpi: Dpi = 100,
) -> None:
    """One pixel's series, fitted season-trend model, monitoring start, break and MOSUM process."""
    from .plot import locate_pixel, plot_pixel

    with _clean_errors():
        _check_figure_output(output, width, height, dpi)
        start_value = _parse_when(start, "start")
        history_value = _parse_history(bfast.history)
        da = _open_input(input_path, bfast.dates, bfast.date_pattern, bfast.variable, None, stac)
        row, col, how = locate_pixel(da, x, y, coords)
        fig = plot_pixel(da, start=start_value, x=x, y=y, coords=coords, history=history_value, **bfast.model(),
                         figsize=(width / dpi, height / dpi))
        result = fig.tscube_result
        where = f"row {row}, col {col}" + (f" (map x={x:.10g}, y={y:.10g})" if how == "map" else "")
        status = result.status_counts()
        found = f"break at {float(result.break_time[0]):.3f}" if result.has_break[0] else "no break"
        typer.echo(f"pixel {where}: status {next(iter(status))}, {found}, magnitude {float(result.magnitude[0]):.4g}")
        _save_figure(fig, output, dpi)
        typer.echo(f"written {output}")


def _check_figure_output(output: Path, width: int, height: int, dpi: int) -> None:
    if output.suffix.lower() not in (".png", ".pdf", ".svg", ".jpg", ".jpeg"):
        raise ValueError(f"output {output.name}: unsupported suffix {output.suffix!r} (use .png, .pdf or .svg)")
    if not output.parent.exists():
        raise FileNotFoundError(f"output folder {str(output.parent)!r} does not exist")
    if width < 100 or height < 100 or dpi < 10:
        raise ValueError(f"image too small: --width and --height must be at least 100 pixels, --dpi at least 10 "
                         f"(got {width} x {height} at {dpi} dpi)")


def _save_figure(fig, output: Path, dpi: int) -> None:
    """Save ``fig`` atomically (temporary name, then rename) and release it."""
    import matplotlib.pyplot as plt

    tmp = output.with_name(f".{output.stem}.tmp-{os.getpid()}{output.suffix}")
    try:
        fig.savefig(tmp, dpi=dpi)
        os.replace(tmp, output)
    finally:
        plt.close(fig)
        if tmp.exists():
            tmp.unlink()


def _as_int(text: str, name: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"--{name} must be an integer or 'periodic', got {text!r}") from None


def _human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # pragma: no cover


@app.command()
@with_stac_input
def info(
    input_path: InputCube,
    dates: DatesFile = None,
    date_pattern: DatePattern = None,
    variable: Variable = None,
    stac: StacInput = None,
    memory: Memory = None,
) -> None:
    """Describe an input cube: dates, shape, missing fraction, CRS, size, chunks (STAC: items, masked fraction)."""
    import dask
    import pandas as pd

    from .io import is_stac_source

    with _clean_errors():
        from_stac = is_stac_source(input_path)
        opened = _open_input(input_path, dates, date_pattern, variable, memory, stac, describe=from_stac)
        da = opened["cube"] if from_stac else opened
        times = pd.DatetimeIndex(da.time.values) if np.issubdtype(da.time.dtype, np.datetime64) else None
        typer.echo(f"input:    {input_path}")
        if from_stac:
            typer.echo(f"items:    {opened['items']} STAC items, {da.attrs['stac_index']} masked by {opened['mask']}, "
                       f"merged per {da.attrs['stac_groupby']} ({da.attrs['stac_merge']})")
        if times is not None:
            step = np.median(np.diff(times.values).astype("timedelta64[s]").astype(float)) / 86400 if len(times) > 1 else float("nan")
            typer.echo(f"dates:    {len(times)}, {times[0].date()} to {times[-1].date()} (median step {step:g} days)")
        else:
            typer.echo(f"dates:    {da.sizes['time']}, {float(da.time[0])} to {float(da.time[-1])} (decimal years)")
        typer.echo(f"shape:    {' x '.join(f'{d} {n}' for d, n in da.sizes.items())}")
        typer.echo(f"dtype:    {da.dtype}")
        if from_stac:
            typer.echo(f"size:     {_human_bytes(da.nbytes)} in memory")
        else:
            path = Path(input_path)
            on_disk = (sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir()
                       else path.stat().st_size)
            typer.echo(f"size:     {_human_bytes(da.nbytes)} in memory, {_human_bytes(on_disk)} on disk")
        if da.chunks is not None:
            typer.echo(f"chunks:   {' x '.join(str(max(c)) for c in da.chunks)} ({int(np.prod([len(c) for c in da.chunks]))} chunks)")
        crs, transform = None, None
        try:
            crs, transform = da.rio.crs, da.rio.transform()
        except Exception:  # noqa: BLE001 - not a georeferenced grid
            pass
        typer.echo(f"crs:      {crs.to_string() if crs is not None else 'none'}")
        if transform is not None and crs is not None:
            typer.echo(f"pixel:    {abs(transform.a):g} x {abs(transform.e):g}, origin ({transform.c:g}, {transform.f:g})")
        missing, masked = dask.compute(da.isnull().mean(), opened["masked_fraction"] if from_stac else None)
        missing = float(missing)
        if from_stac:
            typer.echo(f"masked:   {float(masked):.1%} of the items' pixels with data (mask {opened['mask']})")
        typer.echo(f"missing:  {missing:.1%}")
        if missing == 1.0:
            _warn("every value is missing (nodata everywhere): analyses of this input produce no result")


@app.command()
def cluster(
    input_path: Path = typer.Argument(..., metavar="INPUT", help="GeoTIFF (bands = features), .nc or .zarr (variables = features)."),
    k: int = typer.Option(..., "-k", help="Number of clusters."),
    output: Path = typer.Option(..., "-o", "--output", help="Label GeoTIFF to write."),
    method: str = typer.Option("gmm", help="gmm or kmeans."),
    covariance_type: str = typer.Option("full", help="GMM covariance: full, tied, diag or spherical."),
    variables: Optional[list[str]] = typer.Option(None, "--variable", help="NetCDF/Zarr variable to use (repeat for several)."),
    standardize: bool = typer.Option(False, "--standardize", help="Scale features to zero mean and unit variance."),
    max_iter: int = typer.Option(100, help="Maximum EM / Lloyd iterations."),
    seed: int = typer.Option(0, help="Random seed."),
    engine: str = typer.Option("auto", help="auto, reference, cpu or cuda."),
) -> None:
    """Cluster the pixels of a raster by their features (e.g. a tscube result) into a label map."""
    from .cluster._cli import run_cluster

    with _clean_errors():
        if not input_path.exists():
            raise FileNotFoundError(f"input {str(input_path)!r} does not exist")
        began = time.perf_counter()
        estimator = run_cluster(input_path, k, output, method=method, covariance_type=covariance_type, engine=engine,
                                max_iter=max_iter, random_state=seed, variables=variables or None,
                                standardize=standardize)
        typer.echo(f"{method} with {k} clusters: {time.perf_counter() - began:.2f} s, "
                   f"converged={getattr(estimator, 'converged_', 'n/a')}")
        typer.echo(f"written {output}")


if __name__ == "__main__":  # pragma: no cover
    app()
