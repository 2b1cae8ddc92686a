"""``tscube warmup``: compile the kernels into numba's cache before the first real run."""

from __future__ import annotations

import os
import time

import typer

from .app import app, clean_errors


@app.command()
def warmup(
    algorithm: list[str] = typer.Option(
        None, "--algorithm", "-a",
        help="monitor, lite, classic, stl, cluster or nrt (repeat the option for several; default: all)."),
    dtype: list[str] = typer.Option(
        None, "--dtype", help="Data types of the cubes to come (repeat; default: float32 and float64). "
                              "Integer cubes, e.g. int16, compile the kernels that read them once more."),
    jobs: int = typer.Option(0, help="Worker processes compiling at once (0: one per core)."),
) -> None:
    """Compile every kernel of the chosen algorithms into numba's on-disk cache (for container
    images, HPC modules, dask workers: docs/production.md). Already cached kernels are only
    loaded; the cache is NUMBA_CACHE_DIR when set."""
    from ..warmup import DTYPES
    from ..warmup import warmup as run_warmup

    began = time.perf_counter()
    with clean_errors():
        records = run_warmup(algorithm or None, dtypes=dtype or DTYPES, jobs=jobs or None,
                             echo=lambda line: typer.echo(f"  {line}"))
    compiled = sum(record.compiled for record in records)
    where = os.environ.get("NUMBA_CACHE_DIR") or "numba's default cache folder"
    typer.echo(f"warmup: {compiled} kernels compiled, {len(records)} jobs, {time.perf_counter() - began:.1f} s "
               f"(cache: {where})")
