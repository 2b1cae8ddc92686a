"""``tscube demo``: BFAST Monitor on a generated cube, scored against its planted breaks."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import typer

from .app import app

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
    from ..bfast import bfast_monitor
    from ..datasets import make_cube
    from ..plot import break_maps

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
