"""``tscube demo``: BFAST Monitor on a generated cube, scored against its planted breaks."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import typer

from .app import app

def detection_scores(detected: np.ndarray, planted: np.ndarray) -> dict[str, float]:
    """Pixel-level precision and recall of detected breaks against planted ones, and the
    share of the stable (unplanted) pixels flagged (false alarms)."""
    true_positive = int(np.count_nonzero(detected & planted))
    n_detected, n_planted = int(np.count_nonzero(detected)), int(np.count_nonzero(planted))
    n_stable = int(np.count_nonzero(~planted))
    return dict(
        detected=n_detected,
        planted=n_planted,
        precision=true_positive / n_detected if n_detected else float("nan"),
        recall=true_positive / n_planted if n_planted else float("nan"),
        stable=n_stable,
        stable_flagged=int(np.count_nonzero(detected & ~planted)) / n_stable if n_stable else float("nan"),
    )


def _scores_line(name: str, scores: dict, level: float) -> str:
    """One line of detections and false alarms; the false alarms with the band of 3 binomial
    standard errors that a boundary of true ``level`` falls in."""
    band = 3 * np.sqrt(level * (1 - level) / max(scores["stable"], 1))
    return (f"{name}: {scores['detected']} breaks for {scores['planted']} planted; precision "
            f"{scores['precision']:.2f}, recall {scores['recall']:.3f}; stable pixels flagged "
            f"{scores['stable_flagged']:.1%} (level {level:.0%}: {max(level - band, 0):.1%} to {level + band:.1%})")


@app.command()
def demo(
    output: Path = typer.Option(Path("tscube-demo.png"), "-o", "--output", help="Quick-look PNG to write."),
    rows: int = typer.Option(120, help="Rows of the generated cube."),
    cols: int = typer.Option(160, help="Columns of the generated cube."),
    engine: str = typer.Option("auto", help="auto, reference, cpu or cuda."),
    seed: int = typer.Option(0, help="Seed of the generated cube."),
    quick_look: str = typer.Option("calibrated", "--map", help=(
        "Which result the quick-look maps: 'calibrated' (each pixel's critical value for its own design) or 'r' "
        "(R's boundary).")),
) -> None:
    """Generate a cloudy NDVI demo cube with planted breaks, run BFAST Monitor with R's boundary
    and with calibrated critical values, score both, map one."""
    from ..bfast import bfast_monitor
    from ..datasets import make_cube
    from ..plot import break_maps

    if quick_look not in ("calibrated", "r"):
        raise typer.BadParameter(f"--map must be 'calibrated' or 'r', got {quick_look!r}")
    level = 0.05
    cube = make_cube("demo", shape=(rows, cols), seed=seed)
    n_dates = cube.data.shape[0]
    typer.echo(
        f"demo cube: {rows}x{cols} pixels x {n_dates} dates (16-day, {str(cube.dates[0])} to "
        f"{str(cube.dates[-1])}), {np.isnan(cube.data).mean():.0%} cloudy, monitoring from {cube.start}"
    )
    # One pixel first: numba compiles the kernels on the very first run (then loads them
    # from its cache), which should not count as the method's speed. Calibrated: the
    # calibration's kernel compiles, and its first cells are simulated, while another
    # process still compiles the monitoring kernel.
    began = time.perf_counter()
    bfast_monitor(cube.data[:, :1, :1], cube.dates, cube.start, freq=23, level=level, calibrate=True, engine=engine)
    warm_up = time.perf_counter() - began
    began = time.perf_counter()
    result = bfast_monitor(cube.data, cube.dates, cube.start, freq=23, level=level, engine=engine)
    elapsed = time.perf_counter() - began
    typer.echo(
        f"BFAST Monitor ({result.attrs['engine']} engine): {elapsed:.2f} s, {rows * cols / elapsed:,.0f} pixels/s "
        f"(plus {warm_up:.1f} s first-call set-up: numba compiles once, then loads from its cache)"
    )
    typer.echo(f"pixel status: {result.status_counts()}")
    typer.echo(_scores_line("R's boundary", detection_scores(result.has_break, cube.changed), level))
    began = time.perf_counter()
    calibrated = bfast_monitor(cube.data, cube.dates, cube.start, freq=23, level=level, calibrate=True, engine=engine)
    typer.echo(_scores_line("calibrated  ", detection_scores(calibrated.has_break, cube.changed), level))
    typer.echo(
        f"calibrated critical values: median {np.nanmedian(calibrated.critval):.2f} (R's {result.attrs['critval']:.2f}), "
        f"{time.perf_counter() - began:.1f} s (the first time with the one-off simulation of their table, then cached)"
    )
    shown = calibrated if quick_look == "calibrated" else result
    fig = break_maps(shown, title="demo, calibrated" if quick_look == "calibrated" else "demo, R's boundary")
    fig.savefig(output, dpi=100)
    typer.echo(f"quick-look written to {output} ({'calibrated' if quick_look == 'calibrated' else 'R'} boundary)")
