"""What the commands over files share: opening the input (files, folders, STAC catalogs),
the dask client of ``--workers``/``--scheduler``, and running a result chunk by chunk
into its output (resumable) with the summary printed."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import typer

from .app import one_line, warn
from .options import STAC_INPUT_OPTIONS, StacInput

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
            raise OSError(f"cannot reach the dask scheduler at {scheduler!r} ({one_line(exc)})") from None
    try:
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def open_input(source, dates_file, date_pattern, variable, memory, stac: "StacInput | None" = None,
                describe: bool = False, times=None):
    """The cube of INPUT: a file or folder (open_cube), or a STAC catalog path or URL
    (open_stac with the ``stac`` options; ``describe``: describe_stac's dict, for ``info``);
    ``times``: positions of the only dates to read (a folder reads only those files)."""
    from ..io import is_stac_source, open_cube, open_stac
    from ..stac import describe_stac

    source = str(source)
    stac = check_input_options(source, dates_file, date_pattern, variable, stac)
    if is_stac_source(source):
        cube = (describe_stac if describe else open_stac)(source, memory=memory, **stac.options())
        return cube if times is None else cube.isel(time=times)
    return open_cube(Path(source), dates=dates_file, date_pattern=date_pattern, variable=variable, memory=memory,
                     times=times)


def check_input_options(source, dates_file, date_pattern, variable, stac: "StacInput | None") -> "StacInput":
    """Refuse the options that are not for this kind of INPUT (STAC catalog or not);
    returns the STAC options (all unset for None)."""
    from ..io import is_stac_source

    stac = stac or StacInput(*(None,) * len(STAC_INPUT_OPTIONS))
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


def input_name(source) -> str:
    """A short name of INPUT for messages: the file name, or the last part of a URL."""
    return str(source).rstrip("/").rsplit("/", 1)[-1] or str(source)


def echo_input(input_path, da) -> None:
    """One line on the opened cube: its name, dates (first to last) and pixels."""
    typer.echo(f"{input_name(input_path)}: {da.sizes['time']} dates ({str(da.time.values[0])[:10]} to "
               f"{str(da.time.values[-1])[:10]}), {da.size // da.sizes['time']} pixels")


def report_status(by_name: dict[str, int], empty_reason: str) -> None:
    """Warn loudly when no pixel produced a result (``by_name``: pixels per status name)."""
    total = int(sum(by_name.values()))
    if total and by_name.get("ALL_MISSING", 0) == total:
        warn(f"all {total} pixels are missing (nodata everywhere): the output holds no result. {empty_reason}")
    elif total and by_name.get("OK", 0) == 0:
        warn(f"no pixel produced a result (status counts {by_name}): the output holds no result. {empty_reason}")


def run_resumable(template, output: Path, *, command: str, params: dict, input_path: str, da, status_enum,
                   overwrite: bool, progress: bool, client, empty_reason: str):
    """Compute ``template`` chunk by chunk into ``output`` (resumable), print the run summary."""
    from ..runs import input_identity, run_chunked

    summary = run_chunked(template, output, command=command, params=params, input_id=input_identity(input_path, da),
                          status_enum=status_enum, overwrite=overwrite, progress=progress, client=client,
                          echo=typer.echo)
    for line in summary.lines():
        typer.echo(line)
    report_status(summary.status_counts, empty_reason)
    if not summary.up_to_date:
        typer.echo(f"written {output}")
    return summary


def check_output(output: Path, input_path, suffixes=None, kinds: str = ".tif, .nc or .zarr") -> None:
    """Refuse, before any work, an output of another kind than ``suffixes`` (default: the
    result files), in a folder that does not exist, or that is the input or inside it
    (:func:`tscube.runs.check_apart_from_inputs`)."""
    from ..io import GEOTIFF_SUFFIXES, NETCDF_SUFFIXES, ZARR_SUFFIXES
    from ..runs import check_apart_from_inputs

    suffixes = suffixes or GEOTIFF_SUFFIXES + NETCDF_SUFFIXES + ZARR_SUFFIXES
    if output.suffix.lower() not in suffixes:
        raise ValueError(f"output {output.name}: unsupported suffix {output.suffix!r} (use {kinds})")
    if not output.parent.exists():
        raise FileNotFoundError(f"output folder {str(output.parent)!r} does not exist")
    check_apart_from_inputs(output, input_path)
