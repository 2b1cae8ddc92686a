"""``tscube info``: describe an input cube."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import typer

from .app import app, clean_errors, warn
from .options import DatePattern, DatesFile, InputCube, Memory, StacInput, Variable, with_stac_input
from .running import open_input

def human_bytes(n: float) -> str:
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

    from ..io import is_stac_source

    with clean_errors():
        from_stac = is_stac_source(input_path)
        opened = open_input(input_path, dates, date_pattern, variable, memory, stac, describe=from_stac)
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
            typer.echo(f"size:     {human_bytes(da.nbytes)} in memory")
        else:
            path = Path(input_path)
            on_disk = (sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir()
                       else path.stat().st_size)
            typer.echo(f"size:     {human_bytes(da.nbytes)} in memory, {human_bytes(on_disk)} on disk")
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
            warn("every value is missing (nodata everywhere): analyses of this input produce no result")
