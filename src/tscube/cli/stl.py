"""``tscube stl``: STL decomposition of a cube."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..io import GEOTIFF_SUFFIXES
from .app import app, clean_errors
from .options import (DatePattern, DatesFile, InputCube, Memory, Nodata, Overwrite, Progress, Scheduler, Variable,
                      Workers, StacInput, as_int, with_stac_input)
from .running import check_output, dask_client, input_name, open_input, run_resumable

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
    from ..stl import StlStatus
    from ..xr import stl_xarray

    with clean_errors():
        check_output(output, input_path)
        if components and output.suffix.lower() in GEOTIFF_SUFFIXES:
            raise ValueError("--components writes series over time, which a GeoTIFF of maps cannot hold: write .nc "
                             "or .zarr")
        seasonal_value = seasonal if seasonal == "periodic" else as_int(seasonal, "seasonal")
        da = open_input(input_path, dates, date_pattern, variable, memory, stac)
        typer.echo(f"{input_name(input_path)}: {da.sizes['time']} dates, {da.size // da.sizes['time']} pixels")
        template = stl_xarray(da, period, seasonal=seasonal_value, robust=robust, flavor=flavor,
                              components=components, nodata=nodata, engine=engine, memory=memory)
        params = dict(period=period, seasonal=seasonal, robust=robust, flavor=flavor, components=components,
                      nodata=nodata, engine=engine, variable=variable, date_pattern=date_pattern)
        if "stac_index" in da.attrs:
            params.update(stac.params())
        with dask_client(workers, scheduler) as client:
            run_resumable(template, output, command="stl", params=params, input_path=input_path, da=da,
                           status_enum=StlStatus, overwrite=overwrite, progress=progress, client=client,
                           empty_reason="Check --nodata and the input's nodata value.")
