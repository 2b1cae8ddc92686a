"""``tscube plot`` (quick-look maps of a result) and ``tscube plot-pixel`` (one pixel's
BFAST Monitor)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Optional

import typer

from .app import app, clean_errors
from .options import (BfastInput, Dpi, Height, InputCube, StacInput, Start, Width, parse_history, parse_when,
                      with_bfast_input, with_stac_input)
from .running import check_output, open_input

@app.command("plot")
def plot_command(
    result_path: Path = typer.Argument(..., metavar="RESULT", help=(
        "Result of monitor, breaks, bfast or stl: .tif, .nc or .zarr.")),
    output: Path = typer.Option(..., "-o", "--output", help="PNG (or .pdf/.svg) to write."),
    start_index: int = typer.Option(0, "--start-index", help="Which start of a multi-start result to map."),
    width: Width = 1100,
    height: Height = 450,
    dpi: Dpi = 100,
    title: Optional[str] = typer.Option(None, help="Title prefix of the maps (default: the result's file name)."),
) -> None:
    """Quick-look maps of a result: break year + magnitude (monitor), number, year and magnitude of
    breaks (breaks), trend and seasonal breaks + status (bfast), trend slope + seasonal amplitude (stl)."""
    from ..plot import read_result, result_maps

    with clean_errors():
        check_figure_output(output, width, height, dpi, result_path)
        ds = read_result(result_path)
        fig = result_maps(ds, title=title or result_path.name, start_index=start_index,
                          figsize=(width / dpi, height / dpi))
        save_figure(fig, output, dpi)
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
    from ..plot import locate_pixel, plot_pixel

    with clean_errors():
        check_figure_output(output, width, height, dpi, input_path)
        start_value = parse_when(start, "start")
        history_value = parse_history(bfast.history)
        da = open_input(input_path, bfast.dates, bfast.date_pattern, bfast.variable, None, stac)
        row, col, how = locate_pixel(da, x, y, coords)
        fig = plot_pixel(da, start=start_value, x=x, y=y, coords=coords, history=history_value, **bfast.model(),
                         figsize=(width / dpi, height / dpi))
        result = fig.tscube_result
        where = f"row {row}, col {col}" + (f" (map x={x:.10g}, y={y:.10g})" if how == "map" else "")
        status = result.status_counts()
        found = f"break at {float(result.break_time[0]):.3f}" if result.has_break[0] else "no break"
        typer.echo(f"pixel {where}: status {next(iter(status))}, {found}, magnitude {float(result.magnitude[0]):.4g}")
        save_figure(fig, output, dpi)
        typer.echo(f"written {output}")


#: What a figure can be written as.
FIGURE_SUFFIXES = (".png", ".pdf", ".svg", ".jpg", ".jpeg")


def check_figure_output(output: Path, width: int, height: int, dpi: int, input_path=None) -> None:
    check_output(output, input_path, FIGURE_SUFFIXES, ".png, .pdf or .svg")
    if width < 100 or height < 100 or dpi < 10:
        raise ValueError(f"image too small: --width and --height must be at least 100 pixels, --dpi at least 10 "
                         f"(got {width} x {height} at {dpi} dpi)")


def save_figure(fig, output: Path, dpi: int) -> None:
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
