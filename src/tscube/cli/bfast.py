"""``tscube monitor`` (BFAST Monitor, and its near-real-time ``--update``), ``tscube
breaks`` (BFAST Lite) and ``tscube bfast`` (classic BFAST)."""

from __future__ import annotations

import re
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Optional

import numpy as np
import typer

from ..io import GEOTIFF_SUFFIXES
from .app import app, clean_errors
from .options import (DatePattern, DatesFile, Freq, InputCube, Memory, Nodata, NoTrend, Order, Overwrite, Progress,
                      Scheduler, Season, Start, Variable, Workers, BfastInput, StacInput, parse_history, parse_when,
                      with_bfast_input, with_stac_input)
from .running import (check_input_options, check_output, dask_client, echo_input, input_name, open_input,
                      report_status, run_resumable)

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
    from ..bfast import BfastStatus
    from ..xr import bfast_monitor_xarray

    with clean_errors():
        check_output(output, input_path)
        if process and output.suffix.lower() in GEOTIFF_SUFFIXES:
            raise ValueError("--process writes the monitoring process over time, which a GeoTIFF of maps cannot "
                             "hold: write .nc or .zarr")
        start_value = parse_when(start, "start")
        history_value = parse_history(bfast.history)
        if update:
            _monitor_update(input_path, output, start, start_value, history_value, bfast, stac, process, engine,
                            workers, scheduler, memory, progress, overwrite)
            return
        da = open_input(input_path, bfast.dates, bfast.date_pattern, bfast.variable, memory, stac)
        echo_input(input_path, da)
        template = bfast_monitor_xarray(
            da, start_value, history=history_value, **bfast.model(), return_process=process, engine=engine,
            memory=memory)
        typer.echo(f"BFAST Monitor ({template.attrs['engine']} engine)")
        params = dict(start=start, history=bfast.history, **bfast.model(), process=process, engine=engine,
                      variable=bfast.variable, date_pattern=bfast.date_pattern)
        if "stac_index" in da.attrs:
            params.update(stac.params())
        with dask_client(workers, scheduler) as client, _suggest_update():
            run_resumable(template, output, command="monitor", params=params, input_path=input_path, da=da,
                           status_enum=BfastStatus, overwrite=overwrite, progress=progress, client=client,
                           empty_reason="Check --nodata, the input's nodata value and --start.")


@contextmanager
def _suggest_update():
    """Point at --update when a run is refused because the input has other dates."""
    from ..runs import RunMismatch

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
    from ..bfast.nrt import holds_state, run_nrt
    from ..io import folder_dates
    from ..runs import input_identity

    if output.suffix.lower() != ".zarr":
        raise ValueError(f"--update keeps a monitoring state, which needs a .zarr output (got {output.name})")
    if process:
        raise ValueError("--process is not available with --update")

    def open_dates(times=None):
        return open_input(input_path, bfast.dates, bfast.date_pattern, bfast.variable, memory, stac, times=times)

    check_input_options(input_path, bfast.dates, bfast.date_pattern, bfast.variable, stac)
    da, dates = None, None
    if not overwrite and bfast.dates is None and holds_state(output):
        dates = folder_dates(input_path, bfast.date_pattern)  # None but for a folder of dated file names
    if dates is None:
        da = open_dates()
        echo_input(input_path, da)
    else:
        typer.echo(f"{input_name(input_path)}: {len(dates)} dates ({str(dates[0])[:10]} to {str(dates[-1])[:10]}, "
                   "from the file names)")
    model = dict(history=history_value, **bfast.model())
    params = dict(start=start, history=bfast.history, **bfast.model(), engine=engine, variable=bfast.variable,
                  date_pattern=bfast.date_pattern)
    if da is not None and "stac_index" in da.attrs:
        params.update(stac.params())
    with dask_client(workers, scheduler) as client:
        summary = run_nrt(dict(model, start=start_value, memory=memory, engine=engine), da, output, params=params,
                          input_id=None if da is None else input_identity(input_path, da), overwrite=overwrite,
                          progress=progress, client=client, echo=typer.echo, open_dates=open_dates,
                          input_dates=None if dates is None else np.asarray(dates))
    if summary is None:
        return
    for line in summary.lines():
        typer.echo(line)
    report_status(summary.status_counts, "Check --nodata, the input's nodata value and --start.")
    import xarray as xr

    from ..runs import quiet_zarr

    with quiet_zarr(), xr.open_zarr(output, consolidated=False) as ds:
        alerts = int(np.count_nonzero(ds["alert"].values))
        calibrated = bool(ds.attrs.get("calibrate")) and "critval" in ds
        if calibrated:
            critval, r_critval, end = float(np.nanmedian(ds["critval"].values)), ds.attrs["critval"], ds.attrs["end"]
    typer.echo(f"alerts (first break among the new dates): {alerts:,}")
    if calibrated:  # (the horizon decides the boundary: a user should see which one it is)
        typer.echo(f"calibrated critical values for monitoring until end = {end:g} history periods: median "
                   f"{critval:.2f} (R's {r_critval:.2f}); --end sets the horizon")
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
    from ..bfast import BfastLiteStatus
    from ..xr import bfast_lite_xarray

    with clean_errors():
        check_output(output, input_path)
        breaks_value = int(breaks) if re.fullmatch(r"-?\d+", breaks.strip()) else breaks.strip()
        da = open_input(input_path, dates, date_pattern, variable, memory, stac)
        echo_input(input_path, da)
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
            run_resumable(template, output, command="breaks", params=params, input_path=input_path, da=da,
                           status_enum=BfastLiteStatus, overwrite=overwrite, progress=progress, client=client,
                           empty_reason="Check --nodata, the input's nodata value and --h.")


@app.command("bfast")
@with_stac_input
def bfast_command(
    input_path: InputCube,
    output: Annotated[Path, typer.Option("-o", "--output", help=(
        "Result file: .tif (a band per per-pixel output and per break: maps only, without the trend, seasonal and "
        "remainder series), .nc or .zarr (the maps and the three components over time)."))],
    dates: DatesFile = None,
    date_pattern: DatePattern = None,
    variable: Variable = None,
    stac: StacInput = None,
    freq: Freq = None,
    h: Annotated[float, typer.Option("--h", help=(
        "Minimal segment size, a fraction of the valid observations in (0, 0.5); also the pre-test's "
        "bandwidth."))] = 0.15,
    season: Annotated[str, typer.Option("--season", help=(
        "Seasonal model: dummy (seasonal dummies), harmonic (three harmonics) or none."))] = "dummy",
    max_iter: Annotated[int, typer.Option("--max-iter", help="Most iterations per pixel.")] = 10,
    breaks: Annotated[str, typer.Option(help="Breaks per component: BIC (chosen by BIC) or a number.")] = "BIC",
    level: Annotated[float, typer.Option(help=(
        "Significance level of each component's pre-test: no breaks are searched where it is not "
        "significant."))] = 0.05,
    process_type: Annotated[str, typer.Option("--type", help=(
        "Pre-test process: OLS-MOSUM (default, as R) or OLS-CUSUM."))] = "OLS-MOSUM",
    nodata: Nodata = None,
    engine: Annotated[str, typer.Option(help="auto, reference or cpu.")] = "auto",
    workers: Workers = None,
    scheduler: Scheduler = None,
    memory: Memory = None,
    progress: Progress = True,
    overwrite: Overwrite = False,
) -> None:
    """Classic BFAST (R bfast): iterative trend and seasonal breaks of every pixel, with times, confidence
    intervals, magnitudes and the trend, seasonal and remainder components.

    The dates must be a regular series of --freq per year (R's ts): missing dates as nodata. Resumable, as monitor.
    """
    from ..bfast import BfastClassicStatus
    from ..xr import bfast_classic_xarray

    with clean_errors():
        check_output(output, input_path)
        breaks_value = int(breaks) if re.fullmatch(r"-?\d+", breaks.strip()) else breaks.strip()
        da = open_input(input_path, dates, date_pattern, variable, memory, stac)
        echo_input(input_path, da)
        template = bfast_classic_xarray(
            da, freq=freq, h=h, season=season, max_iter=max_iter, breaks=breaks_value, level=level, type=process_type,
            nodata=nodata, engine=engine, memory=memory)
        if output.suffix.lower() in GEOTIFF_SUFFIXES:  # a GeoTIFF holds maps: the series are not computed into it
            template = template.drop_dims("time")
        typer.echo(f"classic BFAST ({template.attrs['engine']} engine), up to {template.sizes['break']} breaks per "
                   "component and pixel")
        params = dict(freq=freq, h=h, season=season, max_iter=max_iter, breaks=breaks, level=level, type=process_type,
                      nodata=nodata, engine=engine, variable=variable, date_pattern=date_pattern)
        if "stac_index" in da.attrs:
            params.update(stac.params())
        with dask_client(workers, scheduler) as client:
            run_resumable(template, output, command="bfast", params=params, input_path=input_path, da=da,
                           status_enum=BfastClassicStatus, overwrite=overwrite, progress=progress, client=client,
                           empty_reason="Check --nodata, the input's nodata value, --freq and --h.")
